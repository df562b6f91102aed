//! Software GRO and GSO as pure functions over frames: [`coalesce`] merges consecutive
//! in-order TCP segments of a flow into one large frame (generic receive offload, the
//! way Linux's `tcp_gro_receive` decides), [`segment`] cuts a TCP frame larger than the
//! MTU into MTU-sized ones (generic segmentation offload, as Linux's `tcp_gso_segment`
//! does). They work on Ethernet frames (a TAP) and on bare IP packets (a TUN)
//! ([`Framing`]), IPv4 without options and IPv6 without extension headers.
//!
//! Nothing here panics on any input: a frame that is not a plain TCP segment, or is
//! malformed, passes through uncoalesced and uncut. [`Offload`](crate::Offload) applies
//! both to a device.
//!
//! The two are inverses on what they touch: a train [`coalesce`] merges is given back
//! byte for byte by [`segment`] at the train's first payload length (its MSS), and a
//! frame [`segment`] cuts is given back by [`coalesce`] (the property tests say so).

use std::net::{Ipv4Addr, Ipv6Addr};

use impnet_wire::checksum;

/// What the frames are: where the IP header starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Ethernet frames (a TAP): an untagged 14-byte header, then IPv4 or IPv6.
    Ethernet,
    /// Bare IP packets (a TUN): the IP header at 0.
    Ip,
}

impl Framing {
    /// Bytes in front of the IP header.
    pub fn header_len(self) -> usize {
        match self {
            Framing::Ethernet => ETH_HEADER_LEN,
            Framing::Ip => 0,
        }
    }
}

/// Whether [`coalesce`] verifies checksums before merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Verify the IPv4 header and TCP checksums of every segment it would merge; a
    /// segment with a wrong one passes alone (the stack drops it).
    Verify,
    /// The device already verified them (or the link cannot corrupt).
    Trusted,
    /// Verify only the IPv4 header checksums here and leave the TCP checksums to the
    /// stack: the merged frame's TCP checksum is made from what each part's header
    /// claims its payload sums to, so it holds exactly when every part's held (but for
    /// errors in two parts that cancel, as two in one segment may). The stack's check
    /// of the merged frame then covers every part, and the payload is summed once
    /// instead of twice; a bad part costs the whole train, which TCP sends again.
    Deferred,
}

const ETH_HEADER_LEN: usize = 14;
/// The largest IP packet a merged frame may hold (IPv4's 16-bit total length; IPv6's
/// payload length would allow 40 bytes more, kept at the same cap).
pub const MAX_MERGED_IP_LEN: usize = 65535;
/// How many flows a batch keeps a train open for at once.
const OPEN_TRAINS: usize = 8;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;

/// Where a plain TCP segment's parts are in its frame, and the fields GRO compares.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Offset of the IP header.
    ip: usize,
    /// IPv6 (else IPv4).
    v6: bool,
    /// Offset of the TCP header.
    tcp: usize,
    /// Offset of the TCP payload.
    payload: usize,
    /// End of the IP packet (bytes after it, Ethernet padding, are not part of it).
    end: usize,
    seq: u32,
    flags: u8,
    /// IPv4 identification (0 for IPv6).
    ident: u16,
}

impl Segment {
    fn payload_len(&self) -> usize {
        self.end - self.payload
    }
}

/// Parse `frame` as a plain TCP segment: untagged, IPv4 without options and not a
/// fragment, or IPv6 whose next header is TCP; lengths consistent. `None` otherwise.
fn parse(framing: Framing, frame: &[u8]) -> Option<Segment> {
    let ip = framing.header_len();
    if framing == Framing::Ethernet {
        let ethertype = frame.get(12..14)?;
        if ethertype != [0x08, 0x00] && ethertype != [0x86, 0xdd] {
            return None;
        }
    }
    let version = *frame.get(ip)? >> 4;
    let (v6, tcp, end, ident) = match version {
        4 => {
            let header = frame.get(ip..ip + 20)?;
            let total = usize::from(u16::from_be_bytes([header[2], header[3]]));
            let fragment = u16::from_be_bytes([header[6], header[7]]) & 0x3fff;
            if header[0] != 0x45 || header[9] != 6 || fragment != 0 || total < 20 {
                return None;
            }
            let ident = u16::from_be_bytes([header[4], header[5]]);
            (false, ip + 20, ip + total, ident)
        }
        6 => {
            let header = frame.get(ip..ip + 40)?;
            let payload_len = usize::from(u16::from_be_bytes([header[4], header[5]]));
            if header[6] != 6 {
                return None;
            }
            (true, ip + 40, ip + 40 + payload_len, 0)
        }
        _ => return None,
    };
    let header = frame.get(tcp..tcp + 20)?;
    let data_offset = usize::from(header[12] >> 4) * 4;
    let payload = tcp + data_offset;
    if data_offset < 20 || payload > end || end > frame.len() {
        return None;
    }
    Some(Segment {
        ip,
        v6,
        tcp,
        payload,
        end,
        seq: u32::from_be_bytes([header[4], header[5], header[6], header[7]]),
        flags: header[13],
        ident,
    })
}

