//! How much a write takes and when a writer is woken, as Linux's send buffer accounts
//! for it (`tcp_sendmsg`, `tcp_poll`, `sk_stream_write_space`).
//!
//! imp's connection takes bytes into one buffer; Linux queues them in skbs and charges
//! each its truesize (`sk_wmem_queued`): the bytes plus an skb's overhead. A write
//! appends to the last unsent skb up to the size goal (the MSS times the segments of
//! half the peer's largest window, at most 64 KiB) and opens a new skb only while
//! `sk_wmem_queued < sk_sndbuf` and, with TCP_NOTSENT_LOWAT, fewer unsent bytes than
//! the limit are queued; so a write may pass the buffer by up to one skb. A sent skb
//! is split where each packet ended (`tso_fragment`), a partly acknowledged one is
//! trimmed. The model keeps the skb boundaries of the unacknowledged bytes and no data.
//!
//! Writable (`__sk_stream_is_writeable`): free space at least half what is queued,
//! memory free, and twice the unsent bytes below the low-water mark. A writer that
//! found no room (`SOCK_NOSPACE`) is woken on an ACK only once the socket is writable
//! so (`sk_stream_write_space`); a buffer the application did not size grows then with
//! the congestion window (`tcp_sndbuf_expand`) unless the window was full when the ACK
//! came.

use std::collections::VecDeque;

/// An skb's own truesize before data: `SKB_TRUESIZE` of the 704 head bytes a
/// `MAX_TCP_HEADER` allocation gets (1024-byte slab less the shared info), plus
/// `struct sk_buff` (256 aligned) and `struct skb_shared_info` (320).
pub const SKB_OVERHEAD: usize = 1280;
/// `SOCK_MIN_SNDBUF`: twice `TCP_SKB_MIN_TRUESIZE` (2048 + 256).
pub const SOCK_MIN_SNDBUF: usize = 4608;
/// The largest GSO packet (`GSO_LEGACY_MAX_SIZE`).
const GSO_MAX_SIZE: usize = 65536;
/// `MAX_TCP_HEADER` plus the aligned `struct skb_shared_info`, for `tcp_sndbuf_expand`.
const PER_MSS_HEADROOM: usize = 320 + 320;
/// The aligned `struct sk_buff`.
const SK_BUFF: usize = 256;
/// `TCP_INIT_CWND`.
const INIT_CWND: usize = 10;

/// `sk_sndbuf` for SO_SNDBUF's `asked` bytes: doubled, at least `SOCK_MIN_SNDBUF`.
pub fn locked_sndbuf(asked: i32) -> usize {
    (asked.unsigned_abs() as usize * 2).max(SOCK_MIN_SNDBUF)
}

/// `tcp_tso_autosize`: a millisecond of the pacing rate (`sk_pacing_shift` 10), plus
/// a share of 64 KiB on short paths (`tcp_tso_rtt_log` 9: halved for each 512 µs of
/// RTT), in whole segments, at least `min_tso_segs` (`tcp_min_tso_segs`).
pub(crate) fn tso_autosize(
    info: &impnet_core::tcp::TcpInfo,
    mss: usize,
    min_tso_segs: usize,
) -> usize {
    let rate = info.pacing_rate.unwrap_or(0) >> 10;
    let rtt_us = info.srtt.map_or(u64::MAX, |d| d.as_nanos() / 1000);
    let shift = rtt_us >> 9;
    let bonus = if shift < 32 {
        GSO_MAX_SIZE as u64 >> shift
    } else {
        0
    };
    let bytes = usize::try_from(rate + bonus)
        .unwrap_or(usize::MAX)
        .min(GSO_MAX_SIZE);
    (bytes / mss).max(min_tso_segs).max(1) * mss
}

/// The connection as the model needs it, from the stack's TCP_INFO.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    /// Bytes acknowledged, of those written.
    pub acked: u64,
    /// Bytes sent at least once.
    pub sent: u64,
    /// The send MSS (options subtracted).
    pub mss: usize,
    /// Congestion window, bytes.
    pub cwnd: usize,
    /// Bytes in flight.
    pub flight: usize,
    /// The peer's window, bytes.
    pub wnd: usize,
    /// The largest TSO packet Linux would send now (`tcp_tso_autosize`), bytes; 0:
    /// no limit.
    pub tso: usize,
    /// Now and the smoothed RTT, microseconds (0: no sample).
    pub now_us: u64,
    pub srtt_us: u64,
}

