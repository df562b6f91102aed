//! [`Tap`]: a Linux TAP device (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`), non-blocking,
//! optionally with the virtio-net header (`IFF_VNET_HDR`) and offloads
//! (`TUNSETOFFLOAD`: `TUN_F_CSUM | TUN_F_TSO4`) so that the kernel may hand imp large
//! TCP segments with partial checksums, and imp may hand the kernel large TCP segments
//! for it to cut (TSO; IPv4 as `GSO_TCPV4`, IPv6 without extension headers as
//! `GSO_TCPV6`, which the kernel takes from a writer whatever `TUNSETOFFLOAD` said).
//!
//! The header never reaches the caller: [`Tap::recv`](Device::recv) strips it and
//! [`Tap::send`](Device::send) prepends one, asking for segmentation when a TCP frame is
//! longer than the MTU. Without offloads (not asked for, or refused by the kernel)
//! frames are plain Ethernet and at most the MTU long, and the stack verifies every
//! checksum as usual.
//!
//! With offloads, received checksums are checked once, here, and the stack skips them
//! ([`Tap::stack_offloads`] sets `rx_checksum`). A frame the kernel marks
//! `NEEDS_CSUM` was made by the kernel itself (its checksum field holds only the
//! pseudo-header sum; the data never crossed a wire) and one it marks `DATA_VALID` was
//! verified by the kernel or the NIC before it: both pass without being summed. Every
//! other frame (from a packet socket, a bridge, a NIC without checksum offload) is
//! verified here, IPv4 header and TCP/UDP checksum (over IPv4 or IPv6), and dropped and counted
//! ([`TapStats::rx_bad_checksum`]) when wrong. Partial checksums are left partial
//! unless [`TapConfig::complete_checksums`] asks for the real ones, for whatever reads
//! the frames' bytes rather than trusting the device (see there).
//!
//! The same code opens a TUN ([`Tun`](crate::Tun), `IFF_TUN`): there, frames are bare
//! IP packets and every offset below counts from the IP header instead of the
//! Ethernet header (`Link`).
//!
//! All of imp's `unsafe` for the device lives in this file: three `ioctl`s and an
//! `if_nametoindex`, each with its SAFETY argument (reads and writes go through
//! rustix's safe `read`, `readv`, `write` and `writev`), and in `uring.rs` (the
//! buffers handed to io_uring for batched reads and writes, [`TapConfig::batched`]).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use impnet_core::{Instant, Offloads, RxOffload};
use impnet_wire::checksum;

use crate::device::{Device, DeviceError};
use crate::uring::{Received, Uring};

/// `linux/if_tun.h`: `TUNSETIFF = _IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `TUNSETOFFLOAD = _IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `TUNSETVNETHDRSZ = _IOW('T', 216, int)`.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
/// One descriptor per queue: each `TUNSETIFF` on a new descriptor attaches one more
/// queue of the same device (`linux/if_tun.h`).
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
/// Longest interface name, without the terminating NUL (`IFNAMSIZ - 1`).
pub const MAX_NAME_LEN: usize = 15;

/// `struct virtio_net_hdr` (virtio 1.x §5.1.6), 10 bytes, in the host's byte order
/// (the TAP default on a little-endian host; we never set `TUNSETVNETBE`).
const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// The checksum was verified (Linux `CHECKSUM_UNNECESSARY`).
const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// The segment's sender set CWR on it (ECN); the bit is or-ed into `gso_type`.
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

const ETH_HEADER_LEN: usize = 14;
/// An Ethernet header with one 802.1Q tag.
const ETH_TAGGED_HEADER_LEN: usize = 18;
/// The largest IPv4 packet (total length is 16 bits).
const MAX_IP_PACKET: usize = 65535;

/// What the device's frames are: Ethernet frames (TAP) or bare IP packets (TUN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// `IFF_TAP`: Ethernet frames, the IP header at 14.
    Ethernet,
    /// `IFF_TUN`: IP packets, the IP header at 0.
    Ip,
}

impl Link {
    /// Bytes in front of the IP header.
    fn header_len(self) -> usize {
        match self {
            Link::Ethernet => ETH_HEADER_LEN,
            Link::Ip => 0,
        }
    }

    /// The offset of the IPv4 header when `frame` carries one (an untagged Ethernet
    /// frame of type IPv4, or an IP packet of version 4) with at least 20 bytes.
    fn ipv4_start(self, frame: &[u8]) -> Option<usize> {
        let ip = self.header_len();
        let typed = match self {
            Link::Ethernet => frame.get(12..14) == Some(&[0x08, 0x00][..]),
            Link::Ip => true,
        };
        (typed && frame.len() >= ip + 20 && frame[ip] >> 4 == 4).then_some(ip)
    }

    /// The offset of the IPv6 header when `frame` carries one (an untagged Ethernet
    /// frame of type IPv6, or an IP packet of version 6) with all its 40 bytes.
    fn ipv6_start(self, frame: &[u8]) -> Option<usize> {
        let ip = self.header_len();
        let typed = match self {
            Link::Ethernet => frame.get(12..14) == Some(&[0x86, 0xdd][..]),
            Link::Ip => true,
        };
        (typed && frame.len() >= ip + 40 && frame[ip] >> 4 == 6).then_some(ip)
    }

    /// The largest frame without offloads: the MTU plus a tagged Ethernet header.
    fn frame_limit(self, mtu: usize) -> usize {
        match self {
            Link::Ethernet => mtu + ETH_TAGGED_HEADER_LEN,
            Link::Ip => mtu,
        }
    }

    /// `TUNSETIFF`'s device type flag.
    fn flag(self) -> libc::c_short {
        match self {
            Link::Ethernet => IFF_TAP,
            Link::Ip => IFF_TUN,
        }
    }
}

/// `struct ifreq` as TUNSETIFF reads it: the name, then `ifr_flags` in the union.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; 16],
    flags: libc::c_short,
    /// The rest of the 24-byte union.
    _pad: [u8; 22],
}

/// How to open a TAP device (or a TUN: [`TunConfig`](crate::TunConfig) is this type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Interface name, at most 15 bytes, no `/`, `:` or white space; an existing TAP of
    /// that name is attached, else one is created. A name with `%d` (e.g. `imp%d`) lets
    /// the kernel pick the number: [`Tap::name`] says which.
    pub name: String,
    /// IP MTU of the link (the kernel side should have the same; default 1500).
    pub mtu: usize,
    /// Ask for the virtio-net header and checksum/TSO offloads. If the kernel refuses,
    /// the device falls back to plain frames: [`Tap::offloads`] says which it got.
    pub offloads: bool,
    /// The stack sending through this TAP leaves only the pseudo-header sum in TCP and
    /// UDP checksum fields (its interface has [`Offloads::tx_checksum`]; take the
    /// interface's offloads from [`Tap::stack_offloads`]). With offloads, every such
    /// frame then goes with `VIRTIO_NET_HDR_F_NEEDS_CSUM` and the kernel completes the
    /// checksum; without, this setting is ignored and the stack must compute them.
    pub partial_checksums: bool,
    /// With offloads, write the real TCP/UDP checksum into received frames whose
    /// checksum the kernel left partial (`NEEDS_CSUM`: it made them and vouches for
    /// them, but only the pseudo-header sum is in the field). Off by default: the stack
    /// on this TAP trusts the device ([`Tap::stack_offloads`] has `rx_checksum`) and
    /// summing 64 KiB segments only to write a field nobody reads costs a pass over the
    /// data. Turn it on when something else reads the frames' bytes: a [`Pcap`] wrapper
    /// whose capture should show valid checksums (without, it shows what `tcpdump`
    /// shows on a Linux host with checksum offload: partial checksums on frames the
    /// kernel made), or a stack on this TAP that verifies checksums itself.
    ///
    /// [`Pcap`]: crate::Pcap
    pub complete_checksums: bool,
    /// Read and write many frames per system call through io_uring (the design is in
    /// `ARCHITECTURE.md`, *Devices*): reads in batches of up
    /// to 32, writes queued until [`Device::flush`] and sent together. Only for a
    /// driver that calls [`Device::flush`] after sending (imp's runtime does, every
    /// turn of its loop): until then written frames wait in the device. Where the
    /// kernel has no io_uring (before 5.1, or a seccomp filter refuses it) the device
    /// falls back to one `read`/`write` per frame: [`Tap::batched`] says which it got.
    /// Off by default.
    pub batched: bool,
}

