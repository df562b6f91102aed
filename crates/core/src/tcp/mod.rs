//! TCP (RFC 9293 and companions).
//!
//! `Tcp` owns every TCP connection and listener of one stack. It never sees Ethernet or
//! IPv4 bytes: the stack hands it parsed segments with their IPv4 addresses and asks it
//! for segments to send, which `Tcp` writes (header, options, payload, checksum) into a
//! buffer the stack then wraps in IPv4 and Ethernet headers.
//!
//! Call order, as for the whole stack: feed input ([`Tcp::handle_segment`], user calls),
//! then drain [`Tcp::poll_transmit`] until it returns `None`, drain [`Tcp::poll_event`],
//! and call [`Tcp::handle_timeout`] no later than [`Tcp::poll_timeout`].
//!
//! Inside: `table.rs` is the socket table; `conn/` holds `Conn`, one connection, and
//! every file of its methods (`input.rs` the segment-arrival steps of §3.10.7,
//! `output.rs` what to send, `recovery.rs` loss recovery, ...). Below them stand files
//! that never import `Conn`: `shared.rs` what all connections share, `state.rs` one
//! type per RFC 9293 state, `segment.rs` the segment writer, `rack.rs`, `sack.rs`,
//! `rtt.rs`, `cc/` the algorithms on plain data, `timer.rs` the timer table,
//! `listen.rs` listeners, `cookie.rs` SYN cookies, `ecn.rs` ECN's types (RFC 3168).

pub mod buffer;
pub mod cc;
pub mod chrono;
pub mod isn;
pub mod rtt;
pub mod sack;
pub mod seq;

mod challenge;
mod conn;
mod cookie;
mod deadlines;
mod demux;
mod ecn;
mod ends;
mod fastopen;
mod lazy_vec;
mod legacy;
mod linux_info;
mod listen;
mod pacing;
mod rack;
mod rate;
mod segment;
mod share;
mod shared;
mod slab;
mod socket_options;
mod state;
mod table;
mod time_wait;
mod timer;
mod zero_copy;

// Segment-by-segment scripts read best whole (clippy's too_many_lines is for the stack).
#[cfg(test)]
#[allow(clippy::too_many_lines)]
mod tests;
#[cfg(test)]
mod tests_dispositions;
#[cfg(test)]
mod tests_ecn;
#[cfg(test)]
mod tests_fuzz;
#[cfg(test)]
mod tests_loop;
#[cfg(test)]
mod tests_mtu_probe;
#[cfg(test)]
mod tests_park;
#[cfg(test)]
mod tests_predict;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_tso;

use core::net::{IpAddr, SocketAddr};

use crate::time::{Duration, Instant};

pub(crate) use conn::copy_into;
pub use conn::{MtuProbing, SendOwnedError};
pub use ecn::{Ecn, EcnMode};
pub use legacy::LegacyProfile;
pub use linux_info::{LinuxTcpInfo, linux_state};
pub use rtt::{RtoFloor, RtoRule};
pub use socket_options::SocketOption;
pub use state::TcpState;
pub use table::Tcp;

/// The longest an ACK is delayed, whatever [`TcpConfig::delayed_ack`] says: Linux's
/// `TCP_DELACK_MAX`, well within RFC 9293 §3.8.6.3 "the delay MUST be less than 0.5
/// seconds".
pub const MAX_ACK_DELAY: Duration = Duration::from_millis(200);

/// How long a cork holds a partial segment at most (Linux's TCP_CORK ceiling, tcp(7)).
pub const CORK_CEILING: Duration = Duration::from_millis(200);

