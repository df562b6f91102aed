//! [`Offload`]: software GRO and GSO for any device, for when the device itself has no
//! offloads (a TAP or TUN opened without the virtio-net header, or whose offloads the
//! kernel refused; a pipe).
//!
//! - GRO: [`recv`](Device::recv) reads a batch from the inner device (up to
//!   [`GRO_BATCH`] frames, or until it has none), joins the in-order TCP segments of each
//!   flow ([`segmentation::plan`]) and hands out the joined frames one per call, so
//!   the stack takes one large segment where it would take many.
//! - GSO: the stack may build TCP segments up to 64 KiB ([`Offload::stack_offloads`]
//!   adds [`Offloads::tso_max`]); [`send`](Device::send) cuts them at the IP MTU
//!   ([`segmentation::segment`]) and writes the pieces to the inner device.
//!
//! Both are switchable. Merged frames carry correct checksums (verified before merging
//! unless the device vouched for them, [`Checksums::Trusted`]): the stack verifies
//! them as it verifies any frame.

use std::collections::VecDeque;

use impnet_core::{Instant, Offloads};

use crate::device::{Device, DeviceError};
use crate::segmentation::{self, Checksums, Framing, MAX_MERGED_IP_LEN};

/// Frames read from the inner device per batch at most.
pub const GRO_BATCH: usize = 32;

/// Counters of an [`Offload`] wrapper.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadStats {
    /// Frames read from the inner device (with GRO on).
    pub rx_frames_in: u64,
    /// Frames handed to the caller (with GRO on): fewer than `rx_frames_in` by what
    /// was merged.
    pub rx_frames_out: u64,
    /// Handed-out frames that joined two or more segments.
    pub rx_merged: u64,
    /// Frames sent that GSO cut.
    pub tx_cut: u64,
    /// Pieces written to the inner device for those.
    pub tx_pieces: u64,
}

/// Wraps a device with software GRO and GSO, each switchable (both off: a pass-through).
#[derive(Debug)]
pub struct Offload<D: Device> {
    inner: D,
    framing: Framing,
    /// The inner device's IP MTU: GSO cuts to it.
    ip_mtu: usize,
    gro: bool,
    gso: bool,
    checksums: Checksums,
    /// Receive buffers, one per frame of a batch, kept across batches.
    buffers: Vec<Vec<u8>>,
    /// Lengths of the frames of the current batch (in `buffers`).
    lens: Vec<usize>,
    /// The trains of the current batch not yet handed out, in order.
    runs: VecDeque<Vec<usize>>,
    /// Pieces of a cut segment the inner device refused; they go before anything else.
    pending: VecDeque<Vec<u8>>,
    /// The time of the last call, for [`Device::poll_at`] while frames wait here.
    last_now: Option<Instant>,
    stats: OffloadStats,
}

impl<D: Device> Offload<D> {
    /// Wraps `inner`, whose frames are `framing` and whose IP MTU is `ip_mtu`, with GRO
    /// and GSO off and received checksums verified before merging.
    pub fn new(inner: D, framing: Framing, ip_mtu: usize) -> Offload<D> {
        Offload {
            inner,
            framing,
            ip_mtu,
            gro: false,
            gso: false,
            checksums: Checksums::Verify,
            buffers: Vec::new(),
            lens: Vec::new(),
            runs: VecDeque::new(),
            pending: VecDeque::new(),
            last_now: None,
            stats: OffloadStats::default(),
        }
    }

    /// This wrapper with software GRO on or off.
    pub fn gro(self, gro: bool) -> Offload<D> {
        Offload { gro, ..self }
    }

    /// This wrapper with software GSO on or off.
    pub fn gso(self, gso: bool) -> Offload<D> {
        Offload { gso, ..self }
    }

    /// This wrapper trusting the inner device's checksums ([`Checksums::Trusted`]: it
    /// verified them, as a TAP with offloads does) or verifying them before merging.
    pub fn checksums(self, checksums: Checksums) -> Offload<D> {
        Offload { checksums, ..self }
    }

    /// Whether GRO is on.
    pub fn gro_enabled(&self) -> bool {
        self.gro
    }

    /// Whether GSO is on.
    pub fn gso_enabled(&self) -> bool {
        self.gso
    }

    /// The offloads the stack's interface should have over this wrapper: the inner
    /// device's (`inner`), with TSO up to a whole IP packet when GSO is on.
    pub fn stack_offloads(&self, inner: Offloads) -> Offloads {
        match self.gso {
            true => Offloads {
                tso_max: Some(MAX_MERGED_IP_LEN),
                ..inner
            },
            false => inner,
        }
    }

