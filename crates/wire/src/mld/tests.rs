use super::*;
extern crate std;

use crate::{icmpv6, ipv6, ipv6ext};

/// Linux's MLDv1 report for ff02::1:ff00:a (from `::`, during DAD).
const MLDV1_REPORT: &[u8] = include_bytes!("../../tests/data/mldv1_report.bin");
/// MLDv2 reports: one CHANGE_TO_EXCLUDE record; five.
const MLDV2_REPORT: &[u8] = include_bytes!("../../tests/data/mldv2_report.bin");
const MLDV2_REPORT_5: &[u8] = include_bytes!("../../tests/data/mldv2_report_3.bin");

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The MLD message of a captured packet (after the hop-by-hop header), checked to
/// parse and to emit back to the same bytes.
fn round_trip(packet: &[u8]) -> Repr<'_> {
    let ip = ipv6::Repr::parse(&ipv6::Packet::new_checked(packet).unwrap()).unwrap();
    let walk = ipv6ext::walk(packet).unwrap();
    assert_eq!(walk.router_alert, Some(ipv6ext::ROUTER_ALERT_MLD));
    assert_eq!(ip.hop_limit, 1);
    let message = &packet[walk.offset..];
    let view = icmpv6::Packet::new_checked(message).unwrap();
    let icmpv6::Repr::Mld(repr) = icmpv6::Repr::parse(&view, &ip.src_addr, &ip.dst_addr).unwrap()
    else {
        panic!("not MLD");
    };
    let outer = icmpv6::Repr::Mld(repr);
    let mut out = std::vec![0xa5u8; outer.buffer_len()];
    outer.emit(
        &mut icmpv6::Packet::new_unchecked(&mut out[..]),
        &ip.src_addr,
        &ip.dst_addr,
    );
    assert_eq!(out, message);
    repr
}

#[test]
fn captured_v1_report() {
    assert_eq!(
        round_trip(MLDV1_REPORT),
        Repr::Report {
            group: addr("ff02::1:ff00:a")
        }
    );
}

#[test]
fn captured_v2_reports() {
    let join = [AddressRecord {
        record_type: RecordType::ChangeToExclude,
        group: addr("ff02::1:ff00:b"),
        sources: Addresses::EMPTY,
    }];
    assert_eq!(
        round_trip(MLDV2_REPORT),
        Repr::ReportV2 {
            records: Records::List(&join)
        }
    );
    let repr = round_trip(MLDV2_REPORT_5);
    let Repr::ReportV2 { records } = repr else {
        panic!("not a v2 report");
    };
    let groups: std::vec::Vec<_> = records.iter().map(|r| r.group).collect();
    assert_eq!(
        groups,
        [
            addr("ff02::1:ff00:0"),
            addr("ff02::1:ff00:1"),
            addr("ff02::1:ff00:1a"),
            addr("ff05::2"),
            addr("ff02::2"),
        ]
    );
    assert_eq!(std::format!("{repr}"), "MLDv2 report, 5 records");
}

/// Emits through ICMPv6 and parses back.
fn emit_parse<'a>(repr: Repr<'_>, out: &'a mut [u8]) -> Result<icmpv6::Repr<'a>> {
    let (src, dst) = (addr("fe80::1"), addr("ff02::16"));
    let outer = icmpv6::Repr::Mld(repr);
    let out = &mut out[..outer.buffer_len()];
    outer.emit(&mut icmpv6::Packet::new_unchecked(&mut *out), &src, &dst);
    let out: &[u8] = out;
    icmpv6::Repr::parse(&icmpv6::Packet::new_checked(out)?, &src, &dst)
}

#[test]
fn queries_and_records_with_sources() {
    let sources = [addr("2001:db8::1"), addr("2001:db8::2")];
    let mut out = [0u8; 200];
    let v1 = Repr::Query {
        max_response_code: 10000,
        group: Ipv6Addr::UNSPECIFIED,
        v2: None,
    };
    assert_eq!(v1.buffer_len(), 24);
    assert_eq!(emit_parse(v1, &mut out), Ok(icmpv6::Repr::Mld(v1)));
    let v2 = Repr::Query {
        max_response_code: 1000,
        group: addr("ff05::2"),
        v2: Some(QueryV2 {
            suppress: true,
            robustness: 2,
            interval_code: 125,
            sources: Addresses::List(&sources),
        }),
    };
    assert_eq!(v2.buffer_len(), 28 + 32);
    assert_eq!(emit_parse(v2, &mut out), Ok(icmpv6::Repr::Mld(v2)));
    let records = [
        AddressRecord {
            record_type: RecordType::AllowNewSources,
            group: addr("ff05::2"),
            sources: Addresses::List(&sources),
        },
        AddressRecord {
            record_type: RecordType::ChangeToInclude,
            group: addr("ff02::1:ff00:a"),
            sources: Addresses::EMPTY,
        },
    ];
    let report = Repr::ReportV2 {
        records: Records::List(&records),
    };
    assert_eq!(report.buffer_len(), 8 + 20 + 32 + 20);
    assert_eq!(emit_parse(report, &mut out), Ok(icmpv6::Repr::Mld(report)));
    let done = Repr::Done {
        group: addr("ff02::1:ff00:a"),
    };
    assert_eq!(emit_parse(done, &mut out), Ok(icmpv6::Repr::Mld(done)));
}

fn parse(bytes: &[u8]) -> Result<Repr<'_>> {
    Repr::parse(&icmpv6::Packet::new_checked(bytes).unwrap())
}

#[test]
fn malformed() {
    let mut query = [0u8; 28];
    query[0] = 130;
    assert!(parse(&query[..24]).is_ok());
    // RFC 3810 §8.1: 25..27 bytes is neither version.
    assert_eq!(parse(&query[..26]), Err(Error::BadLength(26)));
    assert_eq!(
        parse(&query[..20]),
        Err(Error::Truncated { need: 24, have: 20 })
    );
    // A v2 query announcing a source it does not hold.
    query[27] = 1;
    assert_eq!(parse(&query), Err(Error::Truncated { need: 44, have: 28 }));
    // A report announcing two records and holding one.
    let mut report = MLDV2_REPORT[48..].to_vec();
    report[7] = 2;
    assert_eq!(parse(&report), Err(Error::Truncated { need: 20, have: 0 }));
    // A record whose auxiliary data runs past the end.
    let mut report = MLDV2_REPORT[48..].to_vec();
    report[9] = 1;
    assert_eq!(parse(&report), Err(Error::Truncated { need: 24, have: 20 }));
}
