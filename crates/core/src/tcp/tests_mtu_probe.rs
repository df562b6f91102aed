//! Packetization-layer path MTU discovery end to end (RFC 4821, RFC 8899 §5.3;
//! `conn/mtu.rs`): two `Tcp`s on a virtual wire whose A-to-B direction silently drops
//! every datagram larger than a limit (a black hole: no ICMP). Every transfer is
//! checked byte for byte.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ONE_WAY: Duration = Duration::from_millis(10);
/// Serialization time of one segment (about 100 Mbit/s for 1500 bytes).
const PER_SEGMENT: Duration = Duration::from_micros(120);

struct InFlight {
    at: Instant,
    to_b: bool,
    bytes: Vec<u8>,
}

/// The pair and its wire; A's datagrams over `limit` bytes vanish.
struct Pair {
    a: Tcp,
    b: Tcp,
    now: Instant,
    wire: Vec<InFlight>,
    busy: [Instant; 2],
    limit: usize,
    /// Datagrams the black hole swallowed.
    swallowed: u64,
    /// The largest datagram that went through from A.
    largest_passed: usize,
}

impl Pair {
    fn transmit(&mut self) {
        let mut buf = vec![0u8; 1500];
        for to_b in [true, false] {
            loop {
                let tcp = if to_b { &mut self.a } else { &mut self.b };
                let Some(tx) = tcp.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                // 20 bytes of IPv4 header on the TCP segment.
                if to_b && tx.len + 20 > self.limit {
                    self.swallowed += 1;
                    continue;
                }
                if to_b {
                    self.largest_passed = self.largest_passed.max(tx.len + 20);
                }
                let line = &mut self.busy[usize::from(!to_b)];
                *line = (*line).max(self.now) + PER_SEGMENT;
                let at = *line + ONE_WAY;
                let bytes = buf[..tx.len].to_vec();
                self.wire.push(InFlight { at, to_b, bytes });
            }
        }
    }

