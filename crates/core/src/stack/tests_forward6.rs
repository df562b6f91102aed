//! IPv6 through a router: host A (fd00:1::2) — router R (fd00:1::1, fd00:2::1) — host
//! B (fd00:2::2) on `Net::chain`: the access list, the forwarding counters per
//! interface by reason, Packet Too Big, and router advertisements on request.

use alloc::vec::Vec;
use core::net::{Ipv6Addr, SocketAddr, SocketAddrV6};

use impnet_wire::ipv6::{self, Cidr};

use crate::iface::IfaceId;
use crate::ipv6::AddrOrigin;
use crate::testutil::{Net, mac};
use crate::time::Duration;

const ROUTER: usize = 1;

fn addr(text: &str) -> Ipv6Addr {
    text.parse().unwrap()
}

fn sock(text: &str, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(addr(text), port, 0, 0))
}

/// Fire timers and move frames for `span`, in 100 ms steps.
fn run_for(net: &mut Net, span: Duration) {
    for _ in 0..span.as_millis() / 100 {
        net.exchange();
        net.advance(Duration::from_millis(100));
    }
    net.exchange();
}

/// `Net::chain` with IPv6: the hosts route everything through R; DAD done.
fn chain6(mtus: [usize; 2]) -> Net {
    let mut net = Net::chain(mtus);
    let now = net.now;
    let cidr = |text: &str| Cidr::new(addr(text), 64).unwrap();
    net.nodes[0].add_address6(now, IfaceId(0), cidr("fd00:1::2"));
    net.nodes[ROUTER].add_address6(now, IfaceId(0), cidr("fd00:1::1"));
    net.nodes[ROUTER].add_address6(now, IfaceId(1), cidr("fd00:2::1"));
    net.nodes[2].add_address6(now, IfaceId(0), cidr("fd00:2::2"));
    for (node, gateway) in [(0, "fd00:1::1"), (2, "fd00:2::1")] {
        net.nodes[node]
            .routes6_mut()
            .add(Cidr::DEFAULT_ROUTE, Some(addr(gateway)), IfaceId(0));
    }
    run_for(&mut net, Duration::from_secs(2));
    net.seen.clear();
    net
}

/// The (type, code) of every ICMPv6 error delivered to `node`.
fn icmpv6_errors_to(net: &Net, node: usize) -> Vec<(u8, u8)> {
    net.seen
        .iter()
        .filter(|(to, frame)| *to == node && frame.len() > 55 && frame[12..14] == [0x86, 0xdd])
        .filter(|(_, frame)| frame[14 + 6] == 58 && frame[14 + 40] < 128)
        .map(|(_, frame)| (frame[14 + 40], frame[14 + 41]))
        .collect()
}

#[test]
fn an_ipv6_access_rule_drops_and_counts_what_it_names() {
    let mut net = chain6([1500, 1500]);
    let rules = "deny proto=udp dst=fd00:2::/64 dport=9\nallow in=r0 src=fd00:1::/64";
    let acl = crate::acl::Acl::parse_lines(rules, crate::acl::Action::Deny).unwrap();
    let unresolved =
        net.nodes[ROUTER].set_acl(Some(acl), |id| Some(alloc::format!("r{}", id.index())));
    assert!(unresolved.is_empty());
    let open9 = net.nodes[2].udp_bind(sock("fd00:2::2", 9)).unwrap();
    let open10 = net.nodes[2].udp_bind(sock("fd00:2::2", 10)).unwrap();
    let sender = net.nodes[0].udp_bind(sock("fd00:1::2", 5000)).unwrap();
    for port in [9, 10] {
        net.nodes[0]
            .udp_send_to(net.now, sender, sock("fd00:2::2", port), b"hi")
            .unwrap();
    }
    net.exchange();
    let mut buf = [0u8; 8];
    assert!(
        net.nodes[2].udp_recv_from(open9, &mut buf).is_err(),
        "port 9 is denied"
    );
    let (len, from) = net.nodes[2].udp_recv_from(open10, &mut buf).unwrap();
    assert_eq!((len, from), (2, sock("fd00:1::2", 5000)));
    // RFC 4443 §3.1: Destination Unreachable, administratively prohibited.
    assert_eq!(icmpv6_errors_to(&net, 0), [(1, 1)]);
    let r = &net.nodes[ROUTER];
    let r0 = &r.iface_stats(IfaceId(0)).unwrap().forward6;
    assert_eq!((r0.denied, r0.forwarded), (1, 1));
    assert_eq!(r.stats().forward6.denied, 1);
    assert_eq!(r.stats().forward.denied, 0, "IPv4's counters are IPv4's");
    let acl = r.acl().unwrap();
    assert_eq!(acl.hits(0).unwrap().packets, 1);
    assert_eq!(acl.hits(1).unwrap().packets, 1);
    // B's answer comes in on r1: no rule allows it, the default denies it.
    let back = net.nodes[2].udp_bind(sock("fd00:2::2", 6000)).unwrap();
    net.nodes[2]
        .udp_send_to(net.now, back, sock("fd00:1::2", 5000), b"re")
        .unwrap();
    net.exchange();
    assert!(net.nodes[0].udp_recv_from(sender, &mut buf).is_err());
    let r = &net.nodes[ROUTER];
    assert_eq!(r.iface_stats(IfaceId(1)).unwrap().forward6.denied, 1);
    assert_eq!(r.acl().unwrap().default_hits().packets, 1);
}

