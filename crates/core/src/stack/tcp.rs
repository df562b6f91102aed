//! TCP on the stack: segments in (checksum verified, then to `Tcp::handle_segment`),
//! segments out (from `Tcp::poll_transmit`, wrapped in IPv4 and Ethernet in place),
//! and the `tcp_*` socket calls, which delegate to [`Tcp`](crate::tcp::Tcp).

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use impnet_wire::checksum;
use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4::{self, Protocol};
use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::tcp as wire_tcp;

use crate::iface::{IfaceId, Interface};
use crate::neighbor::Origin;
use crate::route::Routes;
use crate::stack::ip::{IpMeta, OutputError};
use crate::stack::ipv4::{OutputRoute, SendOptions};
use crate::stack::ipv6::{HEADROOM6, OutputRoute6};
use crate::stack::{Stack, Transmit};
use crate::stats::SegmentKind;
use crate::tcp::buffer::extend_bytes;
use crate::tcp::{Ecn, Egress, TcpError, TcpHandle, TcpTransmit};
use crate::time::Instant;

/// Room in front of a TCP segment for the Ethernet and IPv4 headers.
const HEADROOM: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN;
/// IPv4 and TCP headers without options: MSS = MTU - 40 (RFC 9293 §3.7.1).
const IP_TCP_HEADERS: usize = 40;

/// What one round of TCP output produced.
pub(crate) enum TcpOutput {
    /// A frame is in the caller's buffer.
    Frame(Transmit),
    /// A segment went to a queue (waiting for ARP) or was dropped; ask again.
    Queued,
    /// TCP has nothing to send.
    Idle,
}

/// The route of a flow, in its family.
#[derive(Debug, Clone, Copy)]
enum FlowRoute {
    V4(OutputRoute),
    V6(OutputRoute6),
}

impl FlowRoute {
    /// The outgoing interface and the IP MTU (for IPv6, the path MTU).
    fn iface_mtu(&self) -> (IfaceId, usize) {
        match self {
            FlowRoute::V4(route) => (route.iface, route.mtu),
            FlowRoute::V6(route) => (route.iface, route.mtu),
        }
    }

    /// The IP header's length: where the segment starts in the packet.
    fn ip_header_len(&self) -> usize {
        match self {
            FlowRoute::V4(_) => ipv4::HEADER_LEN,
            FlowRoute::V6(_) => ipv6::HEADER_LEN,
        }
    }
}

/// What sending a TCP segment from `src` to `dst` needs besides the segment: the route,
/// what the device offloads, the size limit, our MAC and the next hop's, and the
/// headers. Worked out for one segment and reused for the next ones to the same peer
/// (a request/response or bulk flow sends every segment there), which saves the route
/// lookups, the scan for the source address and the neighbour lookup per segment.
/// IPv4 and IPv6 flows have the same entry; only the headers differ.
///
/// Valid while `config_generation` equals the stack's (interfaces, addresses, routes,
/// router advertisements, path MTUs unchanged) and, for IPv6, before `expires` (when
/// the learnt path MTU times out); the MAC also only while the neighbour cache's
/// generation is the one recorded with it and the mapping has not expired.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EgressCache {
    src: IpAddr,
    dst: IpAddr,
    config_generation: u64,
    expires: Option<Instant>,
    route: FlowRoute,
    egress: Egress,
    /// Largest IP packet the interface takes (its MTU or the path MTU, or the TSO
    /// size).
    limit: usize,
    /// The outgoing interface's MAC (None if the interface is gone).
    src_mac: Option<ethernet::Address>,
    /// The outgoing interface is IP-level ([`Medium::Ip`](crate::Medium)): no MAC to
    /// resolve, and the frame is the template without its Ethernet header.
    ip_level: bool,
    /// The next hop's MAC, until when it holds, and the neighbour generation (of
    /// the ARP or the IPv6 neighbour cache) it is from.
    next_hop_mac: Option<(ethernet::Address, Instant, u64)>,
    /// The Ethernet and IP headers every segment of this flow starts with (the first
    /// `HEADROOM` or `HEADROOM6` bytes): the destination MAC (from `next_hop_mac`, zero
    /// until resolved), source MAC, type, and an IPv4 header with DF, TTL, protocol and
    /// addresses, and zero length, identification and checksum; or an IPv6 header
    /// with hop limit, next header and addresses, and zero payload length. A segment
    /// copies it and fills in those fields (and its ECN codepoint).
    headers: [u8; HEADROOM6],
    /// The ones-complement sum of the IPv4 header in `headers` (its zero fields add
    /// nothing), to which a segment adds its length and identification; 0 for IPv6,
    /// whose header has no checksum.
    header_sum: u16,
}

/// What the interface from `src` to `dst` offloads, looked up (the egress cache did
/// not hold the flow).
#[cold]
#[inline(never)]
fn egress_uncached(
    (routes, ifaces, v6): (&Routes, &[Interface], &crate::ipv6::State),
    now: Instant,
    src: IpAddr,
    dst: IpAddr,
) -> Egress {
    match (src, dst) {
        (_, IpAddr::V4(dst)) => egress_for(routes, ifaces, dst),
        (IpAddr::V6(src), IpAddr::V6(dst)) => super::ipv6::egress_for((v6, ifaces), now, src, dst),
        // A mix of families has no route: the segment is dropped.
        (IpAddr::V4(_), IpAddr::V6(_)) => Egress::PLAIN,
    }
}