    fn step(&mut self) -> bool {
        self.transmit();
        let next_wire = self.wire.iter().map(|s| s.at).min();
        let next = [next_wire, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        let (mut due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|s| s.at <= self.now);
        self.wire = rest;
        due.sort_by_key(|s| s.at);
        for seg in due {
            let (src, dst) = if seg.to_b { (A, B) } else { (B, A) };
            let packet = Packet::new_checked(&seg.bytes[..]).unwrap();
            let repr = Repr::parse(&packet, &src, &dst, true).unwrap();
            let tcp = if seg.to_b { &mut self.b } else { &mut self.a };
            tcp.handle_segment(self.now, src, dst, &repr);
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// What a transfer left behind.
struct Outcome {
    stats: TcpStats,
    /// A's connection once all was acknowledged.
    info: TcpInfo,
    swallowed: u64,
    largest_passed: usize,
}

/// Send `len` bytes from A to B across a path that drops A's datagrams over `limit`
/// bytes; check them byte for byte.
fn transfer(config: &TcpConfig, len: usize, limit: usize) -> Outcome {
    let data = pattern(len);
    let mut p = Pair {
        a: Tcp::new(config.clone(), &secret(1)),
        b: Tcp::new(config.clone(), &secret(2)),
        now: Instant::ZERO,
        wire: Vec::new(),
        busy: [Instant::ZERO; 2],
        limit,
        swallowed: 0,
        largest_passed: 0,
    };
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let client =
        p.a.connect(
            p.now,
            SocketAddrV4::new(A, 0),
            SocketAddrV4::new(B, 80),
            1460,
        )
        .unwrap();
    let (mut written, mut server, mut received) = (0, None, Vec::new());
    let mut buf = vec![0u8; 65536];
    let mut info = None;
    for _ in 0..2_000_000 {
        if written < data.len()
            && let Ok(n) = p.a.send(p.now, client, &data[written..])
        {
            written += n;
        }
        server = server.or_else(|| p.b.accept(listener).ok());
        if let Some(s) = server {
            while let Ok(n) = p.b.recv(p.now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
        }
        if received.len() == data.len() && p.a.info(client).is_some_and(|i| i.bytes_in_flight == 0)
        {
            info = p.a.info(client);
            break;
        }
        if !p.step() {
            break;
        }
    }
    assert_eq!(received.len(), data.len(), "bytes received");
    assert!(received == data, "the received bytes differ");
    Outcome {
        stats: p.a.stats().clone(),
        info: info.expect("the connection lives"),
        swallowed: p.swallowed,
        largest_passed: p.largest_passed,
    }
}

fn config(mtu_probing: MtuProbing) -> TcpConfig {
    TcpConfig {
        mtu_probing,
        nodelay: true,
        ..TcpConfig::default()
    }
}

/// The path's limit: 1200-byte datagrams, a segment size (as `path_mtu` counts it,
/// TCP payload and options) of 1160.
const LIMIT: usize = 1200;

/// RFC 4821 §7.5 / RFC 8899 §4.2: full-sized segments vanish without ICMP; repeated
/// timeouts drop the segment size to the base (1024), and the search (RFC 8899 §5.3)
/// climbs back to within `probe_threshold` (8 bytes) of the largest that passes.
/// Without probing, detection halves the size (730) and it stays there.
#[test]
fn a_black_hole_is_found_and_the_search_climbs_to_what_passes() {
    let out = transfer(&config(MtuProbing::OnBlackHole), 1_000_000, LIMIT);
    assert!(
        out.swallowed > 0 && out.stats.black_holes >= 1,
        "{:?}",
        out.stats
    );
    assert!(out.stats.mtu_probes >= 3, "{:?}", out.stats);
    let path_mtu = usize::from(out.info.path_mtu.expect("a path MTU"));
    assert!(
        path_mtu <= LIMIT && path_mtu + 8 > LIMIT,
        "path MTU {path_mtu}, the path carries {LIMIT}"
    );
    assert_eq!(out.largest_passed, path_mtu);

    let off = transfer(&config(MtuProbing::Off), 1_000_000, LIMIT);
    assert_eq!(off.stats.mtu_probes, 0);
    assert_eq!(off.info.path_mtu, Some(730 + 40));
    assert!(off.info.snd_mss < out.info.snd_mss);
}

/// Without black-hole detection or probing the transfer cannot pass the black hole;
/// with probing on from the start (Linux's `tcp_mtu_probing = 2`) it never meets it:
/// every connection starts at the base size and searches upwards.
#[test]
fn probing_from_the_start_never_meets_the_black_hole() {
    let always = transfer(&config(MtuProbing::Always), 1_000_000, LIMIT);
    assert_eq!(always.stats.timeouts, 0, "{:?}", always.stats);
    assert_eq!(always.stats.black_holes, 0);
    let path_mtu = usize::from(always.info.path_mtu.expect("a path MTU"));
    assert!(path_mtu <= LIMIT && path_mtu + 8 > LIMIT, "{path_mtu}");
    // An open path: the search ends within the threshold of both ends' MSS (1460).
    let open = transfer(&config(MtuProbing::Always), 1_000_000, 1500);
    let path_mtu = usize::from(open.info.path_mtu.expect("a path MTU"));
    assert!(path_mtu <= 1500 && path_mtu + 8 > 1500, "{path_mtu}");
    assert_eq!(open.stats.mtu_probes_lost, 0);
}

/// RFC 4821 §7.5: "the loss of a probe ... should not reduce the congestion window".
/// Probes over the limit are lost and found lost by RACK (data follows each probe),
/// yet the window is never cut: slow start (HyStart++ off) never ends, ssthresh stays
/// unset; no timeout either.
#[test]
fn a_lost_probe_cuts_no_window() {
    let config = TcpConfig {
        hystart: false,
        ..config(MtuProbing::Always)
    };
    let out = transfer(&config, 1_000_000, LIMIT);
    assert!(out.stats.mtu_probes_lost >= 1, "{:?}", out.stats);
    assert!(out.swallowed >= out.stats.mtu_probes_lost);
    assert_eq!(out.stats.timeouts, 0, "{:?}", out.stats);
    let fresh = transfer(&config, 1000, 1500);
    assert_eq!(out.info.ssthresh, fresh.info.ssthresh, "no cut");
}
