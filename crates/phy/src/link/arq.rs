//! Link-level retransmission on a point-to-point line ([`LinkConfig::arq`]): the
//! "local net reliability" and "retransmission between gateways" of the 1975 gateway
//! (seed 004): HDLC's numbered frames with go-back-N (LAPB, ISO 7776's balanced mode,
//! in outline).
//!
//! # Protocol
//! - **Sender** (each direction has one, at the sending end). A frame the host hands
//!   the link waits in the link's queue (`queue_limit_bytes` of frames not yet sent
//!   once; a frame that does not fit is tail-dropped). While fewer than `window` frames
//!   are unacknowledged, the next one goes out as an I-frame numbered N(S) = 0, 1, 2,
//!   ...; it carries [`ARQ_HEADER_BYTES`] more than the host's frame (HDLC's two-byte
//!   control field of extended numbering). Unacknowledged frames stay in the window
//!   for retransmission. The timer T1 (`timeout`) starts when an I-frame has gone out
//!   and none was running, and restarts whenever an acknowledgement frees a frame.
//! - **Receiver** (at the far end). HDLC's frame check sequence catches a damaged
//!   frame (the line's `corrupt` flipped a bit in it): it is discarded. An I-frame
//!   whose N(S) is the one expected is handed to the host and acknowledged with
//!   RR(N(R) = N(S) + 1). An I-frame beyond it (one was lost) is discarded and answered
//!   once per gap with REJ(N(R) = the number expected); a duplicate is discarded and
//!   answered with RR, so a sender whose acknowledgement was lost learns of it.
//! - **Acknowledgements take line time on the reverse direction.** An RR or REJ is a
//!   supervisory frame of [`ARQ_ACK_BYTES`] waiting for the reverse direction's
//!   transmitter, ahead of that direction's I-frames (one waiting frame, holding the
//!   latest N(R)); the reverse line's loss and corruption act on it as on any frame.
//! - **Go-back-N.** REJ(N) frees the frames below N and sends again from N; T1's expiry
//!   sends the whole window again from the oldest frame.
//! - **Giving up.** When T1 expires and the oldest frame has gone out `tries` times
//!   (LAPB's N2), the link gives up on it: the frame is lost (counted in
//!   [`LinkStats::arq_abandoned`](super::LinkStats::arq_abandoned)) and the link is
//!   reset, as HDLC resets a link (SABM/UA) after N2 tries: numbering restarts at 0 at
//!   both ends and the rest of the window is sent again. The model stands for the
//!   SABM/UA exchange with a reset count carried in the frames (no line time).
//!
//! Sequence numbers are unbounded here (HDLC counts modulo 8 or 128, which suffices
//! for windows below the modulus: the model leaves the wrap out). The receiver keeps
//! frames in order and loses none it has taken: what reaches the host is the host's
//! frames in order, without duplicates, less those the link gave up on. A reset can
//! duplicate, as HDLC's can: when the acknowledgements were what the line lost, the
//! frames behind the one given up on may have arrived already, and are sent (and
//! taken) again under the new numbering. A queue
//! discipline, a shaper or a policer do not combine with the ARQ (refused by
//! [`LinkConfig::validate`]); duplication and reordering on the wire do (duplicates are
//! discarded by number, a reordered frame is out of sequence).
//!
//! # Driving it
//! The two directions of a line are two [`LinkModel`]s; acknowledgements cross from
//! one to the other. After delivering a direction's frames (and after any call that
//! may have delivered), call [`LinkModel::exchange_arq`] on the pair: it moves the
//! acknowledgements the receivers owe onto the reverse transmitters and those that
//! arrived to the senders they are for. [`LinkModel::next_arrival`] includes the
//! sender's timer and the moment its transmitter becomes free for a waiting frame, so
//! [`LinkModel::poll_deliver`] must be called then even when nothing arrives.

use std::collections::VecDeque;
use std::fmt;

use impnet_core::{Duration, Instant};

use super::{DropReason, LinkConfig, LinkModel, Submit, bits_scaled, nanos_ceil};

/// Bytes an I-frame carries beyond the host's frame: HDLC's control field with
/// extended (modulo 128) numbering. The host frame's own 14-byte header stands for the
/// rest of the framing (flags, address, frame check sequence).
pub const ARQ_HEADER_BYTES: usize = 2;

/// Bytes of a supervisory frame (RR or REJ): flag, address, a two-byte control field,
/// a two-byte frame check sequence.
pub const ARQ_ACK_BYTES: usize = 6;

/// The settings of a line's link-level retransmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArqConfig {
    /// I-frames outstanding at most (HDLC's k: 7 with modulo-8 numbering).
    pub window: u16,
    /// The retransmission timer T1.
    pub timeout: Duration,
    /// Transmissions of one frame before the link gives up on it (LAPB's N2).
    pub tries: u32,
}

