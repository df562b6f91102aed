//! `impnet_sim::analyze` against tshark: imp transfers over lossy simulated links are
//! captured, and the analyzer's retransmission count must equal the number of frames
//! tshark marks `tcp.analysis.retransmission`, on the pcap and on the same capture
//! converted to pcapng by editcap.
//!
//! Without tshark (or editcap) the comparison is skipped with a note, unless
//! `IMP_REQUIRE_TSHARK` or `IMP_REQUIRE_ROOT` is set (as CI sets them): then it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use impnet_core::Duration;
use impnet_phy::LinkConfig;
use impnet_sim::analyze::analyze_capture;
use impnet_sim::bulk::{BulkConfig, run_bulk};

fn required() -> bool {
    std::env::var_os("IMP_REQUIRE_TSHARK").is_some()
        || std::env::var_os("IMP_REQUIRE_ROOT").is_some()
}

/// Whether `tool` runs; panics when it does not but is required.
fn have(tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        !required(),
        "IMP_REQUIRE_TSHARK or IMP_REQUIRE_ROOT is set but {tool} is not on PATH"
    );
    println!("{tool} not on PATH: skipping the comparison with Wireshark's analysis");
    false
}

fn tshark_count(path: &Path, filter: &str) -> u64 {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64
}

fn capture(name: &str, link: LinkConfig, bytes: u64, seed: u64) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "imp-analyze-{name}-{seed}-{}.pcap",
        std::process::id()
    ));
    let mut config = BulkConfig::new(bytes, link, seed);
    config.pcap = Some(path.clone());
    let result = run_bulk(&config).unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
    assert_eq!(result.bytes, bytes, "{name} seed {seed}: short transfer");
    path
}

fn lossy(loss: f64, rtt_ms: u64) -> LinkConfig {
    LinkConfig {
        rate_bps: 20_000_000,
        delay: Duration::from_micros(rtt_ms * 500),
        queue_limit_bytes: 64 * 1024,
        loss,
        ..LinkConfig::default()
    }
}

/// Loss, frames held back past later ones, and duplicates: spurious retransmissions
/// and out-of-order segments.
fn reordering() -> LinkConfig {
    LinkConfig {
        reorder: 0.02,
        reorder_delay: Duration::from_millis(30),
        duplicate: 0.01,
        ..lossy(0.01, 20)
    }
}

/// Compares retransmissions, spurious retransmissions and zero-window segments.
fn compare(path: &Path) -> u64 {
    let analysis = analyze_capture(path).expect("reads the capture");
    assert!(analysis.read_error.is_none(), "{:?}", analysis.read_error);
    let ours: u64 = analysis.connections.iter().map(|c| c.retransmissions).sum();
    let spurious: u64 = analysis
        .connections
        .iter()
        .map(|c| c.spurious_retransmissions)
        .sum();
    let theirs = tshark_count(path, "tcp.analysis.retransmission");
    let theirs_spurious = tshark_count(path, "tcp.analysis.spurious_retransmission");
    println!(
        "{}: imp {ours} retransmissions ({spurious} spurious), tshark {theirs} ({theirs_spurious})",
        path.display()
    );
    assert_eq!(ours, theirs, "{}: retransmissions", path.display());
    assert_eq!(spurious, theirs_spurious, "{}: spurious", path.display());
    ours
}

#[test]
fn retransmissions_agree_with_tshark() {
    if !have("tshark") {
        return;
    }
    let cases = [
        ("loss1", lossy(0.01, 20), 2 << 20, 1),
        ("loss3", lossy(0.03, 40), 1 << 20, 7),
        ("loss10", lossy(0.10, 10), 256 << 10, 3),
        ("reorder", reordering(), 1 << 20, 5),
    ];
    let mut total = 0;
    for (name, link, bytes, seed) in cases {
        let path = capture(name, link, bytes, seed);
        total += compare(&path);
        std::fs::remove_file(&path).unwrap();
    }
    assert!(total > 0, "the lossy links caused retransmissions");
}

#[test]
fn pcapng_from_editcap_agrees_too() {
    if !have("tshark") || !have("editcap") {
        return;
    }
    let pcap = capture("ng", lossy(0.02, 20), 1 << 20, 11);
    let ng = pcap.with_extension("pcapng");
    let status = Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&ng)
        .status()
        .expect("editcap runs");
    assert!(status.success());
    let from_pcap = analyze_capture(&pcap).unwrap();
    let from_ng = analyze_capture(&ng).unwrap();
    assert_eq!(from_pcap.connections, from_ng.connections);
    assert!(compare(&ng) > 0);
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_file(&ng).unwrap();
}
