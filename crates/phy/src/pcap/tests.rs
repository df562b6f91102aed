use std::process::Command;

use super::*;

// The skip-or-fail policy every test crate shares (relative to this file's directory).
// Its root check calls libc's geteuid, the one unsafe call; this test uses only
// have_tshark.
#[path = "../../../impnet/tests/common/require.rs"]
#[allow(unsafe_code)]
mod require;
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
    // CI installs tshark and sets IMP_REQUIRE_TSHARK (and IMP_REQUIRE_ROOT), so there
    // a missing tshark fails the test instead of skipping it.
    if !require::have_tshark() {
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

#[test]
fn reader_reads_back_what_the_writer_wrote() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write_packet(Instant::from_nanos(1_000_000_001), &udp_frame(b"a"))
        .unwrap();
    w.write_packet(Instant::from_nanos(2_500_000_000), &udp_frame(b"bc"))
        .unwrap();
    let file = w.into_inner();
    let mut r = PcapReader::new(&file).unwrap();
    assert!(!r.is_pcapng());
    assert_eq!(r.linktype(), Some(LINKTYPE_ETHERNET));
    let first = r.next().unwrap().unwrap();
    assert_eq!(first.ts_nanos, 1_000_000_001);
    assert_eq!(first.data, &udp_frame(b"a")[..]);
    let ip = ip_payload(first.linktype, first.data).unwrap();
    assert_eq!(ip[0] >> 4, 4);
    assert_eq!(r.next().unwrap().unwrap().ts_nanos, 2_500_000_000);
    assert!(r.next().is_none());
}

/// A classic big-endian microsecond pcap of Linux cooked (SLL) frames.
#[test]
fn reader_takes_big_endian_microseconds_and_cooked_frames() {
    let ip = &udp_frame(b"x")[14..];
    let mut file = Vec::new();
    file.extend_from_slice(&PCAP_MAGIC_MICROS.to_be_bytes());
    file.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&65535u32.to_be_bytes());
    file.extend_from_slice(&LINKTYPE_LINUX_SLL.to_be_bytes());
    let mut frame = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
    frame.extend_from_slice(ip);
    file.extend_from_slice(&7u32.to_be_bytes());
    file.extend_from_slice(&250_000u32.to_be_bytes());
    file.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    file.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    file.extend_from_slice(&frame);
    let mut r = PcapReader::new(&file).unwrap();
    let rec = r.next().unwrap().unwrap();
    assert_eq!(rec.ts_nanos, 7_250_000_000);
    assert_eq!(ip_payload(rec.linktype, rec.data), Some(ip));
    // SLL2 puts the protocol first, in a 20-byte header.
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0,
    ];
    sll2.extend_from_slice(ip);
    assert_eq!(ip_payload(LINKTYPE_LINUX_SLL2, &sll2), Some(ip));
    assert_eq!(ip_payload(LINKTYPE_RAW, ip), Some(ip));
    assert_eq!(ip_payload(LINKTYPE_ETHERNET, &[0; 13]), None);
}

/// IPv6 packets come out of every link type that carries them, and a version nibble
/// that disagrees with the link layer's type is refused.
#[test]
fn ip_payload_takes_ipv6_from_every_link_type() {
    let mut ip6 = vec![0x60, 0, 0, 0, 0, 0, 59, 64];
    ip6.extend_from_slice(&[0xfd; 32]);
    let v4 = &udp_frame(b"x")[14..];
    let mut eth = vec![0; 12];
    eth.extend_from_slice(&[0x86, 0xdd]);
    eth.extend_from_slice(&ip6);
    assert_eq!(ip_payload(LINKTYPE_ETHERNET, &eth), Some(&ip6[..]));
    // A VLAN tag in front.
    let mut tagged = vec![0; 12];
    tagged.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd]);
    tagged.extend_from_slice(&ip6);
    assert_eq!(ip_payload(LINKTYPE_ETHERNET, &tagged), Some(&ip6[..]));
    assert_eq!(ip_payload(LINKTYPE_RAW, &ip6), Some(&ip6[..]));
    assert_eq!(ip_payload(LINKTYPE_IPV6, &ip6), Some(&ip6[..]));
    assert_eq!(ip_payload(LINKTYPE_IPV6, v4), None);
    assert_eq!(ip_payload(LINKTYPE_IPV4, &ip6), None);
    for family in [10u32, 24, 28, 30] {
        for bytes in [family.to_le_bytes(), family.to_be_bytes()] {
            let mut null = bytes.to_vec();
            null.extend_from_slice(&ip6);
            assert_eq!(ip_payload(LINKTYPE_NULL, &null), Some(&ip6[..]), "{family}");
        }
    }
    let mut null = 2u32.to_le_bytes().to_vec();
    null.extend_from_slice(&ip6);
    assert_eq!(
        ip_payload(LINKTYPE_NULL, &null),
        None,
        "AF_INET with an IPv6 packet"
    );
    // An IPv6 ethertype over an IPv4 packet.
    let mut wrong = vec![0; 12];
    wrong.extend_from_slice(&[0x86, 0xdd]);
    wrong.extend_from_slice(v4);
    assert_eq!(ip_payload(LINKTYPE_ETHERNET, &wrong), None);
    assert_eq!(ip_payload(LINKTYPE_RAW, &[0x50; 40]), None);
}