impl Default for ArqConfig {
    /// LAPB's usual settings: a window of 7, T1 of 3 s, N2 of 10.
    fn default() -> ArqConfig {
        ArqConfig {
            window: 7,
            timeout: Duration::from_secs(3),
            tries: 10,
        }
    }
}

impl ArqConfig {
    /// What is wrong with these settings on their own, if anything.
    pub fn problem(&self) -> Option<&'static str> {
        if self.window == 0 {
            return Some("window is 0: no frame could be sent");
        }
        if self.timeout == Duration::ZERO {
            return Some("timeout is 0: give the retransmission timer a duration");
        }
        if self.tries == 0 {
            return Some("tries is 0: a frame must be sent at least once");
        }
        None
    }

    /// What is wrong with running the ARQ on `config`'s line, if anything.
    pub(super) fn problem_on(&self, config: &LinkConfig) -> Option<&'static str> {
        if config.qdisc.is_some() || config.shape.is_some() || config.police.is_some() {
            return Some("does not combine with a queue discipline, a shaper or a policer");
        }
        self.problem()
    }
}

impl fmt::Display for ArqConfig {
    /// `WINDOW/TIMEOUT/TRIES`, the form `arq=` takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.window, self.timeout, self.tries)
    }
}

/// A supervisory frame: RR(N(R)), or REJ(N(R)) when `reject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ack {
    /// Link resets so far: an acknowledgement from before the last reset is ignored.
    resets: u32,
    /// N(R): the next frame number the receiver expects.
    nr: u64,
    reject: bool,
}

/// What an ARQ frame on the wire is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An I-frame numbered `ns` after `resets` link resets.
    Data { resets: u32, ns: u64 },
    /// A supervisory frame for the reverse direction's sender.
    Ack(Ack),
}

/// An ARQ frame's identity on the wire, and whether the line damaged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tag {
    pub(super) kind: Kind,
    /// A bit was flipped: the frame check sequence fails at the receiver.
    pub(super) damaged: bool,
}

/// An I-frame sent and not yet acknowledged.
#[derive(Debug, Clone)]
struct Outstanding {
    frame: Vec<u8>,
    /// Transmissions so far.
    tries: u32,
}

/// One direction's ARQ state: its sender, the far end's receiver of its I-frames, and
/// the supervisory frames this direction's wire carries for the reverse one.
#[derive(Debug, Clone)]
pub(super) struct Arq {
    config: ArqConfig,
    /// Frames not yet sent once, and their bytes.
    queue: VecDeque<Vec<u8>>,
    queue_bytes: usize,
    /// Sent, unacknowledged, oldest first; the first is numbered `base`.
    window: VecDeque<Outstanding>,
    base: u64,
    /// Index in `window` of the next frame to send again (`window.len()`: none).
    next: usize,
    resets: u32,
    t1: Option<Instant>,
    /// The receiver: resets seen, the number expected, a REJ sent for the current gap.
    rx_resets: u32,
    expected: u64,
    reject_sent: bool,
    /// An acknowledgement the receiver owes, for the reverse transmitter.
    owed: Option<Ack>,
    /// An acknowledgement for the reverse direction waiting for this transmitter.
    to_send: Option<Ack>,
    /// Acknowledgements that arrived on this wire, for the reverse direction's sender.
    arrived: Vec<Ack>,
}

impl Arq {
    pub(super) fn new(config: ArqConfig) -> Arq {
        Arq {
            config,
            queue: VecDeque::new(),
            queue_bytes: 0,
            window: VecDeque::new(),
            base: 0,
            next: 0,
            resets: 0,
            t1: None,
            rx_resets: 0,
            expected: 0,
            reject_sent: false,
            owed: None,
            to_send: None,
            arrived: Vec::new(),
        }
    }

    pub(super) fn set_config(&mut self, config: ArqConfig) {
        self.config = config;
    }

    /// Whether the transmitter has a frame to send as soon as it is free.
    fn has_work(&self) -> bool {
        self.to_send.is_some()
            || self.next < self.window.len()
            || (!self.queue.is_empty() && self.window.len() < usize::from(self.config.window))
    }

    /// Frames held (waiting or unacknowledged) and their buffers' bytes.
    pub(super) fn cached_bytes(&self) -> usize {
        let held = self
            .queue
            .iter()
            .chain(self.window.iter().map(|o| &o.frame));
        held.map(Vec::capacity).sum()
    }

