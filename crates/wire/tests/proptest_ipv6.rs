//! Property tests for the IPv6 formats (IPv6, extension headers, ICMPv6, NDP, MLD): no
//! parser panics on any input, and `emit` and `parse` are inverse for every
//! representable message. The same checks run under libFuzzer in the `ipv6`, `icmpv6`
//! and `ndp` fuzz targets (`crates/fuzz-harness`).
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::net::Ipv6Addr;

use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::ipv6ext::{self, ExtHeader, FragmentHeader, FragmentRepr, OptionsRepr, WalkError};
use impnet_wire::{ethernet, icmpv6, mld, ndp};
use proptest::prelude::*;

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn addr() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from_bits)
}

fn unicast() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(|bits| Ipv6Addr::from_bits(bits & !(0xff << 120)))
}

fn mac() -> impl Strategy<Value = ethernet::Address> {
    any::<[u8; 6]>().prop_map(ethernet::Address)
}

// ---------------------------------------------------------------------------------
// Arbitrary bytes: parsers never panic, and whatever parses re-emits to an equal Repr.
// ---------------------------------------------------------------------------------

fn ipv6_any(data: &[u8]) {
    let Ok(packet) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let repr = ipv6::Repr::parse(&packet).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[..]));
    assert_eq!(
        ipv6::Repr::parse(&ipv6::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
    let bytes = packet.packet();
    match ipv6ext::walk(bytes) {
        Ok(walk) => assert!(walk.offset <= bytes.len()),
        Err(
            WalkError::UnrecognizedOption { pointer, .. } | WalkError::ParamProblem { pointer, .. },
        ) => assert!(pointer < bytes.len()),
        Err(_) => {}
    }
}

fn icmpv6_any(data: &[u8]) {
    let mut bytes = data.to_vec();
    let Ok(mut packet) = icmpv6::Packet::new_checked(&mut bytes[..]) else {
        return;
    };
    // A good checksum, so the input reaches the parsers behind it.
    packet.fill_checksum(&SRC, &DST);
    let packet = icmpv6::Packet::new_checked(&bytes[..]).unwrap();
    let Ok(repr) = icmpv6::Repr::parse(&packet, &SRC, &DST) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmpv6::Packet::new_unchecked(&mut out[..]), &SRC, &DST);
    let again = icmpv6::Packet::new_checked(&out[..]).unwrap();
    assert_eq!(icmpv6::Repr::parse(&again, &SRC, &DST), Ok(repr));
}

/// ND and MLD types with arbitrary bodies.
fn nd_message() -> impl Strategy<Value = Vec<u8>> {
    let types = prop::sample::select(vec![130u8, 131, 132, 133, 134, 135, 136, 137, 143]);
    (types, bytes(120)).prop_map(|(kind, body)| {
        let mut message = vec![kind, 0, 0, 0];
        message.extend_from_slice(&body);
        message
    })
}

/// ND options that are often well formed: a known type and a plausible length.
fn nd_options() -> impl Strategy<Value = Vec<u8>> {
    let option = (
        prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 14]),
        0u8..5,
        bytes(40),
    )
        .prop_map(|(kind, units, mut body)| {
            body.resize(usize::from(units) * 8, 0);
            if let Some(b) = body.get_mut(0) {
                *b = kind;
            }
            if let Some(b) = body.get_mut(1) {
                *b = units;
            }
            body
        });
    prop::collection::vec(option, 0..5).prop_map(|options| options.concat())
}

proptest! {
    #[test]
    fn no_parser_panics(data in bytes(200)) {
        ipv6_any(&data);
        icmpv6_any(&data);
        let _ = ipv6ext::walk(&data);
        if let Ok((repr, payload)) = ipv6::Repr::parse_quoted(&data) {
            assert!(payload.len() <= repr.payload_len);
        }
        let _ = ExtHeader::new_checked(&data[..]).map(|h| OptionsRepr::parse(&h));
        let _ = FragmentHeader::new_checked(&data[..]).map(|h| FragmentRepr::parse(&h));
    }

    #[test]
    fn ipv6_plausible(data in bytes(200), first in any::<u8>()) {
        // Version 6, a payload length that fits, a first header the walk knows.
        let mut data = data;
        data.resize(data.len().max(40), 0);
        data[0] = 0x60 | (data[0] & 0x0f);
        let payload = (data.len() - 40) as u16;
        data[4..6].copy_from_slice(&payload.to_be_bytes());
        data[6] = [0, 43, 44, 60, 58, first][usize::from(first) % 6];
        ipv6_any(&data);
    }

    #[test]
    fn nd_and_mld_plausible(message in nd_message()) {
        icmpv6_any(&message);
    }

    #[test]
    fn nd_options_plausible(kind in prop::sample::select(vec![133u8, 134, 135, 136, 137]),
                            fixed in any::<[u8; 36]>(), options in nd_options()) {
        let fixed_len = match kind { 133 => 4, 134 => 12, 135 | 136 => 20, _ => 36 };
        let mut message = vec![kind, 0, 0, 0];
        message.extend_from_slice(&fixed[..fixed_len]);
        message.extend_from_slice(&options);
        icmpv6_any(&message);
    }
}

