//! The socket error queue (`recvmsg(MSG_ERRQUEUE)`), as Linux fills it for TCP:
//! MSG_ZEROCOPY's completion notifications and SO_TIMESTAMPING's transmit timestamps.
//!
//! Both follow the bytes of the stream. The shim counts the bytes each socket's writes
//! handed the stack ([`ErrQueue::written`]); the stack's TCP_INFO says how many of them
//! are still queued (so how many were acknowledged) and how many of those are in flight
//! (so how far the highest byte sent reaches). After every turn of the stack
//! (`Shim::flush`) each socket with something pending compares those with its marks:
//!
//! - MSG_ZEROCOPY (with SO_ZEROCOPY on): each `send` that took bytes gets the next
//!   notification number; once all its bytes are acknowledged (Linux frees the last
//!   buffer that holds them) the number is queued, merged into the queue's last
//!   notification when it continues its range (`ee_info` first, `ee_data` last: Linux's
//!   `skb_zerocopy_notify_extend`). imp copies the data, so every notification says
//!   `SO_EE_CODE_ZEROCOPY_COPIED`, as Linux's does on a device without scatter-gather.
//!   A send that fails or takes nothing uses no number.
//! - SO_TIMESTAMPING: the last byte of each write is marked (Linux's
//!   `tcp_tx_timestamp`); SOF_TIMESTAMPING_TX_SCHED and TX_SOFTWARE queue an
//!   `SCM_TSTAMP_SCHED` and an `SCM_TSTAMP_SND` record when it is first sent, TX_ACK an
//!   `SCM_TSTAMP_ACK` when it is acknowledged. With SOF_TIMESTAMPING_OPT_ID `ee_data`
//!   is its offset from SND.UNA when the option was set (OPT_ID_TCP: from the bytes
//!   written by then). The time goes in an `SCM_TIMESTAMPING` message when
//!   SOF_TIMESTAMPING_SOFTWARE is on.
//!
//! A connection that ends without its bytes acknowledged (reset, abort) completes its
//! zero-copy sends, as Linux's purge of the write queue frees their buffers; it
//! acknowledges no timestamps.

use std::collections::VecDeque;

use impnet_core::Instant;
use impnet_core::tcp::{TcpInfo, TcpState};

use crate::errno::Errno;

/// `SO_ZEROCOPY` (asm-generic/socket.h).
pub const SO_ZEROCOPY: i32 = 60;
/// `SO_TIMESTAMPING` (`SO_TIMESTAMPING_OLD`, 64-bit `time_t`).
pub const SO_TIMESTAMPING: i32 = 37;
/// `SCM_TIMESTAMPING`: the control message carrying the times.
pub const SCM_TIMESTAMPING: i32 = SO_TIMESTAMPING;
/// `SO_EE_ORIGIN_ZEROCOPY`.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the data was copied after all.
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// `SCM_TSTAMP_SND`: handed to the device.
pub const SCM_TSTAMP_SND: u32 = 0;
/// `SCM_TSTAMP_SCHED`: entered the queueing discipline.
pub const SCM_TSTAMP_SCHED: u32 = 1;
/// `SCM_TSTAMP_ACK`: acknowledged by the peer.
pub const SCM_TSTAMP_ACK: u32 = 2;

/// SOF_TIMESTAMPING_* bits Linux knows (through `SOF_TIMESTAMPING_OPT_RX_FILTER`); a
/// value with others is EINVAL.
const SOF_MASK: u32 = (1 << 18) - 1;
const TX_SOFTWARE: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE;
const SOFTWARE: u32 = libc::SOF_TIMESTAMPING_SOFTWARE;
const OPT_ID: u32 = libc::SOF_TIMESTAMPING_OPT_ID;
const TX_SCHED: u32 = libc::SOF_TIMESTAMPING_TX_SCHED;
const TX_ACK: u32 = libc::SOF_TIMESTAMPING_TX_ACK;
const OPT_TSONLY: u32 = libc::SOF_TIMESTAMPING_OPT_TSONLY;
const OPT_ID_TCP: u32 = libc::SOF_TIMESTAMPING_OPT_ID_TCP;

