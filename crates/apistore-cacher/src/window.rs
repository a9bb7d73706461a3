//! The sliding window of recent events, with kube's capacity rules
//! (`watch_cache.go`'s cyclic buffer, `resizeCacheLocked`).
//!
//! The window starts at its lower bound. When it is full and even its oldest event is
//! younger than [`EVENT_FRESH_DURATION`], it doubles (up to the upper bound): the
//! resource changes so fast that the window would not cover the fresh period. When it
//! is full and the newest quarter already reaches back beyond that period, it halves
//! (down to the lower bound), dropping the oldest events.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::event::CacheEvent;

/// The window's default lower bound (kube's `defaultLowerBoundCapacity`).
pub const DEFAULT_LOWER_BOUND_CAPACITY: usize = 100;
/// The window's default upper bound (kube's `defaultUpperBoundCapacity`).
pub const DEFAULT_UPPER_BOUND_CAPACITY: usize = 100 * 1024;
/// How long the window tries to keep events (kube's `eventFreshDuration`).
pub const EVENT_FRESH_DURATION: Duration = Duration::from_secs(75);

/// What adding one event did to the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PushOutcome {
    /// Events fell out of the window (to make room or because it shrank).
    pub(crate) dropped: bool,
    /// The capacity before and after, when it changed.
    pub(crate) resized: Option<(usize, usize)>,
}

/// The most recent events, oldest first.
#[derive(Debug)]
pub(crate) struct EventWindow<T> {
    events: VecDeque<Arc<CacheEvent<T>>>,
    capacity: usize,
    lower_bound: usize,
    upper_bound: usize,
}

impl<T> EventWindow<T> {
    /// An empty window at its lower bound.
    pub(crate) fn new(lower_bound: usize, upper_bound: usize) -> Self {
        let lower_bound = lower_bound.max(1);
        let upper_bound = upper_bound.max(lower_bound);
        Self {
            events: VecDeque::with_capacity(lower_bound),
            capacity: lower_bound,
            lower_bound,
            upper_bound,
        }
    }

    /// A window of a fixed starting capacity with the given bounds, as the reference's
    /// tests build one.
    #[cfg(test)]
    pub(crate) fn with_capacity(capacity: usize, lower_bound: usize, upper_bound: usize) -> Self {
        let mut window = Self::new(lower_bound, upper_bound);
        window.capacity = capacity.max(1);
        window
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.events.len() >= self.capacity
    }

    /// The oldest event still held.
    pub(crate) fn oldest(&self) -> Option<&Arc<CacheEvent<T>>> {
        self.events.front()
    }

    /// Forgets every event (after a re-list: the history before it is unknown).
    pub(crate) fn clear(&mut self) {
        self.events.clear();
    }

    /// Adds the newest event, resizing first as kube does.
    pub(crate) fn push(&mut self, event: Arc<CacheEvent<T>>) -> PushOutcome {
        let mut outcome = self.resize(event.record_time);
        if self.is_full() {
            self.events.pop_front();
            outcome.dropped = true;
        }
        self.events.push_back(event);
        outcome
    }

    /// Applies kube's resize rules as of `now`; a shrink drops the oldest events.
    pub(crate) fn resize(&mut self, now: Instant) -> PushOutcome {
        let mut outcome = PushOutcome::default();
        if let Some(capacity) = self.resized_capacity(now) {
            outcome.resized = Some((self.capacity, capacity));
            if capacity < self.events.len() {
                let excess = self.events.len() - capacity;
                self.events.drain(..excess);
                outcome.dropped = true;
            }
            self.capacity = capacity;
        }
        outcome
    }

    fn resized_capacity(&self, now: Instant) -> Option<usize> {
        if !self.is_full() || self.events.is_empty() {
            return None;
        }
        let oldest = self.events.front()?.record_time;
        if now.saturating_duration_since(oldest) < EVENT_FRESH_DURATION {
            let grown = (self.capacity * 2).min(self.upper_bound);
            return (grown > self.capacity).then_some(grown);
        }
        let len = self.events.len();
        let quarter = (len - self.capacity / 4) % len;
        let recent = self.events.get(quarter)?.record_time;
        if now.saturating_duration_since(recent) > EVENT_FRESH_DURATION {
            let shrunk = (self.capacity / 2).max(self.lower_bound);
            return (shrunk < self.capacity).then_some(shrunk);
        }
        None
    }

    /// Drops the events up to `resource_version`.
    pub(crate) fn forget_through(&mut self, resource_version: u64) {
        let first = self
            .events
            .partition_point(|event| event.resource_version <= resource_version);
        self.events.drain(..first);
    }

    /// The events after `resource_version`, oldest first.
    pub(crate) fn since(&self, resource_version: u64) -> Vec<Arc<CacheEvent<T>>> {
        let first = self
            .events
            .partition_point(|event| event.resource_version <= resource_version);
        self.events.range(first..).cloned().collect()
    }

    /// Every event, oldest first.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<CacheEvent<T>>> {
        self.events.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    fn event(resource_version: u64, record_time: Instant) -> Arc<CacheEvent<()>> {
        Arc::new(CacheEvent {
            kind: EventKind::Added,
            key: Arc::from("/k"),
            object: Arc::new(()),
            prev_object: None,
            resource_version,
            record_time,
        })
    }

    // The reference's TestDynamicCache: a full window of `count` events `interval`
    // apart, resized as of `count` intervals after the first; `start` is the
    // reference's startIndex (an offset in its cyclic buffer, which a deque does not
    // have), so the events dropped are `expect_start - start`.
    /// name, events, capacity, startIndex, lower bound, upper bound, interval,
    /// expected capacity, expected startIndex.
    type Case = (
        &'static str,
        usize,
        usize,
        usize,
        usize,
        usize,
        Duration,
        usize,
        usize,
    );

