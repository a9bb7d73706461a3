//! A list's page of stored values read back (transformed, then decoded) on several
//! threads at once, and handed to the list one by one in key order.
//!
//! kube-apiserver decodes a list's items one after another on the request's goroutine,
//! while its collector works on the other cores. Reading a Pod back costs tens of
//! microseconds, so a list of thousands spends most of its time there. A large page (half
//! a MiB of stored values a thread, see [`MIN_BYTES_PER_THREAD`]) is therefore read on
//! scoped threads, the caller's among them, which claim short runs of consecutive
//! values in turn (so a thread kept off its core holds up no more than its run), and
//! the results are taken in key order as a sequential read's would be: which items
//! the list selects, where it stops and which error it names do not change. A failure
//! is reported (to [`DecodeErrors`](crate::object::DecodeErrors)) only when the list
//! reaches it, so a value read ahead that the list never takes (it stopped at its
//! limit, or at its hundredth corrupt object) counts nowhere, as it would not have
//! been read. With a stored selector ([`ObjectLayers::set_stored_selector`]) each
//! thread also judges the selectors on the plain bytes and decodes only the values
//! they keep.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;

use apistore_storage::SelectionPredicate;
use bytes::Bytes;

use crate::list::ListKey;
use crate::object::{DecodeErrors, ObjectLayers, UnreadValue};

/// The least work a thread is given, in stored bytes (each value counted with
/// [`BYTES_PER_VALUE`] more). Reading back costs about 3 µs per KiB of JSON (an object of
/// 1 KiB about 4 µs) and more of protobuf (a Pod of 2.7 KiB about 25 µs typed), so this
/// is a millisecond and a half of work or more. Below it, the time a second thread
/// can save is no more than it may wait to be scheduled when etcd or another process
/// holds the other core: a page of 500 objects of 1 KiB listed slower on two threads
/// than on one on a busy 2-core machine (docs/benchmarks.md).
const MIN_BYTES_PER_THREAD: usize = 512 * 1024;

/// What reading a value back costs beyond its bytes (its key, its allocations, its
/// place in the results), in bytes of the same cost: about a microsecond.
const BYTES_PER_VALUE: usize = 256;

/// The fewest values the first batch of a page takes, whose stored bytes decide
/// whether it is split (see [`PageReader::next`]).
const FIRST_BATCH: usize = 256;

/// The cores this process may use (its CPU affinity and cgroup quota), read once: the
/// standard library reads cgroup files each time it is asked.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| thread::available_parallelism().map_or(1, usize::from))
}

/// What reading one stored value back gave: `None` when the stored selector dropped it.
pub(crate) type ReadValue<T> = Result<Option<T>, UnreadValue>;

/// A value read back, with its key.
pub(crate) type Read<K, T> = (K, ReadValue<T>);

/// The values of one page, read back on demand: one at a time on the caller's thread,
/// or, while enough are left, a batch at once on several threads.
pub(crate) struct PageReader<'l, T, E, K, I> {
    layers: &'l ObjectLayers<T, E>,
    predicate: &'l SelectionPredicate,
    stored: I,
    /// Values already read back, in key order.
    read: std::vec::IntoIter<Read<K, T>>,
    /// Values taken from `stored` for a batch too small to split: read one at a time.
    unread: std::vec::IntoIter<(K, Bytes, i64)>,
    threads: usize,
    /// The fewest values the next batch takes: [`FIRST_BATCH`] at first, then twice the
    /// last batch, so a list with a limit whose selector drops most values reads at
    /// most about twice what it needed, not a share for every core at each step.
    least_batch: usize,
}

impl<'l, T, E, K, I> PageReader<'l, T, E, K, I>
where
    T: apistore_storage::ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    K: ListKey + Send,
    I: ExactSizeIterator<Item = (K, Bytes, i64)>,
{
    /// A reader of `stored`, `(key, stored value, mod revision)` in key order, for a
    /// list selecting with `predicate`.
    pub(crate) fn new(
        layers: &'l ObjectLayers<T, E>,
        predicate: &'l SelectionPredicate,
        stored: I,
    ) -> Self {
        Self {
            layers,
            predicate,
            stored,
            read: Vec::new().into_iter(),
            unread: Vec::new().into_iter(),
            threads: layers.read_threads(),
            least_batch: FIRST_BATCH,
        }
    }

    /// A reader of values already read back (by [`read_all`]), in key order.
    pub(crate) fn already_read(
        layers: &'l ObjectLayers<T, E>,
        predicate: &'l SelectionPredicate,
        read: Vec<Read<K, T>>,
        stored: I,
    ) -> Self {
        let mut reader = Self::new(layers, predicate, stored);
        reader.read = read.into_iter();
        reader
    }

    /// How many values are left to hand out.
    pub(crate) fn len(&self) -> usize {
        self.read.len() + self.unread.len() + self.stored.len()
    }

    /// Whether every value has been handed out.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next value read back. `wanted` is how many more values the list expects to
    /// take (`usize::MAX` when it takes the whole page): a batch is that many, or more
    /// while the list keeps needing more (see `least_batch`). A batch holding
    /// [`MIN_BYTES_PER_THREAD`] of work for two threads or more is read at once on
    /// them; a smaller one is read one value at a time as the list takes it, so a
    /// list that stops early reads no further.
    pub(crate) fn next(&mut self, wanted: usize) -> Option<Read<K, T>> {
        if let Some(read) = self.read.next() {
            return Some(read);
        }
        // On one thread there is nothing to weigh: values are read straight from the page.
        if self.threads > 1 && self.unread.len() == 0 && self.stored.len() > 0 {
            let batch = wanted.max(self.least_batch).min(self.stored.len());
            let taken: Vec<_> = self.stored.by_ref().take(batch).collect();
            let work: usize = taken
                .iter()
                .map(|(_, value, _)| value.len().saturating_add(BYTES_PER_VALUE))
                .fold(0, usize::saturating_add);
            let threads = self.threads.min(work / MIN_BYTES_PER_THREAD);
            self.least_batch = batch.saturating_mul(2);
            if threads > 1 {
                self.read = read_on_threads(self.layers, self.predicate, taken, threads, |_| true)
                    .into_iter();
                return self.read.next();
            }
            self.unread = taken.into_iter();
        }
        let (key, value, rev) = match self.unread.next() {
            Some(unread) => unread,
            None => self.stored.next()?,
        };
        let read = self
            .layers
            .read_selected(&key.text(), value, rev, self.predicate);
        Some((key, read))
    }
}

