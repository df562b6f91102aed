//! IPv4 multicast group membership of one interface and its IGMP host state (RFC 3376
//! §5 and §7, IGMPv3 with IGMPv2 and IGMPv1 compatibility): the groups sockets joined
//! (each with the sockets that hold it and their source filters, §3), the state-change
//! reports still to send, each sent [`ROBUSTNESS`] times, the answers owed to queries,
//! and whether an IGMPv1/v2 querier was heard lately (then reports are IGMPv2 reports
//! and leaves, or under an IGMPv1 querier IGMPv1 reports and no leaves, RFC 3376
//! §7.2.1). The host side is here too: what a query or another host's report changes,
//! and the messages owed at a given time ([`IfaceGroups::poll_owed`]), which the stack
//! addresses and sends. Times are drawn from the generator the stack passes in.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::igmp::{self as wire, RecordType};

use crate::rng::Rng;
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
/// The most sources a pending answer to Group-and-Source-Specific Queries lists (a
/// query carries at most some 370 in a 1500-byte frame); past it, the answer is about
/// the whole group.
const MAX_QUERIED_SOURCES: usize = 512;

/// What one socket takes of a group (RFC 3376 §3.1's socket state): every source
/// (`IP_ADD_MEMBERSHIP`, EXCLUDE of nothing) or only these (`IP_ADD_SOURCE_MEMBERSHIP`,
/// INCLUDE; never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Filter {
    Any,
    Only(Vec<Ipv4Addr>),
}

impl Filter {
    pub(crate) fn admits(&self, source: Ipv4Addr) -> bool {
        match self {
            Filter::Any => true,
            Filter::Only(sources) => sources.contains(&source),
        }
    }
}

/// An interface's reception state for a group (RFC 3376 §3.2): EXCLUDE of nothing when
/// any socket takes every source, else INCLUDE of the union of the sockets' sources
/// (INCLUDE of nothing: not a member).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IfaceState {
    Exclude,
    Include(Vec<Ipv4Addr>),
}

impl IfaceState {
    pub(crate) const NONE: IfaceState = IfaceState::Include(Vec::new());

    pub(crate) fn admits(&self, source: Ipv4Addr) -> bool {
        match self {
            IfaceState::Exclude => true,
            IfaceState::Include(sources) => sources.contains(&source),
        }
    }
}

/// A group joined on an interface and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Membership {
    pub(crate) group: Ipv4Addr,
    /// The sockets that joined it, each with its filter; the interface leaves the
    /// group when the last one leaves or closes. Invariant: never empty.
    pub(crate) holders: Vec<(UdpHandle, Filter)>,
}

impl Membership {
    /// The interface's state for the group from its holders' filters (RFC 3376 §3.2).
    pub(crate) fn state(&self) -> IfaceState {
        let mut sources = Vec::new();
        for (_, filter) in &self.holders {
            match filter {
                Filter::Any => return IfaceState::Exclude,
                Filter::Only(list) => {
                    for s in list {
                        if !sources.contains(s) {
                            sources.push(*s);
                        }
                    }
                }
            }
        }
        IfaceState::Include(sources)
    }
}

/// A group's reception state changed from `from` (what the reports had said) to `to`,
/// with the reports of it still to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) group: Ipv4Addr,
    pub(crate) from: IfaceState,
    pub(crate) to: IfaceState,
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
    /// Groups left out of that answer: another host reported them meanwhile (IGMPv2
    /// report suppression, RFC 2236 §3).
    pub(crate) suppressed: Vec<Ipv4Addr>,
    /// Answers owed to Group-Specific (`None`) and Group-and-Source-Specific Queries:
    /// the group, when, and the sources asked about.
    pub(crate) group_due: Vec<(Ipv4Addr, Instant, Option<Vec<Ipv4Addr>>)>,
    /// IGMPv2 compatibility mode until then: an IGMPv1 or v2 query was heard (RFC 3376
    /// §7.2.1). None: IGMPv3.
    pub(crate) older_querier_until: Option<Instant>,
    /// IGMPv1 compatibility until then (an IGMPv1 query was heard): reports are v1
    /// reports, and leaves are not sent (RFC 3376 §7.2.1, §7.3.2).
    pub(crate) v1_querier_until: Option<Instant>,
}

