//! See `impnet_fuzz_harness::igmp` for what the input is and the checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| impnet_fuzz_harness::igmp::run(data));