/// The pseudo-header sum of `segment` for a TCP length of `tcp_len`.
fn pseudo_header(frame: &[u8], segment: &Segment, tcp_len: usize) -> u16 {
    let ip = segment.ip;
    if segment.v6 {
        let address = |at: usize| {
            let mut octets = [0; 16];
            octets.copy_from_slice(&frame[at..at + 16]);
            Ipv6Addr::from(octets)
        };
        checksum::pseudo_header_v6(&address(ip + 8), &address(ip + 24), 6, tcp_len as u32)
    } else {
        let address =
            |at: usize| Ipv4Addr::new(frame[at], frame[at + 1], frame[at + 2], frame[at + 3]);
        checksum::pseudo_header_v4(&address(ip + 12), &address(ip + 16), 6, tcp_len as u32)
    }
}

/// True when the IPv4 header checksum of `segment` holds (or it is IPv6).
fn ip_checksum_holds(frame: &[u8], segment: &Segment) -> bool {
    segment.v6 || checksum::data(&frame[segment.ip..segment.tcp]) == 0xffff
}

/// True when the IPv4 header checksum (if IPv4) and the TCP checksum of `segment` hold.
fn checksums_hold(frame: &[u8], segment: &Segment) -> bool {
    if !ip_checksum_holds(frame, segment) {
        return false;
    }
    let tcp = &frame[segment.tcp..segment.end];
    let pseudo = pseudo_header(frame, segment, tcp.len());
    checksum::combine(&[pseudo, checksum::data(tcp)]) == 0xffff
}

/// Whether `segment` may be part of a train at all: payload, and no SYN, FIN, RST or
/// URG (Linux flushes on those; imp keeps them out of trains altogether).
fn mergeable(segment: &Segment) -> bool {
    segment.payload_len() > 0 && segment.flags & (SYN | FIN | RST | URG) == 0
}

/// The bytes that must be equal for two segments to be of one flow: the IP addresses
/// and the TCP ports.
fn flow<'a>(frame: &'a [u8], segment: &Segment) -> (&'a [u8], &'a [u8]) {
    let addresses = if segment.v6 {
        &frame[segment.ip + 8..segment.ip + 40]
    } else {
        &frame[segment.ip + 12..segment.ip + 20]
    };
    (addresses, &frame[segment.tcp..segment.tcp + 4])
}

/// One train being built: the indices of its frames, in order.
struct Train {
    frames: Vec<usize>,
    /// The first segment (headers to compare with; its payload length is the MSS).
    first: Segment,
    /// The last segment merged.
    last: Segment,
    /// IP length of the merged packet so far.
    ip_len: usize,
    /// No further segment may join (PSH, a short segment, or the cap).
    closed: bool,
}

