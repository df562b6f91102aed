use std::process::Command;

use super::*;
use crate::testutil::MockDevice;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// One's-complement sum of 16-bit big-endian words (RFC 1071).
fn ones_complement_sum(mut sum: u32, data: &[u8]) -> u32 {
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            u16::from(chunk[0]) << 8
        };
        sum += u32::from(word);
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A valid Ethernet / IPv4 / UDP frame from 10.0.0.1:5000 to 10.0.0.2:6000, built by
/// hand so this crate needs no packet library.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let src_ip = [10, 0, 0, 1];
    let dst_ip = [10, 0, 0, 2];
    let udp_len = 8 + payload.len() as u16;
    let ip_len = 20 + udp_len;
    let mut f = Vec::new();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // destination MAC
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // source MAC
    f.extend_from_slice(&0x0800u16.to_be_bytes()); // EtherType IPv4
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&ip_len.to_be_bytes());
    ip.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0]); // id, DF, TTL, UDP, csum
    ip.extend_from_slice(&src_ip);
    ip.extend_from_slice(&dst_ip);
    let csum = fold(ones_complement_sum(0, &ip));
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut udp = Vec::new();
    udp.extend_from_slice(&5000u16.to_be_bytes());
    udp.extend_from_slice(&6000u16.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src_ip);
    pseudo.extend_from_slice(&dst_ip);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    let csum = fold(ones_complement_sum(ones_complement_sum(0, &pseudo), &udp));
    udp[6..8].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&udp);
    f
}

#[test]
fn header_and_records_have_every_field_right() {
    let path =
        std::env::temp_dir().join(format!("imp-phy-pcap-fields-{}.pcap", std::process::id()));
    let first = vec![0xaa; 60];
    let second = vec![0x55; 1514];
    {
        let mut w = PcapWriter::create(&path).unwrap();
        w.write_packet(Instant::from_nanos(1_000_000_007), &first)
            .unwrap();
        w.write_packet(Instant::from_nanos(3_999_999_999), &second)
            .unwrap();
        w.flush().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    assert_eq!(
        &bytes[0..4],
        &[0x4d, 0x3c, 0xb2, 0xa1],
        "nanosecond magic, little-endian"
    );
    assert_eq!(u32_at(&bytes, 0), 0xa1b2_3c4d);
    assert_eq!(u16_at(&bytes, 4), 2, "version major");
    assert_eq!(u16_at(&bytes, 6), 4, "version minor");
    assert_eq!(u32_at(&bytes, 8), 0, "thiszone");
    assert_eq!(u32_at(&bytes, 12), 0, "sigfigs");
    assert_eq!(u32_at(&bytes, 16), 65535, "snaplen");
    assert_eq!(u32_at(&bytes, 20), 1, "LINKTYPE_ETHERNET");

    let r1 = 24;
    assert_eq!(u32_at(&bytes, r1), 1, "ts seconds");
    assert_eq!(u32_at(&bytes, r1 + 4), 7, "ts nanoseconds");
    assert_eq!(u32_at(&bytes, r1 + 8), 60, "captured length");
    assert_eq!(u32_at(&bytes, r1 + 12), 60, "original length");
    assert_eq!(&bytes[r1 + 16..r1 + 16 + 60], first.as_slice());

    let r2 = r1 + 16 + 60;
    assert_eq!(u32_at(&bytes, r2), 3);
    assert_eq!(u32_at(&bytes, r2 + 4), 999_999_999);
    assert_eq!(u32_at(&bytes, r2 + 8), 1514);
    assert_eq!(u32_at(&bytes, r2 + 12), 1514);
    assert_eq!(&bytes[r2 + 16..], second.as_slice());
}

#[test]
fn frames_beyond_the_snaplen_are_truncated_but_keep_their_length() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write_packet(Instant::ZERO, &vec![1; 70_000]).unwrap();
    let bytes = w.into_inner();
    assert_eq!(u32_at(&bytes, 24 + 8), 65535);
    assert_eq!(u32_at(&bytes, 24 + 12), 70_000);
    assert_eq!(bytes.len(), 24 + 16 + 65535);
}

