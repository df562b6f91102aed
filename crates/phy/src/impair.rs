//! [`Impair`]: a device wrapper that sends (and optionally receives) frames through a
//! [`LinkModel`], in real time, to emulate a slow, distant or lossy link over any device.

use impnet_core::{Instant, RxOffload};

use crate::device::{Device, DeviceError};
use crate::link::{LinkModel, LinkStats};

/// Frames taken from the inner device per `recv` at most, so a flooding peer cannot keep
/// one call busy forever.
const MAX_PULL_PER_RECV: usize = 256;

/// Wraps a device and applies a [`LinkModel`] to the frames sent through it, and another
/// to the frames received, if one is given.
///
/// Frames are handed to the inner device (or to the caller) only when they are due and
/// the wrapper is called: a driver calls [`recv`](Device::recv) or
/// [`handle_timeout`](Impair::handle_timeout) at [`poll_at`](Device::poll_at).
#[derive(Debug)]
pub struct Impair<D: Device> {
    inner: D,
    tx: LinkModel,
    rx: Option<LinkModel>,
    /// A due outgoing frame the inner device refused (`Ok(false)`), with the time it was
    /// refused and its segment size if it is a super-segment; it goes before any other.
    tx_blocked: Option<(Instant, Vec<u8>, Option<u16>)>,
    /// An arrived incoming frame that did not fit the caller's buffer, with the time it
    /// arrived; it goes before any other.
    rx_ready: Option<(Instant, Vec<u8>)>,
    /// Receive buffer for frames pulled from the inner device (its MTU long).
    scratch: Vec<u8>,
}

impl<D: Device> Impair<D> {
    /// Wraps `inner`, passing the frames sent through `tx`; received frames pass
    /// untouched.
    pub fn new(inner: D, tx: LinkModel) -> Impair<D> {
        let scratch = vec![0; inner.mtu()];
        Impair {
            inner,
            tx,
            rx: None,
            tx_blocked: None,
            rx_ready: None,
            scratch,
        }
    }