/// Whether `next` continues the train of `first` ... `last`, Linux `tcp_gro_receive`'s
/// rules (and `inet_gro_receive`'s / `ipv6_gro_receive`'s for the IP header).
fn continues(frames: &[&[u8]], train: &Train, next: (&[u8], &Segment)) -> bool {
    let (frame, seg) = next;
    let (first, last) = (&train.first, &train.last);
    let head = frames[train.frames[0]];
    let mss = first.payload_len();
    let same_ip = if seg.v6 {
        // Version, traffic class, flow label; hop limit.
        first.v6
            && head[first.ip..first.ip + 4] == frame[seg.ip..seg.ip + 4]
            && head[first.ip + 7] == frame[seg.ip + 7]
    } else {
        // TOS; DF; TTL. IDs consecutive or fixed (the train's first pair decides).
        let step = seg.ident.wrapping_sub(last.ident);
        let fixed = train.frames.len() > 1 && last.ident == first.ident;
        let stepping = train.frames.len() > 1 && last.ident != first.ident;
        let id_ok = match (fixed, stepping) {
            (true, _) => step == 0,
            (_, true) => step == 1,
            _ => step <= 1,
        };
        !first.v6
            && head[first.ip + 1] == frame[seg.ip + 1]
            && head[first.ip + 6] == frame[seg.ip + 6]
            && head[first.ip + 8] == frame[seg.ip + 8]
            && id_ok
    };
    same_ip
        && !train.closed
        // The Ethernet header (MAC addresses) equal.
        && head[..first.ip] == frame[..seg.ip]
        && flow(head, first) == flow(frame, seg)
        && seg.seq == last.seq.wrapping_add(last.payload_len() as u32)
        // ACK number, data offset, window and urgent pointer equal; the flags equal but
        // for PSH (which only the last may carry); CWR only on the first (Linux flushes
        // on it).
        && head[first.tcp + 8..first.tcp + 12] == frame[seg.tcp + 8..seg.tcp + 12]
        && head[first.tcp + 12] == frame[seg.tcp + 12]
        && head[first.tcp + 14..first.tcp + 16] == frame[seg.tcp + 14..seg.tcp + 16]
        && head[first.tcp + 18..first.tcp + 20] == frame[seg.tcp + 18..seg.tcp + 20]
        && (first.flags ^ seg.flags) & !(PSH | CWR) == 0
        && seg.flags & CWR == 0
        // Options byte for byte (timestamps equal).
        && head[first.tcp + 20..first.payload] == frame[seg.tcp + 20..seg.payload]
        && seg.payload_len() <= mss
        && train.ip_len + seg.payload_len() <= MAX_MERGED_IP_LEN
}

/// The open train of the flow of `segment` (in `frame`), if any.
fn train_of(frames: &[&[u8]], open: &[Train], frame: &[u8], segment: &Segment) -> Option<usize> {
    open.iter()
        .position(|t| flow(frames[t.frames[0]], &t.first) == flow(frame, segment))
}

/// Group a batch of received frames into trains that [`merge`] joins: each inner list
/// holds the indices of one train's frames in order, a single index for a frame that
/// merges with nothing. The lists come in the order of their first frame; every index
/// appears once. Frames of different flows may interleave; within a flow the order is
/// kept (a frame that does not continue its flow's train ends it).
pub fn plan(framing: Framing, frames: &[&[u8]], checksums: Checksums) -> Vec<Vec<usize>> {
    let mut done: Vec<Train> = Vec::new();
    let mut open: Vec<Train> = Vec::new();
    let mut singles: Vec<usize> = Vec::new();
    for (index, &frame) in frames.iter().enumerate() {
        let segment = parse(framing, frame).filter(|s| {
            mergeable(s)
                && match checksums {
                    Checksums::Verify => checksums_hold(frame, s),
                    Checksums::Trusted => true,
                    Checksums::Deferred => ip_checksum_holds(frame, s),
                }
        });
        let Some(segment) = segment else {
            // A frame of an open train's flow ends that train (order within a flow).
            let flow_train = parse(framing, frame).and_then(|s| train_of(frames, &open, frame, &s));
            if let Some(at) = flow_train {
                done.push(open.remove(at));
            }
            singles.push(index);
            continue;
        };
        let same_flow = train_of(frames, &open, frame, &segment);
        if let Some(at) = same_flow {
            if continues(frames, &open[at], (frame, &segment)) {
                let train = &mut open[at];
                train.frames.push(index);
                train.ip_len += segment.payload_len();
                train.closed =
                    segment.flags & PSH != 0 || segment.payload_len() < train.first.payload_len();
                train.last = segment;
                continue;
            }
            done.push(open.remove(at));
        }
        if open.len() == OPEN_TRAINS {
            done.push(open.remove(0));
        }
        open.push(Train {
            frames: vec![index],
            first: segment,
            last: segment,
            ip_len: segment.end - segment.ip,
            closed: segment.flags & PSH != 0,
        });
    }
    done.extend(open);
    let mut runs: Vec<Vec<usize>> = done.into_iter().map(|t| t.frames).collect();
    runs.extend(singles.into_iter().map(|i| vec![i]));
    runs.sort_unstable_by_key(|run| run[0]);
    runs
}

