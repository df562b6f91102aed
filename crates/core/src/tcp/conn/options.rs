//! One connection's own settings ([`SocketOptions`]): what each changes when set, and
//! the values the rest of the connection reads (its own, else the stack's).

use super::{Cold, Conn, new_cold, our_wscale};
use crate::tcp::TcpConfig;
use crate::tcp::buffer::SendBuffer;
use crate::tcp::cc::{CcAlgorithm, CongestionControl, Controller};
use crate::tcp::shared::Pool;
use crate::tcp::socket_options::{SocketOption, SocketOptions};
use crate::tcp::state::State;
use crate::time::Duration;

impl Conn {
    /// The settings this connection holds apart from the stack's (None: none).
    pub fn options(&self) -> Option<&SocketOptions> {
        self.cold.as_ref().map(|cold| &cold.options)
    }

    /// The connection's settings, to change (the cold part is made if needed).
    fn options_mut(&mut self) -> &mut SocketOptions {
        &mut self.cold.get_or_insert_with(new_cold).options
    }

    /// The cold part a new connection starts with when it takes `options` (a
    /// listener's, for its child): none while they are the defaults.
    pub(super) fn inherited(options: Option<&SocketOptions>) -> Option<alloc::boxed::Box<Cold>> {
        let options = options.filter(|o| !o.is_default())?;
        let mut cold = new_cold();
        cold.options = *options;
        Some(cold)
    }

    /// The congestion controller to start with.
    pub fn congestion(&self, config: &TcpConfig) -> CcAlgorithm {
        self.options()
            .and_then(|o| o.congestion)
            .unwrap_or(config.congestion)
    }

    /// The user timeout in force (RFC 9293 §3.8.3): the connection's, else the stack's.
    pub fn user_timeout(&self, config: &TcpConfig) -> Option<Duration> {
        self.options()
            .and_then(|o| o.user_timeout)
            .or(config.user_timeout)
    }

    /// The receive buffer's size: the connection's, else the stack's.
    pub fn recv_buffer_size(&self, config: &TcpConfig) -> usize {
        self.options()
            .and_then(|o| o.recv_buffer)
            .map_or(config.recv_buffer, |b| b as usize)
    }

    /// TCP_NOTSENT_LOWAT: true while fewer bytes than half the limit wait unsent
    /// (always true without one). Half, as Linux's `tcp_poll` wakes a writer
    /// (`tcp_stream_memory_free(sk, 1)`: "notsent_bytes << wake < lowat"), so that it
    /// finds room for a useful write.
    pub fn below_notsent_lowat(&self) -> bool {
        let Some(lowat) = self.options().and_then(|o| o.notsent_lowat) else {
            return true;
        };
        self.unsent() * 2 < lowat as usize
    }

    /// TCP_NOTSENT_LOWAT: how many more bytes a write may queue, as Linux's
    /// `tcp_sendmsg` stops once the unsent bytes reach the limit (None without one:
    /// only the buffer limits a write).
    pub fn notsent_room(&self) -> Option<usize> {
        let lowat = self.options().and_then(|o| o.notsent_lowat)?;
        Some((lowat as usize).saturating_sub(self.unsent()))
    }

    /// Bytes queued and never sent.
    fn unsent(&self) -> usize {
        match &self.state {
            State::SynSent(s) => s.buffer.len(),
            State::SynRcvd(s) => s.buffer.len(),
            state => state
                .snd()
                .map_or(0, |s| s.buffer.len().saturating_sub(s.outstanding())),
        }
    }

    /// Set one of the connection's own settings (see [`SocketOption`]).
    pub fn set_option(&mut self, config: &TcpConfig, pool: &mut Pool, option: SocketOption) {
        self.options_mut().set(option);
        let options = *self.options_mut();
        match option {
            SocketOption::Congestion(algorithm) => self.set_congestion(config, algorithm),
            SocketOption::RecvBuffer(_) => {
                self.set_recv_buffer(options.recv_buffer.map_or(0, |b| b as usize));
            }
            SocketOption::SendBuffer(_) => {
                self.set_send_buffer(pool, options.send_buffer.map_or(1, |b| b as usize));
            }
            _ => {}
        }
    }

    /// Linux's `tcp_set_congestion_control`: before the handshake ends, the controller
    /// the connection will start with; after it, a new controller replaces the old one
    /// (`tcp_reinit_congestion_control`), from the current window.
    fn set_congestion(&mut self, config: &TcpConfig, algorithm: CcAlgorithm) {
        let mss = self.opts.snd_mss();
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if snd.cc.name() == algorithm.name() {
            return;
        }
        let segments = (snd.cc.cwnd() / mss.max(1)).max(1);
        snd.cc = Controller::new(algorithm, mss, segments, config.window_rules());
        if snd.cc.wants_rate_samples() && snd.rate.is_none() {
            snd.rate = Some(Default::default());
        }
        snd.pacing = config.pacing.unwrap_or(snd.cc.pacing_rate().is_some());
    }

    /// SO_RCVBUF: the size of the receive buffer this connection makes (an active
    /// open makes it when the SYN-ACK arrives); before our SYN went, the window-scale
    /// shift it offers (RFC 7323 §2.3: "the shift count ... derived from the
    /// receive buffer size"); a buffer that exists only grows.
    fn set_recv_buffer(&mut self, bytes: usize) {
        if let State::SynSent(s) = &self.state
            && s.snd_nxt == s.iss
            && let Some((_, peer)) = self.opts.wscale
        {
            self.opts.wscale = Some((our_wscale(bytes), peer));
        }
        if let Some(buffer) = self.state.recv_buffer_mut() {
            buffer.grow(bytes);
        }
    }

    /// SO_SNDBUF: an empty send buffer takes the new size, one holding data only grows.
    fn set_send_buffer(&mut self, pool: &mut Pool, bytes: usize) {
        let buffer = match &mut self.state {
            State::SynSent(s) => &mut s.buffer,
            State::SynRcvd(s) => &mut s.buffer,
            state => match state.snd_mut() {
                Some(snd) => &mut snd.buffer,
                None => return,
            },
        };
        if buffer.is_empty() && buffer.owned() == 0 {
            let fresh = SendBuffer::with_storage(bytes, pool.spare_storage(bytes));
            let old = core::mem::replace(buffer, fresh);
            pool.recycle(old.into_storage());
        } else {
            buffer.grow(bytes);
        }
    }
}
