//! The scripted peer's memory: what it sent, what it saw, and the byte streams of both
//! directions (a byte is a function of its sequence number, so a retransmission always
//! carries the same bytes and a misplaced byte shows).

use impnet_core::Instant;
use impnet_wire::tcp::{FastOpenCookie, Flags, Options, Packet, Repr};

use super::{LOCAL, REMOTE, sack_blocks};
use crate::Input;

/// The byte the peer sends at sequence number `seq`.
pub fn peer_byte(seq: u32) -> u8 {
    (seq.wrapping_mul(0x9e37_79b1) >> 24) as u8
}

/// The byte our user writes at sequence number `seq`.
pub fn user_byte(seq: u32) -> u8 {
    (seq.wrapping_mul(0x85eb_ca77) >> 23) as u8
}

/// A segment from the peer, fields to fill in.
pub fn template() -> Repr<'static> {
    Repr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq: 0,
        ack: 0,
        flags: Flags::ACK,
        window: 0xffff,
        urgent: 0,
        options: Options::default(),
        payload: &[],
    }
}

/// `repr` as bytes with a good checksum.
pub fn emit(repr: &Repr<'_>) -> Vec<u8> {
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Packet::new_unchecked(&mut out[..]),
        REMOTE.ip(),
        LOCAL.ip(),
        true,
    );
    out
}

/// What the harness knows of the connection the user holds.
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// Our ISS, from our SYN or SYN-ACK.
    pub iss: Option<u32>,
    /// The peer's ISN as the connection took it.
    pub irs: Option<u32>,
    /// Bytes the user queued with `send`.
    pub written: u64,
    /// Bytes the user read.
    pub read: u64,
    /// The user read end of stream.
    pub eof: bool,
    /// The user closed or aborted the connection: unread data may be dropped and a
    /// read may say end of stream early (the handle lives on only until `Closed`).
    pub released: bool,
}

impl Model {
    /// The user read `data`: it must be what the peer sent next.
    pub fn read_data(&mut self, peer: &Peer, data: &[u8]) {
        assert!(!self.eof, "data after end of stream");
        let irs = self.irs.expect("data read before the peer's ISN was known");
        let start = irs.wrapping_add(1).wrapping_add(self.read as u32);
        assert!(
            peer.covered(start, data.len()),
            "read {} bytes from sequence {start}, not all of them sent",
            data.len()
        );
        for (i, &b) in data.iter().enumerate() {
            let seq = start.wrapping_add(i as u32);
            assert_eq!(b, peer_byte(seq), "read a wrong byte at sequence {seq}");
        }
        self.read += data.len() as u64;
    }

    /// The user read end of stream: the peer must have put a FIN just there.
    pub fn eof_at(&mut self, peer: &Peer) {
        let irs = self
            .irs
            .expect("end of stream before the peer's ISN was known");
        let at = irs.wrapping_add(1).wrapping_add(self.read as u32);
        assert!(
            self.released || peer.fins.contains(&at),
            "end of stream at {at}, FINs sent at {:?}",
            peer.fins
        );
        self.eof = true;
    }
}

