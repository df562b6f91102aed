//! IPv6 in the simulator: `scenarios/routed/ipv6-dual-stack.toml`, an IPv4 and an
//! IPv6 bulk flow through two routers and one bottleneck, both complete byte-exact,
//! the IPv6 one really over IPv6 (its frames counted in the bottleneck's pcap), and
//! the run replays from its seed, the tracer and the analyzer follow the IPv6 flow
//! as they do the IPv4 one (its analysis agreeing with tshark's on the bottleneck's
//! capture); the scenario file's `family` errors (an unknown family, ping and ftp
//! flows over IPv6).

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::path::{Path, PathBuf};
use std::process::Command;

use impnet_sim::analyze::analyze_capture;
use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

fn scenario() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/routed/ipv6-dual-stack.toml");
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn flow<'a>(report: &'a Report, name: &str) -> &'a FlowReport {
    report
        .flows
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
}

/// Frames in a pcap (Ethernet link type) by EtherType: (IPv4, IPv6).
fn frames_by_family(pcap: &Path) -> (u64, u64) {
    let bytes = std::fs::read(pcap).unwrap_or_else(|e| panic!("{}: {e}", pcap.display()));
    let (mut v4, mut v6) = (0, 0);
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &bytes[at + 16..(at + 16 + caplen).min(bytes.len())];
        match frame.get(12..14) {
            Some([0x08, 0x00]) => v4 += 1,
            Some([0x86, 0xdd]) => v6 += 1,
            _ => {}
        }
        at += 16 + caplen;
    }
    (v4, v6)
}

/// A flow has a trace (RTT samples, retransmissions) and an analysis of its own
/// connection, which agree.
fn traced(flow: &FlowReport, client_prefix: &str) {
    assert!(flow.rtt.samples > 10, "{flow:?}");
    assert!(flow.retransmits > 0, "{flow:?}");
    let judged = flow.analysis.as_ref().expect("the flow's analysis");
    assert!(judged.client.starts_with(client_prefix), "{judged:?}");
    assert!(judged.segments > (4 << 20) / 1440, "{judged:?}");
    // The tracer counts every segment sent again; Wireshark calls some of those, sent
    // within an RTT of the original, out of order rather than retransmissions.
    let sent = &judged.directions[0];
    assert_eq!(
        sent.retransmissions + sent.out_of_order,
        flow.retransmits,
        "{judged:?}"
    );
}

/// The IPv6 flow is traced and analysed as the IPv4 one is, and the analyzer's
/// retransmission count for its connection on the bottleneck's capture is tshark's.
fn traced_and_judged((v4, v6): (&FlowReport, &FlowReport), pcap: &Path) {
    traced(v4, "10.");
    traced(v6, "[fd00:");
    let analysis = analyze_capture(pcap).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(analysis.malformed, 0);
    let conn = analysis
        .connections
        .iter()
        .find(|c| c.client.starts_with('['))
        .expect("an IPv6 connection in the bottleneck's capture");
    assert!(
        analysis
            .connections
            .iter()
            .any(|c| !c.client.starts_with('['))
    );
    if !require::have_tshark() {
        return;
    }
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", "ipv6 && tcp.analysis.retransmission", "-T", "fields"])
        .args(["-e", "frame.number"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let marked = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
    assert_eq!(conn.retransmissions, marked, "{conn:?}");
}

#[test]
fn an_ipv4_and_an_ipv6_flow_share_a_bottleneck_byte_exact_and_replay() {
    let scenario = scenario();
    assert!(scenario.flows.iter().any(|f| f.ipv6));
    assert!(scenario.flows.iter().any(|f| !f.ipv6));
    let dir = std::env::temp_dir().join(format!("imp-dual-stack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = experiment::run(&scenario, Some(&dir), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    for name in ["v4", "v6"] {
        let f = flow(&out.report, name);
        assert!(f.completed, "{name} did not complete: {f:?}");
        assert_eq!(f.bytes, 4 << 20, "{name}");
        assert_eq!(f.data_ok, Some(true), "{name}: stream not byte-exact");
    }
    // They shared the 10 Mbit/s link: together no faster than it, each a real share.
    let (v4, v6) = (flow(&out.report, "v4"), flow(&out.report, "v6"));
    assert!(
        v4.goodput_bps + v6.goodput_bps < 10e6 * 1.05,
        "{v4:?} {v6:?}"
    );
    assert!(
        v4.goodput_bps > 1e6 && v6.goodput_bps > 1e6,
        "{v4:?} {v6:?}"
    );
    // The IPv6 flow's segments crossed the bottleneck as IPv6: at least 4 MiB in
    // full-sized segments of at most 1440 bytes, plus ACKs.
    let (frames4, frames6) = frames_by_family(&dir.join("bottleneck.pcap"));
    traced_and_judged((v4, v6), &dir.join("bottleneck.pcap"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(frames6 > (4 << 20) / 1440, "IPv6 frames: {frames6}");
    assert!(frames4 > (4 << 20) / 1460, "IPv4 frames: {frames4}");
    // The same seed gives the same run.
    let again = experiment::run(&scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        serde_json::to_string(&out.report).unwrap(),
        serde_json::to_string(&again.report).unwrap()
    );
}

#[test]
fn a_bad_family_is_refused_with_its_line() {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/routed/ipv6-dual-stack.toml"),
    )
    .unwrap();
    let bad = text.replace("family = \"ipv6\"", "family = \"ipx\"");
    let err = Scenario::parse(&bad, "dual.toml").unwrap_err().to_string();
    assert!(err.contains("family") && err.contains("ipx"), "{err}");
    let ping = text.replace(
        "type = \"bulk\"\nfamily = \"ipv6\"\nfrom = \"sender\"\nto = \"receiver\"\nbytes = \"4M\"\nrecord = \"64K\"",
        "type = \"ping\"\nfamily = \"ipv6\"\nfrom = \"sender\"\nto = \"receiver\"",
    );
    assert_ne!(ping, text);
    let err = Scenario::parse(&ping, "dual.toml").unwrap_err().to_string();
    assert!(err.contains("family") && err.contains("IPv4 only"), "{err}");
    let ftp = text.replace(
        "type = \"bulk\"\nfamily = \"ipv6\"",
        "type = \"ftp\"\nfamily = \"ipv6\"",
    );
    assert_ne!(ftp, text);
    let err = Scenario::parse(&ftp, "dual.toml").unwrap_err().to_string();
    assert!(err.contains("family") && err.contains("ftp flows"), "{err}");
    // The same file with the family spelt out for IPv4 parses.
    let v4 = text.replace("family = \"ipv6\"", "family = \"ipv4\"");
    let parsed = Scenario::parse(&v4, "dual.toml").unwrap_or_else(|e| panic!("{e}"));
    assert!(parsed.flows.iter().all(|f| !f.ipv6));
}
