//! The IPv6 router (RFC 8200 forwarding with RFC 4443's errors; RFC 4861 §6.2 router
//! advertisements): a packet that arrives on a forwarding interface for another host
//! is checked (scope, hop limit), routed, filtered by the access list, checked against
//! the next link's MTU (routers never fragment IPv6: Packet Too Big), its hop limit
//! lowered, and handed to the outgoing interface; every refusal is counted by reason
//! in [`ForwardStats`](crate::stats::ForwardStats) (`Stats::forward6`, `IfaceStats::
//! forward6`) as IPv4's are. An interface that advertises (`set_router_advertisements`)
//! answers router solicitations and sends unsolicited advertisements on a schedule.

use alloc::vec::Vec;

use impnet_wire::icmpv6::{self, DstUnreachable};
use impnet_wire::ipv6;

use crate::iface::{IfaceId, RxOffload};
use crate::ipv6::{Advertising, AdvertisingState};
use crate::neighbor::Origin;
use crate::stack::forward::Refusal;
use crate::stack::ip::Meta6;
use crate::stack::{Stack, forward_offload};
use crate::time::{Duration, Instant};

/// RFC 4861 §10: `MAX_INITIAL_RTR_ADVERTISEMENTS`, the advertisements sent at the
/// shorter interval when an interface starts advertising.
const MAX_INITIAL_RTR_ADVERTISEMENTS: u8 = 3;
/// RFC 4861 §10: `MAX_INITIAL_RTR_ADVERT_INTERVAL`, 16 s.
const MAX_INITIAL_RTR_ADVERT_INTERVAL: Duration = Duration::from_secs(16);

impl Stack {
    /// Forward a packet for another host (RFC 8200; RFC 4443 errors). `bytes` is the
    /// whole packet (its header checked, link padding cut).
    pub(crate) fn forward6(&mut self, now: Instant, iface: IfaceId, bytes: &[u8], rx: RxOffload) {
        match self.try_forward6(now, iface, bytes, rx) {
            Ok(()) => {}
            Err((refusal, reply)) => {
                refusal.count(&mut self.ifaces[iface.index()].stats.forward6);
                refusal.count(&mut self.stats.forward6);
                if let Some(repr) = reply {
                    let meta = forward_meta(iface, bytes);
                    self.send_icmpv6_error(now, &meta, &repr.with_invoking(bytes));
                }
            }
        }
    }

    fn try_forward6(
        &mut self,
        now: Instant,
        iface: IfaceId,
        bytes: &[u8],
        rx: RxOffload,
    ) -> Result<(), (Refusal, Option<Reply6>)> {
        let packet = ipv6::Packet::new_unchecked(bytes);
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        // RFC 4291 §2.5.6: "Routers must not forward any packets with Link-Local
        // source or destination addresses to other links"; §2.5.2: nor the
        // unspecified source.
        if crate::ipv6::is_link_local(src)
            || crate::ipv6::is_link_local(dst)
            || src.is_unspecified()
        {
            return Err((Refusal::Martian, None));
        }
        // RFC 8200 §3: a node forwarding a packet whose hop limit would reach zero
        // discards it and sends Time Exceeded (RFC 4443 §3.3, code 0).
        if packet.hop_limit() <= 1 {
            return Err((Refusal::TtlExceeded, Some(Reply6::HopLimit)));
        }
        let (route_index, route) = self.v6.routes.lookup_index(dst).ok_or((
            Refusal::NoRoute,
            Some(Reply6::Unreachable(DstUnreachable::NoRoute)),
        ))?;
        if let Some(acl) = &mut self.acl
            && acl.check(bytes, Some(iface), Some(route.iface)) == crate::acl::Action::Deny
        {
            // RFC 4443 §3.1: code 1, "communication with destination administratively
            // prohibited".
            let reply = Reply6::Unreachable(DstUnreachable::AdminProhibited);
            return Err((Refusal::Denied, Some(reply)));
        }
        let out_mtu = self
            .v6
            .iface(route.iface)
            .and_then(|s| s.mtu)
            .or_else(|| self.ifaces.get(route.iface.index()).map(|i| i.mtu))
            .unwrap_or(ipv6::MIN_MTU)
            .max(ipv6::MIN_MTU);
        if bytes.len() > out_mtu {
            // RFC 4443 §3.2: a router that cannot forward a packet because it is
            // larger than the next link's MTU sends Packet Too Big with that MTU.
            return Err((Refusal::FragNeeded, Some(Reply6::TooBig(out_mtu as u32))));
        }
        let mut copy = self.pool.take();
        copy.extend_from_slice(bytes);
        let hop_limit = packet.hop_limit() - 1;
        ipv6::Packet::new_unchecked(&mut copy[..]).set_hop_limit(hop_limit);
        let completes =
            (self.ifaces.get(route.iface.index())).is_some_and(|i| i.offloads.tx_checksum);
        forward_offload::egress_checksum(&mut copy, rx.partial_checksum, completes);
        let total = bytes.len() as u64;
        for stats in [
            &mut self.ifaces[iface.index()].stats.forward6,
            &mut self.stats.forward6,
        ] {
            stats.forwarded += 1;
            stats.forwarded_bytes += total;
        }
        self.v6.routes.count(route_index, total);
        let next_hop = route.gateway.unwrap_or(dst);
        if self
            .dispatch6(now, route.iface, next_hop, copy, Origin::Forwarded)
            .is_err()
        {
            Refusal::EgressDropped.count(&mut self.ifaces[iface.index()].stats.forward6);
            Refusal::EgressDropped.count(&mut self.stats.forward6);
        }
        Ok(())
    }

