//! Multicast Listener Discovery (RFC 3810) on a stack: state-change reports when an
//! address is added (twice, the second within the Unsolicited Report Interval) and
//! removed, answers to General and Group-Specific Queries (MLDv2 and MLDv1) within
//! their Maximum Response Delay, invalid queries ignored, and frames to the MAC of a
//! group not joined dropped.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv6Addr;

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, Cidr, NextHeader};
use impnet_wire::ipv6ext::{ExtHeader, OptionsRepr};
use impnet_wire::mld::{self, Addresses, QueryV2, RecordType};

use crate::testutil::{MAC_A, MAC_B, Pair};
use crate::time::Duration;

fn a6() -> Ipv6Addr {
    "2001:db8::1:5".parse().unwrap()
}

/// An MLDv2 report's records: (type, group), in order.
type Records = Vec<(RecordType, Ipv6Addr)>;

/// The MLD reports in `frames`: records and the packet's source, with its hop limit
/// and Router Alert checked.
fn reports(frames: &[Vec<u8>]) -> Vec<(Records, Ipv6Addr)> {
    let mut out = Vec::new();
    for frame in frames {
        let eth = ethernet::Frame::new_checked(&frame[..]).unwrap();
        if eth.ethertype() != EtherType::Ipv6 {
            continue;
        }
        let bytes = eth.payload();
        let packet = ipv6::Packet::new_checked(bytes).unwrap();
        let walk = impnet_wire::ipv6ext::walk(bytes).unwrap();
        if walk.protocol != NextHeader::Icmpv6 {
            continue;
        }
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        let icmp = icmpv6::Packet::new_checked(&bytes[walk.offset..]).unwrap();
        if let Ok(icmpv6::Repr::Mld(mld::Repr::ReportV2 { records })) =
            icmpv6::Repr::parse(&icmp, &src, &dst)
        {
            assert_eq!(dst, crate::ipv6::ALL_MLDV2_ROUTERS);
            assert_eq!(eth.dst_addr(), ipv6::multicast_mac(dst));
            assert_eq!(packet.hop_limit(), 1);
            assert_eq!(walk.router_alert, Some(0));
            let records = records.iter().map(|r| (r.record_type, r.group)).collect();
            out.push((records, src));
        }
    }
    out
}

/// Run A's timers for `span` in 10 ms steps, collecting what it sends.
fn collect(p: &mut Pair, span: Duration) -> Vec<(Records, Ipv6Addr)> {
    let mut frames = Vec::new();
    for _ in 0..span.as_millis() / 10 {
        p.advance(Duration::from_millis(10));
        let mut buf = vec![0u8; 2048];
        while let Some(t) = p.a.poll_transmit(p.now, &mut buf) {
            frames.push(buf[..t.len].to_vec());
        }
    }
    reports(&frames)
}

/// A stack with IPv6 on, its link-local address through DAD, reports sent.
fn ready() -> Pair {
    let mut p = Pair::new();
    let (now, a_if) = (p.now, p.a_if);
    p.a.enable_ipv6(now, a_if);
    collect(&mut p, Duration::from_secs(3));
    p
}

/// A query from B's link-local address to all nodes, as Linux's querier sends it.
fn query(max_response_code: u16, group: Ipv6Addr, v2: bool, src: Ipv6Addr) -> Vec<u8> {
    let repr = icmpv6::Repr::Mld(mld::Repr::Query {
        max_response_code,
        group,
        v2: v2.then_some(QueryV2 {
            suppress: false,
            robustness: 2,
            interval_code: 125,
            sources: Addresses::EMPTY,
        }),
    });
    let dst = crate::ipv6::ALL_NODES;
    let len = 8 + repr.buffer_len();
    let mut frame = vec![0u8; ethernet::HEADER_LEN + ipv6::HEADER_LEN + len];
    ethernet::Repr {
        src: MAC_B,
        dst: ipv6::multicast_mac(dst),
        ethertype: EtherType::Ipv6,
        vlan: None,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    let ip = &mut frame[ethernet::HEADER_LEN..];
    ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: NextHeader::HopByHop,
        payload_len: len,
        hop_limit: 1,
        dscp: 0,
        ecn: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(&mut ip[..]));
    let options = OptionsRepr {
        next_header: NextHeader::Icmpv6,
        router_alert: Some(0),
    };
    options.emit(&mut ExtHeader::new_unchecked(&mut ip[40..48]));
    repr.emit(
        &mut icmpv6::Packet::new_unchecked(&mut ip[48..]),
        &src,
        &dst,
    );
    frame
}

