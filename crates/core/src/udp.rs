//! UDP (RFC 768) sockets: bind, send, receive with bounded queues, and the input path.

use alloc::collections::BTreeMap;
use core::fmt;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::ipv4::Protocol;
use impnet_wire::udp;

use crate::ipv4::{IpMeta, OutputError, SendOptions};
use crate::neighbor::Origin;
use crate::socket::{Handle, RecvQueue, Slab};
use crate::stack::{Event, Stack};
use crate::time::Instant;

/// The largest UDP payload over IPv4: 65535 - 20 (IPv4 header) - 8 (UDP header).
pub const MAX_PAYLOAD: usize = 65507;
/// The IANA dynamic port range (RFC 6335 §6), from which ephemeral ports are drawn.
pub const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=65535;

/// A UDP socket; stale handles (after `udp_close`) are reported as invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpHandle(Handle);

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
        }
    }
}

impl core::error::Error for UdpError {}

impl From<OutputError> for UdpError {
    fn from(error: OutputError) -> UdpError {
        match error {
            OutputError::NoRoute | OutputError::NoSourceAddress => UdpError::NoRoute,
            OutputError::AddrNotAvailable => UdpError::AddrNotAvailable,
            OutputError::TooBig { mtu } => UdpError::FragmentationNeeded { mtu },
            OutputError::QueueFull => UdpError::NoBufferSpace,
        }
    }
}

#[derive(Debug)]
struct UdpSocket {
    local: SocketAddrV4,
    /// Datagrams received: source and data.
    queue: RecvQueue<SocketAddrV4>,
    /// An asynchronous error, reported once by the next `udp_recv_from`.
    error: Option<UdpError>,
    /// Set DF on outgoing datagrams (then oversize sends fail instead of fragmenting).
    dont_frag: bool,
}

/// Every UDP socket of a stack, and the port demultiplexing table.
#[derive(Debug, Default)]
pub(crate) struct UdpSockets {
    sockets: Slab<UdpSocket>,
    /// Keyed by (port, local address); `UNSPECIFIED` is the wildcard binding.
    bound: BTreeMap<(u16, Ipv4Addr), UdpHandle>,
}

impl UdpSockets {
    /// The socket a datagram to `dst` is for: an exact binding, else the wildcard.
    fn lookup(&self, dst: SocketAddrV4) -> Option<UdpHandle> {
        let port = dst.port();
        self.bound
            .get(&(port, *dst.ip()))
            .or_else(|| self.bound.get(&(port, Ipv4Addr::UNSPECIFIED)))
            .copied()
    }

    /// The socket bound to `local` (tests).
    #[cfg(test)]
    pub(crate) fn lookup_for_tests(&self, local: SocketAddrV4) -> Option<UdpHandle> {
        self.lookup(local)
    }

    /// True when binding `local` would clash: the same address, or a wildcard and a
    /// specific address, on the same port.
    fn clashes(&self, local: SocketAddrV4) -> bool {
        let port = local.port();
        let mut on_port = self
            .bound
            .range((port, Ipv4Addr::UNSPECIFIED)..=(port, Ipv4Addr::BROADCAST));
        if local.ip().is_unspecified() {
            on_port.next().is_some()
        } else {
            on_port.any(|((_, addr), _)| addr == local.ip() || addr.is_unspecified())
        }
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
        local: SocketAddrV4,
        error: UdpError,
    ) -> Option<UdpHandle> {
        let handle = self.lookup(local)?;
        self.set_error_by_handle(handle, error).then_some(handle)
    }
}

impl Stack {
    /// Bind a UDP socket to `local`. Address unspecified: every address of the stack;
    /// port 0: an ephemeral port (49152..=65535) drawn from the seeded RNG.
    pub fn udp_bind(&mut self, local: SocketAddrV4) -> Result<UdpHandle, UdpError> {
        if !local.ip().is_unspecified() && !self.is_local_addr(*local.ip()) {
            return Err(UdpError::AddrNotAvailable);
        }
        let local = if local.port() == 0 {
            self.udp_ephemeral(*local.ip())?
        } else {
            local
        };
        if self.udp.clashes(local) {
            return Err(UdpError::AddrInUse);
        }
        let limits = (self.config.udp_queue_limit, self.config.udp_queue_bytes);
        let socket = UdpSocket {
            local,
            queue: RecvQueue::new(limits.0, limits.1),
            error: None,
            dont_frag: false,
        };
        let handle = UdpHandle(self.udp.sockets.insert(socket));
        self.udp.bound.insert((local.port(), *local.ip()), handle);
        Ok(handle)
    }

    /// A free ephemeral port: a random start, then the next free one (RFC 6056
    /// algorithm 1, "simple port randomization", with our seeded RNG).
    fn udp_ephemeral(&mut self, addr: Ipv4Addr) -> Result<SocketAddrV4, UdpError> {
        let (low, high) = (*EPHEMERAL_PORTS.start(), *EPHEMERAL_PORTS.end());
        let count = u32::from(high - low) + 1;
        let start = self.rng.in_range(0, count - 1);
        for step in 0..count {
            let port = low + ((start + step) % count) as u16;
            let candidate = SocketAddrV4::new(addr, port);
            if !self.udp.clashes(candidate) {
                return Ok(candidate);
            }
        }
        Err(UdpError::NoPortsAvailable)
    }

    /// The address and port `handle` is bound to.
    pub fn udp_local_addr(&self, handle: UdpHandle) -> Result<SocketAddrV4, UdpError> {
        self.udp
            .sockets
            .get(handle.0)
            .map(|s| s.local)
            .ok_or(UdpError::InvalidHandle)
    }

