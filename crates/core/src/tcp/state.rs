//! One type per RFC 9293 state (§3.3.2). Each owns only what exists in that state: the
//! sending half ([`Snd`]) lives until our FIN is acknowledged, the receiving half
//! ([`Rcv`]) until the peer's FIN arrives; after that only [`SndClosed`] /
//! [`RcvClosed`] remain (the last sequence numbers, and the bytes the user has not
//! read yet).
//!
//! LISTEN is not here: a listener is a different kind of socket (`listen.rs`), and
//! CLOSED is [`State::Closed`], which remembers why the connection ended.

use core::net::SocketAddr;

use super::TcpError;
use super::buffer::{RecvBuffer, SackRecorder, SendBuffer};
use super::cc::{CongestionControl, Controller, UsageTracker};
use super::fastopen::SynFastOpen;
use super::rack::{Rack, RackCell, Undo};
use super::rtt::{HandshakeTimer, RttSampler};
use super::sack::Scoreboard;
use super::segment::{Reset, tsval};
use super::seq::SeqNumber;
use crate::time::Instant;
use impnet_wire::tcp::{FastOpenCookie, Repr, SackBlock};

/// A connection's protocol state.
///
/// Layout for speed: every state with a sending half ([`Snd`]) holds it first, in C
/// order, so it sits at one offset in all five and [`State::snd`] is a test of the tag,
/// not a jump per state (a segment asks for it a dozen times); the receiving half
/// ([`Rcv`]) likewise comes first in SYN-RECEIVED and FIN-WAIT-2 and second (after
/// `snd`) in ESTABLISHED and FIN-WAIT-1.
#[derive(Debug)]
pub(crate) enum State {
    /// We sent a SYN and wait for the peer's SYN.
    SynSent(SynSent),
    /// We received a SYN and sent our SYN; waiting for its ACK.
    SynRcvd(SynRcvd),
    /// Data flows both ways.
    Established(Established),
    /// We closed; our FIN is not acknowledged yet; the peer may still send.
    FinWait1(FinWait1),
    /// Our FIN is acknowledged; the peer may still send.
    FinWait2(FinWait2),
    /// Both sides closed at once; waiting for the ACK of our FIN.
    Closing(Closing),
    /// Both FINs acknowledged; waiting 2*MSL for stray segments to die.
    TimeWait(TimeWait),
    /// The peer closed; we may still send.
    CloseWait(CloseWait),
    /// The peer closed, then we did; waiting for the ACK of our FIN.
    LastAck(LastAck),
    /// No connection; `error` says why it ended (None: a clean close).
    Closed(Closed),
}

/// SYN-SENT: only our ISN exists; data the user sends now waits in `buffer`.
#[derive(Debug)]
pub(crate) struct SynSent {
    /// Our initial sequence number.
    pub iss: SeqNumber,
    /// `iss` while the SYN is due (not sent, or to retransmit), `iss + 1` once sent.
    pub snd_nxt: SeqNumber,
    /// Data written before the connection is established.
    pub buffer: SendBuffer,
    /// When the SYN went out, for an RTT sample without timestamps.
    pub timer: HandshakeTimer,
    /// TCP Fast Open (RFC 7413): what the SYN carries.
    pub fast_open: SynFastOpen,
    /// Bytes of `buffer` the last SYN carried (Fast Open): the SYN-ACK may acknowledge
    /// up to ISS + 1 + this.
    pub syn_data: usize,
}

/// What a segment in SYN-SENT calls for (RFC 9293 §3.10.7.3): [`SynSent::on_segment`]
/// decides from the state and the segment alone, the connection carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SynSentDisposition {
    /// Drop the segment.
    Drop,
    /// An unacceptable ACK: answer with this RST, stay in SYN-SENT.
    Reset(Reset),
    /// An acceptable RST: the peer refused; enter CLOSED.
    Refused,
    /// The peer's SYN, acknowledging ours: enter ESTABLISHED and send an ACK.
    Establish,
    /// The peer's SYN without an ACK of ours (simultaneous open): enter SYN-RECEIVED
    /// and send a SYN-ACK.
    SimultaneousOpen,
}

