//! What the sockets' zero-copy calls share: the error of a send that hands over its
//! buffer ([`OwnedWriteError`], which gives the buffer back), and the core's refusal
//! turned into it.
//!
//! `TcpStream::send_owned` (blocking and tokio) hands a `Vec<u8>` to the stack, which
//! keeps it in the connection's send buffer instead of copying it in and frees it once
//! the peer has acknowledged it; `TcpStream::recv_with` lends the connection's receive
//! ring to a closure, which says how many bytes it used. The closure runs under the
//! runtime's lock: it must not call into the runtime (another socket call would wait
//! for itself).

use std::io;

use impnet_core::tcp::{SendOwnedError, TcpError};

/// A buffer `send_owned` did not queue, given back with the reason (no data is lost:
/// nothing of it was sent).
#[derive(Debug)]
pub struct OwnedWriteError {
    /// Why: as a `write` would say (`WouldBlock` on a non-blocking stream, `TimedOut`
    /// after the write timeout, `BrokenPipe` after our shutdown, ...), or
    /// `InvalidInput` for a buffer larger than the connection's send buffer (write
    /// it with `write_all` instead).
    pub error: io::Error,
    /// The buffer, untouched.
    pub data: Vec<u8>,
}

impl std::fmt::Display for OwnedWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} bytes given back)", self.error, self.data.len())
    }
}

impl std::error::Error for OwnedWriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<OwnedWriteError> for io::Error {
    fn from(e: OwnedWriteError) -> io::Error {
        e.error
    }
}

/// One attempt at queuing `data`: None (the buffer kept in `data`) while there is no
/// room, else the outcome; `ended` turns a connection's error into what a write gets.
pub(crate) fn attempt_owned(
    result: Result<(), SendOwnedError>,
    data: &mut Option<Vec<u8>>,
    ended: impl FnOnce(TcpError) -> io::Error,
) -> Option<io::Result<()>> {
    match result {
        Ok(()) => Some(Ok(())),
        Err(SendOwnedError { error, data: back }) => {
            *data = Some(back);
            match error {
                TcpError::WouldBlock => None,
                TcpError::BufferTooLarge => Some(Err(crate::error::tcp(error))),
                e => Some(Err(ended(e))),
            }
        }
    }
}