fn b_link_local() -> Ipv6Addr {
    ipv6::link_local_from_mac(MAC_B)
}

fn a_groups() -> [Ipv6Addr; 1] {
    [ipv6::solicited_node(ipv6::link_local_from_mac(MAC_A))]
}

#[test]
fn an_added_address_is_reported_twice_and_a_removed_one_once_per_robustness() {
    let mut p = Pair::new();
    let (now, a_if) = (p.now, p.a_if);
    p.a.enable_ipv6(now, a_if);
    let sent = collect(&mut p, Duration::from_secs(3));
    let join = vec![(RecordType::ChangeToExclude, a_groups()[0])];
    // The first at once (from :: while the link-local address is tentative, RFC
    // 3590), the retransmission within the Unsolicited Report Interval of 1 s.
    assert_eq!(
        sent,
        vec![
            (join.clone(), Ipv6Addr::UNSPECIFIED),
            (join.clone(), Ipv6Addr::UNSPECIFIED)
        ]
    );
    let group = ipv6::solicited_node(a6());
    p.a.add_address6(p.now, a_if, Cidr::new(a6(), 64).unwrap());
    let sent = collect(&mut p, Duration::from_millis(1100));
    let ll = ipv6::link_local_from_mac(MAC_A);
    let join = vec![(RecordType::ChangeToExclude, group)];
    assert_eq!(sent, vec![(join.clone(), ll), (join, ll)]);
    // The same group again (another address with the same low 24 bits): nothing new.
    let twin: Ipv6Addr = "2001:db8:1::1:5".parse().unwrap();
    p.a.add_address6(p.now, a_if, Cidr::new(twin, 64).unwrap());
    assert_eq!(collect(&mut p, Duration::from_secs(2)), vec![]);
    p.a.remove_address6(a_if, twin);
    assert_eq!(collect(&mut p, Duration::from_secs(2)), vec![]);
    p.a.remove_address6(a_if, a6());
    let leave = vec![(RecordType::ChangeToInclude, group)];
    let sent = collect(&mut p, Duration::from_millis(1100));
    assert_eq!(sent, vec![(leave.clone(), ll), (leave, ll)]);
    assert_eq!(p.a.stats().ipv6.mld_reports_sent, 6);
}

#[test]
fn a_general_query_is_answered_with_every_group_within_its_delay() {
    let mut p = ready();
    let a_if = p.a_if;
    p.a.add_address6(p.now, a_if, Cidr::new(a6(), 64).unwrap());
    collect(&mut p, Duration::from_secs(2));
    // Maximum Response Code 1000: within one second.
    let frame = query(1000, Ipv6Addr::UNSPECIFIED, true, b_link_local());
    p.a.handle_frame(p.now, a_if, &frame);
    let sent = collect(&mut p, Duration::from_millis(1010));
    let ll = ipv6::link_local_from_mac(MAC_A);
    let mut expect = vec![
        (RecordType::ModeIsExclude, a_groups()[0]),
        (RecordType::ModeIsExclude, ipv6::solicited_node(a6())),
    ];
    expect.sort_by_key(|r| r.1);
    let mut got = sent[0].0.clone();
    got.sort_by_key(|r| r.1);
    assert_eq!((sent.len(), got, sent[0].1), (1, expect, ll));
    assert_eq!(p.a.stats().ipv6.mld_queries_received, 1);
    // An MLDv1 query is answered too (with an MLDv2 report).
    let frame = query(500, Ipv6Addr::UNSPECIFIED, false, b_link_local());
    p.a.handle_frame(p.now, a_if, &frame);
    assert_eq!(collect(&mut p, Duration::from_millis(510)).len(), 1);
}