impl TapConfig {
    /// A TAP named `name`, MTU 1500, no offloads.
    pub fn new(name: impl Into<String>) -> TapConfig {
        TapConfig {
            name: name.into(),
            mtu: 1500,
            offloads: false,
            partial_checksums: false,
            complete_checksums: false,
            batched: false,
        }
    }

    /// This configuration with batched I/O through io_uring on or off (see
    /// [`TapConfig::batched`]).
    pub fn batched(self, batched: bool) -> TapConfig {
        TapConfig { batched, ..self }
    }

    /// This configuration with partial checksums of received frames completed or not
    /// (see [`TapConfig::complete_checksums`]).
    pub fn complete_checksums(self, complete_checksums: bool) -> TapConfig {
        TapConfig {
            complete_checksums,
            ..self
        }
    }

    /// This configuration with the stack's TCP/UDP checksums left to the kernel (see
    /// [`TapConfig::partial_checksums`]).
    pub fn partial_checksums(self, partial_checksums: bool) -> TapConfig {
        TapConfig {
            partial_checksums,
            ..self
        }
    }

    /// This configuration with offloads on or off.
    pub fn offloads(self, offloads: bool) -> TapConfig {
        TapConfig { offloads, ..self }
    }

    /// This configuration with another IP MTU.
    pub fn mtu(self, mtu: usize) -> TapConfig {
        TapConfig { mtu, ..self }
    }
}

/// Why a TAP (or TUN) device could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum TapError {
    /// `/dev/net/tun` does not exist: the `tun` module is not loaded, or a container
    /// does not expose the device.
    NoTunDevice,
    /// The kernel refused: creating or attaching a TAP needs `CAP_NET_ADMIN` (root), or
    /// ownership of a persistent TAP.
    NotPermitted,
    /// The interface exists and another process has it open.
    Busy {
        /// The interface name.
        name: String,
    },
    /// The name is taken by an interface that is not a TAP (or by one with different
    /// flags, e.g. multi-queue).
    NameTaken {
        /// The interface name.
        name: String,
    },
    /// The name cannot be an interface name.
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Another error from the operating system.
    Io(io::Error),
}

impl fmt::Display for TapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TapError::NoTunDevice => write!(
                f,
                "/dev/net/tun is missing: load the tun module (modprobe tun) or expose the \
                 device to this container"
            ),
            TapError::NotPermitted => write!(
                f,
                "not permitted to open a TAP or TUN device: run as root or grant CAP_NET_ADMIN"
            ),
            TapError::Busy { name } => write!(
                f,
                "interface {name} is busy: another process has it open; pick another name \
                 or stop that process"
            ),
            TapError::NameTaken { name } => write!(
                f,
                "interface name {name} is taken by a device of another kind (not a plain \
                 TAP, or not a plain TUN): pick another name or delete it (ip link del {name})"
            ),
            TapError::BadName { name, reason } => {
                write!(f, "bad interface name {name:?}: {reason}")
            }
            TapError::Io(e) => write!(f, "opening the TAP/TUN device failed: {e}"),
        }
    }
}

