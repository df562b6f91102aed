//! Forwarding through a router (RFC 1812): host A — router R — host B (`Net::chain`).

use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::icmpv4;
use impnet_wire::ipv4::{self, Protocol};

use crate::iface::IfaceId;
use crate::ip_options::{self, Hop};
use crate::testutil::{Net, mac};
use crate::time::Duration;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const R0: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const R1: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const ROUTER: usize = 1;

fn iface(index: u32) -> IfaceId {
    IfaceId(index)
}

/// An IPv4 datagram from `src` to `dst`.
fn datagram(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, dont_frag: bool, options: &[u8]) -> Vec<u8> {
    let payload = [0x5a; 64];
    let repr = ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: Protocol::Udp,
        payload_len: payload.len(),
        ttl,
        ident: 7,
        dont_frag,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options,
    };
    let mut bytes = vec![0; repr.header_len() + payload.len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut bytes[..]));
    let header_len = repr.header_len();
    bytes[header_len..].copy_from_slice(&payload);
    bytes
}

/// `ip` in an Ethernet frame from A to R (or to the broadcast address).
fn from_a(ip: &[u8], broadcast: bool) -> Vec<u8> {
    let dst = if broadcast { [0xff; 6] } else { mac(1, 0).0 };
    let mut frame = Vec::new();
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&mac(0, 0).0);
    frame.extend_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(ip);
    frame
}

/// The IPv4 packets delivered to `node`, parsed from the frames seen.
fn delivered_to(net: &Net, node: usize) -> Vec<Vec<u8>> {
    net.seen
        .iter()
        .filter(|(to, frame)| *to == node && frame[12..14] == [0x08, 0x00])
        .map(|(_, frame)| frame[14..].to_vec())
        .collect()
}

/// The ICMP messages delivered to `node`: (type, code, bytes 4..8, source).
fn icmp_to(net: &Net, node: usize) -> Vec<(u8, u8, [u8; 4], Ipv4Addr)> {
    delivered_to(net, node)
        .iter()
        .filter_map(|ip| {
            let packet = ipv4::Packet::new_checked(&ip[..]).ok()?;
            if packet.protocol() != Protocol::Icmp {
                return None;
            }
            let icmp = &ip[packet.header_len()..];
            let rest = [icmp[4], icmp[5], icmp[6], icmp[7]];
            Some((icmp[0], icmp[1], rest, packet.src_addr()))
        })
        .collect()
}

#[test]
fn a_ping_crosses_the_router_with_its_ttl_decremented() {
    let mut net = Net::chain([1500, 1500]);
    let handle = net.nodes[0].icmp_bind(9).unwrap();
    net.nodes[0]
        .icmp_send_echo(net.now, handle, B, 1, b"through")
        .unwrap();
    net.exchange();
    let mut buf = [0u8; 64];
    let reply = net.nodes[0].icmp_recv(handle, &mut buf).unwrap();
    assert_eq!(
        (reply.src, reply.seq_no, &buf[..reply.len]),
        (B.into(), 1, &b"through"[..])
    );
    assert_eq!(reply.ttl, 63, "B's 64, less R's hop");
    let stats = &net.nodes[ROUTER].stats().forward;
    assert_eq!(
        (stats.forwarded, stats.no_route, stats.ttl_exceeded),
        (2, 0, 0)
    );
    let r0 = net.nodes[ROUTER].iface_stats(iface(0)).unwrap();
    assert_eq!(
        r0.forward.forwarded, 1,
        "the request came in on R's first interface"
    );
    assert!(r0.rx_frames >= 1 && r0.tx_frames >= 1);
}

#[test]
fn a_ping_with_record_route_and_timestamp_collects_every_hop_there_and_back() {
    let mut net = Net::chain([1500, 1500]);
    let handle = net.nodes[0].icmp_bind(9).unwrap();
    let rr = ip_options::record_route(9);
    net.nodes[0]
        .icmp_send_echo_with_options(net.now, handle, B, 1, b"rr", &rr)
        .unwrap();
    net.exchange();
    let mut buf = [0u8; 8];
    let reply = net.nodes[0].icmp_recv(handle, &mut buf).unwrap();
    let hops = reply.options.hops().0;
    // R towards B, B itself, R towards A (as `ping -R` shows them).
    assert_eq!(hops, [Hop::Route(R1), Hop::Route(B), Hop::Route(R0)]);
    let ts = ip_options::timestamp(ip_options::TimestampKind::WithAddress);
    net.now += Duration::from_millis(5);
    net.nodes[0]
        .icmp_send_echo_with_options(net.now, handle, B, 2, b"ts", &ts)
        .unwrap();
    net.exchange();
    let reply = net.nodes[0].icmp_recv(handle, &mut buf).unwrap();
    let stamp = 5 | 0x8000_0000;
    let expected = [R1, B, R0].map(|hop| Hop::Stamp(Some(hop), stamp));
    assert_eq!(reply.options.hops(), (expected.to_vec(), 0));
    // Options that do not fit are refused.
    assert_eq!(
        net.nodes[0].icmp_send_echo_with_options(net.now, handle, B, 3, b"", &[1, 1, 1]),
        Err(crate::icmp::IcmpError::MessageTooLong)
    );
}

