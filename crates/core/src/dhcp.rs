//! A DHCPv4 client (RFC 2131 §4.4) as a pure state machine: messages and time go in,
//! messages to send, lease events and the next deadline come out. It knows nothing of
//! the stack; [`Stack::dhcp_start`](crate::Stack::dhcp_start) runs one per interface,
//! sending its messages and applying its leases.
//!
//! # States (RFC 2131 figure 5)
//! `Selecting` (DHCPDISCOVER sent, waiting for an offer) → `Requesting` (DHCPREQUEST
//! for the offer, broadcast) → `Bound` → at T1 `Renewing` (DHCPREQUEST unicast to the
//! server) → at T2 `Rebinding` (DHCPREQUEST broadcast) → at the lease's end the address
//! is lost and the client starts over. A DHCPNAK in `Requesting`, `Renewing` or
//! `Rebinding` starts over too (losing the lease if there was one); `release` sends
//! DHCPRELEASE and stops.
//!
//! # Call order
//! [`DhcpClient::new`] queues the first DHCPDISCOVER. Then, as for the stack: feed
//! replies to [`DhcpClient::handle_message`], call [`DhcpClient::handle_timeout`] at
//! [`DhcpClient::poll_timeout`], and after either drain [`DhcpClient::poll_transmit`]
//! and [`DhcpClient::poll_event`].

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::dhcp::{self, AddrList, MessageType};
use impnet_wire::ethernet;

use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// RFC 2131 §4.4.5: retransmissions in RENEWING and REBINDING wait half the time left,
/// "down to a minimum of 60 seconds".
const MIN_RENEW_RETRANSMIT: Duration = Duration::from_secs(60);
/// DHCPREQUESTs sent for one offer before starting over (RFC 2131 §4.4.1: "If the
/// client receives neither a DHCPACK or a DHCPNAK message after employing the
/// retransmission algorithm, the client reverts to INIT state").
const REQUEST_ATTEMPTS: u32 = 4;
/// Lease time assumed when an ACK carries none.
const DEFAULT_LEASE_SECS: u32 = 3600;

/// A lease the client holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The address granted.
    pub addr: Ipv4Addr,
    /// Its prefix length, from the subnet mask (the address's class without one).
    pub prefix_len: u8,
    /// The first router, if the server named one.
    pub router: Option<Ipv4Addr>,
    /// DNS servers, in the server's order.
    pub dns_servers: AddrList,
    /// The server that granted it.
    pub server_id: Ipv4Addr,
    /// T1: when renewing starts.
    pub renew_at: Instant,
    /// T2: when rebinding starts.
    pub rebind_at: Instant,
    /// When the lease ends.
    pub expires_at: Instant,
}

/// What happened to the client's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DhcpEvent {
    /// A new lease: configure its address, route and DNS servers.
    Bound(Lease),
    /// The lease was extended (same address).
    Renewed(Lease),
    /// The lease ended (expired, refused by a DHCPNAK, or released): remove what it
    /// configured.
    Lost(Lease),
}

/// A message to send: its UDP payload, from port 68 to port 67.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpTransmit {
    /// The IP source: 0.0.0.0 until the client has an address.
    pub src: Ipv4Addr,
    /// The IP destination: the limited broadcast or the server.
    pub dst: Ipv4Addr,
    /// The DHCP message.
    pub payload: Vec<u8>,
}

/// Why [`Stack::dhcp_start`](crate::Stack::dhcp_start) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DhcpError {
    /// No such interface.
    NoInterface,
    /// DHCP needs a link layer with broadcast: the interface is IP-level (TUN).
    NotEthernet,
    /// The interface already runs a client.
    AlreadyRunning,
}

impl core::fmt::Display for DhcpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DhcpError::NoInterface => "no such interface",
            DhcpError::NotEthernet => {
                "DHCP needs an Ethernet interface (a TAP); an IP-level one (TUN) has no broadcast"
            }
            DhcpError::AlreadyRunning => "the interface already runs a DHCP client",
        })
    }
}

impl core::error::Error for DhcpError {}

/// One exchange of the client: a transaction id, when it began (for `secs`), the
/// retransmission deadline and how many messages were sent.
#[derive(Debug, Clone, Copy)]
struct Exchange {
    xid: u32,
    started: Instant,
    retransmit_at: Instant,
    attempts: u32,
}

/// The client's state; each holds only what exists in it.
#[derive(Debug, Clone, Copy)]
enum State {
    /// DHCPDISCOVER sent; waiting for a DHCPOFFER.
    Selecting(Exchange),
    /// DHCPREQUEST for `offered` from `server` sent (broadcast); waiting for the ACK.
    Requesting {
        exchange: Exchange,
        offered: Ipv4Addr,
        server: Ipv4Addr,
    },
    /// Holding `Lease`; nothing to do before T1.
    Bound(Lease),
    /// T1 passed: DHCPREQUEST sent unicast to the lease's server.
    Renewing(Lease, Exchange),
    /// T2 passed: DHCPREQUEST broadcast to any server.
    Rebinding(Lease, Exchange),
    /// Released; the client does nothing more.
    Stopped,
}

