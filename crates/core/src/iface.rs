//! Interfaces: a medium (Ethernet with its MAC, or IP packets with no link layer), an
//! IP MTU and the IPv4 addresses assigned to it.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

/// Names an interface of a [`Stack`](crate::Stack); ids are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfaceId(pub(crate) u32);

impl IfaceId {
    /// The stack's built-in loopback interface: routes to the stack's own addresses and
    /// to 127.0.0.0/8 go through it, and nothing sent on it reaches a device (see
    /// `Stack::poll_transmit`). It is not counted among the interfaces `add_interface`
    /// numbers.
    pub const LOOPBACK: IfaceId = IfaceId(u32::MAX);

    /// The interface's position in the order `add_interface` was called.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// What an interface's frames are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Medium {
    /// Ethernet frames (a TAP, a simulated link): ARP resolves next hops, and what is
    /// sent carries a 14-byte Ethernet header.
    #[default]
    Ethernet,
    /// Bare IP packets with no link-layer header (a Linux TUN, a point-to-point or VPN
    /// link, packetdrill): `handle_frame` takes an IP packet (the version nibble says
    /// which), `poll_transmit` writes one, and there is no ARP: every packet goes
    /// straight out, whatever its next hop. The interface's MAC is unused.
    Ip,
}

/// How an interface is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceConfig {
    /// Our Ethernet address on this link (unused on an [`Medium::Ip`] interface).
    pub mac: ethernet::Address,
    /// What the link carries: Ethernet frames (the default) or bare IP packets.
    pub medium: Medium,
    /// IP MTU: the largest IPv4 packet (header included) the link carries, e.g. 1500.
    /// At least 68 (RFC 791: "Every internet module must be able to forward a datagram
    /// of 68 octets without further fragmentation"); smaller values are raised to 68.
    pub mtu: usize,
    /// Addresses with their prefix; each adds a connected route.
    pub addrs: Vec<Cidr>,
    /// Work the device does so the stack need not (default: none, the stack computes
    /// and verifies every checksum).
    pub offloads: Offloads,
}

/// Work an interface's device takes off the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    /// The device fills the TCP and UDP checksums of what we send (virtio-net
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, Linux `CHECKSUM_PARTIAL`): the stack stores only
    /// the pseudo-header sum in the checksum field, the partial sum those devices
    /// expect. The IPv4 header checksum is always filled (20 bytes; no such device
    /// computes it).
    pub tx_checksum: bool,
    /// The device verified the checksums of what it delivers (or the link cannot
    /// corrupt, as an in-process pipe): the stack skips verifying IPv4, TCP and UDP
    /// checksums on receive.
    pub rx_checksum: bool,
    /// TCP segmentation offload (TSO, virtio-net `VIRTIO_NET_HDR_GSO_TCPV4` and
    /// `GSO_TCPV6`): the device takes IPv4 and IPv6 packets up to this many bytes
    /// (headers included, at most 65535) and
    /// cuts their TCP payload into MTU-sized segments itself. TCP then builds one large
    /// segment, up to min(this, send window, cwnd), where it would build many of one
    /// MSS each; the MSS it announces still follows the MTU. `None`: every packet fits
    /// the MTU. Only connections whose peer's MSS is at least our own use it (the
    /// device cuts at its MTU, which is our MSS).
    pub tso_max: Option<usize>,
}

/// What the device knows of one received frame beyond its bytes (a TAP's virtio-net
/// header), for [`Stack::handle_frame_offloaded`](crate::Stack::handle_frame_offloaded).
/// A forwarded frame keeps it: a large TCP segment leaves whole, to be cut at the same
/// size, where the outgoing interface takes TSO (as a Linux bridge or router keeps
/// `gso_size`), and a partial checksum stays partial where the outgoing device
/// completes checksums ([`Offloads::tx_checksum`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxOffload {
    /// The frame is one TCP segment larger than the wire carries, to be cut into
    /// segments of this many payload bytes (virtio-net `gso_size`, Linux GSO/GRO).
    pub gso_size: Option<u16>,
    /// Its TCP or UDP checksum field holds only the pseudo-header sum (virtio-net
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, Linux `CHECKSUM_PARTIAL`): the frame was made on
    /// this host and whoever puts it on a wire completes the checksum.
    pub partial_checksum: bool,
}

impl RxOffload {
    /// A plain frame: no segmentation, checksums complete.
    pub const NONE: RxOffload = RxOffload {
        gso_size: None,
        partial_checksum: false,
    };
}

impl Offloads {
    /// Nothing offloaded: the stack computes and verifies every checksum.
    pub const NONE: Offloads = Offloads {
        tx_checksum: false,
        rx_checksum: false,
        tso_max: None,
    };
    /// Checksums offloaded both ways.
    pub const CHECKSUM: Offloads = Offloads {
        tx_checksum: true,
        rx_checksum: true,
        tso_max: None,
    };

    /// These offloads with TSO for packets up to `max` bytes (see [`Offloads::tso_max`]).
    pub const fn with_tso(self, max: usize) -> Offloads {
        Offloads {
            tso_max: Some(max),
            ..self
        }
    }
}

