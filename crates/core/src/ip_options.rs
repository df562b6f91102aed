//! The IPv4 Record Route and Timestamp options (RFC 791 §3.1): building them for
//! datagrams we send, filling them in at every hop, and reading what the hops wrote.
//!
//! Pure functions over option bytes; the stack calls them when it forwards a datagram,
//! answers an echo request, or sends one with options.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

/// End of option list.
const END: u8 = 0;
/// No operation (padding between options).
const NOP: u8 = 1;
/// Record Route.
pub const RECORD_ROUTE: u8 = 7;
/// Internet Timestamp.
pub const TIMESTAMP: u8 = 68;

/// Room for options in an IPv4 header (60 - 20 bytes).
pub const MAX_OPTIONS_LEN: usize = 40;

/// What the Timestamp option's hops record (its flag field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampKind {
    /// Flag 0: timestamps only.
    Only,
    /// Flag 1: each hop's address and its timestamp.
    WithAddress,
}

/// A Record Route option with room for `slots` addresses (1 to 9), 4-byte aligned
/// with a trailing end-of-list byte.
pub fn record_route(slots: usize) -> Vec<u8> {
    let slots = slots.clamp(1, 9);
    let len = 3 + 4 * slots;
    let mut option = Vec::with_capacity(len + 1);
    option.extend_from_slice(&[RECORD_ROUTE, len as u8, 4]);
    option.resize(len, 0);
    pad(&mut option);
    option
}

/// A Timestamp option with as many slots as fit in `MAX_OPTIONS_LEN`: 9 timestamps, or
/// 4 address and timestamp pairs.
pub fn timestamp(kind: TimestampKind) -> Vec<u8> {
    let (flag, len) = match kind {
        TimestampKind::Only => (0u8, 4 + 4 * 9),
        TimestampKind::WithAddress => (1u8, 4 + 8 * 4),
    };
    let mut option = Vec::with_capacity(len);
    option.extend_from_slice(&[TIMESTAMP, len as u8, 5, flag]);
    option.resize(len, 0);
    pad(&mut option);
    option
}

/// Pad options to a multiple of 4 bytes with end-of-list.
fn pad(option: &mut Vec<u8>) {
    while !option.len().is_multiple_of(4) {
        option.push(END);
    }
}

/// A malformed option: the offset within the IPv4 header (20 + offset within the
/// options) an ICMP Parameter Problem points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadOption {
    /// Offset of the offending byte from the start of the IPv4 header.
    pub pointer: u8,
}

/// The options in `options` one by one: `(kind, start, len)` of each (NOPs skipped,
/// the walk ends at end-of-list), or the error of the first malformed one (a length
/// missing, below 2 or running out of the header).
fn walk(options: &[u8]) -> impl Iterator<Item = Result<(u8, usize, usize), BadOption>> + '_ {
    let mut at = 0;
    let mut done = false;
    core::iter::from_fn(move || {
        while !done && at < options.len() {
            let kind = options[at];
            if kind == END {
                break;
            }
            if kind == NOP {
                at += 1;
                continue;
            }
            let len = options.get(at + 1).map(|&l| usize::from(l));
            let Some(len) = len.filter(|&l| l >= 2 && at + l <= options.len()) else {
                done = true;
                let pointer = if len.is_none() { 20 + at } else { 21 + at };
                return Some(Err(BadOption {
                    pointer: pointer as u8,
                }));
            };
            let start = at;
            at += len;
            return Some(Ok((kind, start, len)));
        }
        None
    })
}

/// Fill in our part of every Record Route and Timestamp option in `options` (the bytes
/// after the fixed 20-byte header): `addr` is the address we record (the interface the
/// datagram leaves by), `stamp` the timestamp (RFC 791: milliseconds since midnight UT,
/// or any time with the high bit set when that is not known). Returns whether any byte
/// changed (then the header checksum needs recomputing). Options other than these two
/// are walked past unchanged; a length that runs out of the header is an error.
pub fn stamp(options: &mut [u8], addr: Ipv4Addr, stamp: u32) -> Result<bool, BadOption> {
    let found: Vec<_> = walk(options).collect::<Result<_, _>>()?;
    let mut changed = false;
    for (kind, at, len) in found {
        let option = &mut options[at..at + len];
        changed |= match kind {
            RECORD_ROUTE => stamp_record_route(option, addr, at)?,
            TIMESTAMP => stamp_timestamp(option, addr, stamp, at)?,
            _ => false,
        };
    }
    Ok(changed)
}

fn pointer_error(at: usize) -> BadOption {
    BadOption {
        pointer: (22 + at) as u8,
    }
}

