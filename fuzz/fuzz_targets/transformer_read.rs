//! Fuzz target: see [`apistore_fuzz::transformer_read`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::transformer_read(data));
