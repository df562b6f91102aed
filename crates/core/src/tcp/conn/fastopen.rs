//! TCP Fast Open (RFC 7413) on one connection: the client's SYN with a cookie and data
//! and its fallbacks, the server's child opened by a valid cookie. The types and the
//! reasoning are in `tcp/fastopen.rs`.

use crate::tcp::TcpConfig;
use crate::tcp::TcpStats;
use crate::tcp::shared::Outbox;
use crate::tcp::shared::PeerCaches;
use crate::time::Instant;
use impnet_wire::tcp::{FastOpenCookie, Options, Repr};

use super::{Conn, Ctx, new_snd};
use crate::tcp::TcpError;
use crate::tcp::cookie::CookieSynAck;
use crate::tcp::fastopen::{SYN_OPTION_ROOM, SynFastOpen, syn_ack_unacked};
use crate::tcp::segment::tsval;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::*;
use crate::tcp::timer::Timer;

impl Conn {
    /// Client: this SYN-SENT connection, whose SYN has not gone yet, opens with Fast
    /// Open, `data` its first bytes. With a cookie for the server the SYN carries it
    /// and the data (RFC 7413 §4.1.2); without one it asks for a cookie and the data
    /// goes after the handshake; towards a server where Fast Open failed lately, a
    /// plain SYN. Returns the bytes of `data` taken.
    pub fn start_fast_open(
        &mut self,
        now: Instant,
        peers: &mut PeerCaches,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        let State::SynSent(s) = &mut self.state else {
            return Err(TcpError::InvalidState);
        };
        if s.snd_nxt != s.iss || s.fast_open != SynFastOpen::Off {
            return Err(TcpError::InvalidState);
        }
        let known = peers.fast_open.get(self.ends.remote().ip());
        s.fast_open = match known {
            Some(e) if e.off_until.is_some_and(|t| now < t) => SynFastOpen::Off,
            // Linux's TFO_CLIENT_NO_COOKIE: the data goes on the SYN, bounded by the
            // MSS the server announced last if it is known.
            _ if peers.fast_open.no_cookie => {
                if let Some(e) = known.filter(|e| e.mss != 0) {
                    self.opts.set_mss_peer(e.mss.max(super::DEFAULT_MSS));
                } else {
                    self.opts.set_mss_peer(self.opts.mss_ours);
                }
                SynFastOpen::NoCookie
            }
            Some(e) if e.cookie.is_some() => {
                // The MSS the server announced with its cookie bounds the SYN's data.
                self.opts.set_mss_peer(e.mss.max(super::DEFAULT_MSS));
                e.cookie.map_or(SynFastOpen::Request, SynFastOpen::Cookie)
            }
            _ => SynFastOpen::Request,
        };
        Ok(s.buffer.write(data))
    }

    /// Client: the bytes of the send buffer the SYN carries now.
    pub(super) fn syn_data_len(&self) -> usize {
        match &self.state {
            State::SynSent(s)
                if matches!(s.fast_open, SynFastOpen::Cookie(_) | SynFastOpen::NoCookie) =>
            {
                let mss = self.opts.mss_peer.min(self.opts.mss_ours);
                s.buffer
                    .len()
                    .min(usize::from(mss.saturating_sub(SYN_OPTION_ROOM)))
            }
            _ => 0,
        }
    }

    /// The Fast Open option on our SYN or SYN-ACK.
    pub(super) fn syn_fast_open_option(&self) -> Option<FastOpenCookie> {
        match &self.state {
            State::SynSent(s) => s.fast_open.option(),
            State::SynRcvd(s) => s.cookie,
            _ => None,
        }
    }

    /// Client: the SYN-ACK `seg` answered a SYN with the Fast Open option: keep the
    /// cookie it grants and the MSS it announces (Linux's `tcp_rcv_fastopen_synack`),
    /// and count whether it acknowledged the SYN's data (RFC 7413 §4.2.2: if not, the
    /// data goes again after the handshake, as any unacknowledged data would). After
    /// a timeout, an answer that carries no cookie and leaves the data unacknowledged
    /// counts as a lost SYN (Linux's `syn_drop`).
    pub(super) fn on_fast_open_syn_ack(
        &mut self,
        now: Instant,
        stats: &mut TcpStats,
        peers: &mut PeerCaches,
        seg: &Repr<'_>,
    ) {
        let State::SynSent(s) = &self.state else {
            return;
        };
        let iss = s.iss;
        if s.fast_open == SynFastOpen::Off {
            return;
        }
        // A SYN without the option (no-cookie mode) asked for no cookie: one in the
        // answer is ignored, as Linux ignores "an unsolicited cookie"; the MSS is kept.
        let solicited = s.fast_open != SynFastOpen::NoCookie;
        let cookie = seg
            .options
            .fast_open
            .filter(|c| !c.is_request() && solicited);
        let mss = seg.options.mss.unwrap_or(super::DEFAULT_MSS);
        let server = self.remote().ip();
        peers.fast_open.store(server, cookie, mss);
        let retried = s.fast_open == SynFastOpen::Dropped;
        let data_acked = s.syn_data > 0 && SeqNumber(seg.ack) > iss + 1;
        let lost = retried && cookie.is_none() && s.syn_data > 0 && !data_acked;
        peers.fast_open.syn_lost(server, lost, now);
        // A SYN that timed out was counted as failed then.
        if s.syn_data > 0 && !retried {
            if data_acked {
                self.opts.syn_data_acked = true;
                stats.fast_open_active += 1;
            } else {
                stats.fast_open_active_fail += 1;
            }
        }
    }