/// Settings for every TCP connection of a stack.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Send buffer size in bytes.
    pub send_buffer: usize,
    /// Receive buffer size in bytes (also sets our window-scale shift, RFC 7323 §2.3).
    pub recv_buffer: usize,
    /// Delayed-ACK timer (RFC 9293 §3.8.6.3; default 40 ms). Zero disables delayed ACKs;
    /// longer than [`MAX_ACK_DELAY`] counts as that ("the delay MUST be less than 0.5
    /// seconds", MUST-40).
    pub delayed_ack: Duration,
    /// Segments acknowledged at once, without delay, at the start of a connection and
    /// after the receive side was idle longer than the RTO (Linux's quick-ACK mode, up
    /// to its `TCP_MAX_QUICKACKS` of 16): the sender's slow start is clocked by our
    /// ACKs and should not wait for the timer. Zero turns it off.
    pub quick_acks: u32,
    /// Linux's interactive ("pingpong") delayed ACK (`tcp_event_data_sent`): a
    /// connection that sends data within [`TcpConfig::delayed_ack`] of the data it last
    /// received is taken for a request-response exchange, and the peer's next data is
    /// acknowledged after the delay, not at once in quick-ACK mode, so the ACK can ride
    /// on the reply; the delayed-ACK timer firing ends the mode. RFC 9293 §3.8.6.3
    /// allows either (the delay stays under [`MAX_ACK_DELAY`], and every second full
    /// segment is acknowledged at once). Off by default (quick-ACK mode as above); the
    /// packetdrill shim's setting.
    pub interactive_delayed_ack: bool,
    /// Keep Linux's send chronographs (`chrono.rs`; [`TcpInfo::chronograph`]): the
    /// time each connection had data to send and the part of it the peer's window held
    /// it back. Off by default (no RFC asks for them; each connection that sends then
    /// holds its rare part); the packetdrill shim's setting.
    pub send_chronographs: bool,
    /// Packetization-layer path MTU discovery's black-hole detection (RFC 4821 §4,
    /// RFC 8899 §4.2): when every second retransmission timeout in a row finds
    /// segments larger than 536 bytes unacknowledged, the segment size is halved
    /// (down to 536), as a path that drops big packets without ICMP (filtered
    /// fragmentation-needed) would make them vanish. On by default. With
    /// [`TcpConfig::mtu_probing`] on, detection drops to [`TcpConfig::base_mss`] instead
    /// (then halves), and the search climbs back.
    pub black_hole_detection: bool,
    /// Packetization-layer path MTU discovery (RFC 4821, with RFC 8899 §5.3's search;
    /// Linux's `tcp_mtu_probing` 0/1/2): when to search upwards for the largest segment
    /// the path carries, with probes of one segment of the candidate size.
    pub mtu_probing: MtuProbing,
    /// The segment size (MSS, options included) black-hole detection falls back to
    /// and [`MtuProbing::Always`] starts from (RFC 4821 §7.2's `BASE_PLPMTU`, less 40;
    /// Linux's `tcp_base_mss`, 1024).
    pub base_mss: u16,
    /// How long after a search ended (or a black hole dropped the size) it starts
    /// again from the top (RFC 8899 §5.1.1 `PMTU_RAISE_TIMER`; Linux's
    /// `tcp_probe_interval`, 600 s).
    pub probe_interval: Duration,
    /// The search ends when the sizes known to pass and known to fail are closer than
    /// this many bytes (RFC 4821 §7.3's accuracy; Linux's `tcp_probe_threshold`, 8).
    pub probe_threshold: u16,
    /// Disable Nagle's algorithm on new connections.
    pub nodelay: bool,
    /// Maximum segment lifetime; TIME-WAIT lasts 2*MSL (RFC 9293 §3.4.2; default 30 s).
    pub msl: Duration,
    /// MSS announced on passive opens (the stack passes one to `connect`).
    pub mss: u16,
    /// Use this MSS on every connection instead of the one the route's MTU gives, and
    /// let IP fragment segments larger than the MTU (sent without DF). The 1981 BBN
    /// experiment of 4096-byte segments over Ethernet; `None` (the default) keeps
    /// segments within the path MTU as RFC 1191 wants.
    pub segment_size: Option<u16>,
    /// RTO before any RTT sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Lower bound of the RTO (RFC 6298 §2.4 says 1 s; default 200 ms as deployed).
    pub min_rto: Duration,
    /// Upper bound of the RTO (RFC 6298 §2.5: at least 60 s).
    pub max_rto: Duration,
    /// What `min_rto` bounds: the RTO (RFC 6298 §2.4, the default) or, as Linux's
    /// `__tcp_set_rto`, the variance term (`RTO = SRTT + max(min_rto, 4*RTTVAR)`).
    pub rto_floor: RtoFloor,
    /// How the RTO follows the RTT samples: RFC 6298 (the default), RFC 793's
    /// smoothed-RTT-times-BETA, or a fixed timer ([`RtoRule`]); the old rules are for
    /// modelling old TCPs ([`LegacyProfile`]).
    pub rto_rule: RtoRule,
    /// Karn's rule (RFC 6298 §3; on by default): no RTT sample from a segment that was
    /// sent again. Off, the segment timed keeps its first send time through
    /// retransmissions, so the ACK of a retransmission gives a sample from the first
    /// send, as TCPs before Karn and Partridge (1987) measured: after a timeout the
    /// estimate grows by the time lost.
    pub karn: bool,
    /// End a record at every write ([`Stack::tcp_end_record`](crate::Stack::tcp_end_record),
    /// Linux's MSG_EOR on each `send`): no segment carries the data of two writes, so a
    /// program that writes 100 bytes at a time sends segments of 100 bytes whatever the
    /// window holds, as TCPs that built a segment per write did. Off by default.
    pub segment_per_write: bool,
    /// A 1975 TCP's retransmission process (seed 004's exerciser: "the retransmission
    /// process awakened asynchronously every 4 seconds", Table VI's "Wakeup Timeout"):
    /// a process that wakes every this long and retransmits the letters on the
    /// retransmission queue that were sent longer than the retransmission timeout ago.
    /// With it the retransmission timer is the oldest unacknowledged segment's own: it
    /// runs from when that segment was (last) sent, an ACK of new data does not
    /// restart it (RFC 6298 §5.3 does), and it fires at the process's first wakeup
    /// after it expires (wakeups at multiples of the period from the clock's zero).
    /// None (the default): RFC 6298's timer.
    pub retransmit_process: Option<Duration>,
    /// With [`TcpConfig::retransmit_process`]: a delayed ACK (a nonzero
    /// [`TcpConfig::delayed_ack`]) is sent when the process next wakes, the 1975
    /// exerciser's "acknowledgment only when the retransmission process woke up and
    /// found a NEWRECEIVE flag set" (however long that is; [`MAX_ACK_DELAY`] does not
    /// apply). Off by default.
    pub ack_on_wakeup: bool,
    /// With [`TcpConfig::retransmit_process`]: a timeout resends only the letters
    /// (segments) sent longer than the retransmission timeout ago, as the 1975 process
    /// that scanned its retransmission queue did, where go-back-N (false, the default)
    /// sends everything outstanding again. The timer then runs from the least recently
    /// sent letter's send time.
    pub retransmit_due_only: bool,
    /// What a reset leaves (default false: RFC 9293 §3.10.7.4, "All segment queues
    /// should be flushed"). True as Linux's `tcp_reset`: the data that arrived before
    /// the RST stays readable and the reset is reported after it, and a child the
    /// reset reached in its listener's accept queue stays there, so `accept` returns
    /// it (its data, then the error).
    pub reset_keeps_data: bool,
    /// An ACK of data not yet sent (SEG.ACK > SND.NXT) in a synchronized state: false
    /// (the default) drops the segment and answers with an ACK (RFC 9293 §3.10.7.4,
    /// RFC 5961 §5.2); true drops it without a word, as Linux's `tcp_ack` does
    /// (`TCP_ACK_UNSENT_DATA`; the packetdrill shim's setting).
    pub unsent_ack_silent: bool,
    /// In SYN-SENT, refuse (with a RST, as a bad ACK) a segment whose acceptable ACK
    /// comes with a timestamp echo we never sent: a TSecr, not zero, outside the TSvals
    /// of our SYNs (from the first to now), as Linux's `tcp_rcv_synsent_state_process`
    /// does (`PAWSACTIVEREJECTED`; the packetdrill shim's setting). Off by default:
    /// RFC 7323 checks no echo in SYN-SENT.
    pub syn_sent_tsecr_check: bool,
    /// A FIN that goes alone (all data sent), as Linux's: sent even when cwnd is full
    /// (`tcp_cwnd_test`: "Don't be strict about the congestion window for the final
    /// FIN"), and the loss probe after it resends it alone, the last segment sent
    /// (RFC 8985 §7.3; Linux's probe resends its FIN skb). The packetdrill shim's
    /// setting. Off by default: the FIN waits for room in cwnd like a segment of data
    /// (RFC 5681 §3.1 limits data; a FIN takes a sequence number and is retransmitted
    /// as data is), and the probe resends the last data segment with it.
    pub lone_fin_as_linux: bool,
    /// Retransmissions of one segment before the connection times out.
    pub max_retransmits: u32,
    /// Retransmissions of a SYN before the open fails.
    pub syn_retransmits: u32,
    /// RFC 9293 §3.10.8 user timeout: data unacknowledged this long aborts the
    /// connection (`None`: only `max_retransmits` applies).
    pub user_timeout: Option<Duration>,
    /// Offer window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Offer timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// ECN (RFC 3168): ask for it on our SYNs and accept it on the peer's
    /// ([`EcnMode::Request`], the default), only accept it, or never use it.
    pub ecn: EcnMode,
    /// RACK-TLP loss detection (RFC 8985) on connections that negotiated SACK: losses
    /// found by transmit time and a reordering window that adapts to D-SACKs, and a
    /// Tail Loss Probe before the retransmission timeout. Off: RFC 6675's DupThresh
    /// rules. Connections without SACK always use RFC 5681/6582 (NewReno). On by
    /// default.
    pub rack: bool,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// Congestion control for new connections.
    pub congestion: cc::CcAlgorithm,
    /// Pace data (`pacing.rs`): `None` paces with the controllers that set their own
    /// rate (BBR) and not with the window-based ones; `Some` forces it on or off (the
    /// window-based ones then pace at 2 x cwnd / SRTT in slow start, 1.2 x after).
    pub pacing: Option<bool>,
    /// SYN cookies (RFC 4987 §3.6): when a listener's backlog is full, answer SYNs with
    /// a stateless SYN-ACK whose sequence number encodes the connection, instead of
    /// dropping them (on by default).
    pub syn_cookies: bool,
    /// HyStart++ (RFC 9406) in the initial slow start of NewReno and CUBIC: leave slow
    /// start when the RTT rises, before the bottleneck queue overflows (on by default).
    pub hystart: bool,
    /// With `hystart`: leave slow start at once when the RTT rises (ssthresh = cwnd), as
    /// Linux's CUBIC HyStart does (`hystart_update`), instead of RFC 9406's Conservative
    /// Slow Start; the controller then also takes an RTT sample from every ACK that
    /// acknowledges data sent once (Linux's `ca_rtt_us`, from the sent log's send
    /// times) where imp's RTO estimator, without timestamps, times one segment per
    /// round trip (RFC 6298 §3). Off by default; the packetdrill shim's setting.
    pub hystart_exit_at_once: bool,
    /// RFC 3465's L in segments: the most one ACK grows cwnd by in slow start (default
    /// `Some(2)`, §2.2's largest; 1 after a timeout, §2.3). `None` grows it by
    /// everything the ACK acknowledged, as Linux's `tcp_slow_start` does (a stretch
    /// ACK of ten segments adds ten; the packetdrill shim's setting).
    pub abc_limit: Option<u32>,
    /// CUBIC's ssthresh after a loss or timeout from cwnd (`max(cwnd * β, 2*SMSS)`, as
    /// Linux's `cubictcp_recalc_ssthresh`) instead of RFC 9438 §4.6's FlightSize (off
    /// by default; §4.6 allows either for a sender that keeps an unused cwnd from
    /// growing, as imp's controllers do; the packetdrill shim's setting).
    pub cubic_ssthresh_from_cwnd: bool,
    /// When loss recovery ends, set cwnd to ssthresh (RFC 6582 §3.2 step 3 option (2),
    /// Linux's `tcp_end_cwnd_reduction`; the packetdrill shim's setting) rather than
    /// option (1)'s `min(ssthresh, max(FlightSize, SMSS) + SMSS)` (the default), which
    /// avoids a burst when little is outstanding. NewReno and CUBIC.
    pub cwnd_ssthresh_after_recovery: bool,
    /// Grow cwnd (outside recovery) by the bytes an ACK newly delivered: what it
    /// acknowledges less what was SACKed before (without SACK, a segment for each
    /// duplicate ACK before it), as Linux grows it by its `delivered` count, the
    /// duplicate ACKs having grown nothing (`tcp_may_raise_cwnd`). Off by default:
    /// RFC 5681 §3.1 counts every byte the cumulative ACK acknowledges. The
    /// packetdrill shim's setting (limited transmit's scripts).
    pub cwnd_growth_newly_delivered: bool,
    /// Keep-alive (RFC 1122 §4.2.3.6; off by default).
    pub keepalive: Option<Keepalive>,
    /// How long a connection the application has closed may wait in FIN-WAIT-2 for
    /// the peer's FIN (default 60 s, Linux's `tcp_fin_timeout`); then it is released
    /// without a word to the peer. RFC 9293 sets no limit, so a peer that acknowledges
    /// our FIN and never sends its own would hold the connection for ever. `None`:
    /// wait for ever. A connection only half-closed (`shutdown_write`) is the
    /// application's to end and waits regardless.
    pub fin_wait_2_timeout: Option<Duration>,
    /// Temporal sharing of control blocks (RFC 9040, `share.rs`): a connection that
    /// closes cleanly leaves its RTT estimates, cwnd and ssthresh for the next connection
    /// to the same host, which starts from them (decayed for the time between, never
    /// above the old cwnd) instead of the initial window. Off by default.
    pub share_control_blocks: bool,
    /// Most challenge ACKs one connection sends per second (RFC 5961 §7; default 10).
    /// The budget is per connection, so one connection's challenge ACKs say nothing
    /// about another's, and each second's budget is drawn from the stack's secret
    /// between half of this and all of it, so it is no constant an off-path attacker
    /// can count on (CVE-2016-5696). Challenges beyond it are counted in
    /// `TcpStats::challenge_acks_limited` and not sent.
    pub challenge_ack_limit: u32,
    /// Cap on the out-of-order ranges a receive buffer holds (default 16384). Below it,
    /// a buffer holds one range per KiB of its size (at least 32: 256 for the default
    /// 256 KiB, so every other segment of a full window may be missing), allocated as
    /// holes appear. A segment that would open one more is dropped (the peer sends it
    /// again); the out-of-order bytes themselves sit inside the receive ring, so
    /// `recv_buffer` bounds them.
    pub max_ooo_ranges: usize,
    /// Most connections the table holds at once, in every state from SYN-SENT to
    /// TIME-WAIT, closed ones whose handle the application still holds included;
    /// listeners do not count (default 16384). Each may grow rings up to `send_buffer +
    /// recv_buffer` bytes, so this and the buffer sizes bound TCP's memory. At the
    /// limit a new connection takes the place of the oldest TIME-WAIT connection the
    /// application has closed (counted in [`TcpStats::time_wait_recycled`]); without
    /// one, a SYN to a listener, and an ACK returning a SYN cookie, is dropped without
    /// an answer and counted in [`TcpStats::connection_limit_drops`] (the peer sends it
    /// again, as to a full backlog), and `connect` fails with
    /// [`TcpError::TooManyConnections`].
    pub max_connections: usize,
    /// Readiness events kept for `poll_event` (default 4096). When an application
    /// does not drain them, the oldest is dropped for each new one and counted in
    /// [`TcpStats::events_dropped`]; events are wake-up hints, the socket calls report
    /// the state itself.
    pub event_limit: usize,
    /// RSTs for no connection, and SYN-ACKs carrying SYN cookies, waiting to be sent:
    /// at most this many of each (default 256). More are not sent (a RST answers a
    /// segment that will come again; a SYN is sent again).
    pub reset_queue: usize,
    /// Ring storages of ended connections kept for new ones to reuse, of at most 16 KiB
    /// each (default 64: at most 1 MiB); more are freed.
    pub spare_rings: usize,
    /// Ring storages larger than 16 KiB (up to `send_buffer` or `recv_buffer` bytes)
    /// of ended connections kept for new ones to reuse (default 8); more are freed.
    pub large_spare_rings: usize,
    /// With more connections open than this, a connection gives its rings' storage
    /// back (to the spare rings above, or the allocator) as soon as a ring is empty:
    /// the send ring once everything written is acknowledged, the receive ring once
    /// everything received is read, as Linux frees a socket's buffers. A quiet
    /// connection that has carried data then holds no ring (about 1 KiB less per
    /// connection end), and the next write or segment takes one from the spare rings.
    /// At or below it (default 1024) the rings stay with their connections: a few
    /// connections are spared the round trip through the pool on every exchange (6% of
    /// a W2 round trip). A ring larger than 16 KiB the pool has no room for stays too.
    pub release_rings_above: usize,
}

