//! FTP (RFC 959, with RFC 2428's EPSV/EPRT and RFC 3659's SIZE, MDTM and REST) as
//! state machines that do no network I/O, so the same protocol code runs over imp's
//! sockets (`imp serve --ftp`, `imp ftp`) and in the simulator (`ftp` flows).
//!
//! - [`command`]: a control line to a [`Command`], or the reply saying what was wrong
//!   (500, 501, 502, 504, 522); the PORT/PASV and EPRT/EPSV address forms.
//! - [`reply`]: [`Reply`] formatting (one line or several) and [`ReplyParser`].
//! - [`server`]: [`Session`], one control connection of a server, over a
//!   [`FileTree`] ([`fs`]: [`DiskFs`] confined to a directory, [`MemFs`]).
//! - [`client`]: [`Client`], a session that runs one request.
//! - [`ascii`]: TYPE A's LF to CRLF and back, across buffer boundaries.
//! - [`path`]: names resolved against the working directory, never above the root.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ascii;
pub mod client;
pub mod command;
pub mod fs;
pub mod path;
pub mod reply;
pub mod server;

pub use client::{Client, ClientAction, DataMode, Plan, Request};
pub use command::{Command, TransferType};
pub use fs::{DiskFs, FileTree, MemFs};
pub use reply::{Reply, ReplyParser};
pub use server::{
    Action, DataPeer, Direction, LineBuffer, ServerConfig, Session, Transfer, TransferOutcome,
};
