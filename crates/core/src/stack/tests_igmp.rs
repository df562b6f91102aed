//! IPv4 multicast and IGMP (RFC 3376, RFC 2236) on a stack: joins and leaves reported
//! (IGMPv3 state-change reports twice; IGMPv2 reports and leaves once an older querier
//! was heard), queries answered within their Max Resp Time, the interface's group list,
//! multicast UDP sent to the group's MAC with the socket's multicast TTL and received
//! only for joined groups, looped back to the host's own members (`IP_MULTICAST_LOOP`),
//! and the misuse errors.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::igmp::{self, Addresses, QueryV3, RecordType};
use impnet_wire::ipv4::{self, Protocol};

use crate::testutil::{IP_A, IP_B, MAC_A, MAC_B, Pair, drain};
use crate::time::Duration;
use crate::udp::UdpError;

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);
/// Another group with GROUP's MAC (the top bit of the second octet is not mapped).
const SAME_MAC: Ipv4Addr = Ipv4Addr::new(239, 129, 2, 3);
const OTHER: Ipv4Addr = Ipv4Addr::new(239, 9, 9, 9);

/// An IGMP message A sent, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    V3(Vec<(RecordType, Ipv4Addr)>),
    V1Report(Ipv4Addr),
    V2Report(Ipv4Addr),
    Leave(Ipv4Addr),
}

/// The IGMP messages in `frames`, each checked to go to its destination's MAC with TTL
/// 1, a Router Alert and A's address as source.
fn igmp_sent(frames: &[Vec<u8>]) -> Vec<Sent> {
    let mut out = Vec::new();
    for frame in frames {
        let eth = ethernet::Frame::new_checked(&frame[..]).unwrap();
        if eth.ethertype() != EtherType::Ipv4 {
            continue;
        }
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        if ip.protocol() != Protocol::Igmp {
            continue;
        }
        assert!(ip.verify_checksum());
        assert_eq!((ip.ttl(), ip.options()), (1, &igmp::ROUTER_ALERT[..]));
        assert_eq!(ip.src_addr(), IP_A);
        assert_eq!(eth.dst_addr().0, igmp::multicast_mac(ip.dst_addr()));
        let repr = igmp::Repr::parse(&igmp::Packet::new_checked(ip.payload()).unwrap()).unwrap();
        out.push(match repr {
            igmp::Repr::ReportV3 { records } => {
                assert_eq!(ip.dst_addr(), igmp::ALL_V3_ROUTERS);
                Sent::V3(records.iter().map(|r| (r.record_type, r.group)).collect())
            }
            igmp::Repr::ReportV2 { group } => {
                assert_eq!(ip.dst_addr(), group);
                Sent::V2Report(group)
            }
            igmp::Repr::ReportV1 { group } => {
                assert_eq!(ip.dst_addr(), group);
                Sent::V1Report(group)
            }
            igmp::Repr::Leave { group } => {
                assert_eq!(ip.dst_addr(), igmp::ALL_ROUTERS);
                Sent::Leave(group)
            }
            other => panic!("A sent {other}"),
        });
    }
    out
}

/// What A sends right now.
fn now_sent(p: &mut Pair) -> Vec<Sent> {
    igmp_sent(&drain(&mut p.a, p.now))
}

/// Run A's timers for `span` in 10 ms steps, collecting its IGMP messages.
fn collect(p: &mut Pair, span: Duration) -> Vec<Sent> {
    let mut out = Vec::new();
    for _ in 0..span.as_millis() / 10 {
        p.advance(Duration::from_millis(10));
        out.extend(now_sent(p));
    }
    out
}

/// A query from B (IGMPv3 when `v3`, else v2), to `group` or, general, to 224.0.0.1.
fn query(code: u8, group: Ipv4Addr, v3: bool) -> Vec<u8> {
    let repr = igmp::Repr::Query {
        max_resp_code: code,
        group,
        v3: v3.then_some(QueryV3 {
            suppress: false,
            robustness: 2,
            interval_code: 125,
            sources: Addresses::EMPTY,
        }),
    };
    let dst = if group.is_unspecified() {
        igmp::ALL_SYSTEMS
    } else {
        group
    };
    frame_to(dst, Protocol::Igmp, &{
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut igmp::Packet::new_unchecked(&mut bytes[..]));
        bytes
    })
}

