//! Whether the cache can serve (kube's `ready.go`): pending until the first list
//! lands, ready until the underlying watch breaks, pending again while it re-lists,
//! stopped for good when the cacher is dropped. Every turn to ready starts a new
//! generation, so a watcher set up against one generation is not registered into the
//! next.

use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadyState {
    ready: bool,
    stopped: bool,
    generation: u64,
}

/// The readiness of one cacher.
#[derive(Debug)]
pub(crate) struct Ready {
    state: watch::Sender<ReadyState>,
}

impl Ready {
    pub(crate) fn new() -> Self {
        Self {
            state: watch::Sender::new(ReadyState {
                ready: false,
                stopped: false,
                generation: 0,
            }),
        }
    }

    /// Marks the cache ready or pending; a turn to ready starts a generation.
    pub(crate) fn set(&self, ready: bool) {
        self.state.send_if_modified(|state| {
            if state.stopped || state.ready == ready {
                return false;
            }
            state.ready = ready;
            if ready {
                state.generation += 1;
            }
            true
        });
    }

    /// Stops for good: waiters give up.
    pub(crate) fn stop(&self) {
        self.state.send_modify(|state| {
            state.stopped = true;
            state.ready = false;
        });
    }

    pub(crate) fn check(&self) -> bool {
        self.state.borrow().ready
    }

    /// The current generation, if ready.
    pub(crate) fn generation(&self) -> Option<u64> {
        let state = *self.state.borrow();
        state.ready.then_some(state.generation)
    }

    /// Waits until ready; `false` if the cacher stopped instead.
    pub(crate) async fn wait(&self) -> bool {
        wait_ready(self.state.subscribe()).await
    }

    /// A receiver of the state, which outlives the cacher (then it reads stopped).
    pub(crate) fn subscribe(&self) -> watch::Receiver<ReadyState> {
        self.state.subscribe()
    }
}

/// Waits on `state` until ready; `false` if the cacher stopped (or went) instead.
pub(crate) async fn wait_ready(mut state: watch::Receiver<ReadyState>) -> bool {
    match state.wait_for(|state| state.ready || state.stopped).await {
        Ok(state) => state.ready,
        Err(_) => false,
    }
}

/// Whether `state` reads ready now.
pub(crate) fn is_ready(state: &watch::Receiver<ReadyState>) -> bool {
    state.borrow().ready
}

#[cfg(test)]
mod tests {
    use super::Ready;

    // The reference's TestReadyWait / TestReadyGeneration: waiting ends when the
    // cache turns ready, each turn to ready is a new generation, and a stop ends
    // waiting without readiness.
    #[tokio::test]
    async fn test_ready_generation() {
        let ready = Ready::new();
        assert!(!ready.check());
        assert_eq!(ready.generation(), None);
        ready.set(true);
        assert!(ready.wait().await);
        assert_eq!(ready.generation(), Some(1));
        ready.set(true);
        assert_eq!(ready.generation(), Some(1));
        ready.set(false);
        assert_eq!(ready.generation(), None);
        ready.set(true);
        assert_eq!(ready.generation(), Some(2));
        ready.stop();
        assert!(!ready.wait().await);
        ready.set(true);
        assert!(!ready.check());
    }

    #[tokio::test]
    async fn test_ready_wait_blocks_until_set() {
        let ready = std::sync::Arc::new(Ready::new());
        let waiter = tokio::spawn({
            let ready = std::sync::Arc::clone(&ready);
            async move { ready.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        ready.set(true);
        assert!(waiter.await.unwrap());
    }
}