#[test]
fn a_host_does_not_forward_unless_told() {
    let mut net = Net::chain([1500, 1500]);
    net.nodes[ROUTER].set_forwarding(iface(0), false);
    assert!(!net.nodes[ROUTER].forwarding(iface(0)));
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, B, 64, false, &[]), false),
    );
    net.exchange();
    assert!(delivered_to(&net, 2).is_empty());
    assert_eq!(net.nodes[ROUTER].stats().ipv4.rx_not_for_us, 1);
    assert_eq!(net.nodes[ROUTER].stats().forward.forwarded, 0);
}

#[test]
fn ttl_one_draws_time_exceeded_from_the_router() {
    let mut net = Net::chain([1500, 1500]);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, B, 1, false, &[]), false),
    );
    net.exchange();
    assert!(delivered_to(&net, 2).is_empty());
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].0, errors[0].1, errors[0].3), (11, 0, R0));
    assert_eq!(net.nodes[ROUTER].stats().forward.ttl_exceeded, 1);
}

#[test]
fn no_route_draws_net_unreachable() {
    let mut net = Net::chain([1500, 1500]);
    let far = Ipv4Addr::new(192, 0, 2, 1);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, far, 64, false, &[]), false),
    );
    net.exchange();
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].0, errors[0].1), (3, 0));
    assert_eq!(net.nodes[ROUTER].stats().forward.no_route, 1);
}

#[test]
fn too_big_with_df_draws_fragmentation_needed_with_the_next_hop_mtu() {
    let mut net = Net::chain([1500, 576]);
    let handle = net.nodes[0].udp_bind(SocketAddrV4::new(A, 5000)).unwrap();
    net.nodes[0].udp_set_dont_fragment(handle, true).unwrap();
    net.nodes[0]
        .udp_send_to(net.now, handle, SocketAddrV4::new(B, 9), &[1; 1000])
        .unwrap();
    net.exchange();
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].0, errors[0].1), (3, 4));
    assert_eq!(u16::from_be_bytes([errors[0].2[2], errors[0].2[3]]), 576);
    assert_eq!(net.nodes[ROUTER].stats().forward.frag_needed, 1);
    assert!(delivered_to(&net, 2).is_empty());
}

#[test]
fn too_big_without_df_is_fragmented_and_arrives_whole() {
    let mut net = Net::chain([1500, 576]);
    let receiver = net.nodes[2].udp_bind(SocketAddrV4::new(B, 9)).unwrap();
    let sender = net.nodes[0].udp_bind(SocketAddrV4::new(A, 5000)).unwrap();
    let data: Vec<u8> = (0..1400u32).map(|i| (i * 7) as u8).collect();
    net.nodes[0]
        .udp_send_to(net.now, sender, SocketAddrV4::new(B, 9), &data)
        .unwrap();
    net.exchange();
    let fragments = delivered_to(&net, 2);
    assert!(fragments.len() >= 3, "1428 bytes of IP over a 576 MTU");
    for fragment in &fragments {
        assert!(fragment.len() <= 576);
        assert!(
            ipv4::Packet::new_checked(&fragment[..])
                .unwrap()
                .verify_checksum()
        );
    }
    let mut buf = [0u8; 2000];
    let (len, from) = net.nodes[2].udp_recv_from(receiver, &mut buf).unwrap();
    assert_eq!(
        (&buf[..len], from),
        (
            &data[..],
            std::net::SocketAddr::from(SocketAddrV4::new(A, 5000))
        )
    );
    assert_eq!(net.nodes[ROUTER].stats().forward.fragmented, 1);
}

