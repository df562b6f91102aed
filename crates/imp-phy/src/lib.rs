//! Devices for imp: the [`Device`] trait and devices that compose over it.
#![warn(missing_docs)]