impl SynSent {
    /// RFC 9293 §3.10.7.3 "If the state is SYN-SENT": what `seg`, from `remote` to
    /// `local`, calls for. `tsecr_check`: `Some(now)` when our SYN offered timestamps
    /// and `TcpConfig::syn_sent_tsecr_check` is on (an ACK echoing a timestamp none of
    /// our SYNs carried is not acceptable).
    #[inline]
    pub fn on_segment(
        &self,
        seg: &Repr<'_>,
        (local, remote): (SocketAddr, SocketAddr),
        tsecr_check: Option<Instant>,
    ) -> SynSentDisposition {
        let SynSent {
            iss,
            snd_nxt: _,
            buffer: _,
            timer,
            fast_open: _,
            syn_data,
        } = self;
        let ack = SeqNumber(seg.ack);
        // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless the RST bit is
        // set, if so drop the segment and return) <SEQ=SEG.ACK><CTL=RST>". SND.NXT
        // counts the data a Fast Open SYN carried (RFC 7413 §4.2.2).
        let ack_ok = seg.flags.ack()
            && ack > *iss
            && ack <= *iss + 1 + *syn_data
            && !tsecr_check.is_some_and(|now| foreign_echo(timer, seg, now));
        if seg.flags.ack() && !ack_ok {
            return if seg.flags.rst() {
                SynSentDisposition::Drop
            } else {
                SynSentDisposition::Reset(Reset::for_segment(local, remote, seg))
            };
        }
        if seg.flags.rst() {
            // "If the ACK was acceptable, then signal to the user "error: connection
            // reset", drop the segment, enter CLOSED state ... Otherwise (no ACK), drop".
            return if ack_ok {
                SynSentDisposition::Refused
            } else {
                SynSentDisposition::Drop
            };
        }
        // "If neither of the SYN or RST bits is set, then drop the segment and return."
        if !seg.flags.syn() {
            return SynSentDisposition::Drop;
        }
        // "If SND.UNA > ISS (our SYN has been ACKed), change the connection state to
        // ESTABLISHED ... Otherwise, enter SYN-RECEIVED".
        if ack_ok {
            SynSentDisposition::Establish
        } else {
            SynSentDisposition::SimultaneousOpen
        }
    }
}

/// `TcpConfig::syn_sent_tsecr_check`: `seg` echoes a timestamp (not zero) none of our
/// SYNs carried, one before the first (`timer`) or after `now` (Linux's check).
fn foreign_echo(timer: &HandshakeTimer, seg: &Repr<'_>, now: Instant) -> bool {
    let (Some((_, ecr)), Some(first)) = (seg.options.timestamps, timer.first_sent()) else {
        return false;
    };
    let (from, to) = (tsval(first), tsval(now));
    ecr != 0 && ecr.wrapping_sub(from) > to.wrapping_sub(from)
}

/// SYN-RECEIVED: the peer's ISN is known (so the receiving half exists); ours is sent.
/// `rcv` first, in C order: at the offset of FIN-WAIT-2's (see [`State`]).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct SynRcvd {
    /// The receiving half.
    pub rcv: Rcv,
    /// Data written before the connection is established.
    pub buffer: SendBuffer,
    /// When the SYN-ACK went out, for an RTT sample without timestamps.
    pub timer: HandshakeTimer,
    /// The Fast Open cookie our SYN-ACK grants (RFC 7413 §4.1.2), on a listener with
    /// Fast Open that got a cookie request or an invalid cookie.
    pub cookie: Option<FastOpenCookie>,
    /// Our initial sequence number.
    pub iss: SeqNumber,
    /// `iss` while the SYN-ACK is due, `iss + 1` once sent.
    pub snd_nxt: SeqNumber,
    /// The peer's window from its SYN (unscaled: RFC 7323 §2.2, a SYN's window is never scaled).
    pub snd_wnd: u32,
    /// True when this connection came from a listener (RFC 9293: a RST or SYN then
    /// returns it to LISTEN instead of refusing a user's open).
    pub passive: bool,
}

/// ESTABLISHED.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Established {
    /// Sending half.
    pub snd: Snd,
    /// Receiving half.
    pub rcv: Rcv,
}

