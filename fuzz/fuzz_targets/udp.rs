//! UDP: whatever parses (checksum unchecked) re-emits to a datagram that parses the
//! same with its checksum verified.
#![no_main]

use std::net::Ipv4Addr;

use impnet_wire::udp::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.payload(), Repr::parse(&packet, &SRC, &DST, true));
    let Ok(repr) = Repr::parse(&packet, &SRC, &DST, false) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST);
    let again = Packet::new_checked(&out[..]).expect("emitted datagram checks");
    assert_eq!(Repr::parse(&again, &SRC, &DST, true), Ok(repr));
});