/// Record Route: write `addr` at the pointer and advance it by 4, unless full.
fn stamp_record_route(option: &mut [u8], addr: Ipv4Addr, at: usize) -> Result<bool, BadOption> {
    if option.len() < 3 {
        return Err(pointer_error(at));
    }
    let pointer = usize::from(option[2]);
    if pointer < 4 {
        return Err(pointer_error(at));
    }
    if pointer + 3 > option.len() {
        return Ok(false); // full: forwarded without recording (RFC 791)
    }
    option[pointer - 1..pointer + 3].copy_from_slice(&addr.octets());
    option[2] = (pointer + 4) as u8;
    Ok(true)
}

/// Timestamp: write (address and) timestamp at the pointer, or count an overflow.
fn stamp_timestamp(
    option: &mut [u8],
    addr: Ipv4Addr,
    stamp: u32,
    at: usize,
) -> Result<bool, BadOption> {
    if option.len() < 4 {
        return Err(pointer_error(at));
    }
    let pointer = usize::from(option[2]);
    let flag = option[3] & 0x0f;
    let slot = match flag {
        0 => 4,
        1 | 3 => 8,
        _ => {
            return Err(BadOption {
                pointer: (23 + at) as u8,
            });
        }
    };
    if pointer < 5 {
        return Err(pointer_error(at));
    }
    if pointer + slot - 1 > option.len() {
        // Full: count the hop in the overflow nibble; an overflowing overflow is a
        // parameter problem (RFC 791).
        let overflow = option[3] >> 4;
        if overflow == 15 {
            return Err(BadOption {
                pointer: (23 + at) as u8,
            });
        }
        option[3] = ((overflow + 1) << 4) | flag;
        return Ok(true);
    }
    let at_slot = pointer - 1;
    match flag {
        0 => option[at_slot..at_slot + 4].copy_from_slice(&stamp.to_be_bytes()),
        1 => {
            option[at_slot..at_slot + 4].copy_from_slice(&addr.octets());
            option[at_slot + 4..at_slot + 8].copy_from_slice(&stamp.to_be_bytes());
        }
        _ => {
            // Prespecified: only the named hop stamps.
            if option[at_slot..at_slot + 4] != addr.octets() {
                return Ok(false);
            }
            option[at_slot + 4..at_slot + 8].copy_from_slice(&stamp.to_be_bytes());
        }
    }
    option[2] = (pointer + slot) as u8;
    Ok(true)
}

/// A received datagram's IPv4 options, kept by value (at most 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpOptions {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl Default for IpOptions {
    fn default() -> IpOptions {
        IpOptions {
            bytes: [0; MAX_OPTIONS_LEN],
            len: 0,
        }
    }
}

impl IpOptions {
    /// The options of a header (`header[20..]`), cut at 40 bytes.
    pub fn from_header(header: &[u8]) -> IpOptions {
        let options = header.get(20..).unwrap_or_default();
        let len = options.len().min(MAX_OPTIONS_LEN);
        let mut bytes = [0; MAX_OPTIONS_LEN];
        bytes[..len].copy_from_slice(&options[..len]);
        IpOptions {
            bytes,
            len: len as u8,
        }
    }

    /// The option bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Fill in our hop (see [`stamp`]) and keep only the Record Route and Timestamp
    /// options (padded), as an echo reply carries them. False (and unchanged) when
    /// there are none or they are malformed.
    pub fn stamp(&mut self, addr: Ipv4Addr, timestamp: u32) -> bool {
        let mut kept = Vec::new();
        let options = self.as_slice();
        for option in walk(options) {
            let Ok((kind, at, len)) = option else {
                return false;
            };
            if kind == RECORD_ROUTE || kind == TIMESTAMP {
                kept.extend_from_slice(&options[at..at + len]);
            }
        }
        if kept.is_empty() || stamp(&mut kept, addr, timestamp).is_err() {
            return false;
        }
        pad(&mut kept);
        *self = IpOptions::from_header(&[&[0u8; 20][..], &kept].concat());
        true
    }

    /// What the hops recorded (see [`read`]).
    pub fn hops(&self) -> (Vec<Hop>, u8) {
        read(self.as_slice())
    }
}

/// One hop's entry in a received option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A Record Route entry.
    Route(Ipv4Addr),
    /// A Timestamp entry, with the address when the option records one.
    Stamp(Option<Ipv4Addr>, u32),
}

