//! TSO: with `Offloads::tso_max` a sender builds segments larger than the MTU; cut the
//! way a device cuts them (virtio-net GSO: same headers, payload in MTU-sized pieces,
//! sequence numbers advanced, FIN and PSH on the last piece only, checksums completed),
//! they reach an ordinary receiver byte-exact.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::checksum;

use crate::iface::Offloads;
use crate::testutil::{IP_A, IP_B, MAC_A, MAC_B, drain};
use crate::time::{Duration, Instant};
use crate::{IfaceConfig, Stack, StackConfig};
use impnet_wire::ipv4::Cidr;

const MTU: usize = 1500;
const ETH: usize = 14;

fn host(
    seed: u64,
    mac: impnet_wire::ethernet::Address,
    addr: Ipv4Addr,
    offloads: Offloads,
) -> (Stack, crate::IfaceId) {
    let mut stack = Stack::new(StackConfig::default(), crate::testutil::secret(seed));
    let mut config = IfaceConfig::new(mac, MTU).with_offloads(offloads);
    config.addrs.push(Cidr::new(addr, 24).expect("prefix"));
    let iface = stack.add_interface(config);
    (stack, iface)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// What the device does with a frame from a stack whose TCP checksums hold only the
/// pseudo-header sum: cut it to the MTU (when larger) and complete every checksum.
fn device_output(frame: &[u8], segments: &mut usize) -> Vec<Vec<u8>> {
    if frame[12..14] != [0x08, 0x00] || frame[ETH + 9] != 6 {
        return vec![frame.to_vec()];
    }
    let ip = ETH;
    let ihl = usize::from(frame[ip] & 0x0f) * 4;
    let tcp = ip + ihl;
    let payload = tcp + usize::from(frame[tcp + 12] >> 4) * 4;
    let gso = MTU - (payload - ip);
    let src = Ipv4Addr::from(be32(&frame[ip + 12..]));
    let dst = Ipv4Addr::from(be32(&frame[ip + 16..]));
    let seq0 = be32(&frame[tcp + 4..]);
    let data = &frame[payload..];
    let pieces: Vec<&[u8]> = if data.is_empty() {
        vec![data]
    } else {
        data.chunks(gso).collect()
    };
    let last = pieces.len() - 1;
    let mut out = Vec::new();
    for (i, piece) in pieces.into_iter().enumerate() {
        let mut f = frame[..payload].to_vec();
        f.extend_from_slice(piece);
        let ip_len = (f.len() - ip) as u16;
        f[ip + 2..ip + 4].copy_from_slice(&ip_len.to_be_bytes());
        f[ip + 10..ip + 12].fill(0);
        let sum = checksum::finish(checksum::data(&f[ip..tcp]));
        f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
        let seq = seq0.wrapping_add((i * gso) as u32);
        f[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if i != last {
            f[tcp + 13] &= !(0x01 | 0x08);
        }
        f[tcp + 16..tcp + 18].fill(0);
        let pseudo = checksum::pseudo_header_v4(&src, &dst, 6, (f.len() - tcp) as u32);
        let sum = checksum::finish(checksum::combine(&[pseudo, checksum::data(&f[tcp..])]));
        f[tcp + 16..tcp + 18].copy_from_slice(&sum.to_be_bytes());
        assert!(f.len() <= MTU + ETH, "piece of {} bytes", f.len());
        out.push(f);
    }
    *segments += usize::from(frame.len() > MTU + ETH);
    out
}

/// Send `total` bytes A -> B over TSO; returns (bytes B read, large segments A built).
fn transfer(total: usize, offloads: Offloads) -> (Vec<u8>, usize) {
    let (mut a, _) = host(1, MAC_A, IP_A, offloads);
    let (mut b, b_if) = host(2, MAC_B, IP_B, Offloads::NONE);
    let a_if = crate::IfaceId(0);
    let mut now = Instant::ZERO;
    let listener = b
        .tcp_listen(SocketAddrV4::new(IP_B, 80), 4)
        .expect("listen");
    let client = a
        .tcp_connect(now, SocketAddrV4::new(IP_A, 0), SocketAddrV4::new(IP_B, 80))
        .expect("connect");
    let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 1031) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::new());
    let mut server = None;
    let mut large = 0;
    let mut buf = vec![0u8; 4096];
    for _ in 0..100_000 {
        if sent < total
            && let Ok(n) = a.tcp_send(now, client, &data[sent..])
        {
            sent += n;
        }
        let mut moved = 0;
        let mut frame = vec![0u8; 65536 + ETH];
        while let Some(tx) = a.poll_transmit(now, &mut frame) {
            for piece in device_output(&frame[..tx.len], &mut large) {
                b.handle_frame(now, b_if, &piece);
            }
            moved += 1;
        }
        for f in drain(&mut b, now) {
            a.handle_frame(now, a_if, &f);
            moved += 1;
        }
        if server.is_none() {
            server = b.tcp_accept(listener).ok();
        }
        if let Some(s) = server {
            while let Ok(n) = b.tcp_recv(now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == total {
            assert_eq!(got, data, "bytes differ");
            return (got, large);
        }
        if moved == 0 {
            now += Duration::from_millis(10);
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    panic!("transfer stalled: {} of {total} bytes", got.len());
}

#[test]
fn tso_segments_split_by_the_device_arrive_byte_exact() {
    let offloads = Offloads::CHECKSUM.with_tso(65535);
    let (_, large) = transfer(3 << 20, offloads);
    assert!(large > 10, "only {large} segments larger than the MTU");
}

#[test]
fn without_tso_no_segment_exceeds_the_mtu() {
    let offloads = Offloads {
        rx_checksum: false,
        ..Offloads::CHECKSUM
    };
    let (_, large) = transfer(1 << 20, offloads);
    assert_eq!(large, 0);
}

/// An application writing 8 KiB a round while the peer's ACKs take `lag` rounds to come
/// back (a path with that much in flight): returns the number of data segments A built
/// for `total` bytes.
fn small_writes(total: usize, lag: usize) -> usize {
    const WRITE: usize = 8192;
    let offloads = Offloads::CHECKSUM.with_tso(65535);
    let (mut a, _) = host(3, MAC_A, IP_A, offloads);
    let (mut b, b_if) = host(4, MAC_B, IP_B, Offloads::NONE);
    let a_if = crate::IfaceId(0);
    let mut now = Instant::ZERO;
    let listener = b
        .tcp_listen(SocketAddrV4::new(IP_B, 80), 4)
        .expect("listen");
    let client = a
        .tcp_connect(now, SocketAddrV4::new(IP_A, 0), SocketAddrV4::new(IP_B, 80))
        .expect("connect");
    let data: Vec<u8> = (0..total).map(|i| (i * 13 + i / 517) as u8).collect();
    let (mut sent, mut got, mut server) = (0usize, Vec::new(), None);
    let (mut large, mut data_segments) = (0, 0);
    let mut frame = vec![0u8; 65536 + ETH];
    let mut buf = vec![0u8; 1 << 16];
    let mut acks = Vec::new();
    for round in 0..200_000 {
        if sent < total {
            let end = (sent + WRITE).min(total);
            sent += a.tcp_send(now, client, &data[sent..end]).unwrap_or(0);
        }
        while let Some(tx) = a.poll_transmit(now, &mut frame) {
            let f = &frame[..tx.len];
            data_segments += usize::from(f.len() > ETH + 20 + 60 && f[ETH + 9] == 6);
            for piece in device_output(f, &mut large) {
                b.handle_frame(now, b_if, &piece);
            }
        }
        acks.extend(drain(&mut b, now).into_iter().map(|f| (round + lag, f)));
        while acks.first().is_some_and(|(due, _)| *due <= round) {
            let (_, f) = acks.remove(0);
            a.handle_frame(now, a_if, &f);
        }
        server = server.or_else(|| b.tcp_accept(listener).ok());
        if let Some(s) = server {
            while let Ok(n) = b.tcp_recv(now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == total {
            assert_eq!(got, data, "bytes differ");
            return data_segments;
        }
        now += Duration::from_micros(50);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    panic!("transfer stalled: {} of {total} bytes", got.len());
}

#[test]
fn small_writes_gather_into_large_segments_while_one_is_in_flight() {
    let total = 4 << 20;
    // 8 rounds of 8 KiB in flight: a large segment's worth. One segment per write
    // would be 512 (without gathering, cwnd and ACK bursts alone make about 330).
    let segments = small_writes(total, 8);
    assert!(
        segments < total / 8192 / 3,
        "{segments} data segments for {} writes",
        total / 8192
    );
}
