use super::*;
extern crate std;
use std::vec::Vec;

use crate::icmpv6;

const RS: &[u8] = include_bytes!("../../tests/data/rs.bin");
const RA: &[u8] = include_bytes!("../../tests/data/ra.bin");
const NS: &[u8] = include_bytes!("../../tests/data/ns.bin");
/// Linux's DAD probe: from `::`, with a Nonce option (type 14, RFC 7527) this parser
/// does not know.
const NS_DAD: &[u8] = include_bytes!("../../tests/data/ns_dad.bin");
const NA: &[u8] = include_bytes!("../../tests/data/na.bin");
const NA_ROUTER: &[u8] = include_bytes!("../../tests/data/na_router.bin");

fn mac(last: u8) -> Address {
    Address([2, 0, 0, 0, 0, last])
}

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Parses a captured packet's ND message through ICMPv6 (checksum verified) and
/// checks the IPv6-level rules.
fn parse(packet: &[u8]) -> (ipv6::Repr, Repr<'_>) {
    let ip = ipv6::Repr::parse(&ipv6::Packet::new_checked(packet).unwrap()).unwrap();
    let view = icmpv6::Packet::new_checked(&packet[ipv6::HEADER_LEN..]).unwrap();
    let icmpv6::Repr::Ndp(repr) = icmpv6::Repr::parse(&view, &ip.src_addr, &ip.dst_addr).unwrap()
    else {
        panic!("not NDP");
    };
    assert_eq!(
        repr.validate(&ip.src_addr, &ip.dst_addr, ip.hop_limit),
        Ok(())
    );
    (ip, repr)
}

/// Emits `repr` through ICMPv6 for the captured packet's addresses.
fn emit(ip: &ipv6::Repr, repr: Repr<'_>) -> Vec<u8> {
    let repr = icmpv6::Repr::Ndp(repr);
    let mut out = std::vec![0xa5u8; repr.buffer_len()];
    repr.emit(
        &mut icmpv6::Packet::new_unchecked(&mut out[..]),
        &ip.src_addr,
        &ip.dst_addr,
    );
    out
}

#[test]
fn captured_solicitations_and_advertisements() {
    let (ip, rs) = parse(RS);
    assert_eq!(
        rs,
        Repr::RouterSolicit {
            source_lladdr: Some(mac(0x0b))
        }
    );
    assert_eq!(emit(&ip, rs), &RS[40..]);

    let (ip, ns) = parse(NS);
    assert_eq!(
        ns,
        Repr::NeighborSolicit {
            target: addr("2001:db8::b"),
            source_lladdr: Some(mac(0x0a)),
        }
    );
    assert_eq!(ip.dst_addr, ipv6::solicited_node(addr("2001:db8::b")));
    assert_eq!(emit(&ip, ns), &NS[40..]);

    let (ip, na) = parse(NA);
    assert_eq!(
        na,
        Repr::NeighborAdvert {
            router: false,
            solicited: true,
            overrides: true,
            target: addr("2001:db8::b"),
            target_lladdr: Some(mac(0x0b)),
        }
    );
    assert_eq!(emit(&ip, na), &NA[40..]);
    assert_eq!(
        std::format!("{na}"),
        "neighbor advertisement 2001:db8::b is at 02:00:00:00:00:0b"
    );

    // RFC 4861 §7.1.2: a solicited advertisement never goes to a multicast address.
    assert_eq!(
        na.validate(&ip.src_addr, &addr("ff02::1"), 255),
        Err(Error::BadField("solicited"))
    );
    let (ip, na) = parse(NA_ROUTER);
    assert!(matches!(na, Repr::NeighborAdvert { router: true, .. }));
    assert_eq!(emit(&ip, na), &NA_ROUTER[40..]);
}

#[test]
fn captured_dad_probe_skips_unknown_option() {
    let (ip, ns) = parse(NS_DAD);
    assert!(ip.src_addr.is_unspecified());
    assert_eq!(
        ns,
        Repr::NeighborSolicit {
            target: addr("2001:db8::a"),
            source_lladdr: None,
        }
    );
    let options: Vec<_> = Options::new(&NS_DAD[64..]).collect();
    assert!(matches!(
        options[..],
        [Ok(NdpOption::Unknown {
            option_type: 14,
            data: [_, _, _, _, _, _]
        })]
    ));
    // Re-emitted without the unknown option, it parses the same.
    let out = emit(&ip, ns);
    assert_eq!(out.len(), 24);
    let view = icmpv6::Packet::new_checked(&out[..]).unwrap();
    assert_eq!(
        icmpv6::Repr::parse(&view, &ip.src_addr, &ip.dst_addr),
        Ok(icmpv6::Repr::Ndp(ns))
    );
    // From ::, a solicitation must go to the target's solicited-node group and carry
    // no link-layer address.
    let any = Ipv6Addr::UNSPECIFIED;
    assert_eq!(
        ns.validate(&any, &addr("ff02::1"), 255),
        Err(Error::BadField("destination"))
    );
    let with_lladdr = Repr::NeighborSolicit {
        target: addr("2001:db8::a"),
        source_lladdr: Some(mac(1)),
    };
    assert_eq!(
        with_lladdr.validate(&any, &ip.dst_addr, 255),
        Err(Error::BadField("source_lladdr"))
    );
    assert_eq!(
        ns.validate(&any, &ip.dst_addr, 254),
        Err(Error::BadField("hop_limit"))
    );
}