/// FIN-WAIT-1: our FIN follows the buffered data in `snd` (at `snd_una +
/// buffer.len()`). The same halves as ESTABLISHED, in the same type, so that
/// [`State::queue_fin`] moves the state once out and once back, not through a second
/// struct (two more copies of the whole state on every active close).
pub(crate) type FinWait1 = Established;

/// FIN-WAIT-2.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct FinWait2 {
    /// Receiving half.
    pub rcv: Rcv,
    /// What is left of the sending half.
    pub snd: SndClosed,
}

/// CLOSING.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Closing {
    /// Sending half; the FIN sits at `snd_una + buffer.len()`.
    pub snd: Snd,
    /// What is left of the receiving half.
    pub rcv: RcvClosed,
}

/// TIME-WAIT.
#[derive(Debug)]
pub(crate) struct TimeWait {
    /// What is left of the sending half.
    pub snd: SndClosed,
    /// What is left of the receiving half.
    pub rcv: RcvClosed,
    /// The peer's last timestamp (RFC 6191: a new SYN with a newer one may reopen).
    pub ts_recent: Option<u32>,
}

/// CLOSE-WAIT.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct CloseWait {
    /// Sending half.
    pub snd: Snd,
    /// What is left of the receiving half.
    pub rcv: RcvClosed,
}

/// LAST-ACK: our FIN follows the buffered data in `snd` (at `snd_una +
/// buffer.len()`). The same halves as CLOSE-WAIT, in the same type (see [`FinWait1`]).
pub(crate) type LastAck = CloseWait;

/// CLOSED.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closed {
    /// Why the connection ended; None for a graceful close.
    pub error: Option<TcpError>,
}

/// Loss recovery in progress (RFC 6582 NewReno, or RFC 6675 SACK-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// RFC 6582 "recover" / RFC 6675 "RecoveryPoint": SND.MAX when recovery started;
    /// an ACK at or beyond it ends recovery.
    pub recover: SeqNumber,
    /// Started after a retransmission timeout to repair the holes SACK shows: the
    /// timeout already cut the window, so no further cut, and slow start goes on.
    pub after_rto: bool,
    /// RFC 9937 PRR state (SACK recovery that cut the window).
    pub prr: Prr,
}

/// RFC 9937 Proportional Rate Reduction, all in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Prr {
    /// "prr_delivered": data delivered to the receiver since recovery began.
    pub delivered: usize,
    /// "prr_out": data sent since recovery began.
    pub out: usize,
    /// "RecoverFS": FlightSize when recovery began.
    pub recover_fs: usize,
    /// "sndcnt" left from the last ACK: what may still go now.
    pub sndcnt: usize,
}

impl Recovery {
    /// Recovery up to `recover`, with `recover_fs` bytes in flight when it began.
    pub fn new(recover: SeqNumber, after_rto: bool, recover_fs: usize) -> Recovery {
        Recovery {
            recover,
            after_rto,
            prr: Prr {
                recover_fs,
                ..Prr::default()
            },
        }
    }
}

/// What a sender uses only once it met loss (or times RTT without timestamps): kept
/// behind one pointer in [`LossCell`].
#[derive(Debug, Default)]
pub(crate) struct Loss {
    /// Loss recovery, when in progress.
    pub recovery: Option<Recovery>,
    /// NewReno: the next sequence number to retransmit once (fast retransmit, partial ACK).
    pub rexmit: Option<SeqNumber>,
    /// After a retransmission timeout, the highest sequence number sent before it: no
    /// fast recovery starts until the ACK passes it (RFC 6675 §5.1, RFC 6582 §4.1), so
    /// duplicate ACKs for go-back-N retransmissions do not halve cwnd again.
    pub rto_recover: Option<SeqNumber>,
    /// The window before the last cut, to restore if its retransmissions prove spurious.
    pub undo: Option<Undo>,
    /// RTT sample in flight (Karn's rule), when timestamps are not used.
    pub sampler: RttSampler,
}

/// A sender's [`Loss`], made the first time it is changed and then kept until the
/// sending half ends (freeing it after each episode would allocate on the data path
/// of a lossy bulk transfer again and again): 8 bytes in every connection instead of
/// the 48 of its fields (an idle connection, and one whose data never met loss and
/// uses timestamps, has none).
#[derive(Debug, Default)]
pub(crate) struct LossCell(Option<alloc::boxed::Box<Loss>>);

