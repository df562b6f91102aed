//! The accept-any mode ([`crate::accept_any`]) over an IP-level link, as on a TUN
//! device: A (the client, default route over the link) opens connections and sends
//! datagrams to arbitrary addresses; B (the proxy) accepts them all, learning each
//! destination, and answers from it. Limits and the mode switched off.

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

use impnet_wire::ipv4::Cidr;

use crate::accept_any::AcceptAny;
use crate::stack::Stack;
use crate::tcp::TcpHandle;
use crate::testutil::{IP_A, IP_B, Pair};
use crate::time::{Duration, Instant};
use crate::udp::UdpError;

/// Destinations nobody on the link owns.
const TARGETS: [(Ipv4Addr, u16); 3] = [
    (Ipv4Addr::new(203, 0, 113, 5), 80),
    (Ipv4Addr::new(198, 51, 100, 7), 8080),
    (Ipv4Addr::new(192, 0, 2, 200), 443),
];

/// A on an IP-level pair with a default route over the link; B in accept-any mode
/// when `mode` is given.
fn proxy_pair(mode: Option<AcceptAny>) -> Pair {
    let mut pair = Pair::ip_level(1500);
    let default = Cidr {
        address: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
    };
    pair.a.routes_mut().add(default, Some(IP_B), pair.a_if);
    pair.b.set_accept_any(pair.b_if, mode);
    pair
}

fn target(i: usize) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(TARGETS[i].0, TARGETS[i].1))
}

/// Everything readable on `handle` appended to `into`.
fn read_into(stack: &mut Stack, now: Instant, handle: TcpHandle, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stack.tcp_recv(now, handle, &mut buf) {
        into.extend_from_slice(&buf[..n]);
    }
}

/// Send all of `data` from `from` (A when `a_sends`) and collect it on `to`.
fn transfer(pair: &mut Pair, a_sends: bool, (from, to): (TcpHandle, TcpHandle), data: &[u8]) {
    let (mut sent, mut got) = (0, Vec::new());
    for _ in 0..1000 {
        let (tx, rx) = if a_sends {
            (&mut pair.a, &mut pair.b)
        } else {
            (&mut pair.b, &mut pair.a)
        };
        if sent < data.len() {
            sent += tx.tcp_send(pair.now, from, &data[sent..]).unwrap_or(0);
        }
        read_into(rx, pair.now, to, &mut got);
        if got.len() == data.len() {
            break;
        }
        pair.exchange();
        pair.advance(Duration::from_millis(1));
    }
    assert_eq!(got, data, "byte-exact");
}

/// Connections to three unrelated addresses and ports are all accepted by the
/// catch-all listener; each one's local address is the destination the client chose;
/// data crosses both ways byte-exact (so B's replies left from that destination: A's
/// connection is keyed by it).
#[test]
fn connections_to_any_destination_are_accepted_with_their_destination() {
    let mut pair = proxy_pair(Some(AcceptAny::default()));
    let listener = pair.b.tcp_listen_any(8, 8).unwrap();
    assert_eq!(
        pair.b.tcp_listen_any(8, 8),
        Err(crate::tcp::TcpError::AddrInUse)
    );
    let clients: Vec<TcpHandle> = (0..TARGETS.len())
        .map(|i| {
            let local = SocketAddrV4::new(IP_A, 0);
            pair.a.tcp_connect(pair.now, local, target(i)).unwrap()
        })
        .collect();
    pair.exchange();
    for (i, &client) in clients.iter().enumerate() {
        let server = pair.b.tcp_accept(listener).expect("accepted");
        let (local, remote) = pair.b.tcp_addresses(server).unwrap();
        assert_eq!(local, target(i), "the original destination");
        assert_eq!(remote, pair.a.tcp_addresses(client).unwrap().0);
        let up: Vec<u8> = (0..20_000u32).map(|n| (n * 7 + i as u32) as u8).collect();
        let down: Vec<u8> = (0..30_000u32).map(|n| (n * 13 + i as u32) as u8).collect();
        transfer(&mut pair, true, (client, server), &up);
        transfer(&mut pair, false, (server, client), &down);
    }
    assert!(pair.b.tcp_accept(listener).is_err(), "nothing more");
    assert!(pair.b.stats().accept_any.rx_taken > 0);
    assert_eq!(pair.b.stats().accept_any.rate_limited, 0);
}

/// Datagrams to three destinations reach the catch-all socket with their source and
/// destination; the answers, sent from those destinations, reach A's socket from them.
#[test]
fn datagrams_to_any_destination_are_answered_from_it() {
    let mut pair = proxy_pair(Some(AcceptAny::default()));
    let catch_all = pair.b.udp_bind_any().unwrap();
    assert_eq!(pair.b.udp_bind_any(), Err(UdpError::AddrInUse));
    let client = pair.a.udp_bind(SocketAddrV4::new(IP_A, 5353)).unwrap();
    let a_addr = SocketAddr::V4(SocketAddrV4::new(IP_A, 5353));
    for i in 0..TARGETS.len() {
        let query = [b'q', i as u8, 1, 2, 3];
        pair.a
            .udp_send_to(pair.now, client, target(i), &query)
            .unwrap();
        pair.exchange();
        let mut buf = [0u8; 64];
        let (n, src, dst) = pair.b.udp_recv_from_to(catch_all, &mut buf).unwrap();
        assert_eq!((&buf[..n], src, dst), (&query[..], a_addr, target(i)));
        let answer = [b'a', i as u8, 9];
        pair.b
            .udp_send_from(pair.now, catch_all, dst, src, &answer)
            .unwrap();
        pair.exchange();
        let (n, from) = pair.a.udp_recv_from(client, &mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&answer[..], target(i)));
    }
    assert_eq!(pair.b.stats().accept_any.udp_caught, 3);
}

