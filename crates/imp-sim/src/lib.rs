//! The deterministic simulator: hosts and links in virtual time.
#![warn(missing_docs)]