/// Reading it: each of these costs a test of the pointer when it was never made (as
/// the `Option` fields in place did), where a shared empty `Loss` to read from would
/// cost a select and a load more on every segment.
impl LossCell {
    /// [`Loss::recovery`].
    #[inline]
    pub fn recovery(&self) -> Option<&Recovery> {
        self.0.as_deref().and_then(|l| l.recovery.as_ref())
    }
    /// Whether loss recovery is in progress.
    #[inline]
    pub fn in_recovery(&self) -> bool {
        self.0.as_deref().is_some_and(|l| l.recovery.is_some())
    }
    /// [`Loss::rto_recover`].
    #[inline]
    pub fn rto_recover(&self) -> Option<SeqNumber> {
        self.0.as_deref().and_then(|l| l.rto_recover)
    }
    /// Recovering from a loss: in fast recovery, or repairing after a timeout.
    #[inline]
    pub fn in_repair(&self) -> bool {
        self.0
            .as_deref()
            .is_some_and(|l| l.recovery.is_some() || l.rto_recover.is_some())
    }
    /// [`Loss::undo`].
    #[inline]
    pub fn undo(&self) -> Option<&Undo> {
        self.0.as_deref().and_then(|l| l.undo.as_ref())
    }
    /// The state to change, made now if it was not.
    #[inline]
    pub fn get_mut(&mut self) -> &mut Loss {
        self.0.get_or_insert_with(new_loss)
    }
    /// The state to change when it was made; `None` when it was not, for changes that
    /// leave fresh state as it is (clearing, a sampler's retransmission).
    #[inline]
    pub fn allocated_mut(&mut self) -> Option<&mut Loss> {
        self.0.as_deref_mut()
    }
    /// A repair is due: a retransmission queued, or recovery in progress.
    #[inline]
    pub fn repairing(&self) -> bool {
        self.0
            .as_deref()
            .is_some_and(|l| l.rexmit.is_some() || l.recovery.is_some())
    }
}

/// A fresh [`Loss`] in a new box ([`LossCell::get_mut`]), out of line: made once a
/// connection first needs it.
#[cold]
#[inline(never)]
fn new_loss() -> alloc::boxed::Box<Loss> {
    alloc::boxed::Box::default()
}