impl std::error::Error for TapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TapError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<TapError> for io::Error {
    fn from(e: TapError) -> io::Error {
        let kind = match &e {
            TapError::NoTunDevice => io::ErrorKind::NotFound,
            TapError::NotPermitted => io::ErrorKind::PermissionDenied,
            TapError::Busy { .. } => io::ErrorKind::ResourceBusy,
            TapError::NameTaken { .. } => io::ErrorKind::AlreadyExists,
            TapError::BadName { .. } => io::ErrorKind::InvalidInput,
            TapError::Io(e) => e.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// Counters of a TAP device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames read.
    pub rx_frames: u64,
    /// Frames read whose checksums the kernel vouched for (`NEEDS_CSUM` or
    /// `DATA_VALID`), passed on without being summed here.
    pub rx_csum_trusted: u64,
    /// Frames read whose partial checksum we completed
    /// ([`TapConfig::complete_checksums`]); also counted in `rx_csum_trusted`.
    pub rx_csum_completed: u64,
    /// Frames read without the kernel's word whose checksums we verified here.
    pub rx_csum_verified: u64,
    /// Frames read without the kernel's word whose IPv4, TCP or UDP checksum was
    /// wrong, dropped.
    pub rx_bad_checksum: u64,
    /// Frames read that were larger than the MTU (coalesced by the kernel, GSO/GRO).
    pub rx_large: u64,
    /// Frames read with a virtio-net header we could not use, dropped.
    pub rx_bad_header: u64,
    /// Frames written.
    pub tx_frames: u64,
    /// Frames written as one large TCP segment for the kernel to cut (TSO).
    pub tx_tso: u64,
    /// Frames the kernel could not take right now (`EAGAIN`).
    pub tx_full: u64,
    /// Batched writes the kernel refused with another error (the frame is lost, as on
    /// a wire).
    pub tx_errors: u64,
    /// With [`TapConfig::batched`]: system calls that carried a batch of reads.
    pub rx_batches: u64,
    /// With [`TapConfig::batched`]: system calls that carried a batch of writes.
    pub tx_batches: u64,
}

/// A Linux TAP device: Ethernet frames to and from the kernel. Non-blocking: wait for
/// its file descriptor ([`AsRawFd`]) to become readable.
#[derive(Debug)]
pub struct Tap {
    /// Batched reads and writes ([`TapConfig::batched`], where the kernel has
    /// io_uring). Before `fd`: dropped first, its last writes sent while `fd` is open.
    uring: Option<Uring>,
    /// Why batching was asked for and is off.
    batch_refused: Option<String>,
    fd: OwnedFd,
    /// Ethernet frames (a TAP) or IP packets (a TUN, see [`Tun`](crate::Tun)).
    link: Link,
    /// The name the kernel gave (the requested one, with `%d` filled in).
    name: String,
    /// IP MTU of the link.
    mtu: usize,
    /// Frames carry a virtio-net header on the file descriptor.
    vnet_hdr: bool,
    /// The kernel accepted `TUN_F_CSUM | TUN_F_TSO4`. Implies `vnet_hdr`.
    offloads: bool,
    /// TCP/UDP checksum fields hold the pseudo-header sum (asked for and `offloads`).
    partial: bool,
    /// Complete the partial checksums of received frames (asked for and `offloads`).
    complete: bool,
    /// Reused for a large frame whose finished checksum must become a partial one.
    scratch: Vec<u8>,
    stats: TapStats,
}

impl Tap {
    /// Create (or attach to) the TAP `name` with MTU 1500 and no offloads.
    pub fn open(name: &str) -> Result<Tap, TapError> {
        Tap::open_with(&TapConfig::new(name))
    }

    /// Create (or attach to) a TAP as `config` says.
    pub fn open_with(config: &TapConfig) -> Result<Tap, TapError> {
        Tap::open_link(config, Link::Ethernet)
    }

    /// Create (or attach to) a multi-queue TAP (`IFF_MULTI_QUEUE`) as `config` says and
    /// open `queues` of its queues, one descriptor each: the kernel spreads what it
    /// sends over them by flow (and steers a flow to the queue that last wrote for it),
    /// and any queue may be written. Every queue has the offloads the first one got. An
    /// existing single-queue TAP of that name cannot be opened so
    /// ([`TapError::NameTaken`]); `queues` 0 is taken as 1.
    pub fn open_queues(config: &TapConfig, queues: usize) -> Result<Vec<Tap>, TapError> {
        Tap::open_link_queues(config, Link::Ethernet, queues)
    }

    /// Create (or attach to) a TAP (`Link::Ethernet`) or a TUN (`Link::Ip`).
    pub(crate) fn open_link(config: &TapConfig, link: Link) -> Result<Tap, TapError> {
        Tap::open_link_as(config, link, 0)
    }

    /// [`Tap::open_queues`] for a TAP or a TUN.
    pub(crate) fn open_link_queues(
        config: &TapConfig,
        link: Link,
        queues: usize,
    ) -> Result<Vec<Tap>, TapError> {
        let first = Tap::open_link_as(config, link, IFF_MULTI_QUEUE)?;
        // The rest as the first was opened (with or without the header), under the name
        // the kernel gave it (a `%d` filled in).
        let config = TapConfig {
            name: first.name.clone(),
            offloads: first.vnet_hdr,
            ..config.clone()
        };
        let mut all = vec![first];
        for _ in 1..queues.max(1) {
            all.push(Tap::open_flags(
                &config,
                link,
                config.offloads,
                IFF_MULTI_QUEUE,
            )?);
        }
        Ok(all)
    }

    /// Open as `config` says, `extra` or-ed into the `TUNSETIFF` flags.
    fn open_link_as(config: &TapConfig, link: Link, extra: libc::c_short) -> Result<Tap, TapError> {
        check_name(&config.name)?;
        if config.offloads {
            match Tap::open_flags(config, link, true, extra) {
                Ok(tap) => return Ok(tap),
                // An old kernel without IFF_VNET_HDR: fall back to plain frames.
                Err(TapError::Io(e)) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        Tap::open_flags(config, link, false, extra)
    }

    fn open_flags(
        config: &TapConfig,
        link: Link,
        vnet_hdr: bool,
        extra: libc::c_short,
    ) -> Result<Tap, TapError> {
        let fd = open_tun()?;
        let mut req = IfReq {
            name: [0; 16],
            flags: link.flag() | IFF_NO_PI | extra | if vnet_hdr { IFF_VNET_HDR } else { 0 },
            _pad: [0; 22],
        };
        for (dst, src) in req.name.iter_mut().zip(config.name.bytes()) {
            *dst = src as libc::c_char;
        }
        // SAFETY: `fd` is an open /dev/net/tun descriptor and `req` a live, properly
        // laid out `struct ifreq` that TUNSETIFF reads and writes (the name) in place.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReq) };
        if rc < 0 {
            return Err(setiff_error(io::Error::last_os_error(), &config.name));
        }
        let name_bytes: Vec<u8> = req
            .name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let name = String::from_utf8_lossy(&name_bytes).into_owned();
        let mut tap = Tap {
            uring: None,
            batch_refused: None,
            fd,
            link,
            name,
            mtu: config.mtu,
            vnet_hdr,
            offloads: false,
            partial: false,
            complete: false,
            scratch: Vec::new(),
            stats: TapStats::default(),
        };
        if vnet_hdr {
            tap.set_vnet_hdr_len()?;
            tap.offloads = tap.set_offloads(TUN_F_CSUM | TUN_F_TSO4).is_ok();
        }
        if !tap.offloads {
            // Without offloads the kernel completes checksums and cuts segments itself;
            // turn them off explicitly, so that a persistent device an earlier process
            // opened with offloads does not go on handing over 64 KiB segments with
            // partial checksums, which only a reader of the virtio-net header can take.
            let _ = tap.set_offloads(0);
        }
        tap.partial = tap.offloads && config.partial_checksums;
        tap.complete = tap.offloads && config.complete_checksums;
        if config.batched {
            let frame_len = tap.header_len() + tap.mtu();
            match Uring::new(tap.fd.as_raw_fd(), frame_len) {
                Ok(uring) => tap.uring = Some(uring),
                Err(e) => tap.batch_refused = Some(e.to_string()),
            }
        }
        Ok(tap)
    }

    /// A second handle on the same device: a duplicate of the descriptor (`dup`), with
    /// the same header, offloads and checksum settings, its own counters and no
    /// batching. One thread may read through one handle while another writes through
    /// the other (as `imp link` does, one thread per direction); two readers would
    /// share the device's frames between them.
    pub fn try_clone(&self) -> io::Result<Tap> {
        Ok(Tap {
            uring: None,
            batch_refused: None,
            fd: self.fd.try_clone()?,
            link: self.link,
            name: self.name.clone(),
            mtu: self.mtu,
            vnet_hdr: self.vnet_hdr,
            offloads: self.offloads,
            partial: self.partial,
            complete: self.complete,
            scratch: Vec::new(),
            stats: TapStats::default(),
        })
    }

    /// Bytes of virtio-net header before every frame on the descriptor.
    fn header_len(&self) -> usize {
        if self.vnet_hdr { VNET_HDR_LEN } else { 0 }
    }

    /// True when reads and writes go in batches through io_uring
    /// ([`TapConfig::batched`] asked for it and the kernel has it).
    pub fn batched(&self) -> bool {
        self.uring.is_some()
    }

    /// Why [`TapConfig::batched`] was asked for and the device fell back to one
    /// system call per frame (the kernel has no io_uring, or refused it), if it did.
    pub fn batch_refused(&self) -> Option<&str> {
        self.batch_refused.as_deref()
    }

    fn set_vnet_hdr_len(&self) -> Result<(), TapError> {
        let len: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer, which is live.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETVNETHDRSZ, &len as *const _) };
        if rc < 0 {
            return Err(TapError::Io(io::Error::last_os_error()));
        }
        Ok(())
    }

    fn set_offloads(&self, flags: libc::c_uint) -> io::Result<()> {
        // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long), no memory.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                TUNSETOFFLOAD,
                libc::c_ulong::from(flags),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The interface name the kernel assigned.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when the kernel accepted checksum and TSO offloads: frames may then be
    /// larger than the MTU both ways.
    pub fn offloads(&self) -> bool {
        self.offloads
    }

    /// The IP MTU the device was opened with.
    pub fn ip_mtu(&self) -> usize {
        self.mtu
    }

    /// The offloads the stack's interface on this TAP should have: with the kernel's
    /// offloads, TSO up to a whole IPv4 packet (the kernel cuts at the MTU), the
    /// checksums left to the kernel when [`TapConfig::partial_checksums`] asked so, and
    /// no verification of received checksums (the kernel vouched for the frame or this
    /// device verified it: see the module documentation); else none.
    ///
    /// One gap: an IPv4 fragment the kernel did not vouch for has only its IP header
    /// verified here (the TCP/UDP checksum covers the reassembled datagram, which only
    /// the stack sees). The kernel marks what it makes itself, so over a TAP such
    /// fragments come only from a packet socket or from forwarding.
    pub fn stack_offloads(&self) -> Offloads {
        if !self.offloads {
            return Offloads::NONE;
        }
        Offloads {
            tx_checksum: self.partial,
            rx_checksum: true,
            tso_max: Some(MAX_IP_PACKET),
        }
    }

    /// Counters.
    pub fn stats(&self) -> TapStats {
        let mut stats = self.stats;
        if let Some(uring) = &self.uring {
            stats.rx_batches = uring.stats.rx_batches;
            stats.tx_batches = uring.stats.tx_batches;
            stats.tx_full += uring.stats.tx_full;
            stats.tx_errors = uring.stats.tx_errors - uring.stats.tx_full;
        }
        stats
    }

    /// The largest frame `send` takes without offloads: MTU plus a tagged Ethernet header.
    fn plain_frame_limit(&self) -> usize {
        self.link.frame_limit(self.mtu)
    }

    /// The largest frame on the wire behind this device: its IP MTU plus a tagged
    /// Ethernet header (a TUN: the IP MTU), whether or not [`Device::mtu`] takes
    /// larger frames with offloads (the kernel cuts those into frames this long).
    pub fn wire_frame_limit(&self) -> usize {
        self.plain_frame_limit()
    }

    fn recv_plain(&mut self, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        if let Some(uring) = self.uring.as_mut().filter(|u| !u.reads_direct()) {
            return match uring.recv(&mut [], buf) {
                Ok(Some(Received::Frame(len))) => Ok(Some(len)),
                Ok(Some(Received::TooLarge(len))) => Err(DeviceError::BufferTooSmall {
                    len,
                    capacity: buf.len(),
                }),
                Ok(None) => Ok(None),
                Err(e) => would_block_or(e),
            };
        }
        let read = match rustix::io::read(&self.fd, buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) => would_block_or(e.into()),
        };
        if let (Some(uring), Ok(Some(n))) = (&mut self.uring, &read) {
            uring.frame_read(*n);
        }
        read
    }

    /// Read frames until one passes [`check_received`] (or none is left).
    fn recv_vnet(&mut self, buf: &mut [u8]) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        loop {
            let Some((header, len)) = self.read_vnet(buf)? else {
                return Ok(None);
            };
            let Some(header) = header else {
                self.stats.rx_bad_header += 1;
                continue;
            };
            let frame = &mut buf[..len];
            match check_received(self.link, frame, &header, self.offloads, self.complete) {
                RxCheck::Trusted => self.stats.rx_csum_trusted += 1,
                RxCheck::Completed => {
                    self.stats.rx_csum_trusted += 1;
                    self.stats.rx_csum_completed += 1;
                }
                RxCheck::Verified => self.stats.rx_csum_verified += 1,
                RxCheck::Unchecked => {}
                RxCheck::BadChecksum => {
                    self.stats.rx_bad_checksum += 1;
                    continue;
                }
                RxCheck::BadHeader => {
                    self.stats.rx_bad_header += 1;
                    continue;
                }
            }
            if len > self.mtu + self.link.header_len() {
                self.stats.rx_large += 1;
            }
            return Ok(Some((
                len,
                rx_offload(&header, self.offloads, self.complete),
            )));
        }
    }

    /// One `readv` of the virtio-net header and the frame into `buf`: `None` when
    /// nothing is waiting, the header (`None` if the read was too short to hold one)
    /// and the frame's length otherwise.
    fn read_vnet(
        &mut self,
        buf: &mut [u8],
    ) -> Result<Option<(Option<VnetHeader>, usize)>, DeviceError> {
        let mut header = [0u8; VNET_HDR_LEN];
        let n = if let Some(uring) = self.uring.as_mut().filter(|u| !u.reads_direct()) {
            match uring.recv(&mut header, buf) {
                Ok(Some(Received::Frame(len))) => len,
                Ok(Some(Received::TooLarge(len))) => {
                    return Err(DeviceError::BufferTooSmall {
                        len: len - VNET_HDR_LEN,
                        capacity: buf.len(),
                    });
                }
                Ok(None) => return Ok(None),
                Err(e) => return would_block_or(e).map(|_| None),
            }
        } else {
            let mut iov = [IoSliceMut::new(&mut header), IoSliceMut::new(buf)];
            match rustix::io::readv(&self.fd, &mut iov) {
                Ok(n) => {
                    if let Some(uring) = &mut self.uring {
                        uring.frame_read(n);
                    }
                    n
                }
                Err(e) => return would_block_or(e.into()).map(|_| None),
            }
        };
        Ok(Some(match n.checked_sub(VNET_HDR_LEN) {
            Some(len) => (Some(VnetHeader::parse(&header)), len),
            None => (None, 0),
        }))
    }

    fn send_with_header(&mut self, header: &VnetHeader, frame: &[u8]) -> io::Result<usize> {
        let bytes = header.emit();
        self.write_pieces(&[&bytes, frame])
    }

    /// Write one frame given in pieces: queued in the batch when the device batches
    /// and the frame is small ([`Uring::batches`]), else at once (after the writes
    /// queued before it, which keeps the order).
    fn write_pieces(&mut self, pieces: &[&[u8]]) -> io::Result<usize> {
        let len = pieces.iter().map(|p| p.len()).sum();
        if let Some(uring) = &mut self.uring {
            if Uring::batches(len) {
                uring.queue(pieces)?;
                return Ok(len);
            }
            uring.flush()?;
        }
        let mut iov = [IoSlice::new(&[]); 4];
        for (slot, piece) in iov.iter_mut().zip(pieces) {
            *slot = IoSlice::new(piece);
        }
        Ok(rustix::io::writev(&self.fd, &iov[..pieces.len().min(4)])?)
    }

    /// As [`Tap::send_with_header`] for a frame in pieces (`head`, then the payload).
    fn send_pieces(
        &mut self,
        header: &VnetHeader,
        head: &[u8],
        (a, b): (&[u8], &[u8]),
    ) -> io::Result<usize> {
        let bytes = header.emit();
        self.write_pieces(&[&bytes[..], head, a, b])
    }

    /// The outcome of a write as `Device::send` reports it, counted.
    fn sent(&mut self, result: io::Result<usize>) -> Result<bool, DeviceError> {
        match result {
            Ok(_) => {
                self.stats.tx_frames += 1;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.stats.tx_full += 1;
                Ok(false)
            }
            Err(e) => Err(device_error(e)),
        }
    }

    fn send_plain(&mut self, frame: &[u8]) -> io::Result<usize> {
        self.write_pieces(&[frame])
    }
}

impl Device for Tap {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        Ok(self.recv_offloaded(now, buf)?.map(|(len, _)| len))
    }

