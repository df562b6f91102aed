//! imp under packetdrill: a shared object for packetdrill's `--so_filename`.
//!
//! packetdrill (google/packetdrill) plays the remote side of a TCP conversation from a
//! script and checks every packet the stack under test sends, and when. Given
//! `--so_filename=libimpnet_packetdrill.so` it loads this library, calls
//! [`packetdrill_interface_init`] with the
//! `--so_flags` string, and from then on makes its socket calls, hands over its
//! packets and reads the stack's through the table that call filled.
//!
//! The layers, each importing only those below it:
//!
//! - [`ffi`]: the C table and its functions.
//! - [`driver`]: blocking calls on virtual time across packetdrill's two threads.
//! - [`shim`]: the stack on virtual time and its interface, `Shim`, in `shim.rs`, and
//!   the files of its methods in `shim/`: the socket calls with Linux's errno values,
//!   `getsockopt` and `setsockopt`, poll and epoll, and the shim's side of the
//!   send-buffer model, the error queue and Fast Open.
//! - The leaves, which never import `Shim`: [`socket`] (a descriptor and a TCP
//!   socket's state), [`sndbuf`] (how much a write takes and when a writer wakes, as
//!   Linux accounts), [`errqueue`] (the error queue: MSG_ZEROCOPY completions,
//!   SO_TIMESTAMPING records), [`fastopen`] (TCP Fast Open's settings and
//!   `MSG_FASTOPEN`), [`poll`] (readiness bits and an epoll instance), [`errno`],
//!   [`flags`] (the `--so_flags` words: address, gateway, MTU, congestion control,
//!   ...) and `gather` (slices of a gather list).
//!
//! Only IPv4 and TCP sockets exist; `pipe` and `splice` fail with `ENOSYS`.

pub mod driver;
pub mod errno;
pub mod errqueue;
pub mod fastopen;
pub mod ffi;
pub mod flags;
mod gather;
pub mod poll;
pub mod shim;
pub mod sndbuf;
pub mod socket;

pub use ffi::{PacketdrillInterface, packetdrill_interface_init};
