//! IPv6 between two stacks on one Ethernet link: duplicate address detection,
//! neighbour discovery, TCP over IPv6 byte for byte, echo, errors, fragmentation and
//! reassembly, router advertisements with SLAAC, and a Packet Too Big lowering the
//! MSS.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv6Addr, SocketAddr, SocketAddrV6};

use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, Cidr, NextHeader};

use crate::ipv6::{AddrOrigin, AddrState};
use crate::neighbor::Origin;
use crate::tcp::TcpState;
use crate::testutil::Pair;
use crate::time::Duration;

pub(super) fn a6() -> Ipv6Addr {
    "2001:db8::a".parse().unwrap()
}

pub(super) fn b6() -> Ipv6Addr {
    "2001:db8::b".parse().unwrap()
}

/// A pair with 2001:db8::a/64 and ::b/64, DAD done on both.
pub(super) fn pair6() -> Pair {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    run_for(&mut p, Duration::from_secs(2));
    p
}

/// Exchange and fire timers for `span` in 100 ms steps.
pub(super) fn run_for(p: &mut Pair, span: Duration) {
    let steps = span.as_millis() / 100;
    for _ in 0..steps {
        p.exchange();
        p.advance(Duration::from_millis(100));
    }
    p.exchange();
}

#[test]
fn addresses_pass_duplicate_detection_and_a_link_local_one_is_formed() {
    let p = pair6();
    let addrs = p.a.ipv6_addresses(p.a_if);
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    assert!(addrs.iter().all(|a| a.state == AddrState::Preferred));
    let ll = addrs
        .iter()
        .find(|a| a.origin == AddrOrigin::LinkLocal)
        .unwrap();
    assert_eq!(
        ll.cidr.address,
        ipv6::link_local_from_mac(crate::testutil::MAC_A)
    );
    assert!(p.a.stats().ipv6.ns_sent >= 2, "a DAD probe per address");
    assert_eq!(p.a.stats().ipv6.dad_duplicates, 0);
}

#[test]
fn a_duplicate_address_is_given_up() {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    run_for(&mut p, Duration::from_secs(2));
    // B now claims A's address: its probe draws A's defence, and B gives it up.
    p.b.add_address6(p.now, b_if, Cidr::new(a6(), 64).unwrap());
    run_for(&mut p, Duration::from_secs(2));
    assert_eq!(p.b.stats().ipv6.dad_duplicates, 1);
    assert!(
        p.b.ipv6_addresses(b_if)
            .iter()
            .all(|a| a.cidr.address != a6())
    );
    assert!(
        p.a.ipv6_addresses(a_if)
            .iter()
            .any(|a| a.cidr.address == a6())
    );
}

pub(super) fn connect6(p: &mut Pair) -> (crate::tcp::TcpHandle, crate::tcp::TcpHandle) {
    let listener =
        p.b.tcp_listen(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0), 4)
            .unwrap();
    let client =
        p.a.tcp_connect(
            p.now,
            SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0),
            SocketAddrV6::new(b6(), 80, 0, 0),
        )
        .unwrap();
    run_for(p, Duration::from_millis(300));
    let server = p.b.tcp_accept(listener).expect("accepted");
    (client, server)
}