    /// With offloads, the frame's segment size (`GSO_TCPV4`, `GSO_TCPV6`) and whether
    /// its checksum is partial (`NEEDS_CSUM`, not completed here).
    fn recv_offloaded(
        &mut self,
        _now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RxOffload)>, DeviceError> {
        let received = if self.vnet_hdr {
            self.recv_vnet(buf)?
        } else {
            self.recv_plain(buf)?.map(|len| (len, RxOffload::NONE))
        };
        if received.is_some() {
            self.stats.rx_frames += 1;
        }
        Ok(received)
    }

    /// With offloads and partial checksums, one write with a `GSO_TCPV4`/`GSO_TCPV6`
    /// header asking the kernel to cut at `gso_size` (at most what the MTU holds);
    /// otherwise as [`Device::send`].
    fn send_segmented(
        &mut self,
        now: Instant,
        frame: &[u8],
        gso_size: u16,
    ) -> Result<bool, DeviceError> {
        let header = (self.offloads && self.partial && frame.len() > self.plain_frame_limit())
            .then(|| tso_header(self.link, frame, self.mtu))
            .flatten();
        let Some(mut header) = header else {
            return self.send(now, frame);
        };
        header.gso_size = header.gso_size.min(gso_size.max(1));
        self.stats.tx_tso += 1;
        let result = self.send_with_header(&header, frame);
        self.sent(result)
    }

    /// Frames longer than the MTU are taken only with offloads, and only TCP over IPv4:
    /// the kernel cuts them into segments of MTU size (TSO).
    fn send(&mut self, _now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        let result = if self.vnet_hdr {
            let limit = self.plain_frame_limit();
            let (header, finished) = vnet_header_for(
                self.link,
                frame,
                self.mtu,
                limit,
                self.offloads,
                self.partial,
            )?;
            if header.gso_type != VIRTIO_NET_HDR_GSO_NONE {
                self.stats.tx_tso += 1;
            }
            if finished {
                // The stack finished the checksum of a frame the kernel will cut: it
                // must hold the partial sum instead (copied into a reused buffer).
                let mut scratch = core::mem::take(&mut self.scratch);
                scratch.clear();
                scratch.extend_from_slice(frame);
                prepare_partial_checksum(self.link, &mut scratch, &header);
                let sent = self.send_with_header(&header, &scratch);
                self.scratch = scratch;
                sent
            } else {
                self.send_with_header(&header, frame)
            }
        } else {
            if frame.len() > self.plain_frame_limit() {
                return Err(DeviceError::FrameTooLarge {
                    len: frame.len(),
                    mtu: self.plain_frame_limit(),
                });
            }
            self.send_plain(frame)
        };
        self.sent(result)
    }

    /// With the virtio-net header and partial checksums: `head` (the Ethernet, IPv4
    /// and TCP headers) and the payload in one `writev`, never joined. Otherwise (or
    /// when the headers are not those of a plain TCP segment), joined.
    fn send_gather(
        &mut self,
        now: Instant,
        head: &[u8],
        payload: (&[u8], &[u8]),
    ) -> Result<bool, DeviceError> {
        let len = head.len() + payload.0.len() + payload.1.len();
        let header = if self.gathers()
            && tcp_offsets(self.link, head).is_some_and(|(_, _, p)| p == head.len())
        {
            vnet_header_for_len(
                self.link,
                head,
                len,
                self.mtu,
                self.plain_frame_limit(),
                self.offloads,
                self.partial,
            )?
        } else {
            None
        };
        match header {
            Some(header) => {
                if header.gso_type != VIRTIO_NET_HDR_GSO_NONE {
                    self.stats.tx_tso += 1;
                }
                let result = self.send_pieces(&header, head, payload);
                self.sent(result)
            }
            None => {
                let frame = [head, payload.0, payload.1].concat();
                self.send(now, &frame)
            }
        }
    }

    fn gathers(&self) -> bool {
        self.vnet_hdr && self.partial
    }

    /// With [`TapConfig::batched`], submit the writes queued since the last flush, in
    /// one system call.
    fn flush(&mut self, _now: Instant) -> Result<(), DeviceError> {
        match &mut self.uring {
            Some(uring) if uring.pending() => uring.flush().map_err(device_error),
            _ => Ok(()),
        }
    }

    /// With offloads, a whole IPv4 packet (64 KiB) in one frame; else the MTU plus a
    /// tagged Ethernet header.
    fn mtu(&self) -> usize {
        if self.offloads {
            self.link.frame_limit(MAX_IP_PACKET)
        } else {
            self.plain_frame_limit()
        }
    }
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What a received frame's virtio-net `header` tells the stack (with `offloads`; a
/// checksum completed here, `complete`, is no longer partial).
fn rx_offload(header: &VnetHeader, offloads: bool, complete: bool) -> RxOffload {
    if !offloads {
        return RxOffload::NONE;
    }
    let gso = header.gso_type & !VIRTIO_NET_HDR_GSO_ECN;
    let tcp = gso == VIRTIO_NET_HDR_GSO_TCPV4 || gso == VIRTIO_NET_HDR_GSO_TCPV6;
    RxOffload {
        gso_size: (tcp && header.gso_size != 0).then_some(header.gso_size),
        partial_checksum: !complete && header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0,
    }
}

/// The fields of `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct VnetHeader {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHeader {
    fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHeader {
        let word = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: word(2),
            gso_size: word(4),
            csum_start: word(6),
            csum_offset: word(8),
        }
    }

    fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// The virtio-net header for `frame`, and whether its TCP checksum is finished and
