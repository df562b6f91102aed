//! Linux's send chronographs (`tcp_chrono_start`, `tcp_chrono_stop`; TCP_INFO's
//! `tcpi_busy_time` and `tcpi_rwnd_limited`): how long a connection had data to send,
//! and how much of that time the peer's window held it back. Kept only with
//! [`TcpConfig::send_chronographs`](crate::tcp::TcpConfig::send_chronographs), in the
//! connection's rare part, as no RFC asks for them.

use crate::time::{Duration, Instant};

/// What a connection's sending is doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SendLimit {
    /// Nothing queued to send or unacknowledged.
    #[default]
    Idle,
    /// Data queued or in flight (Linux's `TCP_CHRONO_BUSY`).
    Busy,
    /// Data waits for the peer's window: the next segment does not fit in it
    /// (`TCP_CHRONO_RWND_LIMITED`).
    ReceiveWindow,
}

/// Time spent in each [`SendLimit`] but `Idle`, the one running since `since`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendChronograph {
    /// The limit now.
    pub current: SendLimit,
    /// When `current` began (None while idle from the start).
    pub since: Option<Instant>,
    /// Time busy and not limited by the window, before `since`.
    pub busy: Duration,
    /// Time limited by the peer's window, before `since`.
    pub rwnd_limited: Duration,
}

impl SendChronograph {
    /// `limit` begins at `now`: the time of the one that ends is added up.
    pub(crate) fn set(&mut self, limit: SendLimit, now: Instant) {
        let elapsed = self
            .since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        match self.current {
            SendLimit::Idle => {}
            SendLimit::Busy => self.busy = self.busy + elapsed,
            SendLimit::ReceiveWindow => self.rwnd_limited = self.rwnd_limited + elapsed,
        }
        self.current = limit;
        self.since = Some(now);
    }

    /// At `now`: the time not idle (Linux's `tcpi_busy_time`, the window-limited time
    /// included) and the time limited by the window (`tcpi_rwnd_limited`).
    pub fn totals(&self, now: Instant) -> (Duration, Duration) {
        let running = self
            .since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let (mut busy, mut rwnd) = (self.busy, self.rwnd_limited);
        match self.current {
            SendLimit::Idle => {}
            SendLimit::Busy => busy = busy + running,
            SendLimit::ReceiveWindow => rwnd = rwnd + running,
        }
        (busy + rwnd, rwnd)
    }
}
