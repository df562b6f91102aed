//! Writing one TCP segment into a buffer: a connection's (`Conn::poll_transmit`), a
//! SYN cookie's SYN-ACK, or a RST for no live connection; and the timestamp clock.

use core::net::{IpAddr, SocketAddr};

use impnet_wire::checksum::PseudoHeader;
use impnet_wire::tcp::{Flags, Options, Packet, PlainHeader, Repr};

use super::buffer::{Slices, copy_bytes};
use super::seq::SeqNumber;
use crate::time::Instant;

/// A RST that belongs to no live connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reset {
    /// Our address (source of the RST).
    pub local: SocketAddr,
    /// The peer.
    pub remote: SocketAddr,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number, when the ACK bit is set.
    pub ack: Option<u32>,
    /// (TSval, TSecr) when the connection negotiated timestamps: RFC 7323 §3.2, "the
    /// TSopt ... SHOULD be sent in an <RST> segment" (§5.2: so a peer's PAWS check
    /// does not drop it).
    pub timestamps: Option<(u32, u32)>,
}

/// SEG.LEN: payload plus one for SYN and one for FIN.
pub(crate) fn seg_len(seg: &Repr<'_>) -> usize {
    seg.payload.len() + usize::from(seg.flags.syn()) + usize::from(seg.flags.fin())
}

impl Reset {
    /// RFC 9293 §3.10.7.1: "If the ACK bit is off, sequence number zero is used,
    /// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. If the ACK bit is on,
    /// <SEQ=SEG.ACK><CTL=RST>".
    pub fn for_segment(local: SocketAddr, remote: SocketAddr, seg: &Repr<'_>) -> Reset {
        if seg.flags.ack() {
            Reset {
                local,
                remote,
                seq: seg.ack,
                ack: None,
                timestamps: None,
            }
        } else {
            let ack = SeqNumber(seg.seq) + seg_len(seg);
            Reset {
                local,
                remote,
                seq: 0,
                ack: Some(ack.0),
                timestamps: None,
            }
        }
    }

    /// Write the RST into `buf` (the checksum computed when `checksum`).
    pub fn write(&self, buf: &mut [u8], checksum: bool) -> Option<usize> {
        let repr = Repr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: self.seq,
            ack: self.ack.unwrap_or(0),
            flags: if self.ack.is_some() {
                Flags::RST | Flags::ACK
            } else {
                Flags::RST
            },
            options: Options {
                timestamps: self.timestamps,
                ..Options::default()
            },
            ..Repr::default()
        };
        let fill = if checksum {
            Fill::Checksum
        } else {
            Fill::Partial
        };
        write_segment(
            &repr,
            Slices::empty(),
            (self.local.ip(), self.remote.ip()),
            buf,
            fill,
        )
    }
}

/// Write `repr`'s header (its own payload is ignored) followed by `payload` (a range
/// of the send buffer) into `buf`, with the checksum over the IPv4 pseudo-header or only
/// the pseudo-header sum (for a device that completes it), as `fill` says; None when
/// `buf` is too small (which must hold the payload even when it is not copied).
pub(crate) fn write_segment(
    repr: &Repr<'_>,
    payload: Slices<'_>,
    (src, dst): (IpAddr, IpAddr),
    buf: &mut [u8],
    fill: Fill,
) -> Option<usize> {
    let header = Repr {
        payload: &[],
        ..*repr
    };
    let header_len = header.header_len();
    let total = header_len + payload.len();
    if buf.len() < total {
        return None;
    }
    let mut packet = Packet::new_unchecked(&mut buf[..header_len]);
    header.emit(&mut packet, &src, &dst, false);
    Some(finish_segment(
        &mut buf[..total],
        header_len,
        payload,
        (src, dst),
        fill,
    ))
}

/// As [`write_segment`] for a segment [`PlainHeader`] describes (no SYN, no SACK
/// blocks): the same bytes, without building a `Repr` (`tests_predict` compares the
/// two paths).
pub(crate) fn write_plain_segment(
    header: &PlainHeader,
    payload: Slices<'_>,
    ends: (IpAddr, IpAddr),
    buf: &mut [u8],
    fill: Fill,
) -> Option<usize> {
    let header_len = header.header_len();
    let total = header_len + payload.len();
    if buf.len() < total {
        return None;
    }
    header.emit(buf);
    Some(finish_segment(
        &mut buf[..total],
        header_len,
        payload,
        ends,
        fill,
    ))
}

/// How a segment's payload and checksum are filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Payload copied, checksum computed.
    Checksum,
    /// Payload copied, the checksum field holding the pseudo-header sum (the device
    /// completes it).
    Partial,
    /// As `Partial`, but the payload is not copied: it stays in the send buffer, where
    /// the driver takes it from (`Tcp::deferred_payload`).
    Deferred,
}

/// Copy the payload behind the header already in `segment` (unless deferred) and fill
/// the checksum field (or only the pseudo-header sum when the device completes it);
/// returns the length.
#[inline]
fn finish_segment(
    segment: &mut [u8],
    header_len: usize,
    payload: Slices<'_>,
    (src, dst): (IpAddr, IpAddr),
    fill: Fill,
) -> usize {
    let total = segment.len();
    if fill != Fill::Deferred {
        let mut at = header_len;
        for piece in payload {
            copy_bytes(&mut segment[at..at + piece.len()], piece);
            at += piece.len();
        }
    }
    let mut packet = Packet::new_unchecked(segment);
    if fill == Fill::Checksum {
        // Copy, then sum: measured faster than the checksum folded into the copy
        // (`checksum::copy_and_sum`) on data in cache, where memcpy is several times
        // the speed of the sum (impnet-wire's `checksum` bench).
        packet.fill_checksum(&src, &dst);
    } else {
        packet.set_checksum(src.pseudo_header(&dst, 6, total as u32));
    }
    total
}

/// TSval for `now` (RFC 7323 §5.4: a clock tick of 1 ms).
pub(crate) fn tsval(now: Instant) -> u32 {
    now.as_millis() as u32
}