// ---------------------------------------------------------------------------------
// Repr -> emit -> parse gives the Repr back, and re-emitting gives the same bytes.
// ---------------------------------------------------------------------------------

fn ipv6_repr() -> impl Strategy<Value = ipv6::Repr> {
    (
        addr(),
        addr(),
        any::<u8>(),
        0usize..300,
        any::<u8>(),
        0u8..64,
        0u8..4,
        0u32..(1 << 20),
    )
        .prop_map(
            |(src_addr, dst_addr, next, payload_len, hop_limit, dscp, ecn, flow_label)| {
                ipv6::Repr {
                    src_addr,
                    dst_addr,
                    next_header: NextHeader::from(next),
                    payload_len,
                    hop_limit,
                    dscp,
                    ecn,
                    flow_label,
                }
            },
        )
}

fn prefix_info() -> impl Strategy<Value = ndp::PrefixInfo> {
    (
        0u8..=128,
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
        any::<u32>(),
        addr(),
    )
        .prop_map(
            |(prefix_len, on_link, autonomous, valid_lifetime, preferred_lifetime, prefix)| {
                ndp::PrefixInfo {
                    prefix_len,
                    on_link,
                    autonomous,
                    valid_lifetime,
                    preferred_lifetime,
                    prefix,
                }
            },
        )
}

/// Everything an ND message holds but what it borrows (prefixes, redirected bytes).
#[derive(Debug, Clone)]
struct NdFields {
    kind: u8,
    flags: [bool; 3],
    hop_limit: u8,
    lifetime: u16,
    timers: (u32, u32),
    lladdr: Option<ethernet::Address>,
    mtu: Option<u32>,
    target: Ipv6Addr,
    destination: Ipv6Addr,
    prefixes: Vec<ndp::PrefixInfo>,
    redirected: Vec<u8>,
}

fn nd_fields() -> impl Strategy<Value = NdFields> {
    (
        (
            0u8..5,
            any::<[bool; 3]>(),
            any::<u8>(),
            any::<u16>(),
            any::<(u32, u32)>(),
        ),
        (
            prop::option::of(mac()),
            prop::option::of(any::<u32>()),
            unicast(),
            unicast(),
        ),
        (prop::collection::vec(prefix_info(), 0..4), bytes(1400)),
    )
        .prop_map(|(a, b, c)| NdFields {
            kind: a.0,
            flags: a.1,
            hop_limit: a.2,
            lifetime: a.3,
            timers: a.4,
            lladdr: b.0,
            mtu: b.1,
            target: b.2,
            destination: b.3,
            prefixes: c.0,
            redirected: c.1,
        })
}

impl NdFields {
    fn repr(&self) -> ndp::Repr<'_> {
        let [a, b, c] = self.flags;
        match self.kind {
            0 => ndp::Repr::RouterSolicit {
                source_lladdr: self.lladdr,
            },
            1 => ndp::Repr::RouterAdvert {
                hop_limit: self.hop_limit,
                managed: a,
                other: b,
                router_lifetime: self.lifetime,
                reachable_time: self.timers.0,
                retrans_timer: self.timers.1,
                source_lladdr: self.lladdr,
                mtu: self.mtu,
                prefixes: ndp::Prefixes::List(&self.prefixes),
            },
            2 => ndp::Repr::NeighborSolicit {
                target: self.target,
                source_lladdr: self.lladdr,
            },
            3 => ndp::Repr::NeighborAdvert {
                router: a,
                solicited: b,
                overrides: c,
                target: self.target,
                target_lladdr: self.lladdr,
            },
            _ => ndp::Repr::Redirect {
                target: self.target,
                destination: self.destination,
                target_lladdr: self.lladdr,
                redirected: &self.redirected,
            },
        }
    }
}

