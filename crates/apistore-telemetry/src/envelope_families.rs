//! The `apiserver_envelope_encryption_*` families: names, help strings, labels and
//! buckets exactly as k8s.io/apiserver v0.31.1 registers them
//! (`pkg/storage/value/encrypt/envelope/metrics/metrics.go`).
//!
//! kube registers all eight whenever its encryption config package is linked, that is
//! in every kube-apiserver, so they are part of every registration here too. The
//! vectors show nothing until recorded; `dek_cache_fill_percent` is a plain gauge and
//! is exposed at 0 from the start, as kube exposes it.
//!
//! Two families belong to KMS v1, which apistore does not support (kube feeds them
//! from its v1 envelope only): `dek_cache_fill_percent` stays at 0 and
//! `dek_cache_inter_arrival_time_seconds` shows no series, as on a kube-apiserver
//! whose `kms` providers are all v2.

use prometheus::core::Collector;
use prometheus::{Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// The help text prefix of component-base's ALPHA stability level; every envelope
/// metric is ALPHA.
fn alpha(text: &str) -> String {
    format!("[ALPHA] {text}")
}

/// kube's name: namespace `apiserver`, subsystem `envelope_encryption`.
fn name(metric: &str) -> String {
    format!("apiserver_envelope_encryption_{metric}")
}

/// The labels of the key id series written on every transformation.
const KEY_ID_LABELS: &[&str] = &[
    "transformation_type",
    "provider_name",
    "key_id_hash",
    "apiserver_id_hash",
];

/// The labels of the key id series written by health checks.
const STATUS_KEY_ID_LABELS: &[&str] = &["provider_name", "key_id_hash", "apiserver_id_hash"];

/// Every envelope metric, unregistered.
pub(crate) struct EnvelopeFamilies {
    pub(crate) dek_cache_fill_percent: Gauge,
    pub(crate) dek_cache_inter_arrivals: HistogramVec,
    pub(crate) dek_source_cache_size: GaugeVec,
    pub(crate) key_id_hash_total: IntCounterVec,
    pub(crate) key_id_hash_last_timestamp: GaugeVec,
    pub(crate) key_id_hash_status_last_timestamp: GaugeVec,
    pub(crate) invalid_key_id_from_status: IntCounterVec,
    pub(crate) kms_operations_latency: HistogramVec,
}

impl EnvelopeFamilies {
    pub(crate) fn new() -> prometheus::Result<Self> {
        Ok(Self {
            dek_cache_fill_percent: Gauge::with_opts(Opts::new(
                name("dek_cache_fill_percent"),
                alpha("Percent of the cache slots currently occupied by cached DEKs."),
            ))?,
            dek_cache_inter_arrivals: HistogramVec::new(
                HistogramOpts::new(
                    name("dek_cache_inter_arrival_time_seconds"),
                    alpha("Time (in seconds) of inter arrival of transformation requests."),
                )
                .buckets(prometheus::exponential_buckets(60.0, 2.0, 10)?),
                &["transformation_type"],
            )?,
            dek_source_cache_size: GaugeVec::new(
                Opts::new(
                    name("dek_source_cache_size"),
                    alpha(
                        "Number of records in data encryption key (DEK) source cache. On a restart, this value is an approximation of the number of decrypt RPC calls the server will make to the KMS plugin.",
                    ),
                ),
                &["provider_name"],
            )?,
            key_id_hash_total: IntCounterVec::new(
                Opts::new(
                    name("key_id_hash_total"),
                    alpha(
                        "Number of times a keyID is used split by transformation type, provider, and apiserver identity.",
                    ),
                ),
                KEY_ID_LABELS,
            )?,
            key_id_hash_last_timestamp: GaugeVec::new(
                Opts::new(
                    name("key_id_hash_last_timestamp_seconds"),
                    alpha("The last time in seconds when a keyID was used."),
                ),
                KEY_ID_LABELS,
            )?,
            key_id_hash_status_last_timestamp: GaugeVec::new(
                Opts::new(
                    name("key_id_hash_status_last_timestamp_seconds"),
                    alpha(
                        "The last time in seconds when a keyID was returned by the Status RPC call.",
                    ),
                ),
                STATUS_KEY_ID_LABELS,
            )?,
            invalid_key_id_from_status: IntCounterVec::new(
                Opts::new(
                    name("invalid_key_id_from_status_total"),
                    alpha(
                        "Number of times an invalid keyID is returned by the Status RPC call split by error.",
                    ),
                ),
                &["provider_name", "error"],
            )?,
            kms_operations_latency: HistogramVec::new(
                HistogramOpts::new(
                    name("kms_operations_latency_seconds"),
                    alpha("KMS operation duration with gRPC error code status total."),
                )
                // From 0.1 ms; the last bound is about 52 s.
                .buckets(prometheus::exponential_buckets(0.0001, 2.0, 20)?),
                &["provider_name", "method_name", "grpc_status_code"],
            )?,
        })
    }

    /// The families in kube's registration order, as collectors.
    pub(crate) fn collectors(&self) -> [&dyn Collector; 8] {
        [
            &self.dek_cache_fill_percent,
            &self.dek_cache_inter_arrivals,
            &self.dek_source_cache_size,
            &self.key_id_hash_total,
            &self.key_id_hash_last_timestamp,
            &self.key_id_hash_status_last_timestamp,
            &self.invalid_key_id_from_status,
            &self.kms_operations_latency,
        ]
    }
}