/// One record on the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// Zero-copy sends `lo..=hi` completed.
    ZeroCopy {
        /// First notification number.
        lo: u32,
        /// Last notification number.
        hi: u32,
    },
    /// A transmit timestamp.
    Timestamp {
        /// SCM_TSTAMP_SCHED, _SND or _ACK.
        kind: u32,
        /// `ee_data`: the byte's key with OPT_ID, else 0.
        key: u32,
        /// When.
        at: Instant,
        /// OPT_TSONLY: no copy of the packet comes with it.
        tsonly: bool,
    },
}

/// A write's last byte, waiting to be sent or acknowledged.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Stream offset just past the byte.
    end: u64,
    /// The record flags (TX_SCHED, TX_SOFTWARE, TX_ACK) at the write.
    flags: u32,
}

/// A socket's error queue and what it waits for.
#[derive(Debug, Default)]
pub struct ErrQueue {
    records: VecDeque<Record>,
    /// Records queued or merged: each is a wake-up (epoll's edge for EPOLLERR).
    pub wakeups: u64,
    /// Bytes the application's writes handed the stack.
    pub written: u64,
    /// The most bytes seen acknowledged, and sent.
    acked: u64,
    sent: u64,
    /// The next zero-copy notification number.
    zerocopy_next: u32,
    /// Zero-copy sends not complete: (number, stream offset past their last byte).
    zerocopy: VecDeque<(u32, u64)>,
    /// SO_TIMESTAMPING as set.
    pub ts_flags: u32,
    /// OPT_ID's origin, a stream offset.
    ts_base: u64,
    /// Marks not yet sent, and sent but not yet acknowledged.
    unsent: VecDeque<Mark>,
    unacked: VecDeque<Mark>,
}

/// How far a connection's stream got, in bytes written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Handshake not done: nothing to say.
    Opening,
    /// Acknowledged and highest sent.
    At {
        /// Bytes acknowledged.
        acked: u64,
        /// Bytes sent at least once.
        sent: u64,
    },
    /// Ended with bytes unacknowledged, or gone: the buffers are freed.
    Purged,
}

impl Progress {
    /// The progress TCP_INFO shows for `written` bytes (None: no such connection).
    pub fn of(info: Option<&TcpInfo>, written: u64) -> Progress {
        let Some(info) = info else {
            return Progress::Purged;
        };
        match info.state {
            TcpState::SynSent | TcpState::SynReceived | TcpState::Listen => Progress::Opening,
            TcpState::Closed => Progress::Purged,
            TcpState::FinWait2 | TcpState::TimeWait => Progress::At {
                acked: written,
                sent: written,
            },
            _ => {
                let queued = u64::from(info.bytes_queued);
                let acked = written.saturating_sub(queued);
                let flight = u64::from(info.bytes_in_flight).min(queued);
                Progress::At {
                    acked,
                    sent: acked + flight,
                }
            }
        }
    }
}

impl ErrQueue {
    /// Whether the queue holds a record (POLLERR).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The oldest record, taken.
    pub fn pop(&mut self) -> Option<Record> {
        self.records.pop_front()
    }

    /// Whether anything waits for the stream to move.
    pub fn waiting(&self) -> bool {
        !self.zerocopy.is_empty() || !self.unsent.is_empty() || !self.unacked.is_empty()
    }

    /// SO_TIMESTAMPING set to `flags` on a socket whose stream has `acked` bytes
    /// acknowledged (None: not connected, where OPT_ID is EINVAL on Linux).
    pub fn set_timestamping(&mut self, flags: u32, acked: Option<u64>) -> Result<(), Errno> {
        if flags & !SOF_MASK != 0 || (flags & OPT_ID_TCP != 0 && flags & OPT_ID == 0) {
            return Err(libc::EINVAL);
        }
        if flags & OPT_ID != 0 && self.ts_flags & OPT_ID == 0 {
            let acked = acked.ok_or(libc::EINVAL)?;
            self.ts_base = if flags & OPT_ID_TCP != 0 {
                self.written
            } else {
                acked
            };
        }
        self.ts_flags = flags;
        Ok(())
    }