/// The Repr `parse` gives back: a redirected packet cut to what fits.
fn nd_expected<'a>(repr: &ndp::Repr<'a>) -> ndp::Repr<'a> {
    match *repr {
        ndp::Repr::Redirect {
            target,
            destination,
            target_lladdr,
            redirected,
        } => ndp::Repr::Redirect {
            target,
            destination,
            target_lladdr,
            redirected: &redirected[..ndp::redirected_len(redirected, target_lladdr.is_some())],
        },
        other => other,
    }
}

#[derive(Debug, Clone)]
enum IcmpKind {
    Echo(bool, u16, u16),
    Unreachable(u8),
    TooBig(u32),
    TimeExceeded(u8),
    ParamProblem(u8, u32),
}

fn icmp_kind() -> impl Strategy<Value = IcmpKind> {
    prop_oneof![
        (any::<bool>(), any::<u16>(), any::<u16>()).prop_map(|(r, i, s)| IcmpKind::Echo(r, i, s)),
        any::<u8>().prop_map(IcmpKind::Unreachable),
        any::<u32>().prop_map(IcmpKind::TooBig),
        any::<u8>().prop_map(IcmpKind::TimeExceeded),
        (any::<u8>(), any::<u32>()).prop_map(|(c, p)| IcmpKind::ParamProblem(c, p)),
    ]
}

fn icmp_repr<'a>(kind: &IcmpKind, data: &'a [u8]) -> icmpv6::Repr<'a> {
    use icmpv6::Repr;
    match *kind {
        IcmpKind::Echo(true, ident, seq_no) => Repr::EchoRequest {
            ident,
            seq_no,
            data,
        },
        IcmpKind::Echo(false, ident, seq_no) => Repr::EchoReply {
            ident,
            seq_no,
            data,
        },
        IcmpKind::Unreachable(code) => Repr::DstUnreachable {
            reason: icmpv6::DstUnreachable::from(code),
            invoking: data,
        },
        IcmpKind::TooBig(mtu) => Repr::PacketTooBig {
            mtu,
            invoking: data,
        },
        IcmpKind::TimeExceeded(code) => Repr::TimeExceeded {
            reason: icmpv6::TimeExceeded::from(code),
            invoking: data,
        },
        IcmpKind::ParamProblem(code, pointer) => Repr::ParamProblem {
            reason: icmpv6::ParamProblem::from(code),
            pointer,
            invoking: data,
        },
    }
}

/// Emits `repr`, checks it parses back to `expected` and that re-emitting the parsed
/// Repr gives the same bytes.
fn icmp_round_trip(
    repr: &icmpv6::Repr<'_>,
    expected: &icmpv6::Repr<'_>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
) {
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmpv6::Packet::new_unchecked(&mut out[..]), &src, &dst);
    let packet = icmpv6::Packet::new_checked(&out[..]).unwrap();
    assert!(packet.verify_checksum(&src, &dst));
    let parsed = icmpv6::Repr::parse(&packet, &src, &dst).unwrap();
    assert_eq!(&parsed, expected);
    let mut again = vec![0u8; parsed.buffer_len()];
    parsed.emit(
        &mut icmpv6::Packet::new_unchecked(&mut again[..]),
        &src,
        &dst,
    );
    assert_eq!(again, out);
}

/// An MLD record's fields.
type RecordFields = (u8, Ipv6Addr, Vec<Ipv6Addr>);

fn records() -> impl Strategy<Value = Vec<RecordFields>> {
    prop::collection::vec(
        (any::<u8>(), addr(), prop::collection::vec(addr(), 0..3)),
        0..4,
    )
}

