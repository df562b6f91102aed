//! The routing table: longest-prefix match over IPv4 prefixes (RFC 1812 §5.2.4.3), each
//! naming an interface and, when the destination is not on-link, a gateway.
//!
//! The table has two halves. The routes themselves sit in a slab (`slots`), each at an
//! index that stays put from insertion to removal, with an exact-match map from prefix
//! to index beside it; that half answers `insert`, `remove` and `iter`. Lookups go
//! through the other half, a Poptrie over the same prefixes (`route/trie.rs`, six bits a
//! level, nodes and leaves in flat arrays) whose leaves are slab indices; past a thousand
//! routes it gains a 2^16-entry first level indexed by the address's top 16 bits, so a
//! lookup in a large table reads one entry there, a node or two and a leaf. Memory grows
//! with the routes (an empty table allocates nothing). Updates rebuild only the part of
//! the trie under the changed prefix (a /16 or less of it for a large table).
//!
//! Forwarding wants per-route counters: [`Routes::lookup_index`] returns the route's
//! index, and [`Routes::count`] adds a packet to that route's [`RouteCounters`], which
//! the table keeps beside the route (reset when the route is removed, kept when the same
//! prefix is re-added with a new next hop). A caller that prefers its own counters can
//! keep them in a parallel `Vec` by index, bearing in mind that a removed route's index
//! is reused by a later insertion.

mod trie;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;

use impnet_wire::ipv4::Cidr;

use crate::iface::{IfaceId, prefix_mask};
use trie::{NO_ROUTE, Prefix, Source, Trie};

/// One routing table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The destinations this route covers (stored with its host bits cleared).
    pub cidr: Cidr,
    /// The next hop for every destination in `cidr`; `None` means on-link (the
    /// destination itself is the next hop).
    pub gateway: Option<Ipv4Addr>,
    /// The interface packets leave on.
    pub iface: IfaceId,
    /// A path MTU below the interface's, if any.
    pub mtu: Option<usize>,
}

impl Route {
    /// The neighbour a packet to `dst` is handed to.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        self.gateway.unwrap_or(dst)
    }
}

/// What has been forwarded through one route (see [`Routes::count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteCounters {
    /// Packets counted.
    pub packets: u64,
    /// Their bytes, as the caller counted them.
    pub bytes: u64,
}

/// The routing table. Holds at most `2^31 - 1` routes; insertions past that are
/// ignored.
#[derive(Clone, Default)]
pub struct Routes {
    /// The route with index `i` is `slots[i]`; `None` marks an index free for reuse.
    slots: Vec<Option<Route>>,
    /// `counters[i]` belongs to `slots[i]`; zero for a free index.
    counters: Vec<RouteCounters>,
    /// The free indices of `slots`.
    free: Vec<u32>,
    /// (network bits, prefix length) of every route, to its index. Invariant: exactly the
    /// `Some` slots, one entry per (network, prefix length).
    by_prefix: BTreeMap<(u32, u8), u32>,
    /// The longest-prefix match over `by_prefix`, naming slot indices.
    trie: Trie,
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

fn network(cidr: Cidr) -> Cidr {
    let address = Ipv4Addr::from_bits(cidr.address.to_bits() & prefix_mask(cidr.prefix_len));
    Cidr {
        address,
        prefix_len: cidr.prefix_len.min(32),
    }
}

/// The map key of a prefix: its network bits and length.
fn key(cidr: Cidr) -> (u32, u8) {
    let cidr = network(cidr);
    (cidr.address.to_bits(), cidr.prefix_len)
}

/// Every prefix inside `region/len` and longer than `len`, sorted by (network, length).
fn prefixes_in(by_prefix: &BTreeMap<(u32, u8), u32>, region: u32, len: u8) -> Vec<Prefix> {
    let last = region | !prefix_mask(len);
    by_prefix
        .range((region, 0)..=(last, u8::MAX))
        .filter(|((_, l), _)| *l > len)
        .map(|(&(network, len), &route)| Prefix {
            network,
            len,
            route,
        })
        .collect()
}

/// The index of the longest route of length at most `len` covering `region`.
fn best_covering(by_prefix: &BTreeMap<(u32, u8), u32>, region: u32, len: u8) -> u32 {
    (0..=len.min(32))
        .rev()
        .find_map(|l| by_prefix.get(&(region & prefix_mask(l), l)).copied())
        .unwrap_or(NO_ROUTE)
}

impl Source for BTreeMap<(u32, u8), u32> {
    fn prefixes_in(&self, region: u32, len: u8) -> Vec<Prefix> {
        prefixes_in(self, region, len)
    }

    fn best_covering(&self, region: u32, len: u8) -> u32 {
        best_covering(self, region, len)
    }

    fn count(&self) -> usize {
        self.len()
    }
}

impl Routes {
    /// An empty table (allocates nothing).
    pub fn new() -> Routes {
        Routes::default()
    }

    /// Route `cidr` through `gateway` (or on-link when `None`) on `iface`, replacing any
    /// route for the same prefix.
    pub fn add(&mut self, cidr: Cidr, gateway: Option<Ipv4Addr>, iface: IfaceId) {
        self.insert(Route {
            cidr,
            gateway,
            iface,
            mtu: None,
        });
    }

    /// Route everything without a more specific route through `gateway` on `iface`.
    pub fn add_default(&mut self, gateway: Ipv4Addr, iface: IfaceId) {
        let cidr = Cidr {
            address: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
        };
        self.add(cidr, Some(gateway), iface);
    }

    /// Add `route` as given (with its MTU), replacing any route for the same prefix. A
    /// replaced route keeps its index and counters.
    pub fn insert(&mut self, route: Route) {
        let key = key(route.cidr);
        if self.store(route) {
            self.refresh(key);
        }
    }