#[test]
fn ipv6_forwarding_is_counted_per_interface_by_reason() {
    // R's link to B carries 1280 bytes.
    let mut net = chain6([1500, 1280]);
    let sink = net.nodes[2].udp_bind(sock("fd00:2::2", 9)).unwrap();
    let sender = net.nodes[0].udp_bind(sock("fd00:1::2", 5000)).unwrap();
    let send = |net: &mut Net, len: usize| {
        let data = alloc::vec![0x33u8; len];
        net.nodes[0]
            .udp_send_to(net.now, sender, sock("fd00:2::2", 9), &data)
            .unwrap();
        net.exchange();
    };
    send(&mut net, 100);
    let mut buf = [0u8; 2000];
    assert_eq!(net.nodes[2].udp_recv_from(sink, &mut buf).unwrap().0, 100);
    // 1400 bytes of UDP: too big for R's 1280-byte link. Packet Too Big with 1280;
    // A's path MTU to B drops to it.
    send(&mut net, 1400);
    assert_eq!(icmpv6_errors_to(&net, 0), [(2, 0)]);
    assert_eq!(
        net.nodes[0].path_mtu6(net.now, addr("fd00:2::2")),
        Some(1280)
    );
    // Sent again, A fragments it to the path MTU and R forwards the fragments.
    send(&mut net, 1400);
    assert_eq!(net.nodes[2].udp_recv_from(sink, &mut buf).unwrap().0, 1400);
    // No route: R has none for fd00:9::/64.
    net.nodes[0]
        .udp_send_to(net.now, sender, sock("fd00:9::1", 9), b"x")
        .unwrap();
    net.exchange();
    let f = net.nodes[ROUTER]
        .iface_stats(IfaceId(0))
        .unwrap()
        .forward6
        .clone();
    assert_eq!((f.forwarded, f.frag_needed, f.no_route), (3, 1, 1), "{f:?}");
    // One 148-byte packet (40 + 8 + 100), then two fragments carrying the 1408
    // bytes of UDP, each behind 40 + 8 bytes of IPv6 and Fragment header.
    assert_eq!(f.forwarded_bytes, 148 + 1408 + 2 * 48, "{f:?}");
    assert_eq!(net.nodes[ROUTER].stats().forward6, f);
    assert_eq!(net.nodes[ROUTER].stats().forward.forwarded, 0);
    assert_eq!(
        net.nodes[ROUTER].iface_stats(IfaceId(1)).unwrap().forward6,
        crate::stats::ForwardStats::default(),
        "counted where they arrived"
    );
}

#[test]
fn a_router_advertises_only_where_asked_and_hosts_configure_from_it() {
    let mut net = Net::chain([1500, 1500]);
    let now = net.now;
    let prefix = Cidr::new(addr("fd00:2::1"), 64).unwrap();
    net.nodes[ROUTER].add_address6(now, IfaceId(1), prefix);
    // B starts IPv6 and solicits; R forwards but was not asked to advertise.
    net.nodes[2].enable_ipv6(now, IfaceId(0));
    run_for(&mut net, Duration::from_secs(15));
    assert!(net.nodes[2].stats().ipv6.rs_sent >= 1);
    assert_eq!(net.nodes[ROUTER].stats().ipv6.ra_sent, 0);
    // Asked: advertisements come unsolicited (three at the start, at most 16 s
    // apart, then every 0.75 to 1 interval), and B forms a SLAAC address with R as
    // its default router.
    let start = net.now;
    net.nodes[ROUTER].set_router_advertisements(start, IfaceId(1), Some(Duration::from_secs(30)));
    run_for(&mut net, Duration::from_secs(1));
    assert_eq!(net.nodes[ROUTER].stats().ipv6.ra_sent, 1);
    let slaac =
        ipv6::address_from_prefix(&prefix.network(), ipv6::interface_id(mac(2, 0))).unwrap();
    let addrs = net.nodes[2].ipv6_addresses(IfaceId(0));
    let formed = addrs.iter().find(|a| a.cidr.address == slaac);
    assert_eq!(
        formed.map(|a| a.origin),
        Some(AddrOrigin::Slaac),
        "{addrs:?}"
    );
    let route = net.nodes[2].routes6().lookup(addr("2001:db8::1")).unwrap();
    assert_eq!(route.gateway, Some(ipv6::link_local_from_mac(mac(1, 1))));
    run_for(&mut net, Duration::from_secs(120));
    // 12 to 16 s apart after each of the first three, then 22.5 to 30 s: 6 or 7 in
    // 121 s.
    let sent = net.nodes[ROUTER].stats().ipv6.ra_sent;
    assert!((6..=7).contains(&sent), "{sent}");
    // Never on r0, where none was asked for; stopped on r1 when asked.
    let is_ra = |f: &[u8]| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 134;
    let on_r0 = net
        .seen
        .iter()
        .filter(|(to, f)| *to == 0 && is_ra(f))
        .count();
    assert_eq!(on_r0, 0);
    net.nodes[ROUTER].set_router_advertisements(net.now, IfaceId(1), None);
    run_for(&mut net, Duration::from_secs(60));
    assert_eq!(net.nodes[ROUTER].stats().ipv6.ra_sent, sent);
}