/// An Ethernet frame from B to `dst`'s multicast MAC carrying `payload`, TTL 1.
fn frame_to(dst: Ipv4Addr, protocol: Protocol, payload: &[u8]) -> Vec<u8> {
    let header = ipv4::Repr {
        src_addr: IP_B,
        dst_addr: dst,
        protocol,
        payload_len: payload.len(),
        ttl: 1,
        ident: 7,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut frame = vec![0u8; ethernet::HEADER_LEN + header.buffer_len()];
    ethernet::Repr {
        src: MAC_B,
        dst: ethernet::Address(igmp::multicast_mac(dst)),
        ethertype: EtherType::Ipv4,
        vlan: None,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    let ip = &mut frame[ethernet::HEADER_LEN..];
    header.emit(&mut ipv4::Packet::new_unchecked(&mut ip[..]));
    ip[20..].copy_from_slice(payload);
    frame
}

/// A UDP datagram from B's 10.0.0.2:4000 to `group`:5000.
fn udp_frame(group: Ipv4Addr, data: &[u8]) -> Vec<u8> {
    let repr = impnet_wire::udp::Repr {
        src_port: 4000,
        dst_port: 5000,
        payload: data,
    };
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut impnet_wire::udp::Packet::new_unchecked(&mut bytes[..]),
        &IP_B,
        &group,
    );
    frame_to(group, Protocol::Udp, &bytes)
}

/// A with a socket on 0.0.0.0:5000 that joined GROUP; the join's reports sent.
fn joined() -> (Pair, crate::udp::UdpHandle) {
    let mut p = Pair::new();
    let socket =
        p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000))
            .unwrap();
    p.a.udp_join_multicast_v4(p.now, socket, GROUP, Ipv4Addr::UNSPECIFIED)
        .unwrap();
    collect(&mut p, Duration::from_secs(2));
    (p, socket)
}

#[test]
fn a_join_is_reported_at_once_and_again_and_a_leave_twice() {
    let mut p = Pair::new();
    let socket =
        p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000))
            .unwrap();
    assert_eq!(p.a.ipv4_multicast_groups(p.a_if), [igmp::ALL_SYSTEMS]);
    p.a.udp_join_multicast_v4(p.now, socket, GROUP, IP_A)
        .unwrap();
    let join = Sent::V3(vec![(RecordType::ChangeToExclude, GROUP)]);
    // RFC 3376 §5.1: the first report goes at once, the repeat within a second.
    assert_eq!(now_sent(&mut p), core::slice::from_ref(&join));
    assert_eq!(collect(&mut p, Duration::from_secs(3)), [join]);
    assert_eq!(
        p.a.ipv4_multicast_groups(p.a_if),
        [igmp::ALL_SYSTEMS, GROUP]
    );
    p.a.udp_leave_multicast_v4(p.now, socket, GROUP, IP_A)
        .unwrap();
    let leave = Sent::V3(vec![(RecordType::ChangeToInclude, GROUP)]);
    assert_eq!(now_sent(&mut p), core::slice::from_ref(&leave));
    assert_eq!(collect(&mut p, Duration::from_secs(3)), [leave]);
    assert_eq!(p.a.ipv4_multicast_groups(p.a_if), [igmp::ALL_SYSTEMS]);
    assert_eq!(p.a.stats().igmp.reports_sent, 4);
}