    /// A forwarded packet's next hop never answered neighbour discovery: counted as
    /// dropped on the way out, and RFC 4443 §3.1's Destination Unreachable code 3
    /// (address unreachable) to its source.
    pub(crate) fn forward_unresolved6(&mut self, now: Instant, packet: &[u8]) {
        Refusal::EgressDropped.count(&mut self.stats.forward6);
        if ipv6::Packet::new_checked(packet).is_err() {
            return;
        }
        let reply = Reply6::Unreachable(DstUnreachable::AddrUnreachable);
        let meta = forward_meta(IfaceId(0), packet);
        self.send_icmpv6_error(now, &meta, &reply.with_invoking(packet));
    }

    /// Advertise on `iface` as a router (RFC 4861 §6.2.1 `AdvSendAdvertisements`):
    /// answer router solicitations and send unsolicited advertisements, the first
    /// three (`MAX_INITIAL_RTR_ADVERTISEMENTS`) at most 16 s apart, then every
    /// `interval` (`MaxRtrAdvInterval`, 4 s to 1800 s; each gap drawn between 0.75
    /// and 1 times it, §6.2.4). Each advertisement makes this stack a default router
    /// and carries the interface's /64 prefixes (on-link, autonomous) and its MTU.
    /// Only where the interface forwards; `None` stops (the default, RFC 4861
    /// §6.2.2: "MUST NOT send Router Advertisements" otherwise).
    pub fn set_router_advertisements(
        &mut self,
        now: Instant,
        iface: IfaceId,
        interval: Option<Duration>,
    ) {
        if iface.index() >= self.ifaces.len() {
            return;
        }
        let state = self.v6.iface_mut(iface);
        state.advertising = interval.map(|interval| Advertising {
            interval: interval.clamp(Duration::from_secs(4), Duration::from_secs(1800)),
            state: AdvertisingState {
                initial_left: MAX_INITIAL_RTR_ADVERTISEMENTS,
                next: now,
            },
        });
    }

    /// Whether `iface` sends router advertisements (it forwards and was asked to).
    pub(crate) fn advertises(&self, iface: IfaceId) -> bool {
        self.ifaces.get(iface.index()).is_some_and(|i| i.forwarding)
            && self
                .v6
                .ifaces
                .get(iface.index())
                .is_some_and(|s| s.advertising.is_some())
    }

    /// Send the unsolicited router advertisements due at `now` (RFC 4861 §6.2.4),
    /// once the interface has its link-local address (an advertisement's source).
    pub(crate) fn run_advertisements(&mut self, now: Instant) {
        let mut due = Vec::new();
        for index in 0..self.v6.ifaces.len() {
            let iface = IfaceId(index as u32);
            let ready = self.advertises(iface)
                && self.v6.ifaces[index].link_local().is_some()
                && self.v6.ifaces[index]
                    .advertising
                    .is_some_and(|a| a.state.next <= now);
            if ready {
                due.push(iface);
            }
        }
        for iface in due {
            self.send_ra(iface);
            let jitter = self.rng.next_u64() % 1024;
            let Some(advertising) = &mut self.v6.iface_mut(iface).advertising else {
                continue;
            };
            let mut gap = advertising.interval;
            if advertising.state.initial_left > 0 {
                advertising.state.initial_left -= 1;
                gap = gap.min(MAX_INITIAL_RTR_ADVERT_INTERVAL);
            }
            // MinRtrAdvInterval is 0.75 x MaxRtrAdvInterval (RFC 4861 §6.2.1's
            // default); the gap is uniform between them.
            let nanos = gap.as_nanos();
            let gap = Duration::from_nanos(nanos - nanos / 4 * (1024 - jitter) / 1024);
            advertising.state.next = now + gap;
        }
    }

    /// The next unsolicited advertisement of any interface (one still waiting for
    /// its link-local address waits on duplicate address detection's timer).
    pub(crate) fn poll_advertisements(&self) -> Option<Instant> {
        (0..self.v6.ifaces.len())
            .filter(|&i| {
                self.advertises(IfaceId(i as u32)) && self.v6.ifaces[i].link_local().is_some()
            })
            .filter_map(|i| self.v6.ifaces[i].advertising.map(|a| a.state.next))
            .min()
    }
}

/// The ICMPv6 error a refused packet draws (its quote added when sent).
#[derive(Debug, Clone, Copy)]
enum Reply6 {
    HopLimit,
    Unreachable(DstUnreachable),
    TooBig(u32),
}

impl Reply6 {
    fn with_invoking(self, invoking: &[u8]) -> icmpv6::Repr<'_> {
        match self {
            Reply6::HopLimit => icmpv6::Repr::TimeExceeded {
                reason: icmpv6::TimeExceeded::HopLimitExceeded,
                invoking,
            },
            Reply6::Unreachable(reason) => icmpv6::Repr::DstUnreachable { reason, invoking },
            Reply6::TooBig(mtu) => icmpv6::Repr::PacketTooBig { mtu, invoking },
        }
    }
}

/// What `send_icmpv6_error` needs of a packet being forwarded.
fn forward_meta(iface: IfaceId, bytes: &[u8]) -> Meta6<'_> {
    let packet = ipv6::Packet::new_unchecked(bytes);
    Meta6 {
        iface,
        src: packet.src_addr(),
        dst: packet.dst_addr(),
        hop_limit: packet.hop_limit(),
        multicast: false,
        invoking: bytes,
        verify_checksum: false,
        link_src: None,
    }
}