impl IfaceConfig {
    /// An interface with no addresses yet.
    pub fn new(mac: ethernet::Address, mtu: usize) -> IfaceConfig {
        IfaceConfig {
            mac,
            medium: Medium::Ethernet,
            mtu,
            addrs: Vec::new(),
            offloads: Offloads::NONE,
        }
    }

    /// An IP-level interface ([`Medium::Ip`]: no link layer, no ARP) with no addresses
    /// yet.
    pub fn ip(mtu: usize) -> IfaceConfig {
        IfaceConfig {
            medium: Medium::Ip,
            ..IfaceConfig::new(ethernet::Address([0; 6]), mtu)
        }
    }

    /// The same interface on `medium`.
    pub fn with_medium(self, medium: Medium) -> IfaceConfig {
        IfaceConfig { medium, ..self }
    }

    /// The same interface with `offloads`.
    pub fn with_offloads(self, offloads: Offloads) -> IfaceConfig {
        IfaceConfig { offloads, ..self }
    }
}

/// The smallest MTU IPv4 allows (RFC 791).
pub(crate) const MIN_MTU: usize = 68;

/// The network mask of a prefix length (lengths above 32 are treated as 32).
#[inline]
pub(crate) fn prefix_mask(prefix_len: u8) -> u32 {
    // Without branches (route lookup calls this once per route): shifted in 64 bits, a
    // length of 0 shifts every one out of the low word.
    let n = u32::from(prefix_len.min(32));
    (u64::from(u32::MAX) << (32 - n)) as u32
}

/// True when `addr` lies in `cidr`.
pub(crate) fn cidr_contains(cidr: &Cidr, addr: Ipv4Addr) -> bool {
    let mask = prefix_mask(cidr.prefix_len);
    cidr.address.to_bits() & mask == addr.to_bits() & mask
}

/// The directed broadcast address of `cidr` (None for /31 and /32, which have none,
/// RFC 3021).
pub(crate) fn cidr_broadcast(cidr: &Cidr) -> Option<Ipv4Addr> {
    if cidr.prefix_len >= 31 {
        return None;
    }
    let mask = prefix_mask(cidr.prefix_len);
    Some(Ipv4Addr::from_bits(cidr.address.to_bits() | !mask))
}

/// One interface's live state.
#[derive(Debug, Clone)]
pub(crate) struct Interface {
    pub(crate) mac: ethernet::Address,
    pub(crate) medium: Medium,
    /// Invariant: at least [`MIN_MTU`].
    pub(crate) mtu: usize,
    pub(crate) addrs: Vec<Cidr>,
    pub(crate) offloads: Offloads,
    /// Datagrams that arrive here for other hosts are forwarded (RFC 1812).
    pub(crate) forwarding: bool,
    /// Packets to any address are ours ([`crate::accept_any`]), under these limits.
    pub(crate) accept_any: Option<crate::accept_any::AcceptAny>,
    pub(crate) stats: crate::stats::IfaceStats,
}

impl Interface {
    pub(crate) fn new(config: IfaceConfig) -> Interface {
        Interface {
            mac: config.mac,
            medium: config.medium,
            mtu: config.mtu.max(MIN_MTU),
            addrs: config.addrs,
            offloads: config.offloads,
            forwarding: false,
            accept_any: None,
            stats: crate::stats::IfaceStats::default(),
        }
    }

    /// True when the interface carries bare IP packets (no Ethernet header, no ARP).
    #[inline]
    pub(crate) fn is_ip_level(&self) -> bool {
        self.medium == Medium::Ip
    }

    /// True when `addr` is one of this interface's addresses.
    pub(crate) fn has_addr(&self, addr: Ipv4Addr) -> bool {
        self.addrs.iter().any(|c| c.address == addr)
    }

    /// True when `addr` is a broadcast address on this interface: limited broadcast or
    /// the directed broadcast of one of its prefixes.
    pub(crate) fn is_broadcast(&self, addr: Ipv4Addr) -> bool {
        addr == Ipv4Addr::BROADCAST || self.addrs.iter().any(|c| cidr_broadcast(c) == Some(addr))
    }

    /// [`Interface::is_broadcast`] of `a` and of `b`, in one pass over the prefixes
    /// (an arriving packet's source and destination).
    pub(crate) fn are_broadcast(&self, a: Ipv4Addr, b: Ipv4Addr) -> (bool, bool) {
        let (mut a_is, mut b_is) = (a == Ipv4Addr::BROADCAST, b == Ipv4Addr::BROADCAST);
        for broadcast in self.addrs.iter().filter_map(cidr_broadcast) {
            a_is |= broadcast == a;
            b_is |= broadcast == b;
        }
        (a_is, b_is)
    }

    /// The source address for a packet to `next_hop`: the address whose prefix holds
    /// the next hop, else the first address.
    pub(crate) fn source_for(&self, next_hop: Ipv4Addr) -> Option<Ipv4Addr> {
        self.addrs
            .iter()
            .find(|c| cidr_contains(c, next_hop))
            .or_else(|| self.addrs.first())
            .map(|c| c.address)
    }
}
