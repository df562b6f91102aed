//! What forwarding keeps of a device's offloads (`RxOffload`): a large TCP segment
//! (GSO/GRO, virtio-net `gso_size`) leaves whole where the next link takes TSO, and is
//! cut here at the sender's segment size where it does not (software GSO, as Linux's
//! `validate_xmit_skb` does for a device without TSO); a partial checksum (virtio-net
//! `NEEDS_CSUM`) stays partial where the outgoing device completes checksums, and is
//! completed here where it does not. A Linux bridge or router over veth does the same:
//! the segment crosses it once, not once per MTU-sized piece.

use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr};

use impnet_wire::checksum;
use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4;

use crate::iface::IfaceId;
use crate::neighbor::Origin;
use crate::stack::ip::OutputError;
use crate::stack::{Outgoing, Stack};
use crate::time::Instant;

/// TCP flag bits a segment cut from a larger one keeps only first (CWR) or only last
/// (FIN, PSH), as Linux's `tcp_gso_segment`.
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// The segment size a forwarded IPv4 datagram larger than `mtu` may leave with whole:
/// `packet` (the datagram) is an unfragmented TCP segment that came with a segment size
/// (`gso_size`), and each of the segments it stands for, with its headers, fits `mtu`.
/// None otherwise (RFC 1191: it is then too big for the next hop as any other datagram
/// is).
pub(crate) fn gso_fits(packet: &[u8], gso_size: Option<u16>, mtu: usize) -> Option<u16> {
    let gso_size = gso_size?;
    let view = ipv4::Packet::new_checked(packet).ok()?;
    if usize::from(view.total_len()) <= mtu {
        return None;
    }
    if view.protocol() != ipv4::Protocol::Tcp || view.more_frags() || view.frag_offset() != 0 {
        return None;
    }
    let tcp = view.header_len();
    let data_offset = usize::from(*packet.get(tcp + 12)? >> 4) * 4;
    let headers = tcp + data_offset;
    let fits = gso_size != 0
        && data_offset >= 20
        && headers <= usize::from(view.total_len())
        && headers + usize::from(gso_size) <= mtu;
    fits.then_some(gso_size)
}

/// The TCP or UDP checksum of an IP packet (IPv4 unfragmented, or IPv6 with the
/// transport header right after the fixed one): (where the transport header starts,
/// where its checksum field is, the pseudo-header sum, UDP). None for anything else.
fn transport_checksum(packet: &[u8]) -> Option<(usize, usize, u16, bool)> {
    let (start, protocol, pseudo) = match packet.first()? >> 4 {
        4 => {
            let view = ipv4::Packet::new_checked(packet).ok()?;
            if view.more_frags() || view.frag_offset() != 0 {
                return None;
            }
            let start = view.header_len();
            let len = usize::from(view.total_len()).checked_sub(start)?;
            let protocol = u8::from(view.protocol());
            let (src, dst) = (view.src_addr(), view.dst_addr());
            (
                start,
                protocol,
                checksum::pseudo_header_v4(&src, &dst, protocol, len as u32),
            )
        }
        6 if packet.len() >= 40 => {
            let address = |at: usize| {
                let mut octets = [0; 16];
                octets.copy_from_slice(&packet[at..at + 16]);
                Ipv6Addr::from(octets)
            };
            let len = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            let protocol = packet[6];
            let (src, dst) = (address(8), address(24));
            (
                40,
                protocol,
                checksum::pseudo_header_v6(&src, &dst, protocol, len as u32),
            )
        }
        _ => return None,
    };
    let field = start
        + match protocol {
            6 => 16,
            17 => 6,
            _ => return None,
        };
    (field + 2 <= packet.len()).then_some((start, field, pseudo, protocol == 17))
}

/// Make a forwarded packet's TCP or UDP checksum what its way out expects: the
/// pseudo-header sum alone where the outgoing device completes checksums
/// (`egress_completes`, `Offloads::tx_checksum`), the whole checksum elsewhere.
/// `partial`: the field holds the pseudo-header sum now (it arrived so). Only a
/// partial checksum made whole costs a pass over the data; the other way is the
/// pseudo-header's few words.
#[inline]
pub(crate) fn egress_checksum(packet: &mut [u8], partial: bool, egress_completes: bool) {
    // The common case (a whole checksum to a device that completes none) costs a test.
    if partial != egress_completes {
        convert_checksum(packet, egress_completes);
    }
}