    /// The receiver's verdict on an I-frame: whether it goes to the host. Records the
    /// acknowledgement owed.
    fn receive(&mut self, resets: u32, ns: u64) -> bool {
        if resets < self.rx_resets {
            return false;
        }
        if resets > self.rx_resets {
            // The link was reset (SABM/UA): numbering restarts at 0.
            (self.rx_resets, self.expected, self.reject_sent) = (resets, 0, false);
        }
        let rr = |nr| Ack {
            resets,
            nr,
            reject: false,
        };
        if ns == self.expected {
            self.expected += 1;
            self.reject_sent = false;
            self.owed = Some(rr(self.expected));
            return true;
        }
        if ns > self.expected {
            if !self.reject_sent {
                self.reject_sent = true;
                self.owed = Some(Ack {
                    reject: true,
                    ..rr(self.expected)
                });
            }
        } else if self.owed.is_none() {
            self.owed = Some(rr(self.expected));
        }
        false
    }
}

impl LinkModel {
    /// [`submit`](LinkModel::submit) on a line with ARQ: the frame joins the sender's
    /// queue (tail-dropped when full) and goes out when the window and the transmitter
    /// allow.
    pub(super) fn submit_arq(&mut self, now: Instant, frame: &[u8]) -> Submit {
        self.serve_arq(now);
        let limit = self.config.queue_limit_bytes;
        let Some(arq) = self.arq.as_deref_mut() else {
            return Submit::Dropped(DropReason::QueueFull);
        };
        if arq.queue_bytes.saturating_add(frame.len()) > limit {
            self.stats.dropped_queue += 1;
            return Submit::Dropped(DropReason::QueueFull);
        }
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        arq.queue_bytes += buf.len();
        arq.queue.push_back(buf);
        self.pump_arq(now, true);
        Submit::Held
    }

    /// Brings the sender up to `now`: the frames the transmitter started while waiting
    /// for it, the timer if it expired, then what may start now.
    pub(super) fn serve_arq(&mut self, now: Instant) {
        self.pump_arq(now, false);
        let expired = self
            .arq
            .as_ref()
            .and_then(|a| a.t1)
            .is_some_and(|t| t <= now);
        if expired {
            self.on_arq_timeout();
        }
        self.pump_arq(now, true);
    }

    /// Starts frames while the transmitter is free by `now`: each where the previous
    /// one ended, or (`from_now`, for work that appeared at `now`) no earlier than now.
    fn pump_arq(&mut self, now: Instant, from_now: bool) {
        let now_scaled = u128::from(now.as_nanos()).saturating_mul(self.scale());
        let floor = if from_now { now_scaled } else { 0 };
        while self.busy_until_scaled <= now_scaled {
            let Some(arq) = self.arq.as_deref_mut() else {
                return;
            };
            let start = self.busy_until_scaled.max(floor);
            if let Some(ack) = arq.to_send.take() {
                self.stats.arq_acks_sent += 1;
                let tag = Kind::Ack(ack);
                self.transmit_arq(start, &[0; ARQ_ACK_BYTES], 0, tag);
                continue;
            }
            if arq.next >= arq.window.len() {
                if arq.window.len() >= usize::from(arq.config.window) {
                    return;
                }
                let Some(frame) = arq.queue.pop_front() else {
                    return;
                };
                arq.queue_bytes -= frame.len();
                arq.window.push_back(Outstanding { frame, tries: 0 });
            } else {
                self.stats.arq_retransmitted += 1;
            }
            let index = arq.next;
            arq.next += 1;
            let (resets, ns) = (arq.resets, arq.base + index as u64);
            let outstanding = &mut arq.window[index];
            outstanding.tries += 1;
            let frame = std::mem::take(&mut outstanding.frame);
            let departs =
                self.transmit_arq(start, &frame, ARQ_HEADER_BYTES, Kind::Data { resets, ns });
            if let Some(arq) = self.arq.as_deref_mut() {
                arq.window[index].frame = frame;
                let timeout = arq.config.timeout;
                arq.t1.get_or_insert(departs + timeout);
            }
        }
    }

    /// T1 expired: go back to the oldest frame, or give up on it after `tries`.
    fn on_arq_timeout(&mut self) {
        let Some(arq) = self.arq.as_deref_mut() else {
            return;
        };
        arq.t1 = None;
        arq.next = 0;
        let given_up = arq
            .window
            .front()
            .is_some_and(|o| o.tries >= arq.config.tries);
        if given_up {
            if let Some(lost) = arq.window.pop_front() {
                self.recycle(lost.frame);
            }
            self.stats.arq_abandoned += 1;
            if let Some(arq) = self.arq.as_deref_mut() {
                // HDLC resets the link after N2 tries: numbering restarts at 0.
                arq.resets += 1;
                arq.base = 0;
                for o in &mut arq.window {
                    o.tries = 0;
                }
            }
        }
    }