impl IfaceGroups {
    /// True when the interface is in `group` (224.0.0.1 always).
    pub(crate) fn is_member(&self, group: Ipv4Addr) -> bool {
        group == impnet_wire::igmp::ALL_SYSTEMS || self.groups.iter().any(|m| m.group == group)
    }

    /// The interface's state for `group` (INCLUDE of nothing when not joined).
    pub(crate) fn state(&self, group: Ipv4Addr) -> IfaceState {
        if group == impnet_wire::igmp::ALL_SYSTEMS {
            return IfaceState::Exclude;
        }
        self.groups
            .iter()
            .find(|m| m.group == group)
            .map_or(IfaceState::NONE, Membership::state)
    }

    /// True when the interface takes `group`'s datagrams from `source`: what
    /// [`IfaceGroups::state`] admits, without building it (a test per datagram).
    pub(crate) fn admits(&self, group: Ipv4Addr, source: Ipv4Addr) -> bool {
        group == impnet_wire::igmp::ALL_SYSTEMS
            || self
                .groups
                .iter()
                .any(|m| m.group == group && m.holders.iter().any(|(_, f)| f.admits(source)))
    }

    /// The filter `holder` holds `group` with here, if it holds it.
    pub(crate) fn filter_of(&self, group: Ipv4Addr, holder: UdpHandle) -> Option<&Filter> {
        let membership = self.groups.iter().find(|m| m.group == group)?;
        membership
            .holders
            .iter()
            .find(|(h, _)| *h == holder)
            .map(|(_, f)| f)
    }

    /// True while reports are IGMPv2 ones (an older querier heard before `now`).
    pub(crate) fn v2_mode(&self, now: Instant) -> bool {
        self.older_querier_until.is_some_and(|t| t > now)
    }

    /// True while reports are IGMPv1 ones (an IGMPv1 query heard before `now`).
    pub(crate) fn v1_mode(&self, now: Instant) -> bool {
        self.v1_querier_until.is_some_and(|t| t > now)
    }

