use super::*;
extern crate std;
use std::vec;

use crate::ipv4;

const V3_JOIN: &[u8] = include_bytes!("../../tests/data/igmpv3_join.bin");
const V3_LEAVE: &[u8] = include_bytes!("../../tests/data/igmpv3_leave.bin");
const V2_REPORT: &[u8] = include_bytes!("../../tests/data/igmpv2_report.bin");
const V2_LEAVE: &[u8] = include_bytes!("../../tests/data/igmpv2_leave.bin");

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

/// The IGMP message of a captured datagram, checked to parse and to emit back to the
/// same bytes; the IPv4 header is checked to carry TTL 1 and the Router Alert.
fn round_trip(packet: &[u8]) -> (ipv4::Repr<'_>, Repr<'_>) {
    let ip = ipv4::Repr::parse(&ipv4::Packet::new_checked(packet).unwrap(), true).unwrap();
    assert_eq!(ip.protocol, ipv4::Protocol::Igmp);
    assert_eq!((ip.ttl, ip.options), (1, &ROUTER_ALERT[..]));
    let message = &packet[ip.header_len()..];
    let repr = Repr::parse(&Packet::new_checked(message).unwrap()).unwrap();
    let mut out = vec![0xa5u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, message);
    (ip, repr)
}

#[test]
fn captured_v3_join_and_leave() {
    let join = [GroupRecord {
        record_type: RecordType::ChangeToExclude,
        group: GROUP,
        sources: Addresses::EMPTY,
    }];
    let (ip, repr) = round_trip(V3_JOIN);
    assert_eq!(ip.dst_addr, ALL_V3_ROUTERS);
    assert_eq!(
        repr,
        Repr::ReportV3 {
            records: Records::List(&join)
        }
    );
    assert_eq!(std::format!("{repr}"), "IGMPv3 report, 1 records");
    let leave = [GroupRecord {
        record_type: RecordType::ChangeToInclude,
        ..join[0]
    }];
    let (_, repr) = round_trip(V3_LEAVE);
    assert_eq!(
        repr,
        Repr::ReportV3 {
            records: Records::List(&leave)
        }
    );
}

#[test]
fn captured_v2_report_and_leave() {
    let group = Ipv4Addr::new(239, 4, 5, 6);
    let (ip, repr) = round_trip(V2_REPORT);
    assert_eq!((ip.dst_addr, repr), (group, Repr::ReportV2 { group }));
    let (ip, repr) = round_trip(V2_LEAVE);
    assert_eq!((ip.dst_addr, repr), (ALL_ROUTERS, Repr::Leave { group }));
}

#[test]
fn queries_of_each_version_by_length() {
    // RFC 3376 §7.1: 8 bytes and code 0 is v1, 8 bytes is v2, 12 or more is v3.
    let v2 = [0x11, 100, 0, 0, 0, 0, 0, 0];
    let mut bytes = v2;
    Packet::new_unchecked(&mut bytes[..]).fill_checksum();
    let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
    assert_eq!(
        repr,
        Repr::Query {
            max_resp_code: 100,
            group: Ipv4Addr::UNSPECIFIED,
            v3: None
        }
    );
    // A group-and-source-specific v3 query: S, QRV 2, QQIC 125, two sources.
    let sources = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
    let query = Repr::Query {
        max_resp_code: 0x8c,
        group: GROUP,
        v3: Some(QueryV3 {
            suppress: true,
            robustness: 2,
            interval_code: 125,
            sources: Addresses::List(&sources),
        }),
    };
    let mut bytes = vec![0u8; query.buffer_len()];
    query.emit(&mut Packet::new_unchecked(&mut bytes[..]));
    assert_eq!(
        &bytes[..12],
        [
            0x11, 0x8c, bytes[2], bytes[3], 239, 1, 2, 3, 0x0a, 125, 0, 2
        ]
    );
    assert_eq!(&bytes[12..], [10, 0, 0, 1, 10, 0, 0, 2]);
    assert_eq!(
        Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
        Ok(query)
    );
    // A source count past the end is truncated; 9 to 11 bytes is no version at all.
    bytes[11] = 3;
    Packet::new_unchecked(&mut bytes[..]).fill_checksum();
    assert_eq!(
        Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Truncated { need: 24, have: 20 })
    );
    let mut short = [0x11, 10, 0, 0, 0, 0, 0, 0, 0, 0];
    Packet::new_unchecked(&mut short[..]).fill_checksum();
    assert_eq!(
        Repr::parse(&Packet::new_checked(&short[..]).unwrap()),
        Err(Error::BadLength(10))
    );
}

#[test]
fn malformed_messages_are_typed_errors() {
    assert_eq!(
        Packet::new_checked(&[0x16u8, 0, 0][..]).unwrap_err(),
        Error::Truncated { need: 8, have: 3 }
    );
    let mut bytes = V2_REPORT[24..].to_vec();
    bytes[0] = 0x99;
    Packet::new_unchecked(&mut bytes[..]).fill_checksum();
    assert_eq!(
        Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
        Err(Error::Unsupported("unknown IGMP message type"))
    );
    let mut report = V3_JOIN[24..].to_vec();
    report[7] = 2; // two records, one present
    Packet::new_unchecked(&mut report[..]).fill_checksum();
    assert_eq!(
        Repr::parse(&Packet::new_checked(&report[..]).unwrap()),
        Err(Error::Truncated { need: 8, have: 0 })
    );
    report[2] ^= 0xff;
    assert_eq!(
        Repr::parse(&Packet::new_checked(&report[..]).unwrap()),
        Err(Error::BadChecksum)
    );
}

#[test]
fn max_resp_and_macs() {
    assert_eq!(max_resp_tenths(100, false), 100);
    assert_eq!(max_resp_tenths(200, false), 200);
    assert_eq!(max_resp_tenths(100, true), 100);
    // 0x80: exp 0, mant 0: (0 | 0x10) << 3 = 128; 0xff: 31 << 10.
    assert_eq!(max_resp_tenths(0x80, true), 128);
    assert_eq!(max_resp_tenths(0xff, true), 31 << 10);
    assert_eq!(
        multicast_mac(Ipv4Addr::new(239, 129, 2, 3)),
        [0x01, 0x00, 0x5e, 0x01, 2, 3]
    );
    assert_eq!(
        multicast_mac(ALL_SYSTEMS),
        [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]
    );
}