#[test]
fn martians_and_link_broadcasts_are_not_forwarded_and_draw_no_error() {
    let mut net = Net::chain([1500, 1500]);
    let cases = [
        (Ipv4Addr::new(127, 0, 0, 1), B, false),
        (A, Ipv4Addr::new(169, 254, 1, 1), false),
        (Ipv4Addr::new(0, 1, 2, 3), B, false),
        (A, Ipv4Addr::new(240, 0, 0, 1), false),
        (A, B, true),
    ];
    for (src, dst, broadcast) in cases {
        net.inject(
            ROUTER,
            iface(0),
            &from_a(&datagram(src, dst, 64, false, &[]), broadcast),
        );
    }
    net.exchange();
    assert!(delivered_to(&net, 2).is_empty());
    assert!(icmp_to(&net, 0).is_empty());
    let stats = &net.nodes[ROUTER].stats().forward;
    assert_eq!((stats.martian, stats.broadcast, stats.forwarded), (4, 1, 0));
    // The directed broadcast of B's network is not forwarded either (RFC 2644).
    let directed = Ipv4Addr::new(10, 0, 2, 255);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, directed, 64, false, &[]), false),
    );
    net.exchange();
    assert_eq!(net.nodes[ROUTER].stats().forward.broadcast, 2);
}

#[test]
fn no_icmp_error_about_an_icmp_error() {
    let mut net = Net::chain([1500, 1500]);
    // A Time Exceeded message from A that itself has TTL 1.
    let mut ip = datagram(A, B, 1, false, &[]);
    ip[9] = 1; // protocol ICMP
    ip[20] = 11; // type: time exceeded
    let mut packet = ipv4::Packet::new_unchecked(&mut ip[..]);
    packet.fill_checksum();
    net.inject(ROUTER, iface(0), &from_a(&ip, false));
    net.exchange();
    assert!(icmp_to(&net, 0).is_empty());
    assert_eq!(net.nodes[ROUTER].stats().forward.ttl_exceeded, 1);
}

#[test]
fn the_router_records_its_route_and_timestamp_in_the_options() {
    let mut net = Net::chain([1500, 1500]);
    let mut options = ip_options::record_route(3);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, B, 64, false, &options), false),
    );
    options = ip_options::timestamp(ip_options::TimestampKind::WithAddress);
    net.now += Duration::from_millis(1234);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, B, 64, false, &options), false),
    );
    net.exchange();
    let arrived = delivered_to(&net, 2);
    assert_eq!(arrived.len(), 2);
    let first = ipv4::Packet::new_checked(&arrived[0][..]).unwrap();
    assert!(first.verify_checksum());
    assert_eq!(ip_options::read(first.options()).0, [Hop::Route(R1)]);
    let second = ipv4::Packet::new_checked(&arrived[1][..]).unwrap();
    assert!(second.verify_checksum());
    // No UT clock configured: milliseconds of the stack's clock, high bit set.
    let stamp = 1234 | 0x8000_0000;
    assert_eq!(
        ip_options::read(second.options()).0,
        [Hop::Stamp(Some(R1), stamp)]
    );
}

#[test]
fn a_malformed_option_draws_parameter_problem_pointing_at_it() {
    let mut net = Net::chain([1500, 1500]);
    // Record Route whose pointer (byte 22 of the header) is below its minimum.
    let options = [ip_options::RECORD_ROUTE, 7, 1, 0, 0, 0, 0, 0];
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, B, 64, false, &options), false),
    );
    net.exchange();
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].0, errors[0].2[0]), (12, 22));
    assert_eq!(net.nodes[ROUTER].stats().forward.bad_option, 1);
    assert!(delivered_to(&net, 2).is_empty());
}

#[test]
fn a_next_hop_that_never_answers_arp_draws_host_unreachable() {
    let mut net = Net::chain([1500, 1500]);
    let nobody = Ipv4Addr::new(10, 0, 2, 99);
    net.inject(
        ROUTER,
        iface(0),
        &from_a(&datagram(A, nobody, 64, false, &[]), false),
    );
    for _ in 0..10 {
        net.exchange();
        net.advance(Duration::from_secs(1));
    }
    net.exchange();
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].0, errors[0].1), (3, 1));
    assert_eq!(net.nodes[ROUTER].stats().forward.egress_dropped, 1);
}