    /// The report of `group` in compatibility mode: v1 under an IGMPv1 querier, else v2.
    pub(crate) fn old_report(&self, now: Instant, group: Ipv4Addr) -> wire::Repr<'static> {
        if self.v1_mode(now) {
            wire::Repr::ReportV1 { group }
        } else {
            wire::Repr::ReportV2 { group }
        }
    }

    /// `holder` joins `group` for every source (`source` None) or adds `source` to
    /// its INCLUDE filter. None (and no change) when it already holds the group that
    /// way, or holds it the other way (a filter mode is changed by leaving first);
    /// else whether the interface's state changed (then a report is owed).
    pub(crate) fn join(
        &mut self,
        now: Instant,
        group: Ipv4Addr,
        holder: UdpHandle,
        source: Option<Ipv4Addr>,
    ) -> Option<bool> {
        let before = self.state(group);
        match self.groups.iter_mut().find(|m| m.group == group) {
            Some(m) => match (m.holders.iter_mut().find(|(h, _)| *h == holder), source) {
                (None, None) => m.holders.push((holder, Filter::Any)),
                (None, Some(s)) => m.holders.push((holder, Filter::Only(alloc::vec![s]))),
                (Some((_, Filter::Only(list))), Some(s)) if !list.contains(&s) => list.push(s),
                (Some(_), _) => return None,
            },
            None => {
                let filter = source.map_or(Filter::Any, |s| Filter::Only(alloc::vec![s]));
                self.groups.push(Membership {
                    group,
                    holders: alloc::vec![(holder, filter)],
                });
            }
        }
        Some(self.changed(now, group, before))
    }

    /// `holder` leaves `group` (`source` None: whatever its filter) or drops `source`
    /// from its INCLUDE filter (the last source going ends its hold). None when it
    /// did not hold it so; else whether the interface's state changed.
    pub(crate) fn leave(
        &mut self,
        now: Instant,
        group: Ipv4Addr,
        holder: UdpHandle,
        source: Option<Ipv4Addr>,
    ) -> Option<bool> {
        let before = self.state(group);
        let index = self.groups.iter().position(|m| m.group == group)?;
        let membership = &mut self.groups[index];
        let at = membership.holders.iter().position(|(h, _)| *h == holder)?;
        match (&mut membership.holders[at].1, source) {
            (_, None) => {
                membership.holders.remove(at);
            }
            (Filter::Only(list), Some(s)) if list.contains(&s) => {
                list.retain(|x| *x != s);
                if list.is_empty() {
                    membership.holders.remove(at);
                }
            }
            _ => return None,
        }
        if membership.holders.is_empty() {
            self.groups.remove(index);
        }
        Some(self.changed(now, group, before))
    }

    /// The groups `holder` holds.
    pub(crate) fn held_by(&self, holder: UdpHandle) -> Vec<Ipv4Addr> {
        self.groups
            .iter()
            .filter(|m| m.holders.iter().any(|(h, _)| *h == holder))
            .map(|m| m.group)
            .collect()
    }

    /// After a join or leave: when `group`'s state is no longer `before`, its reports
    /// start at `now` (true). A change still pending for the group is merged: the new
    /// one reports from what the reports had said (the pending change's start, or its
    /// end once it was sent). Groups of the 224.0.0.0/24 local control block are never
    /// reported (RFC 3376 §5 names 224.0.0.1; Linux keeps quiet about all of them).
    fn changed(&mut self, now: Instant, group: Ipv4Addr, before: IfaceState) -> bool {
        let after = self.state(group);
        if after == before {
            return false;
        }
        if after == IfaceState::NONE {
            self.group_due.retain(|(g, _, _)| *g != group);
        }
        if is_local_control(group) {
            return true;
        }
        let from = match self.changes.iter().position(|c| c.group == group) {
            Some(i) => {
                let pending = self.changes.remove(i);
                if pending.left < ROBUSTNESS {
                    pending.to
                } else {
                    pending.from
                }
            }
            None => before,
        };
        if from != after {
            self.changes.push(Change {
                group,
                from,
                to: after,
                left: ROBUSTNESS,
            });
            self.next_change = Some(self.next_change.map_or(now, |t| t.min(now)));
        }
        true
    }

    /// A General Query asked for an answer by `at`: the sooner of the pending one and
    /// `at` (RFC 3376 §5.2, rule 1).
    pub(crate) fn general_query(&mut self, at: Instant) {
        if self.general_due.is_none() {
            // A new query starts a timer for every group, suppressed ones included.
            self.suppressed.clear();
        }
        self.general_due = Some(self.general_due.map_or(at, |t| t.min(at)));
    }

    /// Cancel the pending answer about `group` (another host reported it, RFC 2236
    /// §3); true when one was pending.
    pub(crate) fn suppress(&mut self, group: Ipv4Addr) -> bool {
        let before = self.group_due.len();
        self.group_due.retain(|(g, _, _)| *g != group);
        let mut cancelled = self.group_due.len() != before;
        if self.general_due.is_some() && !self.suppressed.contains(&group) {
            self.suppressed.push(group);
            cancelled = true;
        }
        cancelled
    }

    /// A Group-Specific Query (`sources` None) or a Group-and-Source-Specific one for
    /// a group we are in, answered at `at` (or sooner). A pending answer about the
    /// whole group stays one; source lists pile up (RFC 3376 §5.2, rules 3-5).
    pub(crate) fn group_query(
        &mut self,
        group: Ipv4Addr,
        at: Instant,
        sources: Option<Vec<Ipv4Addr>>,
    ) {
        match self.group_due.iter_mut().find(|(g, _, _)| *g == group) {
            Some((_, due, asked)) => {
                *due = (*due).min(at);
                let merged = match (asked.take(), sources) {
                    (Some(mut list), Some(more)) => {
                        for s in more {
                            if !list.contains(&s) {
                                list.push(s);
                            }
                        }
                        // Queries about ever more sources cannot grow the list without
                        // bound: past the cap, the answer is about the whole group.
                        (list.len() <= MAX_QUERIED_SOURCES).then_some(list)
                    }
                    _ => None,
                };
                *asked = merged;
            }
            None => {
                let sources = sources.filter(|list| list.len() <= MAX_QUERIED_SOURCES);
                self.group_due.push((group, at, sources));
            }
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
        let groups =
            (self.group_due.iter()).fold(None, |next, (_, t, _)| Instant::earliest(next, Some(*t)));
        let next = Instant::earliest(self.next_change, self.general_due);
        Instant::earliest(next, groups)
    }
}

