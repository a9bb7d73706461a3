//! Fuzz target: see [`apistore_fuzz::continue_token`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::continue_token(data));
