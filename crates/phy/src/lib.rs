//! Devices for imp: the [`Device`] trait and devices that compose over it.
//!
//! - [`pipe()`]: two in-memory [`PipeEnd`]s joining two stacks, in one thread or two.
//! - [`LinkModel`]: the link model (rate, delay, drop-tail queue, loss, reordering,
//!   duplication, corruption) as pure code over a time parameter and a seeded [`Rng`],
//!   shared with the simulator. A [`LinkConfig`] parses from one line,
//!   `delay=20ms,loss=1%,rate=100mbit` ([`link::spec`]); [`units`] parses the
//!   quantities (`100M`, `100mbit`, `20ms`, `1%`) of that line, the command line's
//!   other flags and scenario files.
//! - [`Impair`]: applies link models to the frames of any device, in real time.
//! - [`Offload`]: software GRO and GSO over any device ([`segmentation`] holds the
//!   pure functions: [`segmentation::coalesce`], [`segmentation::segment`]).
//! - [`Pcap`]: records every frame a device passes to a pcap file ([`PcapWriter`]).
//! - [`Tap`] (feature `tap`, on by default; Linux): a TAP device, with optional
//!   virtio-net offloads, and optionally batched reads and writes through io_uring
//!   (`TapConfig::batched`, many frames per system call; plain `read`/`write` where
//!   the kernel has no io_uring). The only `unsafe` of the crate lives there and in
//!   the io_uring module beside it.
//! - [`Tun`] (feature `tap`; Linux): a TUN device (bare IP packets), the TAP's code
//!   opened with `IFF_TUN`.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod device;
pub mod impair;
pub mod link;
pub mod offload;
pub mod pcap;
pub mod pipe;
pub mod rng;
pub mod segmentation;
#[cfg(all(feature = "tap", target_os = "linux"))]
pub mod tap;
#[cfg(all(feature = "tap", target_os = "linux"))]
pub mod tun;
pub mod units;
#[cfg(all(feature = "tap", target_os = "linux"))]
mod uring;

#[cfg(test)]
mod testutil;

pub use device::{Device, DeviceError};
pub use impair::Impair;
pub use link::{DropReason, LinkConfig, LinkConfigError, LinkModel, LinkStats, Submit};
pub use offload::{Offload, OffloadStats};
pub use pcap::{Pcap, PcapReader, PcapWriter};
pub use pipe::{PipeEnd, PipeStats, pipe, pipe_with_capacity};
pub use rng::Rng;
pub use segmentation::{Checksums, Framing};
#[cfg(all(feature = "tap", target_os = "linux"))]
pub use tap::{Tap, TapConfig, TapError, TapStats};
#[cfg(all(feature = "tap", target_os = "linux"))]
pub use tun::{Tun, TunConfig};
