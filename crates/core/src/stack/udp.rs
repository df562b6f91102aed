//! UDP on the stack: datagrams in (to the bound socket, or port unreachable) and the
//! `udp_*` socket calls.

use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use impnet_wire::ipv4::Protocol;
use impnet_wire::udp;

use crate::neighbor::{Origin, SocketKind};
use crate::stack::ip::{IpMeta, Meta6, OutputError};
use crate::stack::ipv4::SendOptions;
use crate::stack::{Event, Stack};
use crate::time::Instant;
use crate::udp::UdpSocket;
use crate::udp::{EPHEMERAL_PORTS, MAX_PAYLOAD, UdpError, UdpHandle};
use impnet_wire::icmpv6;

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

impl Stack {
    /// Bind a UDP socket to `local`, an IPv4 or IPv6 address. Address unspecified:
    /// every address of the stack of that family (`[::]`: of both); port 0: an
    /// ephemeral port (49152..=65535) drawn from the seeded RNG.
    pub fn udp_bind(&mut self, local: impl Into<SocketAddr>) -> Result<UdpHandle, UdpError> {
        let local = local.into();
        if !local.ip().is_unspecified() && !self.is_local_ip(local.ip()) {
            return Err(UdpError::AddrNotAvailable);
        }
        let local = if local.port() == 0 {
            self.udp_ephemeral(local.ip())?
        } else {
            local
        };
        if self.udp.clashes(local) {
            return Err(UdpError::AddrInUse);
        }
        let limits = (self.config.udp_queue_limit, self.config.udp_queue_bytes);
        let socket = UdpSocket::new(local, limits);
        let handle = UdpHandle(self.udp.sockets.insert(socket));
        self.udp.bound.insert((local.port(), local.ip()), handle);
        Ok(handle)
    }

    /// A free ephemeral port: a random start, then the next free one (RFC 6056
    /// algorithm 1, "simple port randomization", with our seeded RNG).
    fn udp_ephemeral(&mut self, addr: IpAddr) -> Result<SocketAddr, UdpError> {
        let (low, high) = (*EPHEMERAL_PORTS.start(), *EPHEMERAL_PORTS.end());
        let count = u32::from(high - low) + 1;
        let start = self.rng.in_range(0, count - 1);
        for step in 0..count {
            let port = low + ((start + step) % count) as u16;
            let candidate = SocketAddr::new(addr, port);
            if !self.udp.clashes(candidate) {
                return Ok(candidate);
            }
        }
        Err(UdpError::NoPortsAvailable)
    }

    /// The address and port `handle` is bound to.
    pub fn udp_local_addr(&self, handle: UdpHandle) -> Result<SocketAddr, UdpError> {
        self.udp.get(handle).map(|s| s.local)
    }

    /// Set or clear DF on the socket's datagrams (RFC 1191 path MTU discovery by hand):
    /// with DF, a datagram bigger than the route MTU fails with `FragmentationNeeded`.
    pub fn udp_set_dont_fragment(
        &mut self,
        handle: UdpHandle,
        dont_frag: bool,
    ) -> Result<(), UdpError> {
        self.udp.get_mut(handle)?.dont_frag = dont_frag;
        Ok(())
    }

