//! The 4-tuple demultiplexing table: a hash table, so finding a segment's connection
//! costs the same with one connection or a hundred thousand.
//!
//! The hash is keyed from the stack's secret (RFC 6528's reasoning for ISNs applies: a
//! peer that cannot predict the hash cannot pick tuples that collide) and cheap: the
//! tuple packs into 96 bits, mixed with two multiplications.
//!
//! An entry is 8 bytes: the connection's slot index and the high 32 bits of its tuple's
//! hash (its tag). The tuple itself is the connection's own `(local, remote)`, which
//! the caller compares through the index (`matches`). A map holding the tuples (64
//! bytes of two `SocketAddr`s) cost 95 bytes per connection at 100k; entries with the
//! whole hash beside the handle (16 bytes) 22; this costs 11. The tag is what the
//! table hashes by (`spread`), so growing the table never looks at a connection (it
//! did when the entry was the handle and the hash had to be worked out again from
//! the connection's tuple: a cache miss per entry, 5% of W3's time at 16k
//! connections in TIME-WAIT), and a lookup compares a tuple only when the 32-bit tags
//! agree.

use core::cell::Cell;
use core::net::SocketAddr;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Slot;

use super::{FourTuple, TcpHandle};

/// One connection in the table: its slot index and its tuple's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    index: u32,
    tag: u32,
}

/// The hash the table files a tag under: the tag in both halves, so that both the
/// bucket (low bits) and hashbrown's 7-bit control tag (top bits) come from it.
#[inline]
fn spread(tag: u32) -> u64 {
    u64::from(tag) << 32 | u64::from(tag)
}

/// Connections by (local, remote).
#[derive(Debug)]
pub(crate) struct ConnMap {
    table: HashTable<Entry>,
    build: TupleHash,
    /// The entry `get` found last, tried first (a segment's connection is most often
    /// the one of the segment before; 4.3BSD's one-behind PCB cache). Cleared by every
    /// insert and remove, so it is always an entry of `table`; a tuple has at most one
    /// entry, so a match here is what the table's search would find.
    last: Cell<Option<Entry>>,
}

impl ConnMap {
    /// A new, empty map whose hash is keyed by `key`.
    pub(crate) fn new(key: u64) -> ConnMap {
        ConnMap {
            table: HashTable::new(),
            build: TupleHash { key },
            last: Cell::new(None),
        }
    }

    /// The tuple packed into words: an IPv4 address with its port in one, an IPv6
    /// address in two and the ports in a third.
    #[inline]
    fn hash(&self, tuple: &FourTuple) -> u64 {
        self.build.hash(tuple)
    }

    /// The tag of `tuple`: the high half of its hash.
    #[inline]
    fn tag(&self, tuple: &FourTuple) -> u32 {
        (self.hash(tuple) >> 32) as u32
    }
}

impl TupleHash {
    /// [`ConnMap::hash`].
    #[inline]
    fn hash(&self, (local, remote): &FourTuple) -> u64 {
        let mut h = self.build_hasher();
        for end in [local, remote] {
            match end {
                SocketAddr::V4(a) => {
                    h.absorb(u64::from(a.ip().to_bits()) << 16 | u64::from(a.port()));
                }
                SocketAddr::V6(a) => {
                    let bits = a.ip().to_bits();
                    h.absorb(bits as u64);
                    h.absorb((bits >> 64) as u64 ^ u64::from(a.port()) << 48);
                    h.absorb(u64::from(a.port()) | 1 << 63);
                }
            }
        }
        h.finish()
    }
}

impl ConnMap {
    /// The connection of `tuple`. `matches(index, tuple)` gives the handle of the
    /// connection in slot `index` if its tuple is `tuple`.
    #[inline]
    pub(crate) fn get(
        &self,
        tuple: &FourTuple,
        matches: impl Fn(u32, &FourTuple) -> Option<TcpHandle>,
    ) -> Option<TcpHandle> {
        let tag = self.tag(tuple);
        if let Some(last) = self.last.get()
            && last.tag == tag
            && let Some(handle) = matches(last.index, tuple)
        {
            return Some(handle);
        }
        let mut found = None;
        let entry = self.table.find(spread(tag), |e| {
            e.tag == tag && {
                found = matches(e.index, tuple);
                found.is_some()
            }
        });
        if let Some(&entry) = entry {
            self.last.set(Some(entry));
        }
        found
    }

    /// Whether some connection has `tuple`.
    pub(crate) fn contains(
        &self,
        tuple: &FourTuple,
        matches: impl Fn(u32, &FourTuple) -> Option<TcpHandle>,
    ) -> bool {
        self.get(tuple, matches).is_some()
    }

    /// `handle` is the connection of `tuple` (replacing any other; `matches` as for
    /// [`ConnMap::get`]).
    pub(crate) fn insert(
        &mut self,
        tuple: FourTuple,
        handle: TcpHandle,
        matches: impl Fn(u32, &FourTuple) -> Option<TcpHandle>,
    ) {
        self.last.set(None);
        let tag = self.tag(&tuple);
        let new = Entry {
            index: handle.index,
            tag,
        };
        match self.table.entry(
            spread(tag),
            |e| e.tag == tag && matches(e.index, &tuple).is_some(),
            |e| spread(e.tag),
        ) {
            Slot::Occupied(mut entry) => *entry.get_mut() = new,
            Slot::Vacant(entry) => {
                entry.insert(new);
            }
        }
    }

