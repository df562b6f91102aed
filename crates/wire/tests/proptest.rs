//! Property tests for every wire format: no parser panics on any input, `emit` and
//! `parse` are inverse for every representable header, and the fast checksum agrees
//! with the plain one.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::net::Ipv4Addr;

use impnet_wire::tcp::{FastOpenCookie, Flags, Options, SackBlock};
use impnet_wire::{arp, checksum, ethernet, icmpv4, ipv4, tcp, udp};
use proptest::prelude::*;

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn ipv4_addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from_bits)
}

fn mac() -> impl Strategy<Value = ethernet::Address> {
    any::<[u8; 6]>().prop_map(ethernet::Address)
}

// ---------------------------------------------------------------------------------
// Arbitrary bytes: parsers never panic, and whatever parses re-emits to an equal Repr.
// ---------------------------------------------------------------------------------

/// Checks one Ethernet frame the way the fuzz target does.
fn ethernet_any(data: &[u8]) {
    let Ok(frame) = ethernet::Frame::new_checked(data) else {
        return;
    };
    let _ = (frame.payload(), frame.vlan_tag(), frame.outer_ethertype());
    let repr = ethernet::Repr::parse(&frame).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ethernet::Frame::new_unchecked(&mut out[..]));
    assert_eq!(
        ethernet::Repr::parse(&ethernet::Frame::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

fn arp_any(data: &[u8]) {
    let Ok(packet) = arp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.source_hardware_addr(),
        packet.target_protocol_addr(),
        packet.operation(),
    );
    let Ok(repr) = arp::Repr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut arp::Packet::new_unchecked(&mut out[..]));
    assert_eq!(
        arp::Repr::parse(&arp::Packet::new_unchecked(&out[..])),
        Ok(repr)
    );
}

fn ipv4_any(data: &[u8]) {
    let Ok(packet) = ipv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.options(),
        packet.payload(),
        packet.verify_checksum(),
        packet.frag_offset(),
    );
    let _ = ipv4::Repr::parse(&packet, true);
    let repr = ipv4::Repr::parse(&packet, false).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[..]));
    let again = ipv4::Packet::new_checked(&out[..]).unwrap();
    assert_eq!(ipv4::Repr::parse(&again, true), Ok(repr));
}

fn icmpv4_any(data: &[u8]) {
    let Ok(packet) = icmpv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.msg_type(),
        packet.data(),
        packet.next_hop_mtu(),
        packet.pointer(),
    );
    let Ok(repr) = icmpv4::Repr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmpv4::Packet::new_unchecked(&mut out[..]));
    assert_eq!(
        icmpv4::Repr::parse(&icmpv4::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

fn udp_any(data: &[u8]) {
    let Ok(packet) = udp::Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.payload(), packet.verify_checksum(&SRC, &DST));
    let _ = udp::Repr::parse(&packet, &SRC, &DST, true);
    let repr = udp::Repr::parse(&packet, &SRC, &DST, false).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut udp::Packet::new_unchecked(&mut out[..]), &SRC, &DST);
    let again = udp::Packet::new_checked(&out[..]).unwrap();
    assert_eq!(udp::Repr::parse(&again, &SRC, &DST, true), Ok(repr));
}

fn tcp_any(data: &[u8]) {
    let Ok(packet) = tcp::Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.options(), packet.payload(), packet.segment_len());
    let _ = tcp::Repr::parse(&packet, &SRC, &DST, true);
    let Ok(repr) = tcp::Repr::parse(&packet, &SRC, &DST, false) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut tcp::Packet::new_unchecked(&mut out[..]),
        &SRC,
        &DST,
        true,
    );
    let again = tcp::Packet::new_checked(&out[..]).unwrap();
    let expected = tcp::Repr {
        options: repr.options.as_emitted(),
        ..repr
    };
    assert_eq!(tcp::Repr::parse(&again, &SRC, &DST, true), Ok(expected));
}

