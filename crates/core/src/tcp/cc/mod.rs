//! Congestion control: the [`CongestionControl`] trait the connection drives, and the
//! algorithms behind it: [`NewReno`] (the default), [`Cubic`] (RFC 9438), [`Bbr`]
//! (draft-ietf-ccwg-bbr) and [`Vegas`] (Brakmo and Peterson); others slot in as new
//! variants of [`CcAlgorithm`]. NewReno and CUBIC leave their first slow start with
//! [`hystart`] (HyStart++, RFC 9406) unless it is turned off.
//!
//! # How the connection drives an algorithm
//!
//! All sizes are bytes. `bytes_in_flight` is RFC 5681's FlightSize: "The amount of data
//! that has been sent but not yet cumulatively acknowledged", i.e. SND.MAX - SND.UNA (not
//! RFC 6675's pipe). Sending is allowed while the data in flight (or `pipe`, with SACK)
//! is below [`CongestionControl::cwnd`].
//!
//! Outside loss recovery:
//! - every ACK that advances SND.UNA: [`on_ack`](CongestionControl::on_ack) with the
//!   number of newly acknowledged bytes, FlightSize *after* the ACK, and the
//!   [`CwndUsage`] of the window of data it belongs to (whether cwnd limited a send,
//!   the largest flight), from the connection's record of its sends;
//! - after an idle period longer than the RTO, before sending:
//!   [`on_idle_restart`](CongestionControl::on_idle_restart) (RFC 5681 §4.1).
//!
//! Entering fast recovery (DupThresh duplicate ACKs, or RFC 6675 loss detection), with
//! FlightSize at that moment (before the retransmission; RFC 5681 says segments sent by
//! Limited Transmit should not be counted):
//! - without SACK (RFC 6582 NewReno): [`on_enter_recovery`](CongestionControl::on_enter_recovery)
//!   sets `ssthresh = max(FlightSize / 2, 2*SMSS)` and `cwnd = ssthresh + 3*SMSS` (the
//!   three duplicate ACKs already received are accounted for); then
//!   [`on_dup_ack_in_recovery`](CongestionControl::on_dup_ack_in_recovery) for every
//!   further duplicate ACK (cwnd += SMSS), and
//!   [`on_partial_ack`](CongestionControl::on_partial_ack) for every ACK that advances
//!   SND.UNA but not past the recovery point (deflate by the bytes acked, add back SMSS);
//! - with SACK (RFC 6675): [`on_enter_sack_recovery`](CongestionControl::on_enter_sack_recovery)
//!   sets `ssthresh = cwnd = max(FlightSize / 2, 2*SMSS)`; the connection then sends while
//!   `cwnd - pipe >= SMSS` and calls neither `on_dup_ack_in_recovery` nor
//!   `on_partial_ack` (pipe already accounts for what left the network);
//! - either way, ACKs during recovery do not call `on_ack`;
//! - the ACK that covers the recovery point:
//!   [`on_exit_recovery`](CongestionControl::on_exit_recovery) with FlightSize after it.
//!
//! On a retransmission timeout: [`on_rto`](CongestionControl::on_rto) with FlightSize
//! before the timeout (this also ends any recovery; do not call `on_exit_recovery`).
//!
//! With SACK the window during recovery is RFC 6937 PRR's, computed by the connection
//! from the ssthresh `on_enter_sack_recovery` chose; `cwnd` matters again at the exit.
//! When the retransmissions of a reduction prove spurious (D-SACK or Eifel), the
//! connection calls [`on_undo`](CongestionControl::on_undo) with cwnd and ssthresh from
//! before the cut.
//!
//! Model-based controllers (BBR) take more, through methods whose defaults do nothing,
//! so the window-based ones need not know them:
//! - a controller whose [`wants_rate_samples`](CongestionControl::wants_rate_samples)
//!   is true gets [`on_rate_sample`](CongestionControl::on_rate_sample) on every ACK
//!   that delivers data (cumulatively or by SACK), after the calls above, with the bytes
//!   in the network (RFC 6675 pipe when SACK blocks are outstanding, else FlightSize);
//! - [`on_loss`](CongestionControl::on_loss) whenever data is retransmitted, with the
//!   bytes marked lost;
//! - [`on_ecn_ce`](CongestionControl::on_ecn_ce) for ACKs that echo CE marks;
//! - [`pacing_rate`](CongestionControl::pacing_rate) and
//!   [`send_quantum`](CongestionControl::send_quantum), read before sending.
//!
//! On an ACK with ECE (RFC 3168), outside recovery and at most once per window of data:
//! [`on_ecn`](CongestionControl::on_ecn) with FlightSize, after the ACK's own `on_ack`;
//! no recovery follows (nothing was lost), so the next ACKs call `on_ack`.