    /// A send call took bytes (the stream is now [`ErrQueue::written`] long):
    /// `zerocopy` when it was a MSG_ZEROCOPY one on a SO_ZEROCOPY socket.
    pub fn sent_call(&mut self, zerocopy: bool) {
        if zerocopy {
            let id = self.zerocopy_next;
            self.zerocopy_next = id.wrapping_add(1);
            self.zerocopy.push_back((id, self.written));
        }
        let flags = self.ts_flags & (TX_SCHED | TX_SOFTWARE | TX_ACK);
        if flags != 0 {
            self.unsent.push_back(Mark {
                end: self.written,
                flags,
            });
        }
    }

    fn push(&mut self, record: Record) {
        self.wakeups += 1;
        if let (
            Record::ZeroCopy { lo, hi },
            Some(Record::ZeroCopy {
                lo: tail_lo,
                hi: tail_hi,
            }),
        ) = (record, self.records.back_mut())
        {
            // Linux's skb_zerocopy_notify_extend: a range that continues the last one
            // (and keeps it under 2^32 numbers) extends it.
            let span = u64::from(tail_hi.wrapping_sub(*tail_lo)) + 1;
            let more = u64::from(hi.wrapping_sub(lo)) + 1;
            if lo == tail_hi.wrapping_add(1) && span + more < 1 << 32 {
                *tail_hi = hi;
                return;
            }
        }
        self.records.push_back(record);
    }

    fn timestamp(&mut self, kind: u32, mark: Mark, at: Instant) {
        let key = if self.ts_flags & OPT_ID != 0 {
            // Linux's u32 key: the byte's sequence number less the origin's.
            (mark.end.wrapping_sub(1).wrapping_sub(self.ts_base)) as u32
        } else {
            0
        };
        self.push(Record::Timestamp {
            kind,
            key,
            at,
            tsonly: self.ts_flags & OPT_TSONLY != 0,
        });
    }

    /// The stream moved to `progress` at `now`: queue what became due, in Linux's
    /// order (an ACK's timestamps and completions, then what it let out).
    pub fn update(&mut self, progress: Progress, now: Instant) {
        let (acked, sent, purged) = match progress {
            Progress::Opening => return,
            Progress::At { acked, sent } => (acked, sent, false),
            Progress::Purged => (self.acked, self.sent, true),
        };
        self.acked = self.acked.max(acked);
        self.sent = self.sent.max(sent).max(self.acked);
        while let Some(&mark) = self.unacked.front() {
            if mark.end > self.acked {
                break;
            }
            self.unacked.pop_front();
            self.timestamp(SCM_TSTAMP_ACK, mark, now);
        }
        while let Some(&(id, end)) = self.zerocopy.front() {
            if end > self.acked && !purged {
                break;
            }
            self.zerocopy.pop_front();
            self.push(Record::ZeroCopy { lo: id, hi: id });
        }
        while let Some(&mark) = self.unsent.front() {
            if mark.end > self.sent {
                break;
            }
            self.unsent.pop_front();
            if mark.flags & TX_SCHED != 0 {
                self.timestamp(SCM_TSTAMP_SCHED, mark, now);
            }
            if mark.flags & TX_SOFTWARE != 0 {
                self.timestamp(SCM_TSTAMP_SND, mark, now);
            }
            if mark.flags & TX_ACK != 0 {
                if mark.end <= self.acked {
                    self.timestamp(SCM_TSTAMP_ACK, mark, now);
                } else {
                    self.unacked.push_back(mark);
                }
            }
        }
        if purged {
            self.unsent.clear();
            self.unacked.clear();
        }
    }

