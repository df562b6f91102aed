//! ICMPv6 for the sockets between two stacks on one Ethernet link: echo sockets
//! pinging IPv6 addresses (global and link-local, a fragmented request, replies matched
//! by identifier), and ICMPv6 errors reaching the UDP, echo and TCP sockets whose
//! packets they quote (Destination Unreachable from a router, Packet Too Big, a
//! neighbour that never answers).

use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, Cidr, NextHeader};

use crate::icmp::IcmpError;
use crate::stack::Event;
use crate::tcp::TcpError;
use crate::testutil::Pair;
use crate::time::Duration;
use crate::udp::UdpError;

fn a6() -> Ipv6Addr {
    "2001:db8::a".parse().unwrap()
}

fn b6() -> Ipv6Addr {
    "2001:db8::b".parse().unwrap()
}

/// Beyond B, which forwards but has no route there.
fn far6() -> Ipv6Addr {
    "2001:db8:ffff::1".parse().unwrap()
}

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

/// A pair with 2001:db8::a/64 and ::b/64, DAD done on both; with `b_routes`, B
/// forwards and is A's default router.
fn pair6(b_routes: bool) -> Pair {
    let mut p = Pair::new();
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    if b_routes {
        p.b.set_forwarding(b_if, true);
    }
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    if b_routes {
        let default = Cidr::new(Ipv6Addr::UNSPECIFIED, 0).unwrap();
        p.a.routes6_mut().add(default, Some(b6()), a_if);
    }
    run_for(&mut p, Duration::from_secs(2));
    p
}

/// Exchange and fire timers for `span` in 100 ms steps.
fn run_for(p: &mut Pair, span: Duration) {
    for _ in 0..span.as_millis() / 100 {
        p.exchange();
        p.advance(Duration::from_millis(100));
    }
    p.exchange();
}

fn events(p: &mut Pair) -> Vec<Event> {
    core::iter::from_fn(|| p.a.poll_event()).collect()
}

#[test]
fn an_echo_socket_pings_an_ipv6_address_and_gets_its_replies_by_sequence() {
    let mut p = pair6(false);
    let ping = p.a.icmp_bind(0x1e7).unwrap();
    for seq in 0..3u16 {
        let data = [seq as u8; 24];
        p.a.icmp_send_echo(p.now, ping, b6(), seq, &data).unwrap();
    }
    p.exchange();
    assert!(events(&mut p).contains(&Event::Icmp(ping)));
    let mut buf = [0u8; 64];
    for seq in 0..3u16 {
        let reply = p.a.icmp_recv(ping, &mut buf).unwrap();
        assert_eq!(
            (reply.src, reply.seq_no, reply.len, reply.ttl),
            (IpAddr::V6(b6()), seq, 24, 64)
        );
        assert_eq!(buf[..24], [seq as u8; 24]);
        assert!(reply.options.as_slice().is_empty());
    }
    assert_eq!(p.a.icmp_recv(ping, &mut buf), Err(IcmpError::WouldBlock));
    assert_eq!(p.a.stats().ipv6.echo_requests_sent, 3);
    assert_eq!(p.a.stats().ipv6.echo_replies_received, 3);
    assert_eq!(p.b.stats().ipv6.echo_replies, 3);
}

#[test]
fn a_large_request_is_fragmented_and_its_reply_reassembled_for_the_socket() {
    let mut p = pair6(false);
    let ping = p.a.icmp_bind(5).unwrap();
    let data: Vec<u8> = (0..6000u32).map(|i| (i * 13 % 251) as u8).collect();
    // A first small request resolves B (the neighbour queue holds 3 packets, the
    // large request is 5 fragments).
    p.a.icmp_send_echo(p.now, ping, b6(), 0, b"first").unwrap();
    p.exchange();
    let mut buf = vec![0u8; 8000];
    assert_eq!(p.a.icmp_recv(ping, &mut buf).map(|r| r.seq_no), Ok(0));
    p.a.icmp_send_echo(p.now, ping, b6(), 1, &data).unwrap();
    p.exchange();
    let reply = p.a.icmp_recv(ping, &mut buf).unwrap();
    assert_eq!((reply.seq_no, &buf[..reply.len]), (1, &data[..]));
    assert_eq!(p.a.stats().ipv6.tx_fragmented, 1);
    assert_eq!(p.a.stats().reassembly6.reassembled, 1);
}

