//! What an envelope saw before it had an observer.
//!
//! Loading a configuration primes each `kms` provider with a health check (`Status`,
//! then `Encrypt` of a new DEK seed) before the caller can attach its metrics, while
//! kube has its envelope metrics registered from process start and records that first
//! check. So an envelope keeps its first few events and hands them to the observer it
//! gets later; they are recorded then (a timestamp gauge reads the attach time, a few
//! milliseconds after the check).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::KmsObserver;
use crate::TransformationType;

/// How many events are kept: a priming check makes four, a failed one two; the rest
/// are reads and writes before the observer came, which the bound keeps cheap when
/// none ever comes (metrics off).
const CAPACITY: usize = 32;

/// One event, as the observer would have received it.
#[derive(Debug)]
enum Event {
    KeyIdUsed(TransformationType, String, String),
    KeyIdFromStatus(String, String),
    InvalidKeyIdFromStatus(String, String),
    Operation(String, String, String, Duration),
    CacheSize(String, usize, usize),
}

/// The events kept until an observer comes; [`EarlyEvents::replay_into`] hands
/// them over once and stops keeping.
#[derive(Debug)]
pub(super) struct EarlyEvents {
    accepting: AtomicBool,
    events: Mutex<Vec<Event>>,
}

impl Default for EarlyEvents {
    fn default() -> Self {
        Self {
            accepting: AtomicBool::new(true),
            events: Mutex::new(Vec::new()),
        }
    }
}

impl EarlyEvents {
    /// Whether events are still kept (so the envelope should report to this).
    pub(super) fn accepting(&self) -> bool {
        self.accepting.load(Ordering::Relaxed)
    }

    fn push(&self, event: Event) {
        if !self.accepting() {
            return;
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() < CAPACITY {
            events.push(event);
        }
        if events.len() >= CAPACITY {
            self.accepting.store(false, Ordering::Relaxed);
        }
    }

    /// Hands the kept events to `observer`, in order, and keeps no more.
    pub(super) fn replay_into(&self, observer: &dyn KmsObserver) {
        self.accepting.store(false, Ordering::Relaxed);
        let events = std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()));
        for event in events {
            match event {
                Event::KeyIdUsed(kind, provider, hash) => {
                    observer.key_id_used(kind, &provider, &hash);
                }
                Event::KeyIdFromStatus(provider, hash) => {
                    observer.key_id_from_status(&provider, &hash);
                }
                Event::InvalidKeyIdFromStatus(provider, error) => {
                    observer.invalid_key_id_from_status(&provider, &error);
                }
                Event::Operation(provider, method, code, elapsed) => {
                    observer.kms_operation(&provider, &method, &code, elapsed);
                }
                Event::CacheSize(provider, size, capacity) => {
                    observer.dek_source_cache_size(&provider, size, capacity);
                }
            }
        }
    }
}

impl KmsObserver for EarlyEvents {
    fn key_id_used(&self, kind: TransformationType, provider_name: &str, key_id_hash: &str) {
        self.push(Event::KeyIdUsed(
            kind,
            provider_name.to_owned(),
            key_id_hash.to_owned(),
        ));
    }

    fn key_id_from_status(&self, provider_name: &str, key_id_hash: &str) {
        self.push(Event::KeyIdFromStatus(
            provider_name.to_owned(),
            key_id_hash.to_owned(),
        ));
    }

    fn invalid_key_id_from_status(&self, provider_name: &str, error: &str) {
        self.push(Event::InvalidKeyIdFromStatus(
            provider_name.to_owned(),
            error.to_owned(),
        ));
    }

    fn kms_operation(&self, provider_name: &str, method: &str, code: &str, elapsed: Duration) {
        self.push(Event::Operation(
            provider_name.to_owned(),
            method.to_owned(),
            code.to_owned(),
            elapsed,
        ));
    }

    fn dek_source_cache_size(&self, provider_name: &str, size: usize, capacity: usize) {
        self.push(Event::CacheSize(provider_name.to_owned(), size, capacity));
    }
}
