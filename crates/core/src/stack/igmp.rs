//! IPv4 multicast on the stack: UDP sockets join and leave groups on an interface (for
//! every source, or source-specific with INCLUDE filters, RFC 3376 §3),
//! the interface's group list filters the 01:00:5e frames it takes, and the IGMP host
//! side (RFC 3376, IGMPv3, falling back to IGMPv2 reports and leaves while an older
//! querier is present, RFC 3376 §7) reports joins and leaves and answers queries.
//! That host logic and its state are [`IfaceGroups`]'s; here the stack parses what
//! arrives, hands it over, and sends what it owes.
//!
//! Delivery follows Linux with `IP_MULTICAST_ALL` on (its default): a datagram to a
//! group the interface joined goes to the socket bound to its port (on the wildcard
//! address), whichever socket joined. A datagram sent to a group leaves by the
//! interface of the socket's bound address, else the route to the group, else the
//! first interface with an address, with the socket's multicast TTL (1 by default,
//! `IP_MULTICAST_TTL`), to the group's MAC (RFC 1112 §6.4), never through ARP. When
//! that interface is in the group, a copy is also delivered to the host's own sockets,
//! through the loopback queue (`IP_MULTICAST_LOOP`, on by default as in Linux and as
//! RFC 1112 §6.1 recommends).

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::igmp::{self, GroupRecord, RecordType, Records};
use impnet_wire::ipv4::{self, Protocol};

use crate::iface::IfaceId;
use crate::igmp::{IfaceGroups, Owed, Query};
use crate::stack::ip::OutputError;
use crate::stack::ipv4::OutputRoute;
use crate::stack::{Outgoing, Stack};
use crate::time::Instant;
use crate::udp::{UdpError, UdpHandle};

impl Stack {
    /// The multicast state of `iface`, if it has any.
    fn groups(&self, iface: IfaceId) -> Option<&IfaceGroups> {
        self.igmp.get(iface.index())
    }

    /// The multicast state of `iface`, made on first use.
    fn groups_mut(&mut self, iface: IfaceId) -> &mut IfaceGroups {
        if self.igmp.len() <= iface.index() {
            self.igmp
                .resize_with(iface.index() + 1, IfaceGroups::default);
        }
        &mut self.igmp[iface.index()]
    }

    /// The interface a membership is on: the one with address `local`, or for
    /// 0.0.0.0 the one the route to `group` leaves by, else the first with an
    /// address (Linux's `imr_interface` rule).
    fn multicast_iface(&self, group: Ipv4Addr, local: Ipv4Addr) -> Result<IfaceId, UdpError> {
        if !local.is_unspecified() {
            let position = self.ifaces.iter().position(|i| i.has_addr(local));
            return position
                .map(|p| IfaceId(p as u32))
                .ok_or(UdpError::AddrNotAvailable);
        }
        if let Some(route) = self.routes.lookup(group) {
            return Ok(route.iface);
        }
        self.ifaces
            .iter()
            .position(|i| !i.addrs.is_empty())
            .map(|p| IfaceId(p as u32))
            .ok_or(UdpError::NoRoute)
    }

    /// The checks a join and a leave share: the socket exists, `group` is multicast,
    /// and the interface `interface` names (see [`Stack::udp_join_multicast_v4`]).
    fn membership_iface(
        &self,
        handle: UdpHandle,
        group: Ipv4Addr,
        interface: Ipv4Addr,
    ) -> Result<IfaceId, UdpError> {
        self.udp.get(handle)?;
        if !group.is_multicast() {
            return Err(UdpError::InvalidGroup);
        }
        self.multicast_iface(group, interface)
    }

    /// Join `group` on the interface with address `interface` (0.0.0.0: chosen by
    /// route, see [`crate::stack`]'s multicast notes), for the socket `handle`
    /// (`IP_ADD_MEMBERSHIP`): datagrams from every source. The interface's first join
    /// of a group sends an IGMP report at once and another within a second.
    /// `InvalidGroup` when `group` is not multicast, `AddrInUse` when the socket
    /// already joined it there (for every source or for some), `AddrNotAvailable`
    /// when `interface` is not ours.
    pub fn udp_join_multicast_v4(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        group: Ipv4Addr,
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        self.udp_join(now, handle, (group, None), interface)
    }

