//! DHCP on the stack: a scripted server on the wire, in virtual time. The client's
//! messages leave from 0.0.0.0:68 before there is an address; the lease configures
//! address, default route and DNS servers; renewal goes unicast; the lease's end tears
//! it all down.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::dhcp::{self, AddrList, MessageType};
use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4::{self, Cidr, Protocol};
use impnet_wire::udp;

use crate::dhcp::DhcpEvent;
use crate::iface::{IfaceConfig, IfaceId};
use crate::stack::{Event, Stack, StackConfig};
use crate::testutil::{drain, secret};
use crate::time::Instant;

const CLIENT_MAC: ethernet::Address = ethernet::Address([2, 0, 0, 0, 0, 0x0c]);
const SERVER_MAC: ethernet::Address = ethernet::Address([2, 0, 0, 0, 0, 0x05]);
const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 1);
const GIVEN: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 20);

fn secs(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000_000)
}

/// What a captured frame carried, if it was a DHCP client message.
struct Captured {
    eth_dst: ethernet::Address,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    message: dhcp::Repr<'static>,
}

fn dhcp_frames(frames: Vec<Vec<u8>>) -> Vec<Captured> {
    let mut out = Vec::new();
    for frame in frames {
        let frame: &'static [u8] = Vec::leak(frame);
        let eth = ethernet::Frame::new_checked(frame).unwrap();
        if eth.ethertype() != EtherType::Ipv4 {
            continue;
        }
        let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
        let ip = ipv4::Repr::parse(&ip, true).unwrap();
        assert_eq!(ip.protocol, Protocol::Udp);
        let datagram = udp::Packet::new_checked(&frame[34..]).unwrap();
        let u = udp::Repr::parse(&datagram, &ip.src_addr, &ip.dst_addr, true).unwrap();
        assert_eq!((u.src_port, u.dst_port), (68, 67));
        out.push(Captured {
            eth_dst: eth.dst_addr(),
            src: ip.src_addr,
            dst: ip.dst_addr,
            message: dhcp::Repr::parse(u.payload).unwrap(),
        });
    }
    out
}

