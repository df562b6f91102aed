//! "Accept any destination": an interface mode for transparent proxies (tun2socks,
//! gVisor's TCP and UDP forwarders). On such an interface every IPv4 and IPv6 packet is
//! taken as addressed to us, whatever its destination; a catch-all TCP listener
//! ([`Stack::tcp_listen_any`](crate::Stack::tcp_listen_any)) accepts SYNs to any
//! address and port, and a catch-all UDP socket
//! ([`Stack::udp_bind_any`](crate::Stack::udp_bind_any)) receives datagrams to any
//! address and port with their original destination. Replies leave from that
//! destination.
//!
//! What such a mode opens to anyone on the link is bounded here: each source address
//! gets a token bucket of opening packets (TCP SYNs and UDP datagrams to addresses not
//! our own), and the catch-all listener has its own cap on half-open connections.

use alloc::collections::BTreeMap;
use core::net::IpAddr;

use crate::icmp::{IcmpRateLimit, TokenBucket};
use crate::time::Instant;

/// The limits of an accept-any interface
/// ([`Stack::set_accept_any`](crate::Stack::set_accept_any)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptAny {
    /// Opening packets (TCP SYNs, UDP datagrams) one source may send per second.
    pub per_source_rate: u32,
    /// How many of them it may send at once after a quiet time.
    pub per_source_burst: u32,
    /// Most sources tracked at once; a new source beyond it is refused until an idle
    /// one (its bucket full again) can be forgotten.
    pub max_sources: usize,
}

impl Default for AcceptAny {
    fn default() -> Self {
        AcceptAny {
            per_source_rate: 1000,
            per_source_burst: 200,
            max_sources: 4096,
        }
    }
}

/// Counters of the accept-any mode (all interfaces together).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcceptAnyStats {
    /// Packets to an address not our own taken in on an accept-any interface.
    pub rx_taken: u64,
    /// Opening packets dropped because their source ran out of tokens.
    pub rate_limited: u64,
    /// Opening packets dropped because `max_sources` sources were tracked already.
    pub sources_full: u64,
    /// UDP datagrams delivered to the catch-all socket.
    pub udp_caught: u64,
}

/// One token bucket per source address, bounded.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceLimiter {
    buckets: BTreeMap<IpAddr, TokenBucket>,
}

/// Why an opening packet was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its source has no token left.
    RateLimited,
    /// No room to track its source.
    SourcesFull,
}

impl SourceLimiter {
    /// Take one token of `src`'s bucket under `limits`.
    pub(crate) fn admit(
        &mut self,
        now: Instant,
        src: IpAddr,
        limits: &AcceptAny,
    ) -> Result<(), Refusal> {
        let rate = IcmpRateLimit {
            burst: limits.per_source_burst,
            per_second: limits.per_source_rate,
        };
        if !self.buckets.contains_key(&src) && self.buckets.len() >= limits.max_sources {
            // Forget the sources whose buckets have refilled: they are idle.
            self.buckets.retain(|_, bucket| !bucket.is_full(now));
            if self.buckets.len() >= limits.max_sources {
                return Err(Refusal::SourcesFull);
            }
        }
        let bucket = self
            .buckets
            .entry(src)
            .or_insert_with(|| TokenBucket::new(rate));
        if bucket.try_take(now) {
            Ok(())
        } else {
            Err(Refusal::RateLimited)
        }
    }
}