pub mod bbr;
pub mod bbr1;
pub mod cubic;
pub mod hystart;
pub mod newreno;
pub mod none;
mod usage;
pub mod vegas;
mod window;

use alloc::boxed::Box;
use core::fmt;

use crate::time::{Duration, Instant};

pub use super::rate::RateSample;
pub use bbr::Bbr;
pub use bbr1::Bbr1;
pub use cubic::Cubic;
pub use newreno::NewReno;
pub use usage::CwndUsage;
pub(crate) use usage::UsageTracker;
pub use vegas::Vegas;

/// A congestion-control algorithm: owns cwnd and ssthresh of one connection. Every input
/// is an argument; see the module docs for when the connection calls what.
pub trait CongestionControl: fmt::Debug + Send {
    /// A short lowercase name for reports (`"newreno"`).
    fn name(&self) -> &'static str;

    /// The congestion window in bytes.
    fn cwnd(&self) -> usize;

    /// The slow-start threshold in bytes (very large until the first loss).
    fn ssthresh(&self) -> usize;

    /// Whether the algorithm is in slow start (`cwnd < ssthresh`).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }

    /// The sender's maximum segment size (SMSS) in bytes.
    fn mss(&self) -> usize;

    /// SMSS changed (path MTU discovery, or the peer's MSS option once known).
    fn set_mss(&mut self, mss: usize);

    /// An ACK outside recovery acknowledged `acked_bytes` new bytes at `now`; `rtt` is the
    /// RTT sample it produced, if any; `bytes_in_flight` is FlightSize after it; `usage`
    /// says how the sender used the window over the window of data it belongs to (a
    /// window the sender did not fill does not grow).
    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
        usage: CwndUsage,
    );

    /// Fast retransmit without SACK (RFC 6582 / RFC 5681 §3.2): `ssthresh = max(FlightSize
    /// / 2, 2*SMSS)`, `cwnd = ssthresh + 3*SMSS`.
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize);

    /// Loss recovery with SACK (RFC 6675 §5): `ssthresh = cwnd = max(FlightSize / 2,
    /// 2*SMSS)`.
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize);

    /// A further duplicate ACK during non-SACK recovery: inflate cwnd by SMSS.
    fn on_dup_ack_in_recovery(&mut self);

    /// A partial ACK during non-SACK recovery acknowledged `acked_bytes` (RFC 6582 deflate).
    fn on_partial_ack(&mut self, acked_bytes: usize);

    /// Recovery ended by a full acknowledgment; `bytes_in_flight` is FlightSize after it.
    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize);

    /// The retransmission timer expired; `bytes_in_flight` is FlightSize before it.
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize);

    /// Sending resumes after an idle period longer than the RTO (RFC 5681 §4.1).
    fn on_idle_restart(&mut self, now: Instant);

    /// An ACK echoed Congestion Experienced (RFC 3168 §6.1.2), at most once per window
    /// of data and never during loss recovery; `bytes_in_flight` is FlightSize. "the
    /// TCP source halves the congestion window "cwnd" and reduces the slow start
    /// threshold "ssthresh"", as for a loss but with nothing to retransmit: by default
    /// the cut of [`on_enter_sack_recovery`](CongestionControl::on_enter_sack_recovery)
    /// (no inflation), after which ACKs go to `on_ack` again.
    fn on_ecn(&mut self, now: Instant, bytes_in_flight: usize) {
        self.on_enter_sack_recovery(now, bytes_in_flight);
    }

    /// The last window reduction was for nothing: its retransmissions were spurious
    /// (D-SACK, RFC 3708; Eifel, RFC 3522). Restore the window from before it: cwnd and
    /// ssthresh at least `cwnd` and `ssthresh` (RFC 4015 §3.2 / Linux's undo), and end
    /// any recovery or post-timeout state. The default does nothing (keeps the cut).
    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        let _ = (cwnd, ssthresh);
    }

    /// A new connection starts from what an earlier one to the same host learned (RFC
    /// 9040): its slow-start threshold is `ssthresh` bytes. The window-based
    /// controllers take it; the default ignores it (BBR and Vegas keep their own
    /// models, and get only the larger initial window).
    fn set_ssthresh(&mut self, ssthresh: usize) {
        let _ = ssthresh;
    }

    /// Whether the connection should keep per-segment delivery state and call
    /// [`on_rate_sample`](CongestionControl::on_rate_sample) (BBR). Default false:
    /// nothing is kept.
    fn wants_rate_samples(&self) -> bool {
        false
    }

    /// The delivery-rate sample of an ACK that delivered data; `bytes_in_flight` is
    /// what is in the network after it. Default: ignored.
    fn on_rate_sample(&mut self, now: Instant, sample: &RateSample, bytes_in_flight: usize) {
        let _ = (now, sample, bytes_in_flight);
    }

    /// `lost_bytes` were marked lost (about to be retransmitted); `bytes_in_flight` is
    /// FlightSize. Default: ignored (the window-based controllers react to the
    /// recovery calls instead).
    fn on_loss(&mut self, now: Instant, lost_bytes: usize, bytes_in_flight: usize) {
        let _ = (now, lost_bytes, bytes_in_flight);
    }

    /// An ACK reported `ce_bytes` of the `acked_bytes` it acknowledged as CE-marked
    /// (RFC 3168 ECN-Echo, or the byte counts of accurate ECN). Default: ignored.
    fn on_ecn_ce(&mut self, now: Instant, ce_bytes: usize, acked_bytes: usize) {
        let _ = (now, ce_bytes, acked_bytes);
    }

    /// The rate in bytes per second at which the controller wants data paced, if it
    /// sets one (None: the connection derives one from cwnd and SRTT when pacing).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// The most bytes to send in one burst (one TSO segment), if the controller says.
    fn send_quantum(&self) -> Option<usize> {
        None
    }
}

