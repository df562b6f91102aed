//! Temporal sharing of TCP control blocks (RFC 9040 §4.2, §5): what a connection learned
//! about a destination (RTT, RTTVAR, cwnd, ssthresh) kept when it closes, and handed to
//! the next connection to the same host, so that it need not find the path again
//! from the initial window. Off unless [`TcpConfig::share_control_blocks`] is set.
//!
//! The safety limits taken from RFC 9040 and the RFCs it points to:
//! - only the same destination host shares (RFC 9040 §4: "the same host");
//! - the new window never exceeds the old connection's cwnd, and is never below the
//!   configured initial window (RFC 9040 §5 Table 5: the cached value initialises the
//!   new TCB; it is an upper bound, never raised);
//! - nor the old ssthresh, the window at which the path last pushed back (a loss, an
//!   ECN mark, HyStart++'s rising RTT), or half the old cwnd if it never left slow
//!   start: a window can grow past what the path holds while the sender is
//!   application-limited (RFC 7661's non-validated cwnd, as at the end of every
//!   transfer) or in the last slow-start round, and the new connection sends its window
//!   at once (found in `crates/sim/tests/shared_blocks.rs`: starting from the full old
//!   cwnd overflowed the queue and cost 101 retransmissions);
//! - and only the part of it that was in the pipe rather than in a queue: the window
//!   times the minimum RTT over SRTT (the old connection's delivery rate times the
//!   path's base RTT), so that a window that filled a queue does not start by
//!   overflowing it;
//! - it decays with the time since the old connection closed, as a connection idle for
//!   as long would: kept whole for RFC 7661's non-validated period ([`NON_VALIDATED`],
//!   5 minutes: a window unused that long is still believed), then halved once per RTO
//!   of further idle time (RFC 2861 §3), with ssthresh kept at three quarters of the
//!   window before each halving;
//! - an entry older than [`ENTRY_LIFETIME`] is forgotten, and the cache holds at most
//!   [`CACHE_ENTRIES`] destinations (the least recently stored goes first), so its memory
//!   is bounded whatever the traffic;
//! - only a connection that closed cleanly (our FIN acknowledged) and measured an RTT
//!   stores an entry: a reset or timed-out connection's window says little.
//!
//! The new connection's RTT estimator starts from the cached SRTT and RTTVAR (RFC 9040
//! Table 3). The learned window goes out at once unless the connection paces
//! (`TcpConfig::pacing`); RFC 9040 §8 notes the burst, and pacing is the cure.
//!
//! [`TcpConfig::share_control_blocks`]: super::TcpConfig::share_control_blocks

use alloc::vec::Vec;
use core::net::IpAddr;

use crate::time::{Duration, Instant};

/// RFC 7661 §5.1's non-validated period: "NVP ... 5 minutes": how long a window that
/// has not been used is kept before it decays.
pub const NON_VALIDATED: Duration = Duration::from_secs(300);

/// Destinations the cache remembers at most.
pub const CACHE_ENTRIES: usize = 256;

/// How long an entry is kept after its connection closed (Linux's TCP metrics keep
/// theirs an hour, `TCP_METRICS_TIMEOUT`).
pub const ENTRY_LIFETIME: Duration = Duration::from_secs(3600);

/// What one connection left for the next to the same host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    /// SRTT at close.
    pub srtt: Duration,
    /// RTTVAR at close.
    pub rttvar: Duration,
    /// The RTO at close (without backoff): the idle period that halves the window.
    pub rto: Duration,
    /// cwnd at close, bytes.
    pub cwnd: usize,
    /// ssthresh at close, bytes (`usize::MAX` while still in the first slow start).
    pub ssthresh: usize,
}

/// The per-destination cache: a small vector scanned linearly (at most
/// [`CACHE_ENTRIES`]), consulted once per connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct BlockCache {
    /// (destination, block, when stored), oldest store first.
    entries: Vec<(IpAddr, Block, Instant)>,
}

impl BlockCache {
    /// Remembers `block` for `dst` at `now`, replacing an older entry for it and, when
    /// full, the entry stored longest ago.
    pub fn store(&mut self, now: Instant, dst: impl Into<IpAddr>, block: Block) {
        let dst = dst.into();
        self.entries.retain(|(d, _, _)| *d != dst);
        if self.entries.len() >= CACHE_ENTRIES {
            self.entries.remove(0);
        }
        self.entries.push((dst, block, now));
    }