fn ng_block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
    let word = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut padded = body.to_vec();
    padded.resize(body.len().div_ceil(4) * 4, 0);
    let len = 12 + padded.len() as u32;
    let mut block = Vec::new();
    block.extend_from_slice(&word(kind));
    block.extend_from_slice(&word(len));
    block.extend_from_slice(&padded);
    block.extend_from_slice(&word(len));
    block
}

/// pcapng in both byte orders: a section header, an interface with nanosecond
/// resolution, an enhanced packet block and a simple packet block; then a second
/// section with a binary resolution (2^-10 s).
#[test]
fn reader_takes_pcapng() {
    let frame = udp_frame(b"ng");
    for big in [false, true] {
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut file = Vec::new();
        let mut shb = w32(0x1a2b_3c4d).to_vec();
        shb.extend_from_slice(&[w16(1), w16(0)].concat());
        shb.extend_from_slice(&[0xff; 8]);
        file.extend(ng_block(big, 0x0a0d_0d0a, &shb));
        let idb = |resol: u8| {
            let mut b = [w16(1), w16(0)].concat();
            b.extend_from_slice(&w32(0)); // snaplen: none
            b.extend_from_slice(&[w16(9), w16(1)].concat());
            b.extend_from_slice(&[resol, 0, 0, 0]);
            b.extend_from_slice(&[0; 4]); // opt_endofopt
            b
        };
        file.extend(ng_block(big, 1, &idb(9)));
        let ts: u64 = 3_000_000_123;
        let mut epb = [w32(0), w32((ts >> 32) as u32), w32(ts as u32)].concat();
        epb.extend_from_slice(&[w32(frame.len() as u32), w32(frame.len() as u32)].concat());
        epb.extend_from_slice(&frame);
        file.extend(ng_block(big, 6, &epb));
        let mut spb = w32(frame.len() as u32).to_vec();
        spb.extend_from_slice(&frame);
        file.extend(ng_block(big, 3, &spb));
        file.extend(ng_block(big, 0x0bad, &[1, 2, 3])); // unknown: skipped
        file.extend(ng_block(big, 0x0a0d_0d0a, &shb));
        file.extend(ng_block(big, 1, &idb(0x80 | 10)));
        let mut epb = [w32(0), w32(0), w32(2048)].concat();
        epb.extend_from_slice(&[w32(frame.len() as u32), w32(frame.len() as u32)].concat());
        epb.extend_from_slice(&frame);
        file.extend(ng_block(big, 6, &epb));
        let records: Vec<_> = PcapReader::new(&file)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(records.len(), 3, "big-endian {big}");
        assert_eq!(records[0].ts_nanos, ts);
        assert_eq!(records[0].data, &frame[..]);
        assert_eq!(
            records[1].ts_nanos, ts,
            "a simple block takes the last time"
        );
        assert_eq!(records[1].data, &frame[..]);
        assert_eq!(records[2].ts_nanos, 2_000_000_000);
        // Cut anywhere: an error naming an offset, or fewer records, never a panic.
        for n in 0..file.len() {
            if let Ok(r) = PcapReader::new(&file[..n]) {
                for rec in r {
                    if let Err(e) = rec {
                        assert!(e.to_string().contains("byte"), "{e}");
                    }
                }
            }
        }
    }
}