#[test]
fn a_link_local_address_is_pinged_from_ours() {
    let mut p = pair6(false);
    let b_ll = ipv6::link_local_from_mac(crate::testutil::MAC_B);
    let ping = p.a.icmp_bind(6).unwrap();
    p.a.icmp_send_echo(p.now, ping, b_ll, 9, b"hello").unwrap();
    p.exchange();
    let mut buf = [0u8; 8];
    let reply = p.a.icmp_recv(ping, &mut buf).unwrap();
    assert_eq!((reply.src, reply.seq_no), (IpAddr::V6(b_ll), 9));
}

#[test]
fn a_reply_for_another_identifier_reaches_no_socket() {
    let mut p = pair6(false);
    let ping = p.a.icmp_bind(1).unwrap();
    let reply = icmpv6::Repr::EchoReply {
        ident: 2,
        seq_no: 0,
        data: b"not yours",
    };
    assert!(p.b.send_icmpv6(p.now, (Some(b6()), a6()), &reply, None));
    p.exchange();
    let mut buf = [0u8; 16];
    assert_eq!(p.a.icmp_recv(ping, &mut buf), Err(IcmpError::WouldBlock));
    assert_eq!(p.a.stats().icmp.rx_no_socket, 1);
    assert_eq!(p.a.stats().ipv6.echo_replies_received, 1);
}

#[test]
fn bad_echo_requests_to_ipv6_are_refused_with_their_reason() {
    let mut p = pair6(false);
    let ping = p.a.icmp_bind(1).unwrap();
    let options = crate::ip_options::record_route(9);
    assert_eq!(
        p.a.icmp_send_echo_with_options(p.now, ping, b6(), 0, b"x", &options),
        Err(IcmpError::OptionsOnIpv6)
    );
    let huge = vec![0u8; 65528];
    assert_eq!(
        p.a.icmp_send_echo(p.now, ping, b6(), 0, &huge),
        Err(IcmpError::MessageTooLong)
    );
    assert_eq!(
        p.a.icmp_send_echo(p.now, ping, far6(), 0, b"x"),
        Err(IcmpError::NoRoute)
    );
    assert_eq!(
        p.a.icmp_send_echo(p.now, ping, Ipv6Addr::UNSPECIFIED, 0, b"x"),
        Err(IcmpError::NoRoute)
    );
}

#[test]
fn destination_unreachable_from_a_router_reaches_udp_echo_and_tcp_sockets() {
    let mut p = pair6(true);
    let udp = p.a.udp_bind(v6(Ipv6Addr::UNSPECIFIED, 0)).unwrap();
    p.a.udp_send_to(p.now, udp, v6(far6(), 53), b"query")
        .unwrap();
    let ping = p.a.icmp_bind(3).unwrap();
    p.a.icmp_send_echo(p.now, ping, far6(), 0, b"anyone?")
        .unwrap();
    let tcp =
        p.a.tcp_connect(p.now, v6(Ipv6Addr::UNSPECIFIED, 0), v6(far6(), 80))
            .unwrap();
    p.exchange();
    assert_eq!(p.b.stats().forward6.no_route, 3);
    let seen = events(&mut p);
    assert!(seen.contains(&Event::Udp(udp)) && seen.contains(&Event::Icmp(ping)));
    let mut buf = [0u8; 16];
    assert_eq!(
        p.a.udp_recv_from(udp, &mut buf),
        Err(UdpError::NetUnreachable)
    );
    assert_eq!(
        p.a.icmp_recv(ping, &mut buf),
        Err(IcmpError::NetUnreachable)
    );
    // RFC 1122 §4.2.3.9: a soft error for TCP, shown and kept until the open fails.
    let info = p.a.tcp_info(tcp).unwrap();
    assert_eq!(info.soft_error, Some(TcpError::NetUnreachable));
    assert_eq!(
        p.a.tcp_recv(p.now, tcp, &mut buf),
        Err(TcpError::WouldBlock)
    );
    assert_eq!(p.a.stats().ipv6.errors_received, 3);
    assert_eq!(p.a.stats().ipv6.errors_to_sockets, 2);
}

