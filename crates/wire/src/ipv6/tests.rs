use super::*;
extern crate std;

/// `ping -6 -s 4 2001:db8::b` from `2001:db8::a`, as captured (flow label 0x987d3).
const ECHO_REQUEST: &[u8] = include_bytes!("../../tests/data/echo_request.bin");

fn addr(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn parse_captured_echo_request() {
    let packet = Packet::new_checked(ECHO_REQUEST).unwrap();
    assert_eq!(packet.version(), 6);
    assert_eq!(packet.flow_label(), 0x987d3);
    assert_eq!(packet.payload().len(), 12);
    let repr = Repr::parse(&packet).unwrap();
    assert_eq!(
        repr,
        Repr {
            src_addr: addr("2001:db8::a"),
            dst_addr: addr("2001:db8::b"),
            next_header: NextHeader::Icmpv6,
            payload_len: 12,
            hop_limit: 64,
            dscp: 0,
            ecn: 0,
            flow_label: 0x987d3,
        }
    );
    assert_eq!(
        std::format!("{repr}"),
        "IPv6 2001:db8::a > 2001:db8::b ICMPv6 len 12 hlim 64 flow 0x987d3"
    );
    let mut out = ECHO_REQUEST.to_vec();
    out[..HEADER_LEN].fill(0xaa);
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, ECHO_REQUEST);
}

#[test]
fn traffic_class_and_setters() {
    let mut buf = [0u8; 48];
    let repr = Repr {
        src_addr: addr("fe80::1"),
        dst_addr: addr("ff02::1"),
        next_header: NextHeader::Udp,
        payload_len: 8,
        hop_limit: 1,
        dscp: 46,
        ecn: 3,
        flow_label: 0xfffff,
    };
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    // Version 6, traffic class 0xbb (EF, CE), flow label all ones.
    assert_eq!(&buf[..4], &[0x6b, 0xbf, 0xff, 0xff]);
    let mut packet = Packet::new_checked(&mut buf[..]).unwrap();
    assert_eq!((packet.dscp(), packet.ecn()), (46, 3));
    packet.set_ecn(1);
    assert_eq!(
        (packet.dscp(), packet.ecn(), packet.flow_label()),
        (46, 1, 0xfffff)
    );
    packet.set_dscp(0);
    packet.set_flow_label(0x12345);
    packet.set_hop_limit(255);
    assert_eq!(packet.traffic_class(), 1);
    assert_eq!(packet.version(), 6);
    let repr = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
    assert_eq!(
        (repr.dscp, repr.ecn, repr.flow_label, repr.hop_limit),
        (0, 1, 0x12345, 255)
    );
    // Out-of-range fields are cut to their widths, not spilled into neighbours.
    let wide = Repr {
        dscp: 0xff,
        ecn: 0xff,
        flow_label: u32::MAX,
        ..repr
    };
    wide.emit(&mut Packet::new_unchecked(&mut buf[..]));
    assert_eq!(&buf[..4], &[0x6f, 0xff, 0xff, 0xff]);
}

#[test]
fn errors() {
    let check = |bytes: &[u8]| Packet::new_checked(bytes).map(|_| ()).unwrap_err();
    assert_eq!(
        check(&ECHO_REQUEST[..39]),
        Error::Truncated { need: 40, have: 39 }
    );
    let mut bad = ECHO_REQUEST.to_vec();
    bad[0] = 0x45;
    assert_eq!(check(&bad), Error::BadVersion(4));
    // Payload length one past the buffer.
    assert_eq!(check(&ECHO_REQUEST[..51]), Error::BadLength(12));
    // Link padding after the payload is allowed and not part of the payload.
    let mut padded = ECHO_REQUEST.to_vec();
    padded.extend_from_slice(&[0; 8]);
    let packet = Packet::new_checked(&padded[..]).unwrap();
    assert_eq!(packet.payload(), &ECHO_REQUEST[40..]);
    assert_eq!(packet.packet(), ECHO_REQUEST);
}

#[test]
fn next_header_numbers() {
    for n in 0..=255u8 {
        assert_eq!(u8::from(NextHeader::from(n)), n);
    }
    assert!(NextHeader::from(protocol::FRAGMENT).is_extension());
    assert!(!NextHeader::Icmpv6.is_extension());
    assert_eq!(NextHeader::from(58), NextHeader::Icmpv6);
}

