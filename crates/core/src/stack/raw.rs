//! Raw IPv4 sockets on the stack ([`crate::raw`]): `raw_*` calls, and the copy of each
//! datagram taken in for the sockets of its protocol.
//!
//! As on Linux: a socket receives every datagram of its protocol the host takes in
//! (to one of its addresses, a broadcast or a group it is in), after reassembly,
//! with the IPv4 header (a reassembled datagram's header is fragment zero's with the
//! total length, fragment fields and checksum made whole); the stack still handles
//! the datagram itself (an echo request is answered), and a protocol the stack does not
//! know draws no Protocol Unreachable when a raw socket took it. Without `hdrincl`
//! the stack builds the header (the stack's TTL; multicast: TTL 1 and the group's
//! MAC); with it the caller's header is sent after the checks and fill-ins of Linux's
//! raw(7): version 4, a header length within the datagram; the total length and the
//! checksum always filled in, the identification and the source when zero.

use core::net::Ipv4Addr;

use impnet_wire::ipv4::{self, Protocol};

use crate::neighbor::{Origin, SocketKind};
use crate::raw::{RawError, RawHandle, RawSocket};
use crate::socket::RecvQueue;
use crate::stack::ip::{IpMeta, OutputError};
use crate::stack::ipv4::{OutputRoute, SendOptions};
use crate::stack::{Event, Stack};
use crate::time::Instant;

impl From<OutputError> for RawError {
    fn from(error: OutputError) -> RawError {
        match error {
            OutputError::NoRoute | OutputError::NoSourceAddress => RawError::NoRoute,
            OutputError::AddrNotAvailable => RawError::BadHeader("source address not ours"),
            OutputError::TooBig { .. } => RawError::MessageTooLong,
            OutputError::QueueFull => RawError::NoBufferSpace,
        }
    }
}

impl Stack {
    /// Open a raw socket for IPv4 protocol `protocol` (1 ICMP, 2 IGMP, 17 UDP, ...).
    pub fn raw_bind(&mut self, protocol: u8) -> Result<RawHandle, RawError> {
        if protocol == 0 {
            return Err(RawError::InvalidProtocol);
        }
        let limits = (self.config.udp_queue_limit, self.config.udp_queue_bytes);
        let socket = RawSocket {
            protocol,
            queue: RecvQueue::new(limits.0, limits.1),
            hdrincl: false,
        };
        let handle = RawHandle(self.raw.sockets.insert(socket));
        self.raw.open.push((protocol, handle));
        Ok(handle)
    }

    /// Send the caller's IPv4 header with each datagram (`IP_HDRINCL`), or not.
    pub fn raw_set_hdrincl(&mut self, handle: RawHandle, hdrincl: bool) -> Result<(), RawError> {
        let socket = self
            .raw
            .sockets
            .get_mut(handle.0)
            .ok_or(RawError::InvalidHandle)?;
        socket.hdrincl = hdrincl;
        Ok(())
    }

    /// Send `data` to `dst`: the payload after a header the stack builds, or with
    /// `hdrincl` the whole datagram (its destination field is used, `dst` ignored as on
    /// Linux but for the route). Fragmented to the route MTU without `hdrincl`.
    pub fn raw_send_to(
        &mut self,
        now: Instant,
        handle: RawHandle,
        dst: Ipv4Addr,
        data: &[u8],
    ) -> Result<(), RawError> {
        let socket = self
            .raw
            .sockets
            .get(handle.0)
            .ok_or(RawError::InvalidHandle)?;
        let (protocol, hdrincl) = (socket.protocol, socket.hdrincl);
        if hdrincl {
            return self.raw_send_whole(now, handle, data);
        }
        if data.len() > usize::from(u16::MAX) - ipv4::HEADER_LEN {
            return Err(RawError::MessageTooLong);
        }
        let (route, ttl) = self.raw_route(dst, None)?;
        let mut packet = self.pool.take();
        packet.resize(ipv4::HEADER_LEN, 0);
        packet.extend_from_slice(data);
        let options = SendOptions {
            protocol: Protocol::from(protocol),
            dont_frag: false,
            origin: Origin::Socket(SocketKind::Raw, handle.0),
            ip_options: &[],
            ttl,
        };
        self.send_ipv4(now, &route, dst, options, packet)?;
        Ok(())
    }