/// The sending half of a synchronized connection.
pub(crate) struct Snd {
    /// Oldest unacknowledged sequence number; `buffer` offset 0.
    pub snd_una: SeqNumber,
    /// Next sequence number to send (drops back to `snd_una` on a retransmission timeout).
    pub snd_nxt: SeqNumber,
    /// Highest sequence number sent so far (`>= snd_nxt`); ACKs up to it are valid.
    pub snd_max: SeqNumber,
    /// The peer's window in bytes (scaled), from the segment of `snd_wl1`/`snd_wl2`.
    pub snd_wnd: u32,
    /// Sequence number of the segment that last updated `snd_wnd`.
    pub snd_wl1: SeqNumber,
    /// Acknowledgment number of the segment that last updated `snd_wnd`.
    pub snd_wl2: SeqNumber,
    /// Largest window the peer ever offered (RFC 5961 §5 ACK check; sender SWS).
    pub max_snd_wnd: u32,
    /// Bytes written by the user and not acknowledged yet, from `snd_una`.
    pub buffer: SendBuffer,
    /// Congestion controller.
    pub cc: Controller,
    /// How the sender used cwnd over the current window of data, for the controller
    /// (a window the sender did not fill does not grow).
    pub cwnd_usage: UsageTracker,
    /// RFC 6675 scoreboard (used when SACK was negotiated).
    pub scoreboard: Scoreboard,
    /// Loss recovery and its repairs, and the RTT sampler: made the first time one is
    /// needed, then kept ([`LossCell`]).
    pub loss: LossCell,
    /// RFC 6675: the highest sequence number retransmitted in this recovery ("HighRxt").
    pub high_rxt: SeqNumber,
    /// End of the last segment smaller than the MSS sent with new data: Minshall's
    /// variant of Nagle's algorithm holds another small segment only while this one is
    /// unacknowledged (as Linux's `snd_sml`).
    pub snd_sml: SeqNumber,
    /// Duplicate ACKs in a row (RFC 5681 §2 definition; saturating: only counts up to
    /// 3 matter, and a `u16` with `probe_count` keeps `Snd` 8 bytes smaller).
    pub dup_acks: u16,
    /// Zero-window probes sent in a row (persist backoff exponent, capped at 16 where
    /// used; saturating).
    pub probe_count: u16,
    /// Segments of more than one MSS (TSO) have been sent: an ACK may then cover many
    /// segments the device cut, and slow start counts it as several (`stretch_ack`).
    pub tso: bool,
    /// When data (or a FIN) last went out, new or again; `None` before the first and
    /// after an idle restart. Measures RFC 5681 §4.1's idle period.
    pub last_send: Option<Instant>,
    /// RACK-TLP (RFC 8985): transmit times, loss marks, the probe; allocated when first
    /// changed (read it through [`Snd::rack`], change it through [`Snd::rack_mut`]).
    pub rack: RackCell,
    /// RACK-TLP is on for this connection (SACK negotiated, `TcpConfig::rack`).
    pub rack_enabled: bool,
    /// "RACK.min_RTT" (RFC 8985 §6.2 step 1): the smallest RTT seen, the estimator's or
    /// a SACKed segment's, over the connection's life (the RFC suggests a windowed
    /// minimum). Outside [`RackCell`]: the handshake's sample sets it before any data
    /// is sent.
    pub rack_min_rtt: Option<crate::time::Duration>,
    /// Delivery-rate sampling, kept only for a controller that wants the samples.
    pub rate: Option<alloc::boxed::Box<super::rate::RateSampler>>,
    /// Data is paced (`TcpConfig::pacing`).
    pub pacing: bool,
    /// The last new-data segment sent at `last_send` went without PSH: the next one
    /// then closes a pair, as the two segments of one of Linux's TSO packets
    /// (`conn/output.rs`, `push_due`).
    pub pair_open: bool,
    /// When the next data segment may leave, when pacing.
    pub pacer: super::pacing::Pacer,
    /// SND.UNA when the connection was established: the first byte after the SYN and
    /// the data the SYN-ACK acknowledged with it (Fast Open). What lies between it and
    /// SND.UNA is delivered ([`Snd::delivered_segments`]).
    pub data_start: SeqNumber,
}

impl core::fmt::Debug for Snd {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Snd")
            .field("snd_una", &self.snd_una)
            .field("snd_nxt", &self.snd_nxt)
            .field("snd_max", &self.snd_max)
            .field("snd_wnd", &self.snd_wnd)
            .field("buffered", &self.buffer.len())
            .field("cwnd", &self.cc.cwnd())
            .field("recovery", &self.loss.recovery())
            .finish_non_exhaustive()
    }
}

impl Snd {
    /// Segments delivered after the SYN, in `mss`-sized pieces: the bytes acknowledged
    /// since `data_start` and those SACKed above SND.UNA (Linux's `tcpi_delivered`
    /// counts the segments it sent, each TSO packet's pieces of the MSS; computed here
    /// when asked, so nothing is counted per ACK, it counts a run of small segments
    /// acknowledged together as one).
    pub fn delivered_segments(&self, mss: usize) -> u32 {
        let bytes = (self.snd_una - self.data_start) + self.scoreboard.sacked_bytes();
        u32::try_from(bytes.div_ceil(mss.max(1))).unwrap_or(u32::MAX)
    }
    /// Bytes sent and not acknowledged (`snd_una..snd_max`, counting SYN/FIN).
    pub fn outstanding(&self) -> usize {
        self.snd_max - self.snd_una
    }
    /// The sequence number just past the last queued byte (where a FIN would go).
    pub fn data_end(&self) -> SeqNumber {
        self.snd_una + self.buffer.len()
    }
    /// RACK-TLP's state (fresh until first changed).
    pub fn rack(&self) -> &Rack {
        self.rack.get()
    }
    /// RACK-TLP's state to change (allocated on first use; see [`RackCell::get_mut`]).
    pub fn rack_mut(&mut self) -> &mut Rack {
        self.rack.get_mut(self.snd_una, self.buffer.capacity())
    }
}