    /// Leave `group` on the interface with address `interface`, for `handle`
    /// (`IP_DROP_MEMBERSHIP`; with its sources, if it joined some); the last socket to
    /// leave makes the interface leave, which reports it. `AddrNotAvailable` when the
    /// socket had not joined it.
    pub fn udp_leave_multicast_v4(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        group: Ipv4Addr,
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        self.udp_leave(now, handle, (group, None), interface)
    }

    /// Take datagrams to `group` from `source` on the interface with address
    /// `interface` (`IP_ADD_SOURCE_MEMBERSHIP`, source-specific multicast, RFC 4607):
    /// the socket's filter for the group is INCLUDE of the sources so joined, and
    /// only their datagrams reach it; the interface reports its new sources (IGMPv3
    /// ALLOW_NEW_SOURCES, or a filter-mode change). `AddrInUse` when the socket
    /// joined the group for every source, or this source already; `InvalidGroup` and
    /// `AddrNotAvailable` as [`Stack::udp_join_multicast_v4`].
    pub fn udp_join_source_multicast_v4(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        (group, source): (Ipv4Addr, Ipv4Addr),
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        if source.is_multicast() || source.is_unspecified() || source.is_broadcast() {
            return Err(UdpError::AddrNotAvailable);
        }
        self.udp_join(now, handle, (group, Some(source)), interface)
    }

    /// Stop taking `group`'s datagrams from `source` (`IP_DROP_SOURCE_MEMBERSHIP`);
    /// the socket's last source going ends its membership. `AddrNotAvailable` when it
    /// had not joined that source.
    pub fn udp_leave_source_multicast_v4(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        (group, source): (Ipv4Addr, Ipv4Addr),
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        self.udp_leave(now, handle, (group, Some(source)), interface)
    }

    fn udp_join(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        (group, source): (Ipv4Addr, Option<Ipv4Addr>),
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        let iface = self.membership_iface(handle, group, interface)?;
        let changed = self
            .groups_mut(iface)
            .join(now, group, handle, source)
            .ok_or(UdpError::AddrInUse)?;
        if changed {
            self.run_igmp(now);
        }
        Ok(())
    }

    fn udp_leave(
        &mut self,
        now: Instant,
        handle: UdpHandle,
        (group, source): (Ipv4Addr, Option<Ipv4Addr>),
        interface: Ipv4Addr,
    ) -> Result<(), UdpError> {
        let iface = self.membership_iface(handle, group, interface)?;
        let changed = self
            .groups_mut(iface)
            .leave(now, group, handle, source)
            .ok_or(UdpError::AddrNotAvailable)?;
        if changed {
            self.run_igmp(now);
        }
        Ok(())
    }

    /// Set the TTL of the socket's datagrams to multicast groups (`IP_MULTICAST_TTL`;
    /// default 1, RFC 1112 §6.1: "by default ... a time-to-live of 1").
    pub fn udp_set_multicast_ttl_v4(&mut self, handle: UdpHandle, ttl: u8) -> Result<(), UdpError> {
        self.udp.get_mut(handle)?.multicast_ttl = ttl;
        Ok(())
    }

    /// The TTL of the socket's datagrams to multicast groups.
    pub fn udp_multicast_ttl_v4(&self, handle: UdpHandle) -> Result<u8, UdpError> {
        self.udp.get(handle).map(|s| s.multicast_ttl)
    }

    /// Deliver the socket's datagrams to IPv4 groups to this host's own members too
    /// (`IP_MULTICAST_LOOP`; default on).
    pub fn udp_set_multicast_loop_v4(
        &mut self,
        handle: UdpHandle,
        on: bool,
    ) -> Result<(), UdpError> {
        self.udp.get_mut(handle)?.multicast_loop = on;
        Ok(())
    }

    /// Whether the socket's datagrams to IPv4 groups loop back to this host.
    pub fn udp_multicast_loop_v4(&self, handle: UdpHandle) -> Result<bool, UdpError> {
        self.udp.get(handle).map(|s| s.multicast_loop)
    }

    /// Some interface takes `group`'s datagrams from `source` (what a looped
    /// datagram needs).
    pub(crate) fn admitted_anywhere_v4(&self, group: Ipv4Addr, source: Ipv4Addr) -> bool {
        (0..self.ifaces.len()).any(|i| self.admits_v4(IfaceId(i as u32), group, source))
    }

    /// The IPv4 groups `iface` is in: 224.0.0.1 (always, RFC 1112 §4) and every group
    /// a socket joined there, in the order joined.
    pub fn ipv4_multicast_groups(&self, iface: IfaceId) -> Vec<Ipv4Addr> {
        let joined = self
            .groups(iface)
            .map(|g| g.groups.as_slice())
            .unwrap_or_default();
        core::iter::once(igmp::ALL_SYSTEMS)
            .chain(joined.iter().map(|m| m.group))
            .collect()
    }