/// The model-based controllers' windows (both BBRs) after SMSS changed from `old` to
/// `new` bytes: cwnd keeps its segments when SMSS shrinks (its bytes when SMSS grows),
/// the initial window its segments, and cwnd stays at least `min_segments` of the new
/// SMSS. Returns (cwnd, initial window).
pub(crate) fn rescale_for_mss(
    (cwnd, initial): (usize, usize),
    old: usize,
    new: usize,
    min_segments: usize,
) -> (usize, usize) {
    let cwnd = if new < old { cwnd / old * new } else { cwnd };
    (cwnd.max(min_segments * new), initial / old * new)
}

/// Where the window-based controllers may follow the RFCs or Linux, and HyStart++.
/// The default is the RFCs'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRules {
    /// HyStart++ (RFC 9406) in the initial slow start of NewReno and CUBIC.
    pub hystart: bool,
    /// With `hystart`: leave slow start at once on the delay signal (ssthresh = cwnd),
    /// as Linux's HyStart, rather than entering RFC 9406's Conservative Slow Start
    /// ([`HyStart::exit_at_once`](hystart::HyStart::exit_at_once)).
    pub hystart_exit_at_once: bool,
    /// RFC 3465's L in segments: the most one ACK grows cwnd by in slow start (§2.2:
    /// "TCP implementations MAY use L=2*SMSS bytes and MUST NOT use L > 2*SMSS
    /// bytes"; 1 in the slow start after a timeout, §2.3, when it is above 1). `None`:
    /// by everything the ACK acknowledged, as Linux's `tcp_slow_start` (a stretch ACK
    /// of ten segments adds ten).
    pub abc_limit: Option<u32>,
    /// CUBIC's ssthresh after a congestion event from cwnd, as Linux's
    /// `cubictcp_recalc_ssthresh` (`max(cwnd * β, 2)`), rather than from FlightSize as
    /// RFC 9438 §4.6 writes it ("ssthresh = flight_size * β_cubic"). §4.6 allows it for
    /// an implementation that keeps cwnd from growing while it is not used, as imp
    /// does ([`CwndUsage`]).
    pub cubic_ssthresh_from_cwnd: bool,
    /// When loss recovery ends, cwnd = ssthresh, RFC 6582 §3.2 step 3 option (2), as
    /// Linux's `tcp_end_cwnd_reduction`, rather than option (1), `min(ssthresh,
    /// max(FlightSize, SMSS) + SMSS)`, which keeps a sender with little outstanding from
    /// sending a burst of ssthresh at once.
    pub cwnd_ssthresh_after_recovery: bool,
}

impl Default for WindowRules {
    fn default() -> Self {
        WindowRules {
            hystart: true,
            hystart_exit_at_once: false,
            abc_limit: Some(2),
            cubic_ssthresh_from_cwnd: false,
            cwnd_ssthresh_after_recovery: false,
        }
    }
}