/// An IGMP message the host owes on an interface: what it says and, for the old
/// versions, where it goes (the stack adds the IP header and sends it).
#[derive(Debug)]
pub(crate) enum Owed {
    /// In compatibility mode: an IGMPv1 or v2 report (to its group) or a Leave Group
    /// (to 224.0.0.2).
    Old {
        /// The destination address.
        dst: Ipv4Addr,
        /// The message.
        repr: wire::Repr<'static>,
    },
    /// One IGMPv3 report of these records (never none), to 224.0.0.22: each its type,
    /// group and sources.
    ReportV3(Vec<(RecordType, Ipv4Addr, Vec<Ipv4Addr>)>),
}

/// A Membership Query as the host reads it: Max Resp Code, the group asked about
/// (0.0.0.0 for a General Query), and for an IGMPv3 query its sources.
pub(crate) type Query = (u8, Ipv4Addr, Option<Vec<Ipv4Addr>>);

/// The IGMP host side (RFC 3376 §5, §7): what a query or another host's report
/// changes, and the messages owed at `now`.
impl IfaceGroups {
    /// Another host's IGMPv1/v2 report of `group`: in compatibility mode, our own
    /// pending answer for the group is cancelled (RFC 2236 §3: "If the host receives
    /// another host's Report ... while it has a timer running, it stops its timer for
    /// the specified group and does not send a Report"). IGMPv3 hosts do not suppress
    /// (RFC 3376 §5.2). True when an answer was cancelled.
    pub(crate) fn handle_report(&mut self, now: Instant, group: Ipv4Addr) -> bool {
        if !self.v2_mode(now) || !self.reported().any(|g| g == group) {
            return false;
        }
        self.suppress(group)
    }

    /// A Membership Query: an answer is scheduled within its Max Resp Time, at a
    /// time drawn from `rng` (RFC 3376 §5.2); one of IGMPv1 or v2 starts the
    /// compatibility mode (§7.2.1).
    pub(crate) fn handle_query(&mut self, now: Instant, rng: &mut Rng, query: Query) {
        let (code, group, v3_sources) = query;
        let v3 = v3_sources.is_some();
        // RFC 3376 §7.1: an 8-byte query with Max Resp Code 0 is IGMPv1, whose
        // hosts wait up to 10 seconds (RFC 2236 §4: "100 (10 seconds)").
        let tenths = match (v3, code) {
            (false, 0) => 100,
            _ => wire::max_resp_tenths(code, v3),
        };
        let delay = u64::from(rng.in_range(0, tenths.saturating_mul(100)));
        let at = now + Duration::from_millis(delay);
        if !v3 {
            // RFC 3376 §7.2.1: "the host MUST ... set the Older Version Querier
            // Present timer" on hearing an older query (an IGMPv1 one: Max Resp 0).
            self.older_querier_until = Some(now + OLDER_QUERIER_TIMEOUT);
            if code == 0 {
                self.v1_querier_until = Some(now + OLDER_QUERIER_TIMEOUT);
            }
        }
        if group.is_unspecified() {
            self.general_query(at);
        } else if self.reported().any(|g| g == group) {
            // A Group-and-Source-Specific Query names sources (RFC 3376 §4.1.8).
            let sources = v3_sources.filter(|list| !list.is_empty());
            self.group_query(group, at, sources);
        }
    }

    /// The messages due at `now`, in the order to send them: the state-change
    /// report first, then the answers to queries. `rng` draws when the next
    /// state-change report is due.
    pub(crate) fn poll_owed(&mut self, now: Instant, rng: &mut Rng) -> Vec<Owed> {
        let mut owed = Vec::new();
        self.state_changes(now, rng, &mut owed);
        self.query_answers(now, &mut owed);
        owed
    }

    /// The state-change report, if due: each pending change once more, in one IGMPv3
    /// report, or in compatibility mode an IGMPv2 report to each group joined and a
    /// Leave Group to 224.0.0.2 for each left (RFC 2236 §3); another follows within
    /// the Unsolicited Report Interval while any has reports left (RFC 3376 §5.1).
    fn state_changes(&mut self, now: Instant, rng: &mut Rng, owed: &mut Vec<Owed>) {
        if self.next_change.is_none_or(|t| t > now) {
            return;
        }
        let changes = self.changes.clone();
        for change in &mut self.changes {
            change.left = change.left.saturating_sub(1);
        }
        self.changes.retain(|c| c.left > 0);
        let more = !self.changes.is_empty();
        let gap = UNSOLICITED_REPORT_INTERVAL.as_millis() as u32;
        let delay = u64::from(rng.in_range(1, gap));
        self.next_change = more.then(|| now + Duration::from_millis(delay));
        if self.v2_mode(now) {
            // RFC 3376 §7.3.2: a group still received is a join, one left a leave
            // (none under an IGMPv1 querier, which has no leave message).
            let v1 = self.v1_mode(now);
            for change in changes {
                let group = change.group;
                if change.to != IfaceState::NONE {
                    let repr = self.old_report(now, group);
                    owed.push(Owed::Old { dst: group, repr });
                } else if !v1 {
                    let repr = wire::Repr::Leave { group };
                    owed.push(Owed::Old {
                        dst: wire::ALL_ROUTERS,
                        repr,
                    });
                }
            }
            return;
        }
        let records: Vec<_> = changes.iter().flat_map(change_records).collect();
        if !records.is_empty() {
            owed.push(Owed::ReportV3(records));
        }
    }