#[test]
fn tcp_over_ipv6_carries_bytes_exactly_after_neighbour_discovery() {
    let mut p = pair6();
    let (client, server) = connect6(&mut p);
    let (local, remote) = p.a.tcp_addresses(client).unwrap();
    assert_eq!(local.ip(), core::net::IpAddr::V6(a6()));
    assert_eq!(remote, SocketAddr::V6(SocketAddrV6::new(b6(), 80, 0, 0)));
    // MSS from the IPv6 MTU: 1500 - 60.
    let info = p.a.tcp_info(client).unwrap();
    assert_eq!(info.state, TcpState::Established);
    // 1500 - 60, less 12 bytes of timestamps per segment.
    assert_eq!(info.snd_mss, 1428);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut got = Vec::new();
    let mut sent = 0;
    let mut buf = vec![0u8; 65536];
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += p.a.tcp_send(p.now, client, &data[sent..]).unwrap_or(0);
        }
        p.exchange();
        while let Ok(n) = p.b.tcp_recv(p.now, server, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
        p.advance(Duration::from_millis(10));
    }
    assert!(
        got == data,
        "received {} of {} bytes, or not the same",
        got.len(),
        data.len()
    );
    assert!(p.a.stats().ipv6.ns_sent >= 2 && p.b.stats().ipv6.na_sent >= 1);
    p.a.tcp_close(p.now, client).unwrap();
    p.b.tcp_close(p.now, server).unwrap();
    run_for(&mut p, Duration::from_millis(500));
    assert_ne!(
        p.b.tcp_info(server).map(|i| i.state),
        Some(TcpState::Established)
    );
}

#[test]
fn echo_requests_are_answered_and_an_unknown_next_header_draws_a_parameter_problem() {
    let mut p = pair6();
    let request = icmpv6::Repr::EchoRequest {
        ident: 7,
        seq_no: 1,
        data: b"ping over six",
    };
    let mut packet = vec![0u8; ipv6::HEADER_LEN + request.buffer_len()];
    request.emit(
        &mut icmpv6::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]),
        &a6(),
        &b6(),
    );
    p.a.send_ipv6(
        p.now,
        (Some(a6()), b6()),
        NextHeader::Icmpv6,
        None,
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.b.stats().ipv6.echo_replies, 1);
    // A packet with next header 253 (experimental): B answers with code 1.
    let mut packet = vec![0u8; ipv6::HEADER_LEN + 8];
    packet[ipv6::HEADER_LEN..].copy_from_slice(b"whatever");
    p.a.send_ipv6(
        p.now,
        (Some(a6()), b6()),
        NextHeader::from(253),
        None,
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.b.stats().ipv6.rx_unknown_next_header, 1);
    assert_eq!(p.b.stats().ipv6.errors_sent, 1);
    assert_eq!(p.a.stats().ipv6.icmp_rx_bad, 0);
}

#[test]
fn a_large_datagram_is_fragmented_and_reassembled() {
    let mut p = pair6();
    let data: Vec<u8> = (0..4000u32).map(|i| (i % 253) as u8).collect();
    let request = icmpv6::Repr::EchoRequest {
        ident: 9,
        seq_no: 2,
        data: &data,
    };
    let mut packet = vec![0u8; ipv6::HEADER_LEN + request.buffer_len()];
    request.emit(
        &mut icmpv6::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]),
        &a6(),
        &b6(),
    );
    p.a.send_ipv6(
        p.now,
        (Some(a6()), b6()),
        NextHeader::Icmpv6,
        None,
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.a.stats().ipv6.tx_fragmented, 1, "{:?}", p.a.stats().ipv6);
    assert!(p.a.stats().ipv6.tx_fragments >= 3);
    assert_eq!(
        p.b.stats().reassembly6.reassembled,
        1,
        "{:?} {:?}",
        p.b.stats().reassembly6,
        p.b.stats().ipv6
    );
    // The reply is as large: B fragments it too, and A reassembles it.
    assert_eq!(p.b.stats().ipv6.echo_replies, 1);
    assert_eq!(p.a.stats().reassembly6.reassembled, 1);
}