/// Keep-alive settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe (RFC 1122: default no less than two hours).
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is declared dead.
    pub count: u32,
}

impl TcpConfig {
    /// The RTO's floor and ceiling, `min_rto` and `max_rto`.
    #[inline]
    pub(crate) fn rto_bounds(&self) -> rtt::RtoBounds {
        rtt::RtoBounds::new(self.min_rto, self.max_rto, self.rto_floor).with_rule(self.rto_rule)
    }

    /// What the window-based controllers follow: `hystart`, `abc_limit`,
    /// `cubic_ssthresh_from_cwnd`, `cwnd_ssthresh_after_recovery`.
    pub(crate) fn window_rules(&self) -> cc::WindowRules {
        cc::WindowRules {
            hystart: self.hystart,
            hystart_exit_at_once: self.hystart_exit_at_once,
            abc_limit: self.abc_limit,
            cubic_ssthresh_from_cwnd: self.cubic_ssthresh_from_cwnd,
            cwnd_ssthresh_after_recovery: self.cwnd_ssthresh_after_recovery,
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            delayed_ack: Duration::from_millis(40),
            quick_acks: 16,
            interactive_delayed_ack: false,
            send_chronographs: false,
            black_hole_detection: true,
            mtu_probing: MtuProbing::OnBlackHole,
            base_mss: 1024,
            probe_interval: Duration::from_secs(600),
            probe_threshold: 8,
            nodelay: false,
            msl: Duration::from_secs(30),
            mss: 1460,
            segment_size: None,
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            rto_floor: RtoFloor::Rto,
            rto_rule: RtoRule::Rfc6298,
            karn: true,
            segment_per_write: false,
            retransmit_process: None,
            ack_on_wakeup: false,
            retransmit_due_only: false,
            reset_keeps_data: false,
            unsent_ack_silent: false,
            syn_sent_tsecr_check: false,
            lone_fin_as_linux: false,
            max_retransmits: 15,
            syn_retransmits: 6,
            user_timeout: None,
            window_scaling: true,
            timestamps: true,
            sack: true,
            ecn: EcnMode::Request,
            rack: true,
            initial_window: 10,
            congestion: cc::CcAlgorithm::NewReno,
            pacing: None,
            hystart: true,
            hystart_exit_at_once: false,
            abc_limit: Some(2),
            cubic_ssthresh_from_cwnd: false,
            cwnd_ssthresh_after_recovery: false,
            cwnd_growth_newly_delivered: false,
            syn_cookies: true,
            keepalive: None,
            fin_wait_2_timeout: Some(Duration::from_secs(60)),
            share_control_blocks: false,
            challenge_ack_limit: 10,
            max_ooo_ranges: buffer::DEFAULT_MAX_RANGES,
            max_connections: 16384,
            event_limit: 4096,
            reset_queue: 256,
            spare_rings: 64,
            large_spare_rings: 8,
            release_rings_above: 1024,
        }
    }
}