    /// An acknowledgement for this direction's sender arrived at `now`.
    fn on_arq_ack(&mut self, now: Instant, ack: Ack) {
        self.serve_arq(now);
        let Some(arq) = self.arq.as_deref_mut() else {
            return;
        };
        if ack.resets != arq.resets || ack.nr < arq.base {
            return;
        }
        // Every frame in the window has gone out at least once.
        let acked = usize::try_from(ack.nr - arq.base).map_or(usize::MAX, |n| n);
        let acked = acked.min(arq.window.len());
        let freed: Vec<Vec<u8>> = arq.window.drain(..acked).map(|o| o.frame).collect();
        arq.base += freed.len() as u64;
        arq.next = arq.next.saturating_sub(freed.len());
        if !freed.is_empty() {
            arq.t1 = (!arq.window.is_empty()).then_some(now + arq.config.timeout);
        }
        if ack.reject {
            // REJ(N): send again from N.
            arq.next = 0;
        }
        for frame in freed {
            self.recycle(frame);
        }
        self.pump_arq(now, true);
    }

    /// An acknowledgement for the reverse direction, owed by its receiver, joins this
    /// transmitter (replacing one still waiting: the newer N(R) says more).
    fn send_arq_ack(&mut self, now: Instant, ack: Ack) {
        self.serve_arq(now);
        let Some(arq) = self.arq.as_deref_mut() else {
            return;
        };
        let reject = ack.reject || arq.to_send.is_some_and(|a| a.reject && a.nr == ack.nr);
        arq.to_send = Some(Ack { reject, ..ack });
        self.pump_arq(now, true);
    }

    /// Serialises an ARQ frame (`extra` bytes of header beyond `frame`) from `start`
    /// (scaled) and puts it on the wire unless the line loses it; returns when it
    /// departs.
    fn transmit_arq(&mut self, start: u128, frame: &[u8], extra: usize, kind: Kind) -> Instant {
        let serialisation = if self.config.rate_bps == 0 {
            0
        } else {
            bits_scaled(frame.len() + extra)
        };
        self.busy_until_scaled = start.saturating_add(serialisation);
        let departs = Instant::from_nanos(nanos_ceil(self.busy_until_scaled, self.scale()));
        if self.draw_loss() {
            self.stats.dropped_loss += 1;
            return departs;
        }
        let arrives = departs + self.config.delay;
        let tag = Tag {
            kind,
            damaged: false,
        };
        self.launch_copy(arrives, frame, false, Some(tag));
        if self.streams.duplicate.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            self.launch_copy(arrives, frame, false, Some(tag));
        }
        departs
    }

    /// The receiving end's handling of an ARQ frame that arrived: whether it goes to
    /// the host.
    pub(super) fn receive_arq(&mut self, tag: Tag) -> bool {
        let Some(arq) = self.arq.as_deref_mut() else {
            return true;
        };
        if tag.damaged {
            // The frame check sequence fails: HDLC discards the frame.
            self.stats.arq_discarded += 1;
            return false;
        }
        match tag.kind {
            Kind::Ack(ack) => {
                arq.arrived.push(ack);
                false
            }
            Kind::Data { resets, ns } => {
                let accepted = arq.receive(resets, ns);
                self.stats.arq_discarded += u64::from(!accepted);
                accepted
            }
        }
    }

    /// When the sender next needs a call: its timer, or the transmitter becoming free
    /// for a waiting frame.
    pub(super) fn next_arq_event(&self) -> Option<Instant> {
        let arq = self.arq.as_deref()?;
        let free = arq.has_work().then(|| self.busy_until());
        match (arq.t1, free) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves acknowledgements between the two directions of a line with ARQ at `now`
    /// (`a` and `b` carry its two directions): those each receiver owes onto the
    /// reverse transmitter, those that arrived to the sender they are for. Call it
    /// after delivering frames on either direction; each model's
    /// [`next_arrival`](LinkModel::next_arrival) may change. Returns whether anything
    /// moved. Does nothing on lines without ARQ.
    pub fn exchange_arq(a: &mut LinkModel, b: &mut LinkModel, now: Instant) -> bool {
        let there = a.take_arq_news();
        let back = b.take_arq_news();
        let moved = there.is_some() || back.is_some();
        for (news, other) in [(there, &mut *b), (back, &mut *a)] {
            let Some((owed, arrived)) = news else {
                continue;
            };
            if let Some(ack) = owed {
                other.send_arq_ack(now, ack);
            }
            for ack in arrived {
                other.on_arq_ack(now, ack);
            }
        }
        moved
    }

    /// What this direction has for the other: the acknowledgement its receiver owes
    /// and those that arrived on its wire (`None`: nothing).
    fn take_arq_news(&mut self) -> Option<(Option<Ack>, Vec<Ack>)> {
        let arq = self.arq.as_deref_mut()?;
        let owed = arq.owed.take();
        let arrived = std::mem::take(&mut arq.arrived);
        (owed.is_some() || !arrived.is_empty()).then_some((owed, arrived))
    }
}
