//! Initial sequence numbers (RFC 6528): a 4-microsecond clock plus a keyed hash of the
//! connection's 4-tuple, so ISNs advance with time yet cannot be guessed off-path.
//!
//! The keyed hash is SipHash-2-4 ([`crate::siphash`]); the key is the stack's
//! [`Secret`], so the same secret gives the same ISNs (the simulator, which derives it
//! from its seed, replays runs byte for byte).

use core::fmt;
use core::net::SocketAddr;

use crate::secret::Secret;
use crate::siphash::{siphash24, siphash24_array};
use crate::time::Instant;

use super::seq::SeqNumber;

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
        if let (SocketAddr::V4(l), SocketAddr::V4(r)) = (local, remote) {
            // IPv4: 4 + 2 + 4 + 2 bytes, at offsets fixed at compile time (the same
            // bytes the general loop below lays out, hashed by the same function).
            let mut tuple = [0u8; 12];
            tuple[..4].copy_from_slice(&l.ip().octets());
            tuple[4..6].copy_from_slice(&l.port().to_be_bytes());
            tuple[6..10].copy_from_slice(&r.ip().octets());
            tuple[10..].copy_from_slice(&r.port().to_be_bytes());
            return siphash24_array(self.key.0, self.key.1, &tuple);
        }
        // IPv6 (or a mixed pair): 16 + 2 + 16 + 2 bytes.
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
    fn the_hash_is_siphash_of_the_tuples_bytes() {
        let secret = Secret::from_bytes([42; 16]);
        let g = IsnGenerator::new(&secret);
        let key = secret.key();
        // IPv4 (the fixed-offset path): local address, port, remote address, port.
        let v4 = [10, 0, 0, 1, 0, 80, 10, 0, 0, 2, 0x13, 0x88];
        assert_eq!(
            g.connection_hash(addr(1, 80), addr(2, 5000)),
            siphash24(key.0, key.1, &v4)
        );
        // IPv6: the same layout with 16-byte addresses.
        let (l6, r6) = (
            core::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            core::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
        );
        let mut v6 = [0u8; 36];
        v6[..16].copy_from_slice(&l6.octets());
        v6[16..18].copy_from_slice(&80u16.to_be_bytes());
        v6[18..34].copy_from_slice(&r6.octets());
        v6[34..].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(
            g.connection_hash((l6, 80).into(), (r6, 5000).into()),
            siphash24(key.0, key.1, &v6)
        );
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