/// A TCP socket (listener or connection): a generational index, stale handles are errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcpHandle {
    index: u32,
    generation: u32,
}

/// Why a TCP call failed.
///
/// The errors a connection ends with (`ConnectionReset`, `ConnectionRefused`,
/// `TimedOut`, `HostUnreachable`, `NetUnreachable`, `Prohibited`) are sticky here:
/// every later `send` and `recv` on the handle reports the same one, and
/// [`Tcp::error`] shows it. The sockets of the `impnet` crate report it once, as Linux
/// does (then end of stream for reads, a broken pipe for writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TcpError {
    /// The handle does not name a live socket (closed, or never existed).
    InvalidHandle,
    /// Nothing to read or no room to write right now; try again after an event.
    WouldBlock,
    /// The local address and port are already in use.
    AddrInUse,
    /// The connection was reset by the peer.
    ConnectionReset,
    /// The peer refused the connection (RST in answer to SYN).
    ConnectionRefused,
    /// The connection timed out (retransmissions or user timeout exhausted).
    TimedOut,
    /// The operation is not valid in the socket's current state: a connection call
    /// on a listener, `accept` on a connection, a half-close before the handshake or
    /// after the connection ended.
    InvalidState,
    /// Our sending half is closed: `shutdown_write` or `close` was called, or the
    /// connection ended cleanly. No more data may be sent (RFC 9293's "connection
    /// closing"; `EPIPE` on Linux).
    Closing,
    /// The local address is not one of the stack's, the port cannot be used (a
    /// listener on port 0), or the remote address cannot be connected to (port 0 or
    /// the unspecified address).
    AddrNotAvailable,
    /// No ephemeral port is free.
    NoPortsAvailable,
    /// An ICMP error said the remote host cannot be reached (or, after a timeout, the
    /// last such error seen).
    HostUnreachable,
    /// An ICMP error said the remote network cannot be reached.
    NetUnreachable,
    /// An ICMP error said a filter on the path refused the connection
    /// (administratively prohibited).
    Prohibited,
    /// The table already holds [`TcpConfig::max_connections`] connections.
    TooManyConnections,
    /// A buffer handed over whole (`send_owned`) is larger than the connection's send
    /// buffer, so it could never be taken: send it in pieces.
    BufferTooLarge,
}

