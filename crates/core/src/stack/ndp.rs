//! ICMPv6 (RFC 4443) and neighbour discovery (RFC 4861, RFC 4862) on the stack: echo,
//! errors (rate limited), Packet Too Big feeding the path MTU cache and TCP,
//! solicitations and advertisements, duplicate address detection, router
//! advertisements (default routers, prefixes, SLAAC, the link MTU).

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv6Addr};

use impnet_wire::ethernet;
use impnet_wire::icmpv6::{self, Repr};
use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::ipv6ext::WalkError;
use impnet_wire::ndp::{self, PrefixInfo};

use crate::iface::IfaceId;
use crate::ipv6::nd::NdAction;
use crate::ipv6::{AddrOrigin, Route6, Route6Origin};
use crate::neighbor::{Origin, Pending};
use crate::stack::Stack;
use crate::stack::icmp6::Error6;
use crate::stack::ip::Meta6;
use crate::tcp::TcpError;
use crate::time::{Duration, Instant};

/// What a bad extension header chain asks for: a Parameter Problem's code and pointer,
/// and whether to send it at all (RFC 8200 §4.2 option actions).
pub(crate) fn param_problem(
    error: WalkError,
    multicast: bool,
) -> Option<(icmpv6::ParamProblem, u32, bool)> {
    match error {
        WalkError::Malformed(_) | WalkError::TooManyHeaders => None,
        WalkError::UnrecognizedOption {
            action, pointer, ..
        } => Some((
            icmpv6::ParamProblem::UnrecognizedOption,
            pointer as u32,
            action.reports(multicast),
        )),
        WalkError::ParamProblem { code, pointer } => Some((code, pointer as u32, !multicast)),
    }
}