/// One connection's send buffer as Linux would account for it.
#[derive(Debug, Clone, Default)]
pub struct SendModel {
    /// Where each skb holding unacknowledged bytes ends (stream offsets), oldest first.
    ends: VecDeque<u64>,
    /// Bytes written (taken by the stack).
    written: u64,
    /// As of the last look: acknowledged and sent.
    acked: u64,
    sent: u64,
    /// The largest window the peer offered.
    max_window: usize,
    /// `sk_sndbuf`; 0 until the connection is first seen established.
    pub sndbuf: usize,
    /// Set by SO_SNDBUF: no growth.
    pub locked: bool,
    /// `tcp_wmem`'s default and maximum: the buffer's start and growth limit.
    pub wmem: (usize, usize),
    /// `tcp_min_tso_segs`.
    pub min_tso_segs: usize,
    /// `tcp_notsent_lowat` when the socket was made (u32::MAX: none).
    pub sysctl_lowat: u32,
    /// `SOCK_NOSPACE`: a writer or poll found no room since the last wake-up.
    pub nospace: bool,
    /// Write-space wake-ups so far (an EPOLLET edge, a blocked writer's cue).
    pub wakeups: u64,
    /// When each burst went (its end, microseconds), for the bytes not yet
    /// acknowledged.
    bursts: VecDeque<(u64, u64)>,
    /// Before the last ACK: the bytes sent and where the unsent skbs ended.
    pre_sent: u64,
    pre_unsent: Vec<u64>,
}

impl SendModel {
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// `sk_wmem_queued`.
    pub fn queued(&self) -> usize {
        usize::try_from(self.written - self.acked).unwrap_or(usize::MAX)
            + SKB_OVERHEAD * self.ends.len()
    }

    fn unsent(&self) -> u64 {
        self.written - self.sent
    }

    /// `tcp_sndbuf_expand`: room for twice the congestion window of worst-case skbs.
    fn expanded(&self, view: &View) -> usize {
        let per_mss = (view.mss + PER_MSS_HEADROOM).next_power_of_two() + SK_BUFF;
        let segments = (view.cwnd / view.mss.max(1)).max(INIT_CWND);
        (2 * segments * per_mss).min(self.wmem.1)
    }

    /// Split the skb holding `at` there (no-op at a boundary or outside).
    fn split(&mut self, at: u64) {
        if at <= self.acked || at >= self.written {
            return;
        }
        let i = self.ends.partition_point(|&end| end < at);
        if i < self.ends.len() && self.ends[i] != at {
            self.ends.insert(i, at);
        }
    }

    /// Bytes up to `sent` went out since the last look, as one burst: each skb sent
    /// is cut into TSO packets of at most `tso` bytes, and the last where the burst
    /// ended (`tso_fragment`).
    fn sent_burst(&mut self, sent: u64, tso: usize) {
        let from = self.sent;
        self.sent = sent;
        if tso > 0 {
            let mut i = self.ends.partition_point(|&end| end <= from);
            let mut start = from;
            while i < self.ends.len() && start < sent {
                let end = self.ends[i].min(sent);
                let mut cut = start + tso as u64;
                while cut < end {
                    self.split(cut);
                    cut += tso as u64;
                }
                start = end;
                i = self.ends.partition_point(|&e| e <= start);
            }
        }
        self.split(sent);
    }

    /// Take in what the stack says now: acknowledged skbs go, sent ones are split
    /// where sending stopped. The first look at an established connection sizes an
    /// unlocked buffer as `tcp_init_buffer_space` does.
    pub fn sync(&mut self, view: &View) {
        if self.sndbuf == 0 {
            self.sndbuf = self.wmem.0.max(self.expanded(view));
        }
        self.max_window = self.max_window.max(view.wnd);
        let sent = view.sent.min(self.written);
        if sent > self.sent {
            self.sent_burst(sent, view.tso);
            self.bursts.push_back((sent, view.now_us));
        }
        if view.acked > self.acked {
            self.acked = view.acked.min(self.written);
            while self.ends.front().is_some_and(|&end| end <= self.acked) {
                self.ends.pop_front();
            }
            while self
                .bursts
                .front()
                .is_some_and(|&(end, _)| end <= self.acked)
            {
                self.bursts.pop_front();
            }
        }
    }

    /// Note what was sent and queued before an ACK is processed.
    pub fn before_ack(&mut self, view: &View) {
        self.sync(view);
        self.pre_sent = self.sent;
        self.pre_unsent = self
            .ends
            .iter()
            .copied()
            .filter(|&e| e > self.sent)
            .collect();
    }

