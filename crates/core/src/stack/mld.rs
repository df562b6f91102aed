//! Multicast Listener Discovery on the stack (RFC 3810, the host side; MLDv1 queries
//! of RFC 2710 are answered with MLDv2 reports): the groups an interface is in are
//! all-nodes and the solicited-node group of each of its addresses (all-routers too
//! when it forwards). Joining or leaving one sends a state-change report twice, the
//! second after a delay drawn from the stack's seeded generator within the
//! Unsolicited Report Interval; queries are answered after a delay drawn within their
//! Maximum Response Delay. Frames to a 33:33 MAC of no joined group are dropped.

use alloc::vec::Vec;
use core::net::Ipv6Addr;

use impnet_wire::ethernet;
use impnet_wire::icmpv6;
use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::ipv6ext::{ExtHeader, OptionsRepr};
use impnet_wire::mld::{self, AddressRecord, Records};

use crate::iface::IfaceId;
use crate::ipv6::mld::max_response_delay;
use crate::stack::ip::Meta6;
use crate::stack::{Outgoing, Stack};
use crate::time::{Duration, Instant};

impl Stack {
    /// The groups `iface` reports (and whether it forwards).
    pub(crate) fn mld_groups(&self, iface: IfaceId) -> Vec<Ipv6Addr> {
        let router = self.ifaces.get(iface.index()).is_some_and(|i| i.forwarding);
        self.v6
            .iface(iface)
            .map(|s| s.reported_groups(router))
            .unwrap_or_default()
    }

    /// The groups of `iface` were `before`: report what was joined and left since
    /// (RFC 3810 §6.1), from `now`.
    pub(crate) fn mld_update(&mut self, now: Instant, iface: IfaceId, before: &[Ipv6Addr]) {
        if self.is_ip_medium(iface) {
            return;
        }
        let after = self.mld_groups(iface);
        let state = &mut self.v6.iface_mut(iface).mld;
        for group in after.iter().filter(|g| !before.contains(g)) {
            state.change(now, *group, true);
        }
        for group in before.iter().filter(|g| !after.contains(g)) {
            state.change(now, *group, false);
        }
    }

    /// True when a frame to the multicast MAC `mac` is for a group `iface` is in
    /// (RFC 2464 §7: 33:33 and the group's low 32 bits).
    pub(crate) fn mld_accepts(&self, iface: IfaceId, mac: ethernet::Address) -> bool {
        if mac.0[..2] != [0x33, 0x33] {
            return true;
        }
        let Some(state) = self.v6.iface(iface) else {
            return false;
        };
        let router = self.ifaces.get(iface.index()).is_some_and(|i| i.forwarding);
        [crate::ipv6::ALL_NODES]
            .into_iter()
            .chain(state.reported_groups(router))
            .any(|g| ipv6::multicast_mac(g) == mac)
    }

    /// An MLD message for us: queries are answered; reports of other listeners need
    /// nothing from a host (RFC 3810 §6: no report suppression in MLDv2).
    pub(crate) fn handle_mld(&mut self, now: Instant, meta: &Meta6<'_>, message: &mld::Repr<'_>) {
        let mld::Repr::Query {
            max_response_code,
            group,
            ..
        } = *message
        else {
            return;
        };
        self.stats.ipv6.mld_queries_received += 1;
        // RFC 3810 §5.1.14: "Queries ... with a source address other than link-local
        // MUST be silently discarded"; §5.2.13/§7.4: hop limit 1.
        if !crate::ipv6::is_link_local(meta.src) || meta.hop_limit != 1 {
            self.stats.ipv6.mld_invalid += 1;
            return;
        }
        let max = max_response_delay(max_response_code).as_millis();
        let delay = u64::from(self.rng.in_range(0, u32::try_from(max).unwrap_or(u32::MAX)));
        let at = now + Duration::from_millis(delay);
        let iface = meta.iface;
        if group.is_unspecified() {
            self.v6.iface_mut(iface).mld.general_query(at);
        } else if self.mld_groups(iface).contains(&group) {
            self.v6.iface_mut(iface).mld.group_query(group, at);
        }
    }

    /// Send the MLD reports due at `now` on every interface (see
    /// [`Mld::poll_owed`](crate::ipv6::mld::Mld::poll_owed)).
    pub(crate) fn run_mld(&mut self, now: Instant) {
        for index in 0..self.v6.ifaces.len() {
            let iface = IfaceId(index as u32);
            if self.v6.iface(iface).is_none() || self.is_ip_medium(iface) {
                continue;
            }
            let groups = self.mld_groups(iface);
            let owed = self
                .v6
                .iface_mut(iface)
                .mld
                .poll_owed(now, &mut self.rng, &groups);
            for records in owed {
                self.send_mld_report(iface, &records);
            }
        }
    }

    /// An MLDv2 report to ff02::16 (RFC 3810 §5.2.14): hop limit 1, a hop-by-hop
    /// header with a Router Alert, from our link-local address or, before it is
    /// usable, from `::` (RFC 3590 §4).
    fn send_mld_report(&mut self, iface: IfaceId, records: &[AddressRecord<'_>]) {
        if records.is_empty() {
            return;
        }
        let Some(src) = self
            .v6
            .iface(iface)
            .map(|s| s.link_local().unwrap_or(Ipv6Addr::UNSPECIFIED))
        else {
            return;
        };
        let dst = crate::ipv6::ALL_MLDV2_ROUTERS;
        let repr = icmpv6::Repr::Mld(mld::Repr::ReportV2 {
            records: Records::List(records),
        });
        let hop_by_hop = OptionsRepr {
            next_header: NextHeader::Icmpv6,
            router_alert: Some(0),
        };
        let ext = hop_by_hop.buffer_len();
        let len = ext + repr.buffer_len();
        let mut packet = self.pool.take();
        packet.resize(ipv6::HEADER_LEN + len, 0);
        let header = ipv6::Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: NextHeader::HopByHop,
            payload_len: len,
            hop_limit: 1,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
        };
        header.emit(&mut ipv6::Packet::new_unchecked(&mut packet[..]));
        let (_, rest) = packet.split_at_mut(ipv6::HEADER_LEN);
        let (options, message) = rest.split_at_mut(ext);
        hop_by_hop.emit(&mut ExtHeader::new_unchecked(options));
        repr.emit(&mut icmpv6::Packet::new_unchecked(message), &src, &dst);
        self.stats.ipv6.icmp_tx += 1;
        self.stats.ipv6.tx_packets += 1;
        let sent = self.enqueue_frame(Outgoing {
            iface,
            dst_mac: ipv6::multicast_mac(dst),
            ethertype: ethernet::EtherType::Ipv6,
            payload: packet,
            gso_size: 0,
        });
        if sent.is_ok() {
            self.stats.ipv6.mld_reports_sent += 1;
        }
    }

    /// The earliest MLD report owed on any interface.
    pub(crate) fn poll_timeout_mld(&self) -> Option<Instant> {
        self.v6
            .ifaces
            .iter()
            .filter(|s| s.enabled)
            .filter_map(|s| s.mld.poll_timeout())
            .min()
    }
}