#[test]
fn a_router_answers_a_solicitation_and_the_host_configures_itself_by_slaac() {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    // A routes: it has a global address, forwards and advertises.
    p.a.set_forwarding(a_if, true);
    p.a.set_router_advertisements(now, a_if, Some(Duration::from_secs(600)));
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    run_for(&mut p, Duration::from_secs(2));
    // B starts IPv6: link-local, DAD, then a router solicitation A answers.
    p.b.enable_ipv6(p.now, b_if);
    run_for(&mut p, Duration::from_secs(4));
    assert!(p.a.stats().ipv6.ra_sent >= 1, "{:?}", p.a.stats().ipv6);
    assert!(p.b.stats().ipv6.ra_received >= 1);
    let mac = crate::testutil::MAC_B;
    let slaac = ipv6::address_from_prefix(
        &Cidr::new("2001:db8::".parse().unwrap(), 64).unwrap(),
        ipv6::interface_id(mac),
    )
    .unwrap();
    let addrs = p.b.ipv6_addresses(b_if);
    let formed = addrs
        .iter()
        .find(|a| a.cidr.address == slaac)
        .expect("a SLAAC address");
    assert_eq!(formed.origin, AddrOrigin::Slaac);
    assert_eq!(formed.state, AddrState::Preferred);
    // The router is B's default route: an address off the prefix goes via A.
    let far: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let route = p.b.routes6().lookup(far).expect("a default route");
    assert_eq!(
        route.gateway,
        Some(ipv6::link_local_from_mac(crate::testutil::MAC_A))
    );
}

#[test]
fn a_router_forwards_with_the_hop_limit_lowered_and_answers_for_no_route() {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.set_forwarding(a_if, true);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    run_for(&mut p, Duration::from_secs(2));
    // B sends to an address off-link with A as its gateway; A has no route for it.
    p.b.routes6_mut().add(
        Cidr::new(Ipv6Addr::UNSPECIFIED, 0).unwrap(),
        Some(a6()),
        b_if,
    );
    let far: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let mut packet = vec![0u8; ipv6::HEADER_LEN + 8];
    packet[ipv6::HEADER_LEN..].copy_from_slice(b"12345678");
    p.b.send_ipv6(
        p.now,
        (None, far),
        NextHeader::NoNextHeader,
        None,
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.a.stats().forward6.no_route, 1);
    assert!(
        p.b.stats().ipv6.icmp_rx >= 1,
        "the Destination Unreachable came back"
    );
    // Hop limit 1: Time Exceeded instead.
    let mut packet = vec![0u8; ipv6::HEADER_LEN + 8];
    packet[ipv6::HEADER_LEN..].copy_from_slice(b"12345678");
    p.b.send_ipv6(
        p.now,
        (None, far),
        NextHeader::NoNextHeader,
        Some(1),
        packet,
        Origin::Stack,
    )
    .unwrap();
    p.exchange();
    assert_eq!(p.a.stats().forward6.ttl_exceeded, 1);
}

#[test]
fn a_packet_too_big_lowers_the_path_mtu_and_the_connection_resends_smaller() {
    let mut p = pair6();
    let (client, server) = connect6(&mut p);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    p.a.tcp_send(p.now, client, &data).unwrap();
    // Segments larger than 1280 are dropped, as by a router whose next link carries
    // 1280, which answers the first with a Packet Too Big quoting it.
    let mut dropped: Option<Vec<u8>> = None;
    p.exchange_filtered(|from_a, frame| {
        if from_a && frame.len() > 14 + 1280 {
            dropped.get_or_insert_with(|| frame[14..].to_vec());
            return false;
        }
        true
    });
    let quote = dropped.expect("a full-sized segment");
    let ptb = icmpv6::Repr::PacketTooBig {
        mtu: 1280,
        invoking: &quote,
    };
    assert!(p.b.send_icmpv6(p.now, (Some(b6()), a6()), &ptb, None));
    p.exchange();
    assert_eq!(p.a.stats().ipv6.pmtu_lowered, 1);
    assert_eq!(p.a.path_mtu6(p.now, b6()), Some(1280));
    let info = p.a.tcp_info(client).unwrap();
    assert_eq!(info.snd_mss, 1280 - 60 - 12, "{:?}", p.a.tcp_stats());
    // Everything still arrives, byte for byte.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..1000 {
        p.exchange_filtered(|_, frame| frame.len() <= 14 + 1280);
        while let Ok(n) = p.b.tcp_recv(p.now, server, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
        p.advance(Duration::from_millis(50));
    }
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
}