    /// Put `route` in the slab and the prefix map, without touching the trie; true when
    /// the prefix is new (the trie must learn of it).
    fn store(&mut self, mut route: Route) -> bool {
        route.cidr = network(route.cidr);
        let key = key(route.cidr);
        if let Some(&index) = self.by_prefix.get(&key) {
            if let Some(slot) = self.slots.get_mut(index as usize) {
                *slot = Some(route);
            }
            return false;
        }
        let index = match self.free.pop() {
            Some(index) => index,
            None => match u32::try_from(self.slots.len()) {
                Ok(index) if index < NO_ROUTE => {
                    self.slots.push(None);
                    self.counters.push(RouteCounters::default());
                    index
                }
                _ => return false,
            },
        };
        if let Some(slot) = self.slots.get_mut(index as usize) {
            *slot = Some(route);
        }
        if let Some(counters) = self.counters.get_mut(index as usize) {
            *counters = RouteCounters::default();
        }
        self.by_prefix.insert(key, index);
        true
    }

    /// Remove the route for exactly this prefix, returning it.
    pub fn remove(&mut self, cidr: Cidr) -> Option<Route> {
        let key = key(cidr);
        let index = self.by_prefix.remove(&key)?;
        let route = self.slots.get_mut(index as usize).and_then(Option::take);
        if let Some(counters) = self.counters.get_mut(index as usize) {
            *counters = RouteCounters::default();
        }
        if self.by_prefix.is_empty() {
            // Give the slab back with the last route.
            *self = Routes::default();
        } else {
            self.free.push(index);
            self.refresh(key);
        }
        route
    }

    /// Remove the on-link route through `iface` for exactly `cidr`'s prefix, if there is
    /// one (used when an address goes away).
    pub(crate) fn remove_connected(&mut self, cidr: Cidr, iface: IfaceId) {
        let connected = self
            .by_prefix
            .get(&key(cidr))
            .and_then(|&index| self.get(index as usize))
            .is_some_and(|r| r.iface == iface && r.gateway.is_none());
        if connected {
            self.remove(cidr);
        }
    }

    /// Rebuild the part of the trie the prefix `key` reaches.
    fn refresh(&mut self, (network, len): (u32, u8)) {
        self.trie.update(network, len, &self.by_prefix);
    }

    /// The most specific route covering `dst`.
    #[inline]
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<Route> {
        self.lookup_index(dst).map(|(_, route)| *route)
    }

    /// The most specific route covering `dst`, with its index: the index stays the
    /// route's until it is removed (re-adding the same prefix keeps it), and serves
    /// [`Routes::get`], [`Routes::count`] and [`Routes::counters`].
    #[inline]
    pub fn lookup_index(&self, dst: Ipv4Addr) -> Option<(usize, &Route)> {
        let index = self.trie.lookup(dst.to_bits()) as usize;
        let route = self.slots.get(index)?.as_ref()?;
        Some((index, route))
    }

    /// The route at `index`, if one is there.
    pub fn get(&self, index: usize) -> Option<&Route> {
        self.slots.get(index)?.as_ref()
    }

    /// Count one packet of `bytes` bytes against the route at `index`, as returned by
    /// [`Routes::lookup_index`]. Counters wrap; what is counted against an index holding
    /// no route is never seen (a route given that index starts from zero).
    #[inline]
    pub fn count(&mut self, index: usize, bytes: u64) {
        if let Some(counters) = self.counters.get_mut(index) {
            counters.packets = counters.packets.wrapping_add(1);
            counters.bytes = counters.bytes.wrapping_add(bytes);
        }
    }

    /// What has been counted against the route at `index` since it was added.
    pub fn counters(&self, index: usize) -> Option<RouteCounters> {
        self.get(index)?;
        self.counters.get(index).copied()
    }

    /// How many routes the table holds.
    pub fn len(&self) -> usize {
        self.by_prefix.len()
    }

    /// True for a table without routes.
    pub fn is_empty(&self) -> bool {
        self.by_prefix.is_empty()
    }

    /// Roughly the heap bytes the table holds: the slab, counters and trie exactly (by
    /// capacity), the prefix map estimated from B-tree nodes of 11 keys about
    /// two-thirds full.
    pub fn heap_bytes(&self) -> usize {
        /// A `BTreeMap<(u32, u8), u32>` leaf: parent link, two lengths, 11 keys, 11 values.
        const BTREE_LEAF: usize = 8 + 4 + 11 * 8 + 11 * 4;
        self.slots.capacity() * core::mem::size_of::<Option<Route>>()
            + self.counters.capacity() * core::mem::size_of::<RouteCounters>()
            + self.free.capacity() * core::mem::size_of::<u32>()
            + self.by_prefix.len().div_ceil(7) * BTREE_LEAF
            + self.trie.heap_bytes()
    }

    /// Every route, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.slots.iter().flatten()
    }

    /// Every route with its index (for [`Routes::counters`]), in no particular order.
    pub fn iter_indexed(&self) -> impl Iterator<Item = (usize, &Route)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| slot.as_ref().map(|route| (index, route)))
    }
}

/// Adding many routes at once builds the trie once, at the end: use it to load a large
/// table (each `insert` rebuilds the trie under its prefix).
impl Extend<Route> for Routes {
    fn extend<I: IntoIterator<Item = Route>>(&mut self, routes: I) {
        for route in routes {
            self.store(route);
        }
        self.trie.rebuild_all(&self.by_prefix);
    }
}

impl FromIterator<Route> for Routes {
    fn from_iter<I: IntoIterator<Item = Route>>(routes: I) -> Routes {
        let mut table = Routes::new();
        table.extend(routes);
        table
    }
}

#[cfg(test)]
mod tests;
