//! The 4-tuple demultiplexing table: a hash table, so finding a segment's connection
//! costs the same with one connection or a hundred thousand.
//!
//! The hash is keyed from the stack's secret (RFC 6528's reasoning for ISNs applies: a
//! peer that cannot predict the hash cannot pick tuples that collide) and cheap: the
//! tuple packs into 96 bits, mixed with two multiplications.
//!
//! An entry is 16 bytes, the handle and the tuple's hash; the tuple itself is the
//! connection's own `(local, remote)`, which the caller looks up through its handle
//! (`tuple_of`). A map holding the tuples (64 bytes of two `SocketAddr`s) cost 95 bytes
//! per connection at 100k; this costs 22.

use core::hash::{BuildHasher, Hasher};

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
}

impl ConnMap {
    /// A new, empty map whose hash is keyed by `key`.
    pub(crate) fn new(key: u64) -> ConnMap {
        ConnMap {
            table: HashTable::new(),
            build: TupleHash { key },
        }
    }

    fn hash(&self, tuple: &FourTuple) -> u64 {
        self.build.hash_one(tuple)
    }

    /// The connection of `tuple`. `tuple_of` gives a handle's connection's tuple (`None`
    /// for a handle that names no connection).
    #[inline]
    pub(crate) fn get(
        &self,
        tuple: &FourTuple,
        tuple_of: impl Fn(TcpHandle) -> Option<FourTuple>,
    ) -> Option<TcpHandle> {
        let hash = self.hash(tuple);
        self.table
            .find(hash, |s| {
                s.hash == hash && tuple_of(s.handle).is_some_and(|t| t == *tuple)
            })
            .map(|s| s.handle)
    }

    /// Whether some connection has `tuple`.
    pub(crate) fn contains(
        &self,
        tuple: &FourTuple,
        tuple_of: impl Fn(TcpHandle) -> Option<FourTuple>,
    ) -> bool {
        self.get(tuple, tuple_of).is_some()
    }

    /// `handle` is the connection of `tuple` (replacing any other; `tuple_of` must
    /// already give `tuple` for `handle`).
    pub(crate) fn insert(
        &mut self,
        tuple: FourTuple,
        handle: TcpHandle,
        tuple_of: impl Fn(TcpHandle) -> Option<FourTuple>,
    ) {
        let hash = self.hash(&tuple);
        match self.table.entry(
            hash,
            |s| s.hash == hash && tuple_of(s.handle).is_some_and(|t| t == tuple),
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

impl BuildHasher for TupleHash {
    type Hasher = TupleHasher;
    fn build_hasher(&self) -> TupleHasher {
        TupleHasher { state: self.key }
    }
}

/// Folds what `Hash` feeds it into 64 bits, then mixes (splitmix64's finaliser).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TupleHasher {
    state: u64,
}

impl TupleHasher {
    fn absorb(&mut self, word: u64) {
        self.state = (self.state ^ word)
            .rotate_left(23)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Hasher for TupleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.absorb(u64::from_le_bytes(word));
        }
    }
    fn write_u16(&mut self, n: u16) {
        self.absorb(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.absorb(u64::from(n));
    }
    fn finish(&self) -> u64 {
        crate::rng::splitmix64_mix(self.state)
    }
}

#[cfg(test)]
mod tests {
    use core::net::{Ipv4Addr, SocketAddrV4};

    use super::*;

    #[test]
    fn tuples_that_differ_in_one_field_hash_apart() {
        let build = TupleHash { key: 7 };
        let tuple = |a: u8, port: u16| {
            (
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, a), 80),
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port),
            )
        };
        let base = build.hash_one(tuple(1, 50_000));
        assert_ne!(base, build.hash_one(tuple(1, 50_001)));
        assert_ne!(base, build.hash_one(tuple(3, 50_000)));
        assert_ne!(base, TupleHash { key: 8 }.hash_one(tuple(1, 50_000)));
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
            let of = |h: TcpHandle| live[h.index as usize].then(|| tuple(1000 + h.index as u16));
            map.insert(tuple(1000 + i as u16), handle(i), of);
        }
        assert_eq!(map.len(), 300);
        let of = |h: TcpHandle| live[h.index as usize].then(|| tuple(1000 + h.index as u16));
        for i in 0..300u32 {
            assert_eq!(map.get(&tuple(1000 + i as u16), of), Some(handle(i)));
        }
        assert_eq!(map.get(&tuple(999), of), None);
        // A handle that names no connection any more matches nothing.
        live[7] = false;
        let of = |h: TcpHandle| live[h.index as usize].then(|| tuple(1000 + h.index as u16));
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
