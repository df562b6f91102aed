//! Neighbor Discovery for IPv6 (RFC 4861): Router Solicitation and Advertisement,
//! Neighbor Solicitation and Advertisement, Redirect, and their options (source and
//! target link-layer address, prefix information, MTU, redirected header).
//!
//! The messages are ICMPv6 messages: [`crate::icmpv6::Repr::parse`] verifies the
//! checksum and dispatches here, and [`crate::icmpv6::Repr::Ndp`]'s `emit` fills the
//! checksum after [`Repr::emit`] wrote the message. Checks that need only the message
//! are done by [`Repr::parse`] (code 0, lengths, every option's length non-zero and
//! within the message, RFC 4861 §4.6: "Nodes MUST silently discard an ND packet that
//! contains an option with length zero"; targets not multicast); the ones that need the
//! IPv6 header (hop limit 255, source and destination rules) by [`Repr::validate`].
//! Unknown options are skipped (RFC 4861 §4.6); of an option a message carries at most
//! once, the first counts.

use core::fmt;
use core::net::Ipv6Addr;

use crate::ethernet::Address;
use crate::icmpv6::packet::{HEADER_LEN, Message, Packet};
use crate::{Error, Result, ipv6};

/// Option types (IANA "IPv6 Neighbor Discovery Option Formats").
pub mod option_type {
    /// Source Link-Layer Address.
    pub const SOURCE_LLADDR: u8 = 1;
    /// Target Link-Layer Address.
    pub const TARGET_LLADDR: u8 = 2;
    /// Prefix Information.
    pub const PREFIX_INFO: u8 = 3;
    /// Redirected Header.
    pub const REDIRECTED_HEADER: u8 = 4;
    /// MTU.
    pub const MTU: u8 = 5;
}

/// Length of a Prefix Information option.
const PREFIX_INFO_LEN: usize = 32;
/// Length of a link-layer address option for Ethernet and of an MTU option.
const SHORT_OPTION_LEN: usize = 8;
/// Bytes of a Redirected Header option before the quoted packet.
const REDIRECTED_HEADER_LEN: usize = 8;

/// The hop limit every ND message is sent with and must arrive with (RFC 4861 §6.1,
/// §7.1, §8.1): proof that it did not cross a router.
pub const HOP_LIMIT: u8 = 255;

/// A Prefix Information option (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    /// Number of leading bits of `prefix` that are valid, 0..=128.
    pub prefix_len: u8,
    /// L: the prefix is on-link.
    pub on_link: bool,
    /// A: the prefix may be used for stateless address autoconfiguration (RFC 4862).
    pub autonomous: bool,
    /// Seconds the prefix is valid for on-link determination (all ones: forever).
    pub valid_lifetime: u32,
    /// Seconds addresses formed from it remain preferred (all ones: forever).
    pub preferred_lifetime: u32,
    /// The prefix (bits past `prefix_len` are to be ignored).
    pub prefix: Ipv6Addr,
}

impl PrefixInfo {
    fn parse(data: &[u8; PREFIX_INFO_LEN]) -> PrefixInfo {
        let u32_at =
            |at: usize| u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let mut prefix = [0u8; 16];
        prefix.copy_from_slice(&data[16..32]);
        PrefixInfo {
            prefix_len: data[2],
            on_link: data[3] & 0x80 != 0,
            autonomous: data[3] & 0x40 != 0,
            valid_lifetime: u32_at(4),
            preferred_lifetime: u32_at(8),
            prefix: Ipv6Addr::from(prefix),
        }
    }

    fn emit(&self, out: &mut [u8]) {
        let flags = if self.on_link { 0x80 } else { 0 } | if self.autonomous { 0x40 } else { 0 };
        out[..4].copy_from_slice(&[option_type::PREFIX_INFO, 4, self.prefix_len, flags]);
        out[4..8].copy_from_slice(&self.valid_lifetime.to_be_bytes());
        out[8..12].copy_from_slice(&self.preferred_lifetime.to_be_bytes());
        out[12..16].fill(0);
        out[16..32].copy_from_slice(&self.prefix.octets());
    }
}