/// The congestion-control algorithms imp provides, for configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CcAlgorithm {
    /// NewReno (RFC 5681, RFC 6582, RFC 3465 byte counting).
    #[default]
    NewReno,
    /// CUBIC (RFC 9438), with NewReno's slow start and recovery.
    Cubic,
    /// Vegas (Brakmo and Peterson 1995, as Linux's `tcp_vegas.c`), with NewReno's loss
    /// recovery.
    Vegas,
    /// BBR (draft-ietf-ccwg-bbr, BBRv3): a model of the path's bandwidth and RTT, paced.
    Bbr,
    /// BBRv1, as Linux's mainline `bbr` (`tcp_bbr.c`): the same model without v3's loss
    /// and ECN bounds, for comparing with Linux like for like.
    Bbr1,
    /// None at all, as every TCP before Jacobson's 1988 algorithms: the sender fills
    /// the peer's window, and after a timeout sends the whole window again at once (go
    /// back N without slow start). For modelling old TCPs ([`none::Unlimited`]).
    None,
}

impl CcAlgorithm {
    /// An instance for a connection whose SMSS is `mss`, with the RFC 6928 initial window
    /// of 10 segments.
    pub fn build(self, mss: usize) -> Box<dyn CongestionControl> {
        self.build_with_initial_window(mss, newreno::DEFAULT_INITIAL_WINDOW_SEGMENTS)
    }

    /// An instance for a connection whose SMSS is `mss`, with an initial window of
    /// `initial_window_segments` segments (see [`newreno::initial_window`]).
    pub fn build_with_initial_window(
        self,
        mss: usize,
        initial_window_segments: usize,
    ) -> Box<dyn CongestionControl> {
        self.build_configured(mss, initial_window_segments, true)
    }

    /// As [`CcAlgorithm::build_with_initial_window`], with HyStart++ (RFC 9406) in the
    /// initial slow start of NewReno and CUBIC only if `hystart` (Vegas has its own).
    pub fn build_configured(
        self,
        mss: usize,
        initial_window_segments: usize,
        hystart: bool,
    ) -> Box<dyn CongestionControl> {
        let rules = WindowRules {
            hystart,
            ..WindowRules::default()
        };
        self.build_with_rules(mss, initial_window_segments, rules)
    }

    /// As [`CcAlgorithm::build_with_initial_window`], under `rules`.
    pub fn build_with_rules(
        self,
        mss: usize,
        initial_window_segments: usize,
        rules: WindowRules,
    ) -> Box<dyn CongestionControl> {
        match self {
            CcAlgorithm::NewReno => {
                Box::new(NewReno::with_rules(mss, initial_window_segments, rules))
            }
            CcAlgorithm::Cubic => Box::new(Cubic::with_rules(mss, initial_window_segments, rules)),
            CcAlgorithm::Vegas => Box::new(Vegas::new(mss, initial_window_segments)),
            CcAlgorithm::Bbr => Box::new(Bbr::new(mss, initial_window_segments)),
            CcAlgorithm::Bbr1 => Box::new(Bbr1::new(mss, initial_window_segments)),
            CcAlgorithm::None => Box::new(none::Unlimited::new(mss)),
        }
    }

    /// The algorithm's name, as [`CongestionControl::name`] reports it.
    pub fn name(self) -> &'static str {
        match self {
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Cubic => "cubic",
            CcAlgorithm::Vegas => "vegas",
            CcAlgorithm::Bbr => "bbr",
            CcAlgorithm::Bbr1 => "bbr1",
            CcAlgorithm::None => "none",
        }
    }

    /// The algorithm called `name` (as [`CcAlgorithm::name`] spells it), if imp has it.
    pub fn from_name(name: &str) -> Option<CcAlgorithm> {
        match name {
            "newreno" | "reno" => Some(CcAlgorithm::NewReno),
            "cubic" => Some(CcAlgorithm::Cubic),
            "vegas" => Some(CcAlgorithm::Vegas),
            "bbr" => Some(CcAlgorithm::Bbr),
            "bbr1" => Some(CcAlgorithm::Bbr1),
            "none" => Some(CcAlgorithm::None),
            _ => None,
        }
    }
}

/// The configured controller. The default one (NewReno) is held inline in
/// the connection: no allocation per connection, and no pointer to chase (a cache line
/// to miss with many connections) on every ACK. The larger ones stay boxed, so the
/// connection state, which moves on every state transition, does not grow by their
/// size. Each call goes to the same implementation the boxed form would run.
#[derive(Debug)]
pub(crate) enum Controller {
    /// RFC 5681 / RFC 6582, inline.
    NewReno(NewReno),
    /// Any other algorithm.
    Boxed(Box<dyn CongestionControl>),
}

