//! The clock leases expire by: the system's monotonic clock, or a [`ManualClock`] that
//! a test moves by hand so that TTLs expire when the test says, not after real seconds.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A monotonic clock: the time elapsed since an origin of the clock's choosing.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The time since the clock's origin; never goes backwards.
    fn now(&self) -> Duration;
}

/// The system's monotonic clock (`Instant`), the default.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that stands still until [`ManualClock::advance`] moves it. Clones share
/// the same time, so a test keeps one and gives another to the store.
///
/// ```
/// use std::time::Duration;
/// use apistore_memory::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let theirs = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(theirs.now(), Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now = now.saturating_add(by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
