//! Property tests for DHCP and DNS: no input makes a parser panic (or loop, for DNS
//! compression pointers), and what is emitted parses back to the same meaning.

use std::net::{Ipv4Addr, Ipv6Addr};

use impnet_wire::dhcp::{self, AddrList, MessageType};
use impnet_wire::dns::{self, Builder, CLASS_IN, Flags, Message, RData, RecordData, Section};
use impnet_wire::ethernet;
use proptest::prelude::*;

fn addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from_bits)
}

fn message_type() -> impl Strategy<Value = MessageType> {
    prop::sample::select(vec![
        MessageType::Discover,
        MessageType::Offer,
        MessageType::Request,
        MessageType::Decline,
        MessageType::Ack,
        MessageType::Nak,
        MessageType::Release,
        MessageType::Inform,
    ])
}

/// A DHCP message's fields, borrowed slices kept by the test.
#[derive(Debug, Clone)]
struct DhcpFields {
    message_type: MessageType,
    xid: u32,
    secs: u16,
    broadcast: bool,
    addrs: [Ipv4Addr; 4],
    hw: [u8; 6],
    optional: [Option<Ipv4Addr>; 3],
    times: [Option<u32>; 3],
    routers: Vec<Ipv4Addr>,
    dns: Vec<Ipv4Addr>,
    client_id: Option<Vec<u8>>,
    prl: Option<Vec<u8>>,
}

fn dhcp_fields() -> impl Strategy<Value = DhcpFields> {
    (
        (message_type(), any::<u32>(), any::<u16>(), any::<bool>()),
        (prop::array::uniform4(addr()), any::<[u8; 6]>()),
        (
            prop::array::uniform3(prop::option::of(addr())),
            prop::array::uniform3(prop::option::of(any::<u32>())),
        ),
        (
            prop::collection::vec(addr(), 0..=4),
            prop::collection::vec(addr(), 0..=4),
        ),
        (
            prop::option::of(prop::collection::vec(any::<u8>(), 2..255)),
            prop::option::of(prop::collection::vec(any::<u8>(), 1..255)),
        ),
    )
        .prop_map(
            |(head, (addrs, hw), (optional, times), (routers, dns), (client_id, prl))| DhcpFields {
                message_type: head.0,
                xid: head.1,
                secs: head.2,
                broadcast: head.3,
                addrs,
                hw,
                optional,
                times,
                routers,
                dns,
                client_id,
                prl,
            },
        )
}

impl DhcpFields {
    fn repr(&self) -> dhcp::Repr<'_> {
        dhcp::Repr {
            secs: self.secs,
            broadcast: self.broadcast,
            ciaddr: self.addrs[0],
            yiaddr: self.addrs[1],
            siaddr: self.addrs[2],
            giaddr: self.addrs[3],
            server_id: self.optional[0],
            requested_ip: self.optional[1],
            subnet_mask: self.optional[2],
            lease_time: self.times[0],
            renewal_time: self.times[1],
            rebinding_time: self.times[2],
            routers: AddrList::new(&self.routers),
            dns_servers: AddrList::new(&self.dns),
            client_id: self.client_id.as_deref(),
            parameter_request_list: self.prl.as_deref(),
            ..dhcp::Repr::new(self.message_type, self.xid, ethernet::Address(self.hw))
        }
    }
}

/// A DNS label: 1 to 20 letters, digits or hyphens.
fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9-]{1,20}"
}

/// Names from a few shared suffixes, so compression has something to find.
fn name() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(label(), 0..3),
        prop::sample::select(vec!["example.test", "a.b.c", "x", "imp.example.test"]),
    )
        .prop_map(|(labels, suffix)| {
            let mut parts = labels;
            parts.push(suffix.to_string());
            parts.join(".")
        })
}

#[derive(Debug, Clone)]
enum Data {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        addr().prop_map(Data::A),
        any::<u128>().prop_map(|v| Data::Aaaa(Ipv6Addr::from_bits(v))),
        name().prop_map(Data::Cname),
    ]
}

