//! ARP: whatever parses re-emits to a packet that parses the same.
#![no_main]

use impnet_wire::arp::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.source_hardware_addr(), packet.target_protocol_addr());
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    let again = Repr::parse(&Packet::new_checked(&out[..]).expect("emitted packet checks"));
    assert_eq!(again, Ok(repr));
});
