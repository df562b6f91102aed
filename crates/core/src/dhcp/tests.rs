//! The client against a scripted server in virtual time: every transition of RFC 2131
//! figure 5, retransmission with backoff, and the lease's loss.

use super::*;

const HW: ethernet::Address = ethernet::Address([2, 0, 0, 0, 0, 0x42]);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const OFFERED: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 77);

fn secs(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000_000)
}

/// The one message the client has queued, parsed, with its source and destination.
fn sent(client: &mut DhcpClient) -> (Ipv4Addr, Ipv4Addr, dhcp::Repr<'static>) {
    let t = client.poll_transmit().expect("a message queued");
    assert!(client.poll_transmit().is_none(), "only one message queued");
    let payload: &'static [u8] = Vec::leak(t.payload);
    (
        t.src,
        t.dst,
        dhcp::Repr::parse(payload).expect("our message parses"),
    )
}

/// The server's reply of `kind` to `request`, a 120 s lease with T1 60, T2 105.
fn reply(kind: MessageType, request: &dhcp::Repr<'_>) -> dhcp::Repr<'static> {
    let mut reply = dhcp::Repr::new(kind, request.xid, request.client_hw);
    if kind != MessageType::Nak {
        reply.yiaddr = OFFERED;
        reply.lease_time = Some(120);
        reply.renewal_time = Some(60);
        reply.rebinding_time = Some(105);
        reply.subnet_mask = Some(Ipv4Addr::new(255, 255, 255, 0));
        reply.routers = AddrList::new(&[SERVER]);
        reply.dns_servers = AddrList::new(&[SERVER, Ipv4Addr::new(10, 9, 0, 2)]);
    }
    reply.server_id = Some(SERVER);
    reply
}

/// A client bound at time 0 (t1 at 60 s, t2 at 105 s, expiry at 120 s).
fn bound() -> DhcpClient {
    let now = secs(0);
    let mut client = DhcpClient::new(now, HW, 7);
    let (_, _, discover) = sent(&mut client);
    client.handle_message(now, &reply(MessageType::Offer, &discover));
    let (_, _, request) = sent(&mut client);
    client.handle_message(now, &reply(MessageType::Ack, &request));
    assert!(matches!(client.poll_event(), Some(DhcpEvent::Bound(_))));
    client
}

#[test]
fn discover_offer_request_ack() {
    let now = secs(0);
    let mut client = DhcpClient::new(now, HW, 1);
    let (src, dst, discover) = sent(&mut client);
    assert_eq!((src, dst), (Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST));
    assert_eq!(discover.message_type, MessageType::Discover);
    assert!(discover.broadcast, "no unicast before we have an address");
    assert_eq!(discover.client_id, Some(&[1, 2, 0, 0, 0, 0, 0x42][..]));
    assert_eq!(client.state_name(), "selecting");

    client.handle_message(now, &reply(MessageType::Offer, &discover));
    let (src, dst, request) = sent(&mut client);
    assert_eq!((src, dst), (Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST));
    assert_eq!(request.message_type, MessageType::Request);
    assert_eq!(request.xid, discover.xid);
    assert_eq!(request.requested_ip, Some(OFFERED));
    assert_eq!(request.server_id, Some(SERVER));
    assert_eq!(request.ciaddr, Ipv4Addr::UNSPECIFIED);
    assert_eq!(client.state_name(), "requesting");

    let at = secs(2);
    client.handle_message(at, &reply(MessageType::Ack, &request));
    let Some(DhcpEvent::Bound(lease)) = client.poll_event() else {
        panic!("no Bound event");
    };
    assert_eq!(
        (lease.addr, lease.prefix_len, lease.router),
        (OFFERED, 24, Some(SERVER))
    );
    assert_eq!(
        lease.dns_servers.as_slice(),
        &[SERVER, Ipv4Addr::new(10, 9, 0, 2)]
    );
    assert_eq!(lease.renew_at, secs(62));
    assert_eq!(lease.rebind_at, secs(107));
    assert_eq!(lease.expires_at, secs(122));
    assert_eq!(client.poll_timeout(), Some(secs(62)));
    assert_eq!(client.state_name(), "bound");
    assert!(client.poll_transmit().is_none());
}

#[test]
fn replies_for_others_are_ignored() {
    let now = secs(0);
    let mut client = DhcpClient::new(now, HW, 1);
    let (_, _, discover) = sent(&mut client);
    let mut other_xid = reply(MessageType::Offer, &discover);
    other_xid.xid ^= 1;
    client.handle_message(now, &other_xid);
    let mut other_hw = reply(MessageType::Offer, &discover);
    other_hw.client_hw = ethernet::Address([2, 0, 0, 0, 0, 1]);
    client.handle_message(now, &other_hw);
    let mut no_server = reply(MessageType::Offer, &discover);
    no_server.server_id = None;
    client.handle_message(now, &no_server);
    // An ACK while selecting is not an offer.
    client.handle_message(now, &reply(MessageType::Ack, &discover));
    assert!(client.poll_transmit().is_none());
    assert_eq!(client.state_name(), "selecting");
}

#[test]
fn discover_retransmits_with_exponential_backoff() {
    let mut client = DhcpClient::new(secs(0), HW, 3);
    let (_, _, first) = sent(&mut client);
    let mut now = secs(0);
    // RFC 2131 §4.1: 4, 8, 16, 32, 64, 64 seconds, each +-1 s.
    for base in [4u64, 8, 16, 32, 64, 64] {
        let due = client.poll_timeout().expect("a retransmission is due");
        let gap = due.saturating_duration_since(now).as_millis();
        assert!(
            (base * 1000 - 1000..=base * 1000 + 1000).contains(&gap),
            "gap {gap} ms, expected {base} s +-1 s"
        );
        client.handle_timeout(due - Duration::from_millis(1));
        assert!(
            client.poll_transmit().is_none(),
            "nothing before the deadline"
        );
        client.handle_timeout(due);
        let (_, _, again) = sent(&mut client);
        assert_eq!(again.xid, first.xid, "a retransmission keeps its xid");
        assert_eq!(u64::from(again.secs), due.as_millis() / 1000);
        now = due;
    }
}

#[test]
fn nak_while_requesting_starts_over() {
    let now = secs(0);
    let mut client = DhcpClient::new(now, HW, 4);
    let (_, _, discover) = sent(&mut client);
    client.handle_message(now, &reply(MessageType::Offer, &discover));
    let (_, _, request) = sent(&mut client);
    client.handle_message(now, &reply(MessageType::Nak, &request));
    let (_, _, again) = sent(&mut client);
    assert_eq!(again.message_type, MessageType::Discover);
    assert_ne!(again.xid, discover.xid, "a new exchange, a new xid");
    assert!(client.poll_event().is_none(), "no lease was held");
    assert_eq!(client.state_name(), "selecting");
}

#[test]
fn unanswered_requests_give_up_and_discover_again() {
    let now = secs(0);
    let mut client = DhcpClient::new(now, HW, 5);
    let (_, _, discover) = sent(&mut client);
    client.handle_message(now, &reply(MessageType::Offer, &discover));
    let (_, _, _) = sent(&mut client);
    for _ in 1..REQUEST_ATTEMPTS {
        let due = client.poll_timeout().unwrap();
        client.handle_timeout(due);
        let (_, _, again) = sent(&mut client);
        assert_eq!(again.message_type, MessageType::Request);
    }
    let due = client.poll_timeout().unwrap();
    client.handle_timeout(due);
    let (_, _, restart) = sent(&mut client);
    assert_eq!(restart.message_type, MessageType::Discover);
}

#[test]
fn renewing_at_t1_unicasts_to_the_server() {
    let mut client = bound();
    client.handle_timeout(secs(59));
    assert!(client.poll_transmit().is_none());
    client.handle_timeout(secs(60));
    let (src, dst, request) = sent(&mut client);
    assert_eq!((src, dst), (OFFERED, SERVER));
    assert_eq!(request.message_type, MessageType::Request);
    assert_eq!(request.ciaddr, OFFERED);
    assert_eq!((request.server_id, request.requested_ip), (None, None));
    assert_eq!(client.state_name(), "renewing");
    // Half of the 45 s to T2 is under 60 s: the retransmission waits until T2.
    assert_eq!(client.poll_timeout(), Some(secs(105)));

    client.handle_message(secs(61), &reply(MessageType::Ack, &request));
    let Some(DhcpEvent::Renewed(lease)) = client.poll_event() else {
        panic!("no Renewed event");
    };
    assert_eq!(lease.expires_at, secs(181));
    assert_eq!(client.state_name(), "bound");
    assert_eq!(client.poll_timeout(), Some(secs(121)));
}

#[test]
fn rebinding_at_t2_broadcasts_then_the_lease_expires() {
    let mut client = bound();
    client.handle_timeout(secs(60));
    let (_, _, renew) = sent(&mut client);
    client.handle_timeout(secs(105));
    let (src, dst, rebind) = sent(&mut client);
    assert_eq!((src, dst), (OFFERED, Ipv4Addr::BROADCAST));
    assert_eq!(rebind.ciaddr, OFFERED);
    assert_eq!(rebind.xid, renew.xid, "the same exchange");
    assert_eq!(client.state_name(), "rebinding");
    assert_eq!(client.poll_timeout(), Some(secs(120)));
    assert!(
        client.poll_event().is_none(),
        "still bound until the lease ends"
    );
    client.handle_timeout(secs(120));
    let Some(DhcpEvent::Lost(lease)) = client.poll_event() else {
        panic!("no Lost event");
    };
    assert_eq!(lease.addr, OFFERED);
    assert!(client.lease().is_none());
    let (src, _, discover) = sent(&mut client);
    assert_eq!(src, Ipv4Addr::UNSPECIFIED);
    assert_eq!(discover.message_type, MessageType::Discover);
}

#[test]
fn ack_while_rebinding_keeps_the_lease() {
    let mut client = bound();
    client.handle_timeout(secs(60));
    let _ = sent(&mut client);
    client.handle_timeout(secs(105));
    let (_, _, rebind) = sent(&mut client);
    client.handle_message(secs(110), &reply(MessageType::Ack, &rebind));
    assert!(matches!(client.poll_event(), Some(DhcpEvent::Renewed(_))));
    assert_eq!(client.poll_timeout(), Some(secs(170)));
}

#[test]
fn nak_while_renewing_loses_the_lease() {
    let mut client = bound();
    client.handle_timeout(secs(60));
    let (_, _, renew) = sent(&mut client);
    client.handle_message(secs(61), &reply(MessageType::Nak, &renew));
    assert!(matches!(client.poll_event(), Some(DhcpEvent::Lost(_))));
    let (_, _, discover) = sent(&mut client);
    assert_eq!(discover.message_type, MessageType::Discover);
}

#[test]
fn release_tells_the_server_and_stops() {
    let mut client = bound();
    client.release(secs(10));
    let (src, dst, release) = sent(&mut client);
    assert_eq!((src, dst), (OFFERED, SERVER));
    assert_eq!(release.message_type, MessageType::Release);
    assert_eq!((release.ciaddr, release.server_id), (OFFERED, Some(SERVER)));
    assert!(matches!(client.poll_event(), Some(DhcpEvent::Lost(_))));
    assert_eq!(client.poll_timeout(), None);
    assert_eq!(client.state_name(), "stopped");
}

#[test]
fn same_seed_same_exchange_other_seed_other_xid() {
    let xid = |seed| sent(&mut DhcpClient::new(secs(0), HW, seed)).2.xid;
    assert_eq!(xid(9), xid(9));
    assert_ne!(xid(9), xid(10));
}