    /// What a new connection to `dst` at `now` may start from, decayed for the time
    /// since it was stored; the window is in bytes, at least `initial_window`. Expired
    /// entries are dropped on the way.
    pub fn lookup(
        &mut self,
        now: Instant,
        dst: impl Into<IpAddr>,
        initial_window: usize,
    ) -> Option<Block> {
        let dst = dst.into();
        self.entries
            .retain(|(_, _, at)| now.saturating_duration_since(*at) <= ENTRY_LIFETIME);
        let (_, block, at) = self.entries.iter().find(|(d, _, _)| *d == dst)?;
        Some(decay(
            *block,
            now.saturating_duration_since(*at),
            initial_window,
        ))
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// `block` after `idle` without traffic: unchanged for [`NON_VALIDATED`], then RFC 2861
/// §3, "the congestion window is reduced by half for every RTO interval" of idle time,
/// after "ssthresh is set to the maximum of its current value and three quarters of the
/// congestion window"; never below the initial window (the restart window a fresh
/// connection would have).
fn decay(block: Block, idle: Duration, initial_window: usize) -> Block {
    let rto = block.rto.as_nanos().max(1);
    let halvings = idle.saturating_sub(NON_VALIDATED).as_nanos() / rto;
    let (mut cwnd, mut ssthresh) = (block.cwnd, block.ssthresh);
    for _ in 0..halvings.min(64) {
        if cwnd <= initial_window {
            break;
        }
        ssthresh = ssthresh.max(cwnd / 4 * 3);
        cwnd /= 2;
    }
    Block {
        cwnd: cwnd.max(initial_window),
        ssthresh,
        ..block
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const IW: usize = 10 * 1000;

    fn block(cwnd: usize, ssthresh: usize) -> Block {
        Block {
            srtt: Duration::from_millis(40),
            rttvar: Duration::from_millis(5),
            rto: Duration::from_millis(200),
            cwnd,
            ssthresh,
        }
    }

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    #[test]
    fn a_fresh_entry_is_returned_as_stored_and_only_for_its_host() {
        let mut cache = BlockCache::default();
        cache.store(Instant::ZERO, ip(1), block(400_000, 300_000));
        let t = Instant::ZERO + NON_VALIDATED;
        assert_eq!(cache.lookup(t, ip(1), IW), Some(block(400_000, 300_000)));
        assert_eq!(cache.lookup(t, ip(2), IW), None);
    }

    #[test]
    fn the_window_halves_per_rto_of_idle_time_and_ssthresh_remembers() {
        let mut cache = BlockCache::default();
        cache.store(Instant::ZERO, ip(1), block(400_000, usize::MAX));
        // Two RTOs (400 ms) past the non-validated period: 400 000 -> 200 000 ->
        // 100 000; ssthresh stays infinite.
        let after = |ms| Instant::ZERO + NON_VALIDATED + Duration::from_millis(ms);
        let b = cache.lookup(after(450), ip(1), IW).unwrap();
        assert_eq!((b.cwnd, b.ssthresh), (100_000, usize::MAX));
        cache.store(Instant::ZERO, ip(1), block(400_000, 100_000));
        // ssthresh becomes 3/4 of the first window, 300 000.
        let b = cache.lookup(after(450), ip(1), IW).unwrap();
        assert_eq!((b.cwnd, b.ssthresh), (100_000, 300_000));
        // Long idle: down to the initial window, no lower.
        let b = cache.lookup(after(60_000), ip(1), IW).unwrap();
        assert_eq!(b.cwnd, IW);
    }

    #[test]
    fn entries_expire_and_the_cache_is_bounded() {
        let mut cache = BlockCache::default();
        cache.store(Instant::ZERO, ip(1), block(50_000, 40_000));
        let late = Instant::ZERO + ENTRY_LIFETIME + Duration::from_nanos(1);
        assert_eq!(cache.lookup(late, ip(1), IW), None);
        assert_eq!(cache.len(), 0);
        for i in 0..CACHE_ENTRIES + 10 {
            let dst = Ipv4Addr::from((0x0a00_0000 + i as u32).to_be_bytes());
            cache.store(Instant::from_millis(i as u64), dst, block(50_000, 40_000));
        }
        assert_eq!(cache.len(), CACHE_ENTRIES);
        // The ten stored first are gone; a new store for a known host replaces it.
        let t = Instant::from_millis(1000);
        assert_eq!(cache.lookup(t, Ipv4Addr::from([10, 0, 0, 0]), IW), None);
        assert!(
            cache
                .lookup(t, Ipv4Addr::from([10, 0, 0, 10]), IW)
                .is_some()
        );
    }
}
