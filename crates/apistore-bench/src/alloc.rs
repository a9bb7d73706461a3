//! A counting global allocator: how many bytes a call holds at its peak.
//!
//! Peak memory of a list call and the memory an idle watch keeps are measured in
//! bytes the program asked the allocator for, not in resident pages: RSS moves in
//! pages, lags behind frees (malloc keeps freed memory for reuse) and includes whatever
//! the previous workload left in the allocator's free lists, so two calls of the same
//! size can show very different RSS deltas. Counting requests is exact and the same
//! for both arms of a comparison.
//!
//! Counting is off unless a [`Window`] is open, so the timed workloads pay one relaxed
//! atomic load per allocation and nothing else. While a window is open every thread's
//! allocations count (a list call's bytes are decoded on tokio worker threads), so a
//! window is only opened around one call with nothing else running.
//!
//! Underneath is the system allocator (glibc malloc on Linux), what a program gets
//! unless it picks another; built with the `mimalloc` feature, mimalloc instead. The
//! typed-Pod rows free millions of small allocations a run, so the allocator is part of
//! what they measure (docs/benchmarks.md), and the report names the one used.
//!
//! This is the crate's only unsafe code: `GlobalAlloc` is an unsafe trait. Each method
//! forwards to the allocator underneath unchanged and only adds bookkeeping after it
//! returns.

#[cfg(not(feature = "mimalloc"))]
use std::alloc::System as Underlying;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc as Underlying;

/// The allocator the counting one forwards to, as the report names it.
#[cfg(not(feature = "mimalloc"))]
pub(crate) const UNDERLYING: &str = "the system allocator (glibc malloc on Linux)";
/// The allocator the counting one forwards to, as the report names it.
#[cfg(feature = "mimalloc")]
pub(crate) const UNDERLYING: &str = "mimalloc (the bench's `mimalloc` feature)";

/// The allocator underneath ([`UNDERLYING`]), counting bytes while a [`Window`] is open.
#[derive(Debug)]
pub(crate) struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed since the window opened (negative when the call
/// freed memory that existed before it).
static NET: AtomicIsize = AtomicIsize::new(0);
/// The highest `NET` seen since the window opened.
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn record(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        let now = NET.fetch_add(delta, Ordering::Relaxed) + delta;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every method hands its arguments to `Underlying`, which upholds `GlobalAlloc`'s
// contract, and returns what it returned; the bookkeeping touches only atomics and
// never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are passed on unchanged.
        let ptr = unsafe { Underlying.alloc(layout) };
        if !ptr.is_null() {
            record(signed(layout.size()));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { Underlying.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record(signed(layout.size()));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `Underlying` with `layout` (every allocation
        // goes through this type, which only ever uses `Underlying`).
        unsafe { Underlying.dealloc(ptr, layout) };
        record(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is passed on under the caller's guarantees.
        let new = unsafe { Underlying.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            record(signed(new_size) - signed(layout.size()));
        }
        new
    }
}

/// What a [`Window`] saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counted {
    /// The most bytes held at once above what was held when the window opened.
    pub(crate) peak: u64,
    /// Bytes still held when the window closed, above what was held when it opened.
    pub(crate) net: i64,
}

/// Counts allocations from [`Window::open`] to [`Window::close`]. One at a time.
#[derive(Debug)]
pub(crate) struct Window(());

impl Window {
    /// Starts counting from zero.
    pub(crate) fn open() -> Self {
        NET.store(0, Ordering::SeqCst);
        PEAK.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        Self(())
    }

    /// Stops counting and reports.
    pub(crate) fn close(self) -> Counted {
        COUNTING.store(false, Ordering::SeqCst);
        let peak = PEAK.load(Ordering::SeqCst).max(0).unsigned_abs() as u64;
        let net = NET.load(Ordering::SeqCst) as i64;
        Counted { peak, net }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        COUNTING.store(false, Ordering::SeqCst);
    }
}
