//! The IPv6 neighbour cache (RFC 4861 §7.3): each neighbour's link-layer address and
//! reachability state, with the packets waiting for its resolution.
//!
//! States: INCOMPLETE (multicast solicitations, `MAX_MULTICAST_SOLICIT` of them a
//! `RETRANS_TIMER` apart), REACHABLE (for `REACHABLE_TIME` after a confirmation),
//! STALE (used as it is; the first packet sent moves it to DELAY), DELAY
//! (`DELAY_FIRST_PROBE_TIME`, then PROBE), PROBE (unicast solicitations,
//! `MAX_UNICAST_SOLICIT`; no answer removes the entry).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::net::Ipv6Addr;

use impnet_wire::ethernet;

use crate::iface::IfaceId;
use crate::neighbor::Pending;
use crate::time::{Duration, Instant};

/// RFC 4861 §10.
const MAX_MULTICAST_SOLICIT: u8 = 3;
const MAX_UNICAST_SOLICIT: u8 = 3;
const REACHABLE_TIME: Duration = Duration::from_secs(30);
const DELAY_FIRST_PROBE_TIME: Duration = Duration::from_secs(5);

/// A neighbour's reachability state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdState {
    /// Being resolved: `sent` solicitations so far, the next due at `next`.
    Incomplete {
        /// Solicitations sent.
        sent: u8,
        /// When the next goes (or, after the last, when resolution fails).
        next: Instant,
    },
    /// Confirmed reachable until the instant.
    Reachable(Instant),
    /// Not confirmed lately; used as it is.
    Stale,
    /// Used while stale: probed at the instant unless confirmed first.
    Delay(Instant),
    /// Being probed: `sent` unicast solicitations, the next due at `next`.
    Probe {
        /// Solicitations sent.
        sent: u8,
        /// When the next goes.
        next: Instant,
    },
}

#[derive(Debug)]
struct Entry {
    mac: Option<ethernet::Address>,
    state: NdState,
    router: bool,
    queue: VecDeque<Pending>,
}

/// What the cache asks the stack to do.
#[derive(Debug)]
pub(crate) enum NdAction {
    /// Send a neighbor solicitation for `target`: to its solicited-node group, or to
    /// `unicast` (probing a known address).
    Solicit {
        iface: IfaceId,
        target: Ipv6Addr,
        unicast: Option<ethernet::Address>,
    },
    /// Resolution failed; these packets were waiting.
    Failed {
        iface: IfaceId,
        addr: Ipv6Addr,
        dropped: VecDeque<Pending>,
    },
}

/// The outcome of a lookup for sending.
#[derive(Debug)]
pub(crate) enum Resolve {
    /// Send to this address (the packet given back).
    Known(ethernet::Address, Pending),
    /// Queued; `solicit` when a first solicitation must go now.
    Queued { solicit: bool },
    /// Not queued (cache or queue full): the packet is given back.
    Full(Pending),
}

/// Neighbours by (interface, address).
#[derive(Debug)]
pub(crate) struct NeighborCache {
    entries: BTreeMap<(IfaceId, Ipv6Addr), Entry>,
    max_entries: usize,
    max_queue: usize,
    /// Moves on whenever an entry comes, goes, or changes its address or state, so a
    /// copy of an address taken with [`NeighborCache::lookup_until`] (or of the next
    /// deadline) is known to hold while it stays the same.
    generation: u64,
}

impl NeighborCache {
    pub(crate) fn new(max_entries: usize, max_queue: usize) -> NeighborCache {
        NeighborCache {
            entries: BTreeMap::new(),
            max_entries: max_entries.max(1),
            max_queue: max_queue.max(1),
            generation: 0,
        }
    }

    /// The generation: unchanged since a [`NeighborCache::lookup_until`] means every
    /// entry is as it was then.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The address to send to `addr` and until when it serves as it is: what
    /// [`NeighborCache::resolve`] would answer (a STALE entry moves to DELAY, RFC 4861
    /// §7.3.3), for a caller that keeps the answer while the generation (read after
    /// this call) stays the same and `now` is before the instant. None while unknown.
    pub(crate) fn lookup_until(
        &mut self,
        now: Instant,
        iface: IfaceId,
        addr: Ipv6Addr,
    ) -> Option<(ethernet::Address, Instant)> {
        let entry = self.entries.get_mut(&(iface, addr))?;
        let mac = entry.mac?;
        if entry.state == NdState::Stale {
            entry.state = NdState::Delay(now + DELAY_FIRST_PROBE_TIME);
            self.generation += 1;
        }
        let until = match entry.state {
            NdState::Reachable(t) | NdState::Delay(t) => t,
            NdState::Probe { next, .. } | NdState::Incomplete { next, .. } => next,
            // Made DELAY above.
            NdState::Stale => now,
        };
        Some((mac, until))
    }

    /// The neighbour's state and address, if known.
    pub fn state(
        &self,
        iface: IfaceId,
        addr: Ipv6Addr,
    ) -> Option<(NdState, Option<ethernet::Address>)> {
        self.entries.get(&(iface, addr)).map(|e| (e.state, e.mac))
    }

