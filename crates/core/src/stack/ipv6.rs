//! IPv6 (RFC 8200) on the stack: input (validation, the extension header chain,
//! reassembly, delivery), output (route, source address, fragmentation to the path
//! MTU, neighbour resolution), forwarding, and the TCP hooks the dual-stack socket
//! table calls. Neighbour discovery and ICMPv6 are in `stack/ndp.rs`.

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::ipv6ext::{self, FragmentHeader, FragmentRepr, WalkError};
use impnet_wire::tcp as wire_tcp;

use crate::iface::{IfaceId, Interface};
use crate::ipv6::nd::Resolve;
use crate::ipv6::{Addr6, AddrOrigin, AddrState, Route6Origin, State};
use crate::neighbor::{Origin, Pending};
use crate::reassembly::Fragment;
use crate::stack::ip::{Meta6, OutputError};
use crate::stack::{Outgoing, Stack};
use crate::stats::SegmentKind;
use crate::tcp::{Ecn, Egress, TcpError, TcpHandle};
use crate::time::Instant;

/// Room in front of a transport segment for the Ethernet and IPv6 headers (TCP writes
/// its segments there, and the headers in front of them in place).
pub(crate) const HEADROOM6: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN;

/// IPv6 and TCP headers without options: MSS = MTU - 60 (RFC 8200 §8.3).
const IP6_TCP_HEADERS: usize = 60;

/// What the interface the route from `src` to `dst` leaves by offloads (none without
/// a route, or to one of our own addresses: the loopback interface offloads nothing),
/// with the room for an Ethernet and an IPv6 header.
pub(crate) fn egress_for(
    state: (&State, &[Interface]),
    now: Instant,
    src: Ipv6Addr,
    dst: Ipv6Addr,
) -> Egress {
    let offloads = route6(state, now, dst, Some(src))
        .ok()
        .filter(|route| route.iface != IfaceId::LOOPBACK)
        .and_then(|route| state.1.get(route.iface.index()))
        .map(|iface| iface.offloads)
        .unwrap_or_default();
    Egress {
        checksum: !offloads.tx_checksum,
        tso_max: offloads.tso_max,
        headroom: HEADROOM6,
    }
}

/// The route to `dst`, from `src` when given (it must be ours and usable), over the
/// stack's IPv6 state and interfaces (a function of its own so that TCP's egress
/// callback, which runs while the socket table is borrowed, can ask too).
pub(crate) fn route6(
    (v6, ifaces): (&State, &[Interface]),
    now: Instant,
    dst: Ipv6Addr,
    src: Option<Ipv6Addr>,
) -> Result<OutputRoute6, OutputError> {
    // An accept-any interface answers from the destinations it took in.
    if let Some(src) = src
        && !v6.is_local(src)
        && !ifaces.iter().any(|i| i.accept_any.is_some())
    {
        return Err(OutputError::AddrNotAvailable);
    }
    if v6.is_local(dst) {
        return Ok(OutputRoute6 {
            iface: IfaceId::LOOPBACK,
            next_hop: dst,
            src: src.unwrap_or(dst),
            mtu: super::loopback::LOOPBACK_MTU,
        });
    }
    let ip_level = |i: IfaceId| ifaces.get(i.index()).is_some_and(Interface::is_ip_level);
    let (iface, next_hop) = if crate::ipv6::is_link_local(dst) || dst.is_multicast() {
        // Link scope: the interface of the source, else the first with IPv6.
        let iface = src
            .and_then(|s| v6.owner(s).map(|(i, _)| i))
            .or_else(|| {
                (0..ifaces.len()).map(|i| IfaceId(i as u32)).find(|&i| {
                    v6.iface(i)
                        .is_some_and(|s| s.link_local().is_some() || ip_level(i))
                })
            })
            .ok_or(OutputError::NoRoute)?;
        (iface, dst)
    } else {
        let route = v6.routes.lookup(dst).ok_or(OutputError::NoRoute)?;
        (route.iface, route.gateway.unwrap_or(dst))
    };
    let interface = ifaces.get(iface.index()).ok_or(OutputError::NoRoute)?;
    let state = v6.iface(iface).ok_or(OutputError::NoRoute)?;
    let src = match src {
        Some(src) => src,
        None => state.source_for(dst).ok_or(OutputError::NoSourceAddress)?,
    };
    let link = state.mtu.unwrap_or(interface.mtu).max(ipv6::MIN_MTU);
    let mtu = v6.pmtu.get(now, dst).map_or(link, |p| p.min(link));
    Ok(OutputRoute6 {
        iface,
        next_hop,
        src,
        mtu,
    })
}