/// [`egress_checksum`]'s work: partial to whole, or whole to the pseudo-header sum.
#[inline(never)]
fn convert_checksum(packet: &mut [u8], egress_completes: bool) {
    let Some((start, field, pseudo, udp)) = transport_checksum(packet) else {
        return;
    };
    if egress_completes {
        packet[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
        return;
    }
    // Virtio 1.x §5.1.6.2.1: with the pseudo-header sum in the field, the checksum
    // is the ones complement of the sum from the transport header to the end.
    let mut value = checksum::finish(checksum::data(&packet[start..]));
    if udp && value == 0 {
        // RFC 768: a computed zero is sent as all ones (zero means none).
        value = 0xffff;
    }
    packet[field..field + 2].copy_from_slice(&value.to_be_bytes());
}

impl Stack {
    /// Send a forwarded IPv4 datagram (TTL and options done) out of `out` (an
    /// interface and next hop) with route MTU `mtu`: a large TCP segment of segment
    /// size `gso` whole where the next device cuts it (it takes TSO and partial
    /// checksums, which every such segment has) or cut here; else as it is, or in
    /// fragments when larger than `mtu` (DF clear: step 4 turned the others away).
    /// `partial`: its checksum arrived partial.
    #[inline]
    pub(crate) fn forward_out(
        &mut self,
        now: Instant,
        (out, next_hop): (IfaceId, Ipv4Addr),
        mut packet: Vec<u8>,
        mtu: usize,
        gso: Option<u16>,
        partial: bool,
    ) -> Result<(), OutputError> {
        let egress = self.ifaces[out.index()].offloads;
        let total = packet.len();
        if let Some(gso_size) = gso {
            if egress.tx_checksum && egress.tso_max.is_some_and(|max| total <= max) {
                return self.dispatch_gso(now, out, next_hop, packet, gso_size);
            }
            let completes = egress.tx_checksum;
            return self.forward_segments(now, out, next_hop, packet, gso_size, completes);
        }
        if total > mtu {
            // Fragments carry whole checksums: no device sums a datagram in pieces.
            egress_checksum(&mut packet, partial, false);
            return self.forward_fragments(now, out, next_hop, packet, mtu);
        }
        egress_checksum(&mut packet, partial, egress.tx_checksum);
        self.dispatch(now, out, next_hop, packet, Origin::Forwarded)
    }

    /// Hand a forwarded IPv4 TCP segment larger than the MTU to `iface` whole, to be
    /// cut into segments of `gso_size` payload bytes by its device
    /// ([`Stack::transmit_gso_size`]), when the next hop's MAC is known now; else cut
    /// here (a packet waiting for ARP waits as ordinary segments).
    pub(crate) fn dispatch_gso(
        &mut self,
        now: Instant,
        iface: IfaceId,
        next_hop: Ipv4Addr,
        packet: Vec<u8>,
        gso_size: u16,
    ) -> Result<(), OutputError> {
        let ip_level = self
            .ifaces
            .get(iface.index())
            .is_some_and(|i| i.is_ip_level());
        let mac = if ip_level {
            Some(ethernet::Address::BROADCAST)
        } else {
            self.cached_next_hop(now, iface, next_hop).or_else(|| {
                self.neighbors
                    .lookup_until(now, iface, next_hop)
                    .map(|(mac, _)| mac)
            })
        };
        let Some(dst_mac) = mac else {
            let completes = self
                .ifaces
                .get(iface.index())
                .is_some_and(|i| i.offloads.tx_checksum);
            return self.forward_segments(now, iface, next_hop, packet, gso_size, completes);
        };
        self.stats.ipv4.tx_packets += 1;
        self.enqueue_frame(Outgoing {
            iface,
            dst_mac,
            ethertype: EtherType::Ipv4,
            payload: packet,
            gso_size,
        })
    }

    /// Cut a forwarded IPv4 TCP segment (checked by [`gso_fits`]) into segments of
    /// `gso_size` payload bytes and dispatch each, as a device's GSO would (Linux
    /// `tcp_gso_segment`): the headers copied, sequence numbers advanced, the IPv4
    /// identification stepping by one, FIN and PSH only on the last, CWR only on the
    /// first, lengths and checksums set (the TCP checksum partial when
    /// `egress_completes`, whole otherwise: the arriving one, partial or not, is not
    /// used).
    pub(crate) fn forward_segments(
        &mut self,
        now: Instant,
        out: IfaceId,
        next_hop: Ipv4Addr,
        packet: Vec<u8>,
        gso_size: u16,
        egress_completes: bool,
    ) -> Result<(), OutputError> {
        let view = ipv4::Packet::new_unchecked(&packet[..]);
        let tcp = view.header_len();
        let (src, dst, ident) = (view.src_addr(), view.dst_addr(), view.ident());
        let headers = tcp + usize::from(packet[tcp + 12] >> 4) * 4;
        let seq = u32::from_be_bytes([
            packet[tcp + 4],
            packet[tcp + 5],
            packet[tcp + 6],
            packet[tcp + 7],
        ]);
        let flags = packet[tcp + 13];
        let size = usize::from(gso_size);
        let payload = &packet[headers..];
        let count = payload.len().div_ceil(size).max(1);
        let mut result = Ok(());
        for index in 0..count {
            let chunk = &payload
                [(index * size).min(payload.len())..((index + 1) * size).min(payload.len())];
            let mut segment = self.pool.take();
            segment.extend_from_slice(&packet[..headers]);
            segment.extend_from_slice(chunk);
            let mut kept = flags;
            if index + 1 < count {
                kept &= !(FIN | PSH);
            }
            if index > 0 {
                kept &= !CWR;
            }
            segment[tcp + 13] = kept;
            let seq = seq.wrapping_add((index * size) as u32);
            segment[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
            let len = segment.len();
            let mut ip = ipv4::Packet::new_unchecked(&mut segment[..]);
            ip.set_total_len(len as u16);
            ip.set_ident(ident.wrapping_add(index as u16));
            ip.fill_checksum();
            let pseudo = checksum::pseudo_header_v4(&src, &dst, 6, (len - tcp) as u32);
            segment[tcp + 16..tcp + 18].copy_from_slice(&pseudo.to_be_bytes());
            if !egress_completes {
                let sum = checksum::finish(checksum::data(&segment[tcp..]));
                segment[tcp + 16..tcp + 18].copy_from_slice(&sum.to_be_bytes());
            }
            result = result.and(self.dispatch(now, out, next_hop, segment, Origin::Forwarded));
        }
        self.pool.give(packet);
        result
    }
}