#[test]
fn a_group_specific_query_is_answered_only_for_a_joined_group() {
    let mut p = ready();
    let a_if = p.a_if;
    let group = a_groups()[0];
    p.a.handle_frame(p.now, a_if, &query(200, group, true, b_link_local()));
    let sent = collect(&mut p, Duration::from_millis(210));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, vec![(RecordType::ModeIsExclude, group)]);
    let other = ipv6::solicited_node("2001:db8::77".parse().unwrap());
    // Sent to the group's own MAC, which A does not accept: dropped at the link.
    let mut frame = query(200, other, true, b_link_local());
    frame[..6].copy_from_slice(&ipv6::multicast_mac(other).0);
    p.a.handle_frame(p.now, a_if, &frame);
    assert_eq!(p.a.stats().ipv6.rx_multicast_filtered, 1);
    // To all nodes, about a group A is not in: nothing to say.
    p.a.handle_frame(p.now, a_if, &query(200, other, true, b_link_local()));
    assert_eq!(collect(&mut p, Duration::from_millis(300)), vec![]);
    assert_eq!(p.a.stats().ipv6.mld_queries_received, 2);
}

#[test]
fn a_query_from_a_global_address_is_ignored() {
    let mut p = ready();
    let a_if = p.a_if;
    let global: Ipv6Addr = "2001:db8::b".parse().unwrap();
    p.a.handle_frame(
        p.now,
        a_if,
        &query(100, Ipv6Addr::UNSPECIFIED, true, global),
    );
    assert_eq!(collect(&mut p, Duration::from_millis(200)), vec![]);
    assert_eq!(p.a.stats().ipv6.mld_invalid, 1);
}

#[test]
fn the_long_maximum_response_codes_are_decoded() {
    use crate::ipv6::mld::max_response_delay;
    assert_eq!(max_response_delay(10_000), Duration::from_millis(10_000));
    // RFC 3810 §5.1.3: 1 exp(3) mant(12): (mant | 0x1000) << (exp + 3).
    assert_eq!(
        max_response_delay(0x8000),
        Duration::from_millis(0x1000 << 3)
    );
    assert_eq!(
        max_response_delay(0xffff),
        Duration::from_millis(0x1fff << 10)
    );
}

#[test]
fn frames_to_the_mac_of_a_joined_group_are_taken_and_others_dropped() {
    let mut p = ready();
    let a_if = p.a_if;
    // An echo request to A's solicited-node group's MAC but another address: the
    // link layer drops it before IPv6 looks.
    let stranger = ipv6::solicited_node("2001:db8::99:1234".parse().unwrap());
    let mut frame = query(100, Ipv6Addr::UNSPECIFIED, true, b_link_local());
    frame[..6].copy_from_slice(&ipv6::multicast_mac(stranger).0);
    let before = p.a.stats().ipv6.rx_packets;
    p.a.handle_frame(p.now, a_if, &frame);
    assert_eq!(p.a.stats().ipv6.rx_packets, before);
    assert_eq!(p.a.stats().ipv6.rx_multicast_filtered, 1);
    // All nodes' MAC is always taken.
    let frame = query(100, Ipv6Addr::UNSPECIFIED, true, b_link_local());
    p.a.handle_frame(p.now, a_if, &frame);
    assert_eq!(p.a.stats().ipv6.rx_packets, before + 1);
    assert_eq!(p.a.stats().ipv6.mld_queries_received, 1);
}
