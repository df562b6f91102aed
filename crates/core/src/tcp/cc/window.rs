//! The window bookkeeping NewReno, CUBIC and Vegas share: cwnd and ssthresh, RFC 3465
//! byte counting, RFC 5681 / RFC 6582 loss and timeout reductions, and the undo of a
//! spurious one. Each algorithm holds a [`Window`] and adds only what differs (CUBIC's
//! curve and its own ssthresh, Vegas's once-per-RTT adjustment, HyStart++).
//!
//! A leaf: it knows nothing of the connection, only bytes and segments.

use super::WindowRules;
use super::hystart::Growth;
use super::usage::CwndUsage;

/// RFC 6928: initial window of 10 segments.
pub const DEFAULT_INITIAL_WINDOW_SEGMENTS: usize = 10;

/// RFC 5681 §3.1: "The initial value of ssthresh SHOULD be set arbitrarily high (e.g.,
/// to the size of the largest possible advertised window)". Half of `usize::MAX` leaves
/// room for arithmetic.
pub const INITIAL_SSTHRESH: usize = usize::MAX / 2;

/// The initial window for `segments` segments of `mss` bytes, generalising RFC 6928 §2:
/// "IW = min (10*MSS, max (2*MSS, 14600))" to `min(n*MSS, max(2*MSS, n*1460))`.
pub fn initial_window(mss: usize, segments: usize) -> usize {
    let n = segments.max(1);
    n.saturating_mul(mss)
        .min((2 * mss).max(n.saturating_mul(1460)))
}

/// `value * new / old` without overflow, saturating.
pub(crate) fn scale(value: usize, new: usize, old: usize) -> usize {
    let scaled = value as u128 * new as u128 / old as u128;
    usize::try_from(scaled).unwrap_or(usize::MAX)
}

/// The congestion window of one connection and what its reductions and growth keep.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// SMSS in bytes (at least 1; `u32` as the other narrow fields: a connection holds
    /// one of these, `Window::mss` widens it).
    smss: u32,
    /// Initial window in segments (at least 1), kept for idle restarts (`u16`, as
    /// `abc_limit`: with `bytes_acked` a `u32`, the window takes 32 bytes, not 40).
    iw_segments: u16,
    /// Congestion window in bytes (at least one SMSS). The algorithms set it as their
    /// rules say; the operations below keep the invariant.
    pub(crate) cwnd: usize,
    /// Slow-start threshold in bytes.
    pub(crate) ssthresh: usize,
    /// RFC 3465 §2.1 `bytes_acked` in congestion avoidance, always `< cwnd` (0 for an
    /// algorithm that never calls [`Window::count_bytes`]; saturating at 4 GiB).
    bytes_acked: u32,
    /// A retransmission timeout happened and no new data was acknowledged since.
    rto_unacked: bool,
    /// In slow start since a retransmission timeout (limits ABC to L = 1*SMSS).
    slow_start_after_rto: bool,
    /// RFC 3465's L in segments, 0 for none ([`WindowRules::abc_limit`]; saturating
    /// at 65535, far above the RFC's "MUST NOT use L > 2*SMSS").
    abc_limit: u16,
    /// Recovery ends with cwnd = ssthresh, RFC 6582 §3.2 step 3 option (2)
    /// ([`WindowRules::cwnd_ssthresh_after_recovery`]).
    exit_at_ssthresh: bool,
}