#[test]
fn two_sockets_share_a_membership_and_a_close_leaves() {
    let (mut p, first) = joined();
    let second = p.a.udp_bind(SocketAddrV4::new(IP_A, 6000)).unwrap();
    p.a.udp_join_multicast_v4(p.now, second, GROUP, IP_A)
        .unwrap();
    assert!(
        now_sent(&mut p).is_empty(),
        "the interface was in the group already"
    );
    p.a.udp_close(first).unwrap();
    assert!(collect(&mut p, Duration::from_secs(2)).is_empty());
    p.a.udp_close(second).unwrap();
    let leave = Sent::V3(vec![(RecordType::ChangeToInclude, GROUP)]);
    assert_eq!(
        collect(&mut p, Duration::from_secs(3)),
        [leave.clone(), leave]
    );
    assert_eq!(p.a.ipv4_multicast_groups(p.a_if), [igmp::ALL_SYSTEMS]);
}

#[test]
fn local_control_groups_are_joined_but_never_reported() {
    let mut p = Pair::new();
    let socket =
        p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5353))
            .unwrap();
    let mdns = Ipv4Addr::new(224, 0, 0, 251);
    p.a.udp_join_multicast_v4(p.now, socket, mdns, IP_A)
        .unwrap();
    assert!(collect(&mut p, Duration::from_secs(2)).is_empty());
    assert_eq!(p.a.ipv4_multicast_groups(p.a_if), [igmp::ALL_SYSTEMS, mdns]);
}

#[test]
fn general_and_group_queries_are_answered_within_max_resp_time() {
    let (mut p, _) = joined();
    let socket =
        p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001))
            .unwrap();
    p.a.udp_join_multicast_v4(p.now, socket, OTHER, IP_A)
        .unwrap();
    collect(&mut p, Duration::from_secs(2));
    // IGMPv3 General Query, Max Resp Code 10 (1 s): every group, MODE_IS_EXCLUDE.
    p.a.handle_frame(p.now, p.a_if, &query(10, Ipv4Addr::UNSPECIFIED, true));
    let all = Sent::V3(vec![
        (RecordType::ModeIsExclude, GROUP),
        (RecordType::ModeIsExclude, OTHER),
    ]);
    assert_eq!(collect(&mut p, Duration::from_millis(1010)), [all]);
    // A Group-Specific Query names one group; one for a group not joined draws nothing.
    p.a.handle_frame(p.now, p.a_if, &query(10, GROUP, true));
    let one = Sent::V3(vec![(RecordType::ModeIsExclude, GROUP)]);
    assert_eq!(collect(&mut p, Duration::from_millis(1010)), [one]);
    p.a.handle_frame(p.now, p.a_if, &query(10, SAME_MAC, true));
    assert!(collect(&mut p, Duration::from_millis(1010)).is_empty());
    assert_eq!(p.a.stats().igmp.queries_received, 2);
    assert_eq!(p.a.stats().igmp.rx_not_member, 1);
}

#[test]
fn an_igmpv2_querier_switches_to_v2_reports_and_leaves() {
    let (mut p, socket) = joined();
    // RFC 3376 §7.2.1: an older query sets the Older Version Querier Present timer.
    p.a.handle_frame(p.now, p.a_if, &query(10, Ipv4Addr::UNSPECIFIED, false));
    assert_eq!(
        collect(&mut p, Duration::from_millis(1010)),
        [Sent::V2Report(GROUP)]
    );
    let other =
        p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001))
            .unwrap();
    p.a.udp_join_multicast_v4(p.now, other, OTHER, IP_A)
        .unwrap();
    assert_eq!(now_sent(&mut p), [Sent::V2Report(OTHER)]);
    collect(&mut p, Duration::from_secs(2));
    p.a.udp_leave_multicast_v4(p.now, socket, GROUP, IP_A)
        .unwrap();
    assert_eq!(now_sent(&mut p), [Sent::Leave(GROUP)]);
    assert_eq!(
        collect(&mut p, Duration::from_secs(2)),
        [Sent::Leave(GROUP)]
    );
    assert_eq!(p.a.stats().igmp.leaves_sent, 2);
    // 260 s later with no older query (RFC 3376 §8.12), IGMPv3 again.
    p.advance(Duration::from_secs(261));
    p.a.udp_leave_multicast_v4(p.now, other, OTHER, IP_A)
        .unwrap();
    let leave = Sent::V3(vec![(RecordType::ChangeToInclude, OTHER)]);
    assert_eq!(now_sent(&mut p), [leave]);
}