fn same(data: &Data, parsed: &RData<'_>) -> bool {
    match (data, parsed) {
        (Data::A(a), RData::A(b)) => a == b,
        (Data::Aaaa(a), RData::Aaaa(b)) => a == b,
        (Data::Cname(a), RData::Cname(b)) => b.eq_text(a),
        _ => false,
    }
}

proptest! {
    #[test]
    fn dhcp_round_trip(fields in dhcp_fields()) {
        let repr = fields.repr();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf);
        prop_assert!(buf.len() >= dhcp::MIN_LEN);
        prop_assert_eq!(dhcp::Repr::parse(&buf), Ok(repr));
    }

    #[test]
    fn dhcp_any_bytes(mut data in prop::collection::vec(any::<u8>(), 0..600), cookie in any::<bool>()) {
        if cookie && data.len() >= dhcp::HEADER_LEN {
            data[236..240].copy_from_slice(&dhcp::MAGIC_COOKIE);
            data[1] = 1;
            data[2] = 6;
        }
        if let Ok(repr) = dhcp::Repr::parse(&data) {
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut out);
            prop_assert_eq!(dhcp::Repr::parse(&out), Ok(repr));
        }
    }

    #[test]
    fn dns_round_trip(
        id in any::<u16>(),
        truncated in any::<bool>(),
        rcode in 0u8..16,
        questions in prop::collection::vec(name(), 0..4),
        records in prop::collection::vec((name(), any::<u32>(), data()), 0..8),
    ) {
        let flags = Flags { response: true, truncated, rcode, ..Flags::default() };
        let mut buf = vec![0u8; 4096];
        let mut builder = Builder::new(&mut buf, id, flags).unwrap();
        for q in &questions {
            builder.question(q, dns::Type::A, CLASS_IN).unwrap();
        }
        for (owner, ttl, data) in &records {
            let data = match data {
                Data::A(a) => RecordData::A(*a),
                Data::Aaaa(a) => RecordData::Aaaa(*a),
                Data::Cname(c) => RecordData::Cname(c),
            };
            builder.record(Section::Answer, owner, *ttl, data).unwrap();
        }
        let len = builder.finish().len();
        // Compression: never longer than writing every name whole.
        let whole: usize = questions.iter().map(|q| q.len() + 2 + 4).sum::<usize>()
            + records.iter().map(|(o, _, d)| o.len() + 2 + 10 + match d {
                Data::A(_) => 4, Data::Aaaa(_) => 16, Data::Cname(c) => c.len() + 2 }).sum::<usize>();
        prop_assert!(len <= dns::HEADER_LEN + whole);
        let message = Message::parse(&buf[..len]).unwrap();
        prop_assert_eq!((message.id, message.flags), (id, flags));
        let parsed: Vec<_> = message.questions().collect();
        prop_assert_eq!(parsed.len(), questions.len());
        for (p, q) in parsed.iter().zip(&questions) {
            prop_assert!(p.name.eq_text(q), "{} != {}", p.name, q);
        }
        let parsed: Vec<_> = message.answers().collect();
        prop_assert_eq!(parsed.len(), records.len());
        for (p, (owner, ttl, data)) in parsed.iter().zip(&records) {
            prop_assert!(p.name.eq_text(owner));
            prop_assert_eq!(p.ttl, *ttl);
            prop_assert!(same(data, &p.data), "{:?} != {:?}", p.data, data);
        }
    }

    #[test]
    fn dns_any_bytes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(message) = Message::parse(&data) {
            for q in message.questions() {
                prop_assert!(q.name.to_string().len() < 4 * 256);
            }
            for section in [Section::Answer, Section::Authority, Section::Additional] {
                for r in message.records(section) {
                    prop_assert!(r.name.labels().count() <= 128);
                }
            }
        }
    }

    /// Pointers anywhere in a header-sized prefix: always an answer, never a hang.
    #[test]
    fn dns_pointers_terminate(tail in prop::collection::vec(prop_oneof![Just(0xc0u8), 0u8..20, any::<u8>()], 0..64)) {
        let mut data = vec![0, 1, 0, 0, 0, 3, 0, 3, 0, 0, 0, 0];
        data.extend_from_slice(&tail);
        let _ = Message::parse(&data);
    }
}
