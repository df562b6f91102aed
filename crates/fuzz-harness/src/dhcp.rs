//! `dhcp`: arbitrary bytes as a DHCP message. `Repr::parse` must succeed or return an
//! error, never panic; what parses re-emits to bytes that parse to the same `Repr`.

use impnet_wire::dhcp::Repr;

/// Run one input.
pub fn run(data: &[u8]) {
    let Ok(repr) = Repr::parse(data) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out);
    // Client id and parameter list are at most 255 bytes in an option, so what
    // parsed re-emits whole.
    assert_eq!(Repr::parse(&out), Ok(repr));
}