/// One ND option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdpOption<'a> {
    /// Source Link-Layer Address (Ethernet).
    SourceLinkLayerAddr(Address),
    /// Target Link-Layer Address (Ethernet).
    TargetLinkLayerAddr(Address),
    /// Prefix Information.
    PrefixInfo(PrefixInfo),
    /// Redirected Header: as much of the redirected packet as the option holds.
    RedirectedHeader(&'a [u8]),
    /// MTU.
    Mtu(u32),
    /// Any other option: its type and the bytes after type and length.
    Unknown {
        /// The option type.
        option_type: u8,
        /// The option's bytes after type and length.
        data: &'a [u8],
    },
}

/// The options of an ND message. An option of length 0, one that runs past the end,
/// or a known option of the wrong length is a `BadOption` error, after which the
/// iterator stops.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    bytes: &'a [u8],
}

impl<'a> Options<'a> {
    /// Options over the bytes after a message's fixed part.
    pub const fn new(bytes: &'a [u8]) -> Options<'a> {
        Options { bytes }
    }

    /// Checks every option; the first error found.
    pub fn check(&self) -> Result<()> {
        self.clone().try_for_each(|option| option.map(|_| ()))
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.bytes.split_first()?;
        let units = rest.first().copied().unwrap_or(0);
        let len = usize::from(units) * 8;
        let bad = Error::BadOption { kind, len: units };
        if len == 0 || len > self.bytes.len() {
            self.bytes = &[];
            return Some(Err(bad));
        }
        let (option, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        let lladdr = || Address::from_bytes(&option[2..]).ok_or(bad);
        let parsed = match kind {
            option_type::SOURCE_LLADDR | option_type::TARGET_LLADDR if len != SHORT_OPTION_LEN => {
                Err(bad)
            }
            option_type::SOURCE_LLADDR => lladdr().map(NdpOption::SourceLinkLayerAddr),
            option_type::TARGET_LLADDR => lladdr().map(NdpOption::TargetLinkLayerAddr),
            option_type::PREFIX_INFO => match option.try_into() {
                Ok(bytes) => Ok(NdpOption::PrefixInfo(PrefixInfo::parse(bytes))),
                Err(_) => Err(bad),
            },
            option_type::MTU if len == SHORT_OPTION_LEN => {
                Ok(NdpOption::Mtu(u32::from_be_bytes([
                    option[4], option[5], option[6], option[7],
                ])))
            }
            option_type::MTU => Err(bad),
            option_type::REDIRECTED_HEADER => Ok(NdpOption::RedirectedHeader(
                &option[REDIRECTED_HEADER_LEN..],
            )),
            _ => Ok(NdpOption::Unknown {
                option_type: kind,
                data: &option[2..],
            }),
        };
        if parsed.is_err() {
            self.bytes = &[];
        }
        Some(parsed)
    }
}

/// The prefixes of a Router Advertisement: the Prefix Information options of a
/// parsed message, or a list to send. Two lists are equal when they hold the same
/// prefixes in the same order, whatever their form.
#[derive(Debug, Clone, Copy)]
pub enum Prefixes<'a> {
    /// The options of a parsed message (already checked); other options are skipped.
    Options(&'a [u8]),
    /// Prefixes to send.
    List(&'a [PrefixInfo]),
}

impl<'a> Prefixes<'a> {
    /// No prefixes.
    pub const EMPTY: Prefixes<'static> = Prefixes::List(&[]);

    /// The prefixes in order.
    pub fn iter(&self) -> impl Iterator<Item = PrefixInfo> + 'a {
        let (options, list): (&'a [u8], &'a [PrefixInfo]) = match *self {
            Prefixes::Options(bytes) => (bytes, &[]),
            Prefixes::List(list) => (&[], list),
        };
        let from_options = Options::new(options).filter_map(|option| match option {
            Ok(NdpOption::PrefixInfo(info)) => Some(info),
            _ => None,
        });
        from_options.chain(list.iter().copied())
    }

    /// How many prefixes.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl PartialEq for Prefixes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Prefixes<'_> {}

/// A neighbour discovery message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Router Solicitation (RFC 4861 §4.1).
    RouterSolicit {
        /// The sender's link-layer address (absent when sent from `::`).
        source_lladdr: Option<Address>,
    },
    /// Router Advertisement (RFC 4861 §4.2).
    RouterAdvert {
        /// Cur Hop Limit hosts should use (0: unspecified).
        hop_limit: u8,
        /// M: addresses are available via DHCPv6.
        managed: bool,
        /// O: other configuration is available via DHCPv6.
        other: bool,
        /// Seconds this router is a default router for (0: it is not one).
        router_lifetime: u16,
        /// Milliseconds a neighbour is reachable after a confirmation (0: unspecified).
        reachable_time: u32,
        /// Milliseconds between retransmitted solicitations (0: unspecified).
        retrans_timer: u32,
        /// The router's link-layer address.
        source_lladdr: Option<Address>,
        /// The link MTU.
        mtu: Option<u32>,
        /// The Prefix Information options.
        prefixes: Prefixes<'a>,
    },
    /// Neighbor Solicitation (RFC 4861 §4.3): address resolution, unreachability
    /// detection, or duplicate address detection (from `::`).
    NeighborSolicit {
        /// The address being asked about (not multicast).
        target: Ipv6Addr,
        /// The sender's link-layer address (absent when sent from `::`).
        source_lladdr: Option<Address>,
    },
    /// Neighbor Advertisement (RFC 4861 §4.4).
    NeighborAdvert {
        /// R: the sender is a router.
        router: bool,
        /// S: sent in response to a solicitation.
        solicited: bool,
        /// O: the advertisement overrides a cached link-layer address.
        overrides: bool,
        /// The address advertised (not multicast).
        target: Ipv6Addr,
        /// The target's link-layer address.
        target_lladdr: Option<Address>,
    },
    /// Redirect (RFC 4861 §4.5).
    Redirect {
        /// The better first hop (or the destination itself when on-link).
        target: Ipv6Addr,
        /// The destination being redirected (not multicast).
        destination: Ipv6Addr,
        /// The target's link-layer address.
        target_lladdr: Option<Address>,
        /// The start of the packet that triggered the redirect (empty: none); cut by
        /// [`redirected_len`].
        redirected: &'a [u8],
    },
}

/// Length of each message's fixed part (type to the options).
const fn fixed_len(kind: Message) -> usize {
    match kind {
        Message::RouterSolicit => HEADER_LEN,
        Message::RouterAdvert => 16,
        Message::NeighborSolicit | Message::NeighborAdvert => 24,
        _ => 40,
    }
}

/// How much of `packet` a Redirect with (`with_lladdr`) or without a target
/// link-layer address option quotes: the most that keeps the message, in its IPv6
/// header, within the minimum MTU (RFC 4861 §4.6.3), in whole 8-octet units.
/// Applying it twice changes nothing.
pub const fn redirected_len(packet: &[u8], with_lladdr: bool) -> usize {
    let lladdr = if with_lladdr { SHORT_OPTION_LEN } else { 0 };
    let room = ipv6::MIN_MTU - ipv6::HEADER_LEN - 40 - lladdr - REDIRECTED_HEADER_LEN;
    let len = if packet.len() < room {
        packet.len()
    } else {
        room
    };
    len & !7
}

fn addr_at(bytes: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&bytes[at..at + 16]);
    Ipv6Addr::from(octets)
}

/// The first option of `options` that `pick` selects.
fn first<'a, T>(options: &'a [u8], pick: impl Fn(NdpOption<'a>) -> Option<T>) -> Option<T> {
    Options::new(options)
        .filter_map(|o| o.ok().and_then(&pick))
        .next()
}

fn source_lladdr(options: &[u8]) -> Option<Address> {
    first(options, |o| match o {
        NdpOption::SourceLinkLayerAddr(addr) => Some(addr),
        _ => None,
    })
}

fn target_lladdr(options: &[u8]) -> Option<Address> {
    first(options, |o| match o {
        NdpOption::TargetLinkLayerAddr(addr) => Some(addr),
        _ => None,
    })
}

impl<'a> Repr<'a> {
    /// Reads an ND message from a checked ICMPv6 view (checksum not verified here:
    /// [`crate::icmpv6::Repr::parse`] does that). `BadField("code")` for a code other
    /// than 0, `Truncated` for a short message, `BadOption` for a malformed option,
    /// `BadField("target")` for a multicast target or redirect destination.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let bytes: &'a [u8] = packet.buffer.as_ref();
        let kind = packet.msg_type();
        if !matches!(
            kind,
            Message::RouterSolicit
                | Message::RouterAdvert
                | Message::NeighborSolicit
                | Message::NeighborAdvert
                | Message::Redirect
        ) {
            return Err(Error::Unsupported("not a neighbour discovery message"));
        }
        if packet.msg_code() != 0 {
            return Err(Error::BadField("code"));
        }
        let need = fixed_len(kind);
        if bytes.len() < need {
            return Err(Error::Truncated {
                need,
                have: bytes.len(),
            });
        }
        let options = &bytes[need..];
        Options::new(options).check()?;
        let repr = match kind {
            Message::RouterSolicit => Repr::RouterSolicit {
                source_lladdr: source_lladdr(options),
            },
            Message::RouterAdvert => Self::parse_router_advert(bytes, options),
            Message::NeighborSolicit => Repr::NeighborSolicit {
                target: addr_at(bytes, 8),
                source_lladdr: source_lladdr(options),
            },
            Message::NeighborAdvert => Repr::NeighborAdvert {
                router: bytes[4] & 0x80 != 0,
                solicited: bytes[4] & 0x40 != 0,
                overrides: bytes[4] & 0x20 != 0,
                target: addr_at(bytes, 8),
                target_lladdr: target_lladdr(options),
            },
            _ => Self::parse_redirect(bytes, options),
        };
        repr.check_targets()?;
        Ok(repr)
    }

