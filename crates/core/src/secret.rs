//! The stack's secret: the key of every choice an off-path attacker must not predict.
//!
//! RFC 6528 §3 keys initial sequence numbers with "a secret key"; RFC 6056 §3.3.3 keys
//! ephemeral ports the same way; the 4-tuple hash, IP identifications and the
//! challenge-ACK budget come from it too. There is no default: a fixed key would make all
//! of these public for every embedder who kept it. The caller supplies the bytes:
//! - a real stack draws them from the operating system's random source (the `impnet`
//!   runtime reads `/dev/urandom` in `Runtime::new`);
//! - the simulator and the tests derive them from their seed (`impnet_sim` documents the
//!   derivation), so a run replays byte for byte.

use core::fmt;

use crate::siphash::siphash24;

/// The stack's 128-bit secret key. Never printed; no `Default`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The key as two little-endian words (the SipHash key layout).
    key: (u64, u64),
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret").finish_non_exhaustive()
    }
}

impl Secret {
    /// Bytes a secret is made of: 128 bits, as RFC 6528 §3 recommends for its key.
    pub const LEN: usize = 16;

    /// A secret made of `bytes`, which must be unpredictable (from the operating
    /// system's random source) unless the stack is meant to be reproducible.
    pub fn from_bytes(bytes: [u8; Secret::LEN]) -> Secret {
        let mut low = [0u8; 8];
        let mut high = [0u8; 8];
        low.copy_from_slice(&bytes[..8]);
        high.copy_from_slice(&bytes[8..]);
        Secret {
            key: (u64::from_le_bytes(low), u64::from_le_bytes(high)),
        }
    }

    /// The 128-bit key, for SipHash.
    pub(crate) fn key(&self) -> (u64, u64) {
        self.key
    }

    /// 64 bits for the use named by `label`: SipHash-2-4 of the label under the secret,
    /// so keys for different uses are unrelated and none reveals the secret.
    pub(crate) fn derive(&self, label: &[u8]) -> u64 {
        siphash24(self.key.0, self.key.1, label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_depend_on_secret_and_label() {
        let a = Secret::from_bytes([1; 16]);
        let b = Secret::from_bytes([2; 16]);
        assert_ne!(a.derive(b"rng"), b.derive(b"rng"));
        assert_ne!(a.derive(b"rng"), a.derive(b"ports"));
        assert_eq!(a.derive(b"rng"), a.clone().derive(b"rng"));
    }

    #[test]
    fn debug_hides_the_key() {
        let text = alloc::format!("{:?}", Secret::from_bytes([0xab; 16]));
        assert!(!text.contains("171") && !text.contains("ab"), "{text}");
    }
}
