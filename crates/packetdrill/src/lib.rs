//! imp under packetdrill: a shared object for packetdrill's `--so_filename`.
//!
//! packetdrill (google/packetdrill) plays the remote side of a TCP conversation from a
//! script and checks every packet the stack under test sends, and when. Given
//! `--so_filename=libimpnet_packetdrill.so` it loads this library, calls
//! [`packetdrill_interface_init`] with the
//! `--so_flags` string, and from then on makes its socket calls, hands over its
//! packets and reads the stack's through the table that call filled.
//!
//! - [`flags`]: the `--so_flags` words (address, gateway, MTU, congestion control, ...).
//! - [`shim`]: the stack on virtual time and its interface.
//! - [`socket`], [`sockopt`], [`poll`]: the socket calls with Linux's errno values.
//! - [`sndbuf`]: how much a write takes and when a writer wakes, as Linux accounts.
//! - [`errqueue`]: the error queue: MSG_ZEROCOPY completions, SO_TIMESTAMPING records.
//! - [`fastopen`]: TCP Fast Open's options, `MSG_FASTOPEN` and the sysctls.
//! - [`driver`]: blocking calls on virtual time across packetdrill's two threads.
//! - [`ffi`]: the C table and its functions.
//!
//! Only IPv4 and TCP sockets exist; `pipe` and `splice` fail with `ENOSYS`.

pub mod driver;
pub mod errqueue;
pub mod fastopen;
pub mod ffi;
pub mod flags;
pub mod poll;
pub mod shim;
pub mod sndbuf;
pub mod socket;
pub mod sockopt;

pub use ffi::{PacketdrillInterface, packetdrill_interface_init};
