//! Regressions for what the stateful fuzz target `tcp_conn` found (issue 13); each
//! input also stays in `fuzz/corpus/tcp_conn/` as `regression-*`.

use alloc::vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Flags, Options, Packet, Repr};

use super::*;
use crate::testutil::secret;
use crate::time::Instant;

const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);

/// Our SYN's sequence number, from a fresh active open.
fn our_syn(tcp: &mut Tcp) -> (TcpHandle, u32) {
    let handle = tcp.connect(Instant::ZERO, LOCAL, REMOTE, 1000).unwrap();
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(Instant::ZERO, &mut buf).expect("a SYN");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let syn = Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true).unwrap();
    assert_eq!(syn.flags, Flags::SYN);
    (handle, syn.seq)
}

#[test]
fn text_on_a_syn_ack_starts_after_the_syn() {
    // The peer's SYN-ACK carries "hello" (RFC 9293 §3.10.7.3: "If there are other
    // controls or text in the segment, then continue processing at the sixth step").
    // Its first octet is SEG.SEQ+1; it was stored at SEG.SEQ, so the user read "ello".
    let mut tcp = Tcp::new(TcpConfig::default(), &secret(3));
    let (handle, iss) = our_syn(&mut tcp);
    let synack = Repr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq: 5000,
        ack: iss.wrapping_add(1),
        flags: Flags::SYN | Flags::ACK,
        window: 65535,
        urgent: 0,
        options: Options {
            mss: Some(1000),
            ..Options::default()
        },
        payload: b"hello",
    };
    tcp.handle_segment(Instant::ZERO, *REMOTE.ip(), *LOCAL.ip(), &synack);
    let mut out = [0u8; 16];
    let n = tcp.recv(Instant::ZERO, handle, &mut out).unwrap();
    assert_eq!(&out[..n], b"hello");
    let mut buf = vec![0u8; 1500];
    let tx = tcp.poll_transmit(Instant::ZERO, &mut buf).expect("an ACK");
    let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
    let ack = Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true).unwrap();
    assert_eq!(
        ack.ack,
        5000 + 1 + 5,
        "the SYN and five octets acknowledged"
    );
}
