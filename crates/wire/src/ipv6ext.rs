//! IPv6 extension headers (RFC 8200 §4): views of the hop-by-hop, routing, fragment
//! and destination options headers, their options, and [`walk`], which goes through
//! the chain after the fixed header to the upper-layer protocol.
//!
//! The walk applies RFC 8200's receive rules and says what to do when one fails:
//!
//! - hop-by-hop options only right after the fixed header (§4.1; elsewhere Parameter
//!   Problem code 1 at the Next Header field that named it, §4);
//! - an unrecognised option is skipped, or the packet discarded with or without a
//!   Parameter Problem code 2, as the option type's two high-order bits say (§4.2);
//! - a routing header with Segments Left 0 is ignored; with Segments Left above 0 its
//!   type is one this node does not implement (type 0 is deprecated, RFC 5095 §3, and
//!   handled as unrecognised), so Parameter Problem code 0 at the Routing Type (§4.4);
//! - a fragment header stops the walk (the core reassembles, then walks on from the
//!   reassembled payload with [`walk_from`]), except an atomic fragment (offset 0, no
//!   More Fragments), which is processed as a whole packet (RFC 6946 §4);
//! - at most [`MAX_HEADERS`] extension headers, each within the packet.
//!
//! Pointers are offsets from the first byte of the IPv6 header, as ICMPv6 Parameter
//! Problem carries them (RFC 4443 §3.4).

use core::fmt;

use crate::icmpv6::ParamProblem;
use crate::ipv6::{self, NextHeader};
use crate::{Error, Result};

/// Length of the fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;
/// Most extension headers [`walk`] goes through before giving up.
pub const MAX_HEADERS: usize = 8;
/// Option type of the Router Alert option (RFC 2711), which MLD messages carry.
pub const ROUTER_ALERT: u8 = 5;
/// Router Alert value for MLD (RFC 2711 §2.1).
pub const ROUTER_ALERT_MLD: u16 = 0;

/// A view of a hop-by-hop, routing or destination options header: Next Header, Hdr
/// Ext Len (in 8-octet units, not counting the first 8) and the data after them.
#[derive(Debug, Clone)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> ExtHeader<T> {
        ExtHeader { buffer }
    }

    /// Wraps a buffer and runs [`ExtHeader::check_len`].
    pub fn new_checked(buffer: T) -> Result<ExtHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Checks that the two length bytes and the whole header (at least 8 bytes) fit.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < 2 {
            return Err(Error::Truncated { need: 8, have });
        }
        let need = self.header_len();
        if need > have {
            return Err(Error::Truncated { need, have });
        }
        Ok(())
    }

    /// The header after this one.
    pub fn next_header(&self) -> NextHeader {
        NextHeader::from(self.buffer.as_ref()[0])
    }

    /// Length of this header in bytes: (Hdr Ext Len + 1) × 8.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }

    /// The bytes after Next Header and Hdr Ext Len: options, or a routing header's
    /// type, segments left and data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }

    /// Routing Type (for a routing header).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments Left (for a routing header).
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// The options of a hop-by-hop or destination options header.
    pub fn options(&self) -> Options<'_> {
        Options::new(self.data())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtHeader<T> {
    /// Sets the Next Header field.
    pub fn set_next_header(&mut self, value: NextHeader) {
        self.buffer.as_mut()[0] = value.into();
    }
}

/// What a node does with an option it does not recognise: the option type's two
/// high-order bits (RFC 8200 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionAction {
    /// 00: skip the option and go on.
    Skip,
    /// 01: discard the packet.
    Discard,
    /// 10: discard the packet and send Parameter Problem code 2 pointing at the option
    /// type, whatever the destination.
    DiscardAndReport,
    /// 11: discard the packet and send Parameter Problem code 2 only if the
    /// destination was not a multicast address.
    DiscardAndReportUnlessMulticast,
}

impl OptionAction {
    /// The action an option type asks for.
    pub const fn of(option_type: u8) -> OptionAction {
        match option_type >> 6 {
            0 => OptionAction::Skip,
            1 => OptionAction::Discard,
            2 => OptionAction::DiscardAndReport,
            _ => OptionAction::DiscardAndReportUnlessMulticast,
        }
    }

    /// True when a Parameter Problem goes to the source of a packet sent to a
    /// destination that is (`multicast`) or is not a multicast address.
    pub const fn reports(&self, multicast: bool) -> bool {
        match self {
            OptionAction::Skip | OptionAction::Discard => false,
            OptionAction::DiscardAndReport => true,
            OptionAction::DiscardAndReportUnlessMulticast => !multicast,
        }
    }
}

