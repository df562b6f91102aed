//! What the IP layers share with the protocols above them and beside them: what input
//! learned of an arriving datagram ([`IpMeta`], [`Meta6`]) and why output failed
//! ([`OutputError`]). A leaf: it uses no other module of the stack, so IPv4, IPv6, the
//! loopback interface, neighbour discovery and the transports can all use it without
//! an import circle.

use core::net::{Ipv4Addr, Ipv6Addr};

use impnet_wire::ethernet;

use crate::iface::IfaceId;

/// What the upper layers see of a received datagram's IPv4 header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpMeta<'a> {
    pub(crate) src: Ipv4Addr,
    pub(crate) dst: Ipv4Addr,
    pub(crate) ttl: u8,
    /// Sent to a broadcast address (no ICMP errors about it, RFC 1122 §3.2.2).
    pub(crate) broadcast: bool,
    /// The raw header (fragment zero's, for a reassembled datagram), for ICMP quotes.
    pub(crate) header: &'a [u8],
    /// Transport checksums still need verifying (false when the interface's device
    /// verified them, [`Offloads::rx_checksum`](crate::Offloads::rx_checksum)).
    pub(crate) verify_checksum: bool,
}

/// What the upper layers see of a received packet's IPv6 header (what delivery needs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta6<'a> {
    pub(crate) iface: IfaceId,
    pub(crate) src: Ipv6Addr,
    pub(crate) dst: Ipv6Addr,
    pub(crate) hop_limit: u8,
    /// Sent to a multicast group (no errors about it but Packet Too Big and
    /// option Parameter Problems, RFC 4443 §2.4 (e)).
    pub(crate) multicast: bool,
    /// The packet from its IPv6 header (for a reassembled one: its first fragment's
    /// header and the start of the data), what an ICMPv6 error quotes.
    pub(crate) invoking: &'a [u8],
    pub(crate) verify_checksum: bool,
    /// The link-layer source (neighbour discovery learns from it).
    pub(crate) link_src: Option<ethernet::Address>,
}

/// Why a datagram could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputError {
    /// No route covers the destination.
    NoRoute,
    /// The outgoing interface has no address.
    NoSourceAddress,
    /// The requested source address is not ours.
    AddrNotAvailable,
    /// Bigger than the MTU with DF set.
    TooBig { mtu: usize },
    /// The transmit queue is full.
    QueueFull,
}