/// What the interface that `dst` routes through offloads (none without a route, or
/// to one of our own addresses: the loopback interface offloads nothing).
fn egress_for(routes: &Routes, ifaces: &[Interface], dst: Ipv4Addr) -> Egress {
    let local = super::loopback::is_loopback_addr(dst) || ifaces.iter().any(|i| i.has_addr(dst));
    let offloads = routes
        .lookup(dst)
        .filter(|_| !local)
        .and_then(|route| ifaces.get(route.iface.index()))
        .map(|iface| iface.offloads)
        .unwrap_or_default();
    Egress {
        checksum: !offloads.tx_checksum,
        tso_max: offloads.tso_max,
        headroom: HEADROOM,
    }
}

/// The Ethernet and IPv4 headers of a segment in `headers` (HEADROOM bytes): the
/// flow's `template`, with this packet's length, identification, ECN field and
/// checksum (RFC 1071 sum of the template's `sum` plus the three fields; the template's
/// ECN bits are zero, and they sit in the low bits of the header's first word).
fn write_frame_headers(
    headers: &mut [u8],
    template: &[u8; HEADROOM6],
    sum: u16,
    (total, ident, ecn): (u16, u16, Ecn),
) {
    let checksum = !checksum::combine(&[sum, total, ident, u16::from(ecn.bits())]);
    headers.copy_from_slice(&template[..HEADROOM]);
    let mut ip = ipv4::Packet::new_unchecked(&mut headers[ethernet::HEADER_LEN..]);
    ip.set_total_len(total);
    ip.set_ident(ident);
    if ecn != Ecn::NotEct {
        ip.set_ecn(ecn.bits());
    }
    ip.set_checksum(checksum);
}

/// The Ethernet and IPv6 headers of a segment in `headers` (HEADROOM6 bytes): the
/// flow's `template` with this packet's payload length and ECN field (RFC 3168 §5:
/// the low two bits of the traffic class).
fn write_frame_headers6(headers: &mut [u8], template: &[u8; HEADROOM6], len: u16, ecn: Ecn) {
    headers.copy_from_slice(template);
    let mut ip = ipv6::Packet::new_unchecked(&mut headers[ethernet::HEADER_LEN..]);
    ip.set_payload_len(len);
    if ecn != Ecn::NotEct {
        ip.set_ecn(ecn.bits());
    }
}

impl Stack {
    /// A TCP segment arrived for one of our addresses.
    pub(crate) fn handle_tcp(&mut self, now: Instant, meta: &IpMeta<'_>, payload: &[u8]) {
        // RFC 1122 §4.2.3.10: "A TCP implementation MUST silently discard an incoming
        // SYN segment that is addressed to a broadcast or multicast address."
        if meta.broadcast {
            self.stats.tcp.rx_broadcast += 1;
            return;
        }
        let verify = meta.verify_checksum;
        let parsed = wire_tcp::Packet::new_checked(payload)
            .and_then(|packet| wire_tcp::Repr::parse(&packet, &meta.src, &meta.dst, verify));
        match parsed {
            Ok(repr) => {
                self.stats.tcp.rx_segments += 1;
                let kind = SegmentKind::of(repr.flags.0, repr.payload.len());
                let ip_bytes = meta.header.len() + payload.len();
                self.stats.tcp.rx_kinds.count(kind, ip_bytes);
                // A SYN that opens a connection announces what our route back carries.
                let forced = self.tcp.config().segment_size;
                let mss = if let Some(mss) = forced {
                    mss
                } else if repr.flags.syn() {
                    self.route_output_tcp(now, meta.src, meta.dst)
                        .ok()
                        .and_then(|r| u16::try_from(r.mtu.saturating_sub(IP_TCP_HEADERS)).ok())
                        .unwrap_or(self.tcp.config().mss)
                } else {
                    self.tcp.config().mss
                };
                // RFC 3168 §6.1.3: the IP header's ECN field goes to TCP with the segment.
                let ecn = Ecn::from_bits(meta.header.get(1).copied().unwrap_or(0));
                self.tcp.handle_segment_with_ecn(
                    now,
                    (IpAddr::V4(meta.src), IpAddr::V4(meta.dst)),
                    &repr,
                    mss,
                    ecn,
                );
            }
            Err(impnet_wire::Error::BadChecksum) => self.stats.tcp.rx_bad_checksum += 1,
            Err(_) => self.stats.tcp.rx_malformed += 1,
        }
    }