impl TcpError {
    /// Whether the error is one a connection ends with (reset, refused, timed out, an
    /// unreachable host or network, prohibited): what the stack reports once and then
    /// repeats to every later call on the handle, where the others are about one call.
    pub fn ends_connection(self) -> bool {
        matches!(
            self,
            TcpError::ConnectionReset
                | TcpError::ConnectionRefused
                | TcpError::TimedOut
                | TcpError::HostUnreachable
                | TcpError::NetUnreachable
                | TcpError::Prohibited
        )
    }
}

impl core::fmt::Display for TcpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TcpError::InvalidHandle => "no such TCP socket: the handle was closed or never existed",
            TcpError::WouldBlock => "nothing to read or no room to write yet: retry after an event",
            TcpError::AddrInUse => {
                "address and port already in use: pick another or close the owner"
            }
            TcpError::ConnectionReset => "connection reset by the peer",
            TcpError::ConnectionRefused => "connection refused: nothing listens on the remote port",
            TcpError::TimedOut => "connection timed out: the peer stopped answering",
            TcpError::InvalidState => {
                "operation not valid in the socket's current state (a listener, a connection \
                 not yet open, or one that has ended)"
            }
            TcpError::Closing => "the sending half is closed: no more data may be sent",
            TcpError::AddrNotAvailable => {
                "address not available: use one of the stack's addresses, a non-zero port \
                 and a remote host's address"
            }
            TcpError::NoPortsAvailable => {
                "no free ephemeral port: close connections or bind a port"
            }
            TcpError::HostUnreachable => "no route to host: a router or ARP said it is unreachable",
            TcpError::NetUnreachable => "network unreachable: a router has no route to it",
            TcpError::Prohibited => {
                "refused by a filter on the path (ICMP administratively prohibited)"
            }
            TcpError::TooManyConnections => {
                "too many connections: the stack holds max_connections; close some or raise it"
            }
            TcpError::BufferTooLarge => {
                "buffer larger than the send buffer: send it in pieces or raise send_buffer"
            }
        })
    }
}

