//! Raw IPv4 sockets on a stack: a copy of each datagram of the socket's protocol with
//! its header (the stack still answers an echo request; a protocol it does not know
//! draws no Protocol Unreachable once a raw socket took it), sends with a header the
//! stack builds or the caller's (`hdrincl`, checked and filled in as Linux does), and
//! the misuse errors.

use alloc::vec;
use core::net::Ipv4Addr;

use impnet_wire::icmpv4;
use impnet_wire::ipv4::{self, Protocol};

use crate::raw::RawError;
use crate::testutil::{IP_A, IP_B, Pair, drain};

const EXPERIMENT: u8 = 253;

#[test]
fn an_icmp_raw_socket_sees_echo_requests_which_are_still_answered() {
    let mut p = Pair::new();
    let raw = p.b.raw_bind(1).unwrap();
    let echo = p.a.icmp_bind(0x77).unwrap();
    p.a.icmp_send_echo(p.now, echo, IP_B, 1, b"ping").unwrap();
    p.exchange();
    let mut buf = [0u8; 128];
    let (len, src) = p.b.raw_recv_from(raw, &mut buf).unwrap();
    assert_eq!(src, IP_A);
    let ip = ipv4::Packet::new_checked(&buf[..len]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.protocol(), ip.src_addr(), ip.dst_addr()),
        (Protocol::Icmp, IP_A, IP_B)
    );
    let icmp = icmpv4::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv4::Message::EchoRequest);
    assert_eq!(p.b.raw_recv_from(raw, &mut buf), Err(RawError::WouldBlock));
    // B's stack answered it as before.
    let mut reply = [0u8; 16];
    assert!(p.a.icmp_recv(echo, &mut reply).is_ok());
}

#[test]
fn the_stack_builds_the_header_and_an_unknown_protocol_reaches_the_raw_socket() {
    let mut p = Pair::new();
    let raw_b = p.b.raw_bind(EXPERIMENT).unwrap();
    let raw_a = p.a.raw_bind(EXPERIMENT).unwrap();
    p.a.raw_send_to(p.now, raw_a, IP_B, b"experimental")
        .unwrap();
    p.exchange();
    let mut buf = [0u8; 128];
    let (len, _) = p.b.raw_recv_from(raw_b, &mut buf).unwrap();
    let ip = ipv4::Packet::new_checked(&buf[..len]).unwrap();
    assert_eq!(ip.protocol(), Protocol::Unknown(EXPERIMENT));
    assert_eq!((ip.ttl(), ip.payload()), (64, &b"experimental"[..]));
    // Taken by a raw socket: no Protocol Unreachable went back.
    assert_eq!(p.b.stats().icmp.tx_dst_unreachable, 0);
    assert_eq!(
        p.a.raw_recv_from(raw_a, &mut buf),
        Err(RawError::WouldBlock)
    );
    // Closed, the protocol is unknown again and draws one.
    p.b.raw_close(raw_b).unwrap();
    p.a.raw_send_to(p.now, raw_a, IP_B, b"again").unwrap();
    p.exchange();
    assert_eq!(p.b.stats().icmp.tx_dst_unreachable, 1);
}

/// A header for `payload` to B, with the fields Linux fills left zero.
fn own_header(payload: &[u8]) -> vec::Vec<u8> {
    let repr = ipv4::Repr {
        src_addr: Ipv4Addr::UNSPECIFIED,
        dst_addr: IP_B,
        protocol: Protocol::Unknown(EXPERIMENT),
        payload_len: payload.len(),
        ttl: 9,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut bytes[..]));
    bytes[20..].copy_from_slice(payload);
    bytes[2..4].copy_from_slice(&[0, 0]); // total length
    bytes[10..12].copy_from_slice(&[0, 0]); // checksum
    bytes
}

#[test]
fn hdrincl_sends_the_callers_header_with_linuxs_fill_ins() {
    let mut p = Pair::new();
    let raw_b = p.b.raw_bind(EXPERIMENT).unwrap();
    let raw_a = p.a.raw_bind(EXPERIMENT).unwrap();
    p.a.raw_set_hdrincl(raw_a, true).unwrap();
    p.a.raw_send_to(p.now, raw_a, IP_B, &own_header(b"mine"))
        .unwrap();
    p.exchange();
    let mut buf = [0u8; 128];
    let (len, src) = p.b.raw_recv_from(raw_b, &mut buf).unwrap();
    let ip = ipv4::Packet::new_checked(&buf[..len]).unwrap();
    // raw(7): total length and checksum always filled in, source and ID when zero.
    assert!(ip.verify_checksum());
    assert_eq!((src, ip.src_addr(), ip.ttl()), (IP_A, IP_A, 9));
    assert_eq!(usize::from(ip.total_len()), 24);
    assert_ne!(ip.ident(), 0);
    assert!(ip.dont_frag());
    assert_eq!(ip.payload(), b"mine");
}

#[test]
fn misuse_is_refused_with_the_reason() {
    let mut p = Pair::new();
    assert_eq!(p.a.raw_bind(0), Err(RawError::InvalidProtocol));
    let raw = p.a.raw_bind(EXPERIMENT).unwrap();
    p.a.raw_set_hdrincl(raw, true).unwrap();
    let now = p.now;
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, &[0x45; 10]),
        Err(RawError::BadHeader("shorter than 20 bytes"))
    );
    let mut v6 = own_header(b"x");
    v6[0] = 0x65;
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, &v6),
        Err(RawError::BadHeader("version is not 4"))
    );
    let mut long = own_header(b"x");
    long[0] = 0x4f;
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, &long),
        Err(RawError::BadHeader("header length outside the datagram"))
    );
    let mut far = own_header(b"x");
    far[16..20].copy_from_slice(&[192, 0, 2, 1]);
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, &far),
        Err(RawError::NoRoute)
    );
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, &vec![0u8; 1600]),
        Err(RawError::BadHeader("version is not 4"))
    );
    assert!(drain(&mut p.a, now).is_empty());
    p.a.raw_close(raw).unwrap();
    assert_eq!(p.a.raw_close(raw), Err(RawError::InvalidHandle));
    assert_eq!(
        p.a.raw_send_to(now, raw, IP_B, b"x"),
        Err(RawError::InvalidHandle)
    );
}