proptest! {
    #[test]
    fn ipv6_round_trip(repr in ipv6_repr(), fill in any::<u8>()) {
        let mut out = vec![fill; repr.buffer_len()];
        repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[..]));
        let packet = ipv6::Packet::new_checked(&out[..]).unwrap();
        let parsed = ipv6::Repr::parse(&packet).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = out.clone();
        parsed.emit(&mut ipv6::Packet::new_unchecked(&mut again[..]));
        prop_assert_eq!(again, out);
    }

    #[test]
    fn fragment_round_trip(next in any::<u8>(), units in 0u16..8192, more in any::<bool>(),
                           ident in any::<u32>()) {
        let repr = FragmentRepr {
            next_header: NextHeader::from(next),
            frag_offset: units * 8,
            more_frags: more,
            ident,
        };
        let mut out = [0xffu8; 8];
        repr.emit(&mut FragmentHeader::new_unchecked(&mut out[..]));
        prop_assert_eq!(out[1], 0);
        let parsed = FragmentRepr::parse(&FragmentHeader::new_checked(&out[..]).unwrap());
        prop_assert_eq!(parsed, Ok(repr));
    }

    #[test]
    fn options_header_round_trip(next in any::<u8>(), alert in prop::option::of(any::<u16>())) {
        let repr = OptionsRepr { next_header: NextHeader::from(next), router_alert: alert };
        let mut out = [0u8; 8];
        repr.emit(&mut ExtHeader::new_unchecked(&mut out[..]));
        let parsed = OptionsRepr::parse(&ExtHeader::new_checked(&out[..]).unwrap());
        prop_assert_eq!(parsed, Ok(repr));
    }

    #[test]
    fn icmpv6_round_trip(kind in icmp_kind(), data in bytes(1500), src in addr(), dst in addr()) {
        let repr = icmp_repr(&kind, &data);
        let expected = match kind {
            IcmpKind::Echo(..) => repr,
            _ => icmp_repr(&kind, &data[..icmpv6::invoking_len(&data)]),
        };
        icmp_round_trip(&repr, &expected, src, dst);
    }

    #[test]
    fn ndp_round_trip(fields in nd_fields(), src in addr(), dst in addr()) {
        let repr = fields.repr();
        let outer = icmpv6::Repr::Ndp(repr);
        icmp_round_trip(&outer, &icmpv6::Repr::Ndp(nd_expected(&repr)), src, dst);
    }

    #[test]
    fn mld_round_trip(kind in 0u8..5, group in addr(), code in any::<u16>(),
                      query in (any::<bool>(), 0u8..8, any::<u8>(),
                                prop::collection::vec(addr(), 0..4)),
                      records in records()) {
        let (suppress, robustness, interval_code, sources) = query;
        let list: Vec<mld::AddressRecord<'_>> = records
            .iter()
            .map(|(kind, group, sources)| mld::AddressRecord {
                record_type: mld::RecordType::from(*kind),
                group: *group,
                sources: mld::Addresses::List(sources),
            })
            .collect();
        let repr = match kind {
            0 => mld::Repr::Query { max_response_code: code, group, v2: None },
            1 => mld::Repr::Query {
                max_response_code: code,
                group,
                v2: Some(mld::QueryV2 {
                    suppress,
                    robustness,
                    interval_code,
                    sources: mld::Addresses::List(&sources),
                }),
            },
            2 => mld::Repr::Report { group },
            3 => mld::Repr::Done { group },
            _ => mld::Repr::ReportV2 { records: mld::Records::List(&list) },
        };
        let outer = icmpv6::Repr::Mld(repr);
        icmp_round_trip(&outer, &outer, SRC, DST);
    }

    #[test]
    fn address_helpers(mac in mac(), prefix in addr(), target in addr()) {
        // The link-local address holds the MAC (modified EUI-64) and its solicited-node
        // group maps to a 33:33 MAC that ends in the same 24 bits.
        let link_local = ipv6::link_local_from_mac(mac);
        prop_assert!(ipv6::Cidr::LINK_LOCAL.contains(link_local));
        let group = ipv6::solicited_node(target);
        prop_assert!(group.is_multicast());
        prop_assert_eq!(&group.octets()[13..], &target.octets()[13..]);
        let group_mac = ipv6::multicast_mac(group);
        prop_assert!(group_mac.is_multicast());
        prop_assert_eq!(&group_mac.0[3..], &target.octets()[13..]);
        let cidr = ipv6::Cidr::new(prefix, 64).unwrap();
        let slaac = ipv6::address_from_prefix(&cidr, ipv6::interface_id(mac)).unwrap();
        prop_assert!(cidr.contains(slaac));
        prop_assert_eq!(&slaac.octets()[8..], &link_local.octets()[8..]);
        // Parsing the text form of a prefix gives it back.
        let text = cidr.to_string();
        prop_assert_eq!(text.parse::<ipv6::Cidr>(), Ok(cidr));
    }
}
