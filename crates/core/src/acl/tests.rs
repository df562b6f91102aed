extern crate std;

use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;

const TAP0: IfaceId = IfaceId(0);
const TAP1: IfaceId = IfaceId(1);

/// An IPv4 packet `src` -> `dst` of protocol `proto` whose payload starts with the
/// ports `sport`, `dport`; `frag_offset` in bytes.
fn packet(src: [u8; 4], dst: [u8; 4], proto: u8, ports: (u16, u16), frag_offset: u16) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    p[6..8].copy_from_slice(&(frag_offset / 8).to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&ports.0.to_be_bytes());
    p[22..24].copy_from_slice(&ports.1.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

fn tcp(dst: [u8; 4], dport: u16) -> Vec<u8> {
    packet([10, 0, 1, 5], dst, 6, (40000, dport), 0)
}

fn rule(text: &str) -> Rule {
    text.parse().unwrap()
}

fn resolved(rules: &[&str], default: Action) -> Acl {
    let mut acl = Acl::new(rules.iter().map(|r| rule(r)).collect(), default);
    let unresolved = acl.resolve(|name| match name {
        "tap0" => Some(TAP0),
        "tap1" => Some(TAP1),
        _ => None,
    });
    assert!(unresolved.iter().all(|n| n == "tap9"), "{unresolved:?}");
    acl
}

/// Whether `text`, as the only rule (default allow), denies `packet` from tap0 to tap1.
fn denies(text: &str, packet: &[u8]) -> bool {
    resolved(&[text], Action::Allow).check(packet, Some(TAP0), Some(TAP1)) == Action::Deny
}

#[test]
fn each_field_matches_and_fails_to_match() {
    let p = tcp([10, 0, 2, 7], 8081);
    let cases: [(&str, &str); 7] = [
        ("deny in=tap0", "deny in=tap1"),
        ("deny out=tap1", "deny out=tap0"),
        ("deny src=10.0.1.0/24", "deny src=10.0.3.0/24"),
        ("deny dst=10.0.2.7/32", "deny dst=10.0.0.0/24"),
        ("deny proto=tcp", "deny proto=udp"),
        (
            "deny proto=tcp sport=40000-40010",
            "deny proto=tcp sport=1-39999",
        ),
        ("deny proto=6 dport=8081", "deny proto=tcp dport=8080"),
    ];
    for (hit, miss) in cases {
        assert!(denies(hit, &p), "{hit} should match");
        assert!(!denies(miss, &p), "{miss} should not match");
    }
    assert!(denies(
        "deny proto=icmp",
        &packet([1; 4], [2; 4], 1, (0, 0), 0)
    ));
    assert!(denies(
        "deny proto=47",
        &packet([1; 4], [2; 4], 47, (0, 0), 0)
    ));
    assert!(denies(
        "deny proto=udp dport=53",
        &packet([1; 4], [2; 4], 17, (9, 53), 0)
    ));
    // An interface that did not resolve matches nothing.
    assert!(!denies("deny in=tap9", &p));
    // Unknown interfaces at check time: only rules without interfaces match.
    let mut acl = resolved(&["deny in=tap0"], Action::Allow);
    assert_eq!(acl.check(&p, None, None), Action::Allow);
}

#[test]
fn fragments_have_no_ports() {
    let later = packet([10, 0, 1, 5], [10, 0, 2, 7], 6, (40000, 8081), 1480);
    assert!(!denies("deny proto=tcp dport=8081", &later));
    assert!(denies("deny proto=tcp dst=10.0.2.0/24", &later));
    let first = packet([10, 0, 1, 5], [10, 0, 2, 7], 6, (40000, 8081), 0);
    assert!(denies("deny proto=tcp dport=8081", &first));
    // A payload too short for ports.
    let mut short = first.clone();
    short.truncate(22);
    short[2..4].copy_from_slice(&22u16.to_be_bytes());
    assert!(!denies("deny proto=tcp dport=8081", &short));
    assert!(denies("deny proto=tcp", &short));
}

#[test]
fn first_match_wins_and_counters_count() {
    let mut acl = resolved(
        &[
            "deny proto=tcp dst=10.0.2.0/24 dport=8081",
            "allow in=tap0 src=10.0.1.0/24",
            "deny proto=udp dport=1000-2000",
        ],
        Action::Deny,
    );
    let blocked = tcp([10, 0, 2, 7], 8081);
    let allowed = tcp([10, 0, 2, 7], 80);
    let udp = packet([10, 0, 9, 1], [10, 0, 2, 7], 17, (5, 1500), 0);
    let other = packet([10, 0, 9, 1], [10, 0, 2, 7], 17, (5, 3000), 0);
    assert_eq!(acl.check(&blocked, Some(TAP0), None), Action::Deny);
    assert_eq!(acl.check(&allowed, Some(TAP0), None), Action::Allow);
    assert_eq!(acl.check(&allowed, Some(TAP1), None), Action::Deny);
    assert_eq!(acl.check(&udp, Some(TAP0), None), Action::Deny);
    assert_eq!(acl.evaluate(&udp, Some(TAP0), None).rule, Some(2));
    assert_eq!(acl.check(&other, Some(TAP0), None), Action::Deny);
    assert_eq!(acl.check(&[0x45, 0], Some(TAP0), None), Action::Deny);
    let hit = |packets, bytes| Hits { packets, bytes };
    assert_eq!(acl.hits(0), Some(hit(1, 40)));
    assert_eq!(acl.hits(1), Some(hit(1, 40)));
    assert_eq!(acl.hits(2), Some(hit(1, 40)));
    assert_eq!(acl.hits(3), None);
    assert_eq!(acl.default_hits(), hit(2, 80));
    assert_eq!(acl.malformed(), hit(1, 2));
    // evaluate does not count.
    assert_eq!(acl.hits(2), Some(hit(1, 40)));
    // An empty list decides by its default.
    assert_eq!(Acl::default().check(&blocked, None, None), Action::Allow);
}

#[test]
fn display_gives_back_the_canonical_text() {
    for text in [
        "deny proto=tcp dst=10.0.2.0/24 dport=8081",
        "allow in=tap0 src=10.0.1.0/24",
        "deny proto=udp dport=1000-2000",
        "allow proto=tcp in=tap0 out=tap1 src=10.0.0.0/8 dst=0.0.0.0/0 sport=1-1023 dport=22",
        "deny proto=icmp",
        "deny proto=47",
        "allow",
    ] {
        assert_eq!(rule(text).to_string(), text);
    }
    // Other spellings come back canonical.
    assert_eq!(
        rule("DENY  dport=80-80 proto=6\tsrc=1.2.3.4/32").to_string(),
        "deny proto=tcp src=1.2.3.4/32 dport=80"
    );
}

#[test]
fn bad_rules_say_which_token_and_why() {
    use AclParseErrorKind as K;
    let cases = [
        ("", "", K::MissingAction),
        ("proto=tcp", "proto=tcp", K::MissingAction),
        ("permit src=1.2.3.0/24", "permit", K::MissingAction),
        ("deny color=red", "color=red", K::UnknownKey),
        ("deny src", "src", K::NotKeyValue),
        ("deny src=", "src=", K::EmptyValue),
        ("deny src=10.0.0.0/33", "src=10.0.0.0/33", K::BadCidr),
        ("deny dst=10.0.0.1", "dst=10.0.0.1", K::BadCidr),
        ("deny proto=sctp", "proto=sctp", K::BadProto),
        ("deny proto=256", "proto=256", K::BadProto),
        ("deny proto=tcp dport=65536", "dport=65536", K::BadPort),
        ("deny proto=tcp dport=+80", "dport=+80", K::BadPort),
        ("deny proto=tcp dport=80-", "dport=80-", K::BadPort),
        (
            "deny proto=tcp dport=2000-1000",
            "dport=2000-1000",
            K::ReversedRange,
        ),
        ("deny dport=80", "dport=80", K::PortsWithoutProto),
        ("deny proto=icmp sport=1", "sport=1", K::PortsWithoutProto),
        (
            "deny src=1.0.0.0/8 src=2.0.0.0/8",
            "src=2.0.0.0/8",
            K::DuplicateKey,
        ),
        ("deny in=a in=b", "in=b", K::DuplicateKey),
    ];
    for (text, token, kind) in cases {
        let e = text.parse::<Rule>().unwrap_err();
        assert_eq!((e.token.as_str(), e.kind), (token, kind), "{text}");
        let message = e.to_string();
        assert!(!message.contains('\n'));
        assert!(message.contains(token), "{message}");
    }
    let e = Acl::parse_lines("# rules\nallow\n\ndeny x=1\n", Action::Allow).unwrap_err();
    assert_eq!(e.0, 4);
    let acl = Acl::parse_lines("# rules\nallow in=tap0\n\ndeny\n", Action::Allow).unwrap();
    assert_eq!(acl.rules().len(), 2);
}

proptest! {
    /// Matching never panics, whatever the bytes, and counts every packet once.
    #[test]
    fn check_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), version in 0u8..3) {
        let mut bytes = bytes;
        if !bytes.is_empty() && version > 0 {
            bytes[0] = if version == 1 { 0x45 } else { 0x60 };
        }
        let mut acl = resolved(
            &["deny proto=tcp dport=1-100", "allow src=0.0.0.0/1", "deny proto=udp sport=7",
              "allow dst=fd00::/8"],
            Action::Deny,
        );
        acl.check(&bytes, Some(TAP0), Some(TAP1));
        let counted: u64 = (0..4).filter_map(|i| acl.hits(i)).map(|h| h.packets).sum::<u64>()
            + acl.default_hits().packets + acl.malformed().packets;
        prop_assert_eq!(counted, 1);
    }

    /// Any text parses or fails with an error, never a panic; what parses prints back
    /// to text that parses to the same rule.
    #[test]
    fn parse_never_panics(text in "[a-z0-9=./: -]{0,40}") {
        if let Ok(rule) = text.parse::<Rule>() {
            prop_assert_eq!(rule.to_string().parse::<Rule>().unwrap(), rule);
        }
    }
}

