//! A connection's timers, as data: one deadline per kind, the next is the minimum.

use alloc::boxed::Box;

use crate::time::Instant;

/// The kinds of timers a connection runs. The first [`COMMON`] (by discriminant) are
/// the ones a busy or closing connection runs, kept in place; the others are rare and
/// live in a table allocated while one of them runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// RFC 6298 retransmission timer (also SYN and FIN retransmission).
    Retransmit = 0,
    /// RFC 9293 §3.8.6.3 delayed ACK.
    DelayedAck = 1,
    /// RFC 8985 §7.2 Tail Loss Probe timeout (PTO).
    LossProbe = 2,
    /// 2*MSL in TIME-WAIT (RFC 9293 §3.6): common, as every connection closed first by
    /// its own end runs it (and TIME-WAIT connections are many).
    TimeWait = 3,
    /// RFC 9293 §3.8.6.1 zero-window probe (persist): common, as a bulk transfer into
    /// a slower reader meets zero windows again and again (in the rare table its
    /// first episode would allocate on the data path).
    Persist = 4,
    /// RFC 9293 §3.8.4 / RFC 1122 §4.2.3.6 keep-alive.
    Keepalive = 5,
    /// RFC 9293 §3.10.8 user timeout: data outstanding this long aborts the connection.
    UserTimeout = 6,
    /// The ceiling on how long a cork holds a partial segment (200 ms, as Linux's
    /// TCP_CORK: "there is a 200 millisecond ceiling on the time for which output is
    /// corked", tcp(7)).
    Cork = 7,
    /// RFC 8985 §6.3 RACK reorder timer: a segment not yet deemed lost may be when it
    /// fires.
    Reorder = 8,
    /// Pacing: the next data segment may leave at this time (`pacing.rs`). Rare: only
    /// a paced connection (BBR, or `TcpConfig::pacing`) runs it, and its table, made on
    /// the first, stays until the connection stops its timers (8 bytes less in every
    /// connection).
    Pace = 9,
}

/// How many kinds of timers there are.
const KINDS: usize = 10;
/// How many are kept in place (discriminants `0..COMMON`).
const COMMON: usize = 5;
/// How many are kept in the rare table.
const RARE: usize = KINDS - COMMON;

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
        Timer::Pace,
        Timer::DelayedAck,
    ];
}

/// No deadline: the slot's timer is not armed (`u64::MAX` nanoseconds, some 584 years
/// after the clock's zero, which no deadline reaches).
const IDLE: u64 = u64::MAX;

/// The deadline table, with its minimum kept up to date (the table asks for it after
/// every call into the connection, so it must cost a load, not a scan). Deadlines are
/// kept as nanoseconds with [`IDLE`] for a timer not armed, and a scan that is a plain
/// minimum. The rare kinds (keep-alive, user timeout, cork, RACK reorder, pacing) are
/// kept in a table allocated when one is first armed and kept until the connection
/// stops all its timers (freeing it when the last stops would allocate and free on
/// every reorder or cork episode of a bulk transfer): 56 bytes in place instead of
/// the 88 that ten deadlines and the minimum take; a connection that never armed one
/// (an idle one, most short ones) has no table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timers {
    /// The deadlines of the common kinds.
    common: Common,
    /// The deadlines of the rare kinds, from the first time one was armed until
    /// [`Timers::stop_all`].
    rare: Option<Box<[u64; RARE]>>,
}

/// The common deadlines and the minimum of all.
#[derive(Debug, Clone, Copy)]
struct Common {
    deadlines: [u64; COMMON],
    /// The earliest of all deadlines, rare ones included ([`IDLE`] when none is armed).
    next: u64,
}

impl Default for Common {
    fn default() -> Common {
        Common {
            deadlines: [IDLE; COMMON],
            next: IDLE,
        }
    }
}

/// `at` as a deadline (an instant at [`IDLE`] itself is taken a nanosecond earlier).
fn deadline(at: Instant) -> u64 {
    at.as_nanos().min(IDLE - 1)
}