#[test]
fn icmp_errors_quote_the_datagram_as_it_arrived() {
    let mut net = Net::chain([1500, 1500]);
    let ip = datagram(A, B, 1, false, &[]);
    net.inject(ROUTER, iface(0), &from_a(&ip, false));
    net.exchange();
    let message = delivered_to(&net, 0).pop().unwrap();
    let icmp = &message[20..];
    assert!(icmpv4::Packet::new_checked(icmp).unwrap().verify_checksum());
    assert_eq!(&icmp[8..], &ip[..28], "header and 8 bytes of the datagram");
}

mod tcp {
    use super::*;
    use crate::route::Route;
    use crate::tcp::{TcpError, TcpHandle};
    use crate::testutil::v4;
    use impnet_wire::ipv4::Cidr;

    /// A connection from A to B port 80 through R, established; B's end accepted.
    fn connected(net: &mut Net) -> (TcpHandle, TcpHandle) {
        let listener = net.nodes[2]
            .tcp_listen(SocketAddrV4::new(B, 80), 8)
            .unwrap();
        let client = net.nodes[0]
            .tcp_connect(net.now, SocketAddrV4::new(A, 0), SocketAddrV4::new(B, 80))
            .unwrap();
        net.exchange();
        let server = net.nodes[2].tcp_accept(listener).unwrap();
        (client, server)
    }

