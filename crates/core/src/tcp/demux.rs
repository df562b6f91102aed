//! The 4-tuple demultiplexing table: a hash table, so finding a segment's connection
//! costs the same with one connection or a hundred thousand.
//!
//! The hash is keyed from the stack's secret (RFC 6528's reasoning for ISNs applies: a
//! peer that cannot predict the hash cannot pick tuples that collide) and cheap: the
//! tuple packs into 96 bits, mixed with two multiplications.
//!
//! An entry is the handle alone, 8 bytes; the tuple itself is the connection's own
//! `(local, remote)`, which the caller looks up through its handle (`has_tuple`), and
//! the hash is worked out again from it when the table grows (`tuple_of`). A map
//! holding the tuples (64 bytes of two `SocketAddr`s) cost 95 bytes per connection at
//! 100k; entries with their hash beside the handle (16 bytes) 22; this costs 11. The
//! table's own 7-bit tags filter the candidates, so a lookup compares about one tuple
//! (one in eight lookups at full load looks at a second connection).

use core::cell::Cell;
use core::net::SocketAddr;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::{FourTuple, TcpHandle};

/// Connections by (local, remote).
#[derive(Debug)]
pub(crate) struct ConnMap {
    table: HashTable<TcpHandle>,
    build: TupleHash,
    /// The entry `get` found last, with its tuple's hash, tried first (a segment's
    /// connection is most often the one of the segment before; 4.3BSD's one-behind PCB
    /// cache). Cleared by every insert and remove, so it is always an entry of `table`;
    /// a tuple has at most one entry, so a match here is what the table's search would
    /// find.
    last: Cell<Option<(u64, TcpHandle)>>,
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
    /// The connection of `tuple`. `has_tuple(handle, tuple)` says whether `handle` names
    /// a connection whose tuple is `tuple`.
    #[inline]
    pub(crate) fn get(
        &self,
        tuple: &FourTuple,
        has_tuple: impl Fn(TcpHandle, &FourTuple) -> bool,
    ) -> Option<TcpHandle> {
        let hash = self.hash(tuple);
        if let Some((last_hash, last)) = self.last.get()
            && last_hash == hash
            && has_tuple(last, tuple)
        {
            return Some(last);
        }
        let found = self.table.find(hash, |&h| has_tuple(h, tuple)).copied();
        if let Some(handle) = found {
            self.last.set(Some((hash, handle)));
        }
        found
    }

    /// Whether some connection has `tuple`.
    pub(crate) fn contains(
        &self,
        tuple: &FourTuple,
        has_tuple: impl Fn(TcpHandle, &FourTuple) -> bool,
    ) -> bool {
        self.get(tuple, has_tuple).is_some()
    }

    /// `handle` is the connection of `tuple` (replacing any other; `tuple_of(handle)`
    /// must already be `tuple`, and `tuple_of` give every entry's tuple, to hash them
    /// again when the table grows).
    pub(crate) fn insert(
        &mut self,
        tuple: FourTuple,
        handle: TcpHandle,
        tuple_of: impl Fn(TcpHandle) -> Option<FourTuple>,
    ) {
        self.last.set(None);
        let hash = self.hash(&tuple);
        let build = self.build;
        match self.table.entry(
            hash,
            |&h| tuple_of(h) == Some(tuple),
            |&h| tuple_of(h).map_or(0, |t| build.hash(&t)),
        ) {
            Entry::Occupied(mut entry) => *entry.get_mut() = handle,
            Entry::Vacant(entry) => {
                entry.insert(handle);
            }
        }
    }

    /// Forget `tuple` if `handle` is its connection; whether it was.
    pub(crate) fn remove(&mut self, tuple: &FourTuple, handle: TcpHandle) -> bool {
        self.last.set(None);
        let hash = self.hash(tuple);
        match self.table.find_entry(hash, |&h| h == handle) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Connections in the table.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Give back room beyond what `min` entries need (`tuple_of` as for `insert`).
    pub(crate) fn shrink_to(
        &mut self,
        min: usize,
        tuple_of: impl Fn(TcpHandle) -> Option<FourTuple>,
    ) {
        let build = self.build;
        self.table
            .shrink_to(min, |&h| tuple_of(h).map_or(0, |t| build.hash(&t)));
    }

    /// Every connection's handle, in no particular order.
    pub(crate) fn handles(&self) -> impl Iterator<Item = TcpHandle> + '_ {
        self.table.iter().copied()
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
    fn entries_find_their_connection_through_the_handle_only() {
        let tuple = |port: u16| -> FourTuple {
            (
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80).into(),
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port).into(),
            )
        };
        let handle = |index: u32| TcpHandle {
            index,
            generation: 0,
        };
        // The "slab": handle i has tuple(1000 + i), while `live` says so.
        let mut live = [true; 300];
        let mut map = ConnMap::new(99);
        for i in 0..300u32 {
            let tuple_of =
                |h: TcpHandle| live[h.index as usize].then(|| tuple(1000 + h.index as u16));
            map.insert(tuple(1000 + i as u16), handle(i), tuple_of);
        }
        assert_eq!(map.len(), 300);
        let of = |h: TcpHandle, t: &FourTuple| {
            live[h.index as usize] && tuple(1000 + h.index as u16) == *t
        };
        for i in 0..300u32 {
            assert_eq!(map.get(&tuple(1000 + i as u16), of), Some(handle(i)));
        }
        assert_eq!(map.get(&tuple(999), of), None);
        // A handle that names no connection any more matches nothing.
        live[7] = false;
        let of = |h: TcpHandle, t: &FourTuple| {
            live[h.index as usize] && tuple(1000 + h.index as u16) == *t
        };
        assert_eq!(map.get(&tuple(1007), of), None);
        // Removal is by tuple and handle: another handle does not remove the entry.
        assert!(!map.remove(&tuple(1008), handle(9)));
        assert!(map.remove(&tuple(1008), handle(8)));
        assert_eq!(map.get(&tuple(1008), of), None);
        assert_eq!(map.get(&tuple(1009), of), Some(handle(9)));
        assert_eq!(map.len(), 299);
        let tuple_of = |h: TcpHandle| live[h.index as usize].then(|| tuple(1000 + h.index as u16));
        map.shrink_to(0, tuple_of);
        assert_eq!(map.handles().count(), 299);
    }
}
