//! Packet formats for imp: zero-copy views over byte slices plus plain `Repr` structs.
//!
//! Every format follows one shape (see `shared/STYLE.md`): a `Packet<T: AsRef<[u8]>>`
//! view with `new_checked`/`check_len`, a `mod field` of byte ranges, getters on
//! `AsRef<[u8]>` and setters on `AsMut<[u8]>`, and a `Repr` with `parse`, `buffer_len`
//! and `emit`. Once `check_len` has passed no accessor panics, and `parse` never panics
//! on any input: every malformed packet is a typed [`Error`].
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod icmpv4;
pub mod ipv4;
pub mod tcp;
pub mod udp;

pub use error::{Error, Result};
