//! `icmpv6`: arbitrary bytes as an ICMPv6 message between two fixed addresses. The
//! checksum is filled in first, so the input reaches the parsers behind it: every
//! message type (errors, echo, neighbour discovery, MLD) must parse or fail with an
//! error, never panic, and what parses re-emits to a message that parses the same.

use std::net::Ipv6Addr;

use impnet_wire::icmpv6::{Packet, Repr};

/// Source of the messages.
pub const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// Destination of the messages.
pub const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// Run one input.
pub fn run(data: &[u8]) {
    let mut bytes = data.to_vec();
    let Ok(mut packet) = Packet::new_checked(&mut bytes[..]) else {
        return;
    };
    packet.fill_checksum(&SRC, &DST);
    check(&bytes);
}

/// Parses a message whose checksum is right; what parses must round-trip.
pub fn check(bytes: &[u8]) {
    let packet = Packet::new_checked(bytes).expect("checked by the caller");
    assert!(packet.verify_checksum(&SRC, &DST));
    let _ = (
        packet.msg_type(),
        packet.data(),
        packet.mtu(),
        packet.pointer(),
    );
    let Ok(repr) = Repr::parse(&packet, &SRC, &DST) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST);
    let again = Packet::new_checked(&out[..]).expect("an emitted message checks");
    assert_eq!(Repr::parse(&again, &SRC, &DST), Ok(repr), "{out:02x?}");
}