#[test]
fn port_unreachable_fails_the_udp_socket_that_sent_there() {
    let mut p = pair6(false);
    let udp = p.a.udp_bind(v6(a6(), 4000)).unwrap();
    p.a.udp_send_to(p.now, udp, v6(b6(), 9), b"anyone?")
        .unwrap();
    p.exchange();
    let mut buf = [0u8; 16];
    assert_eq!(
        p.a.udp_recv_from(udp, &mut buf),
        Err(UdpError::PortUnreachable)
    );
    // Reported once.
    assert_eq!(p.a.udp_recv_from(udp, &mut buf), Err(UdpError::WouldBlock));
}

/// The first 48 bytes of a UDP datagram A sent from `port` to B's port 53.
fn quoted_udp(port: u16) -> Vec<u8> {
    let mut quote = vec![0u8; ipv6::HEADER_LEN + 8];
    let header = ipv6::Repr {
        src_addr: a6(),
        dst_addr: b6(),
        next_header: NextHeader::Udp,
        payload_len: 1400,
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        flow_label: 0,
    };
    header.emit(&mut ipv6::Packet::new_unchecked(&mut quote[..]));
    quote[40..42].copy_from_slice(&port.to_be_bytes());
    quote[42..44].copy_from_slice(&53u16.to_be_bytes());
    quote
}

#[test]
fn packet_too_big_lowers_the_path_mtu_and_tells_the_udp_socket() {
    let mut p = pair6(false);
    let udp = p.a.udp_bind(v6(a6(), 4000)).unwrap();
    let other = p.a.udp_bind(v6(a6(), 4001)).unwrap();
    assert_eq!(p.a.path_mtu6(p.now, b6()), Some(1500));
    let quote = quoted_udp(4000);
    let too_big = icmpv6::Repr::PacketTooBig {
        mtu: 1280,
        invoking: &quote,
    };
    assert!(p.b.send_icmpv6(p.now, (Some(b6()), a6()), &too_big, None));
    p.exchange();
    assert_eq!(p.a.path_mtu6(p.now, b6()), Some(1280));
    let mut buf = [0u8; 16];
    assert_eq!(
        p.a.udp_recv_from(udp, &mut buf),
        Err(UdpError::FragmentationNeeded { mtu: 1280 })
    );
    assert_eq!(
        p.a.udp_recv_from(other, &mut buf),
        Err(UdpError::WouldBlock)
    );
    // An error quoting a packet that was not ours reaches no socket.
    let mut forged = quoted_udp(4001);
    forged[8..24].copy_from_slice(&far6().octets());
    let unreachable = icmpv6::Repr::DstUnreachable {
        reason: icmpv6::DstUnreachable::AddrUnreachable,
        invoking: &forged,
    };
    assert!(p.b.send_icmpv6(p.now, (Some(b6()), a6()), &unreachable, None));
    p.exchange();
    assert_eq!(
        p.a.udp_recv_from(other, &mut buf),
        Err(UdpError::WouldBlock)
    );
    assert_eq!(p.a.stats().ipv6.errors_to_sockets, 1);
}

#[test]
fn a_neighbour_that_never_answers_fails_the_sockets_waiting_on_it() {
    let mut p = pair6(false);
    let nobody: Ipv6Addr = "2001:db8::99".parse().unwrap();
    let udp = p.a.udp_bind(v6(a6(), 4000)).unwrap();
    let ping = p.a.icmp_bind(4).unwrap();
    p.a.udp_send_to(p.now, udp, v6(nobody, 53), b"hello?")
        .unwrap();
    p.a.icmp_send_echo(p.now, ping, nobody, 0, b"hello?")
        .unwrap();
    run_for(&mut p, Duration::from_secs(5));
    let mut buf = [0u8; 16];
    assert_eq!(
        p.a.udp_recv_from(udp, &mut buf),
        Err(UdpError::HostUnreachable)
    );
    assert_eq!(
        p.a.icmp_recv(ping, &mut buf),
        Err(IcmpError::HostUnreachable)
    );
    assert_eq!(p.a.stats().ipv6.tx_unresolved, 2);
}