    /// This wrapper, also passing received frames through `rx`.
    pub fn with_rx(self, rx: LinkModel) -> Impair<D> {
        Impair {
            rx: Some(rx),
            ..self
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The wrapped device; frames still in the link models are dropped.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The model applied to sent frames.
    pub fn tx_model(&self) -> &LinkModel {
        &self.tx
    }

    /// The model applied to sent frames, mutably (to change its configuration).
    pub fn tx_model_mut(&mut self) -> &mut LinkModel {
        &mut self.tx
    }

    /// The model applied to received frames, if any.
    pub fn rx_model(&self) -> Option<&LinkModel> {
        self.rx.as_ref()
    }

    /// The model applied to received frames, mutably, if any.
    pub fn rx_model_mut(&mut self) -> Option<&mut LinkModel> {
        self.rx.as_mut()
    }

    /// Counters of the send direction.
    pub fn tx_stats(&self) -> &LinkStats {
        self.tx.stats()
    }

    /// Counters of the receive direction, if it is impaired.
    pub fn rx_stats(&self) -> Option<&LinkStats> {
        self.rx.as_ref().map(LinkModel::stats)
    }

    /// Hands every outgoing frame due by `now` to the inner device, stopping at the
    /// first it refuses. A frame the inner device rejects with an error is lost, as on a
    /// wire, and the error returned.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), DeviceError> {
        if let Some((since, frame, gso)) = self.tx_blocked.take() {
            if !self.send_inner(now, &frame, gso)? {
                self.tx_blocked = Some((since, frame, gso));
                return Ok(());
            }
            self.tx.recycle(frame);
        }
        while let Some((frame, gso)) = self.tx.poll_deliver_segmented(now) {
            let sent = self.send_inner(now, &frame, gso);
            match sent {
                Ok(true) => self.tx.recycle(frame),
                Ok(false) => {
                    self.tx_blocked = Some((now, frame, gso));
                    return Ok(());
                }
                Err(e) => {
                    self.tx.recycle(frame);
                    return Err(e);
                }
            }
        }
        self.exchange_arq(now);
        Ok(())
    }

    /// With link-level retransmission, moves the acknowledgements between the send
    /// and receive models ([`LinkModel::exchange_arq`]); without a receive model, a
    /// line with ARQ hears no acknowledgement and gives up on every frame.
    fn exchange_arq(&mut self, now: Instant) {
        if let Some(rx) = &mut self.rx {
            LinkModel::exchange_arq(&mut self.tx, rx, now);
        }
    }

    /// Hands one frame to the inner device: a super-segment (`gso`) to be cut there.
    fn send_inner(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso: Option<u16>,
    ) -> Result<bool, DeviceError> {
        match gso {
            Some(gso_size) => self.inner.send_segmented(now, frame, gso_size),
            None => self.inner.send(now, frame),
        }
    }

    /// [`Device::send`] and [`Device::send_segmented`] (`gso`): the frame enters the
    /// send model, and whatever is due goes to the inner device.
    fn submit(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso: Option<u16>,
    ) -> Result<bool, DeviceError> {
        self.check_mtu(frame.len())?;
        self.handle_timeout(now)?;
        match gso {
            Some(gso_size) => self.tx.submit_segmented(now, frame, gso_size),
            None => self.tx.submit(now, frame),
        };
        self.handle_timeout(now)?;
        Ok(true)
    }

    /// As [`send_segmented`](Device::send_segmented), taking the frame's buffer: a
    /// super-segment the send model carries whole travels in it, not copied
    /// ([`LinkModel::submit_segmented_owned`]). Take the buffer to read into from
    /// [`spare_buffer`](Impair::spare_buffer).
    pub fn send_segmented_owned(
        &mut self,
        now: Instant,
        frame: Vec<u8>,
        gso_size: u16,
    ) -> Result<bool, DeviceError> {
        self.check_mtu(frame.len())?;
        self.handle_timeout(now)?;
        self.tx.submit_segmented_owned(now, frame, gso_size);
        self.handle_timeout(now)?;
        Ok(true)
    }

    /// A frame of `len` bytes fits the inner device's MTU, or the error that says not.
    fn check_mtu(&self, len: usize) -> Result<(), DeviceError> {
        let mtu = self.inner.mtu();
        if len > mtu {
            return Err(DeviceError::FrameTooLarge { len, mtu });
        }
        Ok(())
    }

    /// A buffer `len` bytes long for [`send_segmented_owned`](Impair::send_segmented_owned),
    /// reused from the frames the send model delivered when one is large enough
    /// ([`LinkModel::spare_buffer`]).
    pub fn spare_buffer(&mut self, len: usize) -> Vec<u8> {
        self.tx.spare_buffer(len)
    }

    /// Moves frames waiting in the inner device into the receive model. An inner error
    /// is returned only when the model has nothing left to deliver, so frames already
    /// on the emulated wire still arrive after the peer has closed.
    fn pull_inner(&mut self, now: Instant) -> Result<(), DeviceError> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(());
        };
        for _ in 0..MAX_PULL_PER_RECV {
            match self.inner.recv(now, &mut self.scratch) {
                Ok(Some(len)) => {
                    rx.submit(now, &self.scratch[..len]);
                }
                Ok(None) => break,
                Err(e) if rx.in_flight() == 0 && self.rx_ready.is_none() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(())
    }
}

impl<D: Device> Device for Impair<D> {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        self.handle_timeout(now)?;
        if self.rx.is_none() {
            return self.inner.recv(now, buf);
        }
        self.pull_inner(now)?;
        let rx = self.rx.as_mut().expect("checked above");
        let (arrived, frame) = match self.rx_ready.take() {
            Some(ready) => ready,
            None => match rx.poll_deliver(now) {
                Some(frame) => (now, frame),
                None => {
                    self.exchange_arq(now);
                    return Ok(None);
                }
            },
        };
        self.exchange_arq(now);
        let rx = self.rx.as_mut().expect("checked above");
        let len = frame.len();
        if len > buf.len() {
            self.rx_ready = Some((arrived, frame));
            return Err(DeviceError::BufferTooSmall {
                len,
                capacity: buf.len(),
            });
        }
        buf[..len].copy_from_slice(&frame);
        rx.recycle(frame);
        Ok(Some(len))
    }