/// The server's `kind` reply to `request` as a frame broadcast on the link.
fn server_frame(kind: MessageType, request: &dhcp::Repr<'_>, lease: u32) -> Vec<u8> {
    let mut reply = dhcp::Repr::new(kind, request.xid, request.client_hw);
    reply.server_id = Some(SERVER);
    if kind != MessageType::Nak {
        reply.yiaddr = GIVEN;
        reply.lease_time = Some(lease);
        reply.subnet_mask = Some(Ipv4Addr::new(255, 255, 255, 0));
        reply.routers = AddrList::new(&[SERVER]);
        reply.dns_servers = AddrList::new(&[SERVER]);
    }
    let mut payload = vec![0u8; reply.buffer_len()];
    reply.emit(&mut payload);
    let u = udp::Repr {
        src_port: 67,
        dst_port: 68,
        payload: &payload,
    };
    let dst = Ipv4Addr::BROADCAST;
    let ip = ipv4::Repr {
        src_addr: SERVER,
        dst_addr: dst,
        protocol: Protocol::Udp,
        payload_len: u.buffer_len(),
        ttl: 64,
        ident: 1,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut frame = vec![0u8; 14 + ip.buffer_len() + u.buffer_len()];
    let eth = ethernet::Repr {
        src: SERVER_MAC,
        dst: ethernet::Address::BROADCAST,
        ethertype: EtherType::Ipv4,
        vlan: None,
    };
    eth.emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    ip.emit(&mut ipv4::Packet::new_unchecked(&mut frame[14..]));
    u.emit(
        &mut udp::Packet::new_unchecked(&mut frame[34..]),
        &SERVER,
        &dst,
    );
    frame
}

/// The server's ARP reply to the client's leased address.
fn arp_reply() -> Vec<u8> {
    let arp = impnet_wire::arp::Repr {
        operation: impnet_wire::arp::Operation::Reply,
        source_hardware_addr: SERVER_MAC,
        source_protocol_addr: SERVER,
        target_hardware_addr: CLIENT_MAC,
        target_protocol_addr: GIVEN,
    };
    let mut frame = vec![0u8; 14 + arp.buffer_len()];
    let eth = ethernet::Repr {
        src: SERVER_MAC,
        dst: CLIENT_MAC,
        ethertype: EtherType::Arp,
        vlan: None,
    };
    eth.emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    arp.emit(&mut impnet_wire::arp::Packet::new_unchecked(
        &mut frame[14..],
    ));
    frame
}

fn stack() -> (Stack, IfaceId) {
    let mut stack = Stack::new(StackConfig::default(), secret(11));
    let iface = stack.add_interface(IfaceConfig::new(CLIENT_MAC, 1500));
    (stack, iface)
}

fn dhcp_events(stack: &mut Stack) -> Vec<DhcpEvent> {
    let mut out = Vec::new();
    while let Some(event) = stack.poll_event() {
        if let Event::Dhcp { event, .. } = event {
            out.push(event);
        }
    }
    out
}

/// A stack bound to GIVEN at time 0 with a `lease`-second lease.
fn bound(lease: u32) -> (Stack, IfaceId) {
    let (mut stack, iface) = stack();
    let now = secs(0);
    stack.dhcp_start(now, iface).unwrap();
    let discover = dhcp_frames(drain(&mut stack, now)).remove(0).message;
    stack.handle_frame(
        now,
        iface,
        &server_frame(MessageType::Offer, &discover, lease),
    );
    let request = dhcp_frames(drain(&mut stack, now)).remove(0).message;
    stack.handle_frame(now, iface, &server_frame(MessageType::Ack, &request, lease));
    (stack, iface)
}

#[test]
fn lease_configures_address_route_and_dns() {
    let (mut stack, iface) = stack();
    let now = secs(0);
    stack.dhcp_start(now, iface).unwrap();
    assert_eq!(
        stack.dhcp_start(now, iface),
        Err(crate::dhcp::DhcpError::AlreadyRunning)
    );
    let sent = dhcp_frames(drain(&mut stack, now));
    assert_eq!(sent.len(), 1);
    let discover = &sent[0];
    // RFC 2131 §4.1: from 0.0.0.0 to the limited broadcast, in a link broadcast.
    assert_eq!(discover.eth_dst, ethernet::Address::BROADCAST);
    assert_eq!(
        (discover.src, discover.dst),
        (Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST)
    );
    assert_eq!(discover.message.message_type, MessageType::Discover);
    assert_eq!(discover.message.client_hw, CLIENT_MAC);

    stack.handle_frame(
        now,
        iface,
        &server_frame(MessageType::Offer, &discover.message, 600),
    );
    let request = dhcp_frames(drain(&mut stack, now)).remove(0);
    assert_eq!(request.message.message_type, MessageType::Request);
    assert_eq!(request.message.requested_ip, Some(GIVEN));
    assert!(stack.dhcp_lease(iface).is_none());

    stack.handle_frame(
        now,
        iface,
        &server_frame(MessageType::Ack, &request.message, 600),
    );
    assert!(matches!(dhcp_events(&mut stack)[..], [DhcpEvent::Bound(_)]));
    let lease = *stack.dhcp_lease(iface).unwrap();
    assert_eq!((lease.addr, lease.prefix_len), (GIVEN, 24));
    assert!(stack.is_local_addr(GIVEN));
    let default = stack.routes().lookup(Ipv4Addr::new(8, 8, 8, 8)).unwrap();
    assert_eq!((default.gateway, default.iface), (Some(SERVER), iface));
    assert_eq!(stack.dns_servers(), vec![SERVER]);
    // The timer is T1, half the lease.
    assert_eq!(stack.poll_timeout(), Some(secs(300)));
}

#[test]
fn a_datagram_to_port_68_without_a_client_reaches_a_socket() {
    let (mut stack, iface) = stack();
    stack.add_address(
        secs(0),
        iface,
        Cidr {
            address: GIVEN,
            prefix_len: 24,
        },
    );
    let socket = stack.udp_bind((Ipv4Addr::UNSPECIFIED, 68)).unwrap();
    let request = dhcp::Repr::new(MessageType::Request, 5, CLIENT_MAC);
    stack.handle_frame(
        secs(0),
        iface,
        &server_frame(MessageType::Ack, &request, 60),
    );
    let mut buf = [0u8; 600];
    let (len, from) = stack.udp_recv_from(socket, &mut buf).unwrap();
    assert_eq!((len, from.ip()), (300, core::net::IpAddr::V4(SERVER)));
}

#[test]
fn renewal_goes_unicast_from_the_leased_address() {
    let (mut stack, iface) = bound(120);
    let _ = dhcp_events(&mut stack);
    stack.handle_timeout(secs(60));
    let frames = drain(&mut stack, secs(60));
    // The server's MAC was learnt from its replies, or is asked for by ARP first.
    let renew = dhcp_frames(frames);
    let renew = if renew.is_empty() {
        stack.handle_frame(secs(60), iface, &arp_reply());
        dhcp_frames(drain(&mut stack, secs(60))).remove(0)
    } else {
        renew.into_iter().next().unwrap()
    };
    assert_eq!((renew.src, renew.dst), (GIVEN, SERVER));
    assert_eq!(renew.eth_dst, SERVER_MAC);
    assert_eq!(renew.message.ciaddr, GIVEN);
    let generation = stack.config_generation;
    stack.handle_frame(
        secs(61),
        iface,
        &server_frame(MessageType::Ack, &renew.message, 120),
    );
    assert!(matches!(
        dhcp_events(&mut stack)[..],
        [DhcpEvent::Renewed(_)]
    ));
    assert_eq!(
        stack.config_generation, generation,
        "a renewal changes no configuration"
    );
    assert!(
        drain(&mut stack, secs(61)).is_empty(),
        "no gratuitous ARP for a renewal"
    );
    assert!(stack.is_local_addr(GIVEN));
    assert_eq!(stack.dhcp_lease(iface).unwrap().expires_at, secs(181));
}

#[test]
fn lease_expiry_tears_everything_down() {
    let (mut stack, iface) = bound(120);
    let _ = dhcp_events(&mut stack);
    let mut now = secs(0);
    // Nobody answers: renewing, rebinding, then the end of the lease.
    while now < secs(120) {
        now = stack.poll_timeout().unwrap();
        stack.handle_timeout(now);
        let _ = drain(&mut stack, now);
    }
    assert!(matches!(dhcp_events(&mut stack)[..], [DhcpEvent::Lost(_)]));
    assert!(!stack.is_local_addr(GIVEN));
    assert!(stack.routes().lookup(Ipv4Addr::new(8, 8, 8, 8)).is_none());
    assert!(
        stack.routes().lookup(GIVEN).is_none(),
        "connected route gone"
    );
    assert!(stack.dns_servers().is_empty());
    assert!(stack.dhcp_lease(iface).is_none());
    // The client starts over.
    let after = secs(121);
    stack.handle_timeout(stack.poll_timeout().unwrap().min(after));
    let _ = drain(&mut stack, after);
}

#[test]
fn release_removes_the_address_and_tells_the_server() {
    let (mut stack, iface) = bound(600);
    let _ = dhcp_events(&mut stack);
    stack.handle_frame(secs(1), iface, &arp_reply());
    stack.dhcp_release(secs(2), iface);
    let sent = dhcp_frames(drain(&mut stack, secs(2)));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].message.message_type, MessageType::Release);
    assert_eq!((sent[0].src, sent[0].dst), (GIVEN, SERVER));
    assert!(matches!(dhcp_events(&mut stack)[..], [DhcpEvent::Lost(_)]));
    assert!(!stack.is_local_addr(GIVEN));
    assert_eq!(stack.poll_timeout(), None);
}

#[test]
fn dhcp_needs_an_ethernet_interface() {
    let mut stack = Stack::new(StackConfig::default(), secret(1));
    let tun = stack.add_interface(IfaceConfig::ip(1500));
    assert_eq!(
        stack.dhcp_start(secs(0), tun),
        Err(crate::dhcp::DhcpError::NotEthernet)
    );
    assert_eq!(
        stack.dhcp_start(secs(0), IfaceId(9)),
        Err(crate::dhcp::DhcpError::NoInterface)
    );
}
