//! TYPE A (RFC 959 §3.1.1.1): the network form of a text file ends every line with
//! CRLF. A server on a system whose lines end in LF adds a CR before every LF it sends
//! and takes the CR of every CRLF it receives away.
//!
//! The two directions are exact inverses for any bytes: [`to_network`] turns every LF
//! into CRLF (a CR already before it stays, so a file's own CRLF goes out as CR CR LF),
//! and [`FromNetwork`] turns every CRLF into LF and keeps any other CR. A CR at the end
//! of one buffer is held until the next byte (or the end of the stream) says whether
//! it began a CRLF, so the result does not depend on how the stream was cut.

/// Appends the network form of `data` (every LF as CRLF) to `out`.
pub fn to_network(data: &[u8], out: &mut Vec<u8>) {
    out.reserve(data.len() + data.len() / 32);
    let mut rest = data;
    while let Some(at) = rest.iter().position(|&b| b == b'\n') {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// The number of bytes the network form of `data` takes (what SIZE reports in TYPE A,
/// RFC 3659 §4).
pub fn network_len(data: &[u8]) -> u64 {
    data.len() as u64 + data.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Network form back to the file's form, one buffer at a time (CRLF becomes LF).
#[derive(Debug, Clone, Default)]
pub struct FromNetwork {
    /// The last buffer ended in a CR not yet known to start a CRLF.
    pending_cr: bool,
}

impl FromNetwork {
    /// A translator at the start of a stream.
    pub fn new() -> FromNetwork {
        FromNetwork::default()
    }

    /// Appends the file form of the next piece of the stream to `out`.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<u8>) {
        out.reserve(data.len());
        for &b in data {
            if self.pending_cr {
                self.pending_cr = false;
                if b != b'\n' {
                    out.push(b'\r');
                }
            }
            if b == b'\r' {
                self.pending_cr = true;
            } else {
                out.push(b);
            }
        }
    }

    /// The end of the stream: a CR held back is a plain CR after all.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.pending_cr) {
            out.push(b'\r');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        to_network(data, &mut out);
        out
    }

    #[test]
    fn lines_get_crlf_and_lose_it_again() {
        assert_eq!(net(b"a\nb\n"), b"a\r\nb\r\n");
        assert_eq!(net(b"a\r\nb"), b"a\r\r\nb");
        assert_eq!(network_len(b"a\nb\n"), 6);
        let mut back = FromNetwork::new();
        let mut out = Vec::new();
        back.push(b"a\r", &mut out);
        assert_eq!(out, b"a", "the CR waits for the next byte");
        back.push(b"\nb\r", &mut out);
        back.push(b"c\r", &mut out);
        back.finish(&mut out);
        assert_eq!(out, b"a\nb\rc\r");
    }

    proptest! {
        /// Any file survives the round trip, however the network form is cut.
        #[test]
        fn round_trip_is_exact_across_any_cuts(
            data in proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), any::<u8>()], 0..400),
            cuts in proptest::collection::vec(0usize..500, 0..8),
        ) {
            let wire = net(&data);
            prop_assert_eq!(wire.len() as u64, network_len(&data));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wire.len())).collect();
            cuts.sort_unstable();
            let mut back = FromNetwork::new();
            let mut out = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([wire.len()]) {
                back.push(&wire[from..cut], &mut out);
                from = cut;
            }
            back.finish(&mut out);
            prop_assert_eq!(out, data);
        }
    }
}
