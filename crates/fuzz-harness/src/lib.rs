//! The fuzz targets' logic, outside the cargo-fuzz crate: `fuzz/fuzz_targets/*.rs` call
//! these functions under libFuzzer (nightly), and `tests/fuzz_corpus.rs` runs every
//! committed input under `fuzz/corpus/<target>/` through them on stable, so CI replays
//! the corpus without a nightly toolchain.
//!
//! Every function takes arbitrary bytes: any input is valid (bytes past the end read as
//! zero), and a failed check is a panic.

pub mod dhcp;
pub mod dns;
pub mod icmpv6;
pub mod igmp;
pub mod ipv6;
pub mod ndp;
pub mod reassembly;
pub mod scenario_parse;
pub mod sim_impair;
pub mod tcp_conn;

/// A cursor over the fuzzer's bytes that reads zeros once they run out.
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// Up to `n` of the next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }
}
