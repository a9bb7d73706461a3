//! `kms` (apiVersion v2) providers in `--encryption-config` files.
//!
//! The facade dials each provider's plugin over gRPC when it reads the file and runs a
//! first health check. As in kube-apiserver, a failed check does not stop the command:
//! reads and writes go on while the plugin still encrypts and decrypts, and fail,
//! naming the provider and its socket, when it does not. kube-apiserver reports a
//! failed check on `/healthz`; a one-shot command has no such endpoint, so it says so
//! on stderr instead.

use apistore::ApiStore;

/// Prints one warning line on stderr per `kms` provider whose health check failed.
pub(crate) fn warn_unhealthy(api: &ApiStore) {
    let Some(config) = api.encryption_config() else {
        return;
    };
    for provider in config.kms_providers() {
        if let Some(Err(err)) = provider.last_check() {
            eprintln!("Warning: {err}");
        }
    }
}