    /// Counters.
    pub fn stats(&self) -> OffloadStats {
        self.stats
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The wrapped device; frames held here are dropped.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Read up to [`GRO_BATCH`] frames from the inner device and plan their trains. An
    /// inner error is returned only when no frame was read.
    fn fill(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.lens.clear();
        let frame_len = self.inner.mtu();
        while self.lens.len() < GRO_BATCH {
            let at = self.lens.len();
            if self.buffers.len() == at {
                self.buffers.push(Vec::new());
            }
            let buffer = &mut self.buffers[at];
            if buffer.len() < frame_len {
                buffer.resize(frame_len, 0);
            }
            match self.inner.recv(now, buffer) {
                Ok(Some(len)) => self.lens.push(len),
                Ok(None) => break,
                Err(DeviceError::BufferTooSmall { len, .. }) if len <= MAX_MERGED_IP_LEN + 64 => {
                    buffer.resize(len, 0);
                }
                Err(e) if at == 0 => return Err(e),
                Err(_) => break,
            }
        }
        self.stats.rx_frames_in += self.lens.len() as u64;
        let frames = self.frames();
        let runs = segmentation::plan(self.framing, &frames, self.checksums);
        self.runs.extend(runs);
        Ok(())
    }

    /// The frames of the current batch.
    fn frames(&self) -> Vec<&[u8]> {
        self.buffers
            .iter()
            .zip(&self.lens)
            .map(|(buffer, &len)| &buffer[..len])
            .collect()
    }

    /// Write waiting pieces to the inner device; false if it refused one (it stays).
    fn flush_pending(&mut self, now: Instant) -> Result<bool, DeviceError> {
        while let Some(piece) = self.pending.front() {
            if !self.inner.send(now, piece)? {
                return Ok(false);
            }
            self.pending.pop_front();
        }
        Ok(true)
    }

    /// GSO: cut `frame` and write the pieces. `None` if there was nothing to cut.
    fn send_cut(&mut self, now: Instant, frame: &[u8]) -> Option<Result<bool, DeviceError>> {
        let pieces = segmentation::segment(self.framing, frame, self.ip_mtu)?;
        self.stats.tx_cut += 1;
        self.stats.tx_pieces += pieces.len() as u64;
        let mut pieces = pieces.into_iter();
        while let Some(piece) = pieces.next() {
            match self.inner.send(now, &piece) {
                Ok(true) => {}
                Ok(false) => {
                    // The frame is taken; what the device refused waits here.
                    self.pending.push_back(piece);
                    self.pending.extend(pieces);
                    return Some(Ok(true));
                }
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(true))
    }
}

impl<D: Device> Device for Offload<D> {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        self.last_now = Some(now);
        if !self.pending.is_empty() {
            self.flush_pending(now)?;
        }
        if !self.gro {
            return self.inner.recv(now, buf);
        }
        if self.runs.is_empty() {
            self.fill(now)?;
        }
        let Some(run) = self.runs.front() else {
            return Ok(None);
        };
        let frames = self.frames();
        let len = segmentation::merged_len(self.framing, &frames, run)
            .unwrap_or(0)
            .max(frames[run[0]].len());
        if len > buf.len() {
            return Err(DeviceError::BufferTooSmall {
                len,
                capacity: buf.len(),
            });
        }
        let written = segmentation::merge(self.framing, &frames, run, buf);
        let merged = run.len() > 1;
        self.runs.pop_front();
        self.stats.rx_frames_out += 1;
        self.stats.rx_merged += u64::from(merged);
        match written {
            Some(n) => Ok(Some(n)),
            // Not reached for runs `plan` made; skip rather than fail.
            None => self.recv(now, buf),
        }
    }

    /// With GSO, a TCP frame longer than the IP MTU is cut and its pieces written one by
    /// one; everything else goes to the inner device as it is.
    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        self.last_now = Some(now);
        if !self.flush_pending(now)? {
            return Ok(false);
        }
        if self.gso
            && frame.len() > self.framing.header_len() + self.ip_mtu
            && let Some(sent) = self.send_cut(now, frame)
        {
            return sent;
        }
        self.inner.send(now, frame)
    }

    fn send_gather(
        &mut self,
        now: Instant,
        head: &[u8],
        payload: (&[u8], &[u8]),
    ) -> Result<bool, DeviceError> {
        if self.gso || !self.pending.is_empty() {
            let frame = [head, payload.0, payload.1].concat();
            return self.send(now, &frame);
        }
        self.inner.send_gather(now, head, payload)
    }

    fn gathers(&self) -> bool {
        !self.gso && self.inner.gathers()
    }

    /// With GRO or GSO, a whole IP packet (64 KiB) in one frame; else the inner
    /// device's.
    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.inner.flush(now)
    }

    fn mtu(&self) -> usize {
        let large = self.framing.header_len() + MAX_MERGED_IP_LEN;
        match self.gro || self.gso {
            true => self.inner.mtu().max(large),
            false => self.inner.mtu(),
        }
    }

    /// Now (the last call's time) while merged frames or cut pieces wait here; else the
    /// inner device's.
    fn poll_at(&self) -> Option<Instant> {
        match self.runs.is_empty() && self.pending.is_empty() {
            true => self.inner.poll_at(),
            false => self.last_now.or(self.inner.poll_at()),
        }
    }
}

#[cfg(test)]
mod tests;