/// must be turned into a partial one first. A frame longer than `limit` must be TCP
/// over IPv4 with offloads on: TSO (`GSO_TCPV4`, the kernel cuts at `mtu`); with
/// `partial`, a TCP or UDP frame within `limit` asks the kernel to complete its
/// checksum (`NEEDS_CSUM`, offset 16 for TCP, 6 for UDP); anything else goes as is.
/// The virtio-net header for a frame of `len` bytes whose headers `head` holds (and
/// nothing after them), when its checksum is left to the kernel (`partial`); None when
/// the stack would have finished it (the default path handles that).
fn vnet_header_for_len(
    link: Link,
    head: &[u8],
    len: usize,
    mtu: usize,
    limit: usize,
    offloads: bool,
    partial: bool,
) -> Result<Option<VnetHeader>, DeviceError> {
    if len > limit {
        return match offloads.then(|| tso_header(link, head, mtu)).flatten() {
            Some(header) if partial => Ok(Some(header)),
            Some(_) => Ok(None),
            None => Err(DeviceError::FrameTooLarge { len, mtu: limit }),
        };
    }
    if !(offloads && partial) {
        return Ok(None);
    }
    Ok(csum_header(link, head))
}

fn vnet_header_for(
    link: Link,
    frame: &[u8],
    mtu: usize,
    limit: usize,
    offloads: bool,
    partial: bool,
) -> Result<(VnetHeader, bool), DeviceError> {
    if frame.len() > limit {
        let tso = offloads.then(|| tso_header(link, frame, mtu)).flatten();
        return match tso {
            Some(header) => Ok((header, !partial)),
            None => Err(DeviceError::FrameTooLarge {
                len: frame.len(),
                mtu: limit,
            }),
        };
    }
    if !(offloads && partial) {
        return Ok((VnetHeader::default(), false));
    }
    Ok((csum_header(link, frame).unwrap_or_default(), false))
}

/// The transport header of `frame`: an unfragmented IPv4 packet, or an IPv6 one whose
/// fixed header is followed by the transport header (no extension headers). Returns
/// (the IP header's offset, the transport header's, its protocol, IPv6).
fn transport_start(link: Link, frame: &[u8]) -> Option<(usize, usize, u8, bool)> {
    if let Some(ip) = link.ipv4_start(frame) {
        let ihl = usize::from(frame[ip] & 0x0f) * 4;
        let fragment = u16::from_be_bytes([frame[ip + 6], frame[ip + 7]]) & 0x3fff;
        return (ihl >= 20 && fragment == 0).then_some((ip, ip + ihl, frame[ip + 9], false));
    }
    let ip = link.ipv6_start(frame)?;
    Some((ip, ip + 40, frame[ip + 6], true))
}

/// `NEEDS_CSUM` for a TCP or UDP frame (IPv4 unfragmented, or IPv6 without extension
/// headers) whose checksum field holds the pseudo-header sum; None for anything else.
fn csum_header(link: Link, frame: &[u8]) -> Option<VnetHeader> {
    let (_, start, protocol, _) = transport_start(link, frame)?;
    let offset = match protocol {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if start + offset + 2 > frame.len() {
        return None;
    }
    Some(VnetHeader {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: u16::try_from(start).ok()?,
        csum_offset: offset as u16,
    })
}

/// Virtio 1.x §5.1.6.2.1 `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the field at `csum_start +
/// csum_offset` holds the pseudo-header sum; the checksum is the ones complement of the
/// sum from `csum_start` to the end. False if the offsets do not fit the frame.
fn complete_checksum(frame: &mut [u8], header: &VnetHeader) -> bool {
    let start = usize::from(header.csum_start);
    let field = start + usize::from(header.csum_offset);
    if field + 2 > frame.len() {
        return false;
    }
    let sum = checksum::data(&frame[start..]);
    frame[field..field + 2].copy_from_slice(&checksum::finish(sum).to_be_bytes());
    true
}

/// What [`check_received`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RxCheck {
    /// The kernel vouched for the checksums (`NEEDS_CSUM` or `DATA_VALID`): not summed.
    Trusted,
    /// Vouched for, and the partial checksum was completed as asked.
    Completed,
    /// Not vouched for; summed here and right.
    Verified,
    /// Without offloads: the stack verifies, nothing done here.
    Unchecked,
    /// Not vouched for, and the IPv4 header or TCP/UDP checksum is wrong: drop.
    BadChecksum,
    /// `NEEDS_CSUM` with offsets outside the frame: drop.
    BadHeader,
}

/// Check a received `frame` by its virtio-net `header`, so that the stack may skip
/// verifying its checksums (`offloads`: the stack's interface has `rx_checksum`).
/// Frames the kernel vouched for pass unsummed (completed first when `complete`);
/// others are verified here. Without `offloads` nothing is checked.
fn check_received(
    link: Link,
    frame: &mut [u8],
    header: &VnetHeader,
    offloads: bool,
    complete: bool,
) -> RxCheck {
    if header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        // Virtio 1.x §5.1.6.4: the checksum from csum_start to the end is missing.
        // The kernel made this frame; its data is what the sender wrote.
        let field = usize::from(header.csum_start) + usize::from(header.csum_offset);
        if field + 2 > frame.len() {
            return RxCheck::BadHeader;
        }
        if complete || !offloads {
            complete_checksum(frame, header);
            return if offloads {
                RxCheck::Completed
            } else {
                RxCheck::Unchecked
            };
        }
        return RxCheck::Trusted;
    }
    if !offloads {
        return RxCheck::Unchecked;
    }
    if header.flags & VIRTIO_NET_HDR_F_DATA_VALID != 0 {
        return RxCheck::Trusted;
    }
    if checksums_valid(link, frame) {
        RxCheck::Verified
    } else {
        RxCheck::BadChecksum
    }
}

/// True unless `frame` is IPv4 with a wrong header checksum or, unfragmented, a wrong
/// TCP or UDP checksum (a UDP checksum of zero means none was computed, RFC 768).
/// What is not IPv4, or too short to tell, passes: the stack parses and drops it.
fn checksums_valid(link: Link, frame: &[u8]) -> bool {
    let Some(ip) = link.ipv4_start(frame) else {
        return checksums_valid_v6(link, frame);
    };
    let ihl = usize::from(frame[ip] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[ip + 2], frame[ip + 3]]));
    if ihl < 20 || total < ihl || ip + total > frame.len() {
        return true;
    }
    if checksum::data(&frame[ip..ip + ihl]) != 0xffff {
        return false;
    }
    let fragment = u16::from_be_bytes([frame[ip + 6], frame[ip + 7]]) & 0x3fff;
    let protocol = frame[ip + 9];
    let l4 = &frame[ip + ihl..ip + total];
    let field = match protocol {
        6 => 16,
        17 => 6,
        _ => return true,
    };
    if fragment != 0 || l4.len() < field + 2 {
        return true;
    }
    if protocol == 17 && l4[field..field + 2] == [0, 0] {
        return true;
    }
    let src = std::net::Ipv4Addr::new(
        frame[ip + 12],
        frame[ip + 13],
        frame[ip + 14],
        frame[ip + 15],
    );
    let dst = std::net::Ipv4Addr::new(
        frame[ip + 16],
        frame[ip + 17],
        frame[ip + 18],
        frame[ip + 19],
    );
    let pseudo = checksum::pseudo_header_v4(&src, &dst, protocol, l4.len() as u32);
    checksum::combine(&[pseudo, checksum::data(l4)]) == 0xffff
}