    /// Ask TCP for one segment and frame it in `buf`: the flow's cached headers in
    /// front of it, in place (IPv4 and IPv6 alike).
    pub(crate) fn poll_transmit_tcp(&mut self, now: Instant, buf: &mut [u8]) -> TcpOutput {
        if buf.len() <= HEADROOM6 {
            return TcpOutput::Idle;
        }
        let Some(segment) = self.poll_tcp_segment(now, buf) else {
            return TcpOutput::Idle;
        };
        self.stats.tcp.tx_segments += 1;
        let Some(path) = &self.tcp_egress else {
            return self.tcp_no_route(&segment);
        };
        let (route, limit, ip_len) = (path.route, path.limit, path.route.ip_header_len());
        let headroom = ethernet::HEADER_LEN + ip_len;
        // The header is in `buf` even when the payload stays in the send ring (gather).
        let header = &buf[headroom..headroom + segment.len];
        let header_len = usize::from(header.get(12).map_or(5, |b| b >> 4)) * 4;
        let kind = SegmentKind::of(
            header.get(13).copied().unwrap_or(0),
            segment.len.saturating_sub(header_len),
        );
        self.stats.tcp.tx_kinds.count(kind, ip_len + segment.len);
        let (iface, _) = route.iface_mtu();
        if (self.ifaces.get(iface.index())).is_some_and(|i| !i.offloads.tx_checksum) {
            // IPv4's header checksum too; IPv6 has none.
            let summed = segment.len
                + if ip_len == ipv4::HEADER_LEN {
                    ip_len
                } else {
                    0
                };
            self.stats.work.checksummed_bytes += summed as u64;
        }
        // A segment that does not leave as it is needs all its bytes in `buf`.
        let whole = headroom..headroom + segment.len;
        if ip_len + segment.len > limit {
            self.tcp.fill_deferred(&mut buf[whole]);
            return self.tcp_oversized(now, &route, &segment, buf);
        }
        let ident = match route {
            FlowRoute::V4(_) => self.next_ident(),
            FlowRoute::V6(_) => 0,
        };
        let sum = if iface == IfaceId::LOOPBACK {
            // No MAC and no device: the packet goes to the loopback queue whole.
            None
        } else {
            self.tcp_frame_template(now)
        };
        // The template is copied from the cache entry straight into `buf`.
        let (Some(sum), Some(path)) = (sum, &self.tcp_egress) else {
            self.tcp.fill_deferred(&mut buf[whole]);
            return self.tcp_unresolved(now, &route, (&segment, ident), buf);
        };
        let template = &path.headers;
        let ip_total = ip_len + segment.len;
        match route {
            FlowRoute::V4(_) => {
                let fields = (ip_total as u16, ident, segment.ecn);
                write_frame_headers(&mut buf[..HEADROOM], template, sum, fields);
                self.stats.ipv4.tx_packets += 1;
            }
            FlowRoute::V6(_) => {
                let len = segment.len as u16;
                write_frame_headers6(&mut buf[..HEADROOM6], template, len, segment.ecn);
                self.stats.ipv6.tx_packets += 1;
            }
        }
        self.stats.link.tx_frames += 1;
        let mut len = headroom + segment.len;
        if self.tcp_egress.as_ref().is_some_and(|e| e.ip_level) {
            len = self.strip_link_header(buf, len);
        }
        TcpOutput::Frame(Transmit { iface, len })
    }

    /// A segment with no way out (no route, no source address, or a mix of
    /// families): counted and dropped.
    #[cold]
    #[inline(never)]
    fn tcp_no_route(&mut self, segment: &TcpTransmit) -> TcpOutput {
        if segment.dst.is_ipv4() {
            self.stats.ipv4.tx_no_route += 1;
        } else {
            self.stats.ipv6.tx_no_route += 1;
        }
        self.tcp.clear_deferred();
        TcpOutput::Queued
    }

    /// An IP-level interface's segment: the packet moved to the front of `buf`, over
    /// the room left for an Ethernet header (only the bytes in `buf`: a gathered
    /// payload stays in the send buffer). Returns the packet's length.
    #[cold]
    #[inline(never)]
    fn strip_link_header(&self, buf: &mut [u8], frame_len: usize) -> usize {
        let gathered = self
            .tcp
            .deferred_payload()
            .map_or(0, |(first, second)| first.len() + second.len());
        buf.copy_within(ethernet::HEADER_LEN..frame_len - gathered, 0);
        frame_len - ethernet::HEADER_LEN
    }

    /// `route_output(dst, Some(src))`, from the egress cache when it holds that flow
    /// (the entry was made by this very call, and holds while the configuration
    /// generation is unchanged): a SYN from, or a connect to, the peer of the last flow
    /// (one client opening connection after connection) costs no route lookup.
    fn route_output_tcp(
        &self,
        now: Instant,
        dst: Ipv4Addr,
        src: Ipv4Addr,
    ) -> Result<OutputRoute, OutputError> {
        if let Some(cache) = &self.tcp_egress
            && cache.config_generation == self.config_generation
            && cache.expires.is_none_or(|t| now < t)
            && cache.src == IpAddr::V4(src)
            && cache.dst == IpAddr::V4(dst)
            && let FlowRoute::V4(route) = cache.route
        {
            debug_assert_eq!(Ok(route), self.route_output(dst, Some(src)));
            return Ok(route);
        }
        self.route_output(dst, Some(src))
    }