    /// The socket `handle` closes: it leaves every group it held.
    pub(crate) fn igmp_socket_closed(&mut self, handle: UdpHandle) {
        // No clock here: the reports of groups left are due at once (time zero), so
        // the next `handle_timeout` sends them.
        let due = Instant::from_nanos(0);
        for state in &mut self.igmp {
            for group in state.held_by(handle) {
                state.leave(due, group, handle, None);
            }
        }
    }

    /// True when a frame to `mac` may be for us: not an IPv4 multicast MAC, or the
    /// MAC of a group `iface` is in (RFC 1112 §6.4: 01:00:5e and the low 23 bits).
    pub(crate) fn igmp_accepts(&self, iface: IfaceId, mac: ethernet::Address) -> bool {
        if mac.0[..3] != [0x01, 0x00, 0x5e] {
            return true;
        }
        let joined = self
            .groups(iface)
            .map(|g| g.groups.as_slice())
            .unwrap_or_default();
        core::iter::once(igmp::ALL_SYSTEMS)
            .chain(joined.iter().map(|m| m.group))
            .any(|g| igmp::multicast_mac(g) == mac.0)
    }

    /// True when `iface` is in `group`.
    pub(crate) fn is_member_v4(&self, iface: IfaceId, group: Ipv4Addr) -> bool {
        group == igmp::ALL_SYSTEMS || self.groups(iface).is_some_and(|g| g.is_member(group))
    }

    /// True when `iface` takes `group`'s datagrams from `source` (its state for the
    /// group, RFC 3376 §3.2: EXCLUDE of nothing, or INCLUDE with `source`).
    pub(crate) fn admits_v4(&self, iface: IfaceId, group: Ipv4Addr, source: Ipv4Addr) -> bool {
        group == igmp::ALL_SYSTEMS || self.groups(iface).is_some_and(|g| g.admits(group, source))
    }

    /// True when the socket `handle` takes `group`'s datagrams from `source`: it holds
    /// the group with a filter admitting it on some interface, or holds it nowhere
    /// (Linux's `IP_MULTICAST_ALL`: the datagram goes to the port's socket).
    pub(crate) fn socket_admits_v4(
        &self,
        handle: UdpHandle,
        group: Ipv4Addr,
        source: Ipv4Addr,
    ) -> bool {
        let mut filters = self
            .igmp
            .iter()
            .filter_map(|g| g.filter_of(group, handle))
            .peekable();
        filters.peek().is_none() || filters.any(|f| f.admits(source))
    }

    /// The route of a datagram to `group`: out of the interface of `src` when given,
    /// else as [`Stack::multicast_iface`] picks; the next hop is the group itself.
    pub(crate) fn route_multicast(
        &self,
        group: Ipv4Addr,
        src: Option<Ipv4Addr>,
    ) -> Result<OutputRoute, OutputError> {
        let iface = self
            .multicast_iface(group, src.unwrap_or(Ipv4Addr::UNSPECIFIED))
            .map_err(|e| match e {
                UdpError::AddrNotAvailable => OutputError::AddrNotAvailable,
                _ => OutputError::NoRoute,
            })?;
        let interface = self.ifaces.get(iface.index()).ok_or(OutputError::NoRoute)?;
        let src = match src {
            Some(src) => src,
            None => interface
                .source_for(group)
                .ok_or(OutputError::NoSourceAddress)?,
        };
        Ok(OutputRoute {
            iface,
            next_hop: group,
            src,
            mtu: interface.mtu,
        })
    }

    /// An IGMP message arrived on `iface` (to a group it is in): queries are
    /// answered; other hosts' reports need nothing from us (no IGMPv2 report
    /// suppression).
    pub(crate) fn handle_igmp(
        &mut self,
        now: Instant,
        iface: IfaceId,
        packet: &ipv4::Packet<&[u8]>,
    ) {
        self.stats.igmp.rx_messages += 1;
        let parsed = igmp::Packet::new_checked(packet.payload()).and_then(|p| {
            igmp::Repr::parse(&p).map(|r| match r {
                igmp::Repr::Query {
                    max_resp_code,
                    group,
                    v3,
                } => Ok((
                    max_resp_code,
                    group,
                    v3.map(|q| q.sources.iter().collect::<Vec<_>>()),
                )),
                igmp::Repr::ReportV1 { group } | igmp::Repr::ReportV2 { group } => Err(Some(group)),
                _ => Err(None),
            })
        });
        match parsed {
            Err(_) => self.stats.igmp.rx_malformed += 1,
            Ok(Err(old_report)) => {
                self.stats.igmp.rx_reports += 1;
                if let Some(group) = old_report {
                    self.igmp_heard_report(now, iface, group);
                }
            }
            Ok(Ok(query)) => self.igmp_query(now, iface, query),
        }
    }