/// As [`checksums_valid`] for IPv6: false only for a TCP or UDP packet (no extension
/// headers) whose checksum is wrong; a zero UDP checksum is left to the stack, which
/// drops it (RFC 8200 §8.1).
fn checksums_valid_v6(link: Link, frame: &[u8]) -> bool {
    let Some(ip) = link.ipv6_start(frame) else {
        return true;
    };
    let payload_len = usize::from(u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]));
    let Some(l4) = frame.get(ip + 40..ip + 40 + payload_len) else {
        return true;
    };
    let protocol = frame[ip + 6];
    let field = match protocol {
        6 => 16,
        17 => 6,
        _ => return true,
    };
    if l4.len() < field + 2 || (protocol == 17 && l4[field..field + 2] == [0, 0]) {
        return true;
    }
    let address = |at: usize| {
        let mut octets = [0; 16];
        octets.copy_from_slice(&frame[at..at + 16]);
        std::net::Ipv6Addr::from(octets)
    };
    let (src, dst) = (address(ip + 8), address(ip + 24));
    let pseudo = checksum::pseudo_header_v6(&src, &dst, protocol, l4.len() as u32);
    checksum::combine(&[pseudo, checksum::data(l4)]) == 0xffff
}

/// The header asking the kernel to cut `frame`, a frame carrying one IPv4 or IPv6 TCP
/// segment, into segments that fit `mtu`; `None` if the frame is anything else.
fn tso_header(link: Link, frame: &[u8], mtu: usize) -> Option<VnetHeader> {
    let (ip_start, tcp_start, payload_start) = tcp_offsets(link, frame)?;
    let headers = payload_start - ip_start;
    let gso_size = mtu.checked_sub(headers).filter(|&s| s > 0)?;
    let v6 = link.ipv6_start(frame).is_some();
    Some(VnetHeader {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: if v6 {
            VIRTIO_NET_HDR_GSO_TCPV6
        } else {
            VIRTIO_NET_HDR_GSO_TCPV4
        },
        hdr_len: u16::try_from(payload_start).ok()?,
        gso_size: u16::try_from(gso_size).ok()?,
        csum_start: u16::try_from(tcp_start).ok()?,
        csum_offset: 16,
    })
}

/// Offsets of the IP header, TCP header and TCP payload in an untagged Ethernet frame
/// (or IP packet) carrying an unfragmented IPv4 TCP segment or an IPv6 one without
/// extension headers.
fn tcp_offsets(link: Link, frame: &[u8]) -> Option<(usize, usize, usize)> {
    let (ip, tcp, protocol, _) = transport_start(link, frame)?;
    if protocol != 6 {
        return None;
    }
    let data_offset = usize::from(*frame.get(tcp + 12)? >> 4) * 4;
    let payload = tcp + data_offset;
    (data_offset >= 20 && payload <= frame.len()).then_some((ip, tcp, payload))
}

/// Replace a finished TCP checksum by the pseudo-header sum over the whole segment, as
/// the kernel expects of a `NEEDS_CSUM` GSO frame (it adjusts the length per segment).
fn prepare_partial_checksum(link: Link, frame: &mut [u8], header: &VnetHeader) {
    let ip = link.header_len();
    let tcp = usize::from(header.csum_start);
    let tcp_len = (frame.len() - tcp) as u32;
    let field = tcp + usize::from(header.csum_offset);
    if link.ipv6_start(frame).is_some() {
        let address = |at: usize| {
            let mut octets = [0; 16];
            octets.copy_from_slice(&frame[at..at + 16]);
            std::net::Ipv6Addr::from(octets)
        };
        let pseudo = checksum::pseudo_header_v6(&address(ip + 8), &address(ip + 24), 6, tcp_len);
        frame[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
        return;
    }
    let src = std::net::Ipv4Addr::new(
        frame[ip + 12],
        frame[ip + 13],
        frame[ip + 14],
        frame[ip + 15],
    );
    let dst = std::net::Ipv4Addr::new(
        frame[ip + 16],
        frame[ip + 17],
        frame[ip + 18],
        frame[ip + 19],
    );
    let pseudo = checksum::pseudo_header_v4(&src, &dst, 6, tcp_len);
    frame[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
}

/// Linux `dev_valid_name`: not empty, shorter than IFNAMSIZ, not `.` or `..`, no `/`,
/// `:` or white space.
fn check_name(name: &str) -> Result<(), TapError> {
    let bad = |reason| {
        Err(TapError::BadName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty: give a name such as imp0 (or imp%d to let the kernel number it)");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("longer than 15 bytes, the kernel's limit (IFNAMSIZ)");
    }
    if name == "." || name == ".." {
        return bad("`.` and `..` are not interface names");
    }
    if name
        .bytes()
        .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
    {
        return bad("contains `/`, `:`, a NUL or white space");
    }
    Ok(())
}

fn open_tun() -> Result<OwnedFd, TapError> {
    // O_RDWR | O_NONBLOCK, and O_CLOEXEC, which std always adds.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun");
    match opened {
        Ok(file) => Ok(OwnedFd::from(file)),
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => TapError::NoTunDevice,
            Some(libc::EPERM) | Some(libc::EACCES) => TapError::NotPermitted,
            _ => TapError::Io(e),
        }),
    }
}

fn setiff_error(e: io::Error, name: &str) -> TapError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => TapError::NotPermitted,
        Some(libc::EBUSY) => TapError::Busy {
            name: name.to_owned(),
        },
        // The name exists as another kind of device (or a TAP with other flags). A name
        // the kernel dislikes is caught by `check_name` before.
        Some(libc::EINVAL) if !name.contains('%') && interface_exists(name) => {
            TapError::NameTaken {
                name: name.to_owned(),
            }
        }
        _ => TapError::Io(e),
    }
}

/// True when an interface called `name` exists in the calling thread's namespace.
fn interface_exists(name: &str) -> bool {
    let Ok(name) = CString::new(name) else {
        return false;
    };
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(name.as_ptr()) != 0 }
}

fn would_block_or(e: io::Error) -> Result<Option<usize>, DeviceError> {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(device_error(e)),
    }
}