    /// Always takes the frame (`Ok(true)`) unless it exceeds the inner device's MTU: a
    /// frame the model drops is lost on the emulated wire, which the sender cannot know.
    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        self.submit(now, frame, None)
    }

    /// As [`send`](Device::send) for a TCP super-segment: the send model carries it
    /// whole, charged for its wire frames ([`LinkModel::submit_segmented`]), and the
    /// inner device gets it whole too (or its frames, cut where the model lost one).
    fn send_segmented(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso_size: u16,
    ) -> Result<bool, DeviceError> {
        self.submit(now, frame, Some(gso_size))
    }

    /// Without a receive model, the inner device's frames and what it knows of them;
    /// with one, as [`recv`](Device::recv) (the model delivers plain frames).
    fn recv_offloaded(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        if self.rx.is_none() {
            self.handle_timeout(now)?;
            return self.inner.recv_offloaded(now, buf);
        }
        Ok(self.recv(now, buf)?.map(|len| (len, RxOffload::NONE)))
    }

    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.inner.flush(now)
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    /// The earliest of: the next arrival in either model, the inner device's own
    /// `poll_at`, and the time a frame has been waiting for the inner device or the
    /// caller (already past, so the driver retries at once).
    fn poll_at(&self) -> Option<Instant> {
        [
            self.tx.next_arrival(),
            self.rx.as_ref().and_then(LinkModel::next_arrival),
            self.tx_blocked.as_ref().map(|(t, _, _)| *t),
            self.rx_ready.as_ref().map(|(t, _)| *t),
            self.inner.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

#[cfg(test)]
mod tests {
    use impnet_core::Duration;

    use super::*;
    use crate::link::LinkConfig;
    use crate::pipe::pipe;
    use crate::testutil::MockDevice;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn delayed(millis: u64) -> LinkModel {
        LinkModel::new(
            LinkConfig::default().with_delay(Duration::from_millis(millis)),
            1,
        )
    }

    #[test]
    fn sent_frames_reach_the_inner_device_when_due() {
        let (a, mut b) = pipe(1514);
        let mut a = Impair::new(a, delayed(10));
        assert_eq!(a.send(ms(0), b"hello"), Ok(true));
        let mut buf = [0u8; 1514];
        assert_eq!(b.recv(ms(0), &mut buf), Ok(None));
        assert_eq!(a.poll_at(), Some(ms(10)));
        a.handle_timeout(ms(9)).unwrap();
        assert_eq!(b.recv(ms(9), &mut buf), Ok(None));
        a.handle_timeout(ms(10)).unwrap();
        assert_eq!(b.recv(ms(10), &mut buf), Ok(Some(5)));
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(a.poll_at(), None);
        assert_eq!(a.tx_stats().delivered, 1);
    }

    #[test]
    fn recv_also_moves_due_frames_out() {
        let mut dev = Impair::new(MockDevice::default(), delayed(5));
        dev.send(ms(0), b"x").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(dev.recv(ms(5), &mut buf), Ok(None));
        assert_eq!(dev.inner().sent, vec![(ms(5), b"x".to_vec())]);
    }

    #[test]
    fn zero_delay_link_passes_frames_at_once() {
        let mut dev = Impair::new(
            MockDevice::default(),
            LinkModel::new(LinkConfig::default(), 1),
        );
        dev.send(ms(3), b"now").unwrap();
        assert_eq!(dev.inner().sent, vec![(ms(3), b"now".to_vec())]);
    }

    #[test]
    fn lost_frames_never_arrive() {
        let lossy = LinkModel::new(LinkConfig::default().with_loss(1.0), 1);
        let mut dev = Impair::new(MockDevice::default(), lossy);
        for _ in 0..10 {
            assert_eq!(dev.send(ms(0), b"gone"), Ok(true));
        }
        dev.handle_timeout(ms(1000)).unwrap();
        assert!(dev.inner().sent.is_empty());
        assert_eq!(dev.tx_stats().dropped_loss, 10);
    }

    #[test]
    fn refused_frames_are_retried_in_order() {
        let inner = MockDevice {
            refuse_sends: 2,
            ..MockDevice::default()
        };
        let mut dev = Impair::new(inner, LinkModel::new(LinkConfig::default(), 1));
        dev.send(ms(0), b"1").unwrap(); // refused
        assert_eq!(
            dev.poll_at(),
            Some(ms(0)),
            "a blocked frame asks for a retry"
        );
        // "1" is refused once more before "2" is submitted; then both go, in order.
        dev.send(ms(1), b"2").unwrap();
        dev.handle_timeout(ms(2)).unwrap();
        let sent: Vec<&[u8]> = dev.inner().sent.iter().map(|(_, f)| f.as_slice()).collect();
        assert_eq!(sent, vec![b"1".as_slice(), b"2"]);
        assert_eq!(dev.poll_at(), None);
    }

    #[test]
    fn oversize_frames_are_refused_with_an_error() {
        let mut dev = Impair::new(MockDevice::default(), delayed(0));
        assert_eq!(
            dev.send(ms(0), &[0; 1515]),
            Err(DeviceError::FrameTooLarge {
                len: 1515,
                mtu: 1514
            })
        );
    }

    #[test]
    fn received_frames_pass_through_the_rx_model() {
        let (mut a, b) = pipe(1514);
        let mut b = Impair::new(b, delayed(0)).with_rx(delayed(7));
        a.send(ms(0), b"incoming").unwrap();
        let mut buf = [0u8; 1514];
        assert_eq!(b.recv(ms(0), &mut buf), Ok(None));
        assert_eq!(b.poll_at(), Some(ms(7)));
        assert_eq!(b.recv(ms(7), &mut buf), Ok(Some(8)));
        assert_eq!(&buf[..8], b"incoming");
        assert_eq!(b.rx_stats().unwrap().delivered, 1);
    }

    #[test]
    fn without_rx_model_receive_is_untouched() {
        let mut inner = MockDevice::default();
        inner.push_rx(b"plain");
        inner.next_poll = Some(ms(42));
        let mut dev = Impair::new(inner, delayed(100));
        assert_eq!(dev.poll_at(), Some(ms(42)));
        let mut buf = [0u8; 64];
        assert_eq!(dev.recv(ms(0), &mut buf), Ok(Some(5)));
        assert!(dev.rx_stats().is_none());
    }

    #[test]
    fn frames_on_the_wire_arrive_after_the_peer_closes() {
        let (mut a, b) = pipe(1514);
        let mut b = Impair::new(b, delayed(0)).with_rx(delayed(5));
        a.send(ms(0), b"bye").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(b.recv(ms(0), &mut buf), Ok(None));
        drop(a);
        assert_eq!(b.recv(ms(5), &mut buf), Ok(Some(3)));
        assert_eq!(b.recv(ms(6), &mut buf), Err(DeviceError::Closed));
    }

    /// A device taking super-segments, recording each frame with its segment size.
    #[derive(Default)]
    struct Segmenting {
        sent: Vec<(Vec<u8>, Option<u16>)>,
    }

    impl Device for Segmenting {
        fn recv(&mut self, _: Instant, _: &mut [u8]) -> Result<Option<usize>, DeviceError> {
            Ok(None)
        }
        fn send(&mut self, _: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
            self.sent.push((frame.to_vec(), None));
            Ok(true)
        }
        fn send_segmented(&mut self, _: Instant, f: &[u8], gso: u16) -> Result<bool, DeviceError> {
            self.sent.push((f.to_vec(), Some(gso)));
            Ok(true)
        }
        fn mtu(&self) -> usize {
            65_550
        }
    }

    #[test]
    fn super_segments_reach_the_inner_device_whole_or_cut_where_lost() {
        let frame =
            crate::segmentation::tests::build(&crate::segmentation::tests::Spec::new(60_000));
        let mut whole = Impair::new(Segmenting::default(), delayed(3));
        assert_eq!(whole.send_segmented(ms(0), &frame, 1448), Ok(true));
        whole.handle_timeout(ms(3)).unwrap();
        assert_eq!(whole.inner().sent, vec![(frame.clone(), Some(1448))]);
        assert_eq!(whole.tx_stats().delivered, 42);

        let lossy = LinkModel::new(LinkConfig::default().with_loss(0.5), 2);
        let mut cut = Impair::new(Segmenting::default(), lossy);
        cut.send_segmented(ms(0), &frame, 1448).unwrap();
        let lost = cut.tx_stats().dropped_loss;
        assert!(lost > 0);
        assert_eq!(cut.inner().sent.len() as u64, 42 - lost);
        assert!(
            cut.inner()
                .sent
                .iter()
                .all(|(f, gso)| gso.is_none() && f.len() <= 1514)
        );
    }

    #[test]
    fn small_receive_buffer_keeps_the_frame() {
        let mut inner = MockDevice::default();
        inner.push_rx(&[5; 100]);
        let mut dev = Impair::new(inner, delayed(0)).with_rx(delayed(0));
        let mut small = [0u8; 10];
        assert_eq!(
            dev.recv(ms(0), &mut small),
            Err(DeviceError::BufferTooSmall {
                len: 100,
                capacity: 10
            })
        );
        assert_eq!(dev.poll_at(), Some(ms(0)));
        let mut big = [0u8; 200];
        assert_eq!(dev.recv(ms(1), &mut big), Ok(Some(100)));
    }
}