    /// Another host's IGMPv1/v2 report of `group` (see [`IfaceGroups::handle_report`]).
    fn igmp_heard_report(&mut self, now: Instant, iface: IfaceId, group: Ipv4Addr) {
        if self.groups_mut(iface).handle_report(now, group) {
            self.stats.igmp.reports_suppressed += 1;
        }
    }

    /// A Membership Query (see [`IfaceGroups::handle_query`]).
    fn igmp_query(&mut self, now: Instant, iface: IfaceId, query: Query) {
        self.stats.igmp.queries_received += 1;
        self.groups_mut(iface);
        self.igmp[iface.index()].handle_query(now, &mut self.rng, query);
    }

    /// Send the IGMP messages due at `now` on every interface.
    pub(crate) fn run_igmp(&mut self, now: Instant) {
        for index in 0..self.igmp.len() {
            let iface = IfaceId(index as u32);
            for owed in self.igmp[index].poll_owed(now, &mut self.rng) {
                match owed {
                    Owed::Old { dst, repr } => self.send_igmp(iface, dst, &repr),
                    Owed::ReportV3(records) => self.send_report_v3(iface, &records),
                }
            }
        }
    }

    /// An IGMPv3 report of `records` (each its type, group and sources) to
    /// 224.0.0.22 (nothing when there are none).
    fn send_report_v3(
        &mut self,
        iface: IfaceId,
        records: &[(RecordType, Ipv4Addr, Vec<Ipv4Addr>)],
    ) {
        if records.is_empty() {
            return;
        }
        let records: Vec<GroupRecord<'_>> = records
            .iter()
            .map(|(record_type, group, sources)| GroupRecord {
                record_type: *record_type,
                group: *group,
                sources: igmp::Addresses::List(sources),
            })
            .collect();
        let repr = igmp::Repr::ReportV3 {
            records: Records::List(&records),
        };
        self.send_igmp(iface, igmp::ALL_V3_ROUTERS, &repr);
    }

    /// One IGMP message to `dst` on `iface`: TTL 1 with a Router Alert option (RFC
    /// 3376 §4, RFC 2236 §2), from the interface's first address (0.0.0.0 before it
    /// has one, RFC 3376 §4.2.13), DSCP CS6 as Linux sends it.
    fn send_igmp(&mut self, iface: IfaceId, dst: Ipv4Addr, repr: &igmp::Repr<'_>) {
        let Some(interface) = self.ifaces.get(iface.index()) else {
            return;
        };
        let src = interface
            .addrs
            .first()
            .map_or(Ipv4Addr::UNSPECIFIED, |c| c.address);
        let ident = self.next_ident();
        let mut header = self.ip_header(src, dst, Protocol::Igmp, repr.buffer_len(), ident, true);
        header.ttl = 1;
        header.dscp = 0x30;
        header.options = &igmp::ROUTER_ALERT;
        let mut packet = self.pool.take();
        packet.resize(header.buffer_len(), 0);
        header.emit(&mut ipv4::Packet::new_unchecked(&mut packet[..]));
        let message = &mut packet[header.header_len()..];
        repr.emit(&mut igmp::Packet::new_unchecked(message));
        self.stats.ipv4.tx_packets += 1;
        let sent = self.enqueue_frame(Outgoing {
            iface,
            dst_mac: ethernet::Address(igmp::multicast_mac(dst)),
            ethertype: EtherType::Ipv4,
            payload: packet,
            gso_size: 0,
        });
        if sent.is_ok() {
            match repr {
                igmp::Repr::Leave { .. } => self.stats.igmp.leaves_sent += 1,
                _ => self.stats.igmp.reports_sent += 1,
            }
        }
    }

    /// The earliest IGMP message owed on any interface.
    pub(crate) fn poll_timeout_igmp(&self) -> Option<Instant> {
        (self.igmp.iter()).fold(None, |next, groups| {
            Instant::earliest(next, groups.poll_timeout())
        })
    }
}