/// An IPv6 packet `src` -> `dst` whose upper layer `proto` starts with the ports
/// `sport`, `dport`; with a Fragment header at byte offset `fragment` when given.
fn packet6(src: &str, dst: &str, proto: u8, ports: (u16, u16), fragment: Option<u16>) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.parse::<core::net::Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&dst.parse::<core::net::Ipv6Addr>().unwrap().octets());
    match fragment {
        Some(offset) => {
            p[6] = 44;
            // Next header, reserved, offset (8-byte units) with M set, identification.
            p.extend_from_slice(&[proto, 0]);
            p.extend_from_slice(&(offset | 1).to_be_bytes());
            p.extend_from_slice(&7u32.to_be_bytes());
        }
        None => p[6] = proto,
    }
    p.extend_from_slice(&ports.0.to_be_bytes());
    p.extend_from_slice(&ports.1.to_be_bytes());
    p.extend_from_slice(&[0; 16]);
    let payload_len = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&payload_len.to_be_bytes());
    p
}

fn tcp6(dst: &str, dport: u16) -> Vec<u8> {
    packet6("fd00:1::5", dst, 6, (40000, dport), None)
}

#[test]
fn each_field_matches_and_fails_to_match_over_ipv6() {
    let p = tcp6("fd00:2::7", 8081);
    let cases: [(&str, &str); 8] = [
        ("deny in=tap0", "deny in=tap1"),
        ("deny out=tap1", "deny out=tap0"),
        ("deny src=fd00:1::/64", "deny src=fd00:3::/64"),
        ("deny dst=fd00:2::7/128", "deny dst=fd00::/64"),
        ("deny dst=::/0", "deny dst=0.0.0.0/0"),
        ("deny proto=tcp", "deny proto=udp"),
        (
            "deny proto=tcp sport=40000-40010",
            "deny proto=tcp sport=1-39999",
        ),
        ("deny proto=6 dport=8081", "deny proto=tcp dport=8080"),
    ];
    for (hit, miss) in cases {
        assert!(denies(hit, &p), "{hit} should match");
        assert!(!denies(miss, &p), "{miss} should not match");
    }
    let echo = packet6("fd00:1::5", "fd00:2::7", 58, (0x8000, 0), None);
    assert!(denies("deny proto=icmpv6", &echo));
    assert!(denies("deny proto=58 dst=fd00:2::/64", &echo));
    assert!(!denies("deny proto=icmp", &echo), "icmp is IPv4's");
    let udp = packet6("fd00:1::5", "fd00:2::7", 17, (9, 53), None);
    assert!(denies("deny proto=udp dport=53", &udp));
    // An IPv4 rule never matches IPv6 and the other way round; a rule without
    // prefixes matches both.
    let v4 = tcp([10, 0, 2, 7], 8081);
    assert!(!denies("deny src=fd00:1::/64", &v4));
    assert!(!denies("deny src=10.0.0.0/8", &p));
    assert!(denies("deny proto=tcp dport=8081", &v4) && denies("deny proto=tcp dport=8081", &p));
}