/// A read or write error as a [`DeviceError`]: the interface deleted under us (a TUN or
/// TAP detached from its queue answers `EBADFD`; a vanished device `ENODEV` or `ENXIO`)
/// is [`DeviceError::Closed`], for good; anything else is passed on as it came.
fn device_error(e: io::Error) -> DeviceError {
    match e.raw_os_error() {
        Some(libc::EBADFD | libc::ENODEV | libc::ENXIO) => DeviceError::Closed,
        _ => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_device_is_closed_for_good() {
        for errno in [libc::EBADFD, libc::ENODEV, libc::ENXIO] {
            assert_eq!(
                would_block_or(io::Error::from_raw_os_error(errno)),
                Err(DeviceError::Closed)
            );
        }
        assert_eq!(
            would_block_or(io::Error::from_raw_os_error(libc::EAGAIN)),
            Ok(None)
        );
        assert!(matches!(
            would_block_or(io::Error::from_raw_os_error(libc::EFAULT)),
            Err(DeviceError::Io(..))
        ));
    }

    #[test]
    fn a_batched_tap_falls_back_to_plain_reads_and_writes_without_io_uring() {
        // As on a kernel without io_uring (or a seccomp filter refusing it).
        crate::uring::tests::REFUSE.with(|r| r.set(true));
        let opened = Tap::open_with(&TapConfig::new("impbfb%d").batched(true));
        crate::uring::tests::REFUSE.with(|r| r.set(false));
        let mut tap = match opened {
            Ok(tap) => tap,
            Err(e @ (TapError::NotPermitted | TapError::NoTunDevice)) => {
                assert!(
                    std::env::var_os("IMP_REQUIRE_ROOT").is_none(),
                    "IMP_REQUIRE_ROOT is set, so this test may not skip: {e}"
                );
                eprintln!("skipped: cannot open a TAP here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(!tap.batched());
        let why = tap.batch_refused().expect("says why");
        assert!(why.contains("not implemented"), "{why}");
        // Plain reads: nothing waits on a new TAP, and no batch was made.
        let mut buf = vec![0; tap.mtu()];
        assert_eq!(tap.recv(Instant::ZERO, &mut buf), Ok(None));
        assert_eq!(tap.flush(Instant::ZERO), Ok(()));
        let stats = tap.stats();
        assert_eq!((stats.rx_batches, stats.tx_batches), (0, 0));
        // Without the fallback forced, the same TAP config batches (this kernel has
        // io_uring) or says why not.
        let tap = Tap::open_with(&TapConfig::new("impbfb%d").batched(true)).expect("open");
        assert!(tap.batched() != tap.batch_refused().is_some());
    }

    #[test]
    fn names_are_checked_like_the_kernel() {
        assert!(check_name("imp0").is_ok());
        assert!(check_name("imp%d").is_ok());
        assert!(check_name("a234567890123456").is_err());
        assert!(check_name("a23456789012345").is_ok());
        for bad in ["", ".", "..", "a/b", "a:b", "a b"] {
            let err = check_name(bad).unwrap_err();
            assert!(matches!(err, TapError::BadName { .. }), "{bad:?}");
            assert!(err.to_string().contains("bad interface name"));
        }
    }

    #[test]
    fn vnet_header_round_trips() {
        let h = VnetHeader {
            flags: 1,
            gso_type: 1,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(VnetHeader::parse(&h.emit()), h);
    }

    /// An Ethernet + IPv4 + TCP frame (20-byte headers) with `payload` bytes of data,
    /// TCP checksum finished.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        let total = (20 + 20 + payload) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[14 + 8] = 64;
        f[14 + 9] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34 + 12] = 5 << 4;
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let src = std::net::Ipv4Addr::new(10, 0, 0, 1);
        let dst = std::net::Ipv4Addr::new(10, 0, 0, 2);
        let sum = checksum::combine(&[
            checksum::pseudo_header_v4(&src, &dst, 6, (20 + payload) as u32),
            checksum::data(&f[34..]),
        ]);
        f[50..52].copy_from_slice(&checksum::finish(sum).to_be_bytes());
        f
    }

    #[test]
    fn partial_checksums_complete_to_the_real_one() {
        let good = tcp_frame(3000);
        let header = tso_header(Link::Ethernet, &good, 1500).expect("a TCP frame");
        assert_eq!(header.gso_size, 1460);
        assert_eq!(header.hdr_len, 54);
        assert_eq!(header.csum_start, 34);
        let mut partial = good.clone();
        prepare_partial_checksum(Link::Ethernet, &mut partial, &header);
        assert_ne!(partial, good);
        assert!(complete_checksum(&mut partial, &header));
        assert_eq!(partial, good);
    }

    #[test]
    fn only_tcp_over_ipv4_is_cut() {
        let mut udp = tcp_frame(100);
        udp[14 + 9] = 17;
        assert_eq!(tso_header(Link::Ethernet, &udp, 1500), None);
        let mut arp = tcp_frame(100);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(tso_header(Link::Ethernet, &arp, 1500), None);
        assert_eq!(tso_header(Link::Ethernet, &[0u8; 20], 1500), None);
        let bad = VnetHeader {
            csum_start: 60,
            csum_offset: 16,
            ..VnetHeader::default()
        };
        assert!(!complete_checksum(&mut [0u8; 70], &bad));
    }

    #[test]
    fn partial_checksum_frames_ask_the_kernel_to_complete_them() {
        let frame = tcp_frame(100);
        let (h, finished) =
            vnet_header_for(Link::Ethernet, &frame, 1500, 1518, true, true).expect("fits");
        assert!(!finished);
        assert_eq!(h.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
        assert_eq!(h.gso_type, VIRTIO_NET_HDR_GSO_NONE);
        assert_eq!((h.csum_start, h.csum_offset), (34, 16));
        let mut udp = tcp_frame(100);
        udp[14 + 9] = 17;
        let (h, _) = vnet_header_for(Link::Ethernet, &udp, 1500, 1518, true, true).expect("fits");
        assert_eq!((h.flags, h.csum_start, h.csum_offset), (1, 34, 6));
        // Finished checksums, or no offloads: nothing to do for the kernel.
        for (offloads, partial) in [(true, false), (false, false), (false, true)] {
            let (h, finished) =
                vnet_header_for(Link::Ethernet, &frame, 1500, 1518, offloads, partial)
                    .expect("fits");
            assert_eq!((h, finished), (VnetHeader::default(), false));
        }
        // A fragment carries no whole checksum to complete.
        let mut fragment = tcp_frame(100);
        fragment[14 + 6] = 0x20;
        let (h, _) =
            vnet_header_for(Link::Ethernet, &fragment, 1500, 1518, true, true).expect("fits");
        assert_eq!(h, VnetHeader::default());
    }

    /// An Ethernet frame with an IPv6 TCP segment of `payload` bytes (2001:db8::1 to
    /// ::2), its checksum finished.
    fn tcp6_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 20 + payload];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
        f[20] = 6;
        f[21] = 64;
        let (src, dst): (std::net::Ipv6Addr, std::net::Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        f[22..38].copy_from_slice(&src.octets());
        f[38..54].copy_from_slice(&dst.octets());
        f[54 + 12] = 5 << 4;
        for (i, b) in f[74..].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let sum = checksum::combine(&[
            checksum::pseudo_header_v6(&src, &dst, 6, (20 + payload) as u32),
            checksum::data(&f[54..]),
        ]);
        f[70..72].copy_from_slice(&checksum::finish(sum).to_be_bytes());
        f
    }

    #[test]
    fn ipv6_tcp_frames_get_partial_checksums_and_tso_too() {
        let frame = tcp6_frame(100);
        assert!(checksums_valid(Link::Ethernet, &frame));
        let mut bad = frame.clone();
        bad[80] ^= 0x40;
        assert!(!checksums_valid(Link::Ethernet, &bad));
        // Small: NEEDS_CSUM from the TCP header on.
        let (h, _) = vnet_header_for(Link::Ethernet, &frame, 1500, 1518, true, true).unwrap();
        assert_eq!((h.flags, h.csum_start, h.csum_offset), (1, 54, 16));
        // Large: TSO for IPv6, cut at the MTU less 60 bytes of headers.
        let large = tcp6_frame(8000);
        let (h, finished) =
            vnet_header_for(Link::Ethernet, &large, 1500, 1518, true, false).expect("tso");
        assert_eq!(h.gso_type, VIRTIO_NET_HDR_GSO_TCPV6);
        assert_eq!((h.gso_size, h.hdr_len, h.csum_start), (1440, 74, 54));
        assert!(finished);
        // The finished checksum made partial, then completed as the kernel does: the
        // real one again.
        let mut partial = large.clone();
        prepare_partial_checksum(Link::Ethernet, &mut partial, &h);
        assert_ne!(partial, large);
        assert!(complete_checksum(&mut partial, &h));
        assert_eq!(partial, large);
        // On a TUN the same packet without its Ethernet header.
        let (h, _) = vnet_header_for(Link::Ip, &large[14..], 1500, 1500, true, true).unwrap();
        assert_eq!(
            (h.gso_type, h.csum_start, h.hdr_len),
            (VIRTIO_NET_HDR_GSO_TCPV6, 40, 60)
        );
        // An extension header in front of TCP: neither (the stack sends none such).
        let mut ext = frame.clone();
        ext[20] = 60;
        assert_eq!(csum_header(Link::Ethernet, &ext), None);
        assert_eq!(tso_header(Link::Ethernet, &ext, 1500), None);
    }

    #[test]
    fn large_frames_go_as_tso_and_only_with_offloads() {
        let frame = tcp_frame(8000);
        let (h, finished) =
            vnet_header_for(Link::Ethernet, &frame, 1500, 1518, true, true).expect("tso");
        assert_eq!(h.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!((h.gso_size, h.hdr_len, h.flags), (1460, 54, 1));
        assert!(!finished, "a partial sum goes as it is");
        let (_, finished) =
            vnet_header_for(Link::Ethernet, &frame, 1500, 1518, true, false).expect("tso");
        assert!(finished, "a finished checksum must be made partial");
        assert!(matches!(
            vnet_header_for(Link::Ethernet, &frame, 1500, 1518, false, false),
            Err(DeviceError::FrameTooLarge { .. })
        ));
    }

    /// `tcp_frame` as the kernel hands it over with `NEEDS_CSUM`: the checksum field
    /// holds the pseudo-header sum.
    fn partial_frame(payload: usize) -> (Vec<u8>, VnetHeader) {
        let mut frame = tcp_frame(payload);
        let header = VnetHeader {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHeader::default()
        };
        prepare_partial_checksum(Link::Ethernet, &mut frame, &header);
        (frame, header)
    }

    #[test]
    fn frames_the_kernel_vouches_for_pass_unsummed() {
        let (frame, header) = partial_frame(3000);
        let mut received = frame.clone();
        assert_eq!(
            check_received(Link::Ethernet, &mut received, &header, true, false),
            RxCheck::Trusted
        );
        assert_eq!(received, frame, "left as it came: partial, not summed");
        // DATA_VALID passes even with a checksum that would not verify: the kernel
        // (or the NIC) checked it before it was changed, so we do not look.
        let valid = VnetHeader {
            flags: VIRTIO_NET_HDR_F_DATA_VALID,
            ..VnetHeader::default()
        };
        let mut garbled = tcp_frame(100);
        garbled[60] ^= 0xff;
        assert_eq!(
            check_received(Link::Ethernet, &mut garbled, &valid, true, false),
            RxCheck::Trusted
        );
    }

    #[test]
    fn partial_checksums_are_completed_when_asked_or_without_offloads() {
        let (frame, header) = partial_frame(3000);
        let good = tcp_frame(3000);
        let mut received = frame.clone();
        assert_eq!(
            check_received(Link::Ethernet, &mut received, &header, true, true),
            RxCheck::Completed
        );
        assert_eq!(received, good);
        // A vnet header without offloads: the stack verifies, so it needs the real sum.
        let mut received = frame.clone();
        assert_eq!(
            check_received(Link::Ethernet, &mut received, &header, false, false),
            RxCheck::Unchecked
        );
        assert_eq!(received, good);
        let bad = VnetHeader {
            csum_start: 3050,
            ..header
        };
        assert_eq!(
            check_received(Link::Ethernet, &mut frame.clone(), &bad, true, false),
            RxCheck::BadHeader
        );
    }

    #[test]
    fn frames_without_the_kernels_word_are_verified_here() {
        let none = VnetHeader::default();
        assert_eq!(
            check_received(Link::Ethernet, &mut ipv4_frame(6, 100), &none, true, false),
            RxCheck::Verified
        );
        // A flipped payload bit, a wrong IPv4 header checksum, a partial TCP checksum
        // without NEEDS_CSUM: all dropped.
        let mut payload = ipv4_frame(6, 100);
        payload[70] ^= 0x01;
        assert_eq!(
            check_received(Link::Ethernet, &mut payload, &none, true, false),
            RxCheck::BadChecksum
        );
        let mut ip = ipv4_frame(6, 100);
        ip[14 + 8] = 63;
        assert!(!checksums_valid(Link::Ethernet, &ip));
        let (mut partial, header) = partial_frame(100);
        partial[24..26].copy_from_slice(&ipv4_frame(6, 100)[24..26]);
        assert!(!checksums_valid(Link::Ethernet, &partial));
        complete_checksum(&mut partial, &header);
        assert!(checksums_valid(Link::Ethernet, &partial));
        // Without offloads the stack verifies: nothing is checked here.
        assert_eq!(
            check_received(Link::Ethernet, &mut payload, &none, false, false),
            RxCheck::Unchecked
        );
    }

    /// `tcp_frame` with a correct IPv4 header checksum, as protocol `protocol`.
    fn ipv4_frame(protocol: u8, payload: usize) -> Vec<u8> {
        let mut f = tcp_frame(payload);
        f[14 + 9] = protocol;
        let sum = checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&checksum::finish(sum).to_be_bytes());
        f
    }

    #[test]
    fn udp_without_checksum_fragments_and_other_frames_pass() {
        // The IPv4 header checksum is part of the check.
        let tcp = ipv4_frame(6, 100);
        assert!(checksums_valid(Link::Ethernet, &tcp));
        let mut bad_header = tcp.clone();
        bad_header[24] ^= 0x10;
        assert!(!checksums_valid(Link::Ethernet, &bad_header));
        // UDP with checksum zero: none computed (RFC 768).
        let mut udp = ipv4_frame(17, 100);
        udp[34 + 6..34 + 8].copy_from_slice(&[0, 0]);
        assert!(checksums_valid(Link::Ethernet, &udp));
        udp[34 + 6] = 0x12;
        assert!(!checksums_valid(Link::Ethernet, &udp));
        // A fragment: only the IP header can be checked.
        let mut fragment = ipv4_frame(6, 100);
        fragment[14 + 6] = 0x20;
        let sum = {
            fragment[24..26].copy_from_slice(&[0, 0]);
            checksum::data(&fragment[14..34])
        };
        fragment[24..26].copy_from_slice(&checksum::finish(sum).to_be_bytes());
        fragment[60] ^= 0xff;
        assert!(checksums_valid(Link::Ethernet, &fragment));
        // ICMP, ARP and runts are the stack's to judge.
        assert!(checksums_valid(Link::Ethernet, &ipv4_frame(1, 8)));
        let mut arp = tcp_frame(100);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(checksums_valid(Link::Ethernet, &arp));
        assert!(checksums_valid(Link::Ethernet, &[0u8; 20]));
    }

    /// `tcp_frame` without its Ethernet header: the IP packet a TUN carries.
    fn tcp_packet(payload: usize) -> Vec<u8> {
        tcp_frame(payload)[14..].to_vec()
    }

    #[test]
    fn a_tun_finds_the_ip_header_at_zero() {
        assert_eq!(Link::Ip.ipv4_start(&tcp_packet(0)), Some(0));
        let mut v6 = tcp_packet(0);
        v6[0] = 0x60;
        assert_eq!(Link::Ip.ipv4_start(&v6), None);
        assert_eq!(Link::Ip.ipv4_start(&[0x45; 19]), None);
        // An Ethernet frame is no IP packet, and an IP packet no Ethernet frame.
        assert_eq!(Link::Ip.ipv4_start(&tcp_frame(0)), None);
        assert_eq!(Link::Ethernet.ipv4_start(&tcp_packet(40)), None);
        assert_eq!(Link::Ip.frame_limit(1500), 1500);
        assert_eq!(Link::Ethernet.frame_limit(1500), 1518);
    }

    #[test]
    fn tun_packets_get_offsets_from_the_ip_header() {
        let packet = tcp_packet(8000);
        let (h, finished) =
            vnet_header_for(Link::Ip, &packet, 1500, 1500, true, false).expect("tso");
        assert_eq!(h.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!(
            (h.gso_size, h.hdr_len, h.csum_start, h.csum_offset),
            (1460, 40, 20, 16)
        );
        assert!(finished);
        let mut partial = packet.clone();
        prepare_partial_checksum(Link::Ip, &mut partial, &h);
        assert!(!checksums_valid(Link::Ip, &partial));
        assert!(complete_checksum(&mut partial, &h));
        assert_eq!(partial, packet);
        assert!(checksums_valid(Link::Ip, &ipv4_frame(6, 100)[14..]));
        let mut bad = ipv4_frame(6, 100)[14..].to_vec();
        bad[50] ^= 1;
        let none = VnetHeader::default();
        assert_eq!(
            check_received(Link::Ip, &mut bad, &none, true, false),
            RxCheck::BadChecksum
        );
        let small = tcp_packet(100);
        let (h, _) = vnet_header_for(Link::Ip, &small, 1500, 1500, true, true).expect("fits");
        assert_eq!((h.flags, h.csum_start, h.csum_offset), (1, 20, 16));
        assert!(matches!(
            vnet_header_for(Link::Ip, &tcp_packet(1461), 1500, 1500, false, false),
            Err(DeviceError::FrameTooLarge {
                len: 1501,
                mtu: 1500
            })
        ));
    }

    #[test]
    fn errors_convert_to_io_kinds() {
        let e: io::Error = TapError::NotPermitted.into();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("CAP_NET_ADMIN"));
        let e: io::Error = TapError::NoTunDevice.into();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e: io::Error = TapError::Busy { name: "x".into() }.into();
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy);
    }

    #[test]
    fn the_virtio_net_header_tells_the_stack_segment_size_and_partial_checksum() {
        let header = |flags, gso_type, gso_size| VnetHeader {
            flags,
            gso_type,
            gso_size,
            ..VnetHeader::default()
        };
        let tso = header(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448);
        let both = RxOffload {
            gso_size: Some(1448),
            partial_checksum: true,
        };
        assert_eq!(rx_offload(&tso, true, false), both);
        let ecn = header(
            VIRTIO_NET_HDR_F_NEEDS_CSUM,
            0x80 | VIRTIO_NET_HDR_GSO_TCPV6,
            1428,
        );
        assert_eq!(rx_offload(&ecn, true, false).gso_size, Some(1428));
        // Completed here: no longer partial. Without offloads: nothing to say.
        assert!(!rx_offload(&tso, true, true).partial_checksum);
        assert_eq!(rx_offload(&tso, false, false), RxOffload::NONE);
        // A small frame the kernel made; one it verified; UDP fragmentation (not TCP).
        let small = header(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_NONE, 0);
        assert_eq!(
            rx_offload(&small, true, false),
            RxOffload {
                gso_size: None,
                partial_checksum: true
            }
        );
        let valid = header(VIRTIO_NET_HDR_F_DATA_VALID, VIRTIO_NET_HDR_GSO_NONE, 0);
        assert_eq!(rx_offload(&valid, true, false), RxOffload::NONE);
        assert_eq!(
            rx_offload(&header(0, 3, 1400), true, false),
            RxOffload::NONE
        );
    }
}