    /// One segment from TCP, written behind the headroom of its family in `buf`, with
    /// the egress cache entry made for its addresses when the one there is for other
    /// addresses (or out of date).
    fn poll_tcp_segment(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpTransmit> {
        let end = buf
            .len()
            .min(HEADROOM + usize::from(u16::MAX) - ipv4::HEADER_LEN);
        let generation = self.config_generation;
        // The cache entry is read in place (not copied out) by the egress callback.
        let cached = self
            .tcp_egress
            .as_ref()
            .filter(|c| c.config_generation == generation && c.expires.is_none_or(|t| now < t));
        let (routes, ifaces, v6) = (&self.routes, &self.ifaces, &self.v6);
        // Whether the cache served the last call: the segment returned is for the
        // addresses of that call, so this says whether the entry fits it.
        let mut hit = false;
        // The checksum is ours to compute unless the outgoing interface's device does
        // it; segments are one MSS unless it does TSO.
        let egress = |src: IpAddr, dst: IpAddr| {
            if let Some(c) = cached
                && c.src == src
                && c.dst == dst
            {
                hit = true;
                return c.egress;
            }
            hit = false;
            egress_uncached((routes, ifaces, v6), now, src, dst)
        };
        let segment = (self.tcp).poll_transmit_with(now, &mut buf[..end], egress)?;
        if !hit {
            self.tcp_egress = self.egress_cache_entry(now, segment.src, segment.dst);
        }
        Some(segment)
    }

    /// Completes the cached Ethernet and IP headers of the current flow with the next
    /// hop's MAC, and returns the IPv4 header's partial sum; None while the MAC is
    /// unknown. The copy
    /// of the MAC in the cache serves while the neighbour cache (ARP's or IPv6's) has
    /// not changed and the mapping has not expired, else a lookup refreshes it.
    fn tcp_frame_template(&mut self, now: Instant) -> Option<u16> {
        let path = self.tcp_egress.as_mut()?;
        if path.ip_level {
            // No link layer: the Ethernet part of the template is cut off later.
            return Some(path.header_sum);
        }
        let generation = match path.route {
            FlowRoute::V4(_) => self.neighbors.generation(),
            FlowRoute::V6(_) => self.v6.neighbors.generation(),
        };
        match path.next_hop_mac {
            Some((_, until, seen)) if seen == generation && now < until => {
                // The MAC already in the template.
                path.src_mac?;
                Some(path.header_sum)
            }
            _ => self.refresh_next_hop_mac(now),
        }
    }

    /// [`Stack::tcp_frame_template`] when the cached MAC is out of date: a neighbour
    /// lookup, then the MAC into the template (out of line, as it is rare).
    #[cold]
    #[inline(never)]
    fn refresh_next_hop_mac(&mut self, now: Instant) -> Option<u16> {
        let path = self.tcp_egress.as_mut()?;
        let (found, generation) = match path.route {
            FlowRoute::V4(route) => (
                self.neighbors
                    .lookup_until(now, route.iface, route.next_hop),
                self.neighbors.generation(),
            ),
            // The lookup may move the entry from STALE to DELAY, a new
            // generation: read after it.
            FlowRoute::V6(route) => (
                self.v6
                    .neighbors
                    .lookup_until(now, route.iface, route.next_hop),
                self.v6.neighbors.generation(),
            ),
        };
        path.next_hop_mac = found.map(|(mac, until)| (mac, until, generation));
        let dst_mac = found?.0;
        path.src_mac?;
        path.headers[..6].copy_from_slice(&dst_mac.0);
        Some(path.header_sum)
    }

    /// A segment whose next hop's MAC is not known yet, or for the loopback interface:
    /// the IP header in full, then the packet to `dispatch` or `dispatch6` (the
    /// neighbour queue, which resolves it, or the loopback queue).
    #[cold]
    #[inline(never)]
    fn tcp_unresolved(
        &mut self,
        now: Instant,
        route: &FlowRoute,
        (segment, ident): (&TcpTransmit, u16),
        buf: &mut [u8],
    ) -> TcpOutput {
        let Some(template) = self.tcp_egress.as_ref().map(|e| e.headers) else {
            return TcpOutput::Queued;
        };
        let ip_total = route.ip_header_len() + segment.len;
        let frame_len = ethernet::HEADER_LEN + ip_total;
        match *route {
            FlowRoute::V4(route) => {
                let (IpAddr::V4(src), IpAddr::V4(dst)) = (segment.src, segment.dst) else {
                    return TcpOutput::Queued;
                };
                let mut repr = self.ip_header(src, dst, Protocol::Tcp, segment.len, ident, true);
                repr.ecn = segment.ecn.bits();
                repr.emit(&mut ipv4::Packet::new_unchecked(
                    &mut buf[ethernet::HEADER_LEN..frame_len],
                ));
                let mut packet = self.pool.take();
                extend_bytes(&mut packet, &buf[ethernet::HEADER_LEN..frame_len]);
                let _ = self.dispatch(now, route.iface, route.next_hop, packet, Origin::Tcp);
            }
            FlowRoute::V6(route) => {
                let len = segment.len as u16;
                write_frame_headers6(&mut buf[..HEADROOM6], &template, len, segment.ecn);
                let mut packet = self.pool.take();
                extend_bytes(&mut packet, &buf[ethernet::HEADER_LEN..frame_len]);
                let _ = self.dispatch6(now, route.iface, route.next_hop, packet, Origin::Tcp);
            }
        }
        TcpOutput::Queued
    }

    /// A segment larger than the route takes: IP fragments it when segments are
    /// deliberately larger than the MTU (`TcpConfig::segment_size`), else it is dropped
    /// (IPv4's DF; over IPv6 TCP resends it smaller once it learnt the path MTU) and
    /// counted.
    #[cold]
    #[inline(never)]
    fn tcp_oversized(
        &mut self,
        now: Instant,
        route: &FlowRoute,
        segment: &TcpTransmit,
        buf: &[u8],
    ) -> TcpOutput {
        if self.tcp.config().segment_size.is_none() {
            match route {
                FlowRoute::V4(_) => self.stats.ipv4.tx_dont_fragment += 1,
                FlowRoute::V6(_) => self.stats.ipv6.tx_too_big += 1,
            }
            return TcpOutput::Queued;
        }
        let ip_len = route.ip_header_len();
        let start = ethernet::HEADER_LEN + ip_len;
        let mut packet = self.pool.take();
        packet.resize(ip_len, 0);
        extend_bytes(&mut packet, &buf[start..start + segment.len]);
        // A device completes the checksum of a packet, not of a datagram cut into
        // fragments: the whole sum is ours (as Linux's `skb_checksum_help` before
        // `ip_fragment`).
        if self.tcp_egress.as_ref().is_some_and(|e| !e.egress.checksum) {
            wire_tcp::Packet::new_unchecked(&mut packet[ip_len..])
                .fill_checksum(&segment.src, &segment.dst);
        }
        match (route, segment.dst) {
            (FlowRoute::V4(route), IpAddr::V4(dst)) => {
                let options = SendOptions {
                    protocol: Protocol::Tcp,
                    dont_frag: false,
                    origin: Origin::Tcp,
                    ip_options: &[],
                    ttl: None,
                };
                let _ = self.send_ipv4(now, route, dst, options, packet);
            }
            (FlowRoute::V6(route), IpAddr::V6(dst)) => {
                let how = (NextHeader::Tcp, None);
                let _ = self.send_ipv6_routed(now, route, dst, how, packet, Origin::Tcp);
            }
            _ => self.pool.give(packet),
        }
        TcpOutput::Queued
    }

    /// The route, offloads, size limit and headers for segments from `src` to `dst`,
    /// as a new cache entry (no MAC yet); None without a route. Out of line: the
    /// cache serves a flow's segments after its first.
    #[cold]
    #[inline(never)]
    fn egress_cache_entry(&self, now: Instant, src: IpAddr, dst: IpAddr) -> Option<EgressCache> {
        let mut headers = [0; HEADROOM6];
        let (route, egress, expires, header_sum) = match (src, dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let route = self.route_output(dst, Some(src)).ok()?;
                let sum =
                    self.ipv4_template(&mut headers[ethernet::HEADER_LEN..HEADROOM], src, dst);
                let egress = egress_for(&self.routes, &self.ifaces, dst);
                (FlowRoute::V4(route), egress, None, sum)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let route = self.route_output6(now, dst, Some(src)).ok()?;
                let ip = ipv6::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: NextHeader::Tcp,
                    payload_len: 0,
                    hop_limit: self.v6.hop_limit,
                    dscp: 0,
                    ecn: 0,
                    flow_label: 0,
                };
                ip.emit(&mut ipv6::Packet::new_unchecked(
                    &mut headers[ethernet::HEADER_LEN..],
                ));
                let egress = super::ipv6::egress_for((&self.v6, &self.ifaces), now, src, dst);
                (
                    FlowRoute::V6(route),
                    egress,
                    self.v6.pmtu.expiry(now, dst),
                    0,
                )
            }
            _ => return None,
        };
        let (iface, mtu) = route.iface_mtu();
        let interface = self.ifaces.get(iface.index());
        // RFC 1191: IPv4 segments carry DF (and IPv6 routers never fragment, RFC 8200
        // §5); the MSS keeps them within the MTU, or the device cuts them to it (TSO).
        let limit = interface
            .and_then(|iface| iface.offloads.tso_max)
            .map_or(mtu, |tso| tso.max(mtu));
        let src_mac = interface.map(|iface| iface.mac);
        let eth = ethernet::Repr {
            src: src_mac.unwrap_or(ethernet::Address([0; 6])),
            dst: ethernet::Address([0; 6]),
            ethertype: match route {
                FlowRoute::V4(_) => EtherType::Ipv4,
                FlowRoute::V6(_) => EtherType::Ipv6,
            },
            vlan: None,
        };
        eth.emit(&mut ethernet::Frame::new_unchecked(&mut headers[..]));
        Some(EgressCache {
            src,
            dst,
            config_generation: self.config_generation,
            expires,
            route,
            egress,
            limit,
            src_mac,
            ip_level: interface.is_some_and(Interface::is_ip_level),
            next_hop_mac: None,
            headers,
            header_sum,
        })
    }

    /// The IPv4 header of a flow's segments in `header` (20 bytes): DF set (RFC 1191),
    /// the stack's TTL, length, identification and checksum zero; returns its sum.
    fn ipv4_template(&self, header: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let ip = self.ip_header(src, dst, Protocol::Tcp, 0, 0, true);
        ip.emit(&mut ipv4::Packet::new_unchecked(&mut *header));
        // Length 20 went in with the header: out again, and the checksum too.
        header[2..4].fill(0);
        header[10..12].fill(0);
        checksum::data(header)
    }

    /// Listen on `local` (port non-zero; the address may be unspecified). An address
    /// not ours, or port 0, is `AddrNotAvailable`.
    pub fn tcp_listen(
        &mut self,
        local: impl Into<SocketAddr>,
        backlog: usize,
    ) -> Result<TcpHandle, TcpError> {
        let local = local.into();
        if !local.ip().is_unspecified() && !self.is_local_ip(local.ip()) {
            return Err(TcpError::AddrNotAvailable);
        }
        self.tcp.listen(local, backlog)
    }

    /// Connect to `remote` from `local`; an unspecified local address is the route's
    /// source address, port 0 an ephemeral port. The MSS announced is the route MTU
    /// minus 40. Without a route, or to a broadcast or multicast address, the call
    /// fails with `NetUnreachable` (as on Linux); with a local address not ours, no
    /// source address on the way out, or a remote port 0 or address 0.0.0.0, with
    /// `AddrNotAvailable`.
    pub fn tcp_connect(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
    ) -> Result<TcpHandle, TcpError> {
        let (local, remote) = (local.into(), remote.into());
        let (SocketAddr::V4(local), SocketAddr::V4(remote)) = (local, remote) else {
            return self.tcp_connect_v6(now, local, remote);
        };
        let dst = *remote.ip();
        if dst.is_unspecified() || remote.port() == 0 {
            return Err(TcpError::AddrNotAvailable);
        }
        if dst.is_broadcast()
            || dst.is_multicast()
            || self.ifaces.iter().any(|i| i.is_broadcast(dst))
        {
            return Err(TcpError::NetUnreachable);
        }
        let src = Some(*local.ip()).filter(|a| !a.is_unspecified());
        let route = match src {
            Some(src) => self.route_output_tcp(now, dst, src),
            None => self.route_output(dst, None),
        };
        let route = route.map_err(|error| match error {
            OutputError::NoRoute => TcpError::NetUnreachable,
            _ => TcpError::AddrNotAvailable,
        })?;
        let local = core::net::SocketAddrV4::new(route.src, local.port());
        let route_mss = u16::try_from(route.mtu.saturating_sub(IP_TCP_HEADERS)).unwrap_or(u16::MAX);
        let mss = self.tcp.config().segment_size.unwrap_or(route_mss);
        self.tcp.connect(now, local, remote, mss)
    }

    /// Connect to `remote` from `local` as given, announcing `mss`: for a caller that
    /// chose both itself (a socket with `TCP_MAXSEG` set, as packetdrill's are). Port 0
    /// picks an ephemeral port; unlike [`tcp_connect`](Self::tcp_connect) there is no
    /// route lookup and no check of either address.
    pub fn tcp_connect_with_mss(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        mss: u16,
    ) -> Result<TcpHandle, TcpError> {
        self.tcp.connect(now, local, remote, mss)
    }

    /// Connect as [`tcp_connect`](Self::tcp_connect) does, with TCP Fast Open (RFC
    /// 7413): `data` (as much as the send buffer takes; the count is returned) goes on
    /// the SYN when the stack holds the server's cookie, saving a round trip, and after
    /// the handshake otherwise (the SYN then asks for a cookie). The data may reach the
    /// server twice if the network duplicates the SYN (RFC 7413 §6): use it for
    /// requests that are safe to repeat.
    pub fn tcp_connect_with_data(
        &mut self,
        now: Instant,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        data: &[u8],
    ) -> Result<(TcpHandle, usize), TcpError> {
        let handle = self.tcp_connect(now, local, remote)?;
        let taken = self.tcp.fast_open_data(now, handle, data)?;
        self.count_copy_in(taken);
        Ok((handle, taken))
    }

    /// Turn Fast Open on for a connection from [`tcp_connect`](Self::tcp_connect) or
    /// [`tcp_connect_with_mss`](Self::tcp_connect_with_mss) whose SYN has not gone yet
    /// (no `poll_transmit` since): `data` its first bytes, as
    /// [`tcp_connect_with_data`](Self::tcp_connect_with_data) takes them (empty: the
    /// SYN asks for a cookie). `InvalidState` once the SYN went.
    pub fn tcp_fast_open_data(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        let taken = self.tcp.fast_open_data(now, handle, data)?;
        self.count_copy_in(taken);
        Ok(taken)
    }

    /// TCP Fast Open on a listener (Linux's `TCP_FASTOPEN`): a SYN with a valid cookie
    /// and data opens a connection whose data is readable at once, while fewer than
    /// `max_pending` such connections wait for the ACK of their SYN-ACK; cookie
    /// requests get a cookie. 0 turns it off (the default).
    pub fn tcp_set_fast_open(
        &mut self,
        listener: TcpHandle,
        max_pending: usize,
    ) -> Result<(), TcpError> {
        self.tcp.set_fast_open(listener, max_pending)
    }

    /// The key of Fast Open cookies, 16 bytes as Linux takes them: `Some(listener)`
    /// for that listener's (Linux's `TCP_FASTOPEN_KEY`; it must have Fast Open on),
    /// None for the stack's (Linux's `net.ipv4.tcp_fastopen_key`; by default a key
    /// derived from the stack's secret). With the key a Linux server has, imp gives
    /// the cookies it gives (SipHash-2-4 over the client's and server's addresses).
    pub fn tcp_set_fast_open_key(
        &mut self,
        listener: Option<TcpHandle>,
        key: &[u8; 16],
    ) -> Result<(), TcpError> {
        self.tcp.set_fast_open_key(listener, key)
    }

    /// A listener with Fast Open takes data on a SYN with no cookie, or any (Linux's
    /// `TFO_SERVER_COOKIE_NOT_REQD`): RFC 7413 §4.2.2's check left out, for a server
    /// whose clients are trusted. Off by default.
    pub fn tcp_set_fast_open_no_cookie(
        &mut self,
        listener: TcpHandle,
        on: bool,
    ) -> Result<(), TcpError> {
        self.tcp.set_fast_open_no_cookie(listener, on)
    }

    /// Fast Open clients send their first data on the SYN without a cookie (Linux's
    /// `TFO_CLIENT_NO_COOKIE`, `net.ipv4.tcp_fastopen` 0x4), for servers known to take
    /// data on any SYN; a cookie their SYN-ACKs carry is not kept. Off by default.
    pub fn tcp_set_fast_open_client_no_cookie(&mut self, on: bool) {
        self.tcp.set_fast_open_client_no_cookie(on);
    }

    /// Take an established connection from a listener.
    pub fn tcp_accept(&mut self, listener: TcpHandle) -> Result<TcpHandle, TcpError> {
        self.tcp.accept(listener)
    }

    /// Copy data into the send buffer; returns how much fit.
    pub fn tcp_send(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        let sent = self.tcp.send(now, handle, data)?;
        self.count_copy_in(sent);
        Ok(sent)
    }

    /// Write up to `len` bytes straight into the send buffer: `fill` is given the
    /// space they go to, in stream order (one piece, or two where the ring wraps), and
    /// must write all of it. Returns how much fit; the same as [`Stack::tcp_send`] of
    /// those bytes (counted as copied in, as they are written there), without an
    /// application buffer between (the simulator's bulk sender makes its data so).
    pub fn tcp_send_with(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        len: usize,
        fill: impl FnMut(&mut [u8]),
    ) -> Result<usize, TcpError> {
        let sent = self.tcp.send_with(now, handle, len, fill)?;
        self.count_copy_in(sent);
        Ok(sent)
    }

    /// Counts a socket call that copied `bytes` into the stack.
    fn count_copy_in(&mut self, bytes: usize) {
        self.stats.work.socket_calls += 1;
        self.stats.work.copied_from_user += bytes as u64;
    }

    /// Copy several slices into the send buffer in one call (a gather write); returns
    /// how much fit. All of them are queued before output runs, so a head and a body
    /// written together leave in one segment.
    pub fn tcp_send_vectored<'a>(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        slices: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, TcpError> {
        let sent = self.tcp.send_vectored(now, handle, slices)?;
        self.count_copy_in(sent);
        Ok(sent)
    }

    /// Copy received data out; `Ok(0)` is end of stream.
    pub fn tcp_recv(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let max = buf.len();
        self.tcp_recv_each(now, handle, max, crate::tcp::copy_into(buf))
    }

    /// [`Stack::tcp_recv`] of up to `max` bytes, shown to `f` where they lie (one piece,
    /// or two where the ring wraps) instead of copied out: the same reads, window
    /// updates and counters as `tcp_recv` into a buffer of `max` bytes (the bytes
    /// count as copied to the user, as the application read them), without the buffer
    /// (the simulator's bulk receiver hashes what it reads).
    pub fn tcp_recv_each(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        max: usize,
        f: impl FnMut(&[u8]),
    ) -> Result<usize, TcpError> {
        let read = self.tcp.recv_each(now, handle, max, f)?;
        self.stats.work.socket_calls += 1;
        self.stats.work.copied_to_user += read as u64;
        Ok(read)
    }

    /// Hand the connection a buffer to send without copying it (kept until
    /// acknowledged; all of it or none, given back with the reason when refused). See
    /// [`Tcp::send_owned`](crate::tcp::Tcp::send_owned).
    pub fn tcp_send_owned(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: alloc::vec::Vec<u8>,
    ) -> Result<(), crate::tcp::SendOwnedError> {
        let len = data.len();
        self.tcp.send_owned(now, handle, data)?;
        // A short buffer is copied into the ring; a long one is kept as it is.
        let copied = if len < crate::tcp::buffer::OWNED_MIN {
            len
        } else {
            0
        };
        self.count_copy_in(copied);
        Ok(())
    }

    /// Read without a copy: `f` sees received bytes where they lie and returns how many
    /// it consumed (an empty slice: end of stream). See
    /// [`Tcp::recv_with`](crate::tcp::Tcp::recv_with).
    pub fn tcp_recv_with(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        f: impl FnOnce(&[u8]) -> usize,
    ) -> Result<usize, TcpError> {
        let read = self.tcp.recv_with(now, handle, f)?;
        // A call, but no copy: the application read the ring where it lies.
        self.stats.work.socket_calls += 1;
        Ok(read)
    }

    /// Close gracefully (FIN after queued data).
    pub fn tcp_close(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        self.tcp.close(now, handle)
    }

    /// Abort (RST) and release.
    pub fn tcp_abort(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        self.tcp.abort(now, handle)
    }

    /// Reset a connection from outside its owner (`imp ss --kill`, Linux's `ss -K`):
    /// RST to the peer; the owner's next call fails with `ConnectionReset`.
    pub fn tcp_kill(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        self.tcp.kill(now, handle)
    }

    /// Half-close: send FIN after queued data, keep receiving.
    pub fn tcp_shutdown(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        self.tcp.shutdown_write(now, handle)
    }

    /// Turn Nagle's algorithm off (`true`) or on for one connection.
    pub fn tcp_set_nodelay(&mut self, handle: TcpHandle, nodelay: bool) -> Result<(), TcpError> {
        self.tcp.set_nodelay(handle, nodelay)
    }

    /// Put the cork on or take it off for one connection (Linux's TCP_CORK): while
    /// on, only full-sized segments go, for at most 200 ms per partial segment.
    pub fn tcp_set_cork(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        on: bool,
    ) -> Result<(), TcpError> {
        self.tcp.set_cork(now, handle, on)
    }

    /// Say whether more data follows what is written on one connection from now on
    /// (Linux's MSG_MORE): those writes end without a push, so no PSH marks their end.
    pub fn tcp_set_more(&mut self, handle: TcpHandle, more: bool) -> Result<(), TcpError> {
        self.tcp.set_more(handle, more)
    }

    /// End a record at the end of what is written so far on one connection (Linux's
    /// MSG_EOR on that write): no segment spans the boundary, so later writes start a
    /// segment of their own.
    pub fn tcp_end_record(&mut self, handle: TcpHandle) -> Result<(), TcpError> {
        self.tcp.end_record(handle)
    }

    /// Set one of a socket's own settings, as Linux's per-socket options do
    /// (`TCP_CONGESTION`, `SO_RCVBUF`, `SO_SNDBUF`, `TCP_MAXSEG` on a listener,
    /// `TCP_USER_TIMEOUT`, `TCP_NOTSENT_LOWAT`; see
    /// [`SocketOption`](crate::tcp::SocketOption)). On a listener the setting is for
    /// the connections it accepts from then on; on a connection it applies at once (set
    /// right after `tcp_connect`, before the stack is polled, it applies to the SYN).
    pub fn tcp_set_option(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        option: crate::tcp::SocketOption,
    ) -> Result<(), TcpError> {
        self.tcp.set_option(now, handle, option)
    }

    /// The name of a socket's congestion controller (`TCP_CONGESTION`): a connection's,
    /// or the one a listener's connections start with. None for a stale handle.
    pub fn tcp_congestion(&self, handle: TcpHandle) -> Option<&'static str> {
        self.tcp.congestion(handle)
    }

    /// Whether a write on the connection would take data now: room in its send buffer
    /// and, with `TCP_NOTSENT_LOWAT` set, fewer unsent bytes queued than the limit.
    pub fn tcp_writable(&self, handle: TcpHandle) -> bool {
        self.tcp.writable(handle)
    }

    /// A snapshot of a connection's state (cwnd, RTT, retransmits, ...).
    pub fn tcp_info(&self, handle: TcpHandle) -> Option<crate::tcp::TcpInfo> {
        self.tcp.info(handle)
    }

    /// (local, remote) addresses of a connection; None for a listener (see
    /// [`tcp_listen_addr`](Self::tcp_listen_addr)) and stale handles.
    pub fn tcp_addresses(&self, handle: TcpHandle) -> Option<(SocketAddr, SocketAddr)> {
        self.tcp.addresses(handle)
    }

    /// The address a listener listens on (None for connections and stale handles).
    pub fn tcp_listen_addr(&self, handle: TcpHandle) -> Option<SocketAddr> {
        self.tcp.listen_addr(handle)
    }

    /// The error a connection ended with (reset, refused, timed out, an ICMP error);
    /// `Ok(None)` while it is open, after a clean end, and for a listener;
    /// `InvalidHandle` for a handle closed or never issued. Looking does not clear it.
    pub fn tcp_error(&self, handle: TcpHandle) -> Result<Option<TcpError>, TcpError> {
        self.tcp.error(handle)
    }

    /// In-order bytes a `tcp_recv` on the connection would return now (0 for listeners
    /// and stale handles), so a caller can size its buffer or report readiness.
    pub fn tcp_readable(&self, handle: TcpHandle) -> usize {
        self.tcp.readable(handle)
    }

    /// Bytes in the connection's send buffer that the peer has not yet acknowledged,
    /// sent or not (0 for listeners, stale handles and closed sending halves).
    pub fn tcp_send_queued(&self, handle: TcpHandle) -> usize {
        self.tcp.send_queued(handle)
    }

    /// Bytes queued, never sent, and the congestion window of a connection (None for
    /// listeners, stale handles and connections without a sending half: SYN-SENT,
    /// SYN-RECEIVED, FIN-WAIT-2 and after): enough to write only what TCP can send
    /// soon (the simulator's bulk sender does), where [`Stack::tcp_info`] takes a
    /// whole snapshot.
    pub fn tcp_send_progress(&self, handle: TcpHandle) -> Option<crate::tcp::SendProgress> {
        self.tcp.send_progress(handle)
    }

    /// Every open TCP socket, listeners (`true`) and connections (`false`), in table
    /// order (for listing them, as `ss` does).
    pub fn tcp_handles(&self) -> impl Iterator<Item = (TcpHandle, bool)> + '_ {
        self.tcp.handles()
    }

    /// The TCP settings the stack was built with.
    pub fn tcp_config(&self) -> &crate::tcp::TcpConfig {
        self.tcp.config()
    }

    /// Offer timestamps (RFC 7323) on the connections opened from now on, or not (as
    /// Linux's `net.ipv4.tcp_timestamps` changes at run time); open ones keep theirs.
    pub fn tcp_set_timestamps(&mut self, on: bool) {
        self.tcp.set_timestamps(on);
    }

    /// ECN (RFC 3168) on the connections opened from now on (as Linux's
    /// `net.ipv4.tcp_ecn` changes at run time); open ones keep theirs.
    pub fn tcp_set_ecn(&mut self, mode: crate::tcp::EcnMode) {
        self.tcp.set_ecn(mode);
    }

    /// Path MTU probing (RFC 4821, RFC 8899) on the connections opened from now on, as
    /// Linux's `net.ipv4.tcp_mtu_probing`, `tcp_base_mss`, `tcp_probe_interval` and
    /// `tcp_probe_threshold` change at run time; None leaves a setting as it is.
    /// `MtuProbing::Off` also turns black-hole detection off (Linux's 0), any other
    /// mode on.
    pub fn tcp_set_mtu_probing(
        &mut self,
        mode: Option<crate::tcp::MtuProbing>,
        base_mss: Option<u16>,
        probe_interval: Option<crate::time::Duration>,
        probe_threshold: Option<u16>,
    ) {
        self.tcp
            .set_mtu_probing(mode, base_mss, probe_interval, probe_threshold);
    }

    /// What a SYN with Fast Open towards `server` would carry now: Some(bytes of data
    /// at most) when the stack holds the server's cookie, or needs none
    /// ([`tcp_set_fast_open_client_no_cookie`](Self::tcp_set_fast_open_client_no_cookie))
    /// (the data is bounded by the
    /// MSS the server announced with it and `mss`, ours, less 40 bytes of options),
    /// None when the SYN would ask for a cookie or go plain (Fast Open lately failed
    /// towards it). For an API that, as Linux's `sendto(MSG_FASTOPEN)`, says at once
    /// how much went on the SYN.
    pub fn tcp_fast_open_syn_room(&self, now: Instant, server: IpAddr, mss: u16) -> Option<usize> {
        self.tcp.fast_open_syn_room(now, server, mss)
    }

    /// TCP sockets in the table: listeners, connections, and handles that ended but
    /// were not yet closed by the application.
    pub fn tcp_socket_count(&self) -> usize {
        self.tcp.socket_count()
    }

    /// TCP connections in the table, in any state (listeners are not counted; at most
    /// [`TcpConfig::max_connections`](crate::tcp::TcpConfig::max_connections)).
    pub fn tcp_connection_count(&self) -> usize {
        self.tcp.connection_count()
    }

    /// TCP connections with a timer running.
    pub fn tcp_timer_count(&self) -> usize {
        self.tcp.timer_count()
    }

    /// Counters of the whole TCP layer.
    pub fn tcp_stats(&self) -> &crate::tcp::TcpStats {
        self.tcp.stats()
    }

    /// The TCP layer, for the stack's own modules and tests.
    #[cfg(test)]
    pub(crate) fn tcp(&mut self) -> &mut crate::tcp::Tcp {
        &mut self.tcp
    }
}
