//! Registering [`StorageMetrics`] into a Prometheus registry, idempotently.
//!
//! kube-apiserver registers its storage metrics once per process (`sync.Once` into the
//! legacy registry). Here any number of stores may register into any registry: the
//! first registration wins and later ones get the same metrics back.
//!
//! The `prometheus` crate neither exposes a registry's identity nor hands back a
//! registered collector, so a repeated registration is recognised by asking the
//! registry itself: it is gathered once with a thread-local probe armed, and the
//! storage collector that the registry calls identifies itself through the probe.
//! Gathering runs collectors on the calling thread, so the probe sees exactly the
//! collectors of that registry. This costs one gather per repeated registration,
//! which happens a handful of times per process.

use std::cell::RefCell;
use std::sync::Arc;

use apistore_storage::KubeVersion;
use prometheus::Registry;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;

use crate::error::{Result, TelemetryError};
use crate::storage_metrics::{Inner, StorageMetrics};

thread_local! {
    /// `Some` while a probe is armed on this thread; then holds what it found.
    static PROBE: RefCell<Option<Option<Arc<Inner>>>> = const { RefCell::new(None) };
}

/// The registered form of [`StorageMetrics`]: every family as one collector, so a
/// registration is all or nothing.
struct StorageCollector {
    inner: Arc<Inner>,
}

impl Collector for StorageCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.inner.families.descs()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let probed = PROBE.with(|probe| match probe.try_borrow_mut() {
            Ok(mut slot) => match slot.as_mut() {
                Some(found) => {
                    *found = Some(Arc::clone(&self.inner));
                    true
                }
                None => false,
            },
            Err(_) => false,
        });
        if probed {
            // The probe only wants to know who is registered; skip the real work.
            return Vec::new();
        }
        self.inner.families.collect()
    }
}

impl StorageMetrics {
    /// Registers the newest kube's storage metrics ([`KubeVersion::LATEST`]) into
    /// `registry`, or returns the ones already registered there; see
    /// [`Self::register_for`].
    ///
    /// # Errors
    ///
    /// As [`Self::register_for`].
    pub fn register(registry: &Registry) -> Result<Self> {
        Self::register_for(registry, KubeVersion::LATEST)
    }

    /// Registers kube-apiserver `version`'s storage metrics into `registry` (the
    /// families, labels and help texts that minor exposes: see the crate docs), or
    /// returns the ones already registered there by an earlier call for the same
    /// version.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::ForeignMetrics`] if metrics with these names were registered
    /// by something else; [`TelemetryError::OtherKubeVersion`] if this crate registered
    /// another kube minor's metrics there (one exposition cannot hold both label
    /// sets); [`TelemetryError::Prometheus`] if the registry refused them otherwise
    /// (for example a same-named metric with other labels).
    pub fn register_for(registry: &Registry, version: KubeVersion) -> Result<Self> {
        let metrics = Self::build(version)?;
        let collector = StorageCollector {
            inner: Arc::clone(&metrics.inner),
        };
        match registry.register(Box::new(collector)) {
            Ok(()) => Ok(metrics),
            Err(prometheus::Error::AlreadyReg) => {
                let registered = find_registered(registry).ok_or(TelemetryError::ForeignMetrics)?;
                if registered.kube_version() == version {
                    Ok(registered)
                } else {
                    Err(TelemetryError::OtherKubeVersion {
                        registered: registered.kube_version(),
                        requested: version,
                    })
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Registers the newest kube's storage metrics into the `prometheus` crate's
    /// process-wide default registry (the counterpart of kube-apiserver's legacy
    /// registry); idempotent like [`StorageMetrics::register`].
    ///
    /// # Errors
    ///
    /// As [`StorageMetrics::register`].
    pub fn default_registry() -> Result<Self> {
        Self::register(prometheus::default_registry())
    }
}

/// The storage metrics registered in `registry`, if any.
fn find_registered(registry: &Registry) -> Option<StorageMetrics> {
    let previous = PROBE.with(|probe| probe.replace(Some(None)));
    registry.gather();
    let found = PROBE.with(|probe| probe.replace(previous)).flatten();
    found.map(|inner| StorageMetrics { inner })
}
