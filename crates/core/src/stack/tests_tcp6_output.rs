//! TCP over IPv6 through the per-flow egress cache: every frame the fast path writes in
//! place is the frame the general IPv6 output (`send_ipv6`: route, source address,
//! neighbour cache, transmit queue) makes of the same segment, on Ethernet and on an
//! IP-level link; the cached route, source and next-hop MAC are dropped when an
//! address, a route or the neighbour changes; checksum offload and TSO over IPv6.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr, SocketAddrV6};

use impnet_wire::ethernet;
use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, Cidr, NextHeader};
use impnet_wire::ndp;
use impnet_wire::tcp as wire_tcp;

use super::tests_ipv6::{a6, b6, connect6, pair6, run_for};
use crate::iface::{IfaceConfig, Offloads};
use crate::neighbor::Origin;
use crate::stack::Stack;
use crate::tcp::TcpHandle;
use crate::testutil::{IP_A, IP_B, MAC_A, MAC_B, Pair, drain, host_on};
use crate::time::{Duration, Instant};

const ETHERTYPE_IPV6: u16 = 0x86dd;

/// Where the IPv6 header starts in what `stack` sends: 14 on Ethernet, 0 on an
/// IP-level link.
fn ip_start(ip_level: bool) -> usize {
    if ip_level { 0 } else { ethernet::HEADER_LEN }
}

/// The TCP segments among `frames` (IPv6, next header TCP).
fn tcp_frames(frames: Vec<Vec<u8>>, ip_level: bool) -> Vec<Vec<u8>> {
    let at = ip_start(ip_level);
    frames
        .into_iter()
        .filter(|f| {
            let ipv6 = ip_level || crate::testutil::ethertype(f) == ETHERTYPE_IPV6;
            ipv6 && f.len() > at + ipv6::HEADER_LEN && f[at + 6] == 6
        })
        .collect()
}

/// The frame the general IPv6 output makes of the segment in `fast` (a frame of
/// `stack`'s), with its ECN codepoint (the old TCP path marked it on the queued
/// frame the same way).
fn slow_path_frame(stack: &mut Stack, now: Instant, fast: &[u8], ip_level: bool) -> Vec<u8> {
    let at = ip_start(ip_level);
    let header = ipv6::Packet::new_checked(&fast[at..]).expect("an IPv6 packet");
    let (src, dst, ecn) = (header.src_addr(), header.dst_addr(), header.ecn());
    let mut packet = vec![0u8; ipv6::HEADER_LEN];
    packet.extend_from_slice(&fast[at + ipv6::HEADER_LEN..]);
    stack
        .send_ipv6(
            now,
            (Some(src), dst),
            NextHeader::Tcp,
            None,
            packet,
            Origin::Tcp,
        )
        .expect("a route");
    let mut frames = drain(stack, now);
    assert_eq!(frames.len(), 1, "one frame from the general path");
    let mut frame = frames.remove(0);
    ipv6::Packet::new_unchecked(&mut frame[at..]).set_ecn(ecn);
    frame
}

