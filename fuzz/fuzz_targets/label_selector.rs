//! Fuzz target: see [`apistore_fuzz::label_selector`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::label_selector(data));
