//! IPv4 (RFC 791) input and output: validation, local delivery, route lookup,
//! fragmentation to the route MTU, and handing packets to the neighbour layer.

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4::{self, Protocol};

use crate::iface::IfaceId;
use crate::neighbor::{Enqueued, FullReason, Origin, Pending};
use crate::reassembly::Fragment;
use crate::stack::ip::{IpMeta, OutputError};
use crate::stack::loopback::is_loopback_addr;
use crate::stack::{Outgoing, Stack};
use crate::time::Instant;

/// A route resolved for output: where the packet leaves and from which address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputRoute {
    pub(crate) iface: IfaceId,
    pub(crate) next_hop: Ipv4Addr,
    pub(crate) src: Ipv4Addr,
    /// IP MTU: the smaller of the interface's and the route's.
    pub(crate) mtu: usize,
}

/// Per-datagram output settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendOptions<'a> {
    pub(crate) protocol: Protocol,
    pub(crate) dont_frag: bool,
    pub(crate) origin: Origin,
    /// IPv4 options (a multiple of 4 bytes, at most 40); the packet has room for them
    /// after the 20-byte header.
    pub(crate) ip_options: &'a [u8],
    /// The TTL, when not the stack's default (a socket's multicast TTL).
    pub(crate) ttl: Option<u8>,
}

/// A unicast next hop's MAC as the neighbour cache gave it, with what it depends on.
/// It holds while both generations are unchanged (no neighbour entry added, replaced or
/// removed; no address or route changed, so the next hop is still not a broadcast) and
/// `now` is before `expires_at`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NextHopCache {
    iface: IfaceId,
    next_hop: Ipv4Addr,
    mac: ethernet::Address,
    expires_at: Instant,
    neighbor_generation: u64,
    config_generation: u64,
}

impl Stack {
    /// The next hop's MAC from [`Stack::next_hop_cache`], if it still holds.
    #[inline]
    pub(crate) fn cached_next_hop(
        &self,
        now: Instant,
        iface: IfaceId,
        next_hop: Ipv4Addr,
    ) -> Option<ethernet::Address> {
        let cache = self.next_hop_cache.as_ref()?;
        let holds = cache.iface == iface
            && cache.next_hop == next_hop
            && now < cache.expires_at
            && cache.neighbor_generation == self.neighbors.generation()
            && cache.config_generation == self.config_generation;
        holds.then_some(cache.mac)
    }

    /// Resolve the route to `dst`, from `src` when given (it must be ours). The limited
    /// broadcast goes out of the first interface (or the one owning `src`).
    pub(crate) fn route_output(
        &self,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
    ) -> Result<OutputRoute, OutputError> {
        if let Some(src) = src
            && !self.is_local_addr(src)
            && !self.accepts_any()
        {
            return Err(OutputError::AddrNotAvailable);
        }
        if self.is_local_addr(dst) {
            // Our own address or 127/8: through the loopback interface, from that same
            // address unless told otherwise (as Linux's local routes do).
            return Ok(OutputRoute {
                iface: IfaceId::LOOPBACK,
                next_hop: dst,
                src: src.unwrap_or(dst),
                mtu: super::loopback::LOOPBACK_MTU,
            });
        }
        let (iface, next_hop, route_mtu) = if dst.is_broadcast() {
            let position = src
                .and_then(|s| self.ifaces.iter().position(|i| i.has_addr(s)))
                .unwrap_or(0);
            if position >= self.ifaces.len() {
                return Err(OutputError::NoRoute);
            }
            (IfaceId(position as u32), dst, None)
        } else {
            let route = self.routes.lookup(dst).ok_or(OutputError::NoRoute)?;
            (route.iface, route.next_hop(dst), route.mtu)
        };
        let interface = self.ifaces.get(iface.index()).ok_or(OutputError::NoRoute)?;
        let src = match src {
            Some(src) => src,
            None => interface
                .source_for(next_hop)
                .ok_or(OutputError::NoSourceAddress)?,
        };
        let mtu = route_mtu.map_or(interface.mtu, |m| {
            m.clamp(crate::iface::MIN_MTU, interface.mtu)
        });
        Ok(OutputRoute {
            iface,
            next_hop,
            src,
            mtu,
        })
    }

