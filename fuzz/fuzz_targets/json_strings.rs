//! `graph_ascend_testkit::fuzzing::json_strings` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_ascend_testkit::fuzzing::json_strings(data));
