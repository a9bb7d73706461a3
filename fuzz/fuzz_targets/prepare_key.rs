//! Fuzz target: see [`apistore_fuzz::prepare_key`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::prepare_key(data));
