use super::*;
extern crate std;
use std::vec::Vec;

/// An MLDv2 report from `::` as Linux sends it: hop-by-hop header with Router Alert 0
/// (`3a 00 05 02 00 00 01 00`), then ICMPv6.
const MLDV2_REPORT: &[u8] = include_bytes!("../../tests/data/mldv2_report.bin");
/// The two fragments of a 2008-byte echo request (identification 0xd3eea931).
const FRAG_FIRST: &[u8] = include_bytes!("../../tests/data/frag_first.bin");
const FRAG_LAST: &[u8] = include_bytes!("../../tests/data/frag_last.bin");

/// A packet from `headers` (each: its type and its bytes, Next Header filled in here)
/// followed by an 8-byte UDP header.
fn packet(first: u8, headers: &[(u8, &[u8])]) -> Vec<u8> {
    let mut bytes = std::vec![0u8; 40];
    bytes[0] = 0x60;
    bytes[6] = first;
    for (i, (_, header)) in headers.iter().enumerate() {
        let next = headers.get(i + 1).map_or(ipv6::protocol::UDP, |h| h.0);
        bytes.push(next);
        bytes.extend_from_slice(&header[1..]);
    }
    bytes.extend_from_slice(&[0; 8]);
    let payload = (bytes.len() - 40) as u16;
    bytes[4..6].copy_from_slice(&payload.to_be_bytes());
    bytes
}

const HBH: u8 = ipv6::protocol::HOPOPTS;
const DST: u8 = ipv6::protocol::DSTOPTS;
const ROUTING: u8 = ipv6::protocol::ROUTING;
const FRAG: u8 = ipv6::protocol::FRAGMENT;
/// An options header holding only PadN.
const PAD: [u8; 8] = [0, 0, 1, 4, 0, 0, 0, 0];

#[test]
fn captured_hop_by_hop_router_alert() {
    let walk = walk(MLDV2_REPORT).unwrap();
    assert_eq!(
        walk,
        Walk {
            protocol: NextHeader::Icmpv6,
            offset: 48,
            next_header_offset: 40,
            fragment: None,
            router_alert: Some(ROUTER_ALERT_MLD),
        }
    );
    let header = ExtHeader::new_checked(&MLDV2_REPORT[40..]).unwrap();
    assert_eq!(header.header_len(), 8);
    let options: Vec<_> = header.options().collect();
    assert_eq!(
        options,
        [
            Ok((2, Ipv6Option::RouterAlert(0))),
            Ok((6, Ipv6Option::PadN(0)))
        ]
    );
    let repr = OptionsRepr::parse(&header).unwrap();
    assert_eq!(
        repr,
        OptionsRepr {
            next_header: NextHeader::Icmpv6,
            router_alert: Some(0)
        }
    );
    // Emitting it gives Linux's bytes back; without Router Alert, PadN(4).
    let mut out = [0xffu8; 8];
    repr.emit(&mut ExtHeader::new_unchecked(&mut out[..]));
    assert_eq!(out, MLDV2_REPORT[40..48]);
    let plain = OptionsRepr {
        router_alert: None,
        ..repr
    };
    plain.emit(&mut ExtHeader::new_unchecked(&mut out[..]));
    assert_eq!(out, [58, 0, 1, 4, 0, 0, 0, 0]);
    assert_eq!(
        OptionsRepr::parse(&ExtHeader::new_checked(&out[..]).unwrap()),
        Ok(plain)
    );
}

#[test]
fn captured_fragments_stop_the_walk() {
    let first = walk(FRAG_FIRST).unwrap();
    let repr = FragmentRepr {
        next_header: NextHeader::Icmpv6,
        frag_offset: 0,
        more_frags: true,
        ident: 0xd3ee_a931,
    };
    assert_eq!(first.fragment, Some((40, repr)));
    assert_eq!((first.protocol, first.offset), (NextHeader::Icmpv6, 48));
    // 1448 bytes of the fragmentable part went in the first fragment.
    assert_eq!(FRAG_FIRST.len() - 48, 1448);
    let last = walk(FRAG_LAST).unwrap();
    let (at, last_repr) = last.fragment.unwrap();
    assert_eq!(at, 40);
    assert_eq!(
        last_repr,
        FragmentRepr {
            frag_offset: 1448,
            more_frags: false,
            ..repr
        }
    );
    assert_eq!(
        std::format!("{last_repr}"),
        "IPv6 fragment id 0xd3eea931 offset 1448 next ICMPv6"
    );
    // Emit reproduces the captured header.
    let mut out = [0xffu8; 8];
    last_repr.emit(&mut FragmentHeader::new_unchecked(&mut out[..]));
    assert_eq!(out, FRAG_LAST[40..48]);
    let header = FragmentHeader::new_checked(&FRAG_LAST[40..]).unwrap();
    assert_eq!(FragmentRepr::parse(&header), Ok(last_repr));
    assert_eq!(
        FragmentHeader::new_checked(&FRAG_LAST[40..47]).unwrap_err(),
        Error::Truncated { need: 8, have: 7 }
    );
}

#[test]
fn atomic_fragment_is_walked_through() {
    let frag = [0, 0, 0, 0, 0, 0, 0, 7];
    let bytes = packet(FRAG, &[(FRAG, &frag), (DST, &PAD)]);
    let walk = walk(&bytes).unwrap();
    assert_eq!(walk.protocol, NextHeader::Udp);
    assert_eq!(walk.offset, 56);
    assert_eq!(walk.next_header_offset, 48);
    let (at, repr) = walk.fragment.unwrap();
    assert!(repr.is_atomic());
    assert_eq!((at, repr.ident), (40, 7));
}