/// Bytes that often get past the first length checks: a plausible first byte and
/// length fields that fit.
fn plausible(version_ihl: u8) -> impl Strategy<Value = Vec<u8>> {
    (bytes(120), any::<bool>()).prop_map(move |(mut data, fix_len)| {
        if let Some(first) = data.first_mut() {
            *first = version_ihl | (*first & 0x0f);
        }
        if fix_len && data.len() >= 4 {
            let len = data.len() as u16;
            data[2..4].copy_from_slice(&len.to_be_bytes());
        }
        data
    })
}

proptest! {
    #[test]
    fn no_parser_panics(data in bytes(200)) {
        ethernet_any(&data);
        arp_any(&data);
        ipv4_any(&data);
        icmpv4_any(&data);
        udp_any(&data);
        tcp_any(&data);
    }

    #[test]
    fn ipv4_plausible(data in plausible(0x40)) {
        ipv4_any(&data);
    }

    #[test]
    fn tcp_plausible_options(
        header in any::<[u8; 20]>(),
        options in prop::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(2), Just(3), Just(4), Just(5), Just(8), Just(10),
                        any::<u8>()],
            0..40),
        payload in bytes(20),
    ) {
        let mut data = header.to_vec();
        let words = options.len().div_ceil(4);
        data.extend_from_slice(&options);
        data.resize(20 + words * 4, 0);
        data[12] = ((5 + words) as u8) << 4;
        data.extend_from_slice(&payload);
        tcp_any(&data);
    }

    #[test]
    fn arp_plausible(ops in any::<u16>(), addrs in any::<[u8; 20]>()) {
        let mut data = vec![0, 1, 8, 0, 6, 4];
        data.extend_from_slice(&ops.to_be_bytes());
        data.extend_from_slice(&addrs);
        arp_any(&data);
    }
}

// ---------------------------------------------------------------------------------
// Repr -> emit -> parse gives the Repr back, and re-emitting gives the same bytes.
// ---------------------------------------------------------------------------------

fn ethernet_repr() -> impl Strategy<Value = ethernet::Repr> {
    let vlan = prop::option::of(
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| ethernet::VlanTag {
            pcp,
            dei,
            vid,
        }),
    );
    (mac(), mac(), any::<u16>(), vlan).prop_map(|(src, dst, ethertype, vlan)| {
        let mut ethertype = ethernet::EtherType::from(ethertype);
        if vlan.is_none() && ethertype == ethernet::EtherType::Vlan {
            ethertype = ethernet::EtherType::Ipv4;
        }
        ethernet::Repr {
            src,
            dst,
            ethertype,
            vlan,
        }
    })
}

fn arp_repr() -> impl Strategy<Value = arp::Repr> {
    (any::<u16>(), mac(), ipv4_addr(), mac(), ipv4_addr()).prop_map(|(op, sha, spa, tha, tpa)| {
        arp::Repr {
            operation: arp::Operation::from(op),
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        }
    })
}

/// Everything in an IPv4 header but the options, which the Repr borrows.
#[derive(Debug, Clone)]
struct Ipv4Fields {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    payload_len: usize,
    ttl: u8,
    ident: u16,
    dont_frag: bool,
    more_frags: bool,
    frag_units: u16,
    dscp: u8,
    ecn: u8,
    options: Vec<u8>,
}

fn ipv4_fields() -> impl Strategy<Value = Ipv4Fields> {
    (
        (
            ipv4_addr(),
            ipv4_addr(),
            any::<u8>(),
            0usize..200,
            any::<u8>(),
            any::<u16>(),
        ),
        (any::<bool>(), any::<bool>(), 0u16..8192, 0u8..64, 0u8..4),
        (0usize..=10).prop_flat_map(|words| prop::collection::vec(any::<u8>(), words * 4)),
    )
        .prop_map(
            |((src, dst, protocol, payload_len, ttl, ident), flags, options)| {
                let (dont_frag, more_frags, frag_units, dscp, ecn) = flags;
                Ipv4Fields {
                    src,
                    dst,
                    protocol,
                    payload_len,
                    ttl,
                    ident,
                    dont_frag,
                    more_frags,
                    frag_units,
                    dscp,
                    ecn,
                    options,
                }
            },
        )
}

