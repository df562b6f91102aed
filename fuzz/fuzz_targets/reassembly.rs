//! IPv4 fragments of UDP datagrams through a `Stack`: see
//! `impnet_fuzz_harness::reassembly` for the encoding and the checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| impnet_fuzz_harness::reassembly::run(data));