    fn parse_router_advert(bytes: &[u8], options: &'a [u8]) -> Repr<'a> {
        let u32_at = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        Repr::RouterAdvert {
            hop_limit: bytes[4],
            managed: bytes[5] & 0x80 != 0,
            other: bytes[5] & 0x40 != 0,
            router_lifetime: u16::from_be_bytes([bytes[6], bytes[7]]),
            reachable_time: u32_at(8),
            retrans_timer: u32_at(12),
            source_lladdr: source_lladdr(options),
            mtu: first(options, |o| match o {
                NdpOption::Mtu(mtu) => Some(mtu),
                _ => None,
            }),
            prefixes: Prefixes::Options(options),
        }
    }

    fn parse_redirect(bytes: &[u8], options: &'a [u8]) -> Repr<'a> {
        let target_lladdr = target_lladdr(options);
        let redirected = first(options, |o| match o {
            NdpOption::RedirectedHeader(data) => Some(data),
            _ => None,
        })
        .unwrap_or(&[]);
        Repr::Redirect {
            target: addr_at(bytes, 8),
            destination: addr_at(bytes, 24),
            target_lladdr,
            redirected: &redirected[..redirected_len(redirected, target_lladdr.is_some())],
        }
    }

    /// RFC 4861 §7.1.1, §7.1.2: "Target Address is not a multicast address"; §8.1:
    /// "The ICMP Destination Address field in the redirect message does not contain a
    /// multicast address."
    fn check_targets(&self) -> Result<()> {
        match self {
            Repr::NeighborSolicit { target, .. } | Repr::NeighborAdvert { target, .. }
                if target.is_multicast() =>
            {
                Err(Error::BadField("target"))
            }
            Repr::Redirect { destination, .. } if destination.is_multicast() => {
                Err(Error::BadField("destination"))
            }
            _ => Ok(()),
        }
    }

    /// The checks of RFC 4861 §6.1, §7.1 and §8.1 that need the IPv6 header: hop limit
    /// 255 (`BadField("hop_limit")`); Router Advertisements and Redirects from a
    /// link-local source (`BadField("source")`); a solicitation from `::` only to a
    /// solicited-node address and without a source link-layer address; no Solicited
    /// flag on an advertisement to a multicast address (`BadField(..)` naming the
    /// field).
    pub fn validate(&self, src: &Ipv6Addr, dst: &Ipv6Addr, hop_limit: u8) -> Result<()> {
        if hop_limit != HOP_LIMIT {
            return Err(Error::BadField("hop_limit"));
        }
        let unspecified = src.is_unspecified();
        match *self {
            Repr::RouterAdvert { .. } | Repr::Redirect { .. }
                if !ipv6::Cidr::LINK_LOCAL.contains(*src) =>
            {
                Err(Error::BadField("source"))
            }
            Repr::RouterSolicit {
                source_lladdr: Some(_),
            }
            | Repr::NeighborSolicit {
                source_lladdr: Some(_),
                ..
            } if unspecified => Err(Error::BadField("source_lladdr")),
            Repr::NeighborSolicit { target, .. }
                if unspecified && *dst != ipv6::solicited_node(target) =>
            {
                Err(Error::BadField("destination"))
            }
            Repr::NeighborAdvert {
                solicited: true, ..
            } if dst.is_multicast() => Err(Error::BadField("solicited")),
            _ => Ok(()),
        }
    }

    /// The ICMPv6 type of this message.
    pub const fn message(&self) -> Message {
        match self {
            Repr::RouterSolicit { .. } => Message::RouterSolicit,
            Repr::RouterAdvert { .. } => Message::RouterAdvert,
            Repr::NeighborSolicit { .. } => Message::NeighborSolicit,
            Repr::NeighborAdvert { .. } => Message::NeighborAdvert,
            Repr::Redirect { .. } => Message::Redirect,
        }
    }

    /// The length of the options `emit` writes.
    fn options_len(&self) -> usize {
        let lladdr = |a: &Option<Address>| if a.is_some() { SHORT_OPTION_LEN } else { 0 };
        match self {
            Repr::RouterSolicit { source_lladdr } | Repr::NeighborSolicit { source_lladdr, .. } => {
                lladdr(source_lladdr)
            }
            Repr::RouterAdvert {
                source_lladdr,
                mtu,
                prefixes,
                ..
            } => {
                let mtu = if mtu.is_some() { SHORT_OPTION_LEN } else { 0 };
                lladdr(source_lladdr) + mtu + prefixes.len() * PREFIX_INFO_LEN
            }
            Repr::NeighborAdvert { target_lladdr, .. } => lladdr(target_lladdr),
            Repr::Redirect {
                target_lladdr,
                redirected,
                ..
            } => {
                let quoted = redirected_len(redirected, target_lladdr.is_some());
                let header = if quoted == 0 {
                    0
                } else {
                    REDIRECTED_HEADER_LEN + quoted
                };
                lladdr(target_lladdr) + header
            }
        }
    }

    /// The whole message's length, options included.
    pub fn buffer_len(&self) -> usize {
        fixed_len(self.message()) + self.options_len()
    }

    /// Writes the message (type, code, fixed part and options; checksum zero) into
    /// the first [`Repr::buffer_len`] bytes of `packet`. Send it through
    /// [`crate::icmpv6::Repr::Ndp`], whose `emit` fills the checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let fixed = fixed_len(self.message());
        let bytes = &mut packet.buffer.as_mut()[..self.buffer_len()];
        bytes[..fixed].fill(0);
        bytes[0] = self.message().into();
        self.emit_fixed(&mut bytes[..fixed]);
        self.emit_options(&mut bytes[fixed..]);
    }

    /// The fixed part after type, code and checksum.
    fn emit_fixed(&self, bytes: &mut [u8]) {
        match *self {
            Repr::RouterSolicit { .. } => {}
            Repr::RouterAdvert {
                hop_limit,
                managed,
                other,
                router_lifetime,
                reachable_time,
                retrans_timer,
                ..
            } => {
                bytes[4] = hop_limit;
                bytes[5] = if managed { 0x80 } else { 0 } | if other { 0x40 } else { 0 };
                bytes[6..8].copy_from_slice(&router_lifetime.to_be_bytes());
                bytes[8..12].copy_from_slice(&reachable_time.to_be_bytes());
                bytes[12..16].copy_from_slice(&retrans_timer.to_be_bytes());
            }
            Repr::NeighborSolicit { target, .. } => bytes[8..24].copy_from_slice(&target.octets()),
            Repr::NeighborAdvert {
                router,
                solicited,
                overrides,
                target,
                ..
            } => {
                bytes[4] = if router { 0x80 } else { 0 }
                    | if solicited { 0x40 } else { 0 }
                    | if overrides { 0x20 } else { 0 };
                bytes[8..24].copy_from_slice(&target.octets());
            }
            Repr::Redirect {
                target,
                destination,
                ..
            } => {
                bytes[8..24].copy_from_slice(&target.octets());
                bytes[24..40].copy_from_slice(&destination.octets());
            }
        }
    }

    /// The options, in the order RFC 4861 lists them.
    fn emit_options(&self, mut out: &mut [u8]) {
        let lladdr = |out: &mut [u8], kind: u8, addr: Address| {
            out[..2].copy_from_slice(&[kind, 1]);
            out[2..8].copy_from_slice(addr.as_bytes());
        };
        match *self {
            Repr::RouterSolicit { source_lladdr } | Repr::NeighborSolicit { source_lladdr, .. } => {
                if let Some(addr) = source_lladdr {
                    lladdr(out, option_type::SOURCE_LLADDR, addr);
                }
            }
            Repr::RouterAdvert {
                source_lladdr,
                mtu,
                prefixes,
                ..
            } => {
                if let Some(addr) = source_lladdr {
                    lladdr(out, option_type::SOURCE_LLADDR, addr);
                    out = &mut out[SHORT_OPTION_LEN..];
                }
                if let Some(mtu) = mtu {
                    out[..4].copy_from_slice(&[option_type::MTU, 1, 0, 0]);
                    out[4..8].copy_from_slice(&mtu.to_be_bytes());
                    out = &mut out[SHORT_OPTION_LEN..];
                }
                for info in prefixes.iter() {
                    info.emit(&mut out[..PREFIX_INFO_LEN]);
                    out = &mut out[PREFIX_INFO_LEN..];
                }
            }
            Repr::NeighborAdvert { target_lladdr, .. } => {
                if let Some(addr) = target_lladdr {
                    lladdr(out, option_type::TARGET_LLADDR, addr);
                }
            }
            Repr::Redirect {
                target_lladdr,
                redirected,
                ..
            } => {
                if let Some(addr) = target_lladdr {
                    lladdr(out, option_type::TARGET_LLADDR, addr);
                    out = &mut out[SHORT_OPTION_LEN..];
                }
                let quoted = &redirected[..redirected_len(redirected, target_lladdr.is_some())];
                if !quoted.is_empty() {
                    let units = ((REDIRECTED_HEADER_LEN + quoted.len()) / 8) as u8;
                    out[..REDIRECTED_HEADER_LEN].fill(0);
                    out[..2].copy_from_slice(&[option_type::REDIRECTED_HEADER, units]);
                    out[REDIRECTED_HEADER_LEN..].copy_from_slice(quoted);
                }
            }
        }
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::RouterSolicit { .. } => write!(f, "router solicitation"),
            Repr::RouterAdvert {
                router_lifetime,
                prefixes,
                ..
            } => write!(
                f,
                "router advertisement lifetime {router_lifetime} prefixes {}",
                prefixes.len()
            ),
            Repr::NeighborSolicit { target, .. } => write!(f, "neighbor solicitation for {target}"),
            Repr::NeighborAdvert {
                target,
                target_lladdr,
                ..
            } => {
                write!(f, "neighbor advertisement {target}")?;
                if let Some(addr) = target_lladdr {
                    write!(f, " is at {addr}")?;
                }
                Ok(())
            }
            Repr::Redirect {
                target,
                destination,
                ..
            } => write!(f, "redirect {destination} to {target}"),
        }
    }
}

#[cfg(test)]
mod tests;
