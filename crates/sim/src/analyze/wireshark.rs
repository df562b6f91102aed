//! The part of Wireshark's TCP sequence analysis (`tcp_analyze_sequence_number` in
//! `epan/dissectors/packet-tcp.c`, as of Wireshark 4.0) that decides whether a segment
//! is a retransmission, so that [`super::Analyzer`]'s count agrees with tshark's
//! `tcp.analysis.retransmission`, which is set on plain, fast and spurious
//! retransmissions.
//!
//! The rules, per direction (`fwd` is the sender's state, `rev` the other side's), on
//! absolute sequence numbers (0 means "not seen yet", as in Wireshark) and the window
//! field as carried (unscaled):
//!
//! - a 1-byte segment at `fwd.nextseq` while the other side's window is 0 is a
//!   zero-window probe, and never a retransmission;
//! - a segment of 0 or 1 byte at `fwd.nextseq - 1` without SYN/FIN/RST is a
//!   keep-alive, and never a retransmission;
//! - a segment without data at `nextseq` repeating the last ACK and window is a
//!   duplicate ACK (unless it answers a keep-alive or a zero-window probe); an ACK
//!   number that changes resets the count;
//! - a segment with data, SYN or FIN whose sequence number is below `fwd.nextseq` has
//!   "not advanced" (except a segment of more than 1 byte at `nextseq - 1`);
//! - it is a *spurious* retransmission when it carries data that the other side has
//!   already acknowledged (`seq + len <= rev.lastack`), whether or not it advanced;
//! - else a *fast* retransmission when it has not advanced, the other side has sent at
//!   least 2 duplicate ACKs, its last ACK is this segment's sequence number and came
//!   less than 20 ms before;
//! - else *out of order* (not a retransmission) when it has not advanced, comes less
//!   than the handshake RTT (SYN to the first ACK; 3 ms when unknown) after the
//!   segment that set `nextseq`, and does not end exactly at `nextseq`;
//! - else a plain retransmission when it has not advanced.

use impnet_wire::tcp::Flags;

/// A zero-window probe.
pub const ZERO_WINDOW_PROBE: u32 = 1 << 0;
/// The segment advertises a zero window.
pub const ZERO_WINDOW: u32 = 1 << 1;
/// A keep-alive.
pub const KEEP_ALIVE: u32 = 1 << 2;
/// A duplicate ACK.
pub const DUPLICATE_ACK: u32 = 1 << 3;
/// A retransmission (neither fast nor spurious).
pub const RETRANSMISSION: u32 = 1 << 4;
/// A fast retransmission.
pub const FAST_RETRANSMISSION: u32 = 1 << 5;
/// A spurious retransmission.
pub const SPURIOUS_RETRANSMISSION: u32 = 1 << 6;
/// Out of order.
pub const OUT_OF_ORDER: u32 = 1 << 7;
/// Any kind `tcp.analysis.retransmission` is set on.
pub const ANY_RETRANSMISSION: u32 = RETRANSMISSION | FAST_RETRANSMISSION | SPURIOUS_RETRANSMISSION;

const FAST_RT_WINDOW_NS: u64 = 20_000_000;
const DEFAULT_OOO_NS: u64 = 3_000_000;

/// Wireshark's per-direction state.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    nextseq: u32,
    nextseqtime: u64,
    lastack: u32,
    lastacktime: u64,
    window: u32,
    dupacknum: i32,
    lastflags: u32,
    maxseqtobeacked: u32,
}

impl Default for Flow {
    /// Nothing seen; the window starts at `u32::MAX` (no segment carries that), as in
    /// Wireshark.
    fn default() -> Flow {
        Flow {
            nextseq: 0,
            nextseqtime: 0,
            lastack: 0,
            lastacktime: 0,
            window: u32::MAX,
            dupacknum: 0,
            lastflags: 0,
            maxseqtobeacked: 0,
        }
    }
}

/// The fields of a segment the analysis reads.
#[derive(Debug, Clone, Copy)]
pub struct Seg {
    /// Capture time, nanoseconds.
    pub ts: u64,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (as carried, even without ACK).
    pub ack: u32,
    /// Payload length.
    pub len: u32,
    /// Control bits.
    pub flags: Flags,
    /// Window field, unscaled.
    pub window: u16,
}

fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn gt(a: u32, b: u32) -> bool {
    lt(b, a)
}

fn le(a: u32, b: u32) -> bool {
    !gt(a, b)
}

const SYN_FIN_RST: u8 = 0x07;
const SYN_FIN: u8 = 0x03;

