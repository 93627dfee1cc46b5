//! `graph_ascend_dump::fuzzing::npy` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_ascend_dump::fuzzing::npy(data));
