//! [`Tun`]: a Linux TUN device (`/dev/net/tun`, `IFF_TUN | IFF_NO_PI`): bare IP packets
//! to and from the kernel, no link layer, for a stack interface of
//! [`Medium::Ip`](impnet_core::Medium::Ip). VPN-style users of user-space stacks run
//! over one.
//!
//! It is the TAP device's code opened with another flag ([`crate::tap`] holds all of
//! it, and its `unsafe`): the same virtio-net header (`IFF_VNET_HDR`) and offloads
//! (`TUNSETOFFLOAD`: `TUN_F_CSUM | TUN_F_TSO4`) where the kernel offers them, with every
//! offset counted from the IP header, the same checks of received checksums, the same
//! gather writes. Only the frame limits differ: without offloads a packet is at most
//! the MTU.
//!
//! A TUN's carrier comes on when a process attaches, and the kernel drops what it
//! sends on the device until its link watcher has seen that (asynchronously, a few
//! milliseconds): a reply to the very first packet sent after `open` may be lost.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use impnet_core::{Instant, Offloads};

use crate::device::{Device, DeviceError};
use crate::tap::{Link, Tap, TapConfig, TapError, TapStats};

/// How to open a TUN device: the TAP's settings, which mean the same for a TUN.
pub type TunConfig = TapConfig;

/// A Linux TUN device: IP packets to and from the kernel. Non-blocking: wait for its
/// file descriptor ([`AsRawFd`]) to become readable.
#[derive(Debug)]
pub struct Tun {
    device: Tap,
}

impl Tun {
    /// Create (or attach to) the TUN `name` with MTU 1500 and no offloads.
    pub fn open(name: &str) -> Result<Tun, TapError> {
        Tun::open_with(&TunConfig::new(name))
    }

    /// Create (or attach to) a TUN as `config` says. The errors are the TAP's (a name
    /// taken by a TAP is [`TapError::NameTaken`]).
    pub fn open_with(config: &TunConfig) -> Result<Tun, TapError> {
        Ok(Tun {
            device: Tap::open_link(config, Link::Ip)?,
        })
    }

    /// Create (or attach to) a multi-queue TUN and open `queues` of its queues, one
    /// descriptor each (as [`Tap::open_queues`] does for a TAP).
    pub fn open_queues(config: &TunConfig, queues: usize) -> Result<Vec<Tun>, TapError> {
        let queues = Tap::open_link_queues(config, Link::Ip, queues)?;
        Ok(queues.into_iter().map(|device| Tun { device }).collect())
    }

    /// The interface name the kernel assigned.
    pub fn name(&self) -> &str {
        self.device.name()
    }

    /// True when the kernel accepted checksum and TSO offloads: packets may then be
    /// larger than the MTU both ways.
    pub fn offloads(&self) -> bool {
        self.device.offloads()
    }

    /// The IP MTU the device was opened with.
    pub fn ip_mtu(&self) -> usize {
        self.device.ip_mtu()
    }

    /// The offloads the stack's interface on this TUN should have (as
    /// [`Tap::stack_offloads`]).
    pub fn stack_offloads(&self) -> Offloads {
        self.device.stack_offloads()
    }

    /// Counters (a "frame" is an IP packet).
    pub fn stats(&self) -> TapStats {
        self.device.stats()
    }

    /// True when reads and writes go in batches through io_uring ([`Tap::batched`]).
    pub fn batched(&self) -> bool {
        self.device.batched()
    }

    /// Why batching was asked for and is off ([`Tap::batch_refused`]).
    pub fn batch_refused(&self) -> Option<&str> {
        self.device.batch_refused()
    }
}

impl Device for Tun {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        self.device.recv(now, buf)
    }

    /// Packets longer than the MTU are taken only with offloads, and only TCP over
    /// IPv4: the kernel cuts them into segments of MTU size (TSO).
    fn send(&mut self, now: Instant, packet: &[u8]) -> Result<bool, DeviceError> {
        self.device.send(now, packet)
    }

    fn send_gather(
        &mut self,
        now: Instant,
        head: &[u8],
        payload: (&[u8], &[u8]),
    ) -> Result<bool, DeviceError> {
        self.device.send_gather(now, head, payload)
    }

    fn gathers(&self) -> bool {
        self.device.gathers()
    }

    /// With offloads, a whole IPv4 packet (64 KiB); else the MTU.
    fn flush(&mut self, now: Instant) -> Result<(), DeviceError> {
        self.device.flush(now)
    }

    fn mtu(&self) -> usize {
        self.device.mtu()
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.device.as_raw_fd()
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.device.as_fd()
    }
}