/// One option of a hop-by-hop or destination options header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6Option<'a> {
    /// Pad1, type 0: one byte of padding.
    Pad1,
    /// PadN, type 1: this many bytes of padding after the type and length.
    PadN(u8),
    /// Router Alert, type 5 (RFC 2711): the value (0 for MLD).
    RouterAlert(u16),
    /// Any other option: its type and data.
    Unknown {
        /// The option type.
        option_type: u8,
        /// The option data.
        data: &'a [u8],
    },
}

/// The options of an options header, each with its offset from the start of the
/// header. An option that runs past the end is a `BadOption` error, after which the
/// iterator stops.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    /// The header's data (from the byte after Hdr Ext Len).
    bytes: &'a [u8],
    /// Next option's offset in `bytes`.
    pos: usize,
}

impl<'a> Options<'a> {
    /// Options over the bytes after Next Header and Hdr Ext Len.
    pub const fn new(bytes: &'a [u8]) -> Options<'a> {
        Options { bytes, pos: 0 }
    }
}

impl<'a> Iterator for Options<'a> {
    /// (offset from the start of the extension header, option) or the error.
    type Item = Result<(usize, Ipv6Option<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.pos;
        let rest = self.bytes.get(start..).filter(|r| !r.is_empty())?;
        let option_type = rest[0];
        if option_type == 0 {
            self.pos += 1;
            return Some(Ok((start + 2, Ipv6Option::Pad1)));
        }
        let bad = |len| Error::BadOption {
            kind: option_type,
            len,
        };
        let Some(&len) = rest.get(1) else {
            self.pos = self.bytes.len();
            return Some(Err(bad(0)));
        };
        let Some(data) = rest.get(2..2 + usize::from(len)) else {
            self.pos = self.bytes.len();
            return Some(Err(bad(len)));
        };
        self.pos += 2 + usize::from(len);
        let option = match option_type {
            1 => Ipv6Option::PadN(len),
            ROUTER_ALERT if len == 2 => {
                Ipv6Option::RouterAlert(u16::from_be_bytes([data[0], data[1]]))
            }
            ROUTER_ALERT => {
                self.pos = self.bytes.len();
                return Some(Err(bad(len)));
            }
            _ => Ipv6Option::Unknown { option_type, data },
        };
        Some(Ok((start + 2, option)))
    }
}

/// A hop-by-hop or destination options header as imp sends it: 8 bytes holding a
/// Router Alert option (MLD's hop-by-hop header, RFC 3810 §5) or only padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionsRepr {
    /// The header after this one.
    pub next_header: NextHeader,
    /// The Router Alert value, if the header carries one.
    pub router_alert: Option<u16>,
}

impl OptionsRepr {
    /// Reads the Router Alert (the first one) from a checked header; other options
    /// are not represented. A malformed option is its error.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &ExtHeader<&T>) -> Result<OptionsRepr> {
        header.check_len()?;
        let mut router_alert = None;
        for option in header.options() {
            if let (_, Ipv6Option::RouterAlert(value)) = option? {
                router_alert = router_alert.or(Some(value));
            }
        }
        Ok(OptionsRepr {
            next_header: header.next_header(),
            router_alert,
        })
    }

    /// Always 8.
    pub const fn buffer_len(&self) -> usize {
        8
    }

    /// Writes the 8-byte header: Router Alert then PadN(0), or PadN(4).
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, header: &mut ExtHeader<&mut T>) {
        let next = u8::from(self.next_header);
        let bytes = match self.router_alert {
            Some(value) => {
                let [v0, v1] = value.to_be_bytes();
                [next, 0, ROUTER_ALERT, 2, v0, v1, 1, 0]
            }
            None => [next, 0, 1, 4, 0, 0, 0, 0],
        };
        header.buffer.as_mut()[..8].copy_from_slice(&bytes);
    }
}

mod frag_field {
    use core::ops::Range;
    pub const NEXT_HEADER: usize = 0;
    pub const OFFSET_FLAGS: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..8;
}

