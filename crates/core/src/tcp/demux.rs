//! The 4-tuple demultiplexing table: a hash map, so finding a segment's connection
//! costs the same with one connection or a hundred thousand.
//!
//! The hash is keyed from the stack's secret (RFC 6528's reasoning for ISNs applies: a
//! peer that cannot predict the hash cannot pick tuples that collide) and cheap: the
//! tuple packs into 96 bits, mixed with two multiplications.

use core::hash::{BuildHasher, Hasher};

use super::{FourTuple, TcpHandle};

/// Connections by (local, remote).
pub(crate) type ConnMap = hashbrown::HashMap<FourTuple, TcpHandle, TupleHash>;

/// A new, empty map whose hash is keyed by `key`.
pub(crate) fn conn_map(key: u64) -> ConnMap {
    hashbrown::HashMap::with_hasher(TupleHash { key })
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
}
