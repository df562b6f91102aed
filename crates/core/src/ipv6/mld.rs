//! Multicast Listener Discovery state of one interface (RFC 3810, MLDv2 host side):
//! the state-change reports still to send for groups joined or left, each sent
//! `ROBUSTNESS` times (RFC 3810 §6.1), and the answers owed to queries (§6.2), each
//! at a time drawn by the stack from its seeded generator.

use alloc::vec::Vec;
use core::net::Ipv6Addr;

use impnet_wire::mld::{AddressRecord, Addresses, RecordType};

use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// RFC 3810 §9.1: the Robustness Variable, 2: a state change is reported twice.
pub(crate) const ROBUSTNESS: u8 = 2;
/// RFC 3810 §9.11: Unsolicited Report Interval, 1 second: the most a retransmitted
/// state-change report waits.
pub(crate) const UNSOLICITED_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// The records of one MLDv2 report owed (RFC 3810 §5.2), for the stack to address
/// and send.
pub(crate) type Report = Vec<AddressRecord<'static>>;

/// A group joined (`join`) or left, with the reports of it still to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) group: Ipv6Addr,
    pub(crate) join: bool,
    pub(crate) left: u8,
}

/// One interface's MLD state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mld {
    /// State changes with reports still owed; sent together in one report.
    pub(crate) changes: Vec<Change>,
    /// When the next state-change report goes (None: none owed).
    pub(crate) next_change: Option<Instant>,
    /// When the answer to a General Query goes (a report of every group).
    pub(crate) general_due: Option<Instant>,
    /// Answers owed to Group-Specific Queries: the group and when.
    pub(crate) group_due: Vec<(Ipv6Addr, Instant)>,
}

impl Mld {
    /// Note that `group` was joined or left: its reports start at `now`, replacing a
    /// change of the other kind still pending for it (RFC 3810 §6.1).
    pub(crate) fn change(&mut self, now: Instant, group: Ipv6Addr, join: bool) {
        self.changes.retain(|c| c.group != group);
        self.changes.push(Change {
            group,
            join,
            left: ROBUSTNESS,
        });
        self.next_change = Some(self.next_change.map_or(now, |t| t.min(now)));
        if !join {
            self.group_due.retain(|(g, _)| *g != group);
        }
    }

    /// A General Query asked for an answer within `max_delay`: the sooner of the
    /// pending one and `at` (RFC 3810 §6.2, rule 1).
    pub(crate) fn general_query(&mut self, at: Instant) {
        self.general_due = Some(self.general_due.map_or(at, |t| t.min(at)));
    }

    /// A Group-Specific Query for a group we are in, answered at `at` (or sooner).
    pub(crate) fn group_query(&mut self, group: Ipv6Addr, at: Instant) {
        match self.group_due.iter_mut().find(|(g, _)| *g == group) {
            Some((_, due)) => *due = (*due).min(at),
            None => self.group_due.push((group, at)),
        }
    }

    /// The reports owed at `now` by an interface in `groups`, in the order to send
    /// them: the state-change report, then the answers to queries (each left out
    /// when it has no record).
    pub(crate) fn poll_owed(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        groups: &[Ipv6Addr],
    ) -> Vec<Report> {
        let mut owed = Vec::new();
        if let Some(report) = self.state_changes(now, rng) {
            owed.push(report);
        }
        let answers = self.query_answers(now, groups);
        if !answers.is_empty() {
            owed.push(answers);
        }
        owed
    }

    /// The state-change report, if due: each pending change once more; another
    /// report follows within the Unsolicited Report Interval (drawn from `rng`) while
    /// any has reports left (RFC 3810 §6.1).
    fn state_changes(&mut self, now: Instant, rng: &mut Rng) -> Option<Report> {
        if self.next_change.is_none_or(|t| t > now) {
            return None;
        }
        let records: Report = self
            .changes
            .iter()
            .map(|c| AddressRecord {
                record_type: if c.join {
                    RecordType::ChangeToExclude
                } else {
                    RecordType::ChangeToInclude
                },
                group: c.group,
                sources: Addresses::EMPTY,
            })
            .collect();
        for change in &mut self.changes {
            change.left = change.left.saturating_sub(1);
        }
        self.changes.retain(|c| c.left > 0);
        let more = !self.changes.is_empty();
        let gap = UNSOLICITED_REPORT_INTERVAL.as_millis() as u32;
        let delay = u64::from(rng.in_range(1, gap));
        self.next_change = more.then(|| now + Duration::from_millis(delay));
        (!records.is_empty()).then_some(records)
    }

    /// Answers to queries due at `now` from an interface in `groups`: every group for
    /// a General Query, the group asked about for a Group-Specific one (Current State
    /// Records, MODE_IS_EXCLUDE, RFC 3810 §6.2).
    fn query_answers(&mut self, now: Instant, groups: &[Ipv6Addr]) -> Report {
        let mut asked: Vec<Ipv6Addr> = Vec::new();
        if self.general_due.is_some_and(|t| t <= now) {
            self.general_due = None;
            self.group_due.clear();
            asked.extend_from_slice(groups);
        }
        self.group_due.retain(|&(group, due)| {
            if due <= now {
                asked.push(group);
            }
            due > now
        });
        asked
            .into_iter()
            .filter(|g| groups.contains(g))
            .map(|group| AddressRecord {
                record_type: RecordType::ModeIsExclude,
                group,
                sources: Addresses::EMPTY,
            })
            .collect()
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

/// The Maximum Response Delay a query's code stands for (RFC 3810 §5.1.3; MLDv1's
/// field is the delay in milliseconds, the same as a v2 code below 32768).
pub(crate) fn max_response_delay(code: u16) -> Duration {
    let millis = if code < 0x8000 {
        u64::from(code)
    } else {
        let mant = u64::from(code & 0x0fff);
        let exp = u32::from((code >> 12) & 0x7);
        (mant | 0x1000) << (exp + 3)
    };
    Duration::from_millis(millis)
}