    /// Answers to queries due at `now`: every group for a General Query, the group
    /// asked about for a Group-Specific one (Current State Records, MODE_IS_EXCLUDE;
    /// in compatibility mode an IGMPv2 report per group, RFC 2236 §3).
    fn query_answers(&mut self, now: Instant, owed: &mut Vec<Owed>) {
        let groups: Vec<Ipv4Addr> = self.reported().collect();
        let mut asked: Vec<(Ipv4Addr, Option<Vec<Ipv4Addr>>)> = Vec::new();
        if self.general_due.is_some_and(|t| t <= now) {
            self.general_due = None;
            self.group_due.clear();
            let suppressed = core::mem::take(&mut self.suppressed);
            asked.extend(
                groups
                    .iter()
                    .filter(|g| !suppressed.contains(g))
                    .map(|g| (*g, None)),
            );
        }
        self.group_due.retain(|(group, due, sources)| {
            if *due <= now {
                asked.push((*group, sources.clone()));
            }
            *due > now
        });
        asked.retain(|(g, _)| groups.contains(g));
        if self.v2_mode(now) {
            for (group, _) in asked {
                let repr = self.old_report(now, group);
                owed.push(Owed::Old { dst: group, repr });
            }
            return;
        }
        // Current-State Records (RFC 3376 §5.2): the group's mode and sources, or
        // for a source-specific query IS_IN of the asked sources it takes.
        let records: Vec<_> = asked
            .into_iter()
            .filter_map(|(group, sources)| match (sources, self.state(group)) {
                (None, IfaceState::Exclude) => Some((RecordType::ModeIsExclude, group, Vec::new())),
                (None, IfaceState::Include(list)) => Some((RecordType::ModeIsInclude, group, list)),
                (Some(queried), current) => {
                    let taken: Vec<Ipv4Addr> =
                        queried.into_iter().filter(|s| current.admits(*s)).collect();
                    (!taken.is_empty()).then_some((RecordType::ModeIsInclude, group, taken))
                }
            })
            .collect();
        if !records.is_empty() {
            owed.push(Owed::ReportV3(records));
        }
    }
}

/// The State-Change Records of one change (RFC 3376 §5.1): INCLUDE to INCLUDE
/// reports the sources allowed and blocked; a filter-mode change is TO_EX or TO_IN
/// with the new sources.
fn change_records(change: &Change) -> Vec<(RecordType, Ipv4Addr, Vec<Ipv4Addr>)> {
    let group = change.group;
    match (&change.from, &change.to) {
        (IfaceState::Include(old), IfaceState::Include(new)) => {
            let allow: Vec<Ipv4Addr> = new.iter().filter(|s| !old.contains(s)).copied().collect();
            let block: Vec<Ipv4Addr> = old.iter().filter(|s| !new.contains(s)).copied().collect();
            [
                (RecordType::AllowNewSources, allow),
                (RecordType::BlockOldSources, block),
            ]
            .into_iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(kind, list)| (kind, group, list))
            .collect()
        }
        (_, IfaceState::Exclude) => alloc::vec![(RecordType::ChangeToExclude, group, Vec::new())],
        (IfaceState::Exclude, IfaceState::Include(new)) => {
            alloc::vec![(RecordType::ChangeToInclude, group, new.clone())]
        }
    }
}

/// True for 224.0.0.0/24, the local network control block (RFC 5771 §4).
pub(crate) fn is_local_control(group: Ipv4Addr) -> bool {
    group.octets()[..3] == [224, 0, 0]
}