    /// The route to `dst` (a group's for a multicast address, TTL 1) from `src`.
    fn raw_route(
        &self,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
    ) -> Result<(OutputRoute, Option<u8>), OutputError> {
        if dst.is_multicast() {
            return Ok((self.route_multicast(dst, src)?, Some(1)));
        }
        Ok((self.route_output(dst, src)?, None))
    }

    /// A datagram whose header the caller wrote: checked, filled in, routed by its
    /// destination and sent whole.
    fn raw_send_whole(
        &mut self,
        now: Instant,
        handle: RawHandle,
        data: &[u8],
    ) -> Result<(), RawError> {
        if data.len() < ipv4::HEADER_LEN {
            return Err(RawError::BadHeader("shorter than 20 bytes"));
        }
        if data.len() > usize::from(u16::MAX) {
            return Err(RawError::MessageTooLong);
        }
        let view = ipv4::Packet::new_unchecked(data);
        if view.version() != 4 {
            return Err(RawError::BadHeader("version is not 4"));
        }
        let header_len = view.header_len();
        if header_len < ipv4::HEADER_LEN || header_len > data.len() {
            return Err(RawError::BadHeader("header length outside the datagram"));
        }
        let (dst, src) = (view.dst_addr(), view.src_addr());
        let src = Some(src).filter(|s| !s.is_unspecified());
        let (route, _) = self.raw_route(dst, src)?;
        if data.len() > route.mtu {
            return Err(RawError::MessageTooLong);
        }
        let ident = self.next_ident();
        let mut packet = self.pool.take();
        packet.extend_from_slice(data);
        let mut view = ipv4::Packet::new_unchecked(&mut packet[..]);
        view.set_total_len(data.len() as u16);
        if view.ident() == 0 {
            view.set_ident(ident);
        }
        if view.src_addr().is_unspecified() {
            view.set_src_addr(route.src);
        }
        view.fill_checksum();
        let origin = Origin::Socket(SocketKind::Raw, handle.0);
        self.dispatch(now, route.iface, route.next_hop, packet, origin)?;
        Ok(())
    }

    /// Copy the oldest queued datagram (IPv4 header included) into `buf` (a longer
    /// one is truncated) and return its length there and its source.
    pub fn raw_recv_from(
        &mut self,
        handle: RawHandle,
        buf: &mut [u8],
    ) -> Result<(usize, Ipv4Addr), RawError> {
        let socket = self
            .raw
            .sockets
            .get_mut(handle.0)
            .ok_or(RawError::InvalidHandle)?;
        let (src, data) = socket.queue.pop().ok_or(RawError::WouldBlock)?;
        let len = data.len().min(buf.len());
        buf[..len].copy_from_slice(&data[..len]);
        self.pool.give(data);
        Ok((len, src))
    }

    /// Close the socket; its handle becomes invalid and queued datagrams are freed.
    pub fn raw_close(&mut self, handle: RawHandle) -> Result<(), RawError> {
        let mut socket = self
            .raw
            .sockets
            .remove(handle.0)
            .ok_or(RawError::InvalidHandle)?;
        self.raw.open.retain(|(_, h)| *h != handle);
        for buffer in socket.queue.drain() {
            self.pool.give(buffer);
        }
        Ok(())
    }

    /// A copy of a datagram taken in for every raw socket of `protocol`; true when
    /// any took one.
    pub(crate) fn raw_deliver(&mut self, meta: &IpMeta<'_>, protocol: u8, payload: &[u8]) -> bool {
        let mut taken = false;
        for index in 0..self.raw.open.len() {
            let (wanted, handle) = self.raw.open[index];
            if wanted != protocol {
                continue;
            }
            let mut data = self.pool.take();
            data.extend_from_slice(meta.header);
            data.extend_from_slice(payload);
            if data.len() >= ipv4::HEADER_LEN && data.len() <= usize::from(u16::MAX) {
                // A reassembled datagram's header is fragment zero's: make it whole.
                let mut view = ipv4::Packet::new_unchecked(&mut data[..]);
                view.set_total_len(meta.header.len() as u16 + payload.len() as u16);
                view.set_more_frags(false);
                view.set_frag_offset(0);
                view.fill_checksum();
            }
            let Some(socket) = self.raw.sockets.get_mut(handle.0) else {
                self.pool.give(data);
                continue;
            };
            let was_empty = socket.queue.is_empty();
            match socket.queue.push(meta.src, data) {
                Ok(()) => {
                    taken = true;
                    if was_empty {
                        self.push_event(Event::Raw(handle));
                    }
                }
                Err(data) => self.pool.give(data),
            }
        }
        taken
    }
}
