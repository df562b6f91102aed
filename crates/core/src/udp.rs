//! UDP (RFC 768) sockets: bind, send, receive with bounded queues, and the input path.

use alloc::collections::BTreeMap;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::socket::{Handle, RecvQueue, Slab};

/// The largest UDP payload over IPv4: 65535 - 20 (IPv4 header) - 8 (UDP header).
pub const MAX_PAYLOAD: usize = 65507;
/// The IANA dynamic port range (RFC 6335 §6), from which ephemeral ports are drawn.
pub const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=65535;

/// A UDP socket; stale handles (after `udp_close`) are reported as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpHandle(pub(crate) Handle);

/// Why a UDP call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UdpError {
    /// The handle does not name an open socket.
    InvalidHandle,
    /// No datagram is queued; wait for `Event::Udp`.
    WouldBlock,
    /// Another socket is bound to this address and port.
    AddrInUse,
    /// The address to bind is not one of the stack's addresses.
    AddrNotAvailable,
    /// Every ephemeral port is taken.
    NoPortsAvailable,
    /// The payload exceeds 65507 bytes.
    MessageTooLong,
    /// The payload does not fit the route MTU and the socket forbids fragmentation.
    FragmentationNeeded {
        /// The route's MTU (IPv4 header included).
        mtu: usize,
    },
    /// No route to the destination (or no source address on its interface).
    NoRoute,
    /// The transmit or resolution queue is full; try again after `poll_transmit`.
    NoBufferSpace,
    /// An earlier datagram could not be delivered: the next hop did not answer ARP, or
    /// an ICMP host unreachable came back.
    HostUnreachable,
    /// An ICMP network unreachable came back for an earlier datagram.
    NetUnreachable,
    /// The destination answered an earlier datagram with ICMP port unreachable: nothing
    /// listens there.
    PortUnreachable,
    /// An ICMP time exceeded came back for an earlier datagram (TTL or reassembly).
    TimeExceeded,
    /// A multicast call named an address that is not an IPv4 multicast group.
    InvalidGroup,
}

impl fmt::Display for UdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UdpError::InvalidHandle => write!(
                f,
                "invalid UDP handle: the socket was closed or never existed"
            ),
            UdpError::WouldBlock => write!(f, "no datagram queued: wait for a readable event"),
            UdpError::AddrInUse => write!(f, "address in use: another UDP socket is bound to it"),
            UdpError::AddrNotAvailable => write!(
                f,
                "address not available: bind to one of the stack's addresses"
            ),
            UdpError::NoPortsAvailable => {
                write!(f, "no ephemeral UDP port is free: close some sockets")
            }
            UdpError::MessageTooLong => write!(f, "UDP payload over 65507 bytes: send less"),
            UdpError::FragmentationNeeded { mtu } => {
                write!(
                    f,
                    "datagram exceeds the route MTU {mtu} and fragmentation is off: send less"
                )
            }
            UdpError::NoRoute => {
                write!(f, "no route to the destination: add a route or an address")
            }
            UdpError::NoBufferSpace => write!(f, "output queue full: poll_transmit, then retry"),
            UdpError::HostUnreachable => write!(
                f,
                "host unreachable: the destination or gateway did not answer"
            ),
            UdpError::NetUnreachable => write!(f, "network unreachable (ICMP from a router)"),
            UdpError::PortUnreachable => write!(
                f,
                "port unreachable: nothing listens at the destination port"
            ),
            UdpError::TimeExceeded => write!(
                f,
                "time exceeded (TTL or reassembly) on the way to the destination"
            ),
            UdpError::InvalidGroup => {
                write!(f, "not a multicast group: join an address in 224.0.0.0/4")
            }
        }
    }
}

impl core::error::Error for UdpError {}

#[derive(Debug)]
pub(crate) struct UdpSocket {
    pub(crate) local: SocketAddr,
    /// Datagrams received: (source, destination) and data.
    pub(crate) queue: RecvQueue<(SocketAddr, SocketAddr)>,
    /// An asynchronous error, reported once by the next `udp_recv_from`.
    pub(crate) error: Option<UdpError>,
    /// Set DF on outgoing datagrams (then oversize sends fail instead of fragmenting).
    pub(crate) dont_frag: bool,
    /// TTL of datagrams to IPv4 multicast groups (`IP_MULTICAST_TTL`, default 1).
    pub(crate) multicast_ttl: u8,
    /// Datagrams to an IPv4 group the sending interface is in are also delivered to
    /// this host's sockets (`IP_MULTICAST_LOOP`, default on).
    pub(crate) multicast_loop: bool,
}

