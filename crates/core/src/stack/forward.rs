//! IPv4 forwarding (RFC 1812): a datagram that arrives on a forwarding interface for
//! another host is checked, routed, its TTL decremented (RFC 1624 checksum update),
//! its Record Route and Timestamp options stamped, fragmented to the next hop when DF
//! is clear, and handed to the outgoing interface. What cannot be forwarded is counted
//! by reason on the interface it arrived on, and answered with a rate-limited ICMP
//! error where RFC 1812 asks for one.

use core::net::Ipv4Addr;

use impnet_wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use impnet_wire::ipv4;

use crate::iface::{IfaceId, RxOffload};
use crate::ip_options;
use crate::neighbor::Origin;
use crate::stack::{Stack, forward_offload};
use crate::stats::ForwardStats;
use crate::time::Instant;

/// Why a datagram was not forwarded; each is a counter in [`ForwardStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    NoRoute,
    TtlExceeded,
    FragNeeded,
    Martian,
    Broadcast,
    BadOption,
    Denied,
    EgressDropped,
}

impl Refusal {
    pub(crate) fn count(self, stats: &mut ForwardStats) {
        let counter = match self {
            Refusal::NoRoute => &mut stats.no_route,
            Refusal::TtlExceeded => &mut stats.ttl_exceeded,
            Refusal::FragNeeded => &mut stats.frag_needed,
            Refusal::Martian => &mut stats.martian,
            Refusal::Broadcast => &mut stats.broadcast,
            Refusal::BadOption => &mut stats.bad_option,
            Refusal::Denied => &mut stats.denied,
            Refusal::EgressDropped => &mut stats.egress_dropped,
        };
        *counter += 1;
    }
}

/// RFC 1812 §5.3.7 and §4.2.2.11, RFC 3927 §7: addresses a router never forwards
/// from or to: "this network" (0/8), loopback (127/8), link-local (169.254/16),
/// multicast (no multicast routing here) and the reserved class E (240/4, which
/// holds the limited broadcast).
fn is_martian(addr: Ipv4Addr) -> bool {
    let first = addr.octets()[0];
    first == 0 || first == 127 || addr.is_link_local() || addr.is_multicast() || first >= 240
}

/// The ICMP error a refusal draws, if any.
#[derive(Debug, Clone, Copy)]
enum ErrorReply {
    Unreachable(DstUnreachable, u16),
    TimeExceeded,
    ParamProblem(u8),
}

impl Stack {
    /// Turn forwarding on or off for datagrams arriving on `iface` (off by default: a
    /// host drops what is not addressed to it, RFC 1122 §3.3.4.2). Unknown interfaces
    /// are ignored.
    pub fn set_forwarding(&mut self, iface: IfaceId, on: bool) {
        if let Some(interface) = self.ifaces.get_mut(iface.index()) {
            interface.forwarding = on;
        }
    }

    /// Whether datagrams arriving on `iface` are forwarded.
    pub fn forwarding(&self, iface: IfaceId) -> bool {
        self.ifaces.get(iface.index()).is_some_and(|i| i.forwarding)
    }

    /// The counters of one interface (None for an unknown interface).
    pub fn iface_stats(&self, iface: IfaceId) -> Option<&crate::stats::IfaceStats> {
        if iface == IfaceId::LOOPBACK {
            return Some(&self.loopback.stats);
        }
        self.ifaces.get(iface.index()).map(|i| &i.stats)
    }

    /// Filter forwarded datagrams through `acl` (first matching rule wins; a denied
    /// datagram is dropped, counted as `denied`, and answered with ICMP
    /// communication-administratively-prohibited). Interface names in its rules are
    /// resolved with `names` (the name of each interface, by id). None: no filter.
    /// Returns the interface names that matched no interface.
    pub fn set_acl(
        &mut self,
        acl: Option<crate::acl::Acl>,
        names: impl Fn(IfaceId) -> Option<alloc::string::String>,
    ) -> alloc::vec::Vec<alloc::string::String> {
        self.acl = acl;
        let ids: alloc::vec::Vec<IfaceId> = self.ifaces().collect();
        match &mut self.acl {
            Some(acl) => acl.resolve(|name| {
                ids.iter()
                    .copied()
                    .find(|&id| names(id).as_deref() == Some(name))
            }),
            None => alloc::vec::Vec::new(),
        }
    }

    /// The access-control list in force, with its hit counters.
    pub fn acl(&self) -> Option<&crate::acl::Acl> {
        self.acl.as_ref()
    }