    #[test]
    fn test_dynamic_cache() {
        let fresh = EVENT_FRESH_DURATION;
        let second = Duration::from_secs(1);
        #[rustfmt::skip]
        let cases: [Case; 20] = [
            ("[capacity not equals 4*n] events inside eventFreshDuration cause cache expanding", 5, 5, 0, 2, 10, fresh / 6, 10, 0),
            ("[capacity not equals 4*n] events outside eventFreshDuration without change cache capacity", 5, 5, 0, 2, 10, fresh / 4, 5, 0),
            ("[capacity not equals 4*n] quarter of recent events outside eventFreshDuration cause cache shrinking", 5, 5, 0, 2, 10, fresh + second, 2, 3),
            ("[capacity not equals 4*n] quarter of recent events outside eventFreshDuration cause cache shrinking with given lowerBoundCapacity", 5, 5, 0, 3, 10, fresh + second, 3, 2),
            ("[capacity not equals 4*n] events inside eventFreshDuration cause cache expanding with given upperBoundCapacity", 5, 5, 0, 2, 8, fresh / 6, 8, 0),
            ("[capacity not equals 4*n] [startIndex not equal 0] events inside eventFreshDuration cause cache expanding", 5, 5, 3, 2, 10, fresh / 6, 10, 3),
            ("[capacity not equals 4*n] [startIndex not equal 0] events outside eventFreshDuration without change cache capacity", 5, 5, 3, 2, 10, fresh / 4, 5, 3),
            ("[capacity not equals 4*n] [startIndex not equal 0] quarter of recent events outside eventFreshDuration cause cache shrinking", 5, 5, 3, 2, 10, fresh + second, 2, 6),
            ("[capacity not equals 4*n] [startIndex not equal 0] quarter of recent events outside eventFreshDuration cause cache shrinking with given lowerBoundCapacity", 5, 5, 3, 3, 10, fresh + second, 3, 5),
            ("[capacity not equals 4*n] [startIndex not equal 0] events inside eventFreshDuration cause cache expanding with given upperBoundCapacity", 5, 5, 3, 2, 8, fresh / 6, 8, 3),
            ("[capacity equals 4*n] events inside eventFreshDuration cause cache expanding", 8, 8, 0, 4, 16, fresh / 9, 16, 0),
            ("[capacity equals 4*n] events outside eventFreshDuration without change cache capacity", 8, 8, 0, 4, 16, fresh / 8, 8, 0),
            ("[capacity equals 4*n] quarter of recent events outside eventFreshDuration cause cache shrinking", 8, 8, 0, 4, 16, fresh / 2 + second, 4, 4),
            ("[capacity equals 4*n] quarter of recent events outside eventFreshDuration cause cache shrinking with given lowerBoundCapacity", 8, 8, 0, 7, 16, fresh / 2 + second, 7, 1),
            ("[capacity equals 4*n] events inside eventFreshDuration cause cache expanding with given upperBoundCapacity", 8, 8, 0, 4, 10, fresh / 9, 10, 0),
            ("[capacity equals 4*n] [startIndex not equal 0] events inside eventFreshDuration cause cache expanding", 8, 8, 3, 4, 16, fresh / 9, 16, 3),
            ("[capacity equals 4*n] [startIndex not equal 0] events outside eventFreshDuration without change cache capacity", 8, 8, 3, 4, 16, fresh / 8, 8, 3),
            ("[capacity equals 4*n] [startIndex not equal 0] quarter of recent events outside eventFreshDuration cause cache shrinking", 8, 8, 3, 4, 16, fresh / 2 + second, 4, 7),
            ("[capacity equals 4*n] [startIndex not equal 0] quarter of recent events outside eventFreshDuration cause cache shrinking with given lowerBoundCapacity", 8, 8, 3, 7, 16, fresh / 2 + second, 7, 4),
            ("[capacity equals 4*n] [startIndex not equal 0] events inside eventFreshDuration cause cache expanding with given upperBoundCapacity", 8, 8, 3, 4, 10, fresh / 9, 10, 3),
        ];
        for (name, count, capacity, start, lower, upper, interval, expect_capacity, expect_start) in
            cases
        {
            let now = Instant::now();
            let mut window = EventWindow::with_capacity(capacity, lower, upper);
            for i in 0..count {
                window
                    .events
                    .push_back(event(i as u64 + 1, now + interval * i as u32));
            }
            window.resize(now + interval * count as u32);
            assert_eq!(window.capacity(), expect_capacity, "{name}");
            let dropped = expect_start - start;
            assert_eq!(window.len(), count - dropped, "{name}");
            let rvs: Vec<u64> = window.iter().map(|e| e.resource_version).collect();
            let expected: Vec<u64> = (dropped as u64 + 1..=count as u64).collect();
            assert_eq!(rvs, expected, "{name}");
        }
    }

    #[test]
    fn window_never_grows_beyond_its_upper_bound() {
        let start = Instant::now();
        let mut window = EventWindow::new(DEFAULT_LOWER_BOUND_CAPACITY, 2 * 1024);
        for rv in 1..=4 * 1024 {
            window.push(event(rv, start));
        }
        assert_eq!(window.capacity(), 2 * 1024);
        assert_eq!(window.len(), 2 * 1024);
        assert_eq!(
            window.oldest().map(|e| e.resource_version),
            Some(2 * 1024 + 1)
        );
    }
}
