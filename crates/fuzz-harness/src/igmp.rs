//! `igmp`: arbitrary bytes as an IGMP message. The checksum is filled in first, so the
//! input reaches the parsers behind it: every message (queries of each version, v1,
//! v2 and v3 reports, leaves) must parse or fail with an error, never panic, and what
//! parses re-emits to a message that parses the same.

use impnet_wire::igmp::{Packet, Repr};

/// Run one input.
pub fn run(data: &[u8]) {
    let mut bytes = data.to_vec();
    let Ok(mut packet) = Packet::new_checked(&mut bytes[..]) else {
        return;
    };
    packet.fill_checksum();
    check(&bytes);
}

/// Parses a message whose checksum is right; what parses must round-trip.
pub fn check(bytes: &[u8]) {
    let packet = Packet::new_checked(bytes).expect("checked by the caller");
    assert!(packet.verify_checksum());
    let _ = (
        packet.msg_type(),
        packet.max_resp_code(),
        packet.group_addr(),
    );
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    let again = Packet::new_checked(&out[..]).expect("an emitted message checks");
    assert_eq!(Repr::parse(&again), Ok(repr), "{out:02x?}");
}
