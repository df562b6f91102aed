//! TCP super-segments on the link ([`LinkModel::submit_segmented`]): a 64 KiB GSO
//! frame from a TAP with offloads crosses whole, charged for its wire frames, unless
//! one of those frames is lost; then it is cut into them.
//!
//! # Model
//! A super-segment of payload `P` cut every `gso_size` bytes is `n = ceil(P /
//! gso_size)` wire frames, each with the super-segment's headers. The link treats it
//! as those `n` frames sent back to back at once:
//! - the MTU is checked against the largest of them;
//! - it starts when the transmitter is free and serialises for the time of all `n`
//!   frames' bytes (headers included), so a rate limit charges what a wire carries;
//! - the drop-tail queue takes it if all `n` frames fit; if not, it is cut and its
//!   frames offered one by one (the queue takes those that fit, as it would have);
//! - the loss models draw for each of the `n` frames in turn, exactly the draws
//!   [`submit`](LinkModel::submit) makes for `n` frames (the independent loss, then a
//!   step of the Gilbert-Elliott chain): loss is frame for frame the same statistics.
//!   When none is lost the super-segment travels whole; when any is, it is cut
//!   ([`segmentation::segment`]) and the frames the draws lost are dropped, the
//!   others travel as single frames with complete checksums;
//! - it arrives `delay` after its last frame departed (all `n` at once: the first
//!   frames arrive later by the time the others took to serialise, at most 64 KiB at
//!   the link's rate, nothing on a link without a rate).
//!
//! Impairments that act on single frames (reordering, duplication, corruption, a
//! queue discipline, a shaper, a policer or link-level retransmission) cut every super-segment into its frames
//! first, so they behave as without offloads.

use std::borrow::Cow;

use super::{LinkModel, Submit, Whole, nanos_ceil};
use crate::segmentation::{self, Framing, WireFrames};
use impnet_core::Instant;

/// A super-segment about to travel whole: where its serialisation starts (scaled), its
/// segment size, and the wire frames and bytes it stands for.
#[derive(Debug, Clone, Copy)]
struct WholeStart {
    start: u128,
    gso_size: u16,
    frames: usize,
    wire_bytes: usize,
}

impl LinkModel {
    /// Offers a TCP frame larger than one wire frame, standing for the frames it is
    /// cut into every `gso_size` payload bytes (a TAP's GSO frame: see *Super-segments*
    /// in the [`link`](crate::link) module). A frame that is not such a segment (or
    /// fits in one frame) is [`submit`](LinkModel::submit)ted as it is. Collect it with
    /// [`poll_deliver_segmented`](LinkModel::poll_deliver_segmented). Returns what
    /// became of the super-segment, or, cut, of its last frame.
    pub fn submit_segmented(&mut self, now: Instant, frame: &[u8], gso_size: u16) -> Submit {
        self.submit_segmented_in(now, Cow::Borrowed(frame), gso_size)
    }

    /// As [`submit_segmented`](LinkModel::submit_segmented), taking the frame's buffer:
    /// a super-segment that travels whole travels in it, not copied (64 KiB less to
    /// copy per segment); otherwise the buffer is kept for reuse, as
    /// [`recycle`](LinkModel::recycle) does. Decisions and timing are those of
    /// `submit_segmented` with the same bytes. Take buffers to read into from
    /// [`spare_buffer`](LinkModel::spare_buffer).
    pub fn submit_segmented_owned(
        &mut self,
        now: Instant,
        frame: Vec<u8>,
        gso_size: u16,
    ) -> Submit {
        self.submit_segmented_in(now, Cow::Owned(frame), gso_size)
    }

