//! `ndp`: arbitrary bytes as the body of a neighbour discovery or MLD message, so the
//! fuzzer spends its time in the option and record parsers rather than finding the
//! types. The first byte picks the type (RS, RA, NS, NA, Redirect, MLD query, report,
//! done, v2 report); the rest, from byte 4 on, is the message after type, code and
//! checksum. Then the `icmpv6` checks.

const TYPES: [u8; 9] = [133, 134, 135, 136, 137, 130, 131, 132, 143];

/// Run one input.
pub fn run(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let mut bytes = vec![TYPES[usize::from(pick) % TYPES.len()], 0, 0, 0];
    bytes.extend_from_slice(body);
    if bytes.len() < 8 {
        return;
    }
    let mut packet = impnet_wire::icmpv6::Packet::new_unchecked(&mut bytes[..]);
    packet.fill_checksum(&crate::icmpv6::SRC, &crate::icmpv6::DST);
    crate::icmpv6::check(&bytes);
}
