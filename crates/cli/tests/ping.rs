//! `imp ping` end to end: the binary runs on its built-in network, prints ping(8)-style
//! lines and writes a pcap that tshark reads without complaint.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

#[path = "../../impnet/tests/common/require.rs"]
mod require;

use std::process::Command;

fn imp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_imp"))
}

#[test]
fn ping_with_no_arguments_gets_every_reply() {
    let out = imp().arg("ping").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.matches("bytes from 10.0.0.2: icmp_seq=").count(),
        5,
        "{text}"
    );
    assert!(
        text.contains("5 packets transmitted, 5 received, 0% packet loss"),
        "{text}"
    );
    assert!(text.contains("rtt min/avg/max/mdev = "), "{text}");
}

#[test]
fn ping_over_ipv6_on_the_simulated_network_gets_every_reply() {
    let out = imp()
        .args([
            "ping", "-6", "--count", "4", "--delay", "10ms", "--size", "3000",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("PING fd00::2 (fd00::2) 3000(3048) bytes of data."),
        "{text}"
    );
    for seq in 1..=4 {
        assert!(
            text.contains(&format!(
                "3008 bytes from fd00::2: icmp_seq={seq} ttl=64 time="
            )),
            "{text}"
        );
    }
    assert!(
        text.contains("4 packets transmitted, 4 received, 0% packet loss"),
        "{text}"
    );
    assert!(text.contains("--- fd00::2 ping statistics ---"), "{text}");
}

#[test]
fn ping_json_reports_rtt_from_the_link_delay() {
    let out = imp()
        .args([
            "ping", "--json", "--count", "3", "--delay", "25ms", "--rate", "1gbit",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["transmitted"], 3);
    assert_eq!(v["received"], 3);
    // Two 25 ms propagation delays plus a little serialisation time at 1 Gbit/s.
    let min = v["rtt_min_ms"].as_f64().unwrap();
    assert!((50.0..50.5).contains(&min), "rtt {min} ms");
}

#[test]
fn ping_under_total_loss_reports_it() {
    let out = imp()
        .args(["ping", "--count", "2", "--loss", "100%"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("2 packets transmitted, 0 received, 100% packet loss"),
        "{text}"
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = imp().args(["ping", "--rate", "fast"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fast"));
    let out = imp().args(["ping", "--loss", "120%"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("probability"));
}

#[test]
fn ping_pcap_is_read_by_tshark_with_good_checksums() {
    let dir = std::env::temp_dir().join(format!("imp-ping-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("ping.pcap");
    let out = imp()
        .args(["ping", "--count", "3", "--size", "3000", "--pcap"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&pcap).unwrap();
    // Nanosecond pcap magic, little-endian, Ethernet link type.
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 1);
    if !require::have_tshark() {
        std::fs::remove_dir_all(&dir).ok();
        return;
    }
    let tshark = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "frame.protocols",
            "-e",
            "_ws.expert.message",
        ])
        .output()
        .expect("tshark runs");
    assert!(
        tshark.status.success(),
        "{}",
        String::from_utf8_lossy(&tshark.stderr)
    );
    let text = String::from_utf8(tshark.stdout).unwrap();
    assert!(text.contains("arp"), "no ARP in the capture:\n{text}");
    assert!(text.contains("icmp"), "no ICMP in the capture:\n{text}");
    for line in text.lines() {
        let lower = line.to_lowercase();
        assert!(!lower.contains("malformed"), "malformed packet: {line}");
        assert!(
            !lower.contains("bad checksum") && !lower.contains("incorrect"),
            "bad checksum: {line}"
        );
    }
    // 3000-byte pings are fragmented: the reassembled requests and replies are there.
    let echo = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "icmp.type == 0 || icmp.type == 8"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&echo.stdout);
    assert_eq!(
        listing.lines().count(),
        6,
        "expected 3 requests and 3 replies:\n{listing}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
