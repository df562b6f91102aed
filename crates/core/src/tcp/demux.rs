//! The 4-tuple demultiplexing table: a hash table, so finding a segment's connection
//! costs the same with one connection or a hundred thousand.
//!
//! The hash is keyed from the stack's secret (RFC 6528's reasoning for ISNs applies: a
//! peer that cannot predict the hash cannot pick tuples that collide) and cheap: the
//! tuple packs into 96 bits, mixed with two multiplications.
//!
//! An entry is 16 bytes, the handle and the tuple's hash; the tuple itself is the
//! connection's own `(local, remote)`, which the caller looks up through its handle
//! (`has_tuple`). A map holding the tuples (64 bytes of two `SocketAddr`s) cost 95 bytes
//! per connection at 100k; this costs 22.

use core::cell::Cell;
use core::net::SocketAddr;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::{FourTuple, TcpHandle};

/// One connection's entry: its handle and its tuple's hash.
#[derive(Debug, Clone, Copy)]
struct Slot {
    hash: u64,
    handle: TcpHandle,
}

/// Connections by (local, remote).
#[derive(Debug)]
pub(crate) struct ConnMap {
    table: HashTable<Slot>,
    build: TupleHash,
    /// The entry `get` found last, tried first (a segment's connection is most often
    /// the one of the segment before; 4.3BSD's one-behind PCB cache). Cleared by every
    /// insert and remove, so it is always an entry of `table`; a tuple has at most one
    /// entry, so a match here is what the table's search would find.
    last: Cell<Option<Slot>>,
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
    fn hash(&self, (local, remote): &FourTuple) -> u64 {
        let mut h = self.build.build_hasher();
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

    /// The connection of `tuple`. `has_tuple(handle, tuple)` says whether `handle` names
    /// a connection whose tuple is `tuple`.
    #[inline]
    pub(crate) fn get(
        &self,
        tuple: &FourTuple,
        has_tuple: impl Fn(TcpHandle, &FourTuple) -> bool,
    ) -> Option<TcpHandle> {
        let hash = self.hash(tuple);
        let matches = |s: &Slot| s.hash == hash && has_tuple(s.handle, tuple);
        if let Some(last) = self.last.get()
            && matches(&last)
        {
            return Some(last.handle);
        }
        let found = self.table.find(hash, matches).copied();
        if found.is_some() {
            self.last.set(found);
        }
        found.map(|s| s.handle)
    }

    /// Whether some connection has `tuple`.
    pub(crate) fn contains(
        &self,
        tuple: &FourTuple,
        has_tuple: impl Fn(TcpHandle, &FourTuple) -> bool,
    ) -> bool {
        self.get(tuple, has_tuple).is_some()
    }

    /// `handle` is the connection of `tuple` (replacing any other; `has_tuple` must
    /// already be true of `handle` and `tuple`).
    pub(crate) fn insert(
        &mut self,
        tuple: FourTuple,
        handle: TcpHandle,
        has_tuple: impl Fn(TcpHandle, &FourTuple) -> bool,
    ) {
        self.last.set(None);
        let hash = self.hash(&tuple);
        match self.table.entry(
            hash,
            |s| s.hash == hash && has_tuple(s.handle, &tuple),
            |s| s.hash,
        ) {
            Entry::Occupied(mut entry) => entry.get_mut().handle = handle,
            Entry::Vacant(entry) => {
                entry.insert(Slot { hash, handle });
            }
        }
    }

    /// Forget `tuple` if `handle` is its connection; whether it was.
    pub(crate) fn remove(&mut self, tuple: &FourTuple, handle: TcpHandle) -> bool {
        self.last.set(None);
        let hash = self.hash(tuple);
        match self
            .table
            .find_entry(hash, |s| s.hash == hash && s.handle == handle)
        {
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

    /// Give back room beyond what `min` entries need.
    pub(crate) fn shrink_to(&mut self, min: usize) {
        self.table.shrink_to(min, |s| s.hash);
    }

    /// Every connection's handle, in no particular order.
    pub(crate) fn handles(&self) -> impl Iterator<Item = TcpHandle> + '_ {
        self.table.iter().map(|s| s.handle)
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
            let of = |h: TcpHandle, t: &FourTuple| {
                live[h.index as usize] && tuple(1000 + h.index as u16) == *t
            };
            map.insert(tuple(1000 + i as u16), handle(i), of);
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
        map.shrink_to(0);
        assert_eq!(map.handles().count(), 299);
    }
}
