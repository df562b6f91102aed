//! A scripted device for the wrappers' tests.

use std::collections::VecDeque;

use impnet_core::Instant;

use crate::device::{Device, DeviceError};

/// Records what is sent to it and hands out frames queued with `push_rx`.
#[derive(Debug, Default)]
pub struct MockDevice {
    /// Frames accepted by `send`, with the `now` they were sent at.
    pub sent: Vec<(Instant, Vec<u8>)>,
    /// Frames `recv` will return, in order.
    pub rx: VecDeque<Vec<u8>>,
    /// How many upcoming `send` calls answer `Ok(false)`.
    pub refuse_sends: usize,
    /// What `poll_at` answers.
    pub next_poll: Option<Instant>,
}

impl MockDevice {
    pub fn push_rx(&mut self, frame: &[u8]) {
        self.rx.push_back(frame.to_vec());
    }
}

impl Device for MockDevice {
    fn recv(&mut self, _now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let Some(f) = self.rx.pop_front() else {
            return Ok(None);
        };
        buf[..f.len()].copy_from_slice(&f);
        Ok(Some(f.len()))
    }

    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        if self.refuse_sends > 0 {
            self.refuse_sends -= 1;
            return Ok(false);
        }
        self.sent.push((now, frame.to_vec()));
        Ok(true)
    }

    fn mtu(&self) -> usize {
        1514
    }

    fn poll_at(&self) -> Option<Instant> {
        self.next_poll
    }
}
