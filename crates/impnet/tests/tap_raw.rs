//! Raw IPv4 sockets against the Linux kernel over a TAP (kernel 10.202.221.1, imp
//! 10.202.221.2, in a namespace the harness creates): an ICMP raw socket sees Linux's
//! echo requests with their IPv4 header while the stack answers them, and an echo
//! request imp writes whole (header included, `IP_HDRINCL`) draws Linux's reply.
//! Needs root; skips (printing why) without, fails instead under `IMP_REQUIRE_ROOT`.
//! Run under `flock /tmp/imp-netns.lock` beside other namespace tests.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Link, have};
use impnet::RawSocket;
use impnet::wire::{icmpv4, ipv4};

const SUBNET: u8 = 221;

/// The ICMP message of a datagram a raw socket read, with its IPv4 header's source.
fn icmp_of(datagram: &[u8]) -> (Ipv4Addr, icmpv4::Message, Vec<u8>) {
    let ip = ipv4::Packet::new_checked(datagram).expect("a whole IPv4 datagram");
    assert!(ip.verify_checksum());
    assert_eq!(ip.protocol(), ipv4::Protocol::Icmp);
    let icmp = icmpv4::Packet::new_checked(ip.payload()).expect("an ICMP message");
    (ip.src_addr(), icmp.msg_type(), ip.payload().to_vec())
}

#[test]
fn a_raw_icmp_socket_sees_linux_pings_and_sends_its_own_header() {
    let Some(link) = Link::new(SUBNET, false) else {
        return;
    };
    if !have("ping") {
        return;
    }
    let socket = RawSocket::bind(&link.rt, 1).expect("raw socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let out = link
        .ns
        .exec("ping", &["-c", "1", "-W", "2", &link.imp_addr.to_string()]);
    assert!(out.status.success(), "the stack still answers: {out:?}");
    let mut buf = [0u8; 2048];
    let (n, src) = socket.recv_from(&mut buf).expect("Linux's echo request");
    let (from, kind, _) = icmp_of(&buf[..n]);
    assert_eq!(
        (src, from, kind),
        (
            link.kernel_addr,
            link.kernel_addr,
            icmpv4::Message::EchoRequest
        )
    );
    // An echo request with imp's own header (identification, source and checksums
    // zero: filled in), to Linux, which answers.
    let echo = icmpv4::Repr::EchoRequest {
        ident: 0x2210,
        seq_no: 1,
        data: b"raw ping",
    };
    let header = ipv4::Repr {
        src_addr: Ipv4Addr::UNSPECIFIED,
        dst_addr: link.kernel_addr,
        protocol: ipv4::Protocol::Icmp,
        payload_len: echo.buffer_len(),
        ttl: 33,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut datagram = vec![0u8; header.buffer_len()];
    header.emit(&mut ipv4::Packet::new_unchecked(&mut datagram[..]));
    echo.emit(&mut icmpv4::Packet::new_unchecked(&mut datagram[20..]));
    datagram[10..12].fill(0);
    socket.set_header_included(true).unwrap();
    socket
        .send_to(&datagram, link.kernel_addr)
        .expect("send whole");
    loop {
        let (n, _) = socket.recv_from(&mut buf).expect("Linux's echo reply");
        let (from, kind, icmp) = icmp_of(&buf[..n]);
        if kind == icmpv4::Message::EchoReply {
            assert_eq!(from, link.kernel_addr);
            assert_eq!(&icmp[4..6], &[0x22, 0x10], "our identifier");
            assert_eq!(&icmp[8..], b"raw ping");
            break;
        }
    }
}