    /// Whether a record's time goes with it (SOF_TIMESTAMPING_SOFTWARE).
    pub fn reports_software(&self) -> bool {
        self.ts_flags & SOFTWARE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn zerocopy_completes_on_ack_and_merges_consecutive_numbers() {
        let mut q = ErrQueue {
            written: 4000,
            ..ErrQueue::default()
        };
        q.sent_call(true);
        q.update(
            Progress::At {
                acked: 0,
                sent: 4000,
            },
            at(0),
        );
        assert!(q.is_empty(), "nothing acknowledged yet");
        q.written = 8000;
        q.sent_call(true);
        q.update(
            Progress::At {
                acked: 4000,
                sent: 8000,
            },
            at(1),
        );
        q.update(
            Progress::At {
                acked: 8000,
                sent: 8000,
            },
            at(2),
        );
        assert_eq!(q.pop(), Some(Record::ZeroCopy { lo: 0, hi: 1 }));
        assert_eq!(q.pop(), None);
        assert_eq!(q.wakeups, 2, "each completion wakes");
        q.written = 9000;
        q.sent_call(true);
        q.update(
            Progress::At {
                acked: 9000,
                sent: 9000,
            },
            at(3),
        );
        assert_eq!(q.pop(), Some(Record::ZeroCopy { lo: 2, hi: 2 }));
    }

    #[test]
    fn zerocopy_of_a_purged_stream_completes() {
        let mut q = ErrQueue {
            written: 10,
            ..ErrQueue::default()
        };
        q.sent_call(true);
        q.update(Progress::Purged, at(0));
        assert_eq!(q.pop(), Some(Record::ZeroCopy { lo: 0, hi: 0 }));
    }

    #[test]
    fn a_plain_send_takes_no_number() {
        let mut q = ErrQueue {
            written: 10,
            ..ErrQueue::default()
        };
        q.sent_call(false);
        q.written = 20;
        q.sent_call(true);
        q.update(
            Progress::At {
                acked: 20,
                sent: 20,
            },
            at(0),
        );
        assert_eq!(q.pop(), Some(Record::ZeroCopy { lo: 0, hi: 0 }));
    }

    #[test]
    fn timestamps_of_the_last_byte_when_sent_and_acked() {
        let mut q = ErrQueue::default();
        q.set_timestamping(TX_SCHED | TX_SOFTWARE | TX_ACK | SOFTWARE | OPT_ID, Some(0))
            .unwrap();
        q.written = 11000;
        q.sent_call(false);
        q.update(
            Progress::At {
                acked: 0,
                sent: 10000,
            },
            at(10),
        );
        assert!(q.is_empty(), "the last byte is not sent yet");
        q.update(
            Progress::At {
                acked: 10000,
                sent: 11000,
            },
            at(20),
        );
        q.update(
            Progress::At {
                acked: 11000,
                sent: 11000,
            },
            at(30),
        );
        let kinds: Vec<(u32, u32, Instant)> = core::iter::from_fn(|| q.pop())
            .map(|r| match r {
                Record::Timestamp { kind, key, at, .. } => (kind, key, at),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (SCM_TSTAMP_SCHED, 10999, at(20)),
                (SCM_TSTAMP_SND, 10999, at(20)),
                (SCM_TSTAMP_ACK, 10999, at(30)),
            ]
        );
    }

    #[test]
    fn opt_id_counts_from_snd_una_when_set() {
        let mut q = ErrQueue {
            written: 100,
            ..ErrQueue::default()
        };
        q.set_timestamping(TX_ACK | OPT_ID, Some(60)).unwrap();
        q.written = 150;
        q.sent_call(false);
        q.update(
            Progress::At {
                acked: 150,
                sent: 150,
            },
            at(1),
        );
        assert!(matches!(
            q.pop(),
            Some(Record::Timestamp {
                kind: SCM_TSTAMP_ACK,
                key: 89,
                ..
            })
        ));
        assert_eq!(q.set_timestamping(1 << 20, Some(0)), Err(libc::EINVAL));
        let mut fresh = ErrQueue::default();
        assert_eq!(fresh.set_timestamping(OPT_ID, None), Err(libc::EINVAL));
    }
}