impl Controller {
    /// `algorithm` for segments of `mss` bytes, with an initial window of
    /// `initial_window_segments`, under `rules` (as [`CcAlgorithm::build_with_rules`]).
    pub(crate) fn new(
        algorithm: CcAlgorithm,
        mss: usize,
        initial_window_segments: usize,
        rules: WindowRules,
    ) -> Controller {
        match algorithm {
            CcAlgorithm::NewReno => {
                Controller::NewReno(NewReno::with_rules(mss, initial_window_segments, rules))
            }
            other => Controller::Boxed(other.build_with_rules(mss, initial_window_segments, rules)),
        }
    }
}

impl Controller {
    /// Lend HyStart++ a box for its rounds from `spare` (see
    /// [`HyStart::lend_rounds`](hystart::HyStart::lend_rounds)), as the sending half is
    /// made (once, not on every ACK: nothing to check per ACK): the inline NewReno only
    /// (the boxed controllers allocate their own), and only in slow start, where
    /// HyStart++ runs. A connection that ends before its first ACK of new data gives the
    /// box back unused.
    #[inline]
    #[allow(clippy::vec_box)] // The boxes are what the connections take and give back.
    pub(crate) fn lend_hystart_rounds(
        &mut self,
        spare: &mut alloc::vec::Vec<Box<hystart::Rounds>>,
    ) {
        if !spare.is_empty()
            && let Controller::NewReno(cc) = self
            && cc.in_slow_start()
        {
            cc.hystart_mut().lend_rounds(spare);
        }
    }

    /// HyStart++'s box for its rounds, if the inline NewReno has one, to keep for a later
    /// connection (this one's sending half is closing).
    pub(crate) fn take_hystart_rounds(&mut self) -> Option<Box<hystart::Rounds>> {
        match self {
            Controller::NewReno(cc) => cc.hystart_mut().take_rounds(),
            Controller::Boxed(_) => None,
        }
    }
}

/// Forward a call to whichever controller is held.
macro_rules! dispatch {
    ($self:ident, $cc:ident => $call:expr) => {
        match $self {
            Controller::NewReno($cc) => $call,
            Controller::Boxed($cc) => $call,
        }
    };
}