    /// The interfaces of this stack, in the order they were added.
    pub fn ifaces(&self) -> impl Iterator<Item = IfaceId> + '_ {
        (0..self.ifaces.len()).map(|i| IfaceId(i as u32))
    }

    /// A datagram for another host arrived on `iface` (already validated: version,
    /// lengths, header checksum). `link_broadcast`: it came in an Ethernet broadcast.
    #[inline(never)]
    pub(crate) fn forward(
        &mut self,
        now: Instant,
        iface: IfaceId,
        packet: &ipv4::Packet<&[u8]>,
        link_broadcast: bool,
        rx: RxOffload,
    ) {
        if let Err((refusal, reply)) = self.try_forward(now, iface, packet, link_broadcast, rx) {
            self.refuse(now, iface, packet, refusal, reply);
        }
    }

    fn try_forward(
        &mut self,
        now: Instant,
        iface: IfaceId,
        packet: &ipv4::Packet<&[u8]>,
        link_broadcast: bool,
        rx: RxOffload,
    ) -> Result<(), (Refusal, Option<ErrorReply>)> {
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        if is_martian(src) || is_martian(dst) {
            return Err((Refusal::Martian, None));
        }
        if link_broadcast {
            return Err((Refusal::Broadcast, None));
        }
        if packet.ttl() <= 1 {
            return Err((Refusal::TtlExceeded, Some(ErrorReply::TimeExceeded)));
        }
        let unreachable = ErrorReply::Unreachable(DstUnreachable::NetUnreachable, 0);
        let (route_index, route) = self
            .routes
            .lookup_index(dst)
            .map(|(index, route)| (index, *route))
            .ok_or((Refusal::NoRoute, Some(unreachable)))?;
        let out = self
            .ifaces
            .get(route.iface.index())
            .ok_or((Refusal::NoRoute, Some(unreachable)))?;
        // RFC 2644: directed broadcasts are not forwarded by default.
        if out.is_broadcast(dst) {
            return Err((Refusal::Broadcast, None));
        }
        let total = usize::from(packet.total_len());
        let bytes = &packet.clone().into_inner()[..total];
        if let Some(acl) = &mut self.acl
            && acl.check(bytes, Some(iface), Some(route.iface)) == crate::acl::Action::Deny
        {
            // RFC 1812 §5.2.7.1: communication administratively prohibited.
            let reply = ErrorReply::Unreachable(DstUnreachable::CommProhibited, 0);
            return Err((Refusal::Denied, Some(reply)));
        }
        let out = &self.ifaces[route.iface.index()];
        let next_hop = route.next_hop(dst);
        let mtu = route
            .mtu
            .map_or(out.mtu, |m| m.clamp(crate::iface::MIN_MTU, out.mtu));
        // A large TCP segment a device made (GRO) or was to cut (GSO) is too big only
        // when the segments it stands for are (Linux `skb_gso_validate_network_len`).
        let gso = forward_offload::gso_fits(bytes, rx.gso_size, mtu);
        if total > mtu && gso.is_none() && packet.dont_frag() {
            let reply = ErrorReply::Unreachable(DstUnreachable::FragRequired, mtu as u16);
            return Err((Refusal::FragNeeded, Some(reply)));
        }
        // A kept buffer of the datagram's size, a 64 KiB segment's too: no allocation.
        let mut out_packet = self.pool.take_for(total);
        crate::tcp::buffer::extend_bytes(&mut out_packet, bytes);
        let mut view = ipv4::Packet::new_unchecked(&mut out_packet[..]);
        view.decrement_ttl();
        if view.header_len() > ipv4::HEADER_LEN {
            // Only options need our address on the way out: looked up here, not per
            // datagram.
            let our_addr = self.ifaces[route.iface.index()]
                .source_for(next_hop)
                .unwrap_or(Ipv4Addr::UNSPECIFIED);
            let stamp = self.ip_timestamp(now);
            match ip_options::stamp(view.options_mut(), our_addr, stamp) {
                Ok(true) => view.fill_checksum(),
                Ok(false) => {}
                Err(bad) => {
                    self.pool.give(out_packet);
                    return Err((
                        Refusal::BadOption,
                        Some(ErrorReply::ParamProblem(bad.pointer)),
                    ));
                }
            }
        }
        let stats = &mut self.ifaces[iface.index()].stats.forward;
        stats.forwarded += 1;
        stats.forwarded_bytes += total as u64;
        self.stats.forward.forwarded += 1;
        self.stats.forward.forwarded_bytes += total as u64;
        self.routes.count(route_index, total as u64);
        if gso.is_none() && total > mtu {
            self.ifaces[iface.index()].stats.forward.fragmented += 1;
            self.stats.forward.fragmented += 1;
        }
        let out = (route.iface, next_hop);
        let sent = self.forward_out(now, out, out_packet, mtu, gso, rx.partial_checksum);
        if sent.is_err() {
            Refusal::EgressDropped.count(&mut self.ifaces[iface.index()].stats.forward);
            Refusal::EgressDropped.count(&mut self.stats.forward);
        }
        Ok(())
    }

    /// A timestamp for the IPv4 Timestamp option (RFC 791): milliseconds since midnight
    /// UT when [`StackConfig::ut_offset_ms`](crate::StackConfig::ut_offset_ms) says what
    /// that is at time zero, else milliseconds of `now` with the high bit set, which
    /// RFC 791 allows for a clock not tied to UT.
    pub(crate) fn ip_timestamp(&self, now: Instant) -> u32 {
        let millis = now.as_millis();
        match self.config.ut_offset_ms {
            Some(offset) => ((offset + millis) % 86_400_000) as u32,
            None => (millis as u32) | 0x8000_0000,
        }
    }

    /// Fragment a forwarded datagram (DF clear) to `mtu` (RFC 791 §3.2): offsets
    /// continue the datagram's own (it may be a fragment already), MF is set on all but
    /// the last (which keeps the original's), and fragments after the first carry only
    /// the options with the copied flag.
    pub(crate) fn forward_fragments(
        &mut self,
        now: Instant,
        out: IfaceId,
        next_hop: Ipv4Addr,
        packet: alloc::vec::Vec<u8>,
        mtu: usize,
    ) -> Result<(), crate::stack::ip::OutputError> {
        let view = ipv4::Packet::new_unchecked(&packet[..]);
        let header_len = view.header_len();
        let base_offset = usize::from(view.frag_offset());
        let last_more = view.more_frags();
        let later_options = ip_options::copied(view.options());
        let data = &packet[header_len..];
        let mut result = Ok(());
        let mut offset = 0;
        while offset < data.len() {
            let first = offset == 0;
            let options_len = if first {
                header_len - ipv4::HEADER_LEN
            } else {
                later_options.len()
            };
            let room = (mtu - ipv4::HEADER_LEN - options_len) & !7;
            let len = room.min(data.len() - offset);
            let more = offset + len < data.len() || last_more;
            let mut fragment = self.pool.take();
            fragment.extend_from_slice(&packet[..ipv4::HEADER_LEN]);
            if first {
                fragment.extend_from_slice(&packet[ipv4::HEADER_LEN..header_len]);
            } else {
                fragment.extend_from_slice(&later_options);
            }
            fragment.extend_from_slice(&data[offset..offset + len]);
            let mut view = ipv4::Packet::new_unchecked(&mut fragment[..]);
            view.set_header_len(ipv4::HEADER_LEN + options_len);
            view.set_total_len((ipv4::HEADER_LEN + options_len + len) as u16);
            view.set_more_frags(more);
            view.set_frag_offset((base_offset + offset) as u16);
            view.fill_checksum();
            result = result.and(self.dispatch(now, out, next_hop, fragment, Origin::Forwarded));
            offset += len;
        }
        self.pool.give(packet);
        result
    }

    /// Count a refusal on `iface` and answer it with its ICMP error, where one is due.
    fn refuse(
        &mut self,
        now: Instant,
        iface: IfaceId,
        packet: &ipv4::Packet<&[u8]>,
        refusal: Refusal,
        reply: Option<ErrorReply>,
    ) {
        refusal.count(&mut self.ifaces[iface.index()].stats.forward);
        refusal.count(&mut self.stats.forward);
        let Some(reply) = reply else {
            return;
        };
        let bytes = &packet.clone().into_inner()[..usize::from(packet.total_len())];
        self.forward_error(now, bytes, reply);
    }

    /// Send `reply` about the datagram `bytes` to its source, unless RFC 1812 §4.3.2.7
    /// forbids an error about it: an ICMP error, a fragment other than the first, a
    /// datagram whose source is not a unicast host.
    fn forward_error(&mut self, now: Instant, bytes: &[u8], reply: ErrorReply) {
        let packet = ipv4::Packet::new_unchecked(bytes);
        if packet.frag_offset() != 0 || is_martian(packet.src_addr()) {
            return;
        }
        let payload = &bytes[packet.header_len().min(bytes.len())..];
        if packet.protocol() == ipv4::Protocol::Icmp && is_icmp_error(payload) {
            return;
        }
        let quote = &bytes[..icmpv4::invoking_len(bytes)];
        let repr = match reply {
            ErrorReply::Unreachable(reason, next_hop_mtu) => icmpv4::Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                invoking: quote,
            },
            ErrorReply::TimeExceeded => icmpv4::Repr::TimeExceeded {
                reason: TimeExceeded::TtlExpired,
                invoking: quote,
            },
            ErrorReply::ParamProblem(pointer) => icmpv4::Repr::ParamProblem {
                pointer,
                invoking: quote,
            },
        };
        if self.send_icmp_error_repr(now, packet.src_addr(), None, &repr) {
            match reply {
                ErrorReply::Unreachable(..) => self.stats.icmp.tx_dst_unreachable += 1,
                ErrorReply::TimeExceeded => self.stats.icmp.tx_time_exceeded += 1,
                ErrorReply::ParamProblem(_) => self.stats.icmp.tx_param_problem += 1,
            }
        }
    }

    /// A forwarded datagram's next hop never answered ARP: RFC 1812 §4.3.3.1, host
    /// unreachable to its source.
    pub(crate) fn forward_unresolved(&mut self, now: Instant, packet: &[u8]) {
        Refusal::EgressDropped.count(&mut self.stats.forward);
        let reply = ErrorReply::Unreachable(DstUnreachable::HostUnreachable, 0);
        if ipv4::Packet::new_checked(packet).is_ok() {
            self.forward_error(now, packet, reply);
        }
    }
}

/// Whether an ICMP message is an error (not a query such as echo), going by its type
/// (RFC 1812 §4.3.2.7: no error about an error). Unknown types count as errors.
fn is_icmp_error(message: &[u8]) -> bool {
    !matches!(message.first(), Some(0 | 8 | 13 | 14 | 15 | 16 | 17 | 18))
}
