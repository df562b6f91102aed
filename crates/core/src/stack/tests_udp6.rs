//! UDP over IPv6 between two stacks on one Ethernet link: datagrams both ways (one
//! fragmented), a `[::]` socket taking IPv4 too, Port Unreachable when nothing is
//! bound, a zero checksum dropped (RFC 8200 §8.1), and the dual-stack binding rules.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use impnet_wire::ipv6::{self, Cidr, NextHeader};
use impnet_wire::udp;

use crate::neighbor::Origin;
use crate::testutil::{IP_A, IP_B, Pair};
use crate::time::Duration;
use crate::udp::UdpError;

fn a6() -> Ipv6Addr {
    "2001:db8::a".parse().unwrap()
}

fn b6() -> Ipv6Addr {
    "2001:db8::b".parse().unwrap()
}

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

fn any6(port: u16) -> SocketAddr {
    v6(Ipv6Addr::UNSPECIFIED, port)
}

/// A pair with 10.0.0.1/.2 and 2001:db8::a/64, ::b/64, DAD done on both.
fn pair6() -> Pair {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    for _ in 0..20 {
        p.exchange();
        p.advance(Duration::from_millis(100));
    }
    p.exchange();
    p
}

#[test]
fn datagrams_cross_ipv6_both_ways_and_a_large_one_is_fragmented() {
    let mut p = pair6();
    let server = p.b.udp_bind(v6(b6(), 53)).unwrap();
    let client = p.a.udp_bind(any6(0)).unwrap();
    let client_port = p.a.udp_local_addr(client).unwrap().port();
    let big: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    // The first waits for neighbour discovery (which holds one packet per neighbour).
    p.a.udp_send_to(p.now, client, v6(b6(), 53), b"query")
        .unwrap();
    p.exchange();
    let mut buf = vec![0u8; 8192];
    assert_eq!(
        p.b.udp_recv_from(server, &mut buf),
        Ok((5, v6(a6(), client_port)))
    );
    assert_eq!(&buf[..5], b"query");
    p.a.udp_send_to(p.now, client, v6(b6(), 53), &big).unwrap();
    p.exchange();
    let (n, from) = p.b.udp_recv_from(server, &mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&big[..], v6(a6(), client_port)));
    assert_eq!(p.a.stats().ipv6.tx_fragmented, 1);
    p.b.udp_send_to(p.now, server, from, b"answer").unwrap();
    p.exchange();
    assert_eq!(p.a.udp_recv_from(client, &mut buf), Ok((6, v6(b6(), 53))));
    assert_eq!(&buf[..6], b"answer");
    assert_eq!(p.b.stats().udp.rx_delivered, 2);
}

#[test]
fn a_socket_on_any6_takes_ipv4_too_and_answers_in_kind() {
    let mut p = pair6();
    let server = p.b.udp_bind(any6(7)).unwrap();
    let c4 = p.a.udp_bind(SocketAddrV4::new(IP_A, 4000)).unwrap();
    let c6 = p.a.udp_bind(v6(a6(), 6000)).unwrap();
    p.a.udp_send_to(p.now, c4, SocketAddrV4::new(IP_B, 7), b"four")
        .unwrap();
    p.a.udp_send_to(p.now, c6, v6(b6(), 7), b"six").unwrap();
    p.exchange();
    let mut buf = [0u8; 64];
    let mut seen = Vec::new();
    while let Ok((n, from)) = p.b.udp_recv_from(server, &mut buf) {
        p.b.udp_send_to(p.now, server, from, &buf[..n]).unwrap();
        seen.push((buf[..n].to_vec(), from));
    }
    assert_eq!(
        seen,
        vec![
            (
                b"four".to_vec(),
                SocketAddr::from(SocketAddrV4::new(IP_A, 4000))
            ),
            (b"six".to_vec(), v6(a6(), 6000)),
        ]
    );
    p.exchange();
    assert_eq!(
        p.a.udp_recv_from(c4, &mut buf),
        Ok((4, SocketAddr::from(SocketAddrV4::new(IP_B, 7))))
    );
    assert_eq!(p.a.udp_recv_from(c6, &mut buf), Ok((3, v6(b6(), 7))));
    // A socket bound to one family cannot send to the other.
    assert_eq!(
        p.a.udp_send_to(p.now, c4, v6(b6(), 7), b"x"),
        Err(UdpError::AddrNotAvailable)
    );
    assert_eq!(
        p.a.udp_send_to(p.now, c6, SocketAddrV4::new(IP_B, 7), b"x"),
        Err(UdpError::AddrNotAvailable)
    );
}

#[test]
fn nothing_bound_draws_port_unreachable_and_a_zero_checksum_is_dropped() {
    let mut p = pair6();
    let client = p.a.udp_bind(v6(a6(), 5000)).unwrap();
    p.a.udp_send_to(p.now, client, v6(b6(), 9), b"anyone?")
        .unwrap();
    p.exchange();
    assert_eq!(p.b.stats().udp.rx_no_port, 1);
    assert_eq!(p.b.stats().ipv6.errors_sent, 1, "{:?}", p.b.stats().ipv6);
    // A datagram with checksum 0 (allowed over IPv4, not over IPv6).
    let server = p.b.udp_bind(any6(9)).unwrap();
    let repr = udp::Repr {
        src_port: 5000,
        dst_port: 9,
        payload: b"no sum",
    };
    let mut packet = vec![0u8; ipv6::HEADER_LEN + repr.buffer_len()];
    let mut view = udp::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]);
    repr.emit(&mut view, &a6(), &b6());
    view.set_checksum(0);
    p.a.send_ipv6(
        p.now,
        (Some(a6()), b6()),
        NextHeader::Udp,
        None,
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.b.stats().udp.rx_bad_checksum, 1);
    let mut buf = [0u8; 16];
    assert_eq!(
        p.b.udp_recv_from(server, &mut buf),
        Err(UdpError::WouldBlock)
    );
}

#[test]
fn bindings_clash_across_families_only_through_the_wildcards() {
    let mut p = pair6();
    let s = &mut p.b;
    let any4 = SocketAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 53));
    let v4 = SocketAddr::from(SocketAddrV4::new(IP_B, 53));
    let h4 = s.udp_bind(any4).unwrap();
    // An IPv6 address and 0.0.0.0 on one port take different datagrams.
    let h6 = s.udp_bind(v6(b6(), 53)).unwrap();
    assert_eq!(s.udp_bind(v4), Err(UdpError::AddrInUse));
    assert_eq!(s.udp_bind(any6(53)), Err(UdpError::AddrInUse));
    s.udp_close(h4).unwrap();
    assert_eq!(s.udp_bind(any6(53)), Err(UdpError::AddrInUse));
    s.udp_close(h6).unwrap();
    let wild = s.udp_bind(any6(53)).unwrap();
    assert_eq!(s.udp_bind(v4), Err(UdpError::AddrInUse));
    assert_eq!(s.udp_bind(v6(b6(), 53)), Err(UdpError::AddrInUse));
    assert_eq!(
        s.udp_local_addr(wild).map(|a| a.ip()),
        Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
    );
    // Not one of the stack's addresses.
    assert_eq!(
        s.udp_bind(v6("2001:db8::99".parse().unwrap(), 1)),
        Err(UdpError::AddrNotAvailable)
    );
}
