//! A 1975 TCP's retransmission process (`TcpConfig::retransmit_process`, seed 004's
//! exerciser): a process that wakes periodically, retransmits each letter sent longer
//! than the retransmission timeout ago and, with `TcpConfig::ack_on_wakeup`, sends the
//! ACKs due. Modelled as rules on the ordinary timers: the retransmission timer is the
//! least recently sent unacknowledged segment's own (from when it was last sent, not
//! restarted by the ACK of another), both timers fire only at the process's wakeups,
//! and with `TcpConfig::retransmit_due_only` a timeout resends only the segments sent
//! longer than the timeout ago ([`skip_letters_not_due`]).

use crate::tcp::TcpConfig;
use crate::tcp::seq::SeqNumber;
use crate::time::{Duration, Instant};

use super::Conn;

/// The first wakeup at or after `at` of a process that wakes every `period` (at the
/// multiples of `period` from the clock's zero).
pub(crate) fn next_wakeup(at: Instant, period: Duration) -> Instant {
    let period = period.as_nanos().max(1);
    Instant::from_nanos(at.as_nanos().div_ceil(period).saturating_mul(period))
}

impl Conn {
    /// When the retransmission timer should fire, re-armed at `now` for a timeout of
    /// `rto`: RFC 6298's `now + rto`, or with a retransmission process the least
    /// recently sent unacknowledged segment's send time plus `rto`, at the process's
    /// next wakeup.
    pub(super) fn retransmit_deadline(
        &self,
        config: &TcpConfig,
        now: Instant,
        rto: Duration,
    ) -> Instant {
        let Some(period) = config.retransmit_process else {
            return now + rto;
        };
        let sent = self
            .cold
            .as_ref()
            .and_then(|cold| cold.letters.iter().map(|&(_, at)| at).min())
            .map_or(now, |at| at.min(now));
        next_wakeup(sent + rto, period)
    }

    /// Everything before `ack` was acknowledged at `now`: the letters leave the queue,
    /// and the retransmission timer, if data is still outstanding, fires then
    /// ([`Conn::retransmit_deadline`]).
    pub(super) fn acked_deadline(
        &mut self,
        config: &TcpConfig,
        ack: SeqNumber,
        now: Instant,
    ) -> Instant {
        self.letters_acked(config, ack);
        let rto = self.rto(config.rto_bounds().max);
        self.retransmit_deadline(config, now, rto)
    }

    /// When the retransmission timer should fire, started at `now` by a segment going
    /// out (the oldest unacknowledged one, or one sent again after a timeout, which is
    /// the oldest): `now + rto`, with a retransmission process at its next wakeup.
    pub(super) fn send_deadline(config: &TcpConfig, now: Instant, rto: Duration) -> Instant {
        match config.retransmit_process {
            Some(period) => next_wakeup(now + rto, period),
            None => now + rto,
        }
    }

    /// With a retransmission process, `[seq, end)` went out at `now` (`again`: a
    /// segment sent before): its send time is noted.
    pub(super) fn note_letter_sent(
        &mut self,
        config: &TcpConfig,
        (seq, end): (SeqNumber, SeqNumber),
        again: bool,
        now: Instant,
    ) {
        if config.retransmit_process.is_none() {
            return;
        }
        let letters = &mut self.cold.get_or_insert_with(Default::default).letters;
        if again {
            // Each letter that ends inside what went again was sent now.
            for (letter_end, at) in letters.iter_mut() {
                if *letter_end > seq && *letter_end <= end {
                    *at = now;
                }
            }
        } else if letters.back().is_none_or(|&(last, _)| end > last) {
            letters.push_back((end, now));
        }
    }

    /// With a retransmission process, everything before `ack` is acknowledged: those
    /// letters leave the queue.
    pub(super) fn letters_acked(&mut self, config: &TcpConfig, ack: SeqNumber) {
        if config.retransmit_process.is_none() {
            return;
        }
        if let Some(cold) = self.cold.as_mut() {
            while cold.letters.front().is_some_and(|&(end, _)| end <= ack) {
                cold.letters.pop_front();
            }
        }
    }

    /// With `TcpConfig::retransmit_due_only`, the timer fired at `now` and no letter
    /// was sent longer than the timeout ago (one was sent again since the timer was
    /// set, as a fast retransmission does): the process found nothing to do, and the
    /// timer is set again for the least recently sent letter. True then.
    #[cold]
    #[inline(never)]
    pub(super) fn process_finds_nothing_due(&mut self, config: &TcpConfig, now: Instant) -> bool {
        let rto = self.rto(config.rto_bounds().max);
        let oldest = self
            .cold
            .as_ref()
            .and_then(|cold| cold.letters.iter().map(|&(_, at)| at).min());
        match oldest {
            Some(at) if at + rto > now => {
                let deadline = self.retransmit_deadline(config, now, rto);
                self.timers
                    .set(crate::tcp::timer::Timer::Retransmit, deadline);
                true
            }
            _ => false,
        }
    }

    /// When a delayed ACK wanted at `now` goes: after `delay`, or with
    /// `TcpConfig::ack_on_wakeup` at the retransmission process's next wakeup.
    pub(super) fn delayed_ack_deadline(
        config: &TcpConfig,
        now: Instant,
        delay: Duration,
    ) -> Instant {
        match config.retransmit_process {
            Some(period) if config.ack_on_wakeup => {
                next_wakeup(now + Duration::from_nanos(1), period)
            }
            _ => now + delay,
        }
    }
}

/// With `TcpConfig::retransmit_due_only`, while `snd` resends after a timeout
/// (SND.NXT below SND.MAX): SND.NXT moves past each letter sent less than `rto` before
/// `now`, so that only the letters due go again, the 1975 process's "retransmit what is
/// older than the timeout". Out of line: only the 1975 model runs it.
#[cold]
#[inline(never)]
pub(super) fn skip_letters_not_due(
    snd: &mut crate::tcp::state::Snd,
    cold: Option<&super::Cold>,
    now: Instant,
    rto: Duration,
) {
    let Some(cold) = cold else { return };
    while snd.snd_nxt < snd.snd_max {
        let Some(&(end, at)) = cold.letters.iter().find(|&&(end, _)| end > snd.snd_nxt) else {
            return;
        };
        if at + rto <= now {
            return;
        }
        snd.snd_nxt = end.min(snd.snd_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakeups_are_multiples_of_the_period() {
        let ms = Duration::from_millis;
        let at = |m| Instant::ZERO + ms(m);
        assert_eq!(next_wakeup(at(0), ms(500)), at(0));
        assert_eq!(next_wakeup(at(1), ms(500)), at(500));
        assert_eq!(next_wakeup(at(500), ms(500)), at(500));
        assert_eq!(next_wakeup(at(1_201), ms(250)), at(1_250));
    }
}
