//! Temporal sharing on one connection (RFC 9040): what it leaves in the
//! [`BlockCache`](crate::tcp::share::BlockCache) when it closes, and how a new one starts from it.

use super::{Conn, clear_backoff};
use crate::tcp::TcpConfig;
use crate::tcp::TcpStats;
use crate::tcp::cc::{CongestionControl, Controller};
use crate::tcp::share::Block;
use crate::tcp::shared::PeerCaches;
use crate::tcp::shared::Pool;
use crate::tcp::state::Snd;
use crate::time::Instant;

impl Conn {
    /// Our FIN was acknowledged: leave what this connection learned about its peer's
    /// host for the next connection to it (RFC 9040 §5 Table 4, "temporal sharing:
    /// cache update ... at connection close"), if it measured an RTT.
    pub(crate) fn store_block(
        &self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        peers: &mut PeerCaches,
    ) {
        if !config.share_control_blocks {
            return;
        }
        let (Some(snd), Some(srtt)) = (self.state.snd(), self.rtt.srtt()) else {
            return;
        };
        let (cwnd, ssthresh) = (snd.cc.cwnd(), snd.cc.ssthresh());
        let validated = if ssthresh == usize::MAX {
            cwnd / 2
        } else {
            cwnd.min(ssthresh)
        };
        // Only the part of the window that was in the pipe, not in a queue: the window
        // times min RTT over SRTT (the delivery rate times the path's base RTT).
        let min_rtt = self.rtt.min_rtt().unwrap_or(srtt).min(srtt);
        let in_pipe = (validated as u128 * u128::from(min_rtt.as_nanos())
            / u128::from(srtt.as_nanos().max(1))) as usize;
        let block = Block {
            srtt,
            rttvar: self.rtt.rttvar(),
            rto: self.rtt.base_rto(),
            cwnd: in_pipe,
            ssthresh,
        };
        peers.blocks.store(now, self.remote().ip(), block);
        stats.shared_blocks_stored += 1;
    }

    /// The handshake is done and `snd` is new: start it from what an earlier connection
    /// to the same host left ([`Conn::start_from_block`]), and lend HyStart++ the box of
    /// one that ended (`Shared::spare_rounds`).
    pub(crate) fn start_snd(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        pool: &mut Pool,
        peers: &mut PeerCaches,
        snd: &mut Snd,
    ) {
        self.start_from_block(now, config, stats, peers, snd);
        snd.cc.lend_hystart_rounds(&mut pool.spare_rounds);
    }

    /// The handshake is done and `snd` is new: start it, and the RTT estimator, from
    /// what an earlier connection to the same host left, if one did and it beats the
    /// initial window.
    pub(crate) fn start_from_block(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        peers: &mut PeerCaches,
        snd: &mut Snd,
    ) {
        if !config.share_control_blocks {
            return;
        }
        let mss = self.opts.snd_mss();
        let initial = config.initial_window as usize * mss;
        let Some(block) = peers.blocks.lookup(now, self.remote().ip(), initial) else {
            return;
        };
        self.rtt.seed(block.srtt, block.rttvar, config.rto_bounds());
        clear_backoff(&mut self.cold);
        // The window in whole segments of this connection's MSS, rounded down: never
        // more than the old cwnd.
        let segments = (block.cwnd / mss.max(1)).max(config.initial_window as usize);
        snd.cc = Controller::new(
            self.congestion(config),
            mss,
            segments,
            config.window_rules(),
        );
        if block.ssthresh != usize::MAX {
            snd.cc.set_ssthresh(block.ssthresh);
        }
        stats.shared_blocks_used += 1;
    }
}