    /// Send one datagram of up to 65507 bytes to `dst` (IPv4 or IPv6), fragmented to
    /// the route MTU. Success means queued: delivery failures come back later through
    /// `udp_recv_from`. A socket bound to an address of one family cannot send to the
    /// other (`AddrNotAvailable`).
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        dst: impl Into<SocketAddr>,
        data: &[u8],
    ) -> Result<(), UdpError> {
        let socket = self.udp.get(handle)?;
        let (local, dont_frag) = (socket.local, socket.dont_frag);
        self.udp_send_inner(now, handle, (local, dont_frag), dst.into(), data)
    }

    /// [`Stack::udp_send_to`] and [`Stack::udp_send_from`]: one datagram from `local`
    /// (an unspecified address: the route's).
    pub(crate) fn udp_send_inner(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        (local, dont_frag): (SocketAddr, bool),
        dst: SocketAddr,
        data: &[u8],
    ) -> Result<(), UdpError> {
        if data.len() > MAX_PAYLOAD {
            return Err(UdpError::MessageTooLong);
        }
        let src = Some(local.ip()).filter(|a| !a.is_unspecified());
        let (dst, src) = match (dst, src) {
            (SocketAddr::V6(dst), None | Some(IpAddr::V6(_))) => {
                let src = src.map(|a| match a {
                    IpAddr::V6(a) => a,
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                });
                return self.udp_send_to_v6(now, (handle, local.port()), (src, dst), data);
            }
            (SocketAddr::V4(dst), None) => (dst, None),
            (SocketAddr::V4(dst), Some(IpAddr::V4(src))) => (dst, Some(src)),
            _ => return Err(UdpError::AddrNotAvailable),
        };
        let multicast = dst.ip().is_multicast();
        let (route, ttl, looped) = if multicast {
            let socket = self.udp.sockets.get(handle.0);
            let ttl = socket.map(|s| s.multicast_ttl);
            let route = self.route_multicast(*dst.ip(), src)?;
            let looped = socket.is_some_and(|s| s.multicast_loop)
                && self.admits_v4(route.iface, *dst.ip(), route.src);
            (route, ttl, looped)
        } else {
            (self.route_output(*dst.ip(), src)?, None, false)
        };
        let repr = udp::Repr {
            src_port: local.port(),
            dst_port: dst.port(),
            payload: data,
        };
        let mut packet = self.pool.take();
        packet.resize(impnet_wire::ipv4::HEADER_LEN + repr.buffer_len(), 0);
        // A device completes the checksum of a packet, not of a datagram IP will cut
        // into fragments: that one's sum is ours.
        let fragmented = packet.len() > route.mtu;
        let mut view = udp::Packet::new_unchecked(&mut packet[impnet_wire::ipv4::HEADER_LEN..]);
        repr.emit(&mut view, &route.src, dst.ip());
        if self
            .ifaces
            .get(route.iface.index())
            .is_some_and(|i| i.offloads.tx_checksum)
            && !fragmented
        {
            // The device completes it: leave the pseudo-header sum (RFC 768's
            // pseudo-header, what `CHECKSUM_PARTIAL` devices expect in the field).
            let length = repr.buffer_len() as u32;
            let partial = impnet_wire::checksum::pseudo_header_v4(&route.src, dst.ip(), 17, length);
            view.set_checksum(partial);
        }
        if looped {
            self.loop_multicast(now, (route.src, *dst.ip()), ttl, &packet);
        }
        let options = SendOptions {
            protocol: Protocol::Udp,
            dont_frag,
            origin: Origin::Socket(SocketKind::Udp, handle.0),
            ip_options: &[],
            ttl,
        };
        self.send_ipv4(now, &route, *dst.ip(), options, packet)?;
        self.stats.igmp.tx_multicast += u64::from(multicast);
        self.stats.udp.tx_datagrams += 1;
        self.stats.work.socket_calls += 1;
        self.stats.work.copied_from_user += data.len() as u64;
        Ok(())
    }

    /// `IP_MULTICAST_LOOP`: a copy of the UDP datagram in `packet` (behind room for
    /// the IPv4 header) from `src` to `group`, put on the loopback queue for this
    /// host's members. A full queue drops the copy, as a full `lo` would.
    fn loop_multicast(
        &mut self,
        now: Instant,
        (src, group): (core::net::Ipv4Addr, core::net::Ipv4Addr),
        ttl: Option<u8>,
        packet: &[u8],
    ) {
        let mut copy = self.pool.take();
        copy.extend_from_slice(packet);
        let header_len = impnet_wire::ipv4::HEADER_LEN;
        let ident = self.next_ident();
        let mut repr = self.ip_header(
            src,
            group,
            Protocol::Udp,
            copy.len() - header_len,
            ident,
            false,
        );
        repr.ttl = ttl.unwrap_or(repr.ttl);
        repr.emit(&mut impnet_wire::ipv4::Packet::new_unchecked(&mut copy[..]));
        if self.loop_back(now, copy).is_ok() {
            self.stats.igmp.tx_looped += 1;
        }
    }

    /// [`Stack::udp_send_to`] to an IPv6 address, from `src` (None: the route's).
    fn udp_send_to_v6(
        &mut self,
        now: Instant,
        (handle, port): (UdpHandle, u16),
        (src, dst): (Option<Ipv6Addr>, SocketAddrV6),
        data: &[u8],
    ) -> Result<(), UdpError> {
        let route = self.route_output6(now, *dst.ip(), src)?;
        let repr = udp::Repr {
            src_port: port,
            dst_port: dst.port(),
            payload: data,
        };
        let mut packet = self.pool.take();
        packet.resize(impnet_wire::ipv6::HEADER_LEN + repr.buffer_len(), 0);
        let mut view = udp::Packet::new_unchecked(&mut packet[impnet_wire::ipv6::HEADER_LEN..]);
        // RFC 8200 §8.1: the checksum is mandatory over IPv6 (never 0).
        repr.emit(&mut view, &route.src, dst.ip());
        let origin = Origin::Socket(SocketKind::Udp, handle.0);
        let next = (impnet_wire::ipv6::NextHeader::Udp, None);
        self.send_ipv6_routed(now, &route, *dst.ip(), next, packet, origin)?;
        self.stats.udp.tx_datagrams += 1;
        self.stats.work.socket_calls += 1;
        self.stats.work.copied_from_user += data.len() as u64;
        Ok(())
    }

    /// Copy the oldest queued datagram into `buf` (a longer datagram is truncated, the
    /// rest discarded) and return its length in `buf` and its source. A pending error
    /// (e.g. `HostUnreachable`, `PortUnreachable`) is returned once, before data.
    pub fn udp_recv_from(
        &mut self,
        handle: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr), UdpError> {
        self.udp_recv_inner(handle, buf)
            .map(|(len, src, _)| (len, src))
    }

    /// [`Stack::udp_recv_from`] with the datagram's destination.
    pub(crate) fn udp_recv_inner(
        &mut self,
        handle: UdpHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddr, SocketAddr), UdpError> {
        let socket = self.udp.get_mut(handle)?;
        if let Some(error) = socket.error.take() {
            return Err(error);
        }
        let ((src, dst), data) = socket.queue.pop().ok_or(UdpError::WouldBlock)?;
        let len = data.len().min(buf.len());
        buf[..len].copy_from_slice(&data[..len]);
        self.pool.give(data);
        self.stats.work.socket_calls += 1;
        self.stats.work.copied_to_user += len as u64;
        Ok((len, src, dst))
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
            .remove(&(socket.local.port(), socket.local.ip()));
        self.igmp_socket_closed(handle);
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
        if self.dhcp_input(now, &repr) {
            return;
        }
        let dst = SocketAddr::V4(SocketAddrV4::new(meta.dst, repr.dst_port));
        let found = self.udp.lookup(dst);
        let Some(handle) = found.or_else(|| self.udp_catch_all(meta.broadcast)) else {
            self.stats.udp.rx_no_port += 1;
            // RFC 1122 §3.2.2: no ICMP error for a datagram sent to a broadcast address.
            if !meta.broadcast {
                self.send_port_unreachable(now, meta, payload);
            }
            return;
        };
        if meta.dst.is_multicast() && !self.socket_admits_v4(handle, meta.dst, meta.src) {
            self.stats.igmp.rx_source_filtered += 1;
            return;
        }
        let src = SocketAddr::V4(SocketAddrV4::new(meta.src, repr.src_port));
        self.udp_deliver(handle, (src, dst), repr.payload);
    }

    /// The catch-all socket ([`Stack::udp_bind_any`]) for a datagram no socket is
    /// bound to; none for one sent to a broadcast address or a group (`group`).
    fn udp_catch_all(&mut self, group: bool) -> Option<UdpHandle> {
        let handle = *self.udp.bound.get(&super::accept_any::UDP_CATCH_ALL)?;
        if group {
            return None;
        }
        self.stats.accept_any.udp_caught += 1;
        Some(handle)
    }

    /// Queue a datagram from `src` to `dst` on the socket `handle`.
    fn udp_deliver(&mut self, handle: UdpHandle, ends: (SocketAddr, SocketAddr), payload: &[u8]) {
        let mut data = self.pool.take();
        data.extend_from_slice(payload);
        let Some(socket) = self.udp.sockets.get_mut(handle.0) else {
            self.pool.give(data);
            return;
        };
        let was_quiet = socket.queue.is_empty() && socket.error.is_none();
        match socket.queue.push(ends, data) {
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

    /// A UDP datagram over IPv6 to one of our addresses (or a group we are in): to
    /// the bound socket, else Port Unreachable (RFC 4443 §3.1 code 4; none for a
    /// datagram to a multicast group, RFC 4443 §2.4 (e)).
    pub(crate) fn handle_udp6(&mut self, now: Instant, meta: &Meta6<'_>, payload: &[u8]) {
        self.stats.udp.rx_datagrams += 1;
        let Ok(packet) = udp::Packet::new_checked(payload) else {
            self.stats.udp.rx_malformed += 1;
            return;
        };
        // RFC 8200 §8.1: "IPv6 receivers must discard UDP packets containing a zero
        // checksum".
        if meta.verify_checksum && packet.checksum() == 0 {
            self.stats.udp.rx_bad_checksum += 1;
            return;
        }
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
        let dst = SocketAddr::V6(SocketAddrV6::new(meta.dst, repr.dst_port, 0, 0));
        let found = self.udp.lookup(dst);
        let Some(handle) = found.or_else(|| self.udp_catch_all(meta.multicast)) else {
            self.stats.udp.rx_no_port += 1;
            if !meta.multicast {
                let repr = icmpv6::Repr::DstUnreachable {
                    reason: icmpv6::DstUnreachable::PortUnreachable,
                    invoking: meta.invoking,
                };
                self.send_icmpv6_error(now, meta, &repr);
            }
            return;
        };
        let src = SocketAddr::V6(SocketAddrV6::new(meta.src, repr.src_port, 0, 0));
        self.udp_deliver(handle, (src, dst), repr.payload);
    }
}