/// Runs the analysis of one segment sent in the `fwd` direction; `first_rtt` is the
/// handshake RTT in nanoseconds (0 when unknown). Returns the flags it set.
pub fn step(fwd: &mut Flow, rev: &mut Flow, first_rtt: u64, s: &Seg) -> u32 {
    let mut f = ack_side(fwd, rev, s);
    if s.ack != fwd.lastack {
        fwd.dupacknum = 0;
    }
    if rev.maxseqtobeacked != 0 && gt(s.ack, rev.maxseqtobeacked) && s.flags.ack() {
        // Wireshark compares these two without wrap-around.
        if rev.maxseqtobeacked > rev.nextseq {
            rev.maxseqtobeacked = rev.nextseq;
        } else {
            rev.dupacknum = -1;
        }
    }
    if s.len > 0 || s.flags.0 & SYN_FIN != 0 {
        f |= classify(fwd, rev, first_rtt, s, f);
    }
    let nextseq = s
        .seq
        .wrapping_add(s.len)
        .wrapping_add(u32::from(s.flags.0 & SYN_FIN != 0));
    if (gt(nextseq, fwd.nextseq) || fwd.nextseq == 0) && f & ZERO_WINDOW_PROBE == 0 {
        fwd.nextseq = nextseq;
        fwd.nextseqtime = s.ts;
    }
    if (s.seq == fwd.maxseqtobeacked || fwd.maxseqtobeacked == 0) && f & ZERO_WINDOW_PROBE == 0 {
        fwd.maxseqtobeacked = fwd.nextseq;
    }
    fwd.window = u32::from(s.window);
    fwd.lastack = s.ack;
    fwd.lastacktime = s.ts;
    fwd.lastflags = f;
    f
}

/// Zero-window probe, zero window, keep-alive and duplicate ACK.
fn ack_side(fwd: &mut Flow, rev: &Flow, s: &Seg) -> u32 {
    let no_sfr = s.flags.0 & SYN_FIN_RST == 0;
    if s.len == 1 && s.seq == fwd.nextseq && rev.window == 0 {
        return ZERO_WINDOW_PROBE;
    }
    let mut f = 0;
    if s.window == 0 && no_sfr {
        f |= ZERO_WINDOW;
    }
    if s.len <= 1 && s.seq == fwd.nextseq.wrapping_sub(1) && no_sfr {
        f |= KEEP_ALIVE;
    }
    let window = u32::from(s.window);
    let repeats = s.len == 0
        && window == fwd.window
        && s.seq == fwd.nextseq
        && s.ack == fwd.lastack
        && no_sfr;
    if repeats && window != 0 && rev.lastflags & KEEP_ALIVE != 0 {
        return f; // a keep-alive ACK
    }
    if repeats && window == 0 && rev.lastflags & ZERO_WINDOW_PROBE != 0 {
        return f; // a zero-window probe ACK
    }
    if repeats && window != 0 {
        fwd.dupacknum = if fwd.dupacknum == -1 {
            1
        } else {
            fwd.dupacknum + 1
        };
        f |= DUPLICATE_ACK;
    }
    f
}

/// Spurious, fast, out of order or plain retransmission (or nothing) for a segment
/// with data, SYN or FIN; `so_far` holds the flags already set.
fn classify(fwd: &Flow, rev: &Flow, first_rtt: u64, s: &Seg, so_far: u32) -> u32 {
    if so_far & KEEP_ALIVE != 0 {
        return 0;
    }
    let mut not_advanced = fwd.nextseq != 0 && lt(s.seq, fwd.nextseq);
    if s.len > 1 && fwd.nextseq.wrapping_sub(1) == s.seq {
        not_advanced = false;
    }
    if s.len > 0 && rev.lastack != 0 && le(s.seq.wrapping_add(s.len), rev.lastack) {
        return SPURIOUS_RETRANSMISSION;
    }
    let since_ack = s.ts.wrapping_sub(rev.lastacktime);
    if not_advanced && rev.dupacknum >= 2 && rev.lastack == s.seq && since_ack < FAST_RT_WINDOW_NS {
        return FAST_RETRANSMISSION;
    }
    let since_next = s.ts.wrapping_sub(fwd.nextseqtime);
    let threshold = if first_rtt == 0 {
        DEFAULT_OOO_NS
    } else {
        first_rtt
    };
    let syn_fin = u32::from(s.flags.0 & SYN_FIN != 0);
    let end = s.seq.wrapping_add(s.len).wrapping_add(syn_fin);
    if not_advanced && since_next < threshold && fwd.nextseq != end {
        return OUT_OF_ORDER;
    }
    if not_advanced { RETRANSMISSION } else { 0 }
}