/// A view of a fragment header (RFC 8200 §4.5).
#[derive(Debug, Clone)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    /// Wraps a buffer and runs [`FragmentHeader::check_len`].
    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Checks that the 8 bytes fit.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated {
                need: FRAGMENT_HEADER_LEN,
                have,
            });
        }
        Ok(())
    }

    fn offset_flags(&self) -> u16 {
        let b = &self.buffer.as_ref()[frag_field::OFFSET_FLAGS];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The header of the fragmentable part (the first header of the original
    /// packet's fragmentable part).
    pub fn next_header(&self) -> NextHeader {
        NextHeader::from(self.buffer.as_ref()[frag_field::NEXT_HEADER])
    }

    /// Offset of this fragment's data in the fragmentable part, in bytes (the header
    /// stores it in 8-octet units).
    pub fn frag_offset(&self) -> u16 {
        self.offset_flags() & !0x7
    }

    /// More Fragments follow.
    pub fn more_frags(&self) -> bool {
        self.offset_flags() & 1 != 0
    }

    /// Identification, shared by the fragments of one packet.
    pub fn ident(&self) -> u32 {
        let b = &self.buffer.as_ref()[frag_field::IDENT];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, value: NextHeader) {
        self.buffer.as_mut()[frag_field::NEXT_HEADER] = value.into();
    }

    /// Sets the offset in bytes (its low 3 bits are dropped) and the M flag; the
    /// reserved bits are zeroed.
    pub fn set_offset_and_more(&mut self, offset: u16, more: bool) {
        let word = (offset & !0x7) | u16::from(more);
        self.buffer.as_mut()[1] = 0;
        self.buffer.as_mut()[frag_field::OFFSET_FLAGS].copy_from_slice(&word.to_be_bytes());
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u32) {
        self.buffer.as_mut()[frag_field::IDENT].copy_from_slice(&value.to_be_bytes());
    }
}

/// A fragment header as a plain struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    /// The first header of the fragmentable part.
    pub next_header: NextHeader,
    /// Offset in bytes, a multiple of 8 (`emit` drops the low 3 bits).
    pub frag_offset: u16,
    /// More Fragments follow.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentRepr {
    /// Reads a checked fragment header; the reserved fields are ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &FragmentHeader<&T>) -> Result<FragmentRepr> {
        header.check_len()?;
        Ok(FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    /// True for an atomic fragment: offset 0 and no more fragments (RFC 6946).
    pub const fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_frags
    }

    /// Always [`FRAGMENT_HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Writes the 8-byte header.
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, header: &mut FragmentHeader<&mut T>) {
        header.set_next_header(self.next_header);
        header.set_offset_and_more(self.frag_offset, self.more_frags);
        header.set_ident(self.ident);
    }
}

impl fmt::Display for FragmentRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 fragment id {:#010x} offset {}{} next {}",
            self.ident,
            self.frag_offset,
            if self.more_frags { "+" } else { "" },
            self.next_header
        )
    }
}

/// Where the extension headers of a packet end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Walk {
    /// The upper-layer protocol (or, after a fragment header that stopped the walk,
    /// the fragment header's Next Header).
    pub protocol: NextHeader,
    /// Offset of the upper-layer header (or of the fragment data) from the start of
    /// the IPv6 header.
    pub offset: usize,
    /// Offset of the Next Header field that named `protocol`: the pointer of a
    /// Parameter Problem code 1 if the upper layer is unknown (RFC 8200 §4).
    pub next_header_offset: usize,
    /// The fragment header, if one was met, with its offset. Unless it is atomic, the
    /// walk stopped there.
    pub fragment: Option<(usize, FragmentRepr)>,
    /// The hop-by-hop header's Router Alert value, if any.
    pub router_alert: Option<u16>,
}

/// Why a walk ended without reaching the upper layer, and what RFC 8200 asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// A header or option does not fit or has an impossible length: discard.
    Malformed(Error),
    /// More than [`MAX_HEADERS`] extension headers: discard.
    TooManyHeaders,
    /// An option this node does not recognise whose type says not to skip it.
    /// Discard; send Parameter Problem code 2 pointing at `pointer` when
    /// `action.reports(destination is multicast)`.
    UnrecognizedOption {
        /// What the option type's high-order bits ask for.
        action: OptionAction,
        /// The option type.
        option_type: u8,
        /// Offset of the option type byte.
        pointer: usize,
    },
    /// Discard and send a Parameter Problem with this code and pointer (a hop-by-hop
    /// header not first: code 1; a routing header to follow: code 0).
    ParamProblem {
        /// The code to send.
        code: ParamProblem,
        /// Offset of the offending byte.
        pointer: usize,
    },
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Malformed(e) => write!(f, "malformed extension header: {e}"),
            WalkError::TooManyHeaders => write!(f, "more than {MAX_HEADERS} extension headers"),
            WalkError::UnrecognizedOption {
                option_type,
                pointer,
                ..
            } => write!(f, "unrecognised option {option_type} at {pointer}"),
            WalkError::ParamProblem { code, pointer } => {
                write!(f, "parameter problem {code:?} at {pointer}")
            }
        }
    }
}

