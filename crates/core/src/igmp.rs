//! IPv4 multicast group membership of one interface and its IGMP host state (RFC 3376
//! §5 and §7, IGMPv3 with IGMPv2 compatibility): the groups sockets joined (each
//! with the sockets that hold it), the state-change reports still to send, each sent
//! [`ROBUSTNESS`] times, the answers owed to queries, and whether an IGMPv1/v2
//! querier was heard lately (then reports are IGMPv2 reports and leaves, RFC 3376
//! §7.2.1). Times are drawn by the stack from its seeded generator.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use crate::time::{Duration, Instant};
use crate::udp::UdpHandle;

/// RFC 3376 §8.1: the Robustness Variable, 2: a state change is reported twice.
pub(crate) const ROBUSTNESS: u8 = 2;
/// RFC 3376 §8.11: Unsolicited Report Interval, 1 second: the most a retransmitted
/// state-change report waits.
pub(crate) const UNSOLICITED_REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// RFC 3376 §8.12: Older Version Querier Present Timeout = Robustness Variable x
/// Query Interval (125 s) + Query Response Interval (10 s).
pub(crate) const OLDER_QUERIER_TIMEOUT: Duration = Duration::from_secs(2 * 125 + 10);

/// A group joined on an interface and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Membership {
    pub(crate) group: Ipv4Addr,
    /// The sockets that joined it; the interface leaves the group when the last one
    /// leaves or closes. Invariant: never empty.
    pub(crate) holders: Vec<UdpHandle>,
}

/// A group joined (`join`) or left, with the reports of it still to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) group: Ipv4Addr,
    pub(crate) join: bool,
    pub(crate) left: u8,
}

/// One interface's IPv4 multicast state.
#[derive(Debug, Clone, Default)]
pub(crate) struct IfaceGroups {
    /// The groups joined (224.0.0.1 is implicit, never here).
    pub(crate) groups: Vec<Membership>,
    /// State changes with reports still owed.
    pub(crate) changes: Vec<Change>,
    /// When the next state-change report goes (None: none owed).
    pub(crate) next_change: Option<Instant>,
    /// When the answer to a General Query goes (a report of every group).
    pub(crate) general_due: Option<Instant>,
    /// Answers owed to Group-Specific Queries: the group and when.
    pub(crate) group_due: Vec<(Ipv4Addr, Instant)>,
    /// IGMPv2 compatibility mode until then: an IGMPv1 or v2 query was heard (RFC 3376
    /// §7.2.1). None: IGMPv3.
    pub(crate) older_querier_until: Option<Instant>,
}

impl IfaceGroups {
    /// True when the interface is in `group` (224.0.0.1 always).
    pub(crate) fn is_member(&self, group: Ipv4Addr) -> bool {
        group == impnet_wire::igmp::ALL_SYSTEMS || self.groups.iter().any(|m| m.group == group)
    }

    /// True while reports are IGMPv2 ones (an older querier heard before `now`).
    pub(crate) fn v2_mode(&self, now: Instant) -> bool {
        self.older_querier_until.is_some_and(|t| t > now)
    }

    /// `holder` joins `group`; true when the interface newly joined it. False (and no
    /// change) when `holder` already holds it.
    pub(crate) fn join(
        &mut self,
        now: Instant,
        group: Ipv4Addr,
        holder: UdpHandle,
    ) -> Option<bool> {
        match self.groups.iter_mut().find(|m| m.group == group) {
            Some(m) if m.holders.contains(&holder) => None,
            Some(m) => {
                m.holders.push(holder);
                Some(false)
            }
            None => {
                self.groups.push(Membership {
                    group,
                    holders: alloc::vec![holder],
                });
                self.change(now, group, true);
                Some(true)
            }
        }
    }

    /// `holder` leaves `group`: None when it did not hold it; Some(true) when the
    /// interface left the group (the last holder went).
    pub(crate) fn leave(
        &mut self,
        now: Instant,
        group: Ipv4Addr,
        holder: UdpHandle,
    ) -> Option<bool> {
        let index = self.groups.iter().position(|m| m.group == group)?;
        let membership = &mut self.groups[index];
        let before = membership.holders.len();
        membership.holders.retain(|h| *h != holder);
        if membership.holders.len() == before {
            return None;
        }
        if !membership.holders.is_empty() {
            return Some(false);
        }
        self.groups.remove(index);
        self.change(now, group, false);
        Some(true)
    }

    /// The groups `holder` holds.
    pub(crate) fn held_by(&self, holder: UdpHandle) -> Vec<Ipv4Addr> {
        self.groups
            .iter()
            .filter(|m| m.holders.contains(&holder))
            .map(|m| m.group)
            .collect()
    }

    /// Note that `group` was joined or left: its reports start at `now`, replacing a
    /// change of the other kind still pending for it (RFC 3376 §5.1). Groups of the
    /// 224.0.0.0/24 local control block are never reported (RFC 3376 §5 names
    /// 224.0.0.1; Linux keeps quiet about all of them).
    fn change(&mut self, now: Instant, group: Ipv4Addr, join: bool) {
        if !join {
            self.group_due.retain(|(g, _)| *g != group);
        }
        if is_local_control(group) {
            return;
        }
        self.changes.retain(|c| c.group != group);
        self.changes.push(Change {
            group,
            join,
            left: ROBUSTNESS,
        });
        self.next_change = Some(self.next_change.map_or(now, |t| t.min(now)));
    }

    /// A General Query asked for an answer by `at`: the sooner of the pending one and
    /// `at` (RFC 3376 §5.2, rule 1).
    pub(crate) fn general_query(&mut self, at: Instant) {
        self.general_due = Some(self.general_due.map_or(at, |t| t.min(at)));
    }

    /// A Group-Specific Query for a group we are in, answered at `at` (or sooner).
    pub(crate) fn group_query(&mut self, group: Ipv4Addr, at: Instant) {
        match self.group_due.iter_mut().find(|(g, _)| *g == group) {
            Some((_, due)) => *due = (*due).min(at),
            None => self.group_due.push((group, at)),
        }
    }

    /// The groups a report names: every joined one outside 224.0.0.0/24.
    pub(crate) fn reported(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.groups
            .iter()
            .map(|m| m.group)
            .filter(|g| !is_local_control(*g))
    }

    /// The earliest time something is to be sent.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let groups = self.group_due.iter().map(|(_, t)| *t).min();
        [self.next_change, self.general_due, groups]
            .into_iter()
            .flatten()
            .min()
    }
}

/// True for 224.0.0.0/24, the local network control block (RFC 5771 §4).
pub(crate) fn is_local_control(group: Ipv4Addr) -> bool {
    group.octets()[..3] == [224, 0, 0]
}