    /// A buffer `len` bytes long to read a frame into before
    /// [`submit_segmented_owned`](LinkModel::submit_segmented_owned): one of the
    /// delivered frames' buffers given back ([`recycle`](LinkModel::recycle)) that holds
    /// `len` bytes without growing, if there is one, else a new one. Its contents are
    /// unspecified (zeros or an old frame's bytes).
    pub fn spare_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut buf = match self.free.iter().rposition(|b| b.capacity() >= len) {
            Some(at) => self.free.swap_remove(at),
            None => Vec::with_capacity(len),
        };
        buf.resize(len, 0);
        buf
    }

    /// [`submit_segmented`](LinkModel::submit_segmented) of a borrowed or an owned frame;
    /// an owned one not carried whole is recycled.
    fn submit_segmented_in(&mut self, now: Instant, frame: Cow<'_, [u8]>, gso_size: u16) -> Submit {
        let submit = self.submit_segmented_ref(now, &frame, gso_size);
        match submit {
            Ok(submit) => {
                if let Cow::Owned(buf) = frame {
                    self.recycle(buf);
                }
                submit
            }
            Err(whole) => self.transmit_whole(whole, frame),
        }
    }

    /// What [`submit_segmented`](LinkModel::submit_segmented) does up to putting a
    /// super-segment on the wire whole: `Ok` when it is done (the frame submitted plain
    /// or cut), `Err` with what `transmit_whole` needs when the frame travels whole.
    fn submit_segmented_ref(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso_size: u16,
    ) -> Result<Submit, WholeStart> {
        let framing = if self.ip_level {
            Framing::Ip
        } else {
            Framing::Ethernet
        };
        let Some(wire) = segmentation::wire_frames(framing, frame, gso_size) else {
            return Ok(self.submit(now, frame));
        };
        if !self.carries_whole(&wire) {
            return Ok(self.submit_cut(now, framing, frame, &wire));
        }
        let now_scaled = u128::from(now.as_nanos()).saturating_mul(self.scale());
        self.start_waiting_frames(now_scaled);
        let start = now_scaled.max(self.busy_until_scaled);
        if start > now_scaled {
            if self.waiting_bytes.saturating_add(wire.wire_bytes) > self.config.queue_limit_bytes {
                return Ok(self.submit_cut(now, framing, frame, &wire));
            }
            self.waiting.push_back((start, wire.wire_bytes));
            self.waiting_bytes += wire.wire_bytes;
        }
        self.stats.submitted += wire.count as u64;
        let whole = WholeStart {
            start,
            gso_size,
            frames: wire.count,
            wire_bytes: wire.wire_bytes,
        };
        let fates = self.draw_fates(wire.count);
        if fates.is_empty() {
            return Err(whole);
        }
        self.stats.super_segments_cut += 1;
        let Some(frames) = segmentation::segment(framing, frame, wire.ip_mtu) else {
            return Err(whole);
        };
        let mut outcome = Submit::Dropped(super::DropReason::Loss);
        let mut at = start;
        for (piece, lost) in frames.iter().zip(fates) {
            outcome = self.transmit_fated(at, piece, Some(lost));
            at = self.busy_until_scaled;
        }
        Ok(outcome)
    }

    /// Whether a super-segment of `wire` frames may cross whole: no impairment that
    /// acts on single frames, and its frames within the MTU.
    fn carries_whole(&self, wire: &WireFrames) -> bool {
        let c = &self.config;
        self.held.is_none()
            && self.arq.is_none()
            && self.shaper.is_none()
            && self.policer.is_none()
            && c.reorder == 0.0
            && c.duplicate == 0.0
            && c.corrupt == 0.0
            && wire.largest <= c.mtu
    }

    /// The loss models' draws for `count` frames in order: empty when none is lost,
    /// else whether each is.
    fn draw_fates(&mut self, count: usize) -> Vec<bool> {
        let mut fates = Vec::new();
        for i in 0..count {
            if self.draw_loss() {
                if fates.is_empty() {
                    fates = vec![false; count];
                }
                fates[i] = true;
            }
        }
        fates
    }

    /// Cuts the super-segment into its wire frames and submits each.
    fn submit_cut(
        &mut self,
        now: Instant,
        framing: Framing,
        frame: &[u8],
        wire: &WireFrames,
    ) -> Submit {
        let Some(frames) = segmentation::segment(framing, frame, wire.ip_mtu) else {
            return self.submit(now, frame);
        };
        self.stats.super_segments_cut += 1;
        let mut outcome = Submit::Dropped(super::DropReason::QueueFull);
        for piece in &frames {
            outcome = self.submit(now, piece);
        }
        outcome
    }

    /// Serialises the super-segment's wire bytes from `start` and puts it on the wire
    /// whole (in its own buffer when owned), to arrive `delay` after its last frame
    /// departed.
    fn transmit_whole(&mut self, whole: WholeStart, frame: Cow<'_, [u8]>) -> Submit {
        let WholeStart {
            start,
            gso_size,
            frames,
            wire_bytes,
        } = whole;
        let serialisation = self.serialisation(start, wire_bytes);
        self.busy_until_scaled = start.saturating_add(serialisation);
        let departs = Instant::from_nanos(nanos_ceil(self.busy_until_scaled, self.scale()));
        let buf = match frame {
            Cow::Owned(buf) => buf,
            Cow::Borrowed(frame) => {
                let mut buf = self.free.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(frame);
                buf
            }
        };
        self.in_flight.push(super::InFlight {
            arrival: departs + self.config.delay,
            seq: self.next_seq,
            frame: buf,
            whole: Some(Whole {
                gso_size,
                frames: frames as u64,
                wire_bytes: wire_bytes as u64,
            }),
            tag: None,
        });
        self.next_seq += 1;
        self.stats.super_segments += 1;
        Submit::Queued { departs }
    }
}
