//! `graph_ascend_testkit::fuzzing::entry_scanner` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_ascend_testkit::fuzzing::entry_scanner(data));