impl Ipv4Fields {
    fn repr(&self) -> ipv4::Repr<'_> {
        ipv4::Repr {
            src_addr: self.src,
            dst_addr: self.dst,
            protocol: ipv4::Protocol::from(self.protocol),
            payload_len: self.payload_len,
            ttl: self.ttl,
            ident: self.ident,
            dont_frag: self.dont_frag,
            more_frags: self.more_frags,
            frag_offset: self.frag_units * 8,
            dscp: self.dscp,
            ecn: self.ecn,
            options: &self.options,
        }
    }
}

#[derive(Debug, Clone)]
enum IcmpKind {
    EchoRequest(u16, u16),
    EchoReply(u16, u16),
    Unreachable(u8, u16),
    TimeExceeded(u8),
    ParamProblem(u8),
}

fn icmp_kind() -> impl Strategy<Value = IcmpKind> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(i, s)| IcmpKind::EchoRequest(i, s)),
        (any::<u16>(), any::<u16>()).prop_map(|(i, s)| IcmpKind::EchoReply(i, s)),
        (any::<u8>(), any::<u16>()).prop_map(|(c, m)| IcmpKind::Unreachable(c, m)),
        any::<u8>().prop_map(IcmpKind::TimeExceeded),
        any::<u8>().prop_map(IcmpKind::ParamProblem),
    ]
}

fn icmp_repr<'a>(kind: &IcmpKind, data: &'a [u8]) -> icmpv4::Repr<'a> {
    use icmpv4::Repr;
    match *kind {
        IcmpKind::EchoRequest(ident, seq_no) => Repr::EchoRequest {
            ident,
            seq_no,
            data,
        },
        IcmpKind::EchoReply(ident, seq_no) => Repr::EchoReply {
            ident,
            seq_no,
            data,
        },
        IcmpKind::Unreachable(code, mtu) => {
            let reason = icmpv4::DstUnreachable::from(code);
            let next_hop_mtu = if reason == icmpv4::DstUnreachable::FragRequired {
                mtu
            } else {
                0
            };
            Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                invoking: data,
            }
        }
        IcmpKind::TimeExceeded(code) => Repr::TimeExceeded {
            reason: icmpv4::TimeExceeded::from(code),
            invoking: data,
        },
        IcmpKind::ParamProblem(pointer) => Repr::ParamProblem {
            pointer,
            invoking: data,
        },
    }
}

/// The Repr `parse` gives back: a quoted datagram is cut to header + 8.
fn icmp_expected<'a>(repr: &icmpv4::Repr<'a>) -> icmpv4::Repr<'a> {
    use icmpv4::Repr;
    let cut = |d: &'a [u8]| &d[..icmpv4::invoking_len(d)];
    match *repr {
        Repr::DstUnreachable {
            reason,
            next_hop_mtu,
            invoking,
        } => Repr::DstUnreachable {
            reason,
            next_hop_mtu,
            invoking: cut(invoking),
        },
        Repr::TimeExceeded { reason, invoking } => Repr::TimeExceeded {
            reason,
            invoking: cut(invoking),
        },
        Repr::ParamProblem { pointer, invoking } => Repr::ParamProblem {
            pointer,
            invoking: cut(invoking),
        },
        other => other,
    }
}

