//! Fuzz target: see [`apistore_fuzz::json_decode`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apistore_fuzz::json_decode(data));