impl Stack {
    /// An ICMPv6 message for us.
    pub(crate) fn handle_icmpv6(&mut self, now: Instant, meta: &Meta6<'_>, payload: &[u8]) {
        self.stats.ipv6.icmp_rx += 1;
        let parsed = icmpv6::Packet::new_checked(payload)
            .and_then(|p| Repr::parse(&p, &meta.src, &meta.dst));
        let repr = match parsed {
            Ok(repr) => repr,
            Err(_) => {
                self.stats.ipv6.icmp_rx_bad += 1;
                return;
            }
        };
        match repr {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                let reply = Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                // To a multicast group: answered from our unicast address (RFC 4443 §4.2).
                let src = Some(meta.dst).filter(|d| !d.is_multicast());
                if self.send_icmpv6(now, (src, meta.src), &reply, None) {
                    self.stats.ipv6.echo_replies += 1;
                }
            }
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => self.handle_echo_reply6(meta, (ident, seq_no), data),
            Repr::PacketTooBig { mtu, invoking } => {
                self.handle_icmpv6_error(now, Error6::TooBig(mtu), invoking);
            }
            Repr::DstUnreachable { reason, invoking } => {
                self.handle_icmpv6_error(now, Error6::Unreachable(reason), invoking);
            }
            Repr::TimeExceeded { invoking, .. } => {
                self.handle_icmpv6_error(now, Error6::TimeExceeded, invoking);
            }
            Repr::ParamProblem { invoking, .. } => {
                self.handle_icmpv6_error(now, Error6::ParamProblem, invoking);
            }
            Repr::Ndp(message) => {
                if message
                    .validate(&meta.src, &meta.dst, meta.hop_limit)
                    .is_err()
                {
                    self.stats.ipv6.nd_invalid += 1;
                    return;
                }
                self.handle_ndp(now, meta, &message);
            }
            Repr::Mld(message) => self.handle_mld(now, meta, &message),
        }
    }

    /// A Packet Too Big: the path MTU to the quoted destination is lowered (RFC 8201
    /// §4); `handle_icmpv6_error` then tells the socket that sent the packet.
    pub(crate) fn handle_packet_too_big(&mut self, now: Instant, mtu: u32, invoking: &[u8]) {
        let Ok(quoted) = ipv6::Packet::new_checked(invoking).or_else(|_| {
            // The quote may be cut: take the fixed header alone.
            if invoking.len() >= ipv6::HEADER_LEN {
                Ok(ipv6::Packet::new_unchecked(invoking))
            } else {
                Err(())
            }
        }) else {
            return;
        };
        let dst = quoted.dst_addr();
        let mtu = usize::try_from(mtu)
            .unwrap_or(usize::MAX)
            .max(ipv6::MIN_MTU);
        if self.v6.pmtu.lower(now, dst, mtu, &self.v6.config) {
            self.stats.ipv6.pmtu_lowered += 1;
            self.config_generation += 1;
        }
    }

    /// Send an ICMPv6 message from `src` (None: the route's source) to `dst`.
    pub(crate) fn send_icmpv6(
        &mut self,
        now: Instant,
        (src, dst): (Option<Ipv6Addr>, Ipv6Addr),
        repr: &Repr<'_>,
        hop_limit: Option<u8>,
    ) -> bool {
        let route = match self.route_output6(now, dst, src) {
            Ok(route) => route,
            Err(_) => {
                self.stats.ipv6.tx_no_route += 1;
                return false;
            }
        };
        let mut packet = self.pool.take();
        let len = repr.buffer_len();
        packet.resize(ipv6::HEADER_LEN + len, 0);
        repr.emit(
            &mut icmpv6::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]),
            &route.src,
            &dst,
        );
        self.stats.ipv6.icmp_tx += 1;
        self.send_ipv6_routed(
            now,
            &route,
            dst,
            (NextHeader::Icmpv6, hop_limit),
            packet,
            Origin::Stack,
        )
        .is_ok()
    }

    /// An ICMPv6 error about a packet we received (RFC 4443 §2.4): never about an
    /// error message, a packet from `::` or a multicast source, and rate limited.
    pub(crate) fn send_icmpv6_error(&mut self, now: Instant, meta: &Meta6<'_>, repr: &Repr<'_>) {
        if meta.src.is_unspecified() || meta.src.is_multicast() {
            return;
        }
        if is_error_message(meta.invoking) {
            return;
        }
        if !self.icmp_limiter.try_take(now) {
            self.stats.ipv6.errors_rate_limited += 1;
            return;
        }
        // From the address the packet was sent to when it is ours and unicast.
        let src = Some(meta.dst).filter(|d| !d.is_multicast() && self.v6.is_local(*d));
        if self.send_icmpv6(now, (src, meta.src), repr, None) {
            self.stats.ipv6.errors_sent += 1;
        }
    }

    /// A neighbour discovery message, validated.
    fn handle_ndp(&mut self, now: Instant, meta: &Meta6<'_>, message: &ndp::Repr<'_>) {
        match *message {
            ndp::Repr::NeighborSolicit {
                target,
                source_lladdr,
            } => {
                self.handle_ns(now, meta, target, source_lladdr);
            }
            ndp::Repr::NeighborAdvert {
                router,
                solicited,
                overrides,
                target,
                target_lladdr,
            } => {
                self.stats.ipv6.na_received += 1;
                if self.duplicate_found(meta.iface, target) {
                    return;
                }
                let released = self.v6.neighbors.advertised(
                    now,
                    meta.iface,
                    target,
                    target_lladdr,
                    (solicited, overrides, router),
                );
                self.send_released(meta.iface, target, released);
            }
            ndp::Repr::RouterAdvert { .. } => self.handle_ra(now, meta, message),
            ndp::Repr::RouterSolicit { source_lladdr } => {
                if let Some(mac) = source_lladdr {
                    let released = self.v6.neighbors.learn(meta.iface, meta.src, mac);
                    self.send_released(meta.iface, meta.src, released);
                }
                // RFC 4861 §6.2.6: an advertising interface answers.
                if self.advertises(meta.iface) {
                    self.send_ra(meta.iface);
                }
            }
            ndp::Repr::Redirect { .. } => {}
        }
    }

    /// A Neighbor Solicitation (RFC 4861 §7.2.3; RFC 4862 §5.4.3 while tentative).
    fn handle_ns(
        &mut self,
        now: Instant,
        meta: &Meta6<'_>,
        target: Ipv6Addr,
        source_lladdr: Option<ethernet::Address>,
    ) {
        self.stats.ipv6.ns_received += 1;
        let Some(addr) = self
            .v6
            .iface(meta.iface)
            .and_then(|s| s.addr(target))
            .copied()
        else {
            return;
        };
        if !addr.usable() {
            // Someone else is checking the same tentative address: it is a duplicate.
            if meta.src.is_unspecified() {
                self.duplicate_found(meta.iface, target);
            }
            return;
        }
        if meta.src.is_unspecified() {
            // Their DAD for our address: defend it to all nodes.
            self.send_na(now, meta.iface, crate::ipv6::ALL_NODES, target, false);
            return;
        }
        if let Some(mac) = source_lladdr.or(meta.link_src.filter(|_| self.is_ip_medium(meta.iface)))
        {
            let released = self.v6.neighbors.learn(meta.iface, meta.src, mac);
            self.send_released(meta.iface, meta.src, released);
        }
        self.send_na(now, meta.iface, meta.src, target, true);
    }

    /// Our tentative `addr` on `iface` is someone else's: it is given up (RFC 4862
    /// §5.4.5). Returns whether it was ours and tentative.
    fn duplicate_found(&mut self, iface: IfaceId, addr: Ipv6Addr) -> bool {
        let tentative = self
            .v6
            .iface(iface)
            .and_then(|s| s.addr(addr))
            .is_some_and(|a| !a.usable());
        if tentative {
            self.stats.ipv6.dad_duplicates += 1;
            self.remove_address6(iface, addr);
        }
        tentative
    }

    /// Send what waited for a neighbour now resolved.
    fn send_released(
        &mut self,
        iface: IfaceId,
        addr: Ipv6Addr,
        released: alloc::collections::VecDeque<Pending>,
    ) {
        if released.is_empty() {
            return;
        }
        let Some((_, Some(mac))) = self.v6.neighbors.state(iface, addr) else {
            return;
        };
        for pending in released {
            let _ = self.enqueue_frame(crate::stack::Outgoing {
                iface,
                dst_mac: mac,
                ethertype: ethernet::EtherType::Ipv6,
                payload: pending.packet,
                gso_size: 0,
            });
        }
    }

    /// Send a Neighbor Solicitation for `target`: multicast to its solicited-node
    /// group, or unicast to a known address; from `::` while `target` is our own
    /// tentative address (DAD).
    pub(crate) fn send_ns(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        unicast: Option<ethernet::Address>,
    ) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let mac = interface.mac;
        let state = self.v6.iface(iface);
        let dad = state
            .and_then(|s| s.addr(target))
            .is_some_and(|a| !a.usable());
        let src = if dad {
            Ipv6Addr::UNSPECIFIED
        } else {
            match state.and_then(|s| s.source_for(target)) {
                Some(src) => src,
                None => return,
            }
        };
        let dst = match unicast {
            Some(_) => target,
            None => ipv6::solicited_node(target),
        };
        let repr = Repr::Ndp(ndp::Repr::NeighborSolicit {
            target,
            source_lladdr: (!dad).then_some(mac),
        });
        let dst_mac = unicast.unwrap_or_else(|| ipv6::multicast_mac(dst));
        if self.send_nd_frame(iface, (src, dst, dst_mac), &repr) {
            self.stats.ipv6.ns_sent += 1;
        }
        let _ = now;
    }

    /// Send a Neighbor Advertisement for our `target` to `dst` (solicited: an answer).
    fn send_na(
        &mut self,
        now: Instant,
        iface: IfaceId,
        dst: Ipv6Addr,
        target: Ipv6Addr,
        solicited: bool,
    ) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let mac = interface.mac;
        let router = interface.forwarding;
        let repr = Repr::Ndp(ndp::Repr::NeighborAdvert {
            router,
            solicited,
            overrides: true,
            target,
            target_lladdr: Some(mac),
        });
        let dst_mac = if dst.is_multicast() {
            ipv6::multicast_mac(dst)
        } else {
            match self.v6.neighbors.state(iface, dst) {
                Some((_, Some(m))) => m,
                // The solicitation carried no address: answer the way it came.
                _ => ipv6::multicast_mac(crate::ipv6::ALL_NODES),
            }
        };
        if self.send_nd_frame(iface, (target, dst, dst_mac), &repr) {
            self.stats.ipv6.na_sent += 1;
        }
        let _ = now;
    }

    /// Send a Router Solicitation from our link-local address (or `::` before it is
    /// usable).
    fn send_rs(&mut self, iface: IfaceId) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let mac = interface.mac;
        let src = self
            .v6
            .iface(iface)
            .and_then(|s| s.link_local())
            .unwrap_or(Ipv6Addr::UNSPECIFIED);
        let repr = Repr::Ndp(ndp::Repr::RouterSolicit {
            source_lladdr: (!src.is_unspecified() && !self.is_ip_medium(iface)).then_some(mac),
        });
        let dst = crate::ipv6::ALL_ROUTERS;
        if self.send_nd_frame(iface, (src, dst, ipv6::multicast_mac(dst)), &repr) {
            self.stats.ipv6.rs_sent += 1;
        }
    }

    /// A Router Advertisement to all nodes (we advertise on `iface`: solicited, RFC
    /// 4861 §6.2.6, or on schedule, §6.2.4): a default router for 30 minutes, the link MTU, and each
    /// /64 prefix of the interface's global addresses, on-link and autonomous (SLAAC),
    /// valid for a day and preferred for four hours.
    pub(crate) fn send_ra(&mut self, iface: IfaceId) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let (mac, mtu) = (interface.mac, interface.mtu);
        let Some(state) = self.v6.iface(iface) else {
            return;
        };
        let Some(src) = state.link_local() else {
            return;
        };
        let mut prefixes: Vec<PrefixInfo> = Vec::new();
        for addr in state
            .addrs
            .iter()
            .filter(|a| a.usable() && a.origin != AddrOrigin::LinkLocal)
        {
            let network = addr.cidr.network();
            if network.prefix_len == 64 && !prefixes.iter().any(|p| p.prefix == network.address) {
                prefixes.push(PrefixInfo {
                    prefix_len: 64,
                    on_link: true,
                    autonomous: true,
                    valid_lifetime: 86_400,
                    preferred_lifetime: 14_400,
                    prefix: network.address,
                });
            }
        }
        let repr = Repr::Ndp(ndp::Repr::RouterAdvert {
            hop_limit: self.v6.config.hop_limit,
            managed: false,
            other: false,
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_timer: 0,
            source_lladdr: Some(mac),
            mtu: Some(u32::try_from(mtu).unwrap_or(u32::MAX)),
            prefixes: ndp::Prefixes::List(&prefixes),
        });
        let dst = crate::ipv6::ALL_NODES;
        if self.send_nd_frame(iface, (src, dst, ipv6::multicast_mac(dst)), &repr) {
            self.stats.ipv6.ra_sent += 1;
        }
    }

    /// A neighbour discovery message straight onto the link (hop limit 255, no route,
    /// no resolution: the destination's MAC is given).
    fn send_nd_frame(
        &mut self,
        iface: IfaceId,
        (src, dst, dst_mac): (Ipv6Addr, Ipv6Addr, ethernet::Address),
        repr: &Repr<'_>,
    ) -> bool {
        let len = repr.buffer_len();
        let mut packet = self.pool.take();
        packet.resize(ipv6::HEADER_LEN + len, 0);
        let header = ipv6::Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: NextHeader::Icmpv6,
            payload_len: len,
            hop_limit: ndp::HOP_LIMIT,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
        };
        header.emit(&mut ipv6::Packet::new_unchecked(&mut packet[..]));
        repr.emit(
            &mut icmpv6::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]),
            &src,
            &dst,
        );
        self.stats.ipv6.icmp_tx += 1;
        self.stats.ipv6.tx_packets += 1;
        self.enqueue_frame(crate::stack::Outgoing {
            iface,
            dst_mac,
            ethertype: ethernet::EtherType::Ipv6,
            payload: packet,
            gso_size: 0,
        })
        .is_ok()
    }

    /// A Router Advertisement (RFC 4861 §6.3.4), taken by a host that accepts them.
    fn handle_ra(&mut self, now: Instant, meta: &Meta6<'_>, message: &ndp::Repr<'_>) {
        let ndp::Repr::RouterAdvert {
            hop_limit,
            router_lifetime,
            source_lladdr,
            mtu,
            prefixes,
            ..
        } = *message
        else {
            return;
        };
        let iface = meta.iface;
        if !self.v6.config.accept_ra || self.ifaces.get(iface.index()).is_none_or(|i| i.forwarding)
        {
            return;
        }
        self.stats.ipv6.ra_received += 1;
        self.config_generation += 1;
        if hop_limit != 0 {
            self.v6.hop_limit = hop_limit;
        }
        if let Some(mac) = source_lladdr {
            let released = self.v6.neighbors.learn(iface, meta.src, mac);
            self.send_released(iface, meta.src, released);
        }
        // The default router: kept for its lifetime, removed by a lifetime of 0.
        let default = ipv6::Cidr::new(Ipv6Addr::UNSPECIFIED, 0).expect("::/0");
        self.v6.routes.retain(|r| {
            !(r.origin == Route6Origin::Router && r.iface == iface && r.gateway == Some(meta.src))
        });
        if router_lifetime != 0 {
            self.v6.routes.insert(Route6 {
                cidr: default,
                gateway: Some(meta.src),
                iface,
                origin: Route6Origin::Router,
                until: Some(now + Duration::from_secs(u64::from(router_lifetime))),
            });
        }
        if let Some(mtu) = mtu {
            let link = self.ifaces[iface.index()].mtu;
            let mtu = usize::try_from(mtu).unwrap_or(usize::MAX);
            // RFC 4861 §6.3.4: an MTU below the minimum or above the link's is ignored.
            if (ipv6::MIN_MTU..=link).contains(&mtu) {
                self.v6.iface_mut(iface).mtu = Some(mtu);
            }
        }
        for prefix in prefixes.iter() {
            self.handle_prefix(now, iface, &prefix);
        }
        // A router answered: no more solicitations.
        let state = self.v6.iface_mut(iface);
        state.solicitations = 0;
        state.next_solicitation = None;
    }

    /// One Prefix Information option (RFC 4861 §6.3.4 on-link, RFC 4862 §5.5.3
    /// autonomous).
    fn handle_prefix(&mut self, now: Instant, iface: IfaceId, info: &PrefixInfo) {
        let Ok(cidr) = ipv6::Cidr::new(info.prefix, info.prefix_len) else {
            return;
        };
        let cidr = cidr.network();
        if crate::ipv6::is_link_local(info.prefix) || info.preferred_lifetime > info.valid_lifetime
        {
            return;
        }
        let until =
            |secs: u32| (secs != u32::MAX).then(|| now + Duration::from_secs(u64::from(secs)));
        if info.on_link {
            self.v6.routes.retain(|r| {
                !(r.origin == Route6Origin::Prefix && r.iface == iface && r.cidr == cidr)
            });
            if info.valid_lifetime != 0 {
                self.v6.routes.insert(Route6 {
                    cidr,
                    gateway: None,
                    iface,
                    origin: Route6Origin::Prefix,
                    until: until(info.valid_lifetime),
                });
            }
        }
        if !info.autonomous
            || !self.v6.config.slaac
            || info.prefix_len != 64
            || self.is_ip_medium(iface)
        {
            return;
        }
        let mac = self.ifaces[iface.index()].mac;
        let Ok(address) = ipv6::address_from_prefix(&cidr, ipv6::interface_id(mac)) else {
            return;
        };
        let existing = self.v6.iface(iface).and_then(|s| s.addr(address)).copied();
        let valid = match existing {
            // RFC 4862 §5.5.3 (e): a lifetime under two hours cannot shorten the
            // remaining one below two hours (a spoofed RA could not kill it at once).
            Some(a) => {
                let two_hours = now + Duration::from_secs(7200);
                let remaining = a.valid_until;
                let offered = until(info.valid_lifetime);
                match (offered, remaining) {
                    (None, _) => None,
                    (Some(o), _) if o > two_hours => Some(o),
                    (Some(_), Some(r)) if r <= two_hours => remaining,
                    _ => Some(two_hours),
                }
            }
            None if info.valid_lifetime == 0 => return,
            None => until(info.valid_lifetime),
        };
        let cidr = ipv6::Cidr::new(address, 64).expect("64 is a valid prefix length");
        self.add_address6_with(
            now,
            iface,
            cidr,
            AddrOrigin::Slaac,
            (valid, until(info.preferred_lifetime)),
        );
    }

    /// Fire the IPv6 timers due at `now`: neighbour resolution, DAD, router
    /// solicitations, lifetimes, reassembly.
    pub(crate) fn handle_timeout_v6(&mut self, now: Instant) {
        // Timers may move (DAD probes, solicitations, lifetimes): scan again.
        self.v6.timer_epoch += 1;
        let mut actions = Vec::new();
        self.v6.neighbors.handle_timeout(now, &mut actions);
        for action in actions {
            match action {
                NdAction::Solicit {
                    iface,
                    target,
                    unicast,
                } => self.send_ns(now, iface, target, unicast),
                NdAction::Failed {
                    iface,
                    addr,
                    dropped,
                } => {
                    // A connect whose SYN waits on this neighbour fails now.
                    let routes = &self.v6.routes;
                    let via = |remote: IpAddr| match remote {
                        IpAddr::V6(r) => {
                            r == addr
                                || routes.lookup(r).is_some_and(|route| {
                                    route.iface == iface && route.gateway == Some(addr)
                                })
                        }
                        IpAddr::V4(_) => false,
                    };
                    self.tcp.fail_opens(now, via, TcpError::HostUnreachable);
                    self.on_neighbor6_failed(now, dropped);
                }
            }
        }
        self.run_mld(now);
        self.run_dad(now);
        self.run_solicitations(now);
        self.run_advertisements(now);
        self.expire_v6(now);
        let mut expired = Vec::new();
        self.v6
            .reassembly
            .handle_timeout(now, &mut self.stats.reassembly6, &mut expired);
        for datagram in expired {
            let (Some(quote), IpAddr::V6(src), IpAddr::V6(dst)) =
                (datagram.quote, datagram.src, datagram.dst)
            else {
                continue;
            };
            // RFC 8200 §4.5: Time Exceeded code 1 when the first fragment came.
            let meta = Meta6 {
                iface: IfaceId(0),
                src,
                dst,
                hop_limit: 0,
                multicast: false,
                invoking: &quote,
                verify_checksum: false,
                link_src: None,
            };
            let repr = Repr::TimeExceeded {
                reason: icmpv6::TimeExceeded::FragReassemblyExceeded,
                invoking: &quote,
            };
            self.send_icmpv6_error(now, &meta, &repr);
        }
    }

    /// Duplicate address detection: the solicitations due (see
    /// [`State::dad_due`](crate::ipv6::State::dad_due)).
    fn run_dad(&mut self, now: Instant) {
        let (probes, passed) = self.v6.dad_due(now);
        // A new usable address: routes and sources may change.
        self.config_generation += passed;
        for (iface, target) in probes {
            self.send_ns(now, iface, target, None);
        }
    }

    /// Router solicitations at start-up, `RTR_SOLICITATION_INTERVAL` apart.
    fn run_solicitations(&mut self, now: Instant) {
        for iface in self.v6.solicitations_due(now) {
            self.send_rs(iface);
        }
    }

    /// Addresses and learnt routes whose lifetimes ran out.
    fn expire_v6(&mut self, now: Instant) {
        let (gone, deprecated) = self.v6.age_addresses(now);
        self.config_generation += deprecated;
        for (iface, addr) in gone {
            self.remove_address6(iface, addr);
        }
        if self.v6.expire_routes(now) {
            self.config_generation += 1;
        }
    }
}

/// True when `packet` (from its IPv6 header) carries an ICMPv6 error message.
fn is_error_message(packet: &[u8]) -> bool {
    match impnet_wire::ipv6ext::walk(packet) {
        Ok(walk) if walk.protocol == NextHeader::Icmpv6 && walk.fragment.is_none() => {
            packet.get(walk.offset).is_some_and(|&t| t < 128)
        }
        _ => false,
    }
}
