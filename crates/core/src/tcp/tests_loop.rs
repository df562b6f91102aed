//! Two `Tcp`s wired back to back: each one's `poll_transmit` output, parsed, is fed to
//! the other's `handle_segment`, through a loss function, on a virtual clock.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ONE_WAY: Duration = Duration::from_millis(5);

/// A segment on the wire, due at the other side at `at`.
struct InFlight {
    at: Instant,
    to_b: bool,
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    bytes: Vec<u8>,
}

/// The pair and the wire between them.
struct Pair {
    a: Tcp,
    b: Tcp,
    now: Instant,
    wire: Vec<InFlight>,
    rng: u64,
    loss_percent: u64,
    sent: u64,
    dropped: u64,
}

impl Pair {
    fn new(config: TcpConfig, loss_percent: u64) -> Pair {
        Pair {
            a: Tcp::new(config.clone(), &secret(1)),
            b: Tcp::new(config, &secret(2)),
            now: Instant::ZERO,
            wire: Vec::new(),
            rng: 0x1234_5678,
            loss_percent,
            sent: 0,
            dropped: 0,
        }
    }

    fn lose(&mut self) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % 100 < self.loss_percent
    }

    /// Move everything each side wants to send onto the wire.
    fn transmit(&mut self) {
        let mut buf = vec![0u8; 1500];
        for to_b in [true, false] {
            loop {
                let tcp = if to_b { &mut self.a } else { &mut self.b };
                let Some(tx) = tcp.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                self.sent += 1;
                if self.lose() {
                    self.dropped += 1;
                    continue;
                }
                let bytes = buf[..tx.len].to_vec();
                self.wire.push(InFlight {
                    at: self.now + ONE_WAY,
                    to_b,
                    src: tx.src,
                    dst: tx.dst,
                    bytes,
                });
            }
        }
    }

    /// Advance to the next event (delivery or timer); false when nothing is left.
    fn step(&mut self) -> bool {
        self.transmit();
        let next_wire = self.wire.iter().map(|s| s.at).min();
        let next = [next_wire, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        let (due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|s| s.at <= self.now);
        self.wire = rest;
        for seg in due {
            let packet = Packet::new_checked(&seg.bytes[..]).unwrap();
            let repr =
                Repr::parse(&packet, &seg.src, &seg.dst, true).expect("we emit valid segments");
            let tcp = if seg.to_b { &mut self.b } else { &mut self.a };
            tcp.handle_segment(self.now, seg.src, seg.dst, &repr);
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 257) as u8).collect()
}

/// Send `data` from A to B and check it arrives byte for byte, then close both ends.
fn transfer(config: TcpConfig, loss: u64, data: &[u8]) -> Pair {
    let mut p = Pair::new(config, loss);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let client =
        p.a.connect(
            p.now,
            SocketAddrV4::new(A, 0),
            SocketAddrV4::new(B, 80),
            1460,
        )
        .unwrap();
    let mut server = None;
    let mut written = 0;
    let mut received = Vec::new();
    let mut closed_a = false;
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        if written < data.len() {
            if let Ok(n) = p.a.send(p.now, client, &data[written..]) {
                written += n;
            }
        } else if !closed_a {
            p.a.close(p.now, client).unwrap();
            closed_a = true;
        }
        if server.is_none() {
            server = p.b.accept(listener).ok();
        }
        if let Some(s) = server {
            match p.b.recv(p.now, s, &mut buf) {
                Ok(0) => {
                    p.b.close(p.now, s).unwrap();
                    break;
                }
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(TcpError::WouldBlock) => {}
                Err(e) => panic!("recv failed: {e:?}"),
            }
        }
        if !p.step() {
            break;
        }
    }
    assert_eq!(received.len(), data.len(), "bytes received");
    assert!(received == data, "data differs");
    p.b.close(p.now, listener).unwrap();
    for _ in 0..100_000 {
        if !p.step() {
            break;
        }
    }
    while p.a.poll_event().is_some() {}
    while p.b.poll_event().is_some() {}
    p
}

#[test]
fn one_megabyte_clean() {
    let data = pattern(1 << 20);
    let p = transfer(TcpConfig::default(), 0, &data);
    assert_eq!(p.a.socket_count(), 0);
    assert_eq!(p.b.socket_count(), 0);
    assert_eq!(p.a.timer_count() + p.b.timer_count(), 0);
    assert_eq!(p.a.stats().retransmitted, 0);
}

#[test]
fn one_megabyte_with_five_percent_loss() {
    let data = pattern(1 << 20);
    let p = transfer(TcpConfig::default(), 5, &data);
    assert!(p.dropped > 0);
    assert_eq!(p.a.socket_count(), 0, "{:?}", p.a);
    assert_eq!(p.b.socket_count(), 0);
    assert_eq!(p.a.timer_count() + p.b.timer_count(), 0);
    assert!(p.a.stats().retransmitted > 0);
}

#[test]
fn one_megabyte_with_loss_no_sack_no_timestamps() {
    let config = TcpConfig {
        sack: false,
        timestamps: false,
        ..TcpConfig::default()
    };
    let data = pattern(1 << 20);
    let p = transfer(config, 5, &data);
    assert_eq!(p.a.socket_count() + p.b.socket_count(), 0);
    assert!(p.a.stats().fast_retransmits > 0);
}

#[test]
fn ten_thousand_open_send_close_cycles() {
    let config = TcpConfig {
        msl: Duration::from_millis(50),
        send_buffer: 4096,
        recv_buffer: 4096,
        ..TcpConfig::default()
    };
    let mut p = Pair::new(config, 0);
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 16).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..10_000u32 {
        let c =
            p.a.connect(
                p.now,
                SocketAddrV4::new(A, 0),
                SocketAddrV4::new(B, 80),
                1460,
            )
            .unwrap();
        p.a.send(p.now, c, &i.to_be_bytes()).unwrap();
        p.a.close(p.now, c).unwrap();
        let mut got = Vec::new();
        for _ in 0..1000 {
            if let Ok(s) = p.b.accept(listener) {
                loop {
                    match p.b.recv(p.now, s, &mut buf) {
                        Ok(0) => {
                            p.b.close(p.now, s).unwrap();
                            break;
                        }
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(_) => {
                            p.step();
                        }
                    }
                }
                break;
            }
            p.step();
        }
        assert_eq!(got, i.to_be_bytes());
    }
    p.b.close(p.now, listener).unwrap();
    while p.step() {}
    assert_eq!(p.a.socket_count(), 0);
    assert_eq!(p.b.socket_count(), 0);
    assert_eq!(p.a.timer_count() + p.b.timer_count(), 0);
    assert_eq!(p.a.stats().active_opens, 10_000);
    assert_eq!(p.b.stats().passive_opens, 10_000);
}

/// A response written in two small pieces, on the pair's virtual clock.
#[path = "tests_request.rs"]
mod request;