/// What remains of the sending half once our FIN is acknowledged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SndClosed {
    /// SND.NXT = SND.UNA, just past our FIN.
    pub snd_nxt: SeqNumber,
}

/// What the receiver owes the peer in acknowledgments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckState {
    /// Everything received is acknowledged.
    Idle,
    /// This many bytes received and not yet acknowledged (the delayed-ACK timer runs).
    Delayed(u32),
    /// Send an ACK at the next chance.
    Now,
}

/// The receiving half of a synchronized connection, until the peer's FIN.
#[derive(Debug)]
pub(crate) struct Rcv {
    /// The peer's initial sequence number.
    pub irs: SeqNumber,
    /// Next sequence number expected.
    pub rcv_nxt: SeqNumber,
    /// Right edge of the window last advertised (never moves left, RFC 9293 §3.8.6.2.2).
    pub rcv_adv: SeqNumber,
    /// In-order bytes for the user plus the out-of-order assembler.
    pub buffer: RecvBuffer,
    /// Which out-of-order segments arrived last (order of SACK blocks).
    pub sack: SackLog,
    /// Sequence number of the peer's FIN when it arrived ahead of a hole.
    pub fin_at: Option<SeqNumber>,
}

/// What remains of the receiving half once the peer's FIN arrived.
#[derive(Debug)]
pub(crate) struct RcvClosed {
    /// RCV.NXT, just past the peer's FIN.
    pub rcv_nxt: SeqNumber,
    /// Bytes the user has not read yet (then EOF).
    pub buffer: RecvBuffer,
}

/// The receiver's [`SackRecorder`], made on the first segment that could ever be
/// reported (one that ends above RCV.NXT, or a duplicate): a connection whose data only
/// ever arrives in order keeps none (80 bytes less per connection) and records nothing.
/// Its blocks are those of a recorder fed every segment: a segment that ends at or
/// below RCV.NXT is never reported (RCV.NXT only grows), and the ones such a recorder
/// would have taken before the first reportable one are older than it, so they push
/// nothing out that the lazy one keeps.
#[derive(Debug, Default)]
pub(crate) struct SackLog(Option<alloc::boxed::Box<SackRecorder>>);

impl SackLog {
    /// A segment covering `len` bytes from `seq` arrived; RCV.NXT is now `rcv_nxt`.
    pub fn record(&mut self, seq: SeqNumber, len: usize, rcv_nxt: SeqNumber) {
        match &mut self.0 {
            Some(recorder) => recorder.record(seq, len),
            None if len > 0 && seq + len > rcv_nxt => self.recorder().record(seq, len),
            None => {}
        }
    }

    fn recorder(&mut self) -> &mut SackRecorder {
        self.0.get_or_insert_with(alloc::boxed::Box::default)
    }

    /// [`SackRecorder::record_duplicate`].
    pub fn record_duplicate(&mut self, seq: SeqNumber, end: SeqNumber) {
        if seq < end {
            self.recorder().record_duplicate(seq, end);
        }
    }

    /// [`SackRecorder::has_dsack`].
    pub fn has_dsack(&self) -> bool {
        self.0.as_ref().is_some_and(|r| r.has_dsack())
    }

    /// [`SackRecorder::take_dsack`].
    pub fn take_dsack(&mut self) -> Option<(SeqNumber, SeqNumber)> {
        self.0.as_mut()?.take_dsack()
    }

    /// [`SackRecorder::blocks`] (an empty recorder's when none was made).
    pub fn blocks(
        &self,
        rcv_nxt: SeqNumber,
        buf: &RecvBuffer,
        max: usize,
    ) -> ([SackBlock; 4], usize) {
        match &self.0 {
            Some(recorder) => recorder.blocks(rcv_nxt, buf, max),
            None => SackRecorder::new().blocks(rcv_nxt, buf, max),
        }
    }
}