impl core::error::Error for TcpError {}

/// An ICMP error about one of our segments, as TCP takes it (RFC 1122 §4.2.3.9, RFC
/// 1191, RFC 5927). The stack maps ICMP messages to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpNotice {
    /// Fragmentation needed and DF set: the path carries IPv4 packets of at most `mtu`
    /// bytes. The connection lowers its segment size and resends at once.
    PacketTooBig {
        /// The next-hop MTU the router reported (or estimated from the quote).
        mtu: u16,
    },
    /// A hard error (port or protocol unreachable, administratively prohibited): it ends
    /// a connection that is still opening; an open one records it as soft (RFC 5461).
    Hard(TcpError),
    /// A soft error (net or host unreachable, time exceeded): recorded, shown in
    /// `TcpInfo`, and reported if the connection times out.
    Soft(TcpError),
}

/// A readiness change on a TCP socket, for wakers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpEvent {
    /// A listener has a connection to accept, or a connection has data (or EOF) to read.
    Readable(TcpHandle),
    /// A connection has room in its send buffer, or finished connecting.
    Writable(TcpHandle),
    /// A connection ended (closed, reset or timed out); the handle may be released.
    Closed(TcpHandle),
}

/// What the interface a segment leaves by does for it, from its
/// [`Offloads`](crate::Offloads): asked by [`Tcp::poll_transmit_with`] per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Egress {
    /// TCP computes the checksum (false: the device does; the field then holds the
    /// pseudo-header sum).
    pub checksum: bool,
    /// The largest IP packet (IPv4 or IPv6, headers included) the device cuts into
    /// MTU-sized segments itself (TSO); None: every segment fits the MSS.
    pub tso_max: Option<usize>,
    /// Bytes the caller keeps in front of the segment for its link and IP headers:
    /// the segment is written at this offset of the buffer (the stack's room for an
    /// Ethernet header and an IPv4 or IPv6 one, so the frame needs no second copy).
    pub headroom: usize,
}

impl Egress {
    /// No offloads: checksums computed, segments of one MSS at most, no headroom.
    pub const PLAIN: Egress = Egress {
        checksum: true,
        tso_max: None,
        headroom: 0,
    };
}

/// A segment written by [`Tcp::poll_transmit`]: `len` bytes of TCP header and payload
/// from `src` to `dst`, checksum filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpTransmit {
    /// Source IPv4 address.
    pub src: IpAddr,
    /// Destination IPv4 address.
    pub dst: IpAddr,
    /// Bytes written at the start of the buffer.
    pub len: usize,
    /// The ECN field for the IPv4 header (RFC 3168): ECT(0) on new data of a
    /// connection that negotiated ECN, Not-ECT on everything else.
    pub ecn: Ecn,
}

/// How far a connection's sending has got, cheaply (no snapshot of the rest of
/// [`TcpInfo`]): what an application that keeps its send buffer topped up as TCP
/// takes the data, rather than filling it at once, needs to know
/// ([`crate::Stack::tcp_send_progress`]). Linux shows the first two as the SIOCOUTQ
/// and SIOCOUTQNSD ioctls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendProgress {
    /// Bytes queued and not yet acknowledged, sent or not.
    pub queued: usize,
    /// Of those, bytes never sent (above SND.MAX).
    pub unsent: usize,
    /// The congestion window, bytes.
    pub cwnd: usize,
}

