//! No congestion control: the window is the peer's alone, as in every TCP before
//! Jacobson's "Congestion Avoidance and Control" (1988). RFC 793's sender "may send
//! data up to the window", and after a retransmission timeout it sends again from
//! SND.UNA as the window allows: with no congestion window that is the whole window at
//! once (go back N). For modelling old TCPs (`TcpConfig::congestion`, the legacy
//! profiles); no modern stack should run it on a shared path.

use crate::time::Instant;

use super::CongestionControl;

/// A congestion window no peer window reaches (the largest scaled window is 2^30 bytes,
/// RFC 7323 §2.3), small enough that arithmetic on it cannot overflow.
pub const UNLIMITED: usize = 1 << 31;

/// The controller that never limits: cwnd and ssthresh are [`UNLIMITED`] whatever
/// happens.
#[derive(Debug, Clone)]
pub struct Unlimited {
    mss: usize,
}

impl Unlimited {
    /// A controller for a connection whose SMSS is `mss`.
    pub fn new(mss: usize) -> Unlimited {
        Unlimited { mss }
    }
}

impl CongestionControl for Unlimited {
    fn name(&self) -> &'static str {
        "none"
    }

    fn cwnd(&self) -> usize {
        UNLIMITED
    }

    fn ssthresh(&self) -> usize {
        UNLIMITED
    }

    fn in_slow_start(&self) -> bool {
        false
    }

    fn mss(&self) -> usize {
        self.mss
    }

    fn set_mss(&mut self, mss: usize) {
        self.mss = mss;
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        _acked_bytes: usize,
        _rtt: Option<crate::time::Duration>,
        _bytes_in_flight: usize,
        _usage: super::CwndUsage,
    ) {
    }

    fn on_enter_recovery(&mut self, _now: Instant, _bytes_in_flight: usize) {}

    fn on_enter_sack_recovery(&mut self, _now: Instant, _bytes_in_flight: usize) {}

    fn on_dup_ack_in_recovery(&mut self) {}

    fn on_partial_ack(&mut self, _acked_bytes: usize) {}

    fn on_exit_recovery(&mut self, _now: Instant, _bytes_in_flight: usize) {}

    fn on_rto(&mut self, _now: Instant, _bytes_in_flight: usize) {}

    fn on_idle_restart(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cc::CwndUsage;

    #[test]
    fn nothing_moves_the_window() {
        let mut cc = Unlimited::new(1000);
        let now = Instant::ZERO;
        cc.on_rto(now, 50_000);
        cc.on_enter_recovery(now, 50_000);
        cc.on_ack(now, 1000, None, 0, CwndUsage::default());
        assert_eq!((cc.cwnd(), cc.ssthresh()), (UNLIMITED, UNLIMITED));
        assert!(!cc.in_slow_start());
        cc.set_mss(500);
        assert_eq!(cc.mss(), 500);
    }
}