impl Rcv {
    /// A fresh receiving half on `buffer` for a peer whose ISN is `irs`, its window
    /// scaled by `shift` from the next segment on.
    pub fn new(buffer: RecvBuffer, irs: SeqNumber, shift: u8) -> Rcv {
        let rcv_nxt = irs + 1;
        // The window on a SYN is never scaled (RFC 7323 §2.2), so start from what fits 16 bits.
        let window = buffer.window().min(0xffff << shift).min(0xffff);
        Rcv {
            irs,
            rcv_nxt,
            rcv_adv: rcv_nxt + window,
            buffer,
            sack: SackLog::default(),
            fin_at: None,
        }
    }
    /// What is left of the window last advertised: RCV.ADV - RCV.NXT, or 0 once data
    /// taken beyond the edge (room in the buffer the edge had not shown yet) moved
    /// RCV.NXT past it, until the next segment advertises again (found by fuzz target
    /// tcp_conn: `TcpInfo::rcv_wnd` wrapped to 2^32 - n).
    pub fn advertised(&self) -> usize {
        if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        }
    }

    /// The receiving half closed by the peer's FIN (which sits at `rcv_nxt`).
    pub fn close(self) -> RcvClosed {
        let Rcv {
            rcv_nxt, buffer, ..
        } = self;
        RcvClosed {
            rcv_nxt: rcv_nxt + 1,
            buffer,
        }
    }
}

/// The public name of a state, for [`super::TcpInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    /// A listener.
    Listen,
    /// SYN-SENT.
    SynSent,
    /// SYN-RECEIVED.
    SynReceived,
    /// ESTABLISHED.
    Established,
    /// FIN-WAIT-1.
    FinWait1,
    /// FIN-WAIT-2.
    FinWait2,
    /// CLOSING.
    Closing,
    /// TIME-WAIT.
    TimeWait,
    /// CLOSE-WAIT.
    CloseWait,
    /// LAST-ACK.
    LastAck,
    /// CLOSED.
    Closed,
}

impl State {
    /// The user closed the sending side: ESTABLISHED becomes FIN-WAIT-1 and CLOSE-WAIT
    /// becomes LAST-ACK, keeping both halves; other states are left as they are,
    /// unmoved. The halves are copied out once and in once ([`State::take`],
    /// [`State::put`]).
    #[inline(never)]
    pub fn queue_fin(&mut self) {
        match self {
            State::Established(_) => match self.take() {
                State::Established(halves) => self.put(State::FinWait1(halves)),
                // Matched above: cannot happen (see `take`).
                other => core::mem::forget(other),
            },
            State::CloseWait(_) => match self.take() {
                State::CloseWait(halves) => self.put(State::LastAck(halves)),
                // Matched above: cannot happen (see `take`).
                other => core::mem::forget(other),
            },
            _ => {}
        }
    }

    /// The state, moved out for a transition; CLOSED (which owns nothing) is left in
    /// its place until [`State::put`] writes the next state.
    ///
    /// A caller that matched the variant just before takes it out with a `match` whose
    /// other arm (which cannot happen) forgets what it got: dropping it there, or
    /// panicking, makes the compiler keep a copy of the whole state for that arm, one
    /// more copy on every transition.
    #[inline(always)]
    pub fn take(&mut self) -> State {
        core::mem::replace(self, State::Closed(Closed { error: None }))
    }

    /// Write `next` over the CLOSED that [`State::take`] left, without dropping it
    /// (it owns nothing; `*self = next` calls the state's drop glue first, out of line).
    #[inline(always)]
    pub fn put(&mut self, next: State) {
        debug_assert!(matches!(self, State::Closed(_)));
        core::mem::forget(core::mem::replace(self, next));
    }