/// The length of the frame [`merge`] makes of `run`.
pub fn merged_len(framing: Framing, frames: &[&[u8]], run: &[usize]) -> Option<usize> {
    let (&first, rest) = run.split_first()?;
    let head = parse(framing, frames.get(first)?)?;
    let mut len = head.end;
    for &i in rest {
        len += parse(framing, frames.get(i)?)?.payload_len();
    }
    Some(len)
}

/// Write the frame that joins the train `run` (indices into `frames`, as [`plan`]
/// gives them) into `out`, returning its length: the first frame's headers with the
/// IP length, the IPv4 header checksum and the TCP checksum recomputed and PSH from
/// the last segment, then every payload in order. A run of one frame is copied as it
/// is (Ethernet padding included). `None` when `out` is too small or the run is not a
/// train [`plan`] would make of these frames' kinds (unparsable frames).
pub fn merge(framing: Framing, frames: &[&[u8]], run: &[usize], out: &mut [u8]) -> Option<usize> {
    if let [single] = run {
        let frame = frames.get(*single)?;
        out.get_mut(..frame.len())?.copy_from_slice(frame);
        return Some(frame.len());
    }
    let len = merged_len(framing, frames, run)?;
    let out = out.get_mut(..len)?;
    let head_frame = frames[run[0]];
    let head = parse(framing, head_frame)?;
    out[..head.payload].copy_from_slice(&head_frame[..head.payload]);
    let mut at = head.payload;
    let mut payload_sum = 0u16;
    let mut flags = head.flags;
    for &i in run {
        let seg = parse(framing, frames[i])?;
        let payload = &frames[i][seg.payload..seg.end];
        out[at..at + payload.len()].copy_from_slice(payload);
        let sum = claimed_payload_sum(frames[i], &seg);
        let sum = if (at - head.payload) % 2 == 1 {
            checksum::at_odd_offset(sum)
        } else {
            sum
        };
        payload_sum = checksum::combine(&[payload_sum, sum]);
        at += payload.len();
        flags = head.flags | (seg.flags & PSH);
    }
    out[head.tcp + 13] = flags;
    finish_headers(out, &head, payload_sum);
    Some(len)
}

/// What the payload of `segment` sums to if its TCP checksum holds: the checksum
/// covers the pseudo-header, the TCP header and the payload and sums to 0xffff, so the
/// payload's share is the complement of the rest. [`merge`] builds the joined checksum
/// from these: it holds when every part's did (which [`plan`] verified, or the device,
/// or the stack will see, [`Checksums::Deferred`]), without summing the payload again.
fn claimed_payload_sum(frame: &[u8], segment: &Segment) -> u16 {
    let pseudo = pseudo_header(frame, segment, segment.end - segment.tcp);
    let header = checksum::data(&frame[segment.tcp..segment.payload]);
    !checksum::combine(&[pseudo, header])
}

