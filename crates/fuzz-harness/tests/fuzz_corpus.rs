//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same logic
//! the cargo-fuzz targets run, on stable: every input must pass its target's checks.
//! Crash reproducers kept as regressions live in the corpus too.

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    for path in corpus(target) {
        let data = std::fs::read(&path).expect("a corpus file reads");
        let result = std::panic::catch_unwind(|| run(&data));
        assert!(result.is_ok(), "{target}: {} fails", path.display());
    }
}

#[test]
fn tcp_conn_corpus() {
    replay("tcp_conn", impnet_fuzz_harness::tcp_conn::run);
}

#[test]
fn reassembly_corpus() {
    replay("reassembly", impnet_fuzz_harness::reassembly::run);
}

#[test]
fn sim_impair_corpus() {
    replay("sim_impair", impnet_fuzz_harness::sim_impair::run);
}

#[test]
fn scenario_parse_corpus() {
    replay("scenario_parse", impnet_fuzz_harness::scenario_parse::run);
}

#[test]
fn ipv6_corpus() {
    replay("ipv6", impnet_fuzz_harness::ipv6::run);
}

#[test]
fn icmpv6_corpus() {
    replay("icmpv6", impnet_fuzz_harness::icmpv6::run);
}

#[test]
fn ndp_corpus() {
    replay("ndp", impnet_fuzz_harness::ndp::run);
}

#[test]
fn dhcp_corpus() {
    replay("dhcp", impnet_fuzz_harness::dhcp::run);
}

#[test]
fn dns_corpus() {
    replay("dns", impnet_fuzz_harness::dns::run);
}

#[test]
fn igmp_corpus() {
    replay("igmp", impnet_fuzz_harness::igmp::run);
}