/// Each source gets `per_source_burst` opening packets at once, then
/// `per_source_rate` a second; the rest are dropped and counted.
#[test]
fn a_source_is_rate_limited_on_the_stack_clock() {
    let mode = AcceptAny {
        per_source_rate: 2,
        per_source_burst: 3,
        max_sources: 16,
    };
    let mut pair = proxy_pair(Some(mode));
    let catch_all = pair.b.udp_bind_any().unwrap();
    let client = pair.a.udp_bind(SocketAddrV4::new(IP_A, 0)).unwrap();
    let received = |pair: &mut Pair, sends: usize| {
        for n in 0..sends {
            let dst = target(n % TARGETS.len());
            pair.a.udp_send_to(pair.now, client, dst, b"x").unwrap();
        }
        pair.exchange();
        let mut got = 0;
        while pair.b.udp_recv_from_to(catch_all, &mut [0u8; 8]).is_ok() {
            got += 1;
        }
        got
    };
    assert_eq!(received(&mut pair, 10), 3, "the burst");
    assert_eq!(pair.b.stats().accept_any.rate_limited, 7);
    pair.advance(Duration::from_millis(1000));
    assert_eq!(received(&mut pair, 10), 2, "one second of the rate");
    assert_eq!(pair.b.stats().accept_any.rate_limited, 15);
}

/// Beyond `max_sources` tracked sources, a new source is refused until the others
/// are idle again.
#[test]
fn new_sources_beyond_the_cap_are_refused_until_others_are_idle() {
    let mode = AcceptAny {
        per_source_rate: 1,
        per_source_burst: 1,
        max_sources: 1,
    };
    let mut pair = proxy_pair(Some(mode));
    let catch_all = pair.b.udp_bind_any().unwrap();
    let second = Cidr {
        address: Ipv4Addr::new(10, 0, 0, 3),
        prefix_len: 24,
    };
    pair.a.add_address(pair.now, pair.a_if, second);
    let one = pair.a.udp_bind(SocketAddrV4::new(IP_A, 0)).unwrap();
    let two = pair
        .a
        .udp_bind(SocketAddrV4::new(second.address, 0))
        .unwrap();
    pair.a.udp_send_to(pair.now, one, target(0), b"1").unwrap();
    pair.a.udp_send_to(pair.now, two, target(0), b"2").unwrap();
    pair.exchange();
    assert_eq!(pair.b.stats().accept_any.sources_full, 1);
    pair.advance(Duration::from_millis(1000));
    pair.a.udp_send_to(pair.now, two, target(0), b"3").unwrap();
    pair.exchange();
    let mut buf = [0u8; 8];
    let mut got = Vec::new();
    while let Ok((n, _, _)) = pair.b.udp_recv_from_to(catch_all, &mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"13", "the idle source was forgotten for the new one");
}

/// The catch-all listener keeps at most `max_half_open` connections in SYN-RECEIVED:
/// with B's SYN-ACKs lost, five SYNs leave two half-open and three dropped.
#[test]
fn the_catch_all_listener_caps_half_open_connections() {
    let mut pair = proxy_pair(Some(AcceptAny::default()));
    let listener = pair.b.tcp_listen_any(16, 2).unwrap();
    for port in 0..5u16 {
        let dst = SocketAddrV4::new(TARGETS[0].0, 1000 + port);
        pair.a
            .tcp_connect(pair.now, SocketAddrV4::new(IP_A, 0), dst)
            .unwrap();
    }
    pair.exchange_filtered(|from_a, _| from_a);
    assert_eq!(pair.b.tcp_stats().half_open_drops, 3);
    assert!(pair.b.tcp_accept(listener).is_err());
}

/// Without the mode, a packet to an address not B's is dropped as before, even with
/// catch-all sockets open, and B cannot send from such an address.
#[test]
fn without_the_mode_other_destinations_stay_foreign() {
    let mut pair = proxy_pair(None);
    let listener = pair.b.tcp_listen_any(8, 8).unwrap();
    let catch_all = pair.b.udp_bind_any().unwrap();
    let local = SocketAddrV4::new(IP_A, 0);
    pair.a.tcp_connect(pair.now, local, target(0)).unwrap();
    let client = pair.a.udp_bind(local).unwrap();
    pair.a
        .udp_send_to(pair.now, client, target(1), b"x")
        .unwrap();
    pair.exchange();
    assert_eq!(pair.b.stats().ipv4.rx_not_for_us, 2);
    assert!(pair.b.tcp_accept(listener).is_err());
    assert_eq!(
        pair.b.udp_recv_from_to(catch_all, &mut [0u8; 8]),
        Err(UdpError::WouldBlock)
    );
    let from = target(1);
    let to = SocketAddr::new(IpAddr::V4(IP_A), 9);
    let refused = pair.b.udp_send_from(pair.now, catch_all, from, to, b"y");
    assert_eq!(refused, Err(UdpError::AddrNotAvailable));
    assert_eq!(pair.b.stats().accept_any, Default::default());
}
