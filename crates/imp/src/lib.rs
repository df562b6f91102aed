//! imp: a user-space TCP/IP stack. This crate is what applications depend on.
#![warn(missing_docs)]

pub use imp_core as core;
pub use imp_wire as wire;
