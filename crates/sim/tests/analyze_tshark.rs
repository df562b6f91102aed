//! `impnet_sim::analyze` against tshark: imp transfers over lossy simulated links are
//! captured, and per direction of each connection the analyzer must count exactly the
//! frames tshark marks with each of the five `tcp.analysis` kinds it reports
//! (retransmissions, fast and spurious ones, out-of-order segments, duplicate ACKs),
//! on the pcap and on the same capture converted to pcapng by editcap.
//!
//! Without tshark (or editcap) the comparison is skipped, said through the shared
//! `require` helper, unless `IMP_REQUIRE_TSHARK` or `IMP_REQUIRE_ROOT` is set (as CI
//! sets them): then it fails.

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

use impnet_core::Duration;
use impnet_phy::LinkConfig;
use impnet_sim::analyze::{Analysis, Direction, analyze_capture};
use impnet_sim::bulk::{BulkConfig, run_bulk};

/// One kind of count: tshark's display filter, the analyzer's name, and its count in a
/// direction.
type Kind = (&'static str, &'static str, fn(&Direction) -> u64);

/// The counts compared.
const KINDS: [Kind; 5] = [
    ("tcp.analysis.retransmission", "retransmissions", |d| {
        d.retransmissions
    }),
    (
        "tcp.analysis.fast_retransmission",
        "fast_retransmissions",
        |d| d.fast_retransmissions,
    ),
    (
        "tcp.analysis.spurious_retransmission",
        "spurious_retransmissions",
        |d| d.spurious_retransmissions,
    ),
    ("tcp.analysis.out_of_order", "out_of_order", |d| {
        d.out_of_order
    }),
    ("tcp.analysis.duplicate_ack", "duplicate_acks", |d| {
        d.duplicate_acks
    }),
];

/// Per direction (`from->to`, as the analyzer writes the addresses) and kind, a count;
/// zeros left out, as tshark lists only what it marked.
type Counts = BTreeMap<(String, &'static str), u64>;

/// One end of a segment from tshark's fields (IPv4 or IPv6 address, port), written as
/// the analyzer writes it.
fn endpoint(v4: &str, v6: &str, port: &str) -> String {
    let ip: IpAddr = if v4.is_empty() { v6 } else { v4 }
        .parse()
        .unwrap_or_else(|e| panic!("tshark's address {v4:?}/{v6:?}: {e}"));
    let port: u16 = port.parse().expect("tshark's port");
    SocketAddr::new(ip, port).to_string()
}

/// tshark's counts of every kind, per direction.
fn tshark_counts(path: &Path) -> Counts {
    let mut counts = Counts::new();
    for (filter, kind, _) in KINDS {
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(path)
            .args(["-Y", filter, "-T", "fields", "-E", "separator=,"])
            .args(["-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport"])
            .args(["-e", "ip.dst", "-e", "ipv6.dst", "-e", "tcp.dstport"])
            .output()
            .expect("tshark runs");
        assert!(
            out.status.success(),
            "tshark failed on {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split(',').collect();
            let [s4, s6, sport, d4, d6, dport] = f[..] else {
                panic!("tshark's fields: {line:?}");
            };
            let name = format!("{}->{}", endpoint(s4, s6, sport), endpoint(d4, d6, dport));
            *counts.entry((name, kind)).or_default() += 1;
        }
    }
    counts
}

/// The analyzer's counts of every kind, per direction.
fn imp_counts(analysis: &Analysis) -> Counts {
    let mut counts = Counts::new();
    for dir in analysis.connections.iter().flat_map(|c| &c.directions) {
        for (_, kind, count) in KINDS {
            let n = count(dir);
            if n > 0 {
                counts.insert((format!("{}->{}", dir.from, dir.to), kind), n);
            }
        }
    }
    counts
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

/// Compares the analyzer's counts of every kind with tshark's, per direction; returns
/// the counts (the two agree).
fn compare(path: &Path) -> Counts {
    let analysis = analyze_capture(path).expect("reads the capture");
    assert!(analysis.read_error.is_none(), "{:?}", analysis.read_error);
    assert_eq!(analysis.malformed, 0, "{}", path.display());
    let ours = imp_counts(&analysis);
    let theirs = tshark_counts(path);
    println!("{}: imp {ours:?}", path.display());
    assert_eq!(
        ours,
        theirs,
        "{}: imp (left), tshark (right)",
        path.display()
    );
    ours
}

/// The total of one kind over every direction.
fn total(counts: &Counts, kind: &str) -> u64 {
    counts
        .iter()
        .filter(|((_, k), _)| *k == kind)
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn retransmissions_agree_with_tshark() {
    if !require::have_tshark() {
        return;
    }
    let cases = [
        ("loss1", lossy(0.01, 20), 2 << 20, 1),
        ("loss3", lossy(0.03, 40), 1 << 20, 7),
        ("loss10", lossy(0.10, 10), 256 << 10, 3),
        ("reorder", reordering(), 1 << 20, 5),
    ];
    let mut seen = BTreeMap::new();
    for (name, link, bytes, seed) in cases {
        let path = capture(name, link, bytes, seed);
        let counts = compare(&path);
        for (_, kind, _) in KINDS {
            *seen.entry(kind).or_insert(0) += total(&counts, kind);
        }
        std::fs::remove_file(&path).unwrap();
    }
    // Each kind was compared on something: no agreement of 0 with 0 only.
    for (_, kind, _) in KINDS {
        assert!(seen[kind] > 0, "no case gave any {kind}: {seen:?}");
    }
}

#[test]
fn pcapng_from_editcap_agrees_too() {
    if !require::have_tshark() || !require::have("editcap") {
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
    assert!(total(&compare(&ng), "retransmissions") > 0);
    std::fs::remove_file(&pcap).unwrap();
    std::fs::remove_file(&ng).unwrap();
}
