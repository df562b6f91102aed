//! Arbitrary text as a scenario file: parse or error, never panic (see
//! `impnet_fuzz_harness::scenario_parse`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| impnet_fuzz_harness::scenario_parse::run(data));