    /// Where to send a packet for `addr`: its address (a STALE entry moves to DELAY,
    /// RFC 4861 §7.3.3), or the packet queued while it is resolved.
    pub(crate) fn resolve(
        &mut self,
        now: Instant,
        iface: IfaceId,
        addr: Ipv6Addr,
        pending: Pending,
    ) -> Resolve {
        if let Some(entry) = self.entries.get_mut(&(iface, addr)) {
            if let Some(mac) = entry.mac {
                if entry.state == NdState::Stale {
                    entry.state = NdState::Delay(now + DELAY_FIRST_PROBE_TIME);
                    self.generation += 1;
                }
                return Resolve::Known(mac, pending);
            }
            if entry.queue.len() >= self.max_queue {
                // RFC 4861 §7.2.2: the oldest queued packet makes room for the new one.
                entry.queue.pop_front();
            }
            entry.queue.push_back(pending);
            return Resolve::Queued { solicit: false };
        }
        if self.entries.len() >= self.max_entries && !self.evict() {
            return Resolve::Full(pending);
        }
        let mut queue = VecDeque::new();
        queue.push_back(pending);
        self.generation += 1;
        self.entries.insert(
            (iface, addr),
            Entry {
                mac: None,
                state: NdState::Incomplete {
                    sent: 1,
                    next: now + super::RETRANS_TIMER,
                },
                router: false,
                queue,
            },
        );
        Resolve::Queued { solicit: true }
    }