fn instant(at: u64) -> Option<Instant> {
    (at != IDLE).then(|| Instant::from_nanos(at))
}

impl Timers {
    /// Arm `timer` for `at` (replacing any earlier setting).
    pub fn set(&mut self, timer: Timer, at: Instant) {
        let at = deadline(at);
        let index = timer as usize;
        let old = if index < COMMON {
            core::mem::replace(&mut self.common.deadlines[index], at)
        } else {
            let rare = self.rare.get_or_insert_with(|| Box::new([IDLE; RARE]));
            core::mem::replace(&mut rare[index - COMMON], at)
        };
        if at <= self.common.next {
            self.common.next = at;
        } else if old == self.common.next {
            self.common.next = self.scan();
        }
    }
    /// Arm `timer` for `at` unless it already runs.
    pub fn set_if_idle(&mut self, timer: Timer, at: Instant) {
        if !self.is_set(timer) {
            self.set(timer, at);
        }
    }
    /// Stop `timer`.
    pub fn stop(&mut self, timer: Timer) {
        let index = timer as usize;
        let old = if index < COMMON {
            core::mem::replace(&mut self.common.deadlines[index], IDLE)
        } else {
            let Some(rare) = &mut self.rare else {
                return;
            };
            core::mem::replace(&mut rare[index - COMMON], IDLE)
        };
        if old != IDLE && old == self.common.next {
            self.common.next = self.scan();
        }
    }
    /// Stop every timer.
    pub fn stop_all(&mut self) {
        *self = Timers::default();
    }
    /// The deadline of `timer` ([`IDLE`] when not armed).
    #[inline]
    fn deadline_of(&self, timer: Timer) -> u64 {
        let index = timer as usize;
        if index < COMMON {
            self.common.deadlines[index]
        } else {
            self.rare.as_ref().map_or(IDLE, |rare| rare[index - COMMON])
        }
    }
    /// When `timer` fires, if armed.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        instant(self.deadline_of(timer))
    }
    /// Whether `timer` is armed.
    pub fn is_set(&self, timer: Timer) -> bool {
        self.deadline_of(timer) != IDLE
    }
    /// When `timer` fires, if it is the only one armed.
    pub fn only(&self, timer: Timer) -> Option<Instant> {
        let at = self.get(timer)?;
        let others = self
            .common
            .deadlines
            .iter()
            .enumerate()
            .any(|(i, &d)| i != timer as usize && d != IDLE);
        (!others && self.rare.is_none()).then_some(at)
    }
    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        instant(self.common.next)
    }
    fn scan(&self) -> u64 {
        // A plain minimum over the slots: runs on most segments (stopping the
        // earliest timer: the ACK that stops the retransmission timer, the segment
        // that carries a delayed ACK).
        let common = self
            .common
            .deadlines
            .iter()
            .fold(IDLE, |earliest, &at| earliest.min(at));
        match &self.rare {
            Some(rare) => rare.iter().fold(common, |earliest, &at| earliest.min(at)),
            None => common,
        }
    }
    /// The first timer due at `now`, disarmed, or None.
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        // As a deadline, so that the end of time never finds an idle slot due.
        let now = deadline(now);
        if self.common.next > now {
            return None;
        }
        let timer = Timer::ALL
            .into_iter()
            .find(|&t| self.deadline_of(t) <= now)?;
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
            assert_eq!(timers.next(), instant(timers.scan()));
            let armed = Timer::ALL.iter().filter_map(|&t| timers.get(t)).min();
            assert_eq!(timers.next(), armed);
            let rare_armed = Timer::ALL[..]
                .iter()
                .any(|&t| t as usize >= COMMON && timers.is_set(t));
            assert!(
                timers.rare.is_some() || !rare_armed,
                "the rare table is there while needed"
            );
            if state.is_multiple_of(97) && (state >> 4) % 5 == 2 {
                assert!(timers.rare.is_none(), "stop_all frees the rare table");
            }
        }
    }
}
