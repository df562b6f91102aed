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
    /// The ceiling on how long a cork holds a partial segment (200 ms, as Linux's
    /// TCP_CORK: "there is a 200 millisecond ceiling on the time for which output is
    /// corked", tcp(7)).
    Cork = 6,
    /// RFC 8985 §6.3 RACK reorder timer: a segment not yet deemed lost may be when it
    /// fires.
    Reorder = 7,
    /// RFC 8985 §7.2 Tail Loss Probe timeout (PTO).
    LossProbe = 8,
}

/// How many kinds of timers there are.
const KINDS: usize = 9;

impl Timer {
    /// Every kind, in the order they fire when due together.
    pub const ALL: [Timer; KINDS] = [
        Timer::TimeWait,
        Timer::UserTimeout,
        Timer::LossProbe,
        Timer::Retransmit,
        Timer::Reorder,
        Timer::Persist,
        Timer::Keepalive,
        Timer::Cork,
        Timer::DelayedAck,
    ];
}

/// The deadline table, with its minimum kept up to date (the table asks for it after
/// every call into the connection, so it must cost a load, not a scan).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timers {
    deadlines: [Option<Instant>; KINDS],
    /// The earliest of `deadlines`.
    next: Option<Instant>,
}

impl Timers {
    /// Arm `timer` for `at` (replacing any earlier setting).
    pub fn set(&mut self, timer: Timer, at: Instant) {
        let old = self.deadlines[timer as usize].replace(at);
        if self.next.is_none_or(|n| at <= n) {
            self.next = Some(at);
        } else if old == self.next {
            self.next = self.scan();
        }
    }
    /// Arm `timer` for `at` unless it already runs.
    pub fn set_if_idle(&mut self, timer: Timer, at: Instant) {
        if self.deadlines[timer as usize].is_none() {
            self.set(timer, at);
        }
    }
    /// Stop `timer`.
    pub fn stop(&mut self, timer: Timer) {
        let Some(old) = self.deadlines[timer as usize].take() else {
            return;
        };
        if Some(old) == self.next {
            self.next = self.scan();
        }
    }
    /// Stop every timer.
    pub fn stop_all(&mut self) {
        self.deadlines = [None; KINDS];
        self.next = None;
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
        self.next
    }
    fn scan(&self) -> Option<Instant> {
        // Branch-free over the slots: runs on most segments (stopping the
        // earliest timer: the ACK that stops the retransmission timer, the segment
        // that carries a delayed ACK).
        let mut earliest = u64::MAX;
        let mut armed = false;
        for at in self.deadlines {
            earliest = earliest.min(at.map_or(u64::MAX, Instant::as_nanos));
            armed |= at.is_some();
        }
        armed.then_some(Instant::from_nanos(earliest))
    }
    /// The first timer due at `now`, disarmed, or None.
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        if self.next.is_none_or(|n| n > now) {
            return None;
        }
        let timer = Timer::ALL
            .into_iter()
            .find(|&t| self.get(t).is_some_and(|at| at <= now))?;
        self.stop(timer);
        Some(timer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached minimum always equals a scan of the table.
    #[test]
    fn next_is_the_minimum_after_any_change() {
        let mut timers = Timers::default();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..10_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let timer = Timer::ALL[(state % KINDS as u64) as usize];
            let at = Instant::from_nanos((state >> 8) % 64);
            match (state >> 4) % 5 {
                0 => timers.stop(timer),
                1 => timers.set_if_idle(timer, at),
                2 if state.is_multiple_of(97) => timers.stop_all(),
                3 => {
                    let _ = timers.pop_due(at);
                }
                _ => timers.set(timer, at),
            }
            assert_eq!(timers.next(), timers.scan());
        }
    }
}
