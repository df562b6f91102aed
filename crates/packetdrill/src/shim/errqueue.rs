//! The shim's side of the error queue ([`crate::errqueue`]): each socket's queue kept up
//! with its stream, and `recvmsg(MSG_ERRQUEUE)`.

use crate::errno::Errno;
use crate::errqueue::{Progress, Record};
use crate::socket::{Fd, Phase};

use super::Shim;

impl Shim {
    /// Bring every socket's error queue up to its stream (after the stack moved).
    pub(crate) fn update_error_queues(&mut self) {
        let now = self.now;
        for entry in self.fds.values_mut() {
            let Fd::Tcp(socket) = entry else { continue };
            if !socket.errq.waiting() {
                continue;
            }
            let Phase::Conn(handle) = socket.phase else {
                continue;
            };
            let info = self.stack.tcp_info(handle);
            let progress = Progress::of(info.as_ref(), socket.errq.written);
            socket.errq.update(progress, now);
        }
    }

    /// A send call on `fd` returned `n` bytes taken, with `flags`: its zero-copy
    /// number and timestamp mark, and what is due already.
    pub fn after_send(&mut self, fd: i32, n: usize, flags: i32) -> Result<(), Errno> {
        if n == 0 {
            return Ok(());
        }
        let socket = self.tcp_socket(fd)?;
        let zerocopy = flags & libc::MSG_ZEROCOPY != 0 && socket.options.zerocopy;
        socket.errq.sent_call(zerocopy);
        self.update_error_queues();
        Ok(())
    }

    /// The stream's acknowledged bytes on `fd` now (None: not connected).
    pub(crate) fn acked_bytes(&mut self, fd: i32) -> Result<Option<u64>, Errno> {
        let socket = self.tcp_socket(fd)?;
        let Phase::Conn(handle) = socket.phase else {
            return Ok(None);
        };
        let written = socket.errq.written;
        let info = self.stack.tcp_info(handle);
        Ok(match Progress::of(info.as_ref(), written) {
            Progress::At { acked, .. } => Some(acked),
            Progress::Opening | Progress::Purged => None,
        })
    }

    /// `recvmsg(MSG_ERRQUEUE)`: the oldest record, with whether its time is reported
    /// and whether the socket is an IPv6 one; EAGAIN when there is none (Linux never
    /// waits on the error queue).
    pub fn recv_error(&mut self, fd: i32) -> Result<(Record, bool, bool), Errno> {
        let socket = self.tcp_socket(fd)?;
        let record = socket.errq.pop().ok_or(libc::EAGAIN)?;
        Ok((record, socket.errq.reports_software(), socket.v6))
    }
}