#[test]
fn wrapper_records_sent_and_received_frames_with_their_time() {
    let mut inner = MockDevice::default();
    inner.push_rx(b"incoming frame");
    inner.next_poll = Some(Instant::from_millis(9));
    let mut dev = Pcap::new(inner, PcapWriter::new(Vec::new()).unwrap());
    assert_eq!(dev.mtu(), 1514);
    assert_eq!(dev.poll_at(), Some(Instant::from_millis(9)));
    assert_eq!(dev.send(Instant::from_nanos(5), b"outgoing"), Ok(true));
    let mut buf = [0u8; 64];
    assert_eq!(dev.recv(Instant::from_nanos(6), &mut buf), Ok(Some(14)));
    assert_eq!(dev.recv(Instant::from_nanos(7), &mut buf), Ok(None));
    let (inner, writer) = dev.into_parts();
    assert_eq!(
        inner.sent,
        vec![(Instant::from_nanos(5), b"outgoing".to_vec())]
    );
    let bytes = writer.into_inner();
    let r1 = 24;
    assert_eq!(u32_at(&bytes, r1 + 4), 5);
    assert_eq!(&bytes[r1 + 16..r1 + 24], b"outgoing");
    let r2 = r1 + 16 + 8;
    assert_eq!(u32_at(&bytes, r2 + 4), 6);
    assert_eq!(&bytes[r2 + 16..], b"incoming frame");
}

#[test]
fn refused_frames_are_not_recorded() {
    let inner = MockDevice {
        refuse_sends: 1,
        ..MockDevice::default()
    };
    let mut dev = Pcap::new(inner, PcapWriter::new(Vec::new()).unwrap());
    assert_eq!(dev.send(Instant::ZERO, b"retry me"), Ok(false));
    assert_eq!(dev.send(Instant::ZERO, b"retry me"), Ok(true));
    let bytes = dev.into_parts().1.into_inner();
    assert_eq!(bytes.len(), 24 + 16 + 8, "one record, not two");
}

#[test]
fn capture_write_failures_surface_as_device_errors() {
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // Take the file header, fail afterwards.
            if buf.len() == 24 {
                Ok(24)
            } else {
                Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
            }
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut dev = Pcap::new(MockDevice::default(), PcapWriter::new(Broken).unwrap());
    assert!(matches!(
        dev.send(Instant::ZERO, b"x"),
        Err(DeviceError::Io(io::ErrorKind::StorageFull, _))
    ));
}

#[test]
fn hand_built_udp_frame_is_valid() {
    let f = udp_frame(b"hello");
    assert_eq!(f.len(), 14 + 20 + 8 + 5);
    // Checksums verify to zero over their ranges.
    assert_eq!(fold(ones_complement_sum(0, &f[14..34])), 0);
}

#[test]
fn tshark_reads_the_capture() {
    if Command::new("tshark").arg("--version").output().is_err() {
        // CI installs tshark and sets IMP_REQUIRE_TSHARK (and IMP_REQUIRE_ROOT, which
        // requires every tool) so the check cannot be skipped.
        assert!(
            std::env::var_os("IMP_REQUIRE_TSHARK").is_none()
                && std::env::var_os("IMP_REQUIRE_ROOT").is_none(),
            "IMP_REQUIRE_TSHARK or IMP_REQUIRE_ROOT is set but tshark is not on PATH"
        );
        println!("tshark not on PATH: skipping the Wireshark interoperability check");
        return;
    }
    let path =
        std::env::temp_dir().join(format!("imp-phy-pcap-tshark-{}.pcap", std::process::id()));
    {
        let mut w = PcapWriter::create(&path).unwrap();
        w.write_packet(Instant::from_nanos(1_000_000_001), &udp_frame(b"first"))
            .unwrap();
        w.write_packet(Instant::from_nanos(2_500_000_000), &udp_frame(b"second"))
            .unwrap();
        w.flush().unwrap();
    }
    let summary = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(&path)
        .output()
        .unwrap();
    let fields = Command::new("tshark")
        .args([
            "-n",
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "udp.srcport",
        ])
        .args([
            "-e",
            "udp.dstport",
            "-e",
            "ip.checksum",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .args(["-o", "udp.check_checksum:TRUE", "-e", "_ws.expert", "-r"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        summary.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let text = String::from_utf8(summary.stdout).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "one line per frame:\n{text}");
    for line in &lines {
        assert!(
            line.contains("10.0.0.1") && line.contains("10.0.0.2") && line.contains("UDP"),
            "{line}"
        );
    }
    let fields = String::from_utf8(fields.stdout).unwrap();
    let rows: Vec<Vec<&str>> = fields.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{fields}");
    assert!(
        rows[0][0].starts_with("1.000000001"),
        "nanosecond timestamp: {fields}"
    );
    assert!(rows[1][0].starts_with("2.500000000"), "{fields}");
    assert_eq!((rows[0][1], rows[0][2]), ("5000", "6000"));
    assert!(
        rows.iter().all(|r| r.get(4).is_none_or(|e| e.is_empty())),
        "checksums verify, no expert warnings: {fields}"
    );
}