/// Send `data` from A and compare every TCP frame either side sends (data one way,
/// ACKs the other) with the general path's, until all of it arrived.
fn compare_with_slow_path(p: &mut Pair, (client, server): (TcpHandle, TcpHandle), ip_level: bool) {
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let (mut sent, mut got, mut compared) = (0, Vec::new(), [0usize; 2]);
    let mut ect = 0;
    let mut buf = vec![0u8; 65536];
    for _ in 0..400 {
        // A few segments a round, so that B acknowledges many times.
        let piece = &data[sent..data.len().min(sent + 4000)];
        sent += p.a.tcp_send(p.now, client, piece).unwrap_or(0);
        for (side, from_a) in [(0, true), (1, false)] {
            let (sender, receiver, iface) = if from_a {
                (&mut p.a, &mut p.b, p.b_if)
            } else {
                (&mut p.b, &mut p.a, p.a_if)
            };
            for frame in tcp_frames(drain(sender, p.now), ip_level) {
                let slow = slow_path_frame(sender, p.now, &frame, ip_level);
                assert_eq!(
                    frame, slow,
                    "the fast path's frame differs from the general one"
                );
                let at = ip_start(ip_level);
                ect += usize::from(ipv6::Packet::new_unchecked(&frame[at..]).ecn() != 0);
                receiver.handle_frame(p.now, iface, &frame);
                compared[side] += 1;
            }
        }
        while let Ok(n) = p.b.tcp_recv(p.now, server, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
        p.advance(Duration::from_millis(1));
    }
    assert!(got == data, "{} of {} bytes arrived", got.len(), data.len());
    assert!(
        compared[0] >= 30 && compared[1] >= 10,
        "{compared:?} frames compared"
    );
    assert!(ect > 0, "ECN negotiated: some data segments carry ECT(0)");
}

#[test]
fn ethernet_frames_are_those_of_the_general_ipv6_output() {
    let mut p = pair6();
    let conn = connect6(&mut p);
    compare_with_slow_path(&mut p, conn, false);
}

#[test]
fn ip_level_packets_are_those_of_the_general_ipv6_output() {
    let mut p = Pair::ip_level(1500);
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    run_for(&mut p, Duration::from_millis(100));
    let conn = connect6(&mut p);
    compare_with_slow_path(&mut p, conn, true);
}

/// Queue `bytes` on A's connection and return the TCP frames A sends now.
fn a_sends(p: &mut Pair, client: TcpHandle, bytes: &[u8]) -> Vec<Vec<u8>> {
    p.a.tcp_send(p.now, client, bytes).unwrap();
    tcp_frames(drain(&mut p.a, p.now), false)
}

/// A flow whose entry is cached: a segment went out and was answered. No Nagle, so
/// every write goes at once.
fn warm_flow() -> (Pair, TcpHandle) {
    let mut p = pair6();
    let (client, _server) = connect6(&mut p);
    p.a.tcp_set_nodelay(client, true).unwrap();
    assert_eq!(a_sends(&mut p, client, b"warm").len(), 1);
    p.exchange();
    (p, client)
}

#[test]
fn a_new_link_layer_address_for_the_peer_is_used_at_once() {
    let (mut p, client) = warm_flow();
    let moved = ethernet::Address([2, 0, 0, 0, 0, 0x77]);
    // B announces (override set) that b6 moved to another MAC: RFC 4861 §7.2.5.
    let advert = icmpv6::Repr::Ndp(ndp::Repr::NeighborAdvert {
        router: false,
        solicited: false,
        overrides: true,
        target: b6(),
        target_lladdr: Some(moved),
    });
    assert!(p.b.send_icmpv6(p.now, (Some(b6()), a6()), &advert, Some(255)));
    p.exchange();
    let frames = a_sends(&mut p, client, b"after");
    assert_eq!(frames.len(), 1);
    let frame = ethernet::Frame::new_checked(&frames[0][..]).unwrap();
    assert_eq!(frame.dst_addr(), moved, "not the cached MAC {MAC_B:?}");
}

#[test]
fn a_route_through_a_router_sends_the_flow_there() {
    let (mut p, client) = warm_flow();
    let router: Ipv6Addr = "fe80::99".parse().unwrap();
    let host = Cidr::new(b6(), 128).unwrap();
    p.a.routes6_mut().add(host, Some(router), p.a_if);
    p.a.tcp_send(p.now, client, b"via the router").unwrap();
    let frames = drain(&mut p.a, p.now);
    assert!(
        tcp_frames(frames.clone(), false).is_empty(),
        "nothing goes straight to B"
    );
    // The segment waits for the router's address: a solicitation for it goes out.
    let solicits = frames.iter().any(|f| {
        let ip = ipv6::Packet::new_checked(&f[14..]).unwrap();
        let icmp = &f[14 + ipv6::HEADER_LEN..];
        ip.next_header() == NextHeader::Icmpv6 && icmp[0] == 135 && icmp[8..24] == router.octets()
    });
    assert!(solicits, "a neighbor solicitation for {router}");
}

#[test]
fn a_removed_source_address_stops_the_flow() {
    let (mut p, client) = warm_flow();
    let before = p.a.stats().ipv6.tx_no_route;
    p.a.remove_address6(p.a_if, a6());
    assert!(a_sends(&mut p, client, b"from nowhere").is_empty());
    assert_eq!(p.a.stats().ipv6.tx_no_route, before + 1);
}

#[test]
fn a_router_advertisement_sets_the_hop_limit_of_the_next_segment() {
    let (mut p, client) = warm_flow();
    let advert = icmpv6::Repr::Ndp(ndp::Repr::RouterAdvert {
        hop_limit: 17,
        managed: false,
        other: false,
        router_lifetime: 0,
        reachable_time: 0,
        retrans_timer: 0,
        source_lladdr: None,
        mtu: None,
        prefixes: ndp::Prefixes::List(&[]),
    });
    let ll = ipv6::link_local_from_mac(MAC_B);
    let all_nodes = crate::ipv6::ALL_NODES;
    assert!(p.b.send_icmpv6(p.now, (Some(ll), all_nodes), &advert, Some(255)));
    p.exchange();
    let frames = a_sends(&mut p, client, b"hops");
    assert_eq!(frames.len(), 1);
    assert_eq!(
        ipv6::Packet::new_checked(&frames[0][14..])
            .unwrap()
            .hop_limit(),
        17
    );
}

#[test]
fn tso_and_checksum_offload_over_ipv6() {
    let offloads = Offloads::CHECKSUM.with_tso(65535);
    let (a, a_if) = host_on(
        1,
        IfaceConfig::new(MAC_A, 1500).with_offloads(offloads),
        IP_A,
    );
    let (b, b_if) = host_on(2, IfaceConfig::new(MAC_B, 1500), IP_B);
    let mut p = Pair {
        a,
        b,
        a_if,
        b_if,
        now: Instant::from_nanos(0),
    };
    let (now, a_if, b_if) = (p.now, p.a_if, p.b_if);
    p.a.add_address6(now, a_if, Cidr::new(a6(), 64).unwrap());
    p.b.add_address6(now, b_if, Cidr::new(b6(), 64).unwrap());
    let any = |port| SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0);
    let listener = p.b.tcp_listen(any(80), 4).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 239) as u8).collect();
    let (mut client, mut server) = (None, None);
    let (mut sent, mut got, mut large) = (0, Vec::new(), 0);
    let mut buf = vec![0u8; 65536];
    for round in 0..3000 {
        if round == 2000 / 10 {
            // Duplicate address detection is over (a second): connect.
            let remote = SocketAddrV6::new(b6(), 80, 0, 0);
            client = Some(p.a.tcp_connect(p.now, any(0), remote).unwrap());
        }
        server = server.or_else(|| p.b.tcp_accept(listener).ok());
        if let (Some(client), Some(_)) = (client, server) {
            sent += p.a.tcp_send(p.now, client, &data[sent..]).unwrap_or(0);
        }
        for mut frame in drain(&mut p.a, p.now) {
            if let Some(len) = complete_checksum(&mut frame) {
                large += usize::from(len > 1500 - 60);
            }
            // The device cuts a large segment; B takes it whole (as after GRO).
            p.b.handle_frame(p.now, p.b_if, &frame);
        }
        for frame in drain(&mut p.b, p.now) {
            p.a.handle_frame(p.now, p.a_if, &frame);
        }
        while let Some(Ok(n)) = server.map(|s| p.b.tcp_recv(p.now, s, &mut buf)) {
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
    assert!(got == data, "{} of {} bytes arrived", got.len(), data.len());
    assert!(large > 0, "segments larger than the MSS (TSO)");
    assert_eq!(p.b.stats().tcp.rx_bad_checksum, 0);
}

/// What a device with checksum offload does to a TCP frame over IPv6: the checksum
/// field holds the pseudo-header sum (checked here), completed over the segment.
/// Returns the payload length, None for other frames.
fn complete_checksum(frame: &mut [u8]) -> Option<usize> {
    if crate::testutil::ethertype(frame) != ETHERTYPE_IPV6 || frame[14 + 6] != 6 {
        return None;
    }
    let ip = ipv6::Packet::new_checked(&frame[14..]).unwrap();
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    let segment = &mut frame[14 + ipv6::HEADER_LEN..];
    let len = segment.len();
    let header_len = usize::from(segment[12] >> 4) * 4;
    let mut tcp = wire_tcp::Packet::new_unchecked(&mut *segment);
    let pseudo = impnet_wire::checksum::pseudo_header_v6(&ip_v6(src), &ip_v6(dst), 6, len as u32);
    assert_eq!(tcp.checksum(), pseudo, "the partial (pseudo-header) sum");
    tcp.fill_checksum(&src, &dst);
    Some(len - header_len)
}

fn ip_v6(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V6(a) => a,
        IpAddr::V4(_) => unreachable!("an IPv6 frame"),
    }
}
