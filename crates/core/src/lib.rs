//! impnet-core: the sans-IO TCP/IP stack.
//!
//! Bytes and time go in, bytes and deadlines come out. Nothing here reads a clock,
//! spawns a thread, touches a socket or draws randomness of its own: `now` is a
//! parameter of every call that needs it, and randomness comes from the seed in the
//! stack's configuration. Start at [`Stack`].
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod accept_any;
pub mod acl;
pub mod dhcp;
pub mod icmp;
pub mod iface;
pub(crate) mod igmp;
pub mod ip_options;
pub mod ipv6;
pub mod neighbor;
pub mod qdisc;
pub mod raw;
pub mod reassembly;
pub mod rng;
pub mod route;
pub mod secret;
pub mod siphash;
mod socket;
pub mod stack;
pub mod stats;
pub mod tcp;
pub mod time;
pub mod udp;

#[cfg(test)]
pub(crate) mod testutil;

pub use accept_any::{AcceptAny, AcceptAnyStats};
pub use dhcp::{DhcpClient, DhcpError, DhcpEvent, Lease};
pub use icmp::{EchoReply, IcmpError, IcmpHandle, IcmpRateLimit};
pub use iface::{IfaceConfig, IfaceId, Medium, Offloads, RxOffload};
pub use ipv6::{Addr6, AddrOrigin, AddrState, Ipv6Config, Route6, Route6Origin, Routes6};
pub use neighbor::ArpConfig;
pub use raw::{RawError, RawHandle};
pub use reassembly::ReassemblyConfig;
pub use route::{Route, RouteCounters, Routes};
pub use secret::Secret;
pub use stack::{Event, Stack, StackConfig, Transmit};
pub use stats::{ForwardStats, IfaceStats, SegmentKind, SegmentKinds, Stats, WorkStats};
pub use time::{Duration, Instant};
pub use udp::{UdpError, UdpHandle};
