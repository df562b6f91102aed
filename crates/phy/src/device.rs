//! The [`Device`] trait: how a stack's driver moves frames in and out of the world.

use std::fmt;
use std::io;

use impnet_core::{Instant, RxOffload};

/// A network device that carries whole Ethernet frames as bytes.
///
/// Devices compose: [`Impair`](crate::Impair) and [`Pcap`](crate::Pcap) wrap any device
/// and are devices themselves. Time is a parameter (`now`), never read from a clock, so
/// the same device code runs in real time and in the simulator's virtual time.
pub trait Device {
    /// Receive one frame into `buf`, returning its length, or `None` if none is ready now.
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError>;

    /// Send one frame. `Ok(false)` if the device cannot take it now (full): the caller
    /// keeps it and tries again later.
    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError>;

    /// As [`Device::recv`], with what the device knows of the frame beyond its bytes
    /// (a TAP's virtio-net header: a large TCP segment's segment size, a partial
    /// checksum), for `Stack::handle_frame_offloaded`. The default knows nothing.
    fn recv_offloaded(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        Ok(self.recv(now, buf)?.map(|len| (len, RxOffload::NONE)))
    }

    /// Send one TCP segment larger than the MTU, to be cut into segments of
    /// `gso_size` payload bytes (`Stack::transmit_gso_size`: a forwarded segment keeps
    /// the size its sender chose). The default sends it as [`Device::send`] does
    /// (a device with TSO cuts it at its own MTU).
    fn send_segmented(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso_size: u16,
    ) -> Result<bool, DeviceError> {
        let _ = gso_size;
        self.send(now, frame)
    }

    /// Send one frame given in pieces: `head`, then the two parts of `payload`. The
    /// default joins them and calls [`Device::send`]; a device that says so in
    /// [`Device::gathers`] sends the pieces without joining them.
    fn send_gather(
        &mut self,
        now: Instant,
        head: &[u8],
        payload: (&[u8], &[u8]),
    ) -> Result<bool, DeviceError> {
        let frame = [head, payload.0, payload.1].concat();
        self.send(now, &frame)
    }

    /// Whether [`Device::send_gather`] sends the pieces without copying them together
    /// (a driver then leaves TCP payloads in the send buffer: see
    /// `Stack::poll_transmit_gather`).
    fn gathers(&self) -> bool {
        false
    }

    /// Send what earlier sends left queued in the device: a device that batches its
    /// writes (a [`Tap`](crate::Tap) with [`TapConfig::batched`](crate::TapConfig))
    /// hands them to the kernel here, many in one system call. A driver calls it after
    /// each round of sends (imp's runtime: every turn of its loop). The default has
    /// nothing queued; a wrapper passes it on to the device it wraps.
    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        let _ = now;
        Ok(())
    }

    /// Largest frame (Ethernet header included, FCS excluded) the device carries.
    fn mtu(&self) -> usize;

    /// When the device next has something to deliver (for a driver's wait), if it knows.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

/// Why a device could not send or receive a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceError {
    /// The frame is longer than the device carries.
    FrameTooLarge {
        /// Length of the frame offered.
        len: usize,
        /// The device's MTU.
        mtu: usize,
    },
    /// The next frame does not fit in the receive buffer; it stays queued.
    BufferTooSmall {
        /// Length of the waiting frame.
        len: usize,
        /// Length of the buffer given.
        capacity: usize,
    },
    /// The other side of the device is gone (the peer pipe end was dropped, the
    /// interface was removed).
    Closed,
    /// The operating system reported an error.
    Io(io::ErrorKind, String),
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::FrameTooLarge { len, mtu } => write!(
                f,
                "frame of {len} bytes exceeds the device MTU of {mtu} bytes: \
                 segment or fragment it to fit"
            ),
            DeviceError::BufferTooSmall { len, capacity } => write!(
                f,
                "next frame is {len} bytes but the receive buffer holds {capacity}: \
                 pass a buffer of at least the device MTU"
            ),
            DeviceError::Closed => {
                write!(f, "device closed: the other end has gone away")
            }
            DeviceError::Io(kind, msg) => write!(f, "device I/O error ({kind}): {msg}"),
        }
    }
}

impl std::error::Error for DeviceError {}

impl From<io::Error> for DeviceError {
    fn from(e: io::Error) -> DeviceError {
        DeviceError::Io(e.kind(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_went_wrong() {
        let e = DeviceError::FrameTooLarge {
            len: 2000,
            mtu: 1514,
        };
        assert!(e.to_string().contains("2000") && e.to_string().contains("1514"));
        let e = DeviceError::BufferTooSmall {
            len: 1514,
            capacity: 100,
        };
        assert!(e.to_string().contains("1514") && e.to_string().contains("100"));
        assert!(DeviceError::Closed.to_string().contains("closed"));
        let io = io::Error::new(io::ErrorKind::PermissionDenied, "no CAP_NET_ADMIN");
        let e = DeviceError::from(io);
        assert_eq!(
            e,
            DeviceError::Io(io::ErrorKind::PermissionDenied, "no CAP_NET_ADMIN".into())
        );
        assert!(e.to_string().contains("CAP_NET_ADMIN"));
        let _: &dyn std::error::Error = &e;
    }

    /// A device with the default `poll_at`.
    struct Null;
    impl Device for Null {
        fn recv(&mut self, _: Instant, _: &mut [u8]) -> Result<Option<usize>, DeviceError> {
            Ok(None)
        }
        fn send(&mut self, _: Instant, _: &[u8]) -> Result<bool, DeviceError> {
            Ok(true)
        }
        fn mtu(&self) -> usize {
            1514
        }
    }

    #[test]
    fn poll_at_defaults_to_unknown() {
        assert_eq!(Null.poll_at(), None);
    }
}