impl CongestionControl for Controller {
    fn name(&self) -> &'static str {
        dispatch!(self, cc => cc.name())
    }
    fn cwnd(&self) -> usize {
        dispatch!(self, cc => cc.cwnd())
    }
    fn ssthresh(&self) -> usize {
        dispatch!(self, cc => cc.ssthresh())
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, cc => cc.in_slow_start())
    }
    fn mss(&self) -> usize {
        dispatch!(self, cc => cc.mss())
    }
    fn set_mss(&mut self, mss: usize) {
        dispatch!(self, cc => cc.set_mss(mss))
    }
    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
        usage: CwndUsage,
    ) {
        dispatch!(self, cc => cc.on_ack(now, acked_bytes, rtt, bytes_in_flight, usage))
    }
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_enter_recovery(now, bytes_in_flight))
    }
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_enter_sack_recovery(now, bytes_in_flight))
    }
    fn on_dup_ack_in_recovery(&mut self) {
        dispatch!(self, cc => cc.on_dup_ack_in_recovery())
    }
    fn on_partial_ack(&mut self, acked_bytes: usize) {
        dispatch!(self, cc => cc.on_partial_ack(acked_bytes))
    }
    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_exit_recovery(now, bytes_in_flight))
    }
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_rto(now, bytes_in_flight))
    }
    fn on_idle_restart(&mut self, now: Instant) {
        dispatch!(self, cc => cc.on_idle_restart(now))
    }
    fn on_ecn(&mut self, now: Instant, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_ecn(now, bytes_in_flight))
    }

    fn set_ssthresh(&mut self, ssthresh: usize) {
        dispatch!(self, cc => cc.set_ssthresh(ssthresh))
    }
    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        dispatch!(self, cc => cc.on_undo(cwnd, ssthresh))
    }
    fn wants_rate_samples(&self) -> bool {
        dispatch!(self, cc => cc.wants_rate_samples())
    }
    fn on_rate_sample(&mut self, now: Instant, sample: &RateSample, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_rate_sample(now, sample, bytes_in_flight))
    }
    fn on_loss(&mut self, now: Instant, lost_bytes: usize, bytes_in_flight: usize) {
        dispatch!(self, cc => cc.on_loss(now, lost_bytes, bytes_in_flight))
    }
    fn on_ecn_ce(&mut self, now: Instant, ce_bytes: usize, acked_bytes: usize) {
        dispatch!(self, cc => cc.on_ecn_ce(now, ce_bytes, acked_bytes))
    }
    fn pacing_rate(&self) -> Option<u64> {
        dispatch!(self, cc => cc.pacing_rate())
    }
    fn send_quantum(&self) -> Option<usize> {
        dispatch!(self, cc => cc.send_quantum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_by_name() {
        let algorithm = CcAlgorithm::from_name("newreno").unwrap();
        assert_eq!(algorithm, CcAlgorithm::default());
        let cc = algorithm.build(1460);
        assert_eq!(cc.name(), algorithm.name());
        assert_eq!(cc.cwnd(), 14600);
        assert_eq!(cc.mss(), 1460);
        assert!(cc.in_slow_start());
        assert_eq!(CcAlgorithm::from_name("bbr9"), None);
        for algorithm in [
            CcAlgorithm::Cubic,
            CcAlgorithm::Vegas,
            CcAlgorithm::Bbr,
            CcAlgorithm::Bbr1,
        ] {
            assert_eq!(CcAlgorithm::from_name(algorithm.name()), Some(algorithm));
            let cc = algorithm.build_with_initial_window(1000, 4);
            assert_eq!((cc.name(), cc.cwnd()), (algorithm.name(), 4000));
        }
    }

    /// The inline controller the connections hold behaves as the boxed one, call for
    /// call, for every algorithm.
    #[test]
    fn controller_matches_the_boxed_form() {
        let ms = Duration::from_millis;
        for algorithm in [
            CcAlgorithm::NewReno,
            CcAlgorithm::Cubic,
            CcAlgorithm::Vegas,
            CcAlgorithm::Bbr,
            CcAlgorithm::Bbr1,
        ] {
            let mut boxed = algorithm.build_with_initial_window(1000, 4);
            let mut inline = Controller::new(algorithm, 1000, 4, WindowRules::default());
            let mut now = Instant::ZERO;
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for step in 0..2000u64 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                now += ms(1 + state % 20);
                let flight = (state >> 8) as usize % 50_000;
                let rtt = (!state.is_multiple_of(3)).then(|| ms(10 + (state >> 20) % 90));
                for cc in [boxed.as_mut(), &mut inline as &mut dyn CongestionControl] {
                    match state % 23 {
                        0 => cc.on_enter_recovery(now, flight),
                        1 => cc.on_enter_sack_recovery(now, flight),
                        2 => cc.on_dup_ack_in_recovery(),
                        3 => cc.on_partial_ack(flight % 3000),
                        4 => cc.on_exit_recovery(now, flight),
                        5 => cc.on_rto(now, flight),
                        6 => cc.on_idle_restart(now),
                        15 => cc.on_ecn(now, flight),
                        7 if step % 500 == 0 => cc.set_mss(500 + (state as usize % 1000)),
                        8..=12 => {
                            let sample = RateSample {
                                delivery_rate: (state >> 16) % 10_000_000,
                                delivered: (state >> 24) % 100_000,
                                rtt,
                                prior_delivered: step * 1000,
                                total_delivered: step * 1000 + 1000,
                                newly_acked: 1000,
                                lost: (state >> 40) % 3 * 1000,
                                tx_in_flight: flight as u64,
                                ..RateSample::default()
                            };
                            cc.on_rate_sample(now, &sample, flight);
                        }
                        13 => cc.on_loss(now, 1000, flight),
                        14 => cc.on_ecn_ce(now, 1000, 2000),
                        _ => {
                            let usage = CwndUsage {
                                limited: state & 1 == 1,
                                max_flight: flight,
                            };
                            let acked = 1 + (state >> 30) as usize % 4000;
                            cc.on_ack(now, acked, rtt, flight, usage);
                        }
                    }
                }
                let view = |cc: &dyn CongestionControl| {
                    (
                        cc.name(),
                        cc.cwnd(),
                        cc.ssthresh(),
                        cc.in_slow_start(),
                        cc.mss(),
                        cc.pacing_rate(),
                        cc.send_quantum(),
                        cc.wants_rate_samples(),
                    )
                };
                assert_eq!(view(&*boxed), view(&inline), "{algorithm:?} step {step}");
            }
        }
    }
}
