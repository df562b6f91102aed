//! A short simulated bulk transfer over a link with input-chosen impairments: see
//! `impnet_fuzz_harness::sim_impair`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| impnet_fuzz_harness::sim_impair::run(data));
