//! The accept-any mode on the stack ([`crate::accept_any`]): switching it on, the
//! per-source admission of opening packets, the catch-all TCP listener and UDP socket.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::accept_any::{AcceptAny, Refusal};
use crate::iface::IfaceId;
use crate::stack::Stack;
use crate::tcp::{TcpError, TcpHandle};
use crate::time::Instant;
use crate::udp::{UdpError, UdpHandle, UdpSocket};

/// Where the catch-all UDP socket sits in the bound table: port 0 of `[::]`, a port
/// no datagram is sent to and no other socket can take.
pub(crate) const UDP_CATCH_ALL: (u16, IpAddr) = (0, IpAddr::V6(Ipv6Addr::UNSPECIFIED));

/// IP protocol numbers the admission looks into.
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

impl Stack {
    /// Switch the accept-any mode of `iface` on (with these limits) or off (None).
    /// While it is on, IPv4 and IPv6 packets arriving there for any address are taken
    /// in as ours, and the stack may send from any address (the replies of the
    /// connections and datagrams accepted so). An unknown interface is ignored.
    pub fn set_accept_any(&mut self, iface: IfaceId, mode: Option<AcceptAny>) {
        if let Some(interface) = self.ifaces.get_mut(iface.index()) {
            interface.accept_any = mode;
            self.config_generation += 1;
        }
    }

    /// The accept-any limits of `iface` (None: the mode is off).
    pub fn accept_any(&self, iface: IfaceId) -> Option<AcceptAny> {
        self.ifaces.get(iface.index()).and_then(|i| i.accept_any)
    }

    /// True when some interface accepts any destination: then any source address
    /// may be used for output.
    pub(crate) fn accepts_any(&self) -> bool {
        self.ifaces.iter().any(|i| i.accept_any.is_some())
    }

    /// A packet from `src` to an address not ours arrived on the accept-any `iface`:
    /// whether to take it in. `transport` is the start of its transport header (None
    /// for a later fragment). Opening packets (a TCP SYN without ACK, any UDP
    /// datagram) take a token of their source's bucket; the rest passes.
    pub(crate) fn accept_any_admits(
        &mut self,
        now: Instant,
        iface: IfaceId,
        src: IpAddr,
        (protocol, transport): (u8, Option<&[u8]>),
    ) -> bool {
        let Some(limits) = self.ifaces.get(iface.index()).and_then(|i| i.accept_any) else {
            return false;
        };
        let opening = match (protocol, transport) {
            // The flags byte of the TCP header: SYN (0x02) without ACK (0x10).
            (PROTO_TCP, Some(header)) => header.get(13).is_some_and(|f| f & 0x12 == 0x02),
            (PROTO_UDP, Some(_)) => true,
            _ => false,
        };
        if opening {
            match self.accept_any.admit(now, src, &limits) {
                Ok(()) => {}
                Err(Refusal::RateLimited) => {
                    self.stats.accept_any.rate_limited += 1;
                    return false;
                }
                Err(Refusal::SourcesFull) => {
                    self.stats.accept_any.sources_full += 1;
                    return false;
                }
            }
        }
        self.stats.accept_any.rx_taken += 1;
        true
    }

    /// The catch-all TCP listener: it accepts SYNs to any address and port that no
    /// other listener or connection takes (on an accept-any interface, any address; on
    /// the others, only ours reach TCP). Each accepted connection's
    /// local address ([`Stack::tcp_addresses`]) is the destination the client asked for. At most
    /// `max_half_open` connections wait in SYN-RECEIVED (further SYNs are dropped and
    /// counted in `TcpStats::half_open_drops`, no SYN cookie), and at most `backlog`
    /// more wait for `tcp_accept`. A second one is `AddrInUse`.
    pub fn tcp_listen_any(
        &mut self,
        backlog: usize,
        max_half_open: usize,
    ) -> Result<TcpHandle, TcpError> {
        self.tcp.listen_any(backlog, max_half_open)
    }

    /// The catch-all UDP socket: datagrams to any address and port that no other
    /// socket is bound to (broadcast and multicast aside) queue here with their
    /// destination; read them with [`Stack::udp_recv_from_to`] and answer with
    /// [`Stack::udp_send_from`]. A second one is `AddrInUse`.
    pub fn udp_bind_any(&mut self) -> Result<UdpHandle, UdpError> {
        if self.udp.bound.contains_key(&UDP_CATCH_ALL) {
            return Err(UdpError::AddrInUse);
        }
        let limits = (self.config.udp_queue_limit, self.config.udp_queue_bytes);
        let local = SocketAddr::new(UDP_CATCH_ALL.1, UDP_CATCH_ALL.0);
        let socket = UdpSocket::new(local, limits);
        let handle = UdpHandle(self.udp.sockets.insert(socket));
        self.udp.bound.insert(UDP_CATCH_ALL, handle);
        Ok(handle)
    }

    /// As [`Stack::udp_recv_from`], also returning the datagram's destination (the
    /// address and port the sender chose; for a bound socket, the address it arrived
    /// at): `(length, source, destination)`.
    pub fn udp_recv_from_to(
        &mut self,
        handle: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr, SocketAddr), UdpError> {
        self.udp_recv_inner(handle, buf)
    }

    /// Send `data` to `dst` from `src` (address and port both given), on any UDP
    /// socket: the answer of a catch-all socket to a datagram it received, sent from
    /// that datagram's destination. `src` must be ours, or some interface must accept
    /// any destination (`AddrNotAvailable` otherwise, and for port 0 or an
    /// unspecified address).
    pub fn udp_send_from(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        src: SocketAddr,
        dst: SocketAddr,
        data: &[u8],
    ) -> Result<(), UdpError> {
        let socket = self.udp.get(handle)?;
        if src.port() == 0 || src.ip().is_unspecified() {
            return Err(UdpError::AddrNotAvailable);
        }
        let dont_frag = socket.dont_frag;
        self.udp_send_inner(now, handle, (src, dont_frag), dst, data)
    }
}