#[test]
fn multicast_udp_reaches_only_joined_groups() {
    let (mut p, socket) = joined();
    let mut buf = [0u8; 64];
    p.a.handle_frame(p.now, p.a_if, &udp_frame(GROUP, b"to the group"));
    let (len, from) = p.a.udp_recv_from(socket, &mut buf).unwrap();
    assert_eq!(&buf[..len], b"to the group");
    assert_eq!(from, SocketAddr::V4(SocketAddrV4::new(IP_B, 4000)));
    // Another group's MAC is dropped at the link; a group sharing GROUP's MAC at IP.
    p.a.handle_frame(p.now, p.a_if, &udp_frame(OTHER, b"not joined"));
    p.a.handle_frame(p.now, p.a_if, &udp_frame(SAME_MAC, b"same MAC"));
    assert_eq!(
        p.a.udp_recv_from(socket, &mut buf),
        Err(UdpError::WouldBlock)
    );
    assert_eq!(p.a.stats().igmp.rx_multicast_filtered, 1);
    assert_eq!(p.a.stats().igmp.rx_not_member, 1);
    // No port unreachable about a multicast datagram to a port nobody holds.
    p.a.udp_close(socket).unwrap();
    p.a.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5001))
        .unwrap();
    drain(&mut p.a, p.now);
    p.a.handle_frame(p.now, p.a_if, &udp_frame(igmp::ALL_SYSTEMS, b"all"));
    assert!(drain(&mut p.a, p.now).is_empty());
}

#[test]
fn multicast_udp_goes_to_the_group_mac_with_the_multicast_ttl_and_no_arp() {
    let (mut p, _) = joined();
    let b =
        p.b.udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000))
            .unwrap();
    p.b.udp_join_multicast_v4(p.now, b, GROUP, IP_B).unwrap();
    drain(&mut p.b, p.now);
    let a = p.a.udp_bind(SocketAddrV4::new(IP_A, 7000)).unwrap();
    assert_eq!(p.a.udp_multicast_ttl_v4(a), Ok(1));
    for ttl in [1, 5] {
        p.a.udp_set_multicast_ttl_v4(a, ttl).unwrap();
        p.a.udp_send_to(p.now, a, SocketAddrV4::new(GROUP, 5000), b"hello")
            .unwrap();
        let frames = drain(&mut p.a, p.now);
        assert_eq!(frames.len(), 1, "one frame, no ARP request");
        let eth = ethernet::Frame::new_checked(&frames[0][..]).unwrap();
        assert_eq!(eth.dst_addr().0, [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]);
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        assert_eq!((ip.dst_addr(), ip.ttl()), (GROUP, ttl));
        p.b.handle_frame(p.now, p.b_if, &frames[0]);
        let mut buf = [0u8; 16];
        let (len, from) = p.b.udp_recv_from(b, &mut buf).unwrap();
        assert_eq!(
            (&buf[..len], from),
            (&b"hello"[..], SocketAddr::V4(SocketAddrV4::new(IP_A, 7000)))
        );
    }
    assert_eq!(p.a.stats().igmp.tx_multicast, 2);
}