    /// Drop one entry that is not being resolved (the least useful: stale first).
    fn evict(&mut self) -> bool {
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| e.queue.is_empty())
            .min_by_key(|(_, e)| match e.state {
                NdState::Stale => 0,
                NdState::Delay(_) | NdState::Probe { .. } => 1,
                _ => 2,
            })
            .map(|(k, _)| *k);
        self.generation += 1;
        victim.is_some_and(|k| self.entries.remove(&k).is_some())
    }

    /// A solicitation, router solicitation or advertisement or redirect carried the
    /// sender's link-layer address (RFC 4861 §7.2.3): a new entry is STALE; a changed
    /// address makes it STALE. Returns the packets this released.
    pub(crate) fn learn(
        &mut self,
        iface: IfaceId,
        addr: Ipv6Addr,
        mac: ethernet::Address,
    ) -> VecDeque<Pending> {
        self.generation += 1;
        match self.entries.get_mut(&(iface, addr)) {
            Some(entry) => {
                if entry.mac != Some(mac) {
                    entry.mac = Some(mac);
                    entry.state = NdState::Stale;
                }
                core::mem::take(&mut entry.queue)
            }
            None => {
                if self.entries.len() >= self.max_entries && !self.evict() {
                    return VecDeque::new();
                }
                self.entries.insert(
                    (iface, addr),
                    Entry {
                        mac: Some(mac),
                        state: NdState::Stale,
                        router: false,
                        queue: VecDeque::new(),
                    },
                );
                VecDeque::new()
            }
        }
    }

    /// A neighbor advertisement for `target` (RFC 4861 §7.2.5). Returns the packets
    /// it released.
    pub(crate) fn advertised(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        mac: Option<ethernet::Address>,
        (solicited, overrides, router): (bool, bool, bool),
    ) -> VecDeque<Pending> {
        let Some(entry) = self.entries.get_mut(&(iface, target)) else {
            // No entry: the advertisement is silently discarded (§7.2.5).
            return VecDeque::new();
        };
        self.generation += 1;
        let reachable = if solicited {
            NdState::Reachable(now + REACHABLE_TIME)
        } else {
            NdState::Stale
        };
        match (entry.mac, mac) {
            (None, None) => return VecDeque::new(),
            (None, Some(mac)) => {
                entry.mac = Some(mac);
                entry.state = reachable;
            }
            (Some(old), new) => {
                let same = new.is_none_or(|m| m == old);
                if overrides || same {
                    if let Some(m) = new {
                        entry.mac = Some(m);
                    }
                    if solicited {
                        entry.state = reachable;
                    } else if !same {
                        entry.state = NdState::Stale;
                    }
                } else if matches!(entry.state, NdState::Reachable(_)) {
                    entry.state = NdState::Stale;
                }
            }
        }
        entry.router = router;
        core::mem::take(&mut entry.queue)
    }

    /// The earliest timer.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.state {
                NdState::Incomplete { next, .. } | NdState::Probe { next, .. } => Some(next),
                NdState::Reachable(t) | NdState::Delay(t) => Some(t),
                NdState::Stale => None,
            })
            .min()
    }

    /// Fire the timers due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant, actions: &mut Vec<NdAction>) {
        let mut gone = Vec::new();
        for (&(iface, addr), entry) in &mut self.entries {
            let before = entry.state;
            match entry.state {
                NdState::Incomplete { sent, next } if next <= now => {
                    if sent >= MAX_MULTICAST_SOLICIT {
                        gone.push((iface, addr));
                    } else {
                        entry.state = NdState::Incomplete {
                            sent: sent + 1,
                            next: now + super::RETRANS_TIMER,
                        };
                        actions.push(NdAction::Solicit {
                            iface,
                            target: addr,
                            unicast: None,
                        });
                    }
                }
                NdState::Reachable(until) if until <= now => entry.state = NdState::Stale,
                NdState::Delay(until) if until <= now => {
                    entry.state = NdState::Probe {
                        sent: 1,
                        next: now + super::RETRANS_TIMER,
                    };
                    actions.push(NdAction::Solicit {
                        iface,
                        target: addr,
                        unicast: entry.mac,
                    });
                }
                NdState::Probe { sent, next } if next <= now => {
                    if sent >= MAX_UNICAST_SOLICIT {
                        gone.push((iface, addr));
                    } else {
                        entry.state = NdState::Probe {
                            sent: sent + 1,
                            next: now + super::RETRANS_TIMER,
                        };
                        actions.push(NdAction::Solicit {
                            iface,
                            target: addr,
                            unicast: entry.mac,
                        });
                    }
                }
                _ => {}
            }
            if entry.state != before {
                self.generation += 1;
            }
        }
        self.generation += u64::from(!gone.is_empty());
        for key in gone {
            if let Some(entry) = self.entries.remove(&key) {
                actions.push(NdAction::Failed {
                    iface: key.0,
                    addr: key.1,
                    dropped: entry.queue,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::neighbor::Origin;

    const IF: IfaceId = IfaceId(0);
    const MAC: ethernet::Address = ethernet::Address([2, 0, 0, 0, 0, 9]);

    fn addr() -> Ipv6Addr {
        "fe80::9".parse().unwrap()
    }

    fn pending(tag: u8) -> Pending {
        Pending {
            origin: Origin::Stack,
            packet: alloc::vec![tag],
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn resolution_queues_solicits_three_times_then_fails_with_the_queue() {
        let mut cache = NeighborCache::new(8, 2);
        assert!(matches!(
            cache.resolve(at(0), IF, addr(), pending(1)),
            Resolve::Queued { solicit: true }
        ));
        assert!(matches!(
            cache.resolve(at(0), IF, addr(), pending(2)),
            Resolve::Queued { solicit: false }
        ));
        // A third packet pushes the oldest out (queue of 2).
        assert!(matches!(
            cache.resolve(at(0), IF, addr(), pending(3)),
            Resolve::Queued { solicit: false }
        ));
        let mut actions = Vec::new();
        cache.handle_timeout(at(1000), &mut actions);
        cache.handle_timeout(at(2000), &mut actions);
        assert_eq!(actions.len(), 2);
        assert!(
            actions
                .iter()
                .all(|a| matches!(a, NdAction::Solicit { unicast: None, .. }))
        );
        actions.clear();
        cache.handle_timeout(at(3000), &mut actions);
        match &actions[..] {
            [NdAction::Failed { dropped, .. }] => {
                let tags: Vec<u8> = dropped.iter().map(|p| p.packet[0]).collect();
                assert_eq!(tags, [2, 3]);
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        assert!(cache.state(IF, addr()).is_none());
    }

    #[test]
    fn a_solicited_advertisement_releases_the_queue_and_the_entry_ages_to_probe() {
        let mut cache = NeighborCache::new(8, 3);
        let _ = cache.resolve(at(0), IF, addr(), pending(1));
        let released = cache.advertised(at(10), IF, addr(), Some(MAC), (true, true, false));
        assert_eq!(released.len(), 1);
        assert!(
            matches!(cache.resolve(at(20), IF, addr(), pending(2)), Resolve::Known(m, _) if m == MAC)
        );
        let mut actions = Vec::new();
        cache.handle_timeout(at(30_010), &mut actions);
        assert_eq!(cache.state(IF, addr()).unwrap().0, NdState::Stale);
        // Used while stale: DELAY, then a unicast probe five seconds later.
        let _ = cache.resolve(at(31_000), IF, addr(), pending(3));
        cache.handle_timeout(at(36_000), &mut actions);
        assert!(matches!(actions[..], [NdAction::Solicit { unicast: Some(m), .. }] if m == MAC));
    }

    #[test]
    fn an_unsolicited_advertisement_without_override_does_not_replace_a_known_address() {
        let mut cache = NeighborCache::new(8, 3);
        let _ = cache.learn(IF, addr(), MAC);
        let other = ethernet::Address([2, 0, 0, 0, 0, 7]);
        let _ = cache.advertised(at(0), IF, addr(), Some(other), (false, false, false));
        assert_eq!(cache.state(IF, addr()).unwrap().1, Some(MAC));
        let _ = cache.advertised(at(0), IF, addr(), Some(other), (false, true, false));
        assert_eq!(
            cache.state(IF, addr()).unwrap(),
            (NdState::Stale, Some(other))
        );
    }
}
