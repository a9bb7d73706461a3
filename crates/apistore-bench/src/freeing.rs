//! Frees what a timed list returned on a thread of its own, after the call's time is
//! taken.
//!
//! kube's Go storage layer returns a list and leaves its memory to the collector,
//! which works beside the caller on the other core; the Go harness times the call
//! alone. A Rust list is freed where it is dropped, so dropping 10,000 Pods inside
//! the timed call would add their freeing to apistore's latency and not to Go's.
//! The latency rows hand each list to one freeing thread instead, so both sides time
//! the same thing, the call, and then wait for the thread to finish ([`drain`])
//! before anything else is timed, counting its CPU in apistore's column. Throughput
//! rows keep dropping inline: there the freeing shares the cores with the next
//! calls, as Go's collector does.

use std::sync::OnceLock;
use std::sync::mpsc::{self, Sender, SyncSender};

/// What the freeing thread is handed.
enum Handed {
    /// Something to drop.
    Garbage(Box<dyn Send>),
    /// Answered once everything handed before it has been dropped.
    Marker(SyncSender<()>),
}

/// How a timed call disposes of what it listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freeing {
    /// Dropped where the call ends, inside its time.
    Inline,
    /// Handed to the freeing thread, outside the call's time.
    Aside,
}

impl Freeing {
    /// Disposes of `value` this way.
    pub(crate) fn dispose<T: Send + 'static>(self, value: T) {
        match self {
            Self::Inline => drop(value),
            Self::Aside => free_aside(value),
        }
    }
}

/// The freeing thread's mailbox; `None` when the thread could not be started, and
/// then values are dropped where they are handed over.
static FREEING: OnceLock<Option<Sender<Handed>>> = OnceLock::new();

fn mailbox() -> Option<&'static Sender<Handed>> {
    FREEING
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Handed>();
            std::thread::Builder::new()
                .name("bench-freeing".to_owned())
                .spawn(move || {
                    for handed in receiver {
                        match handed {
                            Handed::Garbage(garbage) => drop(garbage),
                            Handed::Marker(done) => {
                                let _ = done.send(());
                            }
                        }
                    }
                })
                .ok()
                .map(|_| sender)
        })
        .as_ref()
}

/// Drops `value` on the freeing thread (or here, when there is none).
pub(crate) fn free_aside<T: Send + 'static>(value: T) {
    if let Some(mailbox) = mailbox() {
        // A closed mailbox hands the value back in the error, dropped here.
        let _ = mailbox.send(Handed::Garbage(Box::new(value)));
    }
}

/// Blocks until everything handed to the freeing thread so far has been dropped.
pub(crate) fn drain() {
    let Some(mailbox) = mailbox() else {
        return;
    };
    let (done, finished) = mpsc::sync_channel(1);
    if mailbox.send(Handed::Marker(done)).is_ok() {
        // An error means the thread is gone, and with it what it held.
        let _ = finished.recv();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn drain_returns_once_everything_handed_is_dropped() {
        let drops = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            Freeing::Aside.dispose(vec![Counted(Arc::clone(&drops))]);
        }
        drain();
        assert_eq!(drops.load(Ordering::SeqCst), 100);
        Freeing::Inline.dispose(Counted(Arc::clone(&drops)));
        assert_eq!(drops.load(Ordering::SeqCst), 101);
    }
}