/// `IP_MULTICAST_LOOP` (on by default, as in Linux): a datagram to a group the
/// sending interface is in also reaches this host's member socket, once, from the
/// sender's address; off, or to a group the interface is not in, only the wire has it.
#[test]
fn multicast_loops_back_to_the_hosts_members_unless_switched_off() {
    let (mut p, member) = joined();
    let a = p.a.udp_bind(SocketAddrV4::new(IP_A, 7000)).unwrap();
    assert_eq!(p.a.udp_multicast_loop_v4(a), Ok(true));
    let mut buf = [0u8; 16];
    p.a.udp_send_to(p.now, a, SocketAddrV4::new(GROUP, 5000), b"looped")
        .unwrap();
    assert_eq!(drain(&mut p.a, p.now).len(), 1, "the wire's copy");
    let (len, from) = p.a.udp_recv_from(member, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (
            &b"looped"[..],
            SocketAddr::V4(SocketAddrV4::new(IP_A, 7000))
        )
    );
    assert_eq!(
        p.a.udp_recv_from(member, &mut buf),
        Err(UdpError::WouldBlock)
    );
    assert_eq!(p.a.stats().igmp.tx_looped, 1);
    // A group the interface is not in: nothing looped.
    p.a.udp_send_to(p.now, a, SocketAddrV4::new(OTHER, 5000), b"other")
        .unwrap();
    assert_eq!(drain(&mut p.a, p.now).len(), 1);
    assert_eq!(
        p.a.udp_recv_from(member, &mut buf),
        Err(UdpError::WouldBlock)
    );
    // Switched off: the wire only.
    p.a.udp_set_multicast_loop_v4(a, false).unwrap();
    assert_eq!(p.a.udp_multicast_loop_v4(a), Ok(false));
    p.a.udp_send_to(p.now, a, SocketAddrV4::new(GROUP, 5000), b"wire only")
        .unwrap();
    assert_eq!(drain(&mut p.a, p.now).len(), 1);
    assert_eq!(
        p.a.udp_recv_from(member, &mut buf),
        Err(UdpError::WouldBlock)
    );
    assert_eq!(p.a.stats().igmp.tx_looped, 1);
    p.a.udp_close(a).unwrap();
    assert_eq!(
        p.a.udp_set_multicast_loop_v4(a, true),
        Err(UdpError::InvalidHandle)
    );
}

#[test]
fn misuse_is_refused_with_the_reason() {
    let (mut p, socket) = joined();
    let (now, any) = (p.now, Ipv4Addr::UNSPECIFIED);
    assert_eq!(
        p.a.udp_join_multicast_v4(now, socket, IP_B, any),
        Err(UdpError::InvalidGroup)
    );
    assert_eq!(
        p.a.udp_join_multicast_v4(now, socket, GROUP, any),
        Err(UdpError::AddrInUse)
    );
    assert_eq!(
        p.a.udp_join_multicast_v4(now, socket, OTHER, IP_B),
        Err(UdpError::AddrNotAvailable)
    );
    assert_eq!(
        p.a.udp_leave_multicast_v4(now, socket, OTHER, any),
        Err(UdpError::AddrNotAvailable)
    );
    p.a.udp_close(socket).unwrap();
    assert_eq!(
        p.a.udp_join_multicast_v4(now, socket, GROUP, any),
        Err(UdpError::InvalidHandle)
    );
    assert_eq!(
        p.a.udp_set_multicast_ttl_v4(socket, 3),
        Err(UdpError::InvalidHandle)
    );
    assert_eq!(
        p.a.udp_leave_multicast_v4(now, socket, GROUP, any),
        Err(UdpError::InvalidHandle)
    );
}

#[test]
fn malformed_igmp_is_counted_and_dropped() {
    let (mut p, _) = joined();
    let mut bad = query(10, Ipv4Addr::UNSPECIFIED, true);
    let last = bad.len() - 1;
    bad[last] ^= 0xff; // the IGMP checksum no longer matches
    p.a.handle_frame(p.now, p.a_if, &bad);
    p.a.handle_frame(
        p.now,
        p.a_if,
        &frame_to(igmp::ALL_SYSTEMS, Protocol::Igmp, &[0x11, 0, 0]),
    );
    assert_eq!(p.a.stats().igmp.rx_malformed, 2);
    assert!(collect(&mut p, Duration::from_secs(30)).is_empty());
    let _ = MAC_A;
}

