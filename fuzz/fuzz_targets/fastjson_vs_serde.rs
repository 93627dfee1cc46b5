//! `graph_ascend_testkit::fuzzing::fastjson_vs_serde` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_ascend_testkit::fuzzing::fastjson_vs_serde(data));