/// A route resolved for IPv6 output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputRoute6 {
    pub(crate) iface: IfaceId,
    pub(crate) next_hop: Ipv6Addr,
    pub(crate) src: Ipv6Addr,
    /// The path MTU: the link's, lowered by what Packet Too Big taught.
    pub(crate) mtu: usize,
}

impl Stack {
    /// Start IPv6 on `iface`: its link-local address (fe80::/64 and the identifier
    /// from its MAC, RFC 4862 §5.3), checked for duplicates, then router solicitations
    /// (RFC 4861 §6.3.7) so a router's prefixes configure more. IP-level interfaces
    /// (no MAC) get no link-local address. Idempotent.
    pub fn enable_ipv6(&mut self, now: Instant, iface: IfaceId) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let mac = interface.mac;
        let solicitations = self.v6.config.router_solicitations;
        let forwarding = interface.forwarding;
        let state = self.v6.iface_mut(iface);
        if state.enabled {
            return;
        }
        state.enabled = true;
        if !forwarding && solicitations > 0 {
            state.solicitations = solicitations;
            state.next_solicitation = Some(now);
        }
        self.v6.timer_epoch += 1;
        if !self.is_ip_medium(iface) {
            let ll = ipv6::link_local_from_mac(mac);
            let cidr = ipv6::Cidr::new(ll, 64).expect("64 is a valid prefix length");
            self.add_address6_with(now, iface, cidr, AddrOrigin::LinkLocal, (None, None));
        }
    }

    /// Assign `cidr` to `iface` (starting IPv6 there): usable once duplicate address
    /// detection found no other owner, and its prefix is on-link.
    ///
    /// # Panics
    /// If `iface` was not returned by this stack's `add_interface`.
    pub fn add_address6(&mut self, now: Instant, iface: IfaceId, cidr: ipv6::Cidr) {
        assert!(iface.index() < self.ifaces.len(), "no such interface");
        self.enable_ipv6(now, iface);
        self.add_address6_with(now, iface, cidr, AddrOrigin::Static, (None, None));
    }

    /// Add (or refresh the lifetimes of) an address.
    pub(crate) fn add_address6_with(
        &mut self,
        now: Instant,
        iface: IfaceId,
        cidr: ipv6::Cidr,
        origin: AddrOrigin,
        (valid_until, preferred_until): (Option<Instant>, Option<Instant>),
    ) {
        self.config_generation += 1;
        let probes = self.v6.config.dad_transmits;
        // DAD is not run on IP-level links (nobody else is there) or with 0 probes.
        let dad = probes > 0 && !self.is_ip_medium(iface);
        let groups_before = self.mld_groups(iface);
        let state = self.v6.iface_mut(iface);
        if let Some(existing) = state
            .addrs
            .iter_mut()
            .find(|a| a.cidr.address == cidr.address)
        {
            existing.valid_until = valid_until;
            existing.preferred_until = preferred_until;
            if existing.state == AddrState::Deprecated && preferred_until.is_none_or(|t| t > now) {
                existing.state = AddrState::Preferred;
            }
            return;
        }
        state.addrs.push(Addr6 {
            cidr,
            state: if dad {
                AddrState::Tentative { probes, next: now }
            } else {
                AddrState::Preferred
            },
            origin,
            valid_until,
            preferred_until,
        });
        if cidr.prefix_len < 128 {
            self.v6.routes.insert(crate::ipv6::Route6 {
                cidr: cidr.network(),
                gateway: None,
                iface,
                origin: Route6Origin::Connected,
                until: None,
            });
        } // RFC 4862 §5.4.2: the solicited-node group is joined (and reported, RFC
        // 3810 §6.1) before the first DAD probe.
        self.mld_update(now, iface, &groups_before);
    }

    /// Remove `addr` from `iface` (and its on-link route when no other address of
    /// the interface has that prefix).
    pub fn remove_address6(&mut self, iface: IfaceId, addr: Ipv6Addr) {
        self.config_generation += 1;
        let groups_before = self.mld_groups(iface);
        let state = self.v6.iface_mut(iface);
        let Some(pos) = state.addrs.iter().position(|a| a.cidr.address == addr) else {
            return;
        };
        let gone = state.addrs.remove(pos);
        let prefix = gone.cidr.network();
        let still = state.addrs.iter().any(|a| a.cidr.network() == prefix);
        if !still {
            self.v6.routes.retain(|r| {
                !(r.origin == Route6Origin::Connected && r.iface == iface && r.cidr == prefix)
            });
        } // A group left is reported at the next timer (due at once).
        self.mld_update(Instant::ZERO, iface, &groups_before);
    }

    /// The IPv6 addresses of `iface` with their state.
    pub fn ipv6_addresses(&self, iface: IfaceId) -> Vec<Addr6> {
        self.v6
            .iface(iface)
            .map(|i| i.addrs.clone())
            .unwrap_or_default()
    }

    /// The IPv6 routing table.
    pub fn routes6_mut(&mut self) -> &mut crate::ipv6::Routes6 {
        self.config_generation += 1;
        &mut self.v6.routes
    }

    /// The IPv6 routing table, read-only.
    pub fn routes6(&self) -> &crate::ipv6::Routes6 {
        &self.v6.routes
    }

    /// What the neighbour cache knows of `addr` on `iface`.
    pub fn ipv6_neighbor(
        &self,
        iface: IfaceId,
        addr: Ipv6Addr,
    ) -> Option<(crate::ipv6::nd::NdState, Option<ethernet::Address>)> {
        self.v6.neighbors.state(iface, addr)
    }

    /// The path MTU to `dst` as the stack uses it now (None without a route).
    pub fn path_mtu6(&self, now: Instant, dst: Ipv6Addr) -> Option<usize> {
        self.route_output6(now, dst, None).ok().map(|r| r.mtu)
    }

    /// True when `iface` carries bare IP packets (no link layer, no neighbour
    /// discovery).
    pub(crate) fn is_ip_medium(&self, iface: IfaceId) -> bool {
        self.ifaces
            .get(iface.index())
            .is_some_and(Interface::is_ip_level)
    }

    /// True when `addr` is one of ours (either family).
    pub(crate) fn is_local_ip(&self, addr: IpAddr) -> bool {
        match addr {
            IpAddr::V4(a) => self.is_local_addr(a),
            IpAddr::V6(a) => self.v6.is_local(a),
        }
    }

    /// The source address a packet to `dst` leaves from (the route's interface's
    /// address, as Linux picks it for an unbound socket's `getsockname` after
    /// `connect`); `None` when no route leads there.
    pub fn source_address_for(&self, now: Instant, dst: IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(dst) => self.route_output(dst, None).ok().map(|r| IpAddr::V4(r.src)),
            IpAddr::V6(dst) => self
                .route_output6(now, dst, None)
                .ok()
                .map(|r| IpAddr::V6(r.src)),
        }
    }

    /// The route to `dst`, from `src` when given (it must be ours and usable).
    pub(crate) fn route_output6(
        &self,
        now: Instant,
        dst: Ipv6Addr,
        src: Option<Ipv6Addr>,
    ) -> Result<OutputRoute6, OutputError> {
        route6((&self.v6, &self.ifaces), now, dst, src)
    }

    /// A fresh fragment identification.
    fn next_frag_ident(&mut self) -> u32 {
        self.v6.frag_ident = self.v6.frag_ident.wrapping_add(1);
        self.v6.frag_ident
    }

    /// Send a packet whose upper-layer bytes follow 40 bytes of room for the IPv6
    /// header in `packet`, fragmenting it to the path MTU (RFC 8200 §4.5: only the
    /// source fragments). `src` None: the route's source address.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn send_ipv6(
        &mut self,
        now: Instant,
        (src, dst): (Option<Ipv6Addr>, Ipv6Addr),
        next_header: NextHeader,
        hop_limit: Option<u8>,
        packet: Vec<u8>,
        origin: Origin,
    ) -> Result<(), OutputError> {
        let route = match self.route_output6(now, dst, src) {
            Ok(route) => route,
            Err(e) => {
                self.stats.ipv6.tx_no_route += 1;
                self.pool.give(packet);
                return Err(e);
            }
        };
        self.send_ipv6_routed(now, &route, dst, (next_header, hop_limit), packet, origin)
    }

    /// [`Stack::send_ipv6`] on a route already resolved.
    pub(crate) fn send_ipv6_routed(
        &mut self,
        now: Instant,
        route: &OutputRoute6,
        dst: Ipv6Addr,
        (next_header, hop_limit): (NextHeader, Option<u8>),
        mut packet: Vec<u8>,
        origin: Origin,
    ) -> Result<(), OutputError> {
        let payload_len = packet.len() - ipv6::HEADER_LEN;
        let mut repr = ipv6::Repr {
            src_addr: route.src,
            dst_addr: dst,
            next_header,
            payload_len,
            hop_limit: hop_limit.unwrap_or(self.v6.hop_limit),
            dscp: 0,
            ecn: 0,
            flow_label: 0,
        };
        if packet.len() <= route.mtu {
            repr.emit(&mut ipv6::Packet::new_unchecked(&mut packet[..]));
            return self.dispatch6(now, route.iface, route.next_hop, packet, origin);
        }
        // RFC 8200 §4.5: each fragment carries the IPv6 header and a Fragment
        // header; fragment data is a multiple of 8 bytes but for the last.
        let room = ipv6::HEADER_LEN + ipv6ext::FRAGMENT_HEADER_LEN;
        let chunk = (route.mtu - room) & !7;
        let ident = self.next_frag_ident();
        self.stats.ipv6.tx_fragmented += 1;
        let mut result = Ok(());
        let mut offset = 0;
        while offset < payload_len {
            let len = chunk.min(payload_len - offset);
            let mut fragment = self.pool.take();
            fragment.resize(room, 0);
            fragment.extend_from_slice(
                &packet[ipv6::HEADER_LEN + offset..ipv6::HEADER_LEN + offset + len],
            );
            repr.next_header = NextHeader::Fragment;
            repr.payload_len = ipv6ext::FRAGMENT_HEADER_LEN + len;
            repr.emit(&mut ipv6::Packet::new_unchecked(&mut fragment[..]));
            let header = FragmentRepr {
                next_header,
                frag_offset: offset as u16,
                more_frags: offset + len < payload_len,
                ident,
            };
            header.emit(&mut FragmentHeader::new_unchecked(
                &mut fragment[ipv6::HEADER_LEN..room],
            ));
            self.stats.ipv6.tx_fragments += 1;
            result = result.and(self.dispatch6(now, route.iface, route.next_hop, fragment, origin));
            offset += len;
        }
        self.pool.give(packet);
        result
    }

    /// Hand a finished IPv6 packet to the link: multicast to its group's MAC,
    /// unicast once the neighbour is resolved (queued until then).
    pub(crate) fn dispatch6(
        &mut self,
        now: Instant,
        iface: IfaceId,
        next_hop: Ipv6Addr,
        packet: Vec<u8>,
        origin: Origin,
    ) -> Result<(), OutputError> {
        self.stats.ipv6.tx_packets += 1;
        if iface == IfaceId::LOOPBACK {
            return self.loop_back(now, packet);
        }
        let dst_mac = if next_hop.is_multicast() || self.is_ip_medium(iface) {
            ipv6::multicast_mac(next_hop)
        } else {
            match self
                .v6
                .neighbors
                .resolve(now, iface, next_hop, Pending { origin, packet })
            {
                Resolve::Known(mac, pending) => {
                    return self.enqueue_frame(Outgoing {
                        iface,
                        dst_mac: mac,
                        ethertype: EtherType::Ipv6,
                        payload: pending.packet,
                        gso_size: 0,
                    });
                }
                Resolve::Queued { solicit } => {
                    if solicit {
                        self.send_ns(now, iface, next_hop, None);
                    }
                    return Ok(());
                }
                Resolve::Full(pending) => {
                    self.stats.ipv6.tx_unresolved += 1;
                    self.pool.give(pending.packet);
                    return Err(OutputError::QueueFull);
                }
            }
        };
        self.enqueue_frame(Outgoing {
            iface,
            dst_mac,
            ethertype: EtherType::Ipv6,
            payload: packet,
            gso_size: 0,
        })
    }

    /// An IPv6 packet arrived on `iface`.
    pub(crate) fn handle_ipv6(
        &mut self,
        now: Instant,
        iface: IfaceId,
        bytes: &[u8],
        link_src: Option<ethernet::Address>,
        rx: crate::iface::RxOffload,
    ) {
        self.stats.ipv6.rx_packets += 1;
        if self.v6.iface(iface).is_none() {
            self.stats.ipv6.rx_disabled += 1;
            return;
        }
        let Ok(packet) = ipv6::Packet::new_checked(bytes) else {
            self.stats.ipv6.rx_malformed += 1;
            return;
        };
        let bytes = &bytes[..ipv6::HEADER_LEN + usize::from(packet.payload_len())];
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        // RFC 4291 §2.7: a multicast address is never a source; ::1 never on a wire.
        if src.is_multicast() || src == Ipv6Addr::LOCALHOST || dst == Ipv6Addr::LOCALHOST {
            self.stats.ipv6.rx_bad_source += 1;
            return;
        }
        let forwarding = self.ifaces[iface.index()].forwarding;
        let multicast = dst.is_multicast();
        let ours = if multicast {
            self.v6
                .iface(iface)
                .is_some_and(|s| s.in_group(dst, forwarding))
        } else {
            // Tentative addresses only hear neighbour discovery (RFC 4862 §5.4).
            self.v6.owner(dst).is_some()
        };
        let taken = !ours && !multicast && self.ifaces[iface.index()].accept_any.is_some();
        if taken {
            // Only a transport header right after the fixed one is looked into.
            let opening = (
                u8::from(packet.next_header()),
                bytes.get(ipv6::HEADER_LEN..),
            );
            if !self.accept_any_admits(now, iface, IpAddr::V6(src), opening) {
                return;
            }
        } else if !ours {
            if forwarding && !multicast {
                return self.forward6(now, iface, bytes, rx);
            }
            self.stats.ipv6.rx_not_for_us += 1;
            return;
        }
        let verify_checksum = !self.ifaces[iface.index()].offloads.rx_checksum;
        let meta = Meta6 {
            iface,
            src,
            dst,
            hop_limit: packet.hop_limit(),
            multicast,
            invoking: bytes,
            verify_checksum,
            link_src,
        };
        self.take_in6(now, &meta, bytes);
    }

    /// A packet for us (from an interface or the loopback queue): the extension
    /// header chain walked, reassembled if a fragment, then delivered.
    pub(crate) fn take_in6(&mut self, now: Instant, meta: &Meta6<'_>, bytes: &[u8]) {
        // The common case, no extension header: nothing to walk.
        let first = bytes.get(6).map(|&n| NextHeader::from(n));
        if let (
            Some(first @ (NextHeader::Tcp | NextHeader::Udp | NextHeader::Icmpv6)),
            Some(rest),
        ) = (first, bytes.get(ipv6::HEADER_LEN..))
        {
            return self.deliver6(now, meta, first, rest);
        }
        let walk = match ipv6ext::walk(bytes) {
            Ok(walk) => walk,
            Err(error) => return self.bad_header_chain(now, meta, error),
        };
        if let Some((at, fragment)) = walk.fragment {
            if fragment.is_atomic() {
                // RFC 6946: an atomic fragment is the whole packet.
                return self.deliver6(now, meta, walk.protocol, &bytes[walk.offset..]);
            }
            let header = &bytes[..at];
            let piece = Fragment {
                src: meta.src.into(),
                dst: meta.dst.into(),
                protocol: fragment.next_header.into(),
                ident: fragment.ident,
                strict: true,
                offset: usize::from(fragment.frag_offset),
                more_frags: fragment.more_frags,
                header,
                payload: &bytes[at + ipv6ext::FRAGMENT_HEADER_LEN..],
            };
            let Ok(whole) =
                self.v6
                    .reassembly
                    .handle_fragment(now, &piece, &mut self.stats.reassembly6)
            else {
                return;
            };
            // The reassembled packet: the first fragment's unfragmentable part, then
            // the data (its own extension headers first, walked again).
            let mut rebuilt = Vec::with_capacity(whole.header.len() + whole.payload.len());
            rebuilt.extend_from_slice(&whole.header);
            rebuilt.extend_from_slice(&whole.payload);
            let protocol = NextHeader::from(piece.protocol);
            let at_field = at;
            let (protocol, start) =
                match ipv6ext::walk_from(&rebuilt, whole.header.len(), protocol, at_field) {
                    Ok(w) => (w.protocol, w.offset),
                    Err(error) => return self.bad_header_chain(now, meta, error),
                };
            let meta = Meta6 {
                invoking: &rebuilt,
                ..*meta
            };
            return self.deliver6(now, &meta, protocol, &rebuilt[start..]);
        }
        self.deliver6(now, meta, walk.protocol, &bytes[walk.offset..]);
    }

    /// The extension header chain was bad: a Parameter Problem where RFC 8200 asks
    /// for one, else a silent drop.
    fn bad_header_chain(&mut self, now: Instant, meta: &Meta6<'_>, error: WalkError) {
        self.stats.ipv6.rx_param_problem += 1;
        if let Some((reason, pointer, true)) = super::ndp::param_problem(error, meta.multicast) {
            let repr = icmpv6::Repr::ParamProblem {
                reason,
                pointer,
                invoking: meta.invoking,
            };
            self.send_icmpv6_error(now, meta, &repr);
        }
    }

    /// Hand a whole packet's upper-layer bytes to their protocol.
    fn deliver6(&mut self, now: Instant, meta: &Meta6<'_>, protocol: NextHeader, payload: &[u8]) {
        self.stats.ipv6.rx_delivered += 1;
        match protocol {
            NextHeader::Icmpv6 => self.handle_icmpv6(now, meta, payload),
            NextHeader::Tcp => self.handle_tcp6(now, meta, payload),
            NextHeader::Udp => self.handle_udp6(now, meta, payload),
            NextHeader::NoNextHeader => {}
            other => {
                self.stats.ipv6.rx_delivered -= 1;
                self.stats.ipv6.rx_unknown_next_header += 1;
                // RFC 8200 §4: Parameter Problem code 1, pointing at the field that
                // named it.
                let pointer = next_header_field(meta.invoking, other);
                let repr = icmpv6::Repr::ParamProblem {
                    reason: icmpv6::ParamProblem::UnrecognizedNextHeader,
                    pointer,
                    invoking: meta.invoking,
                };
                if !meta.multicast {
                    self.send_icmpv6_error(now, meta, &repr);
                }
            }
        }
    }

    /// A TCP segment over IPv6.
    pub(crate) fn handle_tcp6(&mut self, now: Instant, meta: &Meta6<'_>, payload: &[u8]) {
        // RFC 9293 §3.9.1: no segment to a multicast address opens anything.
        if meta.multicast {
            self.stats.tcp.rx_broadcast += 1;
            return;
        }
        let (src, dst) = (IpAddr::V6(meta.src), IpAddr::V6(meta.dst));
        let parsed = wire_tcp::Packet::new_checked(payload)
            .and_then(|p| wire_tcp::Repr::parse(&p, &src, &dst, meta.verify_checksum));
        match parsed {
            Ok(repr) => {
                self.stats.tcp.rx_segments += 1;
                let kind = SegmentKind::of(repr.flags.0, repr.payload.len());
                self.stats
                    .tcp
                    .rx_kinds
                    .count(kind, ipv6::HEADER_LEN + payload.len());
                // A SYN that opens a connection announces what our route back carries.
                let forced = self.tcp.config().segment_size;
                let mss = if let Some(mss) = forced {
                    mss
                } else if repr.flags.syn() {
                    self.route_output6(now, meta.src, Some(meta.dst))
                        .ok()
                        .and_then(|r| u16::try_from(r.mtu.saturating_sub(IP6_TCP_HEADERS)).ok())
                        .unwrap_or(self.tcp.config().mss)
                } else {
                    self.tcp.config().mss
                };
                let ecn = Ecn::from_bits(meta.invoking.get(1).map_or(0, |b| b >> 4) & 0x3);
                self.tcp
                    .handle_segment_with_ecn(now, (src, dst), &repr, mss, ecn);
            }
            Err(impnet_wire::Error::BadChecksum) => self.stats.tcp.rx_bad_checksum += 1,
            Err(_) => self.stats.tcp.rx_malformed += 1,
        }
    }

    /// `tcp_connect` for IPv6 addresses (a mix of families is `AddrNotAvailable`).
    pub(crate) fn tcp_connect_v6(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<TcpHandle, TcpError> {
        let (SocketAddr::V6(local), SocketAddr::V6(remote)) = (local, remote) else {
            return Err(TcpError::AddrNotAvailable);
        };
        let dst = *remote.ip();
        if dst.is_unspecified() || remote.port() == 0 {
            return Err(TcpError::AddrNotAvailable);
        }
        if dst.is_multicast() {
            return Err(TcpError::NetUnreachable);
        }
        let src = Some(*local.ip()).filter(|a| !a.is_unspecified());
        let route = self.route_output6(now, dst, src).map_err(|e| match e {
            OutputError::NoRoute => TcpError::NetUnreachable,
            _ => TcpError::AddrNotAvailable,
        })?;
        let local = SocketAddrV6::new(route.src, local.port(), 0, 0);
        let remote = SocketAddrV6::new(dst, remote.port(), 0, 0);
        let route_mss =
            u16::try_from(route.mtu.saturating_sub(IP6_TCP_HEADERS)).unwrap_or(u16::MAX);
        let mss = self.tcp.config().segment_size.unwrap_or(route_mss);
        self.tcp.connect(now, local, remote, mss)
    }

    /// A packet from the loopback queue.
    pub(crate) fn handle_looped6(&mut self, now: Instant, bytes: &[u8]) {
        self.stats.ipv6.rx_packets += 1;
        let Ok(packet) = ipv6::Packet::new_checked(bytes) else {
            self.stats.ipv6.rx_malformed += 1;
            return;
        };
        let bytes = &bytes[..ipv6::HEADER_LEN + usize::from(packet.payload_len())];
        let meta = Meta6 {
            iface: IfaceId::LOOPBACK,
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            hop_limit: packet.hop_limit(),
            multicast: false,
            invoking: bytes,
            verify_checksum: false,
            link_src: None,
        };
        self.take_in6(now, &meta, bytes);
    }

    /// The earliest IPv6 timer. The scan of neighbours, routes and addresses is kept
    /// (`State::deadline`) while nothing it reads changed: the configuration
    /// generation (addresses, routes, router advertisements), the neighbour cache's
    /// and `State::timer_epoch` (timers fired) are where they were; a driver asks
    /// after every batch of frames (inlined there: the check is a few instructions).
    #[inline]
    pub(crate) fn poll_timeout_v6(&self) -> Option<Instant> {
        let key = (
            self.config_generation,
            self.v6.neighbors.generation(),
            self.v6.timer_epoch,
        );
        let next = match self.v6.deadline.get() {
            Some((seen, next)) if seen == key => {
                debug_assert_eq!(next, self.scan_timeout_v6(), "a change missed its bump");
                next
            }
            _ => {
                let next = self.scan_timeout_v6();
                self.v6.deadline.set(Some((key, next)));
                next
            }
        };
        Instant::earliest(next, self.v6.reassembly.poll_timeout())
    }

    /// The earliest timer of the neighbour cache, the routes and the addresses (out of
    /// line: it runs only when something it reads changed).
    #[inline(never)]
    fn scan_timeout_v6(&self) -> Option<Instant> {
        let mut next = self.v6.neighbors.poll_timeout();
        let mut take = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        take(self.v6.routes.next_expiry());
        take(self.poll_advertisements());
        take(self.poll_timeout_mld());
        for state in &self.v6.ifaces {
            take(state.next_solicitation);
            for addr in &state.addrs {
                if let AddrState::Tentative { next, .. } = addr.state {
                    take(Some(next));
                }
                take(addr.valid_until);
                if addr.state == AddrState::Preferred {
                    take(addr.preferred_until);
                }
            }
        }
        next
    }
}

/// Where the Next Header field naming `protocol` sits in `packet` (the IPv6
/// header's, or the last extension header's).
fn next_header_field(packet: &[u8], protocol: NextHeader) -> u32 {
    match ipv6ext::walk(packet) {
        Ok(walk) if walk.protocol == protocol => walk.next_header_offset as u32,
        _ => 6,
    }
}