    /// Send `data` from A to B, reading at B until it is all there (timers run, so
    /// losses are repaired); returns what B read.
    fn transfer(net: &mut Net, client: TcpHandle, server: TcpHandle, data: &[u8]) -> Vec<u8> {
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..2000 {
            if sent < data.len() {
                sent += net.nodes[0]
                    .tcp_send(net.now, client, &data[sent..])
                    .unwrap_or(0);
            }
            net.exchange();
            while let Ok(n) = net.nodes[2].tcp_recv(net.now, server, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if got.len() == data.len() {
                break;
            }
            net.advance(Duration::from_millis(10));
        }
        got
    }

    /// The router's route to B's network carries only `mtu`.
    fn narrow(net: &mut Net, mtu: usize) {
        net.nodes[ROUTER].routes_mut().insert(Route {
            cidr: Cidr {
                address: Ipv4Addr::new(10, 0, 2, 0),
                prefix_len: 24,
            },
            gateway: None,
            iface: iface(1),
            mtu: Some(mtu),
        });
    }

    #[test]
    fn path_mtu_discovery_shrinks_segments_and_the_stream_arrives_whole() {
        let mut net = Net::chain([1500, 1500]);
        narrow(&mut net, 1280);
        let (client, server) = connected(&mut net);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let got = transfer(&mut net, client, server, &data);
        assert!(
            got == data,
            "{} of {} bytes, or corrupted",
            got.len(),
            data.len()
        );
        let info = net.nodes[0].tcp_info(client).unwrap();
        assert_eq!(info.path_mtu, Some(1280));
        assert!(usize::from(info.snd_mss) <= 1280 - 40);
        assert!(net.nodes[ROUTER].stats().forward.frag_needed >= 1);
        assert_eq!(net.nodes[0].tcp_stats().path_mtu_drops, 1);
        // Nothing bigger than the narrow link reached B.
        assert!(delivered_to(&net, 2).iter().all(|ip| ip.len() <= 1280));
    }

    #[test]
    fn a_black_hole_is_found_without_icmp_and_the_stream_arrives_whole() {
        let mut net = Net::chain([1500, 1500]);
        narrow(&mut net, 1000);
        let (client, server) = connected(&mut net);
        let data: Vec<u8> = (0..60_000u32).map(|i| (i % 253) as u8).collect();
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..3000 {
            if sent < data.len() {
                sent += net.nodes[0]
                    .tcp_send(net.now, client, &data[sent..])
                    .unwrap_or(0);
            }
            // A firewall drops every ICMP message the router sends towards A.
            net.exchange_filtered(|from, frame| !(from == ROUTER && frame[23] == 1));
            while let Ok(n) = net.nodes[2].tcp_recv(net.now, server, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if got.len() == data.len() {
                break;
            }
            net.advance(Duration::from_millis(50));
        }
        assert!(
            got == data,
            "{} of {} bytes, or corrupted",
            got.len(),
            data.len()
        );
        let stats = net.nodes[0].tcp_stats();
        assert_eq!(stats.path_mtu_drops, 0, "no ICMP got through");
        assert!(stats.black_holes >= 1);
        assert!(net.nodes[0].tcp_info(client).unwrap().snd_mss <= 1000 - 40);
    }

    #[test]
    fn an_icmp_error_quoting_a_sequence_number_not_in_flight_is_ignored() {
        let mut net = Net::chain([1500, 1500]);
        let (client, _server) = connected(&mut net);
        let (local, remote) = net.nodes[0].tcp_addresses(client).unwrap();
        let stale = {
            let iss_guess = 12345u32;
            forged_icmp(local, remote, iss_guess, 3, 4, 600)
        };
        net.inject(0, iface(0), &stale);
        assert_eq!(net.nodes[0].tcp_stats().icmp_ignored, 1);
        assert_eq!(net.nodes[0].tcp_info(client).unwrap().path_mtu, None);
    }

    /// An ICMP error from R to A about a TCP segment local -> remote with `seq`.
    fn forged_icmp(
        local: core::net::SocketAddr,
        remote: core::net::SocketAddr,
        seq: u32,
        kind: u8,
        code: u8,
        mtu: u16,
    ) -> Vec<u8> {
        let (local, remote) = (v4(local), v4(remote));
        let mut quote = datagram(*local.ip(), *remote.ip(), 64, true, &[]);
        quote[9] = 6;
        quote[20..22].copy_from_slice(&local.port().to_be_bytes());
        quote[22..24].copy_from_slice(&remote.port().to_be_bytes());
        quote[24..28].copy_from_slice(&seq.to_be_bytes());
        quote.truncate(28);
        let mut icmp = vec![kind, code, 0, 0, 0, 0];
        icmp.extend_from_slice(&mtu.to_be_bytes());
        icmp.extend_from_slice(&quote);
        let sum = !impnet_wire::checksum::finish(impnet_wire::checksum::data(&icmp));
        icmp[2..4].copy_from_slice(&(!sum).to_be_bytes());
        let mut ip = datagram(R0, A, 64, false, &[]);
        ip.truncate(20);
        ip[9] = 1;
        ip.extend_from_slice(&icmp);
        let total = ip.len() as u16;
        let mut packet = ipv4::Packet::new_unchecked(&mut ip[..]);
        packet.set_total_len(total);
        packet.fill_checksum();
        let mut frame = Vec::new();
        frame.extend_from_slice(&mac(0, 0).0);
        frame.extend_from_slice(&mac(1, 0).0);
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&ip);
        frame
    }

    /// The sequence number of A's SYN, as R received it.
    fn syn_of(net: &Net) -> u32 {
        let (_, frame) = net
            .seen
            .iter()
            .find(|(to, f)| *to == ROUTER && f.len() > 54 && f[23] == 6 && f[47] & 0x02 != 0)
            .expect("A's SYN reached R");
        u32::from_be_bytes([frame[38], frame[39], frame[40], frame[41]])
    }

    #[test]
    fn a_hard_icmp_error_ends_a_connect_at_once_with_its_reason() {
        let mut net = Net::chain([1500, 1500]);
        let client = net.nodes[0]
            .tcp_connect(net.now, SocketAddrV4::new(A, 0), SocketAddrV4::new(B, 81))
            .unwrap();
        // R sees the SYN; B never gets it.
        net.exchange_filtered(|from, frame| from != ROUTER || frame[..6] != mac(2, 0).0);
        let seq = syn_of(&net);
        let (local, remote) = net.nodes[0].tcp_addresses(client).unwrap();
        // Wrong sequence number: ignored.
        net.inject(
            0,
            iface(0),
            &forged_icmp(local, remote, seq.wrapping_add(1), 3, 13, 0),
        );
        let mut buf = [0u8; 8];
        assert_eq!(
            net.nodes[0].tcp_recv(net.now, client, &mut buf),
            Err(TcpError::WouldBlock)
        );
        // Administratively prohibited, quoting the SYN: the connect ends.
        net.inject(0, iface(0), &forged_icmp(local, remote, seq, 3, 13, 0));
        assert_eq!(
            net.nodes[0].tcp_recv(net.now, client, &mut buf),
            Err(TcpError::Prohibited)
        );
    }

    #[test]
    fn a_soft_error_is_shown_and_reported_when_the_connect_times_out() {
        let mut net = Net::chain([1500, 1500]);
        let far = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 80);
        let client = net.nodes[0]
            .tcp_connect(net.now, SocketAddrV4::new(A, 0), far)
            .unwrap();
        net.exchange();
        let info = net.nodes[0].tcp_info(client).unwrap();
        assert_eq!(info.soft_error, Some(TcpError::NetUnreachable));
        let mut buf = [0u8; 8];
        let mut result = Err(TcpError::WouldBlock);
        for _ in 0..600 {
            net.advance(Duration::from_secs(1));
            net.exchange();
            result = net.nodes[0].tcp_recv(net.now, client, &mut buf);
            if result != Err(TcpError::WouldBlock) {
                break;
            }
        }
        assert_eq!(result, Err(TcpError::NetUnreachable));
    }

