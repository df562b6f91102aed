//! Challenge ACKs (RFC 5961 §7) under a budget: one connection's count per second and
//! the generator its budgets are drawn from.

use crate::rng::Rng;
use crate::secret::Secret;
use crate::time::{Duration, Instant};

/// One connection's challenge ACKs in the current second (RFC 5961 §7). The budget is
/// per connection: a budget shared by all connections is an off-path side channel
/// (CVE-2016-5696, Cao et al. 2016: an attacker who exhausts the shared budget with its
/// own connection and counts the challenge ACKs it gets back learns whether a guessed
/// segment hit another connection). Each second's budget is also drawn at random,
/// between half of [`TcpConfig::challenge_ack_limit`](super::TcpConfig::challenge_ack_limit) and all of it, from the stack's
/// secret, so it is no constant an attacker could count down either.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChallengeBudget {
    /// Start of the current second; `None` before the first challenge ACK.
    pub start: Option<Instant>,
    /// Challenge ACKs sent in it (`<= allowed`).
    pub sent: u32,
    /// This second's budget (`<= TcpConfig::challenge_ack_limit`).
    pub allowed: u32,
    /// When the last one went: they are spaced at least a second divided by the budget
    /// apart, never sent in a burst (three challenge ACKs in one round trip would be
    /// duplicate ACKs to the peer, and a spurious fast retransmit).
    pub last: Option<Instant>,
}

impl ChallengeBudget {
    /// RFC 5961 §7: whether one more challenge ACK may go at `now` (and counts it); a
    /// new second draws its budget from `rng`, at most `limit`.
    pub fn allow(&mut self, now: Instant, rng: &mut Rng, limit: u32) -> bool {
        if self
            .start
            .is_none_or(|start| now - start >= Duration::from_secs(1))
        {
            self.start = Some(now);
            self.sent = 0;
            self.allowed = draw_budget(rng, limit);
        }
        let spacing = Duration::from_nanos(1_000_000_000 / u64::from(self.allowed.max(1)));
        if self.sent < self.allowed && self.last.is_none_or(|last| now - last >= spacing) {
            self.sent += 1;
            self.last = Some(now);
            true
        } else {
            false
        }
    }
}

/// A budget in `ceil(limit / 2)..=limit`.
fn draw_budget(rng: &mut Rng, limit: u32) -> u32 {
    if limit == 0 {
        return 0;
    }
    rng.in_range(limit.div_ceil(2), limit)
}

/// The generator the challenge-ACK budgets are drawn from, keyed by the stack's secret.
pub(crate) fn challenge_rng(secret: &Secret) -> Rng {
    Rng::new(secret.derive(b"challenge acks"))
}