/// `n` as stored in a [`Window`] (saturating: no MSS or segment count comes near 4 GiB).
fn narrow(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `n` as a count of segments stored in a [`Window`] (saturating).
fn narrow16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

impl Window {
    /// The window for SMSS `mss` with an initial window of `initial_window_segments`
    /// segments (see [`initial_window`]) and an arbitrarily high ssthresh. Zero
    /// arguments are raised to 1.
    pub(crate) fn new(mss: usize, initial_window_segments: usize) -> Window {
        let mss = mss.max(1);
        let initial_window_segments = initial_window_segments.max(1);
        Window {
            smss: narrow(mss),
            iw_segments: narrow16(initial_window_segments),
            cwnd: initial_window(mss, initial_window_segments),
            ssthresh: INITIAL_SSTHRESH,
            bytes_acked: 0,
            rto_unacked: false,
            slow_start_after_rto: false,
            abc_limit: 2,
            exit_at_ssthresh: false,
        }
    }

    /// Follow `rules`: RFC 3465's L in slow start (`None`: no limit, as Linux) and the
    /// window at the end of recovery.
    pub(crate) fn set_rules(&mut self, rules: &WindowRules) {
        self.abc_limit = rules.abc_limit.map_or(0, |l| narrow16(l.max(1) as usize));
        self.exit_at_ssthresh = rules.cwnd_ssthresh_after_recovery;
    }

    /// SMSS in bytes.
    #[inline]
    pub(crate) fn mss(&self) -> usize {
        self.smss as usize
    }

    /// Whether cwnd is below ssthresh.
    pub(crate) fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Whether a retransmission timeout happened and no new data was acknowledged
    /// since (a further timeout keeps ssthresh).
    pub(crate) fn rto_unacked(&self) -> bool {
        self.rto_unacked
    }

    /// SMSS changed to `mss` (raised to 1): cwnd and a reduced ssthresh keep their
    /// number of segments (cwnd at least one, ssthresh at least two); an ssthresh still
    /// at its initial "arbitrarily high" value stays there. The SMSS before, if it
    /// changed.
    pub(crate) fn set_mss(&mut self, mss: usize) -> Option<usize> {
        let mss = mss.max(1);
        let old = self.mss();
        if mss == old {
            return None;
        }
        self.cwnd = scale(self.cwnd, mss, old).max(mss);
        if self.ssthresh < INITIAL_SSTHRESH {
            self.ssthresh = scale(self.ssthresh, mss, old)
                .max(2 * mss)
                .min(INITIAL_SSTHRESH);
        }
        self.bytes_acked = 0;
        self.smss = narrow(mss);
        Some(old)
    }

    /// New data was acknowledged: a timeout no longer holds ssthresh.
    pub(crate) fn on_new_ack(&mut self) {
        self.rto_unacked = false;
    }

    /// Whether an ACK may grow cwnd, given how the sender used the window (see
    /// [`CwndUsage::allows_growth`]).
    pub(crate) fn was_used(&self, usage: CwndUsage) -> bool {
        usage.allows_growth(self.cwnd, self.in_slow_start())
    }

    /// RFC 3465 §2.2: in slow start "cwnd += min(N, L*SMSS)" with L = 2*SMSS, and L =
    /// 1*SMSS in the slow start that follows a retransmission timeout (RFC 3465 §2.3),
    /// when one ACK may cover a burst of retransmissions; HyStart++'s `growth` may
    /// shrink the increment.
    pub(crate) fn slow_start(&mut self, acked_bytes: usize, growth: Growth) {
        let limit = match self.abc_limit {
            0 => usize::MAX,
            _ if self.slow_start_after_rto => self.mss(),
            l => l as usize * self.mss(),
        };
        self.cwnd = self
            .cwnd
            .saturating_add(growth.increment(acked_bytes.min(limit)));
        if self.cwnd >= self.ssthresh {
            self.slow_start_after_rto = false;
        }
    }

    /// Congestion avoidance began: the slow start after a timeout, if any, is over.
    pub(crate) fn end_slow_start_after_rto(&mut self) {
        self.slow_start_after_rto = false;
    }

    /// RFC 3465 §2.1: "When bytes_acked becomes greater than or equal to the value of
    /// the congestion window, bytes_acked is reduced by the value of cwnd. Next, cwnd
    /// is incremented by a full-sized segment (SMSS)." At most one SMSS per ACK.
    pub(crate) fn count_bytes(&mut self, acked_bytes: usize) {
        let mut bytes_acked = (self.bytes_acked as usize).saturating_add(acked_bytes);
        if bytes_acked >= self.cwnd {
            bytes_acked -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.mss());
            bytes_acked = bytes_acked.min(self.cwnd - 1);
        }
        self.bytes_acked = narrow(bytes_acked);
    }

    /// RFC 5681 §3.1 equation (4): "ssthresh = max (FlightSize / 2, 2*SMSS)".
    pub(crate) fn reduced_ssthresh(&self, bytes_in_flight: usize) -> usize {
        (bytes_in_flight / 2).max(2 * self.mss())
    }

    /// Fast recovery without SACK with the algorithm's new `ssthresh`: RFC 5681 §3.2
    /// step 3, "cwnd set to ssthresh plus 3*SMSS. This artificially "inflates" the
    /// congestion window by the number of segments (three) that have left the network
    /// and which the receiver has buffered."
    pub(crate) fn enter_recovery(&mut self, ssthresh: usize) {
        self.ssthresh = ssthresh;
        self.cwnd = ssthresh + 3 * self.mss();
        self.bytes_acked = 0;
        self.slow_start_after_rto = false;
    }

    /// Loss recovery with SACK with the algorithm's new `ssthresh`: RFC 6675 §5 step
    /// (4.2), "ssthresh = cwnd = (FlightSize / 2)".
    pub(crate) fn enter_sack_recovery(&mut self, ssthresh: usize) {
        self.ssthresh = ssthresh;
        self.cwnd = ssthresh;
        self.bytes_acked = 0;
        self.slow_start_after_rto = false;
    }

    /// RFC 5681 §3.2 step 4 (which RFC 6582 keeps): "For each additional duplicate ACK
    /// received (after the third), cwnd MUST be incremented by SMSS."
    pub(crate) fn on_dup_ack_in_recovery(&mut self) {
        self.cwnd = self.cwnd.saturating_add(self.mss());
    }

    /// RFC 6582 §3.2 step 3, partial acknowledgments: "Deflate the congestion window by
    /// the amount of new data acknowledged by the Cumulative Acknowledgment field. If
    /// the partial ACK acknowledges at least one SMSS of new data, then add back SMSS
    /// bytes to the congestion window." cwnd never drops below one SMSS.
    pub(crate) fn on_partial_ack(&mut self, acked_bytes: usize) {
        if acked_bytes > 0 {
            self.rto_unacked = false;
        }
        self.cwnd = self.cwnd.saturating_sub(acked_bytes);
        if acked_bytes >= self.mss() {
            self.cwnd += self.mss();
        }
        self.cwnd = self.cwnd.max(self.mss());
    }

    /// RFC 6582 §3.2 step 3, full acknowledgments: "Set cwnd to either (1) min
    /// (ssthresh, max(FlightSize, SMSS) + SMSS) or (2) ssthresh ... where FlightSize in
    /// (1) is the amount of data presently outstanding." Option (1) by default: it
    /// avoids a burst when little is outstanding; option (2) under
    /// [`WindowRules::cwnd_ssthresh_after_recovery`] (Linux's `tcp_end_cwnd_reduction`).
    pub(crate) fn on_exit_recovery(&mut self, bytes_in_flight: usize) {
        self.rto_unacked = false;
        self.cwnd = if self.exit_at_ssthresh {
            self.ssthresh
        } else {
            self.ssthresh
                .min(bytes_in_flight.max(self.mss()) + self.mss())
        };
        self.bytes_acked = 0;
    }

    /// A retransmission timeout, with the algorithm's reduced `ssthresh`. RFC 5681
    /// §3.1: "When a TCP sender detects segment loss using the retransmission timer and
    /// the given segment has not yet been resent by way of the retransmission timer,
    /// the value of ssthresh MUST be set to no more than the value given in equation
    /// (4)" and "upon a timeout ... cwnd MUST be set to no more than the loss window,
    /// LW, which equals 1 full-sized segment". A further timeout before any new data is
    /// acknowledged keeps ssthresh.
    pub(crate) fn on_rto(&mut self, ssthresh: usize) {
        if !self.rto_unacked {
            self.ssthresh = ssthresh;
        }
        self.cwnd = self.mss();
        self.bytes_acked = 0;
        self.rto_unacked = true;
        self.slow_start_after_rto = true;
    }

    /// RFC 5681 §4.1: "a TCP SHOULD set cwnd to no more than RW before beginning
    /// transmission if the TCP has not sent data in an interval exceeding the
    /// retransmission timeout", where "RW = min(IW,cwnd)".
    pub(crate) fn on_idle_restart(&mut self) {
        self.cwnd = self
            .cwnd
            .min(initial_window(self.mss(), self.iw_segments as usize));
        self.bytes_acked = 0;
    }

    /// Undo a spurious reduction (RFC 4015 §3.2): cwnd and ssthresh at least what they
    /// were before it, and no timeout state left.
    pub(crate) fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        self.cwnd = self.cwnd.max(cwnd);
        self.ssthresh = self.ssthresh.max(ssthresh);
        self.bytes_acked = 0;
        self.rto_unacked = false;
        self.slow_start_after_rto = false;
    }
}