proptest::proptest! {
    /// Any IGMP message (checksum right, so the parser's every branch is reached) to a
    /// group A is in: no panic, and whatever A sends because of it is a valid report.
    #[test]
    fn any_igmp_message_is_safe(mut body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
                                to_group in proptest::prelude::any::<bool>()) {
        let (mut p, _) = joined();
        if let Ok(mut packet) = igmp::Packet::new_checked(&mut body[..]) {
            packet.fill_checksum();
        }
        let dst = if to_group { GROUP } else { igmp::ALL_SYSTEMS };
        p.a.handle_frame(p.now, p.a_if, &frame_to(dst, Protocol::Igmp, &body));
        collect(&mut p, Duration::from_secs(30));
    }
}

// ---- Source-specific joins (IP_ADD_SOURCE_MEMBERSHIP, RFC 3376 §3 and §5) ----------

/// A source other than B.
const ELSEWHERE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

type Record = (RecordType, Ipv4Addr, Vec<Ipv4Addr>);

/// The IGMPv3 group records, sources included, in `frames`.
fn records_in(frames: &[Vec<u8>]) -> Vec<Record> {
    let mut out = Vec::new();
    for frame in frames {
        let eth = ethernet::Frame::new_checked(&frame[..]).unwrap();
        let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
            continue;
        };
        if ip.protocol() != Protocol::Igmp {
            continue;
        }
        let packet = igmp::Packet::new_checked(ip.payload()).unwrap();
        if let igmp::Repr::ReportV3 { records } = igmp::Repr::parse(&packet).unwrap() {
            out.extend(
                records
                    .iter()
                    .map(|r| (r.record_type, r.group, r.sources.iter().collect())),
            );
        }
    }
    out
}

/// A's IGMPv3 records over `span` of its timers (10 ms steps).
fn records_over(p: &mut Pair, span: Duration) -> Vec<Record> {
    let mut out = records_in(&drain(&mut p.a, p.now));
    for _ in 0..span.as_millis() / 10 {
        p.advance(Duration::from_millis(10));
        out.extend(records_in(&drain(&mut p.a, p.now)));
    }
    out
}

/// An IGMPv3 Group-and-Source-Specific Query from B about `sources` of `group`.
fn source_query(group: Ipv4Addr, sources: &[Ipv4Addr]) -> Vec<u8> {
    let repr = igmp::Repr::Query {
        max_resp_code: 10,
        group,
        v3: Some(QueryV3 {
            suppress: false,
            robustness: 2,
            interval_code: 125,
            sources: Addresses::List(sources),
        }),
    };
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut igmp::Packet::new_unchecked(&mut bytes[..]));
    frame_to(group, Protocol::Igmp, &bytes)
}

/// Whether A's socket gets B's datagram to GROUP (and its queue is left empty).
fn gets_bs_datagram(p: &mut Pair, socket: crate::udp::UdpHandle) -> bool {
    p.a.handle_frame(p.now, p.a_if, &udp_frame(GROUP, b"from B"));
    let mut buf = [0u8; 16];
    p.a.udp_recv_from(socket, &mut buf).is_ok()
}