/// What the hops wrote in the Record Route and Timestamp options of a received header's
/// `options`, in order; and the Timestamp option's overflow count (hops that found it
/// full). Malformed options end the walk.
pub fn read(options: &[u8]) -> (Vec<Hop>, u8) {
    let mut hops = Vec::new();
    let mut overflow = 0;
    for (kind, at, len) in walk(options).map_while(Result::ok) {
        let option = &options[at..at + len];
        match kind {
            RECORD_ROUTE if len >= 3 => {
                let used = usize::from(option[2]).clamp(4, len + 1) - 4;
                for entry in option[3..3 + used].chunks_exact(4) {
                    hops.push(Hop::Route(addr_of(entry)));
                }
            }
            TIMESTAMP if len >= 4 => {
                overflow = option[3] >> 4;
                let used = usize::from(option[2]).clamp(5, len + 1) - 5;
                let data = &option[4..4 + used];
                if option[3] & 0x0f == 0 {
                    for entry in data.chunks_exact(4) {
                        hops.push(Hop::Stamp(None, be32(entry)));
                    }
                } else {
                    for entry in data.chunks_exact(8) {
                        hops.push(Hop::Stamp(Some(addr_of(&entry[..4])), be32(&entry[4..])));
                    }
                }
            }
            _ => {}
        }
    }
    (hops, overflow)
}

fn addr_of(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// The options a fragment after the first carries: those with the copied flag (RFC
/// 791 §3.2), padded to 4 bytes. Malformed options end the copy.
pub fn copied(options: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, at, len) in walk(options).map_while(Result::ok) {
        if kind & 0x80 != 0 {
            out.extend_from_slice(&options[at..at + len]);
        }
    }
    pad(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const R1: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
    const R2: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);

    #[test]
    fn record_route_fills_slots_then_stops_when_full() {
        let mut option = record_route(2);
        assert_eq!(option.len(), 12);
        assert_eq!(stamp(&mut option, R1, 0), Ok(true));
        assert_eq!(stamp(&mut option, R2, 0), Ok(true));
        assert_eq!(stamp(&mut option, Ipv4Addr::new(9, 9, 9, 9), 0), Ok(false));
        assert_eq!(read(&option).0, [Hop::Route(R1), Hop::Route(R2)]);
    }

    #[test]
    fn timestamps_with_addresses_then_overflow() {
        let mut option = timestamp(TimestampKind::WithAddress);
        for (i, hop) in [R1, R2, R1, R2].into_iter().enumerate() {
            assert_eq!(stamp(&mut option, hop, 100 + i as u32), Ok(true));
        }
        assert_eq!(stamp(&mut option, R1, 999), Ok(true));
        assert_eq!(stamp(&mut option, R1, 999), Ok(true));
        let (hops, overflow) = read(&option);
        assert_eq!(overflow, 2);
        assert_eq!(hops.len(), 4);
        assert_eq!(hops[1], Hop::Stamp(Some(R2), 101));
    }

    #[test]
    fn timestamps_only() {
        let mut option = timestamp(TimestampKind::Only);
        assert_eq!(stamp(&mut option, R1, 7), Ok(true));
        assert_eq!(read(&option), (alloc::vec![Hop::Stamp(None, 7)], 0));
    }

    #[test]
    fn malformed_options_are_errors_pointing_at_the_byte() {
        // Length running past the header.
        let mut options = [RECORD_ROUTE, 12, 4, 0];
        assert_eq!(stamp(&mut options, R1, 0), Err(BadOption { pointer: 21 }));
        // Pointer below the minimum.
        let mut options = [RECORD_ROUTE, 7, 1, 0, 0, 0, 0, 0];
        assert_eq!(stamp(&mut options, R1, 0), Err(BadOption { pointer: 22 }));
        // Bad timestamp flag.
        let mut options = [TIMESTAMP, 8, 5, 2, 0, 0, 0, 0];
        assert_eq!(stamp(&mut options, R1, 0), Err(BadOption { pointer: 23 }));
        // A lone option kind with no length.
        let mut options = [RECORD_ROUTE];
        assert!(stamp(&mut options, R1, 0).is_err());
    }

    #[test]
    fn other_options_are_left_alone_and_copied_options_survive_fragmentation() {
        // Security-like option with the copied bit (130), then NOPs and RR.
        let mut options = alloc::vec![130, 4, 0xaa, 0xbb, NOP, NOP, NOP, NOP];
        options.extend(record_route(1));
        let before = options.clone();
        assert_eq!(stamp(&mut options, R1, 0), Ok(true));
        assert_eq!(options[..8], before[..8]);
        assert_eq!(copied(&options), [130, 4, 0xaa, 0xbb]);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..20_000 {
            let len = usize::from(rng.next_u16() % 41);
            let mut options: Vec<u8> = (0..len).map(|_| rng.next_u16() as u8).collect();
            if len > 0 && rng.next_u16().is_multiple_of(2) {
                options[0] = [RECORD_ROUTE, TIMESTAMP][usize::from(rng.next_u16() % 2)];
            }
            let _ = stamp(&mut options, R1, 1);
            let _ = read(&options);
            let _ = copied(&options);
        }
    }
}