    /// A fresh IP identification: a counter started at a seeded random value, so
    /// consecutive datagrams never share one (RFC 6864 §4.1 asks uniqueness per
    /// source, destination and protocol for the reassembly lifetime).
    pub(crate) fn next_ident(&mut self) -> u16 {
        self.ip_ident = self.ip_ident.wrapping_add(1);
        self.ip_ident
    }

    /// The header of an IPv4 datagram we originate: our TTL, no options, not a
    /// fragment. Every datagram the stack sends starts from this (TCP's per-flow
    /// template too).
    pub(crate) fn ip_header(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: Protocol,
        payload_len: usize,
        ident: u16,
        dont_frag: bool,
    ) -> ipv4::Repr<'static> {
        ipv4::Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len,
            ttl: self.config.default_ttl,
            ident,
            dont_frag,
            more_frags: false,
            frag_offset: 0,
            dscp: 0,
            ecn: 0,
            options: &[],
        }
    }

    /// Send a datagram whose transport bytes follow `20 + options.ip_options.len()`
    /// bytes of room for the header, fragmenting it to the route MTU unless DF is set
    /// (fragments after the first carry only the options marked copied, RFC 791).
    pub(crate) fn send_ipv4(
        &mut self,
        now: Instant,
        route: &OutputRoute,
        dst: Ipv4Addr,
        options: SendOptions<'_>,
        mut packet: Vec<u8>,
    ) -> Result<(), OutputError> {
        let header_len = ipv4::HEADER_LEN + options.ip_options.len();
        let payload_len = packet.len() - header_len;
        let ident = self.next_ident();
        let mut repr = self.ip_header(
            route.src,
            dst,
            options.protocol,
            payload_len,
            ident,
            options.dont_frag,
        );
        repr.options = options.ip_options;
        repr.ttl = options.ttl.unwrap_or(repr.ttl);
        if packet.len() <= route.mtu {
            repr.emit(&mut ipv4::Packet::new_unchecked(&mut packet[..]));
            return self.dispatch(now, route.iface, route.next_hop, packet, options.origin);
        }
        if options.dont_frag {
            self.pool.give(packet);
            self.stats.ipv4.tx_dont_fragment += 1;
            return Err(OutputError::TooBig { mtu: route.mtu });
        }
        let later = crate::ip_options::copied(options.ip_options);
        self.stats.ipv4.tx_fragmented += 1;
        let mut result = Ok(());
        let mut offset = 0;
        while offset < payload_len {
            let ip_options: &[u8] = if offset == 0 {
                options.ip_options
            } else {
                &later
            };
            let room = ipv4::HEADER_LEN + ip_options.len();
            // RFC 791: fragment data lengths are multiples of 8 except the last.
            let chunk = (route.mtu - room) & !7;
            let len = chunk.min(payload_len - offset);
            repr.payload_len = len;
            repr.more_frags = offset + len < payload_len;
            repr.frag_offset = offset as u16;
            repr.options = ip_options;
            let mut fragment = self.pool.take();
            fragment.resize(room, 0);
            let data = &packet[header_len + offset..header_len + offset + len];
            fragment.extend_from_slice(data);
            repr.emit(&mut ipv4::Packet::new_unchecked(&mut fragment[..]));
            self.stats.ipv4.tx_fragments += 1;
            result = result.and(self.dispatch(
                now,
                route.iface,
                route.next_hop,
                fragment,
                options.origin,
            ));
            offset += len;
        }
        self.pool.give(packet);
        result
    }

    /// Hand a finished IPv4 packet to the link: straight to the transmit queue when the
    /// next hop's MAC is known (or it is a broadcast), else to the neighbour queue.
    pub(crate) fn dispatch(
        &mut self,
        now: Instant,
        iface: IfaceId,
        next_hop: Ipv4Addr,
        packet: Vec<u8>,
        origin: Origin,
    ) -> Result<(), OutputError> {
        self.stats.ipv4.tx_packets += 1;
        if iface == IfaceId::LOOPBACK {
            return self.loop_back(now, packet);
        }
        if self
            .ifaces
            .get(iface.index())
            .is_some_and(|i| i.is_ip_level())
        {
            // No link layer: nothing to resolve, the packet goes straight out.
            return self.enqueue_ipv4(iface, ethernet::Address::BROADCAST, packet);
        }
        if next_hop.is_multicast() {
            // RFC 1112 §6.4: a group's datagrams go to its MAC; nothing to resolve.
            return self.enqueue_ipv4(
                iface,
                ethernet::Address(impnet_wire::igmp::multicast_mac(next_hop)),
                packet,
            );
        }
        if let Some(dst_mac) = self.cached_next_hop(now, iface, next_hop) {
            return self.enqueue_ipv4(iface, dst_mac, packet);
        }
        let broadcast = self
            .ifaces
            .get(iface.index())
            .is_some_and(|i| i.is_broadcast(next_hop));
        let known = if broadcast {
            Some(ethernet::Address::BROADCAST)
        } else {
            let found = self.neighbors.lookup_until(now, iface, next_hop);
            if let Some((mac, expires_at)) = found {
                self.next_hop_cache = Some(NextHopCache {
                    iface,
                    next_hop,
                    mac,
                    expires_at,
                    neighbor_generation: self.neighbors.generation(),
                    config_generation: self.config_generation,
                });
            }
            found.map(|(mac, _)| mac)
        };
        if let Some(dst_mac) = known {
            return self.enqueue_ipv4(iface, dst_mac, packet);
        }
        match self
            .neighbors
            .enqueue(now, iface, next_hop, Pending { origin, packet })
        {
            Enqueued::Queued { send_request } => {
                if send_request {
                    self.send_arp_request(iface, next_hop);
                }
                Ok(())
            }
            Enqueued::Full(pending, reason) => {
                match reason {
                    FullReason::Queue => self.stats.arp.dropped_queue_full += 1,
                    FullReason::Table => self.stats.arp.dropped_table_full += 1,
                }
                self.pool.give(pending.packet);
                Err(OutputError::QueueFull)
            }
        }
    }

    /// Queue an IPv4 packet for `iface` to the link address `dst_mac`.
    fn enqueue_ipv4(
        &mut self,
        iface: IfaceId,
        dst_mac: ethernet::Address,
        packet: Vec<u8>,
    ) -> Result<(), OutputError> {
        self.enqueue_frame(Outgoing {
            iface,
            dst_mac,
            ethertype: EtherType::Ipv4,
            payload: packet,
            gso_size: 0,
        })
    }

    /// An IPv4 packet arrived on `iface` from `link_src` (None on an IP-level
    /// interface; `link_broadcast`: sent to the Ethernet broadcast address).
    pub(crate) fn handle_ipv4(
        &mut self,
        now: Instant,
        iface: IfaceId,
        bytes: &[u8],
        link_src: Option<ethernet::Address>,
        link_broadcast: bool,
        rx: crate::iface::RxOffload,
    ) {
        self.stats.ipv4.rx_packets += 1;
        let verify_checksum = self
            .ifaces
            .get(iface.index())
            .is_none_or(|i| !i.offloads.rx_checksum);
        let Some(packet) = self.validate_ipv4(bytes, verify_checksum) else {
            return;
        };
        if verify_checksum {
            self.stats.work.checksummed_bytes += u64::from(packet.total_len());
        }
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        // RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram
        // containing an IP source address that is invalid" (broadcast or multicast).
        let interface = &self.ifaces[iface.index()];
        let (src_broadcast, broadcast) = interface.are_broadcast(src, dst);
        if src_broadcast || src.is_multicast() {
            self.stats.ipv4.rx_bad_source += 1;
            return;
        }
        if let Some(link_src) = link_src {
            self.neighbors.confirm(now, iface, src, link_src);
        }
        if dst.is_multicast() {
            return self.handle_multicast_v4(now, iface, &packet, verify_checksum);
        }
        // RFC 1122 §3.2.1.3 (g): 127/8 "MUST NOT appear outside a host": from the wire,
        // it is not ours (a router counts it as a martian).
        let ours = !is_loopback_addr(dst) && self.is_local_addr(dst);
        let taken = !broadcast && !ours && interface.accept_any.is_some();
        if !broadcast && !ours && !taken {
            if interface.forwarding {
                return self.forward(now, iface, &packet, link_broadcast, rx);
            }
            // RFC 1122 §3.3.4.2: a host drops what it is not the destination of.
            self.stats.ipv4.rx_not_for_us += 1;
            return;
        }
        if is_loopback_addr(src) {
            self.stats.ipv4.rx_bad_source += 1;
            return;
        }
        if taken {
            let first = packet.frag_offset() == 0;
            let transport = &bytes[packet.header_len()..usize::from(packet.total_len())];
            let opening = (u8::from(packet.protocol()), first.then_some(transport));
            if !self.accept_any_admits(now, iface, IpAddr::V4(src), opening) {
                return;
            }
        }
        self.take_in(now, &packet, broadcast, verify_checksum);
    }

    /// A datagram to an IPv4 multicast group: taken when `iface` is in the group (as
    /// a broadcast is: never an ICMP error about it), IGMP to [`Stack::handle_igmp`];
    /// never forwarded.
    fn handle_multicast_v4(
        &mut self,
        now: Instant,
        iface: IfaceId,
        packet: &ipv4::Packet<&[u8]>,
        verify_checksum: bool,
    ) {
        if !self.is_member_v4(iface, packet.dst_addr()) {
            self.stats.igmp.rx_not_member += 1;
            return;
        }
        // IGMP itself is taken from anyone (a query comes from the router).
        if packet.protocol() != Protocol::Igmp
            && !self.admits_v4(iface, packet.dst_addr(), packet.src_addr())
        {
            self.stats.igmp.rx_source_filtered += 1;
            return;
        }
        if is_loopback_addr(packet.src_addr()) {
            self.stats.ipv4.rx_bad_source += 1;
            return;
        }
        if packet.protocol() == Protocol::Igmp {
            if packet.is_fragment() {
                self.stats.igmp.rx_malformed += 1;
                return;
            }
            if !self.raw.open.is_empty() {
                let bytes: &[u8] = packet.as_ref();
                let meta = IpMeta {
                    src: packet.src_addr(),
                    dst: packet.dst_addr(),
                    ttl: packet.ttl(),
                    broadcast: true,
                    header: &bytes[..packet.header_len()],
                    verify_checksum,
                };
                self.raw_deliver(&meta, 2, packet.payload());
            }
            return self.handle_igmp(now, iface, packet);
        }
        self.take_in(now, packet, true, verify_checksum);
    }

    /// A valid IPv4 packet for us (from an interface or the loopback queue): reassembled
    /// if a fragment, then delivered to its protocol.
    pub(crate) fn take_in(
        &mut self,
        now: Instant,
        packet: &ipv4::Packet<&[u8]>,
        broadcast: bool,
        verify_checksum: bool,
    ) {
        let bytes: &[u8] = packet.as_ref();
        let header = &bytes[..packet.header_len()];
        let payload = &bytes[packet.header_len()..usize::from(packet.total_len())];
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        let meta = IpMeta {
            src,
            dst,
            ttl: packet.ttl(),
            broadcast,
            header,
            verify_checksum,
        };
        let protocol = packet.protocol();
        if packet.more_frags() || packet.frag_offset() != 0 {
            let fragment = Fragment {
                src: src.into(),
                dst: dst.into(),
                protocol: protocol.into(),
                ident: u32::from(packet.ident()),
                strict: false,
                offset: usize::from(packet.frag_offset()),
                more_frags: packet.more_frags(),
                header,
                payload,
            };
            return self.reassemble(now, &meta, protocol, &fragment);
        }
        self.deliver(now, &meta, protocol, payload);
    }

    /// A fragment: into the reassembly buffers; the datagram it completes, if any, is
    /// delivered. Out of line: the common whole-datagram path stays compact.
    #[inline(never)]
    pub(crate) fn reassemble(
        &mut self,
        now: Instant,
        meta: &IpMeta<'_>,
        protocol: Protocol,
        fragment: &Fragment<'_>,
    ) {
        let Ok(whole) = self
            .reassembly
            .handle_fragment(now, fragment, &mut self.stats.reassembly)
        else {
            return;
        };
        let ttl = whole.header.get(8).copied().unwrap_or(meta.ttl);
        let meta = IpMeta {
            header: &whole.header,
            ttl,
            ..*meta
        };
        self.deliver(now, &meta, protocol, &whole.payload);
    }

    /// RFC 1122 §3.2.1.1-2: check version, header length, total length and checksum,
    /// counting each failure under its own reason.
    /// The header checksum is skipped when `verify_checksum` is false (offloaded).
    pub(crate) fn validate_ipv4<'a>(
        &mut self,
        bytes: &'a [u8],
        verify_checksum: bool,
    ) -> Option<ipv4::Packet<&'a [u8]>> {
        let stats = &mut self.stats.ipv4;
        let packet = match ipv4::Packet::new_checked(bytes) {
            Ok(packet) => packet,
            Err(error) => {
                match error {
                    impnet_wire::Error::BadVersion(_) => stats.rx_bad_version += 1,
                    impnet_wire::Error::BadHeaderLen(_) => stats.rx_bad_ihl += 1,
                    impnet_wire::Error::BadLength(len) if len > bytes.len() => {
                        stats.rx_truncated += 1
                    }
                    impnet_wire::Error::BadLength(_) => stats.rx_bad_length += 1,
                    impnet_wire::Error::Truncated { .. } => stats.rx_truncated += 1,
                    _ => stats.rx_bad_header += 1,
                }
                return None;
            }
        };
        if verify_checksum && !packet.verify_checksum() {
            stats.rx_bad_checksum += 1;
            return None;
        }
        Some(packet)
    }

    /// Hand a whole datagram to its transport protocol.
    pub(crate) fn deliver(
        &mut self,
        now: Instant,
        meta: &IpMeta<'_>,
        protocol: Protocol,
        payload: &[u8],
    ) {
        self.stats.ipv4.rx_delivered += 1;
        let raw_taken =
            !self.raw.open.is_empty() && self.raw_deliver(meta, protocol.into(), payload);
        match protocol {
            Protocol::Icmp => self.handle_icmp(now, meta, payload),
            Protocol::Udp => self.handle_udp(now, meta, payload),
            Protocol::Tcp => self.handle_tcp(now, meta, payload),
            // IGMP is taken on its interface (`handle_multicast_v4`); one that comes
            // any other way (looped back, to a unicast address) is dropped.
            Protocol::Igmp => self.stats.igmp.rx_malformed += 1,
            Protocol::Unknown(_) => {
                self.stats.ipv4.rx_delivered -= 1;
                self.stats.ipv4.rx_unknown_protocol += 1;
                // RFC 1122 §3.2.2.1: protocol unreachable SHOULD be sent (not when a
                // raw socket took the datagram, as on Linux).
                if !meta.broadcast && !raw_taken {
                    let reason = impnet_wire::icmpv4::DstUnreachable::ProtoUnreachable;
                    self.send_icmp_error(now, meta, payload, reason);
                }
            }
        }
    }
}