/// Reads every value of `stored` back as a [`PageReader`] reads a page the list takes
/// whole (on as many threads as its weight allows), and returns the results in the
/// order given: for a page read before the list takes it (see
/// [`crate::list::ListPages::take_page_off_runtime`]).
pub(crate) fn read_all<T, E, K>(
    layers: &ObjectLayers<T, E>,
    predicate: &SelectionPredicate,
    stored: Vec<(K, Bytes, i64)>,
) -> Vec<Read<K, T>>
where
    T: apistore_storage::ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    K: ListKey + Send,
{
    let mut page = PageReader::new(layers, predicate, stored.into_iter());
    std::iter::from_fn(|| page.next(usize::MAX)).collect()
}

/// How many runs each reading thread's share of a batch is cut into: threads claim
/// runs one at a time, so one that etcd, the caller's other work or another process
/// keeps off its core leaves its unclaimed runs to the others instead of holding the
/// whole batch up at the join.
const RUNS_PER_THREAD: usize = 8;

/// Reads `stored` back on `threads` threads (the caller's among them), which claim runs
/// of consecutive values in turn until none is left, and returns the results in the
/// order given. A thread the system refuses to start leaves its share to the threads
/// that did; so does one `may_start` refuses (given the thread's index from 1: the
/// tests' stand-in for a system out of threads).
fn read_on_threads<T, E, K>(
    layers: &ObjectLayers<T, E>,
    predicate: &SelectionPredicate,
    mut stored: Vec<(K, Bytes, i64)>,
    threads: usize,
    may_start: impl Fn(usize) -> bool,
) -> Vec<Read<K, T>>
where
    T: apistore_storage::ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    K: ListKey + Send,
{
    let threads = threads.max(1);
    let per_run = stored
        .len()
        .div_ceil(threads.saturating_mul(RUNS_PER_THREAD))
        .max(1);
    let mut parts = {
        // The runs, handed out one at a time with their place in the batch. Each
        // value is taken out of its slot as it is read (its bytes freed as soon as it
        // is decoded); the keys stay for the results.
        let runs = Mutex::new(stored.chunks_mut(per_run).enumerate());
        let read_runs = || -> Vec<(usize, Vec<ReadValue<T>>)> {
            let mut read = Vec::new();
            loop {
                let claimed = runs.lock().unwrap_or_else(PoisonError::into_inner).next();
                let Some((index, run)) = claimed else {
                    return read;
                };
                let values = run
                    .iter_mut()
                    .map(|(key, value, rev)| {
                        layers.read_selected(&key.text(), std::mem::take(value), *rev, predicate)
                    })
                    .collect();
                read.push((index, values));
            }
        };
        thread::scope(|scope| {
            // The other threads start before this thread claims its first run.
            let started: Vec<_> = (1..threads)
                .filter(|&index| may_start(index))
                .filter_map(|_| {
                    thread::Builder::new()
                        .name("apistore-list-read".to_owned())
                        .spawn_scoped(scope, read_runs)
                        .ok()
                })
                .collect();
            let mine = read_runs();
            let theirs = started.into_iter().map(|handle| {
                // A panic of the codec is the caller's, as on its own thread.
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
            std::iter::once(mine)
                .chain(theirs)
                .flatten()
                .collect::<Vec<_>>()
        })
    };
    // Every run was read by the time every thread found none left to claim.
    parts.sort_unstable_by_key(|(index, _)| *index);
    stored
        .into_iter()
        .map(|(key, _, _)| key)
        .zip(parts.into_iter().flat_map(|(_, values)| values))
        .collect()
}

#[cfg(test)]
#[path = "read_ahead_tests.rs"]
mod tests;
