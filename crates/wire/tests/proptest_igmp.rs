//! Property tests for IGMP: no parser panics on any input (checksum right or not), and
//! `emit` and `parse` are inverse for every representable message. The same checks run
//! under libFuzzer in the `igmp` fuzz target (`crates/fuzz-harness`).

use std::net::Ipv4Addr;

use impnet_wire::igmp::{self, Addresses, GroupRecord, Packet, QueryV3, Records, Repr};
use proptest::prelude::*;

fn addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from_bits)
}

fn records() -> impl Strategy<Value = Vec<(u8, Ipv4Addr, Vec<Ipv4Addr>)>> {
    prop::collection::vec(
        (any::<u8>(), addr(), prop::collection::vec(addr(), 0..4)),
        0..4,
    )
}

proptest! {
    #[test]
    fn parse_never_panics(mut data in prop::collection::vec(any::<u8>(), 0..80),
                          fix in any::<bool>()) {
        if let Ok(mut packet) = Packet::new_checked(&mut data[..])
            && fix
        {
            packet.fill_checksum();
        }
        if let Ok(packet) = Packet::new_checked(&data[..]) {
            let _ = (packet.msg_type(), packet.max_resp_code(), packet.group_addr());
            if let Ok(repr) = Repr::parse(&packet) {
                let _ = repr.to_string();
                let mut out = vec![0u8; repr.buffer_len()];
                repr.emit(&mut Packet::new_unchecked(&mut out[..]));
                let again = Packet::new_checked(&out[..]).unwrap();
                prop_assert_eq!(Repr::parse(&again), Ok(repr));
            }
        }
    }

    #[test]
    fn round_trip(kind in 0u8..6, group in addr(), code in any::<u8>(),
                  query in (any::<bool>(), 0u8..8, any::<u8>(),
                            prop::collection::vec(addr(), 0..4)),
                  records in records()) {
        let (suppress, robustness, interval_code, sources) = query;
        let list: Vec<GroupRecord<'_>> = records
            .iter()
            .map(|(kind, group, sources)| GroupRecord {
                record_type: igmp::RecordType::from(*kind),
                group: *group,
                sources: Addresses::List(sources),
            })
            .collect();
        let repr = match kind {
            0 => Repr::Query { max_resp_code: code, group, v3: None },
            1 => Repr::Query {
                max_resp_code: code,
                group,
                v3: Some(QueryV3 {
                    suppress,
                    robustness,
                    interval_code,
                    sources: Addresses::List(&sources),
                }),
            },
            2 => Repr::ReportV1 { group },
            3 => Repr::ReportV2 { group },
            4 => Repr::Leave { group },
            _ => Repr::ReportV3 { records: Records::List(&list) },
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        let packet = Packet::new_checked(&out[..]).unwrap();
        prop_assert!(packet.verify_checksum());
        prop_assert_eq!(Repr::parse(&packet), Ok(repr));
    }

    #[test]
    fn multicast_mac_keeps_low_23_bits(group in addr()) {
        let mac = igmp::multicast_mac(group);
        prop_assert_eq!(&mac[..3], &[0x01, 0x00, 0x5e]);
        prop_assert_eq!(u32::from_be_bytes([0, mac[3], mac[4], mac[5]]), group.to_bits() & 0x7f_ffff);
    }
}