/// A snapshot of one connection, like Linux's `struct tcp_info`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpInfo {
    /// Protocol state.
    pub state: TcpState,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Smoothed RTT (None before the first sample).
    pub srtt: Option<Duration>,
    /// RTT variation.
    pub rttvar: Duration,
    /// Current retransmission timeout (with backoff).
    pub rto: Duration,
    /// Bytes sent and not acknowledged.
    pub bytes_in_flight: u32,
    /// Bytes queued in the send buffer (sent or not).
    pub bytes_queued: u32,
    /// Segments retransmitted over the connection's life.
    pub retransmits: u64,
    /// Bytes the peer SACKed above SND.UNA.
    pub sacked: u32,
    /// True while in fast recovery.
    pub in_recovery: bool,
    /// Bytes deemed lost (by RACK) and not SACKed since, resent or not: Linux's
    /// `tcpi_lost` in bytes (0 without RACK).
    pub lost: u32,
    /// The largest extent of reordering seen, bytes: how far below the highest
    /// sequence number delivered a segment sent once was delivered (0: none seen).
    pub reordering: u32,
    /// ACKs that showed reordering (Linux's `tcpi_reord_seen`; 0 without RACK).
    pub reord_seen: u32,
    /// Segments delivered (Linux's `tcpi_delivered`): the SYN or SYN-ACK once
    /// acknowledged (with any data it carried), then the data acknowledged or SACKed,
    /// counted in pieces of `snd_mss` (a run of small segments acknowledged together
    /// counts as one); 0 without a sending half (SYN-SENT, FIN-WAIT-2, TIME-WAIT).
    pub delivered: u32,
    /// Linux's send chronographs, kept with [`TcpConfig::send_chronographs`] (else
    /// idle and zero): `tcpi_busy_time` and `tcpi_rwnd_limited` are its
    /// [`chrono::SendChronograph::totals`].
    pub chronograph: chrono::SendChronograph,
    /// Largest payload per segment we send (options already subtracted).
    pub snd_mss: u16,
    /// The window we advertise, bytes.
    pub rcv_wnd: u32,
    /// The peer's window, bytes.
    pub snd_wnd: u32,
    /// Window-scale shifts (ours, the peer's), when negotiated.
    pub wscale: Option<(u8, u8)>,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// SACK negotiated.
    pub sack: bool,
    /// ECN negotiated (RFC 3168 §6.1.1).
    pub ecn: bool,
    /// Name of the congestion controller.
    pub congestion: &'static str,
    /// The last soft ICMP error about the connection (RFC 1122 §4.2.3.9), if any.
    pub soft_error: Option<TcpError>,
    /// The path MTU learned from ICMP (RFC 1191), if lower than the route's.
    pub path_mtu: Option<u16>,
    /// The rate data is paced at, bytes per second: the congestion controller's own
    /// (BBR) or Linux's `cwnd / srtt` scaled (`pacing.rs`); None without a sending
    /// half or an RTT sample.
    pub pacing_rate: Option<u64>,
    /// TCP Fast Open: the SYN's data was acknowledged with it (a client's SYN, or on a
    /// server the peer's; Linux's TCPI_OPT_SYN_DATA).
    pub syn_data_acked: bool,
    /// When in-order data last arrived (None before the first): Linux's
    /// `tcpi_last_data_recv` is the time since.
    pub last_data_at: Option<Instant>,
}

