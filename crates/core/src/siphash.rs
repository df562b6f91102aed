//! SipHash-2-4 (Aumasson and Bernstein, 2012), written out here so the core needs no
//! dependency: the keyed hash behind `Secret::derive`, initial sequence numbers, SYN
//! cookies and flow hashing.

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
    hash(k0, k1, data)
}

/// [`siphash24`] of an array, its length known where it is called: the words and the
/// tail are read at fixed offsets, with no copy of a length known only at run time (an
/// IPv4 connection's ISN hashes 12 bytes per connection).
#[inline]
pub fn siphash24_array<const N: usize>(k0: u64, k1: u64, data: &[u8; N]) -> u64 {
    hash(k0, k1, data)
}

/// The body of [`siphash24`], inlined where the length is a constant.
#[inline(always)]
fn hash(k0: u64, k1: u64, data: &[u8]) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let seven: &[u8; 7] = message[..7].try_into().unwrap();
        let sixteen: &[u8; 16] = &message;
        assert_eq!(siphash24_array(K0, K1, seven), 0xab02_00f5_8b01_d137);
        assert_eq!(siphash24_array(K0, K1, sixteen), 0x3f2a_cc7f_57c2_9bdb);
    }
}