#[test]
fn ipv6_fragments_and_extension_headers() {
    // The first fragment: ports after the Fragment header; a later one has none.
    let first = packet6("fd00:1::5", "fd00:2::7", 6, (40000, 8081), Some(0));
    assert!(denies("deny proto=tcp dport=8081", &first));
    let later = packet6("fd00:1::5", "fd00:2::7", 6, (40000, 8081), Some(1232));
    assert!(!denies("deny proto=tcp dport=8081", &later));
    assert!(denies("deny proto=tcp dst=fd00:2::/64", &later));
    // A chain that does not walk (a Fragment header cut short) is malformed: denied
    // by any list and counted as such.
    let mut cut = first.clone();
    cut.truncate(44);
    cut[4..6].copy_from_slice(&4u16.to_be_bytes());
    let mut acl = resolved(&["allow"], Action::Allow);
    assert_eq!(acl.check(&cut, Some(TAP0), None), Action::Deny);
    assert_eq!(acl.malformed().packets, 1);
    let fields = PacketFields::parse(&first).unwrap();
    assert_eq!((fields.proto, fields.ports), (6, Some((40000, 8081))));
}

#[test]
fn ipv6_rules_print_back_and_bad_ones_say_why() {
    use AclParseErrorKind as K;
    for text in [
        "deny proto=tcp dst=fd00:2::/64 dport=22",
        "allow proto=icmpv6 in=tap0 src=2001:db8::/32",
        "deny src=::/0",
        "deny proto=icmpv6",
    ] {
        assert_eq!(rule(text).to_string(), text);
    }
    assert_eq!(rule("deny proto=58").to_string(), "deny proto=icmpv6");
    assert_eq!(
        rule("deny proto=ipv6-icmp").to_string(),
        "deny proto=icmpv6"
    );
    let cases = [
        ("deny dst=fd00::g/64", "dst=fd00::g/64", K::BadCidr),
        ("deny dst=fd00::/129", "dst=fd00::/129", K::BadCidr),
        ("deny src=fd00::1", "src=fd00::1", K::BadCidr),
        (
            "deny src=fd00::/64 dst=10.0.0.0/8",
            "dst=10.0.0.0/8",
            K::MixedFamilies,
        ),
        (
            "deny dst=fd00::/64 src=10.0.0.0/8",
            "src=10.0.0.0/8",
            K::MixedFamilies,
        ),
        (
            "deny proto=icmp dst=fd00::/64",
            "proto=icmp",
            K::ProtoFamily,
        ),
        (
            "deny src=10.0.0.0/8 proto=icmpv6",
            "proto=icmpv6",
            K::ProtoFamily,
        ),
    ];
    for (text, token, kind) in cases {
        let e = text.parse::<Rule>().unwrap_err();
        assert_eq!((e.token.as_str(), e.kind), (token, kind), "{text}");
        assert!(e.to_string().contains(token), "{e}");
    }
}