#[test]
fn addresses_seen_on_the_wire() {
    let mac_a = ethernet::Address([2, 0, 0, 0, 0, 0x0a]);
    // The kernel's link-local address for 02:00:00:00:00:0a.
    assert_eq!(link_local_from_mac(mac_a), addr("fe80::ff:fe00:a"));
    assert_eq!(interface_id(mac_a), [0, 0, 0, 0xff, 0xfe, 0, 0, 0x0a]);
    // DAD for 2001:db8::a went to ff02::1:ff00:a at 33:33:ff:00:00:0a.
    let group = solicited_node(addr("2001:db8::a"));
    assert_eq!(group, addr("ff02::1:ff00:a"));
    assert_eq!(
        multicast_mac(group),
        ethernet::Address([0x33, 0x33, 0xff, 0, 0, 0x0a])
    );
    assert_eq!(
        solicited_node(addr("2001:db8:1:0:2cba:71ff:fec5:7c24")),
        addr("ff02::1:ffc5:7c24")
    );
    // SLAAC from the advertised 2001:db8:1::/64 formed 2001:db8:1::ff:fe00:a.
    let prefix: Cidr = "2001:db8:1::/64".parse().unwrap();
    assert_eq!(
        address_from_prefix(&prefix, interface_id(mac_a)),
        Ok(addr("2001:db8:1::ff:fe00:a"))
    );
    // Host bits of the prefix do not leak into the address.
    let dirty = Cidr::new(addr("2001:db8:1::ffff"), 64).unwrap();
    assert_eq!(
        address_from_prefix(&dirty, interface_id(mac_a)),
        Ok(addr("2001:db8:1::ff:fe00:a"))
    );
    let short = Cidr::new(addr("2001:db8::"), 48).unwrap();
    assert_eq!(
        address_from_prefix(&short, [0; 8]),
        Err(Error::BadField("prefix_len"))
    );
}

#[test]
fn cidr() {
    let c: Cidr = "2001:db8:1:2::a/64".parse().unwrap();
    assert_eq!(c.netmask(), addr("ffff:ffff:ffff:ffff::"));
    assert_eq!(c.network().address, addr("2001:db8:1:2::"));
    assert!(c.contains(addr("2001:db8:1:2:ffff::1")));
    assert!(!c.contains(addr("2001:db8:1:3::1")));
    assert_eq!(std::format!("{c}"), "2001:db8:1:2::a/64");
    assert!(Cidr::DEFAULT_ROUTE.contains(addr("ff02::1")));
    assert_eq!(Cidr::DEFAULT_ROUTE.netmask(), Ipv6Addr::UNSPECIFIED);
    assert!(Cidr::LINK_LOCAL.contains(addr("fe80::ff:fe00:a")));
    assert!(!Cidr::LINK_LOCAL.contains(addr("fe80:1::1")));
    let host = Cidr::new(addr("2001:db8::1"), 128).unwrap();
    assert!(host.contains(addr("2001:db8::1")));
    assert!(!host.contains(addr("2001:db8::2")));
    assert!(c.contains_cidr(&"2001:db8:1:2:8000::/65".parse().unwrap()));
    assert!(!c.contains_cidr(&"2001:db8:1::/48".parse().unwrap()));
    assert_eq!(
        Cidr::new(Ipv6Addr::UNSPECIFIED, 129),
        Err(Error::BadField("prefix_len"))
    );
    for bad in [
        "2001:db8::",
        "2001:db8::/129",
        "2001:db8::/+8",
        "::/",
        "x/8",
        "10.0.0.0/8",
    ] {
        assert!(bad.parse::<Cidr>().is_err(), "{bad}");
    }
    let odd = Cidr {
        address: Ipv6Addr::UNSPECIFIED,
        prefix_len: 200,
    };
    assert_eq!(odd.netmask(), Ipv6Addr::from_bits(u128::MAX));
}

#[test]
fn quoted_packet_may_be_cut() {
    // The Packet Too Big quotes 1232 of the 1448 bytes of the echo request it refuses.
    let error: &[u8] = include_bytes!("../../tests/data/packet_too_big.bin");
    let quoted = &error[48..];
    assert!(Packet::new_checked(quoted).is_err());
    let (repr, payload) = Repr::parse_quoted(quoted).unwrap();
    assert_eq!(repr.src_addr, addr("2001:db8::a"));
    assert_eq!(repr.dst_addr, addr("2001:db8:2::b"));
    assert_eq!(repr.next_header, NextHeader::Icmpv6);
    assert_eq!(repr.payload_len, 1408);
    assert_eq!(payload.len(), 1232 - 40);
    // The echo request's header is there to match against a socket.
    assert_eq!(&payload[..2], &[128, 0]);
    // A whole packet gives its payload, no more (padding excluded).
    let mut padded = ECHO_REQUEST.to_vec();
    padded.push(0);
    let (_, payload) = Repr::parse_quoted(&padded).unwrap();
    assert_eq!(payload, &ECHO_REQUEST[40..]);
    assert_eq!(
        Repr::parse_quoted(&quoted[..39]),
        Err(Error::Truncated { need: 40, have: 39 })
    );
    assert_eq!(Repr::parse_quoted(&[0x45; 40]), Err(Error::BadVersion(4)));
}
