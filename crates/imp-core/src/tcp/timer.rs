//! A connection's timers, as data: one deadline per kind, the next is the minimum.

use crate::time::Instant;

/// The kinds of timers a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// RFC 6298 retransmission timer (also SYN and FIN retransmission).
    Retransmit = 0,
    /// RFC 9293 §3.8.6.3 delayed ACK.
    DelayedAck = 1,
    /// RFC 9293 §3.8.6.1 zero-window probe (persist).
    Persist = 2,
    /// RFC 9293 §3.8.4 / RFC 1122 §4.2.3.6 keep-alive.
    Keepalive = 3,
    /// 2*MSL in TIME-WAIT (RFC 9293 §3.6).
    TimeWait = 4,
    /// RFC 9293 §3.10.8 user timeout: data outstanding this long aborts the connection.
    UserTimeout = 5,
}

impl Timer {
    /// Every kind, in the order they fire when due together.
    pub const ALL: [Timer; 6] = [
        Timer::TimeWait,
        Timer::UserTimeout,
        Timer::Retransmit,
        Timer::Persist,
        Timer::Keepalive,
        Timer::DelayedAck,
    ];
}

/// The deadline table.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timers {
    deadlines: [Option<Instant>; 6],
}

impl Timers {
    /// Arm `timer` for `at` (replacing any earlier setting).
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer as usize] = Some(at);
    }
    /// Arm `timer` for `at` unless it already runs.
    pub fn set_if_idle(&mut self, timer: Timer, at: Instant) {
        let slot = &mut self.deadlines[timer as usize];
        if slot.is_none() {
            *slot = Some(at);
        }
    }
    /// Stop `timer`.
    pub fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = None;
    }
    /// Stop every timer.
    pub fn stop_all(&mut self) {
        self.deadlines = [None; 6];
    }
    /// When `timer` fires, if armed.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer as usize]
    }
    /// Whether `timer` is armed.
    pub fn is_set(&self, timer: Timer) -> bool {
        self.get(timer).is_some()
    }
    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        // A plain loop: this runs after every segment, and the iterator chain did not
        // optimise as well.
        let mut next: Option<Instant> = None;
        for &at in self.deadlines.iter().flatten() {
            if next.is_none_or(|n| at < n) {
                next = Some(at);
            }
        }
        next
    }
    /// The first timer due at `now`, disarmed, or None.
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        let timer = Timer::ALL
            .into_iter()
            .find(|&t| self.get(t).is_some_and(|at| at <= now))?;
        self.stop(timer);
        Some(timer)
    }
}