/// The DHCPv4 client of one interface.
#[derive(Debug, Clone)]
pub struct DhcpClient {
    hw: ethernet::Address,
    rng: Rng,
    state: State,
    outbox: VecDeque<DhcpTransmit>,
    events: VecDeque<DhcpEvent>,
}

impl DhcpClient {
    /// A client for the interface with Ethernet address `hw`; `seed` keys its
    /// transaction ids and retransmission jitter (the stack derives it from its
    /// secret). Queues the first DHCPDISCOVER.
    pub fn new(now: Instant, hw: ethernet::Address, seed: u64) -> DhcpClient {
        let mut client = DhcpClient {
            hw,
            rng: Rng::new(seed),
            state: State::Stopped,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        };
        client.discover(now);
        client
    }

    /// The lease held (bound, renewing or rebinding).
    pub fn lease(&self) -> Option<&Lease> {
        match &self.state {
            State::Bound(lease) | State::Renewing(lease, _) | State::Rebinding(lease, _) => {
                Some(lease)
            }
            _ => None,
        }
    }

    /// The state's name, for logs and tests.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            State::Selecting(_) => "selecting",
            State::Requesting { .. } => "requesting",
            State::Bound(_) => "bound",
            State::Renewing(..) => "renewing",
            State::Rebinding(..) => "rebinding",
            State::Stopped => "stopped",
        }
    }

    /// The next message to send.
    pub fn poll_transmit(&mut self) -> Option<DhcpTransmit> {
        self.outbox.pop_front()
    }

    /// The next lease event.
    pub fn poll_event(&mut self) -> Option<DhcpEvent> {
        self.events.pop_front()
    }

    /// When [`DhcpClient::handle_timeout`] must run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Selecting(exchange) | State::Requesting { exchange, .. } => {
                Some(exchange.retransmit_at)
            }
            State::Bound(lease) => Some(lease.renew_at),
            State::Renewing(_, exchange) | State::Rebinding(_, exchange) => {
                Some(exchange.retransmit_at)
            }
            State::Stopped => None,
        }
    }

    /// Give the lease up: DHCPRELEASE to the server (RFC 2131 §4.4.6), the lease
    /// [`DhcpEvent::Lost`], and the client stops.
    pub fn release(&mut self, now: Instant) {
        if let Some(lease) = self.lease().copied() {
            let xid = self.rng.next_u64() as u32;
            let mut message = self.message(MessageType::Release, xid, now, now);
            message.ciaddr = lease.addr;
            message.broadcast = false;
            message.server_id = Some(lease.server_id);
            message.parameter_request_list = None;
            self.send(&message, lease.addr, lease.server_id);
            self.events.push_back(DhcpEvent::Lost(lease));
        }
        self.state = State::Stopped;
    }

    /// Fire what is due at `now`: retransmissions, T1, T2 and the lease's end.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Selecting(exchange) if now >= exchange.retransmit_at => {
                let exchange = self.next_attempt(now, exchange);
                self.state = State::Selecting(exchange);
                self.send_discover(now, exchange);
            }
            State::Requesting { exchange, .. }
                if now >= exchange.retransmit_at && exchange.attempts >= REQUEST_ATTEMPTS =>
            {
                self.discover(now);
            }
            State::Requesting {
                exchange,
                offered,
                server,
            } if now >= exchange.retransmit_at => {
                let exchange = self.next_attempt(now, exchange);
                self.state = State::Requesting {
                    exchange,
                    offered,
                    server,
                };
                self.send_select_request(now, exchange, offered, server);
            }
            State::Bound(lease) if now >= lease.renew_at => self.renew(now, lease, None),
            State::Renewing(lease, exchange) | State::Rebinding(lease, exchange)
                if now >= exchange.retransmit_at =>
            {
                self.on_renew_timer(now, lease, exchange);
            }
            _ => {}
        }
    }

    /// A retransmission timer in RENEWING or REBINDING: the lease's end, T2, or a
    /// plain retransmission.
    fn on_renew_timer(&mut self, now: Instant, lease: Lease, exchange: Exchange) {
        if now >= lease.expires_at {
            // RFC 2131 §4.4.5: "If the lease expires before the client receives a
            // DHCPACK, the client moves to INIT state, MUST immediately stop any other
            // network processing and requests network initialization parameters".
            self.events.push_back(DhcpEvent::Lost(lease));
            self.discover(now);
        } else {
            self.renew(now, lease, Some(exchange));
        }
    }

    /// Send (again) the DHCPREQUEST of RENEWING or REBINDING, whichever `now` is in.
    fn renew(&mut self, now: Instant, lease: Lease, exchange: Option<Exchange>) {
        let rebinding = now >= lease.rebind_at;
        let (deadline, dst) = if rebinding {
            (lease.expires_at, Ipv4Addr::BROADCAST)
        } else {
            (lease.rebind_at, lease.server_id)
        };
        // RFC 2131 §4.4.5: wait "one-half of the remaining time until T2 (in RENEWING
        // state) and one-half of the remaining lease time (in REBINDING state), down
        // to a minimum of 60 seconds".
        let half = Duration::from_nanos(deadline.saturating_duration_since(now).as_nanos() / 2);
        let wait = half.max(MIN_RENEW_RETRANSMIT);
        let exchange = match exchange {
            Some(e) => Exchange {
                retransmit_at: (now + wait).min(deadline),
                attempts: e.attempts + 1,
                ..e
            },
            None => Exchange {
                xid: self.rng.next_u64() as u32,
                started: now,
                retransmit_at: (now + wait).min(deadline),
                attempts: 1,
            },
        };
        self.state = if rebinding {
            State::Rebinding(lease, exchange)
        } else {
            State::Renewing(lease, exchange)
        };
        // RFC 2131 §4.3.2: in RENEWING and REBINDING the request carries ciaddr and
        // neither a server identifier nor a requested address.
        let mut message = self.message(MessageType::Request, exchange.xid, exchange.started, now);
        message.ciaddr = lease.addr;
        message.broadcast = false;
        self.send(&message, lease.addr, dst);
    }

    /// A reply from a server (the UDP payload, parsed). Replies that are not for this
    /// client or its current exchange are ignored.
    pub fn handle_message(&mut self, now: Instant, reply: &dhcp::Repr<'_>) {
        if reply.client_hw != self.hw || !reply.message_type.is_reply() {
            return;
        }
        match self.state {
            State::Selecting(exchange) if reply.xid == exchange.xid => {
                self.on_offer(now, exchange, reply);
            }
            State::Requesting {
                exchange, offered, ..
            } if reply.xid == exchange.xid => match reply.message_type {
                MessageType::Ack if reply.yiaddr == offered => {
                    let lease = lease_from(now, reply);
                    self.state = State::Bound(lease);
                    self.events.push_back(DhcpEvent::Bound(lease));
                }
                // RFC 2131 §4.4.1: "If the client receives a DHCPNAK message, the
                // client restarts the configuration process."
                MessageType::Nak => self.discover(now),
                _ => {}
            },
            State::Renewing(lease, exchange) | State::Rebinding(lease, exchange)
                if reply.xid == exchange.xid =>
            {
                self.on_renew_reply(now, lease, reply);
            }
            _ => {}
        }
    }

    /// SELECTING: take the first offer that carries an address and a server id
    /// (RFC 2131 §4.4.1 lets the client pick any).
    fn on_offer(&mut self, now: Instant, exchange: Exchange, reply: &dhcp::Repr<'_>) {
        let (MessageType::Offer, Some(server)) = (reply.message_type, reply.server_id) else {
            return;
        };
        if reply.yiaddr.is_unspecified() || reply.yiaddr.is_broadcast() {
            return;
        }
        let exchange = Exchange {
            retransmit_at: now + self.backoff(1),
            attempts: 1,
            ..exchange
        };
        self.state = State::Requesting {
            exchange,
            offered: reply.yiaddr,
            server,
        };
        self.send_select_request(now, exchange, reply.yiaddr, server);
    }

    /// RENEWING or REBINDING: an ACK extends the lease, a NAK ends it.
    fn on_renew_reply(&mut self, now: Instant, lease: Lease, reply: &dhcp::Repr<'_>) {
        match reply.message_type {
            MessageType::Ack if reply.yiaddr == lease.addr => {
                let renewed = lease_from(now, reply);
                self.state = State::Bound(renewed);
                self.events.push_back(DhcpEvent::Renewed(renewed));
            }
            MessageType::Ack => {
                // A different address: the old one is gone, the new one bound.
                let fresh = lease_from(now, reply);
                self.events.push_back(DhcpEvent::Lost(lease));
                self.state = State::Bound(fresh);
                self.events.push_back(DhcpEvent::Bound(fresh));
            }
            MessageType::Nak => {
                // RFC 2131 §4.4.5: on a DHCPNAK "the client moves to INIT state".
                self.events.push_back(DhcpEvent::Lost(lease));
                self.discover(now);
            }
            _ => {}
        }
    }

    /// INIT: a new transaction id, DHCPDISCOVER broadcast, SELECTING.
    fn discover(&mut self, now: Instant) {
        let exchange = Exchange {
            xid: self.rng.next_u64() as u32,
            started: now,
            retransmit_at: now + self.backoff(1),
            attempts: 1,
        };
        self.state = State::Selecting(exchange);
        self.send_discover(now, exchange);
    }

    fn send_discover(&mut self, now: Instant, exchange: Exchange) {
        let message = self.message(MessageType::Discover, exchange.xid, exchange.started, now);
        self.send(&message, Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST);
    }

    /// SELECTING's DHCPREQUEST: broadcast, naming the chosen server and address
    /// (RFC 2131 §4.3.2 "DHCPREQUEST generated during SELECTING state").
    fn send_select_request(
        &mut self,
        now: Instant,
        exchange: Exchange,
        offered: Ipv4Addr,
        server: Ipv4Addr,
    ) {
        let mut message = self.message(MessageType::Request, exchange.xid, exchange.started, now);
        message.requested_ip = Some(offered);
        message.server_id = Some(server);
        self.send(&message, Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST);
    }

    /// The exchange after one more retransmission.
    fn next_attempt(&mut self, now: Instant, exchange: Exchange) -> Exchange {
        let attempts = exchange.attempts + 1;
        Exchange {
            retransmit_at: now + self.backoff(attempts),
            attempts,
            ..exchange
        }
    }

    /// RFC 2131 §4.1: the wait after the `attempt`th message: 4, 8, 16, 32, then 64
    /// seconds, "randomized by the value of a uniform random number chosen from the
    /// range -1 to +1".
    fn backoff(&mut self, attempt: u32) -> Duration {
        let base_ms = 4000u64 << attempt.saturating_sub(1).min(4);
        let jitter = u64::from(self.rng.in_range(0, 2000));
        Duration::from_millis(base_ms - 1000 + jitter)
    }

    /// A client message with the fields every one of ours carries: the broadcast
    /// flag (we take no unicast before we have an address), a client identifier
    /// (type 1, our MAC: RFC 2132 §9.14) and the parameters we want.
    fn message(
        &self,
        message_type: MessageType,
        xid: u32,
        started: Instant,
        now: Instant,
    ) -> dhcp::Repr<'static> {
        let secs = now.saturating_duration_since(started).as_millis() / 1000;
        dhcp::Repr {
            secs: u16::try_from(secs).unwrap_or(u16::MAX),
            broadcast: true,
            parameter_request_list: Some(dhcp::CLIENT_PARAMETERS),
            ..dhcp::Repr::new(message_type, xid, self.hw)
        }
    }

    /// Emit `message` (with our client identifier) and queue it.
    fn send(&mut self, message: &dhcp::Repr<'_>, src: Ipv4Addr, dst: Ipv4Addr) {
        let mut client_id = [1u8; 7];
        client_id[1..].copy_from_slice(&self.hw.0);
        let message = dhcp::Repr {
            client_id: Some(&client_id),
            ..*message
        };
        let mut payload = alloc::vec![0u8; message.buffer_len()];
        message.emit(&mut payload);
        self.outbox.push_back(DhcpTransmit { src, dst, payload });
    }
}