    /// Forget `tuple` if `handle` is its connection; whether it was.
    pub(crate) fn remove(&mut self, tuple: &FourTuple, handle: TcpHandle) -> bool {
        self.last.set(None);
        let tag = self.tag(tuple);
        match self
            .table
            .find_entry(spread(tag), |e| e.index == handle.index && e.tag == tag)
        {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// The entry of `tuple` at index `from` now names index `to` (the connection
    /// moved: parked or unparked, `time_wait.rs`).
    pub(crate) fn repoint(&mut self, tuple: &FourTuple, from: u32, to: u32) {
        self.last.set(None);
        let tag = self.tag(tuple);
        if let Some(entry) = self
            .table
            .find_mut(spread(tag), |e| e.index == from && e.tag == tag)
        {
            entry.index = to;
        }
    }

    /// Connections in the table.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Give back room beyond what `min` entries need.
    pub(crate) fn shrink_to(&mut self, min: usize) {
        self.table.shrink_to(min, |e| spread(e.tag));
    }

    /// Every connection's slot index, in no particular order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.table.iter().map(|e| e.index)
    }
}

/// Builds [`TupleHasher`]s with one secret key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TupleHash {
    key: u64,
}

impl TupleHash {
    fn build_hasher(&self) -> TupleHasher {
        TupleHasher { state: self.key }
    }
}

/// Folds words into 64 bits, then mixes (splitmix64's finaliser).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TupleHasher {
    state: u64,
}

impl TupleHasher {
    #[inline]
    fn absorb(&mut self, word: u64) {
        self.state = (self.state ^ word)
            .rotate_left(23)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn finish(&self) -> u64 {
        crate::rng::splitmix64_mix(self.state)
    }
}

#[cfg(test)]
mod tests {
    use core::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    use super::*;

    #[test]
    fn tuples_that_differ_in_one_field_hash_apart() {
        let map = ConnMap::new(7);
        let tuple = |a: u8, port: u16| -> FourTuple {
            (
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, a), 80).into(),
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port).into(),
            )
        };
        let base = map.hash(&tuple(1, 50_000));
        assert_ne!(base, map.hash(&tuple(1, 50_001)));
        assert_ne!(base, map.hash(&tuple(3, 50_000)));
        assert_ne!(base, ConnMap::new(8).hash(&tuple(1, 50_000)));
        let six = |a: u16, port: u16| -> FourTuple {
            (
                SocketAddrV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, a), 80, 0, 0).into(),
                SocketAddrV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), port, 0, 0).into(),
            )
        };
        let base = map.hash(&six(1, 50_000));
        assert_ne!(base, map.hash(&six(1, 50_001)));
        assert_ne!(base, map.hash(&six(3, 50_000)));
        // The same port, or address bits that a v4 tuple packs alike, in the other family.
        let (l, r) = six(1, 50_000);
        assert_ne!(map.hash(&(r, l)), base);
    }

    #[test]
    fn entries_find_their_connection_through_the_index_only() {
        let tuple = |port: u16| -> FourTuple {
            (
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80).into(),
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port).into(),
            )
        };
        let handle = |index: u32| TcpHandle {
            index,
            generation: 3,
        };
        // The "slab": slot i holds tuple(1000 + i), while `live` says so.
        let mut live = [true; 300];
        let mut map = ConnMap::new(99);
        let of = |live: &[bool; 300], i: u32, t: &FourTuple| {
            (live[i as usize] && tuple(1000 + i as u16) == *t).then(|| handle(i))
        };
        // Growing the table (300 entries from empty) looks at no connection: the
        // stored tags are what it hashes by, and no other entry's tag is a new tuple's.
        let asked = Cell::new(0);
        for i in 0..300u32 {
            map.insert(tuple(1000 + i as u16), handle(i), |j, t| {
                asked.set(asked.get() + 1);
                of(&live, j, t)
            });
        }
        assert_eq!(map.len(), 300);
        assert_eq!(asked.get(), 0);
        for i in 0..300u32 {
            assert_eq!(
                map.get(&tuple(1000 + i as u16), |j, t| of(&live, j, t)),
                Some(handle(i))
            );
        }
        assert_eq!(map.get(&tuple(999), |j, t| of(&live, j, t)), None);
        // A slot that holds no connection any more matches nothing.
        live[7] = false;
        assert_eq!(map.get(&tuple(1007), |j, t| of(&live, j, t)), None);
        // Removal is by tuple and handle: another handle does not remove the entry.
        assert!(!map.remove(&tuple(1008), handle(9)));
        assert!(map.remove(&tuple(1008), handle(8)));
        assert_eq!(map.get(&tuple(1008), |j, t| of(&live, j, t)), None);
        assert_eq!(
            map.get(&tuple(1009), |j, t| of(&live, j, t)),
            Some(handle(9))
        );
        assert_eq!(map.len(), 299);
        // Inserting a tuple again replaces its entry.
        map.insert(tuple(1009), handle(9), |j, t| of(&live, j, t));
        assert_eq!(map.len(), 299);
        map.shrink_to(0);
        assert_eq!(map.indices().count(), 299);
        for i in (0..300u32).filter(|&i| i != 7 && i != 8) {
            assert_eq!(
                map.get(&tuple(1000 + i as u16), |j, t| of(&live, j, t)),
                Some(handle(i))
            );
        }
    }
}