#[test]
fn captured_router_advertisement() {
    let (ip, ra) = parse(RA);
    let prefix = PrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 86400,
        preferred_lifetime: 14400,
        prefix: addr("2001:db8:1::"),
    };
    let expected = Repr::RouterAdvert {
        hop_limit: 64,
        managed: false,
        other: true,
        router_lifetime: 1800,
        reachable_time: 30000,
        retrans_timer: 1000,
        source_lladdr: Some(mac(0x1a)),
        mtu: Some(1400),
        prefixes: Prefixes::List(&[prefix]),
    };
    assert_eq!(ra, expected);
    assert_eq!(emit(&ip, expected), &RA[40..]);
    assert_eq!(emit(&ip, ra), &RA[40..]);
    assert_eq!(
        std::format!("{ra}"),
        "router advertisement lifetime 1800 prefixes 1"
    );
    // From a global source it is not valid.
    assert_eq!(
        ra.validate(&addr("2001:db8::1"), &ip.dst_addr, 255),
        Err(Error::BadField("source"))
    );
}

#[test]
fn redirect_round_trip() {
    let src = addr("fe80::ff:fe00:1a");
    let dst = addr("2001:db8::a");
    let quoted = std::vec![0x60u8; 1500];
    let repr = Repr::Redirect {
        target: addr("fe80::ff:fe00:b"),
        destination: addr("2001:db8:2::b"),
        target_lladdr: Some(mac(0x0b)),
        redirected: &quoted,
    };
    // The quoted packet is cut so the whole packet fits 1280 bytes, in 8-byte units.
    let quoted_len = redirected_len(&quoted, true);
    assert_eq!(quoted_len, 1280 - 40 - 40 - 8 - 8);
    assert_eq!(repr.buffer_len(), 40 + 8 + 8 + quoted_len);
    let ip = ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: ipv6::NextHeader::Icmpv6,
        payload_len: repr.buffer_len(),
        hop_limit: 255,
        dscp: 0,
        ecn: 0,
        flow_label: 0,
    };
    let out = emit(&ip, repr);
    assert_eq!(ip.buffer_len(), ipv6::MIN_MTU);
    assert_eq!(&out[40..48], &[2, 1, 2, 0, 0, 0, 0, 0x0b]);
    assert_eq!(&out[48..50], &[4, ((8 + quoted_len) / 8) as u8]);
    let view = icmpv6::Packet::new_checked(&out[..]).unwrap();
    let parsed = icmpv6::Repr::parse(&view, &src, &dst).unwrap();
    let expected = Repr::Redirect {
        target: addr("fe80::ff:fe00:b"),
        destination: addr("2001:db8:2::b"),
        target_lladdr: Some(mac(0x0b)),
        redirected: &quoted[..quoted_len],
    };
    assert_eq!(parsed, icmpv6::Repr::Ndp(expected));
    assert_eq!(expected.validate(&src, &dst, 255), Ok(()));
    // A short quote is cut to whole 8-byte units; none at all leaves no option.
    assert_eq!(redirected_len(&quoted[..13], false), 8);
    let bare = Repr::Redirect {
        target: addr("fe80::ff:fe00:b"),
        destination: addr("2001:db8:2::b"),
        target_lladdr: None,
        redirected: &[],
    };
    assert_eq!(bare.buffer_len(), 40);
}

#[test]
fn malformed() {
    let (ip, _) = parse(NS);
    let check = |bytes: &[u8]| {
        let mut bytes = bytes.to_vec();
        icmpv6::Packet::new_unchecked(&mut bytes[..]).fill_checksum(&ip.src_addr, &ip.dst_addr);
        let view = icmpv6::Packet::new_checked(&bytes[..]).unwrap();
        icmpv6::Repr::parse(&view, &ip.src_addr, &ip.dst_addr).map(|_| ())
    };
    let ns = &NS[40..];
    // RFC 4861 §4.6: an option of length 0 discards the message.
    let mut zero = ns.to_vec();
    zero[25] = 0;
    assert_eq!(check(&zero), Err(Error::BadOption { kind: 1, len: 0 }));
    // An option past the end, a link-layer option of the wrong length.
    let mut long = ns.to_vec();
    long[25] = 2;
    assert_eq!(check(&long), Err(Error::BadOption { kind: 1, len: 2 }));
    let mut wrong = ns.to_vec();
    wrong.extend_from_slice(&[0; 8]);
    wrong[25] = 2;
    assert_eq!(check(&wrong), Err(Error::BadOption { kind: 1, len: 2 }));
    // Code, length, multicast target.
    let mut code = ns.to_vec();
    code[1] = 1;
    assert_eq!(check(&code), Err(Error::BadField("code")));
    assert_eq!(
        check(&ns[..23]),
        Err(Error::Truncated { need: 24, have: 23 })
    );
    let mut multicast = ns.to_vec();
    multicast[8] = 0xff;
    assert_eq!(check(&multicast), Err(Error::BadField("target")));
    // A Prefix Information option of the wrong length.
    let mut ra = RA[40..].to_vec();
    ra[33] = 3;
    ra.truncate(32 + 24);
    assert_eq!(check(&ra), Err(Error::BadOption { kind: 3, len: 3 }));
}