    #[test]
    fn arp_giving_up_fails_a_connect_to_that_neighbour_at_once() {
        let mut net = Net::chain([1500, 1500]);
        let nobody = SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 99), 80);
        let client = net.nodes[0]
            .tcp_connect(net.now, SocketAddrV4::new(A, 0), nobody)
            .unwrap();
        let mut buf = [0u8; 8];
        let mut waited = 0;
        while net.nodes[0].tcp_recv(net.now, client, &mut buf) == Err(TcpError::WouldBlock) {
            net.exchange();
            net.advance(Duration::from_millis(100));
            waited += 1;
            assert!(waited < 600, "still connecting after a minute");
        }
        assert_eq!(
            net.nodes[0].tcp_recv(net.now, client, &mut buf),
            Err(TcpError::HostUnreachable)
        );
        let syn_retries_end = net.nodes[0].tcp_stats().timed_out;
        assert_eq!(syn_retries_end, 0, "ended by ARP, not by the SYN retries");
    }
}

#[test]
fn an_access_rule_blocks_exactly_what_it_names() {
    let mut net = Net::chain([1500, 1500]);
    let rules = "deny proto=udp dst=10.0.2.0/24 dport=9\nallow in=r0 src=10.0.1.0/24";
    let acl = crate::acl::Acl::parse_lines(rules, crate::acl::Action::Deny).unwrap();
    let unresolved =
        net.nodes[ROUTER].set_acl(Some(acl), |id| Some(alloc::format!("r{}", id.index())));
    assert!(unresolved.is_empty());
    let open9 = net.nodes[2].udp_bind(SocketAddrV4::new(B, 9)).unwrap();
    let open10 = net.nodes[2].udp_bind(SocketAddrV4::new(B, 10)).unwrap();
    let sender = net.nodes[0].udp_bind(SocketAddrV4::new(A, 5000)).unwrap();
    for port in [9, 10] {
        net.nodes[0]
            .udp_send_to(net.now, sender, SocketAddrV4::new(B, port), b"hi")
            .unwrap();
    }
    net.exchange();
    let mut buf = [0u8; 8];
    assert!(
        net.nodes[2].udp_recv_from(open9, &mut buf).is_err(),
        "port 9 is denied"
    );
    assert_eq!(net.nodes[2].udp_recv_from(open10, &mut buf).unwrap().0, 2);
    // The sender hears why (communication administratively prohibited).
    let errors = icmp_to(&net, 0);
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].0, errors[0].1), (3, 13));
    // B's answer to A comes in on r1: no rule allows it, the default denies.
    let handle = net.nodes[2].icmp_bind(3).unwrap();
    net.nodes[2]
        .icmp_send_echo(net.now, handle, A, 1, b"x")
        .unwrap();
    net.exchange();
    assert!(net.nodes[2].icmp_recv(handle, &mut buf).is_err());
    let acl = net.nodes[ROUTER].acl().unwrap();
    assert_eq!(acl.hits(0).unwrap().packets, 1);
    assert_eq!(acl.hits(1).unwrap().packets, 1);
    assert_eq!(acl.default_hits().packets, 1);
    assert_eq!(net.nodes[ROUTER].stats().forward.denied, 2);
}

#[test]
fn every_route_counts_what_it_forwarded() {
    let mut net = Net::chain([1500, 1500]);
    let handle = net.nodes[0].icmp_bind(9).unwrap();
    for seq in 0..3 {
        net.nodes[0]
            .icmp_send_echo(net.now, handle, B, seq, b"count me")
            .unwrap();
    }
    net.exchange();
    let routes = net.nodes[ROUTER].routes();
    let (to_b, _) = routes.lookup_index(B).unwrap();
    let (to_a, _) = routes.lookup_index(A).unwrap();
    let counters = routes.counters(to_b).unwrap();
    assert_eq!(counters.packets, 3);
    assert_eq!(counters.bytes, 3 * (20 + 8 + 8));
    assert_eq!(routes.counters(to_a).unwrap().packets, 3, "the replies");
}