/// Walks the extension headers of `packet`, a whole IPv6 packet (the fixed header
/// and its payload, e.g. [`ipv6::Packet::packet`] of a checked view).
pub fn walk(packet: &[u8]) -> core::result::Result<Walk, WalkError> {
    let Some(&next_header) = packet.get(6) else {
        return Err(WalkError::Malformed(Error::Truncated {
            need: ipv6::HEADER_LEN,
            have: packet.len(),
        }));
    };
    walk_from(packet, ipv6::HEADER_LEN, NextHeader::from(next_header), 6)
}

/// Walks on from `offset` in `packet`, where a header of type `next_header` (named by
/// the field at `next_header_offset`) starts: after reassembly, from the fragment
/// header's Next Header. A hop-by-hop header is accepted only at offset 40.
pub fn walk_from(
    packet: &[u8],
    mut offset: usize,
    mut next_header: NextHeader,
    mut next_header_offset: usize,
) -> core::result::Result<Walk, WalkError> {
    let mut walk = Walk {
        protocol: next_header,
        offset,
        next_header_offset,
        fragment: None,
        router_alert: None,
    };
    for _ in 0..=MAX_HEADERS {
        if !next_header.is_extension() {
            walk.protocol = next_header;
            walk.offset = offset;
            walk.next_header_offset = next_header_offset;
            return Ok(walk);
        }
        let rest = packet.get(offset..).unwrap_or(&[]);
        let (next, len) = match next_header {
            NextHeader::Fragment => {
                let header = FragmentHeader::new_checked(rest).map_err(WalkError::Malformed)?;
                let repr = FragmentRepr::parse(&header).map_err(WalkError::Malformed)?;
                walk.fragment = Some((offset, repr));
                if !repr.is_atomic() {
                    walk.protocol = repr.next_header;
                    walk.offset = offset + FRAGMENT_HEADER_LEN;
                    walk.next_header_offset = offset;
                    return Ok(walk);
                }
                (repr.next_header, FRAGMENT_HEADER_LEN)
            }
            // RFC 8200 §4.1: "The Hop-by-Hop Options header, when present, must
            // immediately follow the IPv6 header"; §4: a Next Header value of zero
            // elsewhere is handled as unrecognised (Parameter Problem code 1).
            NextHeader::HopByHop if offset != ipv6::HEADER_LEN => {
                return Err(WalkError::ParamProblem {
                    code: ParamProblem::UnrecognizedNextHeader,
                    pointer: next_header_offset,
                });
            }
            _ => {
                let header = ExtHeader::new_checked(rest).map_err(WalkError::Malformed)?;
                if next_header == NextHeader::Routing {
                    check_routing(&header, offset)?;
                } else {
                    let hop_by_hop = next_header == NextHeader::HopByHop;
                    check_options(&header, offset, hop_by_hop, &mut walk)?;
                }
                (header.next_header(), header.header_len())
            }
        };
        next_header_offset = offset;
        next_header = next;
        offset += len;
    }
    Err(WalkError::TooManyHeaders)
}

/// RFC 8200 §4.4: "If Segments Left is zero, the node must ignore the Routing header
/// and proceed to process the next header"; otherwise, for a Routing Type it does not
/// recognise (every type here; type 0 is deprecated, RFC 5095 §3), "discard the
/// packet and send an ICMP Parameter Problem, Code 0, ... pointing to the
/// unrecognized Routing Type".
fn check_routing(header: &ExtHeader<&[u8]>, offset: usize) -> core::result::Result<(), WalkError> {
    if header.segments_left() == 0 {
        return Ok(());
    }
    Err(WalkError::ParamProblem {
        code: ParamProblem::ErroneousHeaderField,
        pointer: offset + 2,
    })
}

/// Goes through the options of a hop-by-hop or destination options header: padding
/// and skippable options pass, the first Router Alert of a hop-by-hop header is kept, any other option
/// ends the walk as its type's action bits say (RFC 8200 §4.2).
fn check_options(
    header: &ExtHeader<&[u8]>,
    offset: usize,
    hop_by_hop: bool,
    walk: &mut Walk,
) -> core::result::Result<(), WalkError> {
    for option in header.options() {
        let (at, option) = option.map_err(WalkError::Malformed)?;
        match option {
            Ipv6Option::Pad1 | Ipv6Option::PadN(_) => {}
            // RFC 2711 §2: Router Alert is a hop-by-hop option; elsewhere it is padding.
            Ipv6Option::RouterAlert(value) if hop_by_hop => {
                walk.router_alert = walk.router_alert.or(Some(value));
            }
            Ipv6Option::RouterAlert(_) => {}
            Ipv6Option::Unknown { option_type, .. } => {
                let action = OptionAction::of(option_type);
                if action != OptionAction::Skip {
                    return Err(WalkError::UnrecognizedOption {
                        action,
                        option_type,
                        pointer: offset + at,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