    /// The state's public name.
    pub fn name(&self) -> TcpState {
        match self {
            State::SynSent(_) => TcpState::SynSent,
            State::SynRcvd(_) => TcpState::SynReceived,
            State::Established(_) => TcpState::Established,
            State::FinWait1(_) => TcpState::FinWait1,
            State::FinWait2(_) => TcpState::FinWait2,
            State::Closing(_) => TcpState::Closing,
            State::TimeWait(_) => TcpState::TimeWait,
            State::CloseWait(_) => TcpState::CloseWait,
            State::LastAck(_) => TcpState::LastAck,
            State::Closed(_) => TcpState::Closed,
        }
    }
    /// The sending half, in the states that have one.
    pub fn snd(&self) -> Option<&Snd> {
        match self {
            State::Established(s) => Some(&s.snd),
            State::FinWait1(s) => Some(&s.snd),
            State::Closing(s) => Some(&s.snd),
            State::CloseWait(s) => Some(&s.snd),
            State::LastAck(s) => Some(&s.snd),
            _ => None,
        }
    }
    /// The sending half, mutably.
    pub fn snd_mut(&mut self) -> Option<&mut Snd> {
        match self {
            State::Established(s) => Some(&mut s.snd),
            State::FinWait1(s) => Some(&mut s.snd),
            State::Closing(s) => Some(&mut s.snd),
            State::CloseWait(s) => Some(&mut s.snd),
            State::LastAck(s) => Some(&mut s.snd),
            _ => None,
        }
    }
    /// The open receiving half, in the states that have one.
    pub fn rcv(&self) -> Option<&Rcv> {
        match self {
            State::SynRcvd(s) => Some(&s.rcv),
            State::Established(s) => Some(&s.rcv),
            State::FinWait1(s) => Some(&s.rcv),
            State::FinWait2(s) => Some(&s.rcv),
            _ => None,
        }
    }
    /// The open receiving half, mutably.
    pub fn rcv_mut(&mut self) -> Option<&mut Rcv> {
        match self {
            State::SynRcvd(s) => Some(&mut s.rcv),
            State::Established(s) => Some(&mut s.rcv),
            State::FinWait1(s) => Some(&mut s.rcv),
            State::FinWait2(s) => Some(&mut s.rcv),
            _ => None,
        }
    }
    /// The receive buffer holding bytes for the user, open or closed half.
    pub fn recv_buffer(&self) -> Option<&RecvBuffer> {
        match self {
            State::Closing(s) => Some(&s.rcv.buffer),
            State::TimeWait(s) => Some(&s.rcv.buffer),
            State::CloseWait(s) => Some(&s.rcv.buffer),
            State::LastAck(s) => Some(&s.rcv.buffer),
            other => other.rcv().map(|r| &r.buffer),
        }
    }
    /// The receive buffer holding bytes for the user, open or closed half.
    pub fn recv_buffer_mut(&mut self) -> Option<&mut RecvBuffer> {
        match self {
            State::Closing(s) => Some(&mut s.rcv.buffer),
            State::TimeWait(s) => Some(&mut s.rcv.buffer),
            State::CloseWait(s) => Some(&mut s.rcv.buffer),
            State::LastAck(s) => Some(&mut s.rcv.buffer),
            other => other.rcv_mut().map(|r| &mut r.buffer),
        }
    }
    /// RCV.NXT, in synchronized states.
    pub fn rcv_nxt(&self) -> Option<SeqNumber> {
        match self {
            State::Closing(s) => Some(s.rcv.rcv_nxt),
            State::TimeWait(s) => Some(s.rcv.rcv_nxt),
            State::CloseWait(s) => Some(s.rcv.rcv_nxt),
            State::LastAck(s) => Some(s.rcv.rcv_nxt),
            other => other.rcv().map(|r| r.rcv_nxt),
        }
    }
    /// SND.NXT as the peer should see it in an ACK we send (SND.MAX after a go-back).
    pub fn snd_seq_for_ack(&self) -> Option<SeqNumber> {
        match self {
            State::SynSent(s) => Some(s.snd_nxt),
            State::SynRcvd(s) => Some(s.iss + 1),
            State::FinWait2(s) => Some(s.snd.snd_nxt),
            State::TimeWait(s) => Some(s.snd.snd_nxt),
            State::Closed(_) => None,
            other => other.snd().map(|s| s.snd_max),
        }
    }
    /// Whether our FIN is queued after the buffered data.
    pub fn fin_queued(&self) -> bool {
        matches!(
            self,
            State::FinWait1(_) | State::Closing(_) | State::LastAck(_)
        )
    }
    /// True in the states RFC 9293 calls synchronized.
    pub fn synchronized(&self) -> bool {
        !matches!(
            self,
            State::SynSent(_) | State::SynRcvd(_) | State::Closed(_)
        )
    }
}