fn tcp_options() -> impl Strategy<Value = Options> {
    let blocks = prop::collection::vec(
        (any::<u32>(), any::<u32>()).prop_map(|(left, right)| SackBlock { left, right }),
        0..=4,
    );
    (
        prop::option::of(any::<u16>()),
        prop::option::of(any::<u8>()),
        any::<bool>(),
        prop::option::of((any::<u32>(), any::<u32>())),
        blocks,
        prop::option::of(prop::sample::select(vec![0usize, 4, 6, 8, 10, 12, 14, 16])),
    )
        .prop_map(
            |(mss, window_scale, sack_permitted, timestamps, blocks, cookie)| {
                let mut sack_blocks = [SackBlock::default(); 4];
                sack_blocks[..blocks.len()].copy_from_slice(&blocks);
                Options {
                    mss,
                    window_scale,
                    sack_permitted,
                    sack_blocks,
                    sack_len: blocks.len() as u8,
                    timestamps,
                    fast_open: cookie.and_then(|len| FastOpenCookie::new(&[0xc5; 16][..len])),
                }
            },
        )
}

proptest! {
    #[test]
    fn ethernet_round_trip(repr in ethernet_repr(), payload in bytes(64)) {
        let mut out = vec![0u8; repr.buffer_len() + payload.len()];
        out[repr.header_len()..].copy_from_slice(&payload);
        repr.emit(&mut ethernet::Frame::new_unchecked(&mut out[..]));
        let frame = ethernet::Frame::new_checked(&out[..]).unwrap();
        prop_assert_eq!(frame.payload(), &payload[..]);
        let parsed = ethernet::Repr::parse(&frame).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = out.clone();
        parsed.emit(&mut ethernet::Frame::new_unchecked(&mut again[..]));
        prop_assert_eq!(again, out);
    }

    #[test]
    fn arp_round_trip(repr in arp_repr()) {
        let mut out = [0u8; arp::PACKET_LEN];
        repr.emit(&mut arp::Packet::new_unchecked(&mut out[..]));
        let parsed = arp::Repr::parse(&arp::Packet::new_checked(&out[..]).unwrap()).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = [0u8; arp::PACKET_LEN];
        parsed.emit(&mut arp::Packet::new_unchecked(&mut again[..]));
        prop_assert_eq!(again, out);
    }

    #[test]
    fn ipv4_round_trip(fields in ipv4_fields()) {
        let repr = fields.repr();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[..]));
        let packet = ipv4::Packet::new_checked(&out[..]).unwrap();
        let parsed = ipv4::Repr::parse(&packet, true).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut ipv4::Packet::new_unchecked(&mut again[..]));
        prop_assert_eq!(again, out);
    }

    #[test]
    fn icmpv4_round_trip(kind in icmp_kind(), data in bytes(100)) {
        let repr = icmp_repr(&kind, &data);
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut icmpv4::Packet::new_unchecked(&mut out[..]));
        let packet = icmpv4::Packet::new_checked(&out[..]).unwrap();
        let parsed = icmpv4::Repr::parse(&packet).unwrap();
        prop_assert_eq!(parsed, icmp_expected(&repr));
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut icmpv4::Packet::new_unchecked(&mut again[..]));
        prop_assert_eq!(again, out);
    }

    #[test]
    fn udp_round_trip(
        src_port in any::<u16>(), dst_port in any::<u16>(), payload in bytes(200),
        src in ipv4_addr(), dst in ipv4_addr(),
    ) {
        let repr = udp::Repr { src_port, dst_port, payload: &payload };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut udp::Packet::new_unchecked(&mut out[..]), &src, &dst);
        prop_assert_ne!(udp::Packet::new_unchecked(&out[..]).checksum(), 0);
        let packet = udp::Packet::new_checked(&out[..]).unwrap();
        let parsed = udp::Repr::parse(&packet, &src, &dst, true).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut udp::Packet::new_unchecked(&mut again[..]), &src, &dst);
        prop_assert_eq!(again, out);
    }

    #[test]
    fn tcp_round_trip(
        header in (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>(), any::<u8>(),
                   any::<u16>(), any::<u16>()),
        options in tcp_options(),
        payload in bytes(100),
        src in ipv4_addr(), dst in ipv4_addr(),
    ) {
        let (src_port, dst_port, seq, ack, flags, window, urgent) = header;
        let repr = tcp::Repr {
            src_port, dst_port, seq, ack, flags: Flags(flags), window, urgent, options,
            payload: &payload,
        };
        prop_assert!(repr.header_len() <= tcp::MAX_HEADER_LEN);
        prop_assert_eq!(repr.header_len() % 4, 0);
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut tcp::Packet::new_unchecked(&mut out[..]), &src, &dst, true);
        let packet = tcp::Packet::new_checked(&out[..]).unwrap();
        prop_assert!(packet.verify_checksum(&src, &dst));
        let parsed = tcp::Repr::parse(&packet, &src, &dst, true).unwrap();
        let expected = tcp::Repr { options: options.as_emitted(), ..repr };
        prop_assert_eq!(parsed, expected);
        // Only SYN-only option sets crowd out SACK blocks; with timestamps 3 always fit.
        if options.timestamps.is_some() && options.mss.is_none() && options.window_scale.is_none()
            && options.fast_open.is_none()
        {
            prop_assert_eq!(parsed.options.sack_len, options.sack_len.min(3));
        }
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut tcp::Packet::new_unchecked(&mut again[..]), &src, &dst, true);
        prop_assert_eq!(again, out);
    }
}