    /// Set or clear DF on the socket's datagrams (RFC 1191 path MTU discovery by hand):
    /// with DF, a datagram bigger than the route MTU fails with `FragmentationNeeded`.
    pub fn udp_set_dont_fragment(
        &mut self,
        handle: UdpHandle,
        dont_frag: bool,
    ) -> Result<(), UdpError> {
        let socket = self
            .udp
            .sockets
            .get_mut(handle.0)
            .ok_or(UdpError::InvalidHandle)?;
        socket.dont_frag = dont_frag;
        Ok(())
    }

    /// Send one datagram of up to 65507 bytes to `dst`, fragmented to the route MTU.
    /// Success means queued: delivery failures come back later through `udp_recv_from`.
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        dst: SocketAddrV4,
        data: &[u8],
    ) -> Result<(), UdpError> {
        let socket = self
            .udp
            .sockets
            .get(handle.0)
            .ok_or(UdpError::InvalidHandle)?;
        if data.len() > MAX_PAYLOAD {
            return Err(UdpError::MessageTooLong);
        }
        let (local, dont_frag) = (socket.local, socket.dont_frag);
        let route =
            self.route_output(*dst.ip(), Some(*local.ip()).filter(|a| !a.is_unspecified()))?;
        let repr = udp::Repr {
            src_port: local.port(),
            dst_port: dst.port(),
            payload: data,
        };
        let mut packet = self.pool.take();
        packet.resize(impnet_wire::ipv4::HEADER_LEN + repr.buffer_len(), 0);
        let mut view = udp::Packet::new_unchecked(&mut packet[impnet_wire::ipv4::HEADER_LEN..]);
        repr.emit(&mut view, &route.src, dst.ip());
        if self.ifaces[route.iface.index()].offloads.tx_checksum {
            // The device completes it: leave the pseudo-header sum (RFC 768's
            // pseudo-header, what `CHECKSUM_PARTIAL` devices expect in the field).
            let length = repr.buffer_len() as u32;
            let partial = impnet_wire::checksum::pseudo_header_v4(&route.src, dst.ip(), 17, length);
            view.set_checksum(partial);
        }
        let options = SendOptions {
            protocol: Protocol::Udp,
            dont_frag,
            origin: Origin::Udp(handle),
        };
        self.send_ipv4(now, &route, *dst.ip(), options, packet)?;
        self.stats.udp.tx_datagrams += 1;
        Ok(())
    }

    /// Copy the oldest queued datagram into `buf` (a longer datagram is truncated, the
    /// rest discarded) and return its length in `buf` and its source. A pending error
    /// (e.g. `HostUnreachable`, `PortUnreachable`) is returned once, before data.
    pub fn udp_recv_from(
        &mut self,
        handle: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), UdpError> {
        let socket = self
            .udp
            .sockets
            .get_mut(handle.0)
            .ok_or(UdpError::InvalidHandle)?;
        if let Some(error) = socket.error.take() {
            return Err(error);
        }
        let (src, data) = socket.queue.pop().ok_or(UdpError::WouldBlock)?;
        let len = data.len().min(buf.len());
        buf[..len].copy_from_slice(&data[..len]);
        self.pool.give(data);
        Ok((len, src))
    }

    /// Close the socket; its handle becomes invalid and queued datagrams are freed.
    pub fn udp_close(&mut self, handle: UdpHandle) -> Result<(), UdpError> {
        let mut socket = self
            .udp
            .sockets
            .remove(handle.0)
            .ok_or(UdpError::InvalidHandle)?;
        self.udp
            .bound
            .remove(&(socket.local.port(), *socket.local.ip()));
        for buffer in socket.queue.drain() {
            self.pool.give(buffer);
        }
        Ok(())
    }

    /// A UDP datagram arrived for one of our addresses (or a broadcast).
    #[inline(never)]
    pub(crate) fn handle_udp(&mut self, now: Instant, meta: &IpMeta<'_>, payload: &[u8]) {
        self.stats.udp.rx_datagrams += 1;
        let Ok(packet) = udp::Packet::new_checked(payload) else {
            self.stats.udp.rx_malformed += 1;
            return;
        };
        let repr = match udp::Repr::parse(&packet, &meta.src, &meta.dst, meta.verify_checksum) {
            Ok(repr) => repr,
            Err(impnet_wire::Error::BadChecksum) => {
                self.stats.udp.rx_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.udp.rx_malformed += 1;
                return;
            }
        };
        let Some(handle) = self.udp.lookup(SocketAddrV4::new(meta.dst, repr.dst_port)) else {
            self.stats.udp.rx_no_port += 1;
            // RFC 1122 §3.2.2: no ICMP error for a datagram sent to a broadcast address.
            if !meta.broadcast {
                self.send_port_unreachable(now, meta, payload);
            }
            return;
        };
        let mut data = self.pool.take();
        data.extend_from_slice(repr.payload);
        let src = SocketAddrV4::new(meta.src, repr.src_port);
        let Some(socket) = self.udp.sockets.get_mut(handle.0) else {
            return;
        };
        let was_quiet = socket.queue.is_empty() && socket.error.is_none();
        match socket.queue.push(src, data) {
            Ok(()) => {
                self.stats.udp.rx_delivered += 1;
                if was_quiet {
                    self.push_event(Event::Udp(handle));
                }
            }
            Err(data) => {
                self.stats.udp.rx_queue_full += 1;
                self.pool.give(data);
            }
        }
    }
}