impl UdpSocket {
    /// A socket bound to `local`, its queue holding at most `limits` (datagrams,
    /// bytes), every option at its default.
    pub(crate) fn new(local: SocketAddr, limits: (usize, usize)) -> UdpSocket {
        UdpSocket {
            local,
            queue: RecvQueue::new(limits.0, limits.1),
            error: None,
            dont_frag: false,
            multicast_ttl: 1,
            multicast_loop: true,
        }
    }
}

/// Every UDP socket of a stack, and the port demultiplexing table.
#[derive(Debug, Default)]
pub(crate) struct UdpSockets {
    pub(crate) sockets: Slab<UdpSocket>,
    /// Keyed by (port, local address); `UNSPECIFIED` is the wildcard binding.
    pub(crate) bound: BTreeMap<(u16, IpAddr), UdpHandle>,
}

impl UdpSockets {
    /// The socket `handle`, or `InvalidHandle`.
    pub(crate) fn get(&self, handle: UdpHandle) -> Result<&UdpSocket, UdpError> {
        self.sockets.get(handle.0).ok_or(UdpError::InvalidHandle)
    }

    /// The socket `handle` to change, or `InvalidHandle`.
    pub(crate) fn get_mut(&mut self, handle: UdpHandle) -> Result<&mut UdpSocket, UdpError> {
        self.sockets
            .get_mut(handle.0)
            .ok_or(UdpError::InvalidHandle)
    }
}

impl UdpSockets {
    /// The socket a datagram to `dst` is for: an exact binding, else the wildcard.
    pub(crate) fn lookup(&self, dst: SocketAddr) -> Option<UdpHandle> {
        let port = dst.port();
        let any = match dst.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        self.bound
            .get(&(port, dst.ip()))
            .or_else(|| self.bound.get(&(port, any)))
            // A socket on `[::]` takes IPv4 too (dual-stack, as Linux's default).
            .or_else(|| self.bound.get(&(port, IpAddr::V6(Ipv6Addr::UNSPECIFIED))))
            .copied()
    }

    #[cfg(test)]
    pub(crate) fn lookup_for_tests(&self, local: SocketAddr) -> Option<UdpHandle> {
        self.lookup(local)
    }

    /// Whether binding `local` would take datagrams a bound socket already takes.
    pub(crate) fn clashes(&self, local: SocketAddr) -> bool {
        let port = local.port();
        let low = (port, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let high = (port, IpAddr::V6(Ipv6Addr::from_bits(u128::MAX)));
        self.bound
            .range(low..=high)
            .any(|((_, addr), _)| overlaps(*addr, local.ip()))
    }

    /// Mark an error on the socket bound to `local` (from ICMP or ARP failure).
    pub(crate) fn set_error_by_handle(&mut self, handle: UdpHandle, error: UdpError) -> bool {
        match self.sockets.get_mut(handle.0) {
            Some(socket) => {
                let was_quiet = socket.error.is_none() && socket.queue.is_empty();
                socket.error = Some(error);
                was_quiet
            }
            None => false,
        }
    }

    /// Mark an error on the socket that sent from `local` (an ICMP error quoting it).
    pub(crate) fn set_error_by_addr(
        &mut self,
        local: SocketAddr,
        error: UdpError,
    ) -> Option<UdpHandle> {
        let handle = self.lookup(local)?;
        self.set_error_by_handle(handle, error).then_some(handle)
    }
}

/// Whether sockets bound to `a` and `b` (on one port) would take the same datagrams:
/// the same address, or a wildcard of its family (`[::]` covers IPv4 too).
fn overlaps(a: IpAddr, b: IpAddr) -> bool {
    let covers =
        |w: IpAddr, x: IpAddr| w.is_unspecified() && (w.is_ipv6() || w.is_ipv4() == x.is_ipv4());
    a == b || covers(a, b) || covers(b, a)
}