/// The peer's side.
#[derive(Debug)]
pub struct Peer {
    /// The peer's first ISN: offsets are measured from it.
    isn: u32,
    /// Sequence space the peer sent, as merged (start, end) offsets from `isn`.
    sent: Vec<(i64, i64)>,
    /// Where the peer's FINs sat.
    fins: Vec<u32>,
    /// The last ACK number we sent (our RCV.NXT as the peer sees it).
    rcv_nxt: Option<u32>,
    /// Just past the highest sequence number we sent.
    snd_nxt: Option<u32>,
    /// The peer's cumulative ACK (our SND.UNA as the peer knows it).
    pub snd_una: Option<u32>,
    /// The last TSval we sent.
    ts_recent: u32,
    /// ISS and ISN of a connection opened on the listener, until accepted.
    pending: Model,
    /// The TCP Fast Open cookie our listener granted, for the peer's later SYNs.
    pub cookie: Option<FastOpenCookie>,
    /// The sequence number and data length of the peer's last SYN if it carried a Fast
    /// Open cookie and data: a SYN-ACK that acknowledges the data too answers it.
    last_syn: Option<(u32, u32)>,
}

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Peer {
    pub fn new(isn: u32) -> Peer {
        Peer {
            isn,
            sent: Vec::new(),
            fins: Vec::new(),
            rcv_nxt: None,
            snd_nxt: None,
            snd_una: None,
            ts_recent: 0,
            pending: Model::default(),
            cookie: None,
            last_syn: None,
        }
    }

    fn offset(&self, seq: u32) -> i64 {
        i64::from(seq.wrapping_sub(self.isn) as i32)
    }

    /// Whether the peer sent every sequence number in `from..from + len`.
    pub fn covered(&self, from: u32, len: usize) -> bool {
        let start = self.offset(from);
        let end = start + len as i64;
        self.sent.iter().any(|&(s, e)| s <= start && end <= e)
    }

    /// The connection accepted from the listener: the ISS and ISN its SYN-ACK showed.
    pub fn take_pending(&mut self) -> Model {
        core::mem::take(&mut self.pending)
    }

    /// We sent a SYN (`seg`): for the user's connection when `model` is given, else
    /// for one the listener will hand out.
    pub fn our_syn(&mut self, seg: &Repr<'_>, model: Option<&mut Model>) {
        let model = model.unwrap_or(&mut self.pending);
        model.iss = Some(seg.seq);
        if seg.flags.ack() {
            // The SYN-ACK acknowledges the SYN, and with Fast Open the SYN's data.
            let irs = match self.last_syn {
                Some((syn, len)) if len > 0 && seg.ack == syn.wrapping_add(1 + len) => syn,
                _ => seg.ack.wrapping_sub(1),
            };
            model.irs = Some(irs);
        }
        self.snd_una = Some(seg.seq);
    }

    /// We sent `seg` (already checked).
    pub fn received(&mut self, seg: &Repr<'_>) {
        if seg.flags.ack() && !seg.flags.rst() {
            self.rcv_nxt = Some(seg.ack);
        }
        let end = seg.seq.wrapping_add(seg.segment_len() as u32);
        if self.snd_nxt.is_none_or(|nxt| after(end, nxt)) && !seg.flags.rst() {
            self.snd_nxt = Some(end);
        }
        if let Some((val, _)) = seg.options.timestamps {
            self.ts_recent = val;
        }
    }

    /// The peer sent `seg`.
    pub fn sent(&mut self, seg: &Repr<'_>) {
        // Only a SYN that may open a Fast Open child: data and a cookie, no ACK or RST.
        if seg.flags.syn() && !seg.flags.ack() && !seg.flags.rst() {
            let fast_open = seg.options.fast_open.is_some_and(|c| !c.is_request());
            self.last_syn = (fast_open && !seg.payload.is_empty())
                .then_some((seg.seq, seg.payload.len() as u32));
        }
        let start = self.offset(seg.seq);
        let len = seg.segment_len() as i64;
        if len > 0 {
            self.insert(start, start + len);
        }
        if seg.flags.fin() {
            let at = seg
                .seq
                .wrapping_add(u32::from(seg.flags.syn()))
                .wrapping_add(seg.payload.len() as u32);
            if !self.fins.contains(&at) {
                self.fins.push(at);
            }
        }
        if seg.flags.ack()
            && let (Some(una), Some(nxt)) = (self.snd_una, self.snd_nxt)
            && after(seg.ack, una)
            && !after(seg.ack, nxt)
        {
            self.snd_una = Some(seg.ack);
        }
    }

    fn insert(&mut self, start: i64, end: i64) {
        let (mut s, mut e) = (start, end);
        self.sent.retain(|&(a, b)| {
            let overlaps = a <= e && s <= b;
            if overlaps {
                s = s.min(a);
                e = e.max(b);
            }
            !overlaps
        });
        let at = self.sent.partition_point(|&(a, _)| a < s);
        self.sent.insert(at, (s, e));
    }

    /// Where a segment's sequence number starts, by selector.
    pub fn seq_base(&self, sel: u8) -> u32 {
        let rcv_nxt = self.rcv_nxt.unwrap_or(self.isn);
        match sel {
            0 => rcv_nxt,
            1 => self
                .sent
                .last()
                .map_or(self.isn, |&(_, e)| self.isn.wrapping_add(e as u32)),
            2 => self.isn,
            _ => rcv_nxt.wrapping_sub(1),
        }
    }

    /// Where a segment's ACK number starts, by selector.
    pub fn ack_base(&self, sel: u8, model: &Model) -> u32 {
        let nxt = self.snd_nxt.unwrap_or(0);
        let una = self.snd_una.unwrap_or(nxt);
        match sel {
            0 => nxt,
            1 => una,
            2 => una.wrapping_add(nxt.wrapping_sub(una) / 2),
            _ => model.iss.map_or(nxt, |iss| iss.wrapping_add(1)),
        }
    }

    /// The options of a peer segment: `bits` says which, `unit` is the SACK grid.
    pub fn options(
        &self,
        input: &mut Input<'_>,
        bits: u8,
        flags: Flags,
        unit: u32,
        now: Instant,
    ) -> Options {
        let tsval = if bits & 2 != 0 {
            0
        } else {
            (now.as_millis() as u32).wrapping_add(1)
        };
        let una = self.snd_una.unwrap_or(0);
        let (sack_blocks, sack_len) = sack_blocks(input, bits >> 2 & 3, una, unit);
        Options {
            timestamps: (bits & 1 == 0).then_some((tsval, self.ts_recent)),
            sack_blocks,
            sack_len,
            mss: (bits & 16 != 0 && flags.syn()).then_some(1460),
            window_scale: (bits & 32 != 0 && flags.syn()).then(|| input.u8() % 16),
            sack_permitted: bits & 64 != 0 && flags.syn(),
            // TCP Fast Open on a SYN: the cookie we granted (forged when bit 2 is set
            // too), or a cookie request before one came.
            fast_open: (bits & 128 != 0 && flags.syn()).then(|| match self.cookie {
                Some(cookie) if bits & 2 != 0 => {
                    let mut bytes = [0u8; 16];
                    let n = cookie.as_bytes().len();
                    bytes[..n].copy_from_slice(cookie.as_bytes());
                    bytes[0] ^= 0x5a;
                    FastOpenCookie::new(&bytes[..n]).unwrap_or(FastOpenCookie::REQUEST)
                }
                Some(cookie) => cookie,
                None => FastOpenCookie::REQUEST,
            }),
        }
    }
}
