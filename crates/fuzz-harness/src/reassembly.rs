//! `reassembly`: IPv4 fragments (overlapping, duplicate, out of order, conflicting,
//! oversized) of UDP datagrams through a `Stack`'s receive path.
//!
//! The first byte picks the memory limit; then 4 UDP lengths (2 bytes each), one per
//! IPv4 identification, fix each datagram's "true" bytes (a UDP header whose length is
//! that, then a pattern). Operations: a fragment of datagram `ident` from one of two
//! sources (offset, length, MF, and whether its bytes are flipped so they conflict), or
//! time passing (reassembly timeouts).
//!
//! Checks: nothing panics; every frame the stack emits parses; a datagram reaches the
//! UDP socket only when every byte of it came, at that offset, in a fragment of that
//! source and identification (ever: a whole datagram overtakes a reassembly of the
//! same key), and a last fragment (MF clear) ended at or past its end (UDP's length
//! may end it first); the counters stay coherent.

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::reassembly::ReassemblyConfig;
use impnet_core::{Duration, IfaceConfig, IfaceId, Instant, Secret, Stack, StackConfig, UdpHandle};
use impnet_wire::{ethernet, ipv4};

use crate::Input;

const MAC: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 1]);
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SOURCES: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 3)];
const PORT: u16 = 7;
const MAX_OPS: usize = 256;
/// The most a fragment carries (a 1500-byte MTU less the IPv4 header).
const MAX_FRAGMENT: usize = 1480;

/// Run one input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut h = Harness::new(&mut input);
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        h.step(&mut input);
        h.drain_and_check();
    }
}

/// One fragment the harness sent: where and what.
struct Sent {
    offset: usize,
    bytes: Vec<u8>,
    last: bool,
}

struct Harness {
    stack: Stack,
    iface: IfaceId,
    socket: UdpHandle,
    now: Instant,
    /// UDP length of each identification's datagram.
    lengths: [u16; 4],
    /// Every fragment sent, per (source, identification).
    sent: [[Vec<Sent>; 4]; 2],
}

/// The true byte at `offset` of datagram `ident`'s IPv4 payload.
fn true_byte(lengths: &[u16; 4], ident: usize, offset: usize) -> u8 {
    let len = lengths[ident].to_be_bytes();
    match offset {
        0 => 0x04,
        1 => 0xd2, // source port 1234
        2 => 0,
        3 => PORT as u8,
        4 => len[0],
        5 => len[1],
        6 | 7 => 0, // no checksum
        _ => ((offset as u32).wrapping_mul(0x9e37_79b1) >> 24) as u8 ^ ident as u8,
    }
}

impl Harness {
    fn new(input: &mut Input<'_>) -> Harness {
        let max_bytes = [256 * 1024, 70 * 1024, 8 * 1024, 1 << 20][usize::from(input.u8() & 3)];
        let config = StackConfig {
            reassembly: ReassemblyConfig {
                timeout: Duration::from_secs(30),
                max_bytes,
            },
            ..StackConfig::default()
        };
        let mut stack = Stack::new(config, Secret::from_bytes([3; Secret::LEN]));
        let mut iface = IfaceConfig::new(MAC, 1500);
        iface.addrs.push(ipv4::Cidr::new(LOCAL, 24).expect("a /24"));
        let iface = stack.add_interface(iface);
        let socket = stack
            .udp_bind(SocketAddrV4::new(LOCAL, PORT))
            .expect("a fresh stack binds");
        let lengths = [0; 4].map(|_: u8| input.u16().max(8));
        Harness {
            stack,
            iface,
            socket,
            now: Instant::from_millis(0),
            lengths,
            sent: Default::default(),
        }
    }

    fn step(&mut self, input: &mut Input<'_>) {
        let op = input.u8();
        if op & 0x80 != 0 {
            let ms = u64::from(op & 0x7f) * 500;
            self.now += Duration::from_millis(ms);
            self.stack.handle_timeout(self.now);
            return;
        }
        let (ident, source) = (usize::from(op & 3), usize::from(op >> 2 & 1));
        let offset = usize::from(input.u16() & 0x1fff) * 8;
        let len = usize::from(input.u16()) % (MAX_FRAGMENT + 1);
        let (more, flip) = (op & 8 != 0, op & 16 != 0);
        let bytes: Vec<u8> = (offset..offset + len)
            .map(|o| true_byte(&self.lengths, ident, o) ^ if flip { 0x5a } else { 0 })
            .collect();
        let frame = fragment_frame(SOURCES[source], ident as u16, offset, more, &bytes);
        self.stack.handle_frame(self.now, self.iface, &frame);
        self.sent[source][ident].push(Sent {
            offset,
            bytes,
            last: !more,
        });
    }

    fn drain_and_check(&mut self) {
        let mut buf = vec![0u8; 2048];
        while let Some(tx) = self.stack.poll_transmit(self.now, &mut buf) {
            ethernet::Frame::new_checked(&buf[..tx.len]).expect("the stack emitted a bad frame");
        }
        let mut data = vec![0u8; 65536];
        while let Ok((n, from)) = self.stack.udp_recv_from(self.socket, &mut data) {
            let std::net::IpAddr::V4(from) = from.ip() else {
                panic!("an IPv4-only run delivered a datagram from {from}");
            };
            self.check_delivery(from, &data[..n]);
        }
        let stats = &self.stack.stats().reassembly;
        assert!(stats.reassembled <= stats.fragments, "{stats:?}");
    }

    /// `data` (a UDP payload) arrived from `src`: some identification's fragments must
    /// account for every byte, and a last one reach its end.
    fn check_delivery(&self, src: Ipv4Addr, data: &[u8]) {
        let source = SOURCES
            .iter()
            .position(|&s| s == src)
            .expect("a known source");
        let end = data.len() + 8;
        // Every record is kept: a datagram sent whole (offset 0, MF clear) is delivered
        // without touching a reassembly of the same key still under way.
        let found = (0..4).any(|ident| {
            let sent = &self.sent[source][ident];
            sent.iter()
                .any(|s| s.last && s.offset + s.bytes.len() >= end)
                && data.iter().enumerate().all(|(i, &b)| {
                    let at = i + 8;
                    sent.iter().any(|s| {
                        at >= s.offset
                            && at < s.offset + s.bytes.len()
                            && s.bytes[at - s.offset] == b
                    })
                })
        });
        assert!(
            found,
            "a {}-byte datagram from {src} no fragments account for",
            data.len()
        );
    }
}

/// An Ethernet frame holding one IPv4 fragment of a UDP datagram.
fn fragment_frame(src: Ipv4Addr, ident: u16, offset: usize, more: bool, payload: &[u8]) -> Vec<u8> {
    let repr = ipv4::Repr {
        src_addr: src,
        dst_addr: LOCAL,
        protocol: ipv4::Protocol::Udp,
        payload_len: payload.len(),
        ttl: 64,
        ident,
        dont_frag: false,
        more_frags: more,
        frag_offset: offset as u16,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut frame = Vec::with_capacity(14 + repr.buffer_len());
    frame.extend_from_slice(&MAC.0);
    frame.extend_from_slice(&PEER_MAC);
    frame.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0u8; repr.header_len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut ip[..]));
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(payload);
    frame
}
