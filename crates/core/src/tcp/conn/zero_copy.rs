//! The zero-copy calls on one connection ([`Tcp::send_owned`](crate::tcp::Tcp::send_owned),
//! [`Tcp::recv_with`](crate::tcp::Tcp::recv_with)).

use super::Conn;
use crate::tcp::TcpConfig;
use crate::tcp::TcpError;
use crate::tcp::buffer::{RecvBuffer, SendBuffer};
use crate::tcp::state::{Closed, State};
use alloc::vec::Vec;

/// A buffer [`Tcp::send_owned`](crate::tcp::Tcp::send_owned) did not take, given back with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOwnedError {
    /// Why: `WouldBlock` (no room for all of it yet), `BufferTooLarge` (it would
    /// never fit: send it in pieces), or the connection's error.
    pub error: TcpError,
    /// The buffer, untouched.
    pub data: Vec<u8>,
}

impl core::fmt::Display for SendOwnedError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({} bytes given back)", self.error, self.data.len())
    }
}

impl Conn {
    /// RFC 9293 §3.10.2 SEND of a buffer the connection keeps: all of it or none.
    pub fn send_owned(&mut self, data: Vec<u8>) -> Result<(), SendOwnedError> {
        let refuse = |error, data| Err(SendOwnedError { error, data });
        let buffer: &mut SendBuffer = match &mut self.state {
            State::SynSent(s) => &mut s.buffer,
            State::SynRcvd(s) => &mut s.buffer,
            State::Established(s) => &mut s.snd.buffer,
            State::CloseWait(s) => &mut s.snd.buffer,
            State::Closed(Closed { error: Some(e) }) => return refuse(*e, data),
            // As `send`: "error: connection closing".
            _ => return refuse(TcpError::Closing, data),
        };
        if data.capacity() > buffer.capacity() {
            return refuse(TcpError::BufferTooLarge, data);
        }
        buffer
            .write_owned(data)
            .or_else(|data| refuse(TcpError::WouldBlock, data))
    }

    /// Where a read finds its bytes: the unread data a clean close kept, or the
    /// receive ring (None before the connection has one), with what an empty read
    /// reports.
    fn readable(&mut self) -> Result<Readable<'_>, TcpError> {
        let fin_received = matches!(
            self.state,
            State::CloseWait(_) | State::Closing(_) | State::LastAck(_) | State::TimeWait(_)
        );
        if let State::Closed(Closed { error }) = self.state {
            return match self.unread_mut() {
                Some(unread) => Ok(Readable::Unread(unread)),
                None => error.map_or(Ok(Readable::End), Err),
            };
        }
        match self.state.recv_buffer_mut() {
            Some(buffer) => Ok(Readable::Ring {
                buffer,
                fin_received,
            }),
            None => Err(TcpError::WouldBlock),
        }
    }

    /// RFC 9293 §3.10.3 RECEIVE without a copy: `f` gets the readable bytes (the part
    /// up to the ring's end; call again for the rest) and returns how many it used.
    /// At end of stream `f` gets an empty slice and the result is `Ok(0)`; with nothing
    /// to read yet, `WouldBlock` and `f` is not called.
    pub fn recv_with(
        &mut self,
        config: &TcpConfig,
        f: impl FnOnce(&[u8]) -> usize,
    ) -> Result<usize, TcpError> {
        let n = match self.readable()? {
            Readable::Unread(unread) => {
                let n = f(unread).min(unread.len());
                unread.drain(..n);
                return Ok(n);
            }
            Readable::End => {
                f(&[]);
                return Ok(0);
            }
            Readable::Ring {
                buffer,
                fin_received,
            } => {
                let (first, _) = buffer.readable_slices();
                if first.is_empty() {
                    return at_end(fin_received, || {
                        f(&[]);
                    });
                }
                let n = f(first).min(first.len());
                buffer.consume(n);
                n
            }
        };
        self.maybe_window_update(config.recv_buffer, n);
        Ok(n)
    }

    /// RFC 9293 §3.10.3 RECEIVE of up to `max` bytes: `f` is shown them where they lie
    /// (one piece, or two where the ring wraps), in order ([`copy_into`](super::copy_into)
    /// copies them out, which is `Tcp::recv`).
    pub fn recv_each(
        &mut self,
        config: &TcpConfig,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, TcpError> {
        let n = match self.readable()? {
            Readable::Unread(unread) => {
                let n = max.min(unread.len());
                f(&unread[..n]);
                unread.drain(..n);
                return Ok(n);
            }
            Readable::End => return Ok(0),
            Readable::Ring {
                buffer,
                fin_received,
            } => {
                let n = buffer.read_each(max, f);
                if n == 0 && max != 0 {
                    return at_end(fin_received, || {});
                }
                n
            }
        };
        self.maybe_window_update(config.recv_buffer, n);
        Ok(n)
    }
}

/// What [`Conn::readable`] found.
enum Readable<'a> {
    /// The bytes a clean close left unread (never empty).
    Unread(&'a mut Vec<u8>),
    /// Closed cleanly with nothing left: end of stream.
    End,
    /// The receive ring, and whether the peer's FIN came (an empty ring is then the
    /// end of the stream).
    Ring {
        buffer: &'a mut RecvBuffer,
        fin_received: bool,
    },
}

/// An empty read: the end of the stream after the peer's FIN (`end` runs, `Ok(0)`),
/// else nothing yet.
fn at_end(fin_received: bool, end: impl FnOnce()) -> Result<usize, TcpError> {
    if fin_received {
        end();
        Ok(0)
    } else {
        Err(TcpError::WouldBlock)
    }
}
