//! Initial sequence numbers (RFC 6528): a 4-microsecond clock plus a keyed hash of the
//! connection's 4-tuple, so ISNs advance with time yet cannot be guessed off-path.
//!
//! The keyed hash is SipHash-2-4 (Aumasson and Bernstein, 2012), written out here so the
//! core needs no dependency; the key is the stack's [`Secret`], so the same secret gives
//! the same ISNs (the simulator, which derives it from its seed, replays runs byte for
//! byte).

use core::fmt;
use core::net::SocketAddr;

use crate::secret::Secret;
use crate::time::Instant;

use super::seq::SeqNumber;

/// The SipHash round function on the state `v`.
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// Absorb one little-endian message word `m` with two compression rounds.
fn sip_compress(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    sip_round(v);
    sip_round(v);
    v[0] ^= m;
}

/// SipHash-2-4 of `data` under the 128-bit key `(k0, k1)` (the key's bytes read as two
/// little-endian words, as in the reference implementation).
pub fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    // "somepseudorandomlygeneratedbytes"
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        sip_compress(&mut v, u64::from_le_bytes(bytes));
    }
    let rest = words.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    // The final word carries the message length modulo 256 in its top byte.
    sip_compress(
        &mut v,
        u64::from_le_bytes(last) | ((data.len() as u64) << 56),
    );
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Generates RFC 6528 initial sequence numbers keyed by the stack's [`Secret`].
#[derive(Clone)]
pub struct IsnGenerator {
    /// The 128-bit secret key of F(), as two words; never printed.
    key: (u64, u64),
}

impl fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IsnGenerator").finish_non_exhaustive()
    }
}

impl IsnGenerator {
    /// A generator whose secret key is `secret` (all 128 bits: RFC 6528 §3 asks for a
    /// key of at least 128 bits).
    pub fn new(secret: &Secret) -> IsnGenerator {
        IsnGenerator { key: secret.key() }
    }

    /// F(localip, localport, remoteip, remoteport, secretkey) of RFC 6528 §3, all 64
    /// bits (the ISN uses the low 32).
    pub fn connection_hash(&self, local: SocketAddr, remote: SocketAddr) -> u64 {
        // IPv4: 4 + 2 + 4 + 2 bytes; IPv6: 16 + 2 + 16 + 2.
        let mut tuple = [0u8; 36];
        let mut ip = [0u8; 16];
        let mut at = 0;
        for end in [local, remote] {
            let n = super::addr_octets(end.ip(), &mut ip);
            tuple[at..at + n].copy_from_slice(&ip[..n]);
            tuple[at + n..at + n + 2].copy_from_slice(&end.port().to_be_bytes());
            at += n + 2;
        }
        siphash24(self.key.0, self.key.1, &tuple[..at])
    }

    /// The ISN for a connection from `local` to `remote` opened at `now`.
    ///
    /// RFC 6528 §3: "ISN = M + F(localip, localport, remoteip, remoteport, secretkey)
    /// where M is the 4 microsecond timer, and F() is a pseudorandom function (PRF) of
    /// the connection-id." M is `now` in units of 4 µs, modulo 2^32.
    pub fn isn(&self, now: Instant, local: SocketAddr, remote: SocketAddr) -> SeqNumber {
        let m = (now.as_nanos() / 4_000) as u32;
        SeqNumber(m.wrapping_add(self.connection_hash(local, remote) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, SocketAddrV4};

    const K0: u64 = 0x0706_0504_0302_0100;
    const K1: u64 = 0x0f0e_0d0c_0b0a_0908;

    #[test]
    fn siphash_matches_reference_vectors() {
        // vectors_sip64 of the reference implementation: key 00..0f, message 00..(n-1).
        let message: [u8; 16] = core::array::from_fn(|i| i as u8);
        let expected = [
            (0, 0x726f_db47_dd0e_0e31),
            (1, 0x74f8_39c5_93dc_67fd),
            (7, 0xab02_00f5_8b01_d137),
            (8, 0x93f5_f579_9a93_2462),
            (15, 0xa129_ca61_49be_45e5),
            (16, 0x3f2a_cc7f_57c2_9bdb),
        ];
        for (len, hash) in expected {
            assert_eq!(siphash24(K0, K1, &message[..len]), hash, "length {len}");
        }
    }

    fn addr(a: u8, port: u16) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, a), port).into()
    }

    #[test]
    fn isns_advance_every_four_microseconds() {
        let g = IsnGenerator::new(&Secret::from_bytes([42; 16]));
        let t = Instant::from_millis(1_000);
        let isn = g.isn(t, addr(1, 80), addr(2, 5000));
        assert_eq!(
            g.isn(
                t + crate::time::Duration::from_nanos(3_999),
                addr(1, 80),
                addr(2, 5000)
            ),
            isn
        );
        assert_eq!(
            g.isn(
                t + crate::time::Duration::from_micros(4),
                addr(1, 80),
                addr(2, 5000)
            ),
            isn + 1
        );
        assert_eq!(
            g.isn(
                t + crate::time::Duration::from_millis(4),
                addr(1, 80),
                addr(2, 5000)
            ),
            isn + 1000
        );
        // M wraps modulo 2^32 (about every 4.77 hours) without panicking.
        let late = Instant::from_nanos(u64::MAX);
        let _ = g.isn(late, addr(1, 80), addr(2, 5000));
    }

    #[test]
    fn different_tuples_and_seeds_get_unrelated_isns() {
        let g = IsnGenerator::new(&Secret::from_bytes([42; 16]));
        let t = Instant::ZERO;
        let base = g.isn(t, addr(1, 80), addr(2, 5000)).0;
        let others = [
            g.isn(t, addr(1, 80), addr(2, 5001)).0,
            g.isn(t, addr(1, 81), addr(2, 5000)).0,
            g.isn(t, addr(3, 80), addr(2, 5000)).0,
            g.isn(t, addr(2, 5000), addr(1, 80)).0,
            IsnGenerator::new(&Secret::from_bytes([43; 16]))
                .isn(t, addr(1, 80), addr(2, 5000))
                .0,
        ];
        for other in others {
            // A one-bit change of input flips about half of the output bits.
            let flipped = (base ^ other).count_ones();
            assert!((6..=26).contains(&flipped), "{base:08x} vs {other:08x}");
        }
        assert_eq!(
            IsnGenerator::new(&Secret::from_bytes([42; 16]))
                .isn(t, addr(1, 80), addr(2, 5000))
                .0,
            base
        );
        assert_eq!(alloc::format!("{g:?}"), "IsnGenerator { .. }");
    }
}