    /// The segments Linux would have in flight once the ACK made room
    /// (`tcp_write_xmit`): each unsent skb goes while the windows allow, a part of one
    /// in TSO packets, unless `tcp_tso_should_defer` holds it back to send more at once.
    fn linux_flight(&self, view: &View) -> usize {
        let mss = view.mss.max(1) as u64;
        let cwnd = view.cwnd as u64 / mss;
        let acked = self.acked;
        let wnd_end = acked + view.wnd as u64;
        let max_segs = (view.tso as u64 / mss).max(1);
        let mut flight = self.pre_sent.saturating_sub(acked).div_ceil(mss);
        // Whether the oldest unacknowledged packet left less than half an RTT ago.
        let head_recent = |flight: u64| {
            flight == 0
                || self
                    .bursts
                    .iter()
                    .find(|&&(end, _)| end > acked)
                    .is_none_or(|&(_, at)| view.now_us.saturating_sub(at) < view.srtt_us / 2)
        };
        let mut start = self.pre_sent.max(acked);
        let last = self.pre_unsent.len().saturating_sub(1);
        for (i, &end) in self.pre_unsent.iter().enumerate() {
            let mut from = start.max(acked);
            while from < end {
                if flight >= cwnd || from >= wnd_end {
                    return flight as usize;
                }
                let len = end - from;
                let limit = (wnd_end - from).min((cwnd - flight) * mss);
                let defer = len > mss
                    && limit < max_segs * mss
                    && !(i != last && limit >= len)
                    && limit < (view.wnd as u64).min(cwnd * mss) / 3
                    && !head_recent(flight);
                let amount = len.min(limit / mss * mss).min(max_segs * mss);
                if defer || amount == 0 {
                    return flight as usize;
                }
                flight += amount.div_ceil(mss);
                from += amount;
            }
            start = end;
        }
        flight as usize
    }

    /// After an ACK (`tcp_check_space`): a socket that ran out of room grows its
    /// buffer if it may and the window is not full once the ACK's room is used
    /// (`tcp_should_expand_sndbuf`), and wakes its writer once writable; true on a
    /// wake-up.
    pub fn after_ack(&mut self, view: &View, lowat: u32) -> bool {
        self.sync(view);
        if !self.nospace {
            return false;
        }
        if !self.locked && self.linux_flight(view) < view.cwnd / view.mss.max(1) {
            self.sndbuf = self.sndbuf.max(self.expanded(view));
        }
        if self.writable(lowat) {
            self.nospace = false;
            self.wakeups += 1;
            return true;
        }
        false
    }

    /// `__sk_stream_is_writeable(sk, 1)`: what poll reports as POLLOUT.
    pub fn writable(&self, lowat: u32) -> bool {
        let queued = self.queued();
        queued < self.sndbuf
            && self.sndbuf - queued >= queued / 2
            && self.unsent().saturating_mul(2) < u64::from(lowat)
    }

    /// `sk_stream_memory_free`: a write may open a new skb.
    fn memory_free(&self, lowat: u32) -> bool {
        self.queued() < self.sndbuf && self.unsent() < u64::from(lowat)
    }

    /// `tcp_xmit_size_goal`: whole segments of at most half the peer's largest window
    /// (`tcp_bound_to_half_wnd`) and one GSO packet; at least one segment.
    fn size_goal(&self, mss: usize) -> usize {
        let mss = mss.max(1);
        let half = if self.max_window > 536 {
            self.max_window / 2
        } else {
            self.max_window
        };
        let bound = if half > 0 {
            GSO_MAX_SIZE.min(half)
        } else {
            GSO_MAX_SIZE
        };
        (bound / mss * mss).max(mss)
    }

    /// How many of `want` bytes a write takes now (`tcp_sendmsg`). Filling an skb that
    /// is the next to send pushes it (`tcp_push_one`): what the congestion and peer
    /// windows allow of it counts as sent, as it would be before the write goes on.
    /// Sets `nospace` when the write stops short.
    pub fn write(&mut self, want: usize, view: &View, lowat: u32) -> usize {
        self.sync(view);
        let goal = self.size_goal(view.mss) as u64;
        let mss = view.mss.max(1) as u64;
        let in_flight = self.sent - self.acked;
        let allowed = view.cwnd.min(view.wnd).saturating_sub(in_flight as usize) as u64;
        let mut budget = allowed / mss * mss;
        let mut taken = 0u64;
        let want = want as u64;
        while taken < want {
            let start = self.tail_start();
            let tail = self.ends.back().copied();
            match tail {
                Some(end) if start >= self.sent && end - start < goal => {
                    let copy = (goal - (end - start)).min(want - taken);
                    *self.ends.back_mut().expect("tail") += copy;
                    self.written += copy;
                    taken += copy;
                    if end + copy - start == goal && start == self.sent && budget > 0 {
                        let tso = if view.tso > 0 { view.tso as u64 } else { goal };
                        let send = goal.min(budget).min(tso);
                        budget -= send;
                        self.sent_burst(self.sent + send, 0);
                        self.bursts.push_back((self.sent, view.now_us));
                    }
                }
                _ => {
                    if !self.memory_free(lowat) {
                        self.nospace = true;
                        break;
                    }
                    self.ends.push_back(self.written);
                }
            }
        }
        // An skb opened and left empty is given back (`tcp_remove_empty_skb`).
        if self
            .ends
            .back()
            .is_some_and(|&end| end == self.tail_start() && end == self.written)
            && self.ends.len() > 1
        {
            self.ends.pop_back();
        }
        usize::try_from(taken).unwrap_or(usize::MAX)
    }

