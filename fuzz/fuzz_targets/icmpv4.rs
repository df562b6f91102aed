//! ICMPv4: whatever parses re-emits to a message that parses the same (a quoted
//! datagram is already cut to header + 8 by the first parse).
#![no_main]

use impnet_wire::icmpv4::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.data(), packet.next_hop_mtu());
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    let again = Repr::parse(&Packet::new_checked(&out[..]).expect("emitted message checks"));
    assert_eq!(again, Ok(repr));
});
