//! IPv4: whatever parses (checksum unchecked) re-emits to a header that parses the
//! same with its checksum verified.
#![no_main]

use impnet_wire::ipv4::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.options(), packet.payload(), packet.verify_checksum());
    let _ = Repr::parse(&packet, true);
    let Ok(repr) = Repr::parse(&packet, false) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    let again = Packet::new_checked(&out[..]).expect("emitted header checks");
    assert_eq!(Repr::parse(&again, true), Ok(repr));
});