    /// `n` bytes the stack took outside [`SendModel::write`] (a Fast Open write):
    /// queued without limits.
    pub fn took(&mut self, n: usize) {
        let n = n as u64;
        if n == 0 {
            return;
        }
        if self.ends.is_empty() || self.tail_start() < self.sent {
            self.ends.push_back(self.written);
        }
        self.written += n;
        *self.ends.back_mut().expect("tail") = self.written;
    }

    /// The stack took `n` bytes fewer than [`SendModel::write`] planned.
    pub fn give_back(&mut self, n: usize) {
        let n = (n as u64).min(self.written - self.sent.max(self.acked));
        self.written -= n;
        while self.ends.back().is_some_and(|&end| end > self.written) {
            let start = self.tail_start();
            if start >= self.written && self.ends.len() > 1 {
                self.ends.pop_back();
            } else {
                *self.ends.back_mut().expect("tail") = self.written;
                break;
            }
        }
    }

    /// Where the last skb starts.
    fn tail_start(&self) -> u64 {
        let n = self.ends.len();
        if n >= 2 { self.ends[n - 2] } else { self.acked }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(acked: u64, sent: u64, cwnd: usize, wnd: usize, mss: usize) -> View {
        View {
            acked,
            sent,
            mss,
            cwnd,
            flight: (sent - acked) as usize,
            wnd,
            tso: 10 * mss,
            now_us: 0,
            srtt_us: 0,
        }
    }

    #[test]
    fn a_write_stops_at_a_new_skb_once_the_buffer_is_full() {
        // upstream's timestamping/partial: SO_SNDBUF 1000 (4608 after the floor), MSS
        // 988, a 2000-byte window: three 988-byte skbs.
        let mut m = SendModel {
            sndbuf: locked_sndbuf(1000),
            locked: true,
            ..SendModel::default()
        };
        let v = view(0, 0, 9880, 2000, 988);
        assert_eq!(m.write(10000, &v, u32::MAX), 2964);
        assert!(m.nospace);
    }

    #[test]
    fn notsent_lowat_stops_a_write_at_the_limit() {
        // notsent-lowat-setsockopt: the first 16000-byte skb pushes 10000 bytes, the
        // rest fills one more skb; 16000 unsent reach the 4000-byte limit.
        let mut m = SendModel {
            wmem: (262144, 4194304),
            ..SendModel::default()
        };
        let v = view(0, 0, 10000, 32896, 1000);
        assert_eq!(m.write(59000, &v, 4000), 26000);
        // Without a limit, the 50000-byte buffer stops it after four skbs.
        let mut m = SendModel {
            wmem: (50000, 4194304),
            ..SendModel::default()
        };
        assert_eq!(m.write(59000, &v, u32::MAX), 58000);
        assert!(!m.writable(u32::MAX));
    }

    #[test]
    fn a_writer_wakes_once_a_third_of_the_buffer_is_free() {
        // blocking-write: SO_SNDBUF 21000, 25000-byte skbs, split where 10-segment
        // packets end.
        let mut m = SendModel {
            sndbuf: locked_sndbuf(21000),
            locked: true,
            ..SendModel::default()
        };
        let v = view(0, 0, 10000, 50000, 1000);
        assert_eq!(m.write(61000, &v, u32::MAX), 60000);
        // Bursts of 20 and 30 segments, in TSO packets of 10.
        m.sync(&view(10000, 30000, 20000, 50000, 1000));
        m.sync(&view(30000, 60000, 40000, 50000, 1000));
        assert!(!m.after_ack(&view(35000, 60000, 40000, 50000, 1000), u32::MAX));
        assert!(m.after_ack(&view(36000, 60000, 40000, 50000, 1000), u32::MAX));
        assert_eq!(m.wakeups, 1);
    }
}
