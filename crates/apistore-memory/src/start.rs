//! Where a watch starts and what it sends first, decided from the request alone:
//! kube-apiserver's `getStartWatchResourceVersion`, `areInitialEventsRequired` and
//! `isInitialEventsEndBookmarkRequired`, with its quirks when the `WatchList` gate is
//! off (v0.31.1's default). The same plan as the etcd3 store's.

/// What a watch does before following changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StartPlan {
    /// The revision the watch has seen up to.
    pub(crate) start: Start,
    /// Whether the current state is sent first, as Added events.
    pub(crate) initial_events: bool,
    /// Whether a bookmark marks the end of the initial events.
    pub(crate) end_bookmark: bool,
}

/// The starting revision of a [`StartPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// This revision (0: none, so the watch starts at revision 1 unless an initial
    /// sync replaces it).
    At(i64),
    /// The current revision of the storage, read before the watch starts.
    CurrentStorage,
}

impl StartPlan {
    pub(crate) fn new(
        rev: i64,
        send_initial_events: Option<bool>,
        allow_watch_bookmarks: bool,
        watch_list: bool,
    ) -> Self {
        let start = if rev > 0 || !watch_list || send_initial_events != Some(false) {
            Start::At(rev.max(0))
        } else {
            Start::CurrentStorage
        };
        let initial_events = (send_initial_events.is_none() && rev == 0)
            || (watch_list && send_initial_events == Some(true));
        let end_bookmark = watch_list && send_initial_events == Some(true) && allow_watch_bookmarks;
        Self {
            start,
            initial_events,
            end_bookmark,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rev: i64, sie: Option<bool>, bookmarks: bool, gate: bool) -> (Start, bool, bool) {
        let plan = StartPlan::new(rev, sie, bookmarks, gate);
        (plan.start, plan.initial_events, plan.end_bookmark)
    }

    #[test]
    fn gate_on_and_off() {
        use Start::{At, CurrentStorage};
        assert_eq!(plan(0, Some(true), true, true), (At(0), true, true));
        assert_eq!(
            plan(0, Some(false), true, true),
            (CurrentStorage, false, false)
        );
        assert_eq!(plan(1, None, true, true), (At(1), false, false));
        assert_eq!(plan(0, None, true, false), (At(0), true, false));
        assert_eq!(plan(0, Some(true), true, false), (At(0), false, false));
        assert_eq!(plan(5, Some(true), true, false), (At(5), false, false));
    }
}