#[test]
#[allow(clippy::too_many_lines)] // one story, step by step; the lint is for library code
fn a_source_specific_join_takes_only_its_sources_and_reports_each_change() {
    use RecordType::*;
    let mut p = Pair::new();
    let any = Ipv4Addr::UNSPECIFIED;
    let s = p.a.udp_bind(SocketAddrV4::new(any, 5000)).unwrap();
    // INCLUDE {} -> INCLUDE {B}: ALLOW(B), sent twice.
    p.a.udp_join_source_multicast_v4(p.now, s, (GROUP, IP_B), any)
        .unwrap();
    let allow_b = (AllowNewSources, GROUP, vec![IP_B]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [allow_b.clone(), allow_b]
    );
    assert!(gets_bs_datagram(&mut p, s));
    // The wrong kind of join, or the same source again, is refused.
    assert_eq!(
        p.a.udp_join_multicast_v4(p.now, s, GROUP, any),
        Err(UdpError::AddrInUse)
    );
    assert_eq!(
        p.a.udp_join_source_multicast_v4(p.now, s, (GROUP, IP_B), any),
        Err(UdpError::AddrInUse)
    );
    assert_eq!(
        p.a.udp_join_source_multicast_v4(p.now, s, (GROUP, GROUP), any),
        Err(UdpError::AddrNotAvailable)
    );
    // A second source, then the first dropped: ALLOW(elsewhere), BLOCK(B); B's
    // datagrams are filtered out at the interface.
    p.a.udp_join_source_multicast_v4(p.now, s, (GROUP, ELSEWHERE), any)
        .unwrap();
    let allow = (AllowNewSources, GROUP, vec![ELSEWHERE]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [allow.clone(), allow]
    );
    p.a.udp_leave_source_multicast_v4(p.now, s, (GROUP, IP_B), any)
        .unwrap();
    let block = (BlockOldSources, GROUP, vec![IP_B]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [block.clone(), block]
    );
    assert_eq!(
        p.a.udp_leave_source_multicast_v4(p.now, s, (GROUP, IP_B), any),
        Err(UdpError::AddrNotAvailable)
    );
    assert!(!gets_bs_datagram(&mut p, s));
    assert_eq!(p.a.stats().igmp.rx_source_filtered, 1);
    // Another socket joins for every source: the interface goes to EXCLUDE {} (TO_EX)
    // and takes B's datagram, but the first socket's own filter still refuses it.
    let t = p.a.udp_bind(SocketAddrV4::new(any, 6000)).unwrap();
    p.a.udp_join_multicast_v4(p.now, t, GROUP, any).unwrap();
    let to_ex = (ChangeToExclude, GROUP, vec![]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [to_ex.clone(), to_ex]
    );
    assert!(!gets_bs_datagram(&mut p, s));
    assert_eq!(p.a.stats().igmp.rx_source_filtered, 2);
    p.a.handle_frame(p.now, p.a_if, &query(10, Ipv4Addr::UNSPECIFIED, true));
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [(ModeIsExclude, GROUP, vec![])]
    );
    // It leaves: back to INCLUDE {elsewhere} (TO_IN).
    p.a.udp_close(t).unwrap();
    p.a.handle_timeout(p.now);
    let to_in = (ChangeToInclude, GROUP, vec![ELSEWHERE]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [to_in.clone(), to_in]
    );
    // Current state: the whole group, then only the asked sources it takes.
    p.a.handle_frame(p.now, p.a_if, &query(10, GROUP, true));
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [(ModeIsInclude, GROUP, vec![ELSEWHERE])]
    );
    p.a.handle_frame(p.now, p.a_if, &source_query(GROUP, &[IP_B, ELSEWHERE]));
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [(ModeIsInclude, GROUP, vec![ELSEWHERE])]
    );
    p.a.handle_frame(p.now, p.a_if, &source_query(GROUP, &[IP_B]));
    assert!(records_over(&mut p, Duration::from_secs(2)).is_empty());
    // Leaving the group drops every source: BLOCK(elsewhere).
    p.a.udp_leave_multicast_v4(p.now, s, GROUP, any).unwrap();
    let block = (BlockOldSources, GROUP, vec![ELSEWHERE]);
    assert_eq!(
        records_over(&mut p, Duration::from_secs(2)),
        [block.clone(), block]
    );
    assert!(p.a.ipv4_multicast_groups(p.a_if).len() == 1);
}

#[test]
fn a_source_specific_join_under_an_igmpv2_querier_is_a_plain_report() {
    let mut p = Pair::new();
    let any = Ipv4Addr::UNSPECIFIED;
    p.a.handle_frame(p.now, p.a_if, &query(10, Ipv4Addr::UNSPECIFIED, false));
    collect(&mut p, Duration::from_secs(2));
    let s = p.a.udp_bind(SocketAddrV4::new(any, 5000)).unwrap();
    p.a.udp_join_source_multicast_v4(p.now, s, (GROUP, IP_B), any)
        .unwrap();
    let mut sent = now_sent(&mut p);
    sent.extend(collect(&mut p, Duration::from_secs(2)));
    assert_eq!(sent, [Sent::V2Report(GROUP), Sent::V2Report(GROUP)]);
    p.a.udp_leave_source_multicast_v4(p.now, s, (GROUP, IP_B), any)
        .unwrap();
    let mut sent = now_sent(&mut p);
    sent.extend(collect(&mut p, Duration::from_secs(2)));
    assert_eq!(sent, [Sent::Leave(GROUP), Sent::Leave(GROUP)]);
}