// ---------------------------------------------------------------------------------
// Checksum.
// ---------------------------------------------------------------------------------

/// Ones-complement values 0x0000 and 0xffff are both zero.
fn same_ones_complement(a: u16, b: u16) -> bool {
    a == b || (a == 0 || a == 0xffff) && (b == 0 || b == 0xffff)
}

proptest! {
    #[test]
    fn checksum_fast_equals_simple(data in bytes(3000), start in 0usize..16) {
        // Every alignment and every length parity of the same bytes.
        let start = start.min(data.len());
        for end in [data.len(), data.len().saturating_sub(1).max(start)] {
            let slice = &data[start..end];
            prop_assert_eq!(checksum::data(slice), checksum::data_simple(slice));
        }
    }

    #[test]
    fn checksum_split_combines(data in bytes(500), split in any::<prop::sample::Index>()) {
        // Splitting at an even offset and combining the halves gives the whole sum.
        let at = split.index(data.len() + 1) & !1;
        let whole = checksum::data(&data);
        let parts = checksum::combine(&[checksum::data(&data[..at]), checksum::data(&data[at..])]);
        prop_assert!(same_ones_complement(whole, parts));
    }

    #[test]
    fn rfc1624_update_equals_recompute(
        mut data in prop::collection::vec(any::<u8>(), 2..200),
        index in any::<prop::sample::Index>(),
        new_word in any::<u16>(),
        new_long in any::<u32>(),
    ) {
        let word_at = index.index(data.len() / 2) * 2;
        let stored = checksum::finish(checksum::data(&data));
        let old_word = u16::from_be_bytes([data[word_at], data[word_at + 1]]);
        data[word_at..word_at + 2].copy_from_slice(&new_word.to_be_bytes());
        let updated = checksum::update(stored, old_word, new_word);
        prop_assert!(same_ones_complement(updated, checksum::finish(checksum::data(&data))));

        if data.len() >= 4 {
            let at = index.index(data.len() / 2 - 1) * 2;
            let stored = checksum::finish(checksum::data(&data));
            let old = u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            data[at..at + 4].copy_from_slice(&new_long.to_be_bytes());
            let updated = checksum::update_u32(stored, old, new_long);
            prop_assert!(same_ones_complement(updated, checksum::finish(checksum::data(&data))));
        }
    }

    #[test]
    fn emitted_headers_verify(fields in ipv4_fields()) {
        let repr = fields.repr();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[..]));
        prop_assert_eq!(checksum::data(&out[..repr.header_len()]), 0xffff);
        // A forwarded header (TTL - 1, incremental checksum) still verifies.
        let mut packet = ipv4::Packet::new_unchecked(&mut out[..]);
        packet.decrement_ttl();
        prop_assert!(packet.verify_checksum());
    }
}
