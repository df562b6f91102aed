//! imp-core: the sans-IO TCP/IP stack.
//!
//! Bytes and time go in, bytes and deadlines come out. Nothing here reads a clock,
//! spawns a thread, touches a socket or draws randomness of its own: `now` is a
//! parameter of every call that needs it, and randomness comes from the seed in the
//! stack's configuration.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod tcp;
pub mod time;

pub use time::{Duration, Instant};
