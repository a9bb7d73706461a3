//! Fuzz target: see [`apistore_fuzz::field_selector`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::field_selector(data));