/// Counters for the whole TCP layer (`netstat -s` style).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments received.
    pub segments_in: u64,
    /// ICMP errors taken by a connection (its quoted sequence number was in flight).
    pub icmp_accepted: u64,
    /// ICMP errors ignored: no such connection, or the quoted sequence number was not
    /// in flight (RFC 5927 §4.1, against blind attacks).
    pub icmp_ignored: u64,
    /// Path MTU reductions from ICMP fragmentation-needed (RFC 1191).
    pub path_mtu_drops: u64,
    /// Segment-size reductions by black-hole detection (RFC 4821).
    pub black_holes: u64,
    /// Path MTU probes sent (RFC 4821 / RFC 8899 §5.3 search, `TcpConfig::mtu_probing`).
    pub mtu_probes: u64,
    /// Path MTU probes found lost by loss recovery (their loss cut no window).
    pub mtu_probes_lost: u64,
    /// Segments handled by header prediction (Linux's `TCPHPHits`), a subset of
    /// `segments_in`.
    pub predicted: u64,
    /// Segments sent.
    pub segments_out: u64,
    /// Segments retransmitted.
    pub retransmitted: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Fast retransmits (entries into loss recovery).
    pub fast_retransmits: u64,
    /// RSTs sent.
    pub resets_sent: u64,
    /// RSTs received that reset a connection.
    pub resets_received: u64,
    /// Segments dropped as unacceptable (sequence check failed).
    pub bad_seq: u64,
    /// Segments dropped for an unacceptable ACK.
    pub bad_ack: u64,
    /// Segments to no socket.
    pub no_socket: u64,
    /// Segments dropped for other reasons (no ACK bit, bad flags in a state).
    pub dropped_other: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Challenge ACKs suppressed by the rate limit.
    pub challenge_acks_limited: u64,
    /// Segments rejected by PAWS (RFC 7323 §5).
    pub paws_drops: u64,
    /// Active opens.
    pub active_opens: u64,
    /// Connections accepted by a listener.
    pub passive_opens: u64,
    /// SYNs dropped because a listener's backlog was full.
    pub listen_overflows: u64,
    /// SYNs dropped because the catch-all listener had its most half-open children.
    pub half_open_drops: u64,
    /// SYN-ACKs sent with a SYN cookie (the backlog was full; RFC 4987 §3.6).
    pub syn_cookies_sent: u64,
    /// ACKs that returned a valid SYN cookie and opened a connection.
    pub syn_cookies_accepted: u64,
    /// ACKs to a listener that had sent cookies, with no valid cookie (answered by RST).
    pub syn_cookies_rejected: u64,
    /// TCP Fast Open, server: SYNs whose data a valid cookie let in (Linux's
    /// `TCPFastOpenPassive`).
    pub fast_open_accepted: u64,
    /// TCP Fast Open, server: SYN-ACKs granting a cookie, to a cookie request or an
    /// invalid cookie (whose data was not acknowledged).
    pub fast_open_cookies_granted: u64,
    /// TCP Fast Open, server: SYNs with a cookie that failed the check
    /// (`TCPFastOpenPassiveFail`).
    pub fast_open_rejected: u64,
    /// TCP Fast Open, server: SYNs with a valid cookie and data that found the
    /// listener's cap of pending Fast Open children reached (`TCPFastOpenListenOverflow`).
    pub fast_open_overflows: u64,
    /// TCP Fast Open, client: SYN-ACKs that acknowledged our SYN's data
    /// (`TCPFastOpenActive`).
    pub fast_open_active: u64,
    /// TCP Fast Open, client: SYNs with data whose data the SYN-ACK did not acknowledge,
    /// and SYNs with the option that timed out (`TCPFastOpenActiveFail`).
    pub fast_open_active_fail: u64,
    /// Opens that failed (refused, timed out, reset in SYN states).
    pub failed_opens: u64,
    /// Connections that timed out (retransmissions, user timeout, keep-alive).
    pub timed_out: u64,
    /// TIME-WAIT connections reopened by a new SYN (RFC 9293 §3.6.1, RFC 6191).
    pub time_wait_reuses: u64,
    /// Closed connections released after `TcpConfig::fin_wait_2_timeout` in FIN-WAIT-2.
    pub fin_wait_2_timeouts: u64,
    /// Connections that started from the window and RTT an earlier connection to the
    /// same host left (`TcpConfig::share_control_blocks`, RFC 9040).
    pub shared_blocks_used: u64,
    /// Control blocks stored for later connections, one per clean close.
    pub shared_blocks_stored: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
    /// Data segments received out of order.
    pub out_of_order: u64,
    /// Segments received whose data (all or part) had already been received.
    pub duplicate_segments: u64,
    /// Bare ACKs received that told nothing new: no new data acknowledged, no SACK
    /// block, the same window (the "unnecessary acknowledgments" of seed 004).
    pub redundant_acks: u64,
    /// Out-of-order segments dropped because they would have opened one range more
    /// than the receive buffer holds ([`TcpConfig::max_ooo_ranges`]; the peer sends them
    /// again).
    pub out_of_order_dropped: u64,
    /// Delayed ACKs sent by the timer.
    pub delayed_acks: u64,
    /// Segments that arrived with Congestion Experienced on an ECN connection.
    pub ecn_ce_received: u64,
    /// Segments sent with ECE (echoing a CE, RFC 3168 §6.1.3).
    pub ecn_ece_sent: u64,
    /// ACKs received with ECE.
    pub ecn_ece_received: u64,
    /// Segments sent with CWR (RFC 3168 §6.1.2).
    pub ecn_cwr_sent: u64,
    /// Congestion-window reductions for ECE (at most one per window of data).
    pub ecn_cuts: u64,
    /// D-SACK blocks sent (RFC 2883: a duplicate segment reported to its sender).
    pub dsacks_sent: u64,
    /// ACKs received with a D-SACK block.
    pub dsacks_received: u64,
    /// Retransmissions found spurious: segments a D-SACK reported as received twice
    /// (RFC 3708), and episodes Eifel detection (RFC 3522) showed needless.
    pub spurious_retransmits: u64,
    /// Congestion-window reductions undone after spurious retransmissions.
    pub undos: u64,
    /// Tail Loss Probes sent (RFC 8985 §7).
    pub tlp_probes: u64,
    /// Segment runs RACK marked lost (RFC 8985 §6).
    pub rack_losses: u64,
    /// SYNs and SYN-cookie ACKs dropped because the table held
    /// [`TcpConfig::max_connections`] connections.
    pub connection_limit_drops: u64,
    /// TIME-WAIT connections ended early to make room for a new connection at
    /// [`TcpConfig::max_connections`].
    pub time_wait_recycled: u64,
    /// Readiness events dropped, oldest first, because [`TcpConfig::event_limit`] were
    /// waiting for `poll_event`.
    pub events_dropped: u64,
}

/// A connection's 4-tuple, in the order (local, remote).
pub(crate) type FourTuple = (SocketAddr, SocketAddr);

/// The bytes of an address as hashes and MACs take them: 4 for IPv4 (as before IPv6
/// came, so IPv4 ISNs, cookies and ports are unchanged), 16 for IPv6.
pub(crate) fn addr_octets(addr: IpAddr, out: &mut [u8; 16]) -> usize {
    match addr {
        IpAddr::V4(a) => {
            out[..4].copy_from_slice(&a.octets());
            4
        }
        IpAddr::V6(a) => {
            *out = a.octets();
            16
        }
    }
}

/// An address folded to 64 bits for cheap hashes: an IPv4 address's 32 bits as they
/// are, an IPv6 address's halves xored.
pub(crate) fn addr_bits(addr: IpAddr) -> u64 {
    match addr {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        IpAddr::V6(a) => {
            let bits = a.to_bits();
            (bits >> 64) as u64 ^ bits as u64
        }
    }
}

/// The wildcard addresses whose listeners take a connection to `local`: the
/// unspecified address of its family, and for IPv4 also `[::]` (a dual-stack
/// listener, as Linux's with `IPV6_V6ONLY` off).
pub(crate) fn wildcards(local: SocketAddr) -> [SocketAddr; 2] {
    let v6 = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), local.port());
    match local {
        SocketAddr::V4(_) => [
            SocketAddr::new(IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED), local.port()),
            v6,
        ],
        SocketAddr::V6(_) => [v6, v6],
    }
}
