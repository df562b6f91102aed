//! Old TCPs as behaviour models: [`LegacyProfile`] sets a [`TcpConfig`]'s switches to
//! the algorithms a historical implementation ran (each switch a documented algorithm,
//! none a symptom), so the symptoms the seed documents report come out of a run rather
//! than being put in. Used by the simulator's seed scenarios (`profile = "vm-1990"`).
//!
//! What each profile is built from, and what is assumed where the sources are silent,
//! is on its variant.

use crate::time::Duration;

use super::cc::CcAlgorithm;
use super::rtt::RtoRule;
use super::{EcnMode, TcpConfig};

/// An old TCP, as a set of [`TcpConfig`] switches ([`LegacyProfile::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyProfile {
    /// A 1990 TCP without the 1987-88 repairs, as seed 003 describes IBM VM's ("less
    /// than MSS sized packets, too many retransmissions, timeouts of 20 seconds or more,
    /// and failure to combine ACKs with bidirectional data"): RFC 793's RTO (ALPHA 0.9,
    /// BETA 2, LBOUND 1 s) without Karn's rule, doubled on each timeout up to the
    /// 10-minute transmission timeout (no smaller cap); no congestion control (go back
    /// N over the whole window after a timeout); a segment per write and no Nagle; an
    /// immediate ACK for every segment, sent on its own; no options (no SACK,
    /// timestamps or window scaling); the initial RTO RFC 1122 gives (3 s); the
    /// connection given up after 10 minutes without progress (RFC 1122 §4.2.3.5's R2
    /// "at least 100 seconds", the report's 10 minutes).
    Vm1990,
    /// A 1975 TCP (seed 004's exerciser, Cerf's specification of December 1974): a
    /// fixed retransmission timer of the given length, never backed off, run by a
    /// retransmission process ([`TcpConfig::retransmit_process`]) that wakes every
    /// timeout (the report's Table VI ran both at 0.5 s and both at 4 s) and
    /// retransmits each letter older than the timeout and no other
    /// ([`TcpConfig::retransmit_due_only`]), each letter timed from its own send; no
    /// congestion control; a segment per write (a letter); an immediate ACK
    /// for each segment, or with a delayed ACK one only when the process wakes
    /// ([`TcpConfig::ack_on_wakeup`], the report's "acknowledgment only when the
    /// retransmission process woke up"); no options; no giving up (the report describes
    /// none).
    Exerciser1975 {
        /// The retransmission timeout (the seed's runs: 0.5 s and 4 s).
        timeout: Duration,
    },
    /// A 1985 TCP (seed 001's LISP Machine stack; the sources describe its speed, not
    /// its timers): RFC 793's RTO (ALPHA 0.875, BETA 2, LBOUND 1 s) without Karn's rule
    /// and backed off up to 64 s; no congestion control; immediate ACKs; no options.
    /// Writes are coalesced (the LISPM buffered a stream).
    Lispm1985,
}

impl LegacyProfile {
    /// The profile called `name` (`"vm-1990"`, `"lispm-1985"`,
    /// `"exerciser-1975"` with a 1 s timer; the simulator sets the timer).
    pub fn from_name(name: &str) -> Option<LegacyProfile> {
        match name {
            "vm-1990" => Some(LegacyProfile::Vm1990),
            "lispm-1985" => Some(LegacyProfile::Lispm1985),
            "exerciser-1975" => Some(LegacyProfile::Exerciser1975 {
                timeout: Duration::from_secs(1),
            }),
            _ => None,
        }
    }

    /// The names [`LegacyProfile::from_name`] knows.
    pub const NAMES: [&'static str; 3] = ["vm-1990", "exerciser-1975", "lispm-1985"];

    /// Set `config`'s switches to this TCP's algorithms; buffer sizes, MSS and the
    /// rest are left as they are.
    pub fn apply(self, config: &mut TcpConfig) {
        // What none of them had: options, SACK-based recovery, ECN, Jacobson's
        // algorithms, delayed ACKs.
        config.sack = false;
        config.timestamps = false;
        config.window_scaling = false;
        config.ecn = EcnMode::Off;
        config.rack = false;
        config.hystart = false;
        config.pacing = Some(false);
        config.congestion = CcAlgorithm::None;
        config.delayed_ack = Duration::ZERO;
        config.quick_acks = 0;
        config.nodelay = true;
        config.karn = false;
        config.black_hole_detection = false;
        config.min_rto = Duration::from_secs(1);
        match self {
            LegacyProfile::Vm1990 => {
                config.rto_rule = RtoRule::Rfc793 {
                    alpha_milli: 900,
                    beta_milli: 2000,
                };
                config.initial_rto = Duration::from_secs(3);
                config.max_rto = Duration::from_secs(600);
                config.user_timeout = Some(Duration::from_secs(600));
                config.max_retransmits = u32::MAX;
                config.segment_per_write = true;
            }
            LegacyProfile::Exerciser1975 { timeout } => {
                config.rto_rule = RtoRule::Fixed(timeout);
                config.initial_rto = timeout;
                config.min_rto = timeout;
                config.max_rto = timeout;
                config.segment_per_write = true;
                config.retransmit_process = Some(timeout);
                config.ack_on_wakeup = true;
                config.retransmit_due_only = true;
                // The report describes no giving up: a letter is resent until it is
                // acknowledged (a timeout per letter due, so R2's count would be
                // reached within seconds on a busy CPU).
                config.max_retransmits = u32::MAX;
            }
            LegacyProfile::Lispm1985 => {
                config.rto_rule = RtoRule::Rfc793 {
                    alpha_milli: 875,
                    beta_milli: 2000,
                };
                config.initial_rto = Duration::from_secs(3);
                config.max_rto = Duration::from_secs(64);
                config.segment_per_write = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_profiles_switch_what_they_say() {
        for name in LegacyProfile::NAMES {
            assert!(LegacyProfile::from_name(name).is_some(), "{name}");
        }
        assert_eq!(LegacyProfile::from_name("vm-1991"), None);
        let mut config = TcpConfig::default();
        LegacyProfile::Vm1990.apply(&mut config);
        assert!(!config.karn && config.segment_per_write && !config.sack);
        assert_eq!(config.congestion, CcAlgorithm::None);
        assert!(matches!(config.rto_rule, RtoRule::Rfc793 { .. }));
        let mut config = TcpConfig::default();
        let timeout = Duration::from_millis(500);
        LegacyProfile::Exerciser1975 { timeout }.apply(&mut config);
        assert_eq!(config.rto_rule, RtoRule::Fixed(timeout));
        assert_eq!(config.max_rto, timeout);
        assert_eq!(config.retransmit_process, Some(timeout));
        assert!(config.ack_on_wakeup && config.retransmit_due_only);
    }
}