/// The lease an ACK grants at `now`. RFC 2131 §4.4.5: T1 defaults to half the lease,
/// T2 to 0.875 of it.
fn lease_from(now: Instant, ack: &dhcp::Repr<'_>) -> Lease {
    let lease_secs = ack.lease_time.unwrap_or(DEFAULT_LEASE_SECS);
    let t1 = ack.renewal_time.unwrap_or(lease_secs / 2).min(lease_secs);
    let t2 = ack
        .rebinding_time
        .unwrap_or((u64::from(lease_secs) * 7 / 8) as u32)
        .clamp(t1, lease_secs);
    let at = |secs: u32| now + Duration::from_secs(u64::from(secs));
    Lease {
        addr: ack.yiaddr,
        prefix_len: ack.subnet_mask.map_or_else(
            || classful_prefix(ack.yiaddr),
            |m| m.to_bits().leading_ones() as u8,
        ),
        router: ack.routers.as_slice().first().copied(),
        dns_servers: ack.dns_servers,
        server_id: ack.server_id.unwrap_or(ack.siaddr),
        renew_at: at(t1),
        rebind_at: at(t2),
        expires_at: at(lease_secs),
    }
}

/// RFC 1122 §3.3.1.1's fallback without a subnet mask: the address's class.
fn classful_prefix(addr: Ipv4Addr) -> u8 {
    match addr.octets()[0] {
        0..=127 => 8,
        128..=191 => 16,
        _ => 24,
    }
}

#[cfg(test)]
mod tests;