    /// Client: the SYN with the Fast Open option timed out. RFC 7413 §4.1.3: "the
    /// client SHOULD ... retransmit the SYN without data and cookie" (a middlebox may
    /// drop SYNs with data or unknown options); two such losses in a row leave Fast
    /// Open off towards that server for a while (Linux's `tcp_write_timeout` counts
    /// each, [`crate::tcp::fastopen::blackhole_timeout`]).
    pub(super) fn fast_open_timed_out(
        &mut self,
        now: Instant,
        stats: &mut TcpStats,
        peers: &mut PeerCaches,
    ) {
        let State::SynSent(s) = &mut self.state else {
            return;
        };
        if matches!(s.fast_open, SynFastOpen::Off | SynFastOpen::Dropped) {
            return;
        }
        if s.fast_open == SynFastOpen::NoCookie {
            // Linux's no-cookie SYN is no Fast Open attempt of its cache's: it goes
            // again plain and counts no loss.
            s.fast_open = SynFastOpen::Off;
            stats.fast_open_active_fail += 1;
            return;
        }
        s.fast_open = SynFastOpen::Dropped;
        stats.fast_open_active_fail += 1;
        peers.fast_open.syn_lost(self.remote().ip(), true, now);
    }

    /// Server: a SYN-RECEIVED child grants `cookie` in its SYN-ACK.
    pub fn grant_fast_open_cookie(&mut self, cookie: FastOpenCookie) {
        if let State::SynRcvd(s) = &mut self.state {
            s.cookie = Some(cookie);
        }
    }

    /// Server: the SYN `seg` brought a valid cookie and data (RFC 7413 §4.2.2): this
    /// SYN-RECEIVED child becomes ESTABLISHED with the data readable, its SYN-ACK
    /// (acknowledging the data) queued to go first, and may send at once. SND.WL1 =
    /// IRS - 1 marks the SYN-ACK unacknowledged until the peer's first ACK.
    pub fn accept_fast_open(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        let State::SynRcvd(SynRcvd {
            rcv,
            buffer,
            timer: _,
            cookie: _,
            iss,
            snd_nxt: _,
            snd_wnd,
            passive: _,
        }) = core::mem::replace(&mut self.state, State::Closed(Closed { error: None }))
        else {
            return;
        };
        let irs = SeqNumber(seg.seq);
        let mut snd = new_snd(
            (&ctx.shared.config, self.congestion(&ctx.shared.config)),
            &self.opts,
            iss,
            buffer,
            snd_wnd,
            irs - 1,
        );
        snd.cc
            .lend_hystart_rounds(&mut ctx.shared.pool.spare_rounds);
        self.state = State::Established(Established { snd, rcv });
        self.opts.syn_data_acked = !seg.payload.is_empty();
        self.on_text_in(ctx, seg);
        // The SYN-ACK acknowledges the data; no ACK of its own follows.
        self.ack = AckState::Idle;
        self.timers.stop(Timer::DelayedAck);
        self.restart_keepalive(&ctx.shared.config, ctx.now);
        ctx.shared.stats.fast_open_accepted += 1;
        self.queue_fast_open_syn_ack(ctx.now, &ctx.shared.config, &mut ctx.shared.out);
    }

    /// Server: a Fast Open child whose SYN-ACK the peer has not acknowledged yet.
    pub fn fast_open_awaits_ack(&self) -> bool {
        match &self.state {
            State::Established(Established { snd, rcv }) => syn_ack_unacked(snd.snd_wl1, rcv.irs),
            _ => false,
        }
    }

    /// Server: the peer sent its SYN `seg` again while our Fast Open child's SYN-ACK is
    /// unacknowledged (it was lost): the SYN-ACK goes again, as in SYN-RECEIVED.
    /// Returns false, having done nothing, for any other connection or segment.
    pub(super) fn resend_fast_open_syn_ack(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        out: &mut Outbox,
        seg: &Repr<'_>,
    ) -> bool {
        let resend = seg.flags.syn()
            && !seg.flags.ack()
            && self.fast_open_awaits_ack()
            && self
                .state
                .rcv()
                .is_some_and(|r| r.irs == SeqNumber(seg.seq));
        if resend {
            self.queue_fast_open_syn_ack(now, config, out);
        }
        resend
    }

    /// Queue the Fast Open child's SYN-ACK: <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK> with
    /// the options the SYN negotiated.
    fn queue_fast_open_syn_ack(&mut self, now: Instant, config: &TcpConfig, out: &mut Outbox) {
        let window = self.advertise(true, config.recv_buffer);
        let State::Established(Established { snd, rcv }) = &self.state else {
            return;
        };
        let opts = &self.opts;
        let syn_ack = CookieSynAck {
            local: self.local(),
            remote: self.remote(),
            seq: (snd.snd_una - 1).0,
            ack: rcv.rcv_nxt.0,
            window,
            options: Options {
                mss: Some(opts.mss_ours),
                window_scale: opts.wscale.map(|w| w.0),
                sack_permitted: opts.sack,
                timestamps: opts.ts.map(|ts| (tsval(now), ts.recent)),
                ..Options::default()
            },
            ecn: opts.ecn,
        };
        let rcv_nxt = rcv.rcv_nxt;
        if out.syn_ack(syn_ack)
            && let Some(ts) = &mut self.opts.ts
        {
            ts.last_ack_sent = rcv_nxt;
        }
    }
}