#[test]
fn hop_by_hop_only_first() {
    let ok = packet(HBH, &[(HBH, &PAD), (DST, &PAD)]);
    assert_eq!(walk(&ok).unwrap().offset, 56);
    // RFC 8200 §4.1: a second hop-by-hop header is Parameter Problem code 1 at the
    // Next Header field that named it (byte 40 of the packet).
    let bad = packet(HBH, &[(HBH, &PAD), (HBH, &PAD)]);
    assert_eq!(
        walk(&bad),
        Err(WalkError::ParamProblem {
            code: ParamProblem::UnrecognizedNextHeader,
            pointer: 40
        })
    );
    let late = packet(DST, &[(DST, &PAD), (HBH, &PAD)]);
    assert_eq!(
        walk(&late),
        Err(WalkError::ParamProblem {
            code: ParamProblem::UnrecognizedNextHeader,
            pointer: 40
        })
    );
}

#[test]
fn unrecognised_option_actions() {
    // One unknown option type of each action class, after a Pad1 (so at offset 3 in
    // the header: 43 in the packet).
    for (option_type, action) in [
        (0x1e, OptionAction::Skip),
        (0x5e, OptionAction::Discard),
        (0x9e, OptionAction::DiscardAndReport),
        (0xde, OptionAction::DiscardAndReportUnlessMulticast),
    ] {
        let header = [0, 0, 0, option_type, 3, 1, 2, 3];
        let bytes = packet(DST, &[(DST, &header)]);
        let result = walk(&bytes);
        if action == OptionAction::Skip {
            assert_eq!(result.unwrap().protocol, NextHeader::Udp);
            continue;
        }
        assert_eq!(
            result,
            Err(WalkError::UnrecognizedOption {
                action,
                option_type,
                pointer: 43
            })
        );
    }
    assert!(!OptionAction::Discard.reports(false));
    assert!(OptionAction::DiscardAndReport.reports(true));
    assert!(OptionAction::DiscardAndReportUnlessMulticast.reports(false));
    assert!(!OptionAction::DiscardAndReportUnlessMulticast.reports(true));
}

#[test]
fn routing_header() {
    // Type 0 (deprecated, RFC 5095) with segments left 0 is ignored ...
    let rh0 = [0, 0, 0, 0, 0, 0, 0, 0];
    let bytes = packet(ROUTING, &[(ROUTING, &rh0)]);
    assert_eq!(walk(&bytes).unwrap().protocol, NextHeader::Udp);
    // ... and with segments left 1 is Parameter Problem code 0 at its type (byte 42).
    let rh0 = [0, 0, 0, 1, 0, 0, 0, 0];
    let bytes = packet(ROUTING, &[(ROUTING, &rh0)]);
    assert_eq!(
        walk(&bytes),
        Err(WalkError::ParamProblem {
            code: ParamProblem::ErroneousHeaderField,
            pointer: 42
        })
    );
    let header = ExtHeader::new_checked(&bytes[40..]).unwrap();
    assert_eq!((header.routing_type(), header.segments_left()), (0, 1));
}

#[test]
fn malformed_and_bounded() {
    // An option running past its header.
    let header = [0, 0, 0x1e, 9, 0, 0, 0, 0];
    let bytes = packet(DST, &[(DST, &header)]);
    assert_eq!(
        walk(&bytes),
        Err(WalkError::Malformed(Error::BadOption {
            kind: 0x1e,
            len: 9
        }))
    );
    // A Router Alert of the wrong length.
    let header = [0, 0, 5, 3, 0, 0, 0, 0];
    let bytes = packet(HBH, &[(HBH, &header)]);
    assert_eq!(
        walk(&bytes),
        Err(WalkError::Malformed(Error::BadOption { kind: 5, len: 3 }))
    );
    // A header longer than the packet.
    let mut bytes = packet(DST, &[(DST, &PAD)]);
    bytes[41] = 2;
    assert_eq!(
        walk(&bytes),
        Err(WalkError::Malformed(Error::Truncated {
            need: 24,
            have: 16
        }))
    );
    assert_eq!(
        walk(&bytes[..41]),
        Err(WalkError::Malformed(Error::Truncated { need: 8, have: 1 }))
    );
    assert!(matches!(walk(&bytes[..3]), Err(WalkError::Malformed(_))));
    // Eight destination options headers pass, nine do not.
    let eight: Vec<(u8, &[u8])> = (0..8).map(|_| (DST, &PAD[..])).collect();
    assert_eq!(walk(&packet(DST, &eight)).unwrap().offset, 40 + 64);
    let nine: Vec<(u8, &[u8])> = (0..9).map(|_| (DST, &PAD[..])).collect();
    assert_eq!(walk(&packet(DST, &nine)), Err(WalkError::TooManyHeaders));
}

#[test]
fn no_next_header_and_unknown_upper_layer() {
    let bytes = packet(ipv6::protocol::NONE, &[]);
    let walk_none = walk(&bytes).unwrap();
    assert_eq!(walk_none.protocol, NextHeader::NoNextHeader);
    assert_eq!(walk_none.next_header_offset, 6);
    let bytes = packet(DST, &[(DST, &PAD)]);
    let mut bytes = bytes;
    bytes[40] = 253;
    let walk = walk(&bytes).unwrap();
    assert_eq!(walk.protocol, NextHeader::Unknown(253));
    // The pointer a Parameter Problem code 1 would carry.
    assert_eq!(walk.next_header_offset, 40);
}
