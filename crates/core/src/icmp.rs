//! ICMP (RFC 792) and ICMPv6 (RFC 4443): echo sockets for ping (one socket sends to
//! and hears from both families), answering echo requests, generating rate-limited
//! errors, and routing received errors to the sockets they concern.

use alloc::collections::BTreeMap;
use core::fmt;
use core::net::IpAddr;

use crate::socket::{Handle, RecvQueue, Slab};
use crate::time::{Duration, Instant};

/// An ICMP echo socket; stale handles are reported as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IcmpHandle(pub(crate) Handle);

/// Why an ICMP socket call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IcmpError {
    /// The handle does not name an open socket.
    InvalidHandle,
    /// No reply is queued; wait for `Event::Icmp`.
    WouldBlock,
    /// Another echo socket uses this identifier.
    IdentInUse,
    /// The payload does not fit in one IPv4 datagram (65507 bytes at most).
    MessageTooLong,
    /// No route to the destination (or no source address on its interface).
    NoRoute,
    /// The transmit or resolution queue is full; try again after `poll_transmit`.
    NoBufferSpace,
    /// An earlier request could not be delivered: the next hop did not answer ARP, or a
    /// router said the host is unreachable.
    HostUnreachable,
    /// A router said the network is unreachable.
    NetUnreachable,
    /// A router or the destination reported another unreachable code.
    Unreachable,
    /// An earlier request's TTL ran out or its fragments were not reassembled.
    TimeExceeded,
    /// IPv4 options were given for a request to an IPv6 address (IPv6 has none).
    OptionsOnIpv6,
}

impl fmt::Display for IcmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IcmpError::InvalidHandle => write!(
                f,
                "invalid ICMP handle: the socket was closed or never existed"
            ),
            IcmpError::WouldBlock => write!(f, "no echo reply queued: wait for a readable event"),
            IcmpError::IdentInUse => write!(
                f,
                "ICMP identifier in use by another echo socket: pick another"
            ),
            IcmpError::MessageTooLong => write!(f, "echo payload over 65507 bytes: send less"),
            IcmpError::NoRoute => {
                write!(f, "no route to the destination: add a route or an address")
            }
            IcmpError::NoBufferSpace => write!(f, "output queue full: poll_transmit, then retry"),
            IcmpError::HostUnreachable => write!(
                f,
                "host unreachable: the destination or gateway did not answer"
            ),
            IcmpError::NetUnreachable => write!(f, "network unreachable (ICMP from a router)"),
            IcmpError::Unreachable => write!(f, "destination unreachable (ICMP)"),
            IcmpError::TimeExceeded => write!(f, "time exceeded on the way to the destination"),
            IcmpError::OptionsOnIpv6 => write!(
                f,
                "IPv4 options (record route, timestamp) on a request to an IPv6 address: \
                 send it without them"
            ),
        }
    }
}

impl core::error::Error for IcmpError {}

/// An echo reply taken by `icmp_recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// Who answered (an IPv6 address for an ICMPv6 echo reply).
    pub src: IpAddr,
    /// The sequence number of the request answered.
    pub seq_no: u16,
    /// Bytes of echo data written to the buffer (the rest is discarded).
    pub len: usize,
    /// The reply's IPv4 TTL, or its IPv6 hop limit.
    pub ttl: u8,
    /// The reply's IPv4 options: what a Record Route or Timestamp option sent with
    /// the request collected on the way there and back (none over IPv6).
    pub options: crate::ip_options::IpOptions,
}

/// Rate limit for ICMP error messages (RFC 1812 §4.3.2.8, RFC 1122 §3.2.2): a token
/// bucket of `burst` tokens refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpRateLimit {
    /// Errors that may go out back to back.
    pub burst: u32,
    /// Sustained errors per second.
    pub per_second: u32,
}

impl Default for IcmpRateLimit {
    fn default() -> Self {
        // Linux: icmp_msgs_per_sec 1000, icmp_msgs_burst 50.
        IcmpRateLimit {
            burst: 50,
            per_second: 1000,
        }
    }
}

/// The token bucket behind [`IcmpRateLimit`], in units of 1/1e9 token so refills are
/// exact in integer nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    limit: IcmpRateLimit,
    /// Invariant: at most `burst * 1e9`.
    nano_tokens: u64,
    last: Option<Instant>,
}

const NANOS_PER_TOKEN: u64 = 1_000_000_000;

impl TokenBucket {
    pub(crate) fn new(limit: IcmpRateLimit) -> TokenBucket {
        TokenBucket {
            limit,
            nano_tokens: u64::from(limit.burst) * NANOS_PER_TOKEN,
            last: None,
        }
    }

    /// True when the bucket would be full at `now` (its owner has been quiet).
    pub(crate) fn is_full(&self, now: Instant) -> bool {
        let capacity = u64::from(self.limit.burst) * NANOS_PER_TOKEN;
        let refill = self.last.map_or(capacity, |last| {
            now.saturating_duration_since(last)
                .as_nanos()
                .saturating_mul(u64::from(self.limit.per_second))
        });
        self.nano_tokens.saturating_add(refill) >= capacity
    }

    /// Take one token if there is one.
    pub(crate) fn try_take(&mut self, now: Instant) -> bool {
        let capacity = u64::from(self.limit.burst) * NANOS_PER_TOKEN;
        if let Some(last) = self.last {
            let elapsed: Duration = now.saturating_duration_since(last);
            let refill = elapsed
                .as_nanos()
                .saturating_mul(u64::from(self.limit.per_second));
            self.nano_tokens = self.nano_tokens.saturating_add(refill).min(capacity);
        }
        self.last = Some(now);
        if self.nano_tokens >= NANOS_PER_TOKEN {
            self.nano_tokens -= NANOS_PER_TOKEN;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
pub(crate) struct EchoSocket {
    pub(crate) ident: u16,
    /// Replies: (source, seq_no, ttl, IP options) and data.
    pub(crate) queue: RecvQueue<(IpAddr, u16, u8, crate::ip_options::IpOptions)>,
    /// An asynchronous error, reported once by the next `icmp_recv`.
    pub(crate) error: Option<IcmpError>,
}

/// Every echo socket of a stack.
#[derive(Debug, Default)]
pub(crate) struct IcmpSockets {
    pub(crate) sockets: Slab<EchoSocket>,
    pub(crate) by_ident: BTreeMap<u16, IcmpHandle>,
}

impl IcmpSockets {
    /// Mark an error on a socket; true when it became readable.
    pub(crate) fn set_error(&mut self, handle: IcmpHandle, error: IcmpError) -> bool {
        let Some(socket) = self.sockets.get_mut(handle.0) else {
            return false;
        };
        let was_quiet = socket.error.is_none() && socket.queue.is_empty();
        socket.error = Some(error);
        was_quiet
    }
}
