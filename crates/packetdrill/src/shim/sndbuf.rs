//! The shim's side of the send-buffer model ([`crate::sndbuf`]): the model kept per
//! socket, fed from the stack's TCP_INFO.

use impnet_core::tcp::TcpHandle;

use crate::errno::Errno;
use crate::errqueue::Progress;
use crate::sndbuf::{View, locked_sndbuf, tso_autosize};
use crate::socket::{Fd, Phase, TcpSocket};

use super::Shim;

impl TcpSocket {
    /// TCP_NOTSENT_LOWAT in force: the socket's, else `tcp_notsent_lowat`.
    pub(crate) fn notsent_lowat(&self) -> u32 {
        self.options.notsent_lowat.unwrap_or(self.send.sysctl_lowat)
    }
}

impl Shim {
    /// `tcp_wmem`'s default and maximum (the flags' buffer and Linux's 4 MiB without
    /// the sysctl).
    pub(crate) fn wmem(&self) -> (usize, usize) {
        let text = self.sysctl("tcp_wmem").unwrap_or_default();
        let mut numbers = text.split_whitespace().map(|w| w.parse::<usize>().ok());
        match (numbers.next(), numbers.next(), numbers.next()) {
            (Some(_), Some(Some(default)), Some(Some(max))) => (default, max),
            _ => (self.flags.sndbuf, 4 * 1024 * 1024),
        }
    }

    /// `tcp_min_tso_segs` (Linux's 2 without the sysctl).
    pub(crate) fn min_tso_segs(&self) -> usize {
        self.sysctl("tcp_min_tso_segs")
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(2)
    }

    /// `tcp_notsent_lowat` (none without the sysctl).
    pub(crate) fn sysctl_lowat(&self) -> u32 {
        self.sysctl("tcp_notsent_lowat")
            .and_then(|text| text.trim().parse::<u64>().ok())
            .map_or(u32::MAX, |v| u32::try_from(v).unwrap_or(u32::MAX))
    }

    /// The connection as the send model sees it, `written` bytes into its stream.
    fn send_view(&self, handle: TcpHandle, written: u64, min_tso_segs: usize) -> Option<View> {
        let info = self.stack.tcp_info(handle)?;
        let Progress::At { acked, sent } = Progress::of(Some(&info), written) else {
            return None;
        };
        let mss = usize::from(info.snd_mss).max(1);
        Some(View {
            acked,
            sent,
            mss,
            cwnd: info.cwnd as usize,
            flight: info.bytes_in_flight as usize,
            wnd: info.snd_wnd as usize,
            tso: tso_autosize(&info, mss, min_tso_segs),
            now_us: self.now.as_nanos() / 1000,
            srtt_us: info.srtt.map_or(0, |d| d.as_nanos() / 1000),
        })
    }

    /// `fd`'s connection, its view and low-water mark, with the model's buffer size
    /// brought up to SO_SNDBUF (None: not connected, or still opening).
    fn model_of(&mut self, fd: i32) -> Result<Option<(TcpHandle, View, u32)>, Errno> {
        let socket = self.tcp_socket(fd)?;
        let Phase::Conn(handle) = socket.phase else {
            return Ok(None);
        };
        let (written, min_tso) = (socket.send.written(), socket.send.min_tso_segs);
        let lowat = socket.notsent_lowat();
        if let Some(asked) = socket.options.sndbuf {
            socket.send.locked = true;
            socket.send.sndbuf = locked_sndbuf(asked);
        }
        Ok(self
            .send_view(handle, written, min_tso)
            .map(|view| (handle, view, lowat)))
    }

    /// How many of `want` bytes a write on `fd` may hand the stack now.
    pub(crate) fn write_room(&mut self, fd: i32, want: usize) -> Result<usize, Errno> {
        let Some((_, view, lowat)) = self.model_of(fd)? else {
            return Ok(want);
        };
        Ok(self.tcp_socket(fd)?.send.write(want, &view, lowat))
    }

    /// The stack took `taken` of the `planned` bytes [`Shim::write_room`] allowed.
    pub(crate) fn wrote(&mut self, fd: i32, planned: usize, taken: usize) -> Result<(), Errno> {
        let model = &mut self.tcp_socket(fd)?.send;
        if taken < planned {
            model.give_back(planned - taken);
        }
        Ok(())
    }

    /// POLLOUT on `fd`'s connection (`tcp_poll`); with `mark`, a socket found not
    /// writable waits for a wake-up (`SOCK_NOSPACE`).
    pub(crate) fn pollout(&mut self, fd: i32, mark: bool) -> Result<bool, Errno> {
        let Some((_, view, lowat)) = self.model_of(fd)? else {
            return Ok(false);
        };
        let model = &mut self.tcp_socket(fd)?.send;
        model.sync(&view);
        let writable = model.writable(lowat);
        if !writable && mark {
            model.nospace = true;
        }
        Ok(writable)
    }

    /// Write-space wake-ups of `fd` so far.
    pub fn write_wakeups(&mut self, fd: i32) -> u64 {
        self.tcp_socket(fd).map_or(0, |s| s.send.wakeups)
    }

    /// Whether a writer that went to sleep at `since` wake-ups sleeps on: no wake-up
    /// since, and the connection still open without an error.
    pub fn write_still_asleep(&mut self, fd: i32, since: u64) -> bool {
        let Ok(socket) = self.tcp_socket(fd) else {
            return false;
        };
        let (wakeups, phase) = (socket.send.wakeups, socket.phase);
        let Phase::Conn(handle) = phase else {
            return false;
        };
        let open = self.stack.tcp_info(handle).is_some_and(|i| {
            matches!(
                i.state,
                impnet_core::tcp::TcpState::Established | impnet_core::tcp::TcpState::CloseWait
            )
        });
        wakeups == since && open && self.stack.tcp_error(handle).ok().flatten().is_none()
    }

    /// The connected descriptors whose model holds bytes.
    fn modelled(&self) -> Vec<(i32, TcpHandle, u64, usize)> {
        self.fds
            .iter()
            .filter_map(|(&fd, entry)| match entry {
                Fd::Tcp(socket) => match socket.phase {
                    Phase::Conn(handle) if socket.send.written() > 0 || socket.send.nospace => {
                        Some((fd, handle, socket.send.written(), socket.send.min_tso_segs))
                    }
                    _ => None,
                },
                Fd::Epoll(_) => None,
            })
            .collect()
    }

    /// After the stack sent: the skbs of the bytes it sent are cut as Linux's TSO
    /// packets would be.
    pub(crate) fn track_sent(&mut self) {
        for (fd, handle, written, min_tso) in self.modelled() {
            if let Some(view) = self.send_view(handle, written, min_tso)
                && let Ok(socket) = self.tcp_socket(fd)
            {
                socket.send.sync(&view);
            }
        }
    }

    /// Before a packet goes in: whether each window is full.
    pub(crate) fn before_packet(&mut self) -> Vec<i32> {
        let mut out = Vec::new();
        for (fd, handle, written, min_tso) in self.modelled() {
            if let Some(view) = self.send_view(handle, written, min_tso)
                && let Ok(socket) = self.tcp_socket(fd)
            {
                socket.send.before_ack(&view);
                out.push(fd);
            }
        }
        out
    }

    /// After a packet went in (`tcp_check_space`): writers out of room are woken once
    /// writable.
    pub(crate) fn after_packet(&mut self, fds: &[i32]) {
        for &fd in fds {
            if let Ok(Some((_, view, lowat))) = self.model_of(fd)
                && let Ok(socket) = self.tcp_socket(fd)
            {
                socket.send.after_ack(&view, lowat);
            }
        }
    }
}
