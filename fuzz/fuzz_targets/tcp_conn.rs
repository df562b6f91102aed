//! A `Tcp` with a listener and one connection whose peer the input scripts: see
//! `impnet_fuzz_harness::tcp_conn` for the encoding and the checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| impnet_fuzz_harness::tcp_conn::run(data));