/// Fill the IP length, IPv4 header checksum and TCP checksum of a frame whose headers
/// are those of `head` (offsets valid for it) and whose payload sums to `payload_sum`.
fn finish_headers(frame: &mut [u8], head: &Segment, payload_sum: u16) {
    let ip = head.ip;
    let ip_len = frame.len() - ip;
    if head.v6 {
        frame[ip + 4..ip + 6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
    } else {
        frame[ip + 2..ip + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        frame[ip + 10..ip + 12].fill(0);
        let sum = !checksum::data(&frame[ip..head.tcp]);
        frame[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    }
    frame[head.tcp + 16..head.tcp + 18].fill(0);
    let tcp_len = frame.len() - head.tcp;
    let pseudo = pseudo_header(frame, head, tcp_len);
    let header = checksum::data(&frame[head.tcp..head.payload]);
    let sum = !checksum::combine(&[pseudo, header, payload_sum]);
    frame[head.tcp + 16..head.tcp + 18].copy_from_slice(&sum.to_be_bytes());
}

/// [`plan`] and [`merge`] in one: the frames of the batch with every train joined,
/// in order.
pub fn coalesce(framing: Framing, frames: &[&[u8]], checksums: Checksums) -> Vec<Vec<u8>> {
    plan(framing, frames, checksums)
        .into_iter()
        .map(|run| {
            let len = merged_len(framing, frames, &run).unwrap_or(0);
            let mut out = vec![0; len.max(frames[run[0]].len())];
            let n = merge(framing, frames, &run, &mut out).unwrap_or(0);
            out.truncate(n);
            out
        })
        .collect()
}

/// Cut `frame`, one TCP segment whose IP packet is longer than `mtu` (the IP MTU),
/// into frames whose IP packets are at most `mtu` long, as Linux's GSO does: each
/// with the original headers, the sequence number advanced, the IPv4 identification
/// incremented, the lengths and checksums recomputed, FIN and PSH only on the last
/// and CWR only on the first. `None` when there is nothing to cut (the frame fits, it
/// is not a plain TCP segment, or its headers leave no room for payload in `mtu`):
/// send it as it is.
pub fn segment(framing: Framing, frame: &[u8], mtu: usize) -> Option<Vec<Vec<u8>>> {
    let seg = parse(framing, frame)?;
    if seg.end - seg.ip <= mtu || seg.flags & (SYN | RST | URG) != 0 {
        return None;
    }
    let mss = mtu.checked_sub(seg.payload - seg.ip).filter(|&m| m > 0)?;
    let payload = &frame[seg.payload..seg.end];
    let count = payload.len().div_ceil(mss);
    let mut out = Vec::with_capacity(count);
    for (n, piece) in payload.chunks(mss).enumerate() {
        let mut cut = Vec::with_capacity(seg.payload + piece.len());
        cut.extend_from_slice(&frame[..seg.payload]);
        cut.resize(seg.payload + piece.len(), 0);
        let sum = checksum::copy_and_sum(&mut cut[seg.payload..], piece);
        let seq = seg.seq.wrapping_add((n * mss) as u32);
        cut[seg.tcp + 4..seg.tcp + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = seg.flags;
        if n + 1 < count {
            flags &= !(FIN | PSH);
        }
        if n > 0 {
            flags &= !CWR;
        }
        cut[seg.tcp + 13] = flags;
        if !seg.v6 {
            let ident = seg.ident.wrapping_add(n as u16);
            cut[seg.ip + 4..seg.ip + 6].copy_from_slice(&ident.to_be_bytes());
        }
        finish_headers(&mut cut, &seg, sum);
        out.push(cut);
    }
    Some(out)
}

/// How one TCP frame larger than a wire frame goes onto a wire in segments of
/// `gso_size` payload bytes (a virtio-net GSO frame, Linux's `gso_size`): what
/// [`wire_frames`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireFrames {
    /// Frames on the wire (at least 2).
    pub count: usize,
    /// Bytes in front of the payload in each frame (link, IP and TCP headers).
    pub header_len: usize,
    /// Length of the longest frame (the first: headers and `gso_size` bytes).
    pub largest: usize,
    /// Bytes of all the frames together: the payload plus one header per frame.
    pub wire_bytes: usize,
    /// The IP MTU at which [`segment`] cuts the frame into exactly these frames.
    pub ip_mtu: usize,
}

/// The wire frames `frame` stands for when cut every `gso_size` payload bytes, as
/// the kernel's GSO (and [`segment`] at [`WireFrames::ip_mtu`]) would cut it. `None`
/// when it is not a plain TCP segment [`segment`] cuts (SYN, RST or URG set, not
/// IPv4 without options or IPv6 without extension headers), `gso_size` is 0, or its
/// payload fits in one frame: then it is one frame as it is.
pub fn wire_frames(framing: Framing, frame: &[u8], gso_size: u16) -> Option<WireFrames> {
    let seg = parse(framing, frame)?;
    let gso = usize::from(gso_size);
    let payload = seg.payload_len();
    if gso == 0 || payload <= gso || seg.flags & (SYN | RST | URG) != 0 {
        return None;
    }
    let count = payload.div_ceil(gso);
    Some(WireFrames {
        count,
        header_len: seg.payload,
        largest: seg.payload + gso,
        wire_bytes: payload + count * seg.payload,
        ip_mtu: seg.payload - seg.ip + gso,
    })
}

#[cfg(test)]
pub(crate) mod tests;