/// An IGMPv2 report of `group` from B.
fn report_v2_from_b(group: Ipv4Addr) -> Vec<u8> {
    let repr = igmp::Repr::ReportV2 { group };
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut igmp::Packet::new_unchecked(&mut bytes[..]));
    frame_to(group, Protocol::Igmp, &bytes)
}

/// RFC 2236 §3 under an IGMPv2 querier: another host's report of the group cancels
/// our pending answer; the next query is answered again. An IGMPv3 host does not
/// suppress (RFC 3376 §5.2).
#[test]
fn another_hosts_v2_report_suppresses_ours_in_v2_mode_only() {
    let (mut p, _) = joined();
    p.a.handle_frame(p.now, p.a_if, &query(100, Ipv4Addr::UNSPECIFIED, false));
    p.a.handle_frame(p.now, p.a_if, &report_v2_from_b(GROUP));
    assert!(collect(&mut p, Duration::from_secs(11)).is_empty());
    assert_eq!(p.a.stats().igmp.reports_suppressed, 1);
    p.a.handle_frame(p.now, p.a_if, &query(100, Ipv4Addr::UNSPECIFIED, false));
    assert_eq!(
        collect(&mut p, Duration::from_secs(11)),
        [Sent::V2Report(GROUP)]
    );
    // IGMPv3: the same report changes nothing.
    let (mut p, _) = joined();
    p.a.handle_frame(p.now, p.a_if, &query(100, Ipv4Addr::UNSPECIFIED, true));
    p.a.handle_frame(p.now, p.a_if, &report_v2_from_b(GROUP));
    assert_eq!(
        collect(&mut p, Duration::from_secs(11)),
        [Sent::V3(vec![(RecordType::ModeIsExclude, GROUP)])]
    );
    assert_eq!(p.a.stats().igmp.reports_suppressed, 0);
}

/// Under an IGMPv1 querier (a query with Max Resp Code 0): joins and answers are
/// IGMPv1 reports, and a leave sends nothing (IGMPv1 has no leave, RFC 3376 §7.3.2).
#[test]
fn an_igmpv1_querier_gets_v1_reports_and_no_leaves() {
    let mut p = Pair::new();
    let any = Ipv4Addr::UNSPECIFIED;
    p.a.handle_frame(p.now, p.a_if, &query(0, Ipv4Addr::UNSPECIFIED, false));
    assert!(
        collect(&mut p, Duration::from_secs(11)).is_empty(),
        "no groups yet"
    );
    let s = p.a.udp_bind(SocketAddrV4::new(any, 5000)).unwrap();
    p.a.udp_join_multicast_v4(p.now, s, GROUP, any).unwrap();
    let mut sent = now_sent(&mut p);
    sent.extend(collect(&mut p, Duration::from_secs(2)));
    assert_eq!(sent, [Sent::V1Report(GROUP), Sent::V1Report(GROUP)]);
    p.a.handle_frame(p.now, p.a_if, &query(0, Ipv4Addr::UNSPECIFIED, false));
    assert_eq!(
        collect(&mut p, Duration::from_secs(11)),
        [Sent::V1Report(GROUP)]
    );
    p.a.udp_leave_multicast_v4(p.now, s, GROUP, any).unwrap();
    let mut sent = now_sent(&mut p);
    sent.extend(collect(&mut p, Duration::from_secs(2)));
    assert!(sent.is_empty(), "{sent:?}");
}
