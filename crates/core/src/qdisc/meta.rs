//! What a discipline needs to know about a packet without parsing it: its flow and
//! where its IP header (IPv4 or IPv6) is, for ECN marking.

use impnet_wire::{checksum, ethernet, ipv4, ipv6, ipv6ext};

use crate::siphash::siphash24;

/// The ECN codepoints (RFC 3168 §5): Not-ECT, ECT(1), ECT(0), CE.
const ECN_NOT_ECT: u8 = 0b00;
const ECN_CE: u8 = 0b11;

/// What the caller tells a [`Qdisc`](super::Qdisc) about a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketMeta {
    /// The flow the packet belongs to (FQ-CoDel's queue is chosen from it); 0 for
    /// packets of no particular flow.
    pub flow_hash: u32,
    /// Where the packet's IP header (IPv4 or IPv6: its version nibble says) starts
    /// within its bytes (0 for a bare IP packet, 14 for an untagged Ethernet frame),
    /// or `None` if it carries no IP header: such a packet is never CE-marked.
    pub ip_offset: Option<usize>,
}

impl PacketMeta {
    /// A packet that is not IP (never marked), in flow `flow_hash`.
    pub const fn opaque(flow_hash: u32) -> PacketMeta {
        PacketMeta {
            flow_hash,
            ip_offset: None,
        }
    }

    /// The meta of a bare IP packet (IPv4 or IPv6, as on a TUN or any IP-level
    /// link): its 5-tuple hash under `key` ([`flow_hash_ipv4`], [`flow_hash_ipv6`]).
    /// Bytes that are not a valid IP header give hash 0 and no header offset.
    pub fn ip(packet: &[u8], key: u64) -> PacketMeta {
        PacketMeta::at_offset(packet, 0, key)
    }

    /// The meta of a bare IPv4 packet; the same as [`PacketMeta::ip`].
    pub fn ipv4(packet: &[u8], key: u64) -> PacketMeta {
        PacketMeta::ip(packet, key)
    }

    /// The meta of an Ethernet frame: an untagged frame with EtherType IPv4 or IPv6
    /// has its header at offset 14 and is hashed by 5-tuple; any other frame is
    /// opaque, hash 0.
    pub fn ethernet(frame: &[u8], key: u64) -> PacketMeta {
        match frame.get(12..14) {
            Some([0x08, 0x00] | [0x86, 0xdd]) => {
                PacketMeta::at_offset(frame, ethernet::HEADER_LEN, key)
            }
            _ => PacketMeta::opaque(0),
        }
    }

    /// The meta of bytes whose IP header starts at `offset` (the family from its
    /// version nibble).
    pub fn at_offset(bytes: &[u8], offset: usize, key: u64) -> PacketMeta {
        let Some(ip) = bytes.get(offset..) else {
            return PacketMeta::opaque(0);
        };
        let hash = match ip.first().map(|b| b >> 4) {
            Some(4) => flow_hash_ipv4(ip, key),
            Some(6) => flow_hash_ipv6(ip, key),
            _ => None,
        };
        match hash {
            Some(flow_hash) => PacketMeta {
                flow_hash,
                ip_offset: Some(offset),
            },
            None => PacketMeta::opaque(0),
        }
    }
}

/// A keyed hash (SipHash-2-4) of an IPv4 packet's 5-tuple: addresses, protocol, and for
/// TCP and UDP the ports (absent in non-first fragments, which then hash with their
/// addresses and protocol only, as Linux's flow dissector does). `key` is the
/// perturbation: give each queue its own secret so that senders cannot aim at a
/// queue. `None` if the bytes are not a valid IPv4 header.
pub fn flow_hash_ipv4(packet: &[u8], key: u64) -> Option<u32> {
    let ip = ipv4::Packet::new_checked(packet).ok()?;
    let mut tuple = [0u8; 13];
    tuple[0..4].copy_from_slice(&ip.src_addr().octets());
    tuple[4..8].copy_from_slice(&ip.dst_addr().octets());
    let protocol = ip.protocol();
    tuple[8] = u8::from(protocol);
    let has_ports =
        matches!(protocol, ipv4::Protocol::Tcp | ipv4::Protocol::Udp) && ip.frag_offset() == 0;
    if has_ports && let Some(ports) = ip.payload().get(0..4) {
        tuple[9..13].copy_from_slice(ports);
    }
    let hash = siphash24(key, key.rotate_left(32) ^ 0x5163_6469_7363, &tuple);
    Some((hash ^ (hash >> 32)) as u32)
}

/// A keyed hash (SipHash-2-4) of an IPv6 packet's 5-tuple: addresses, the upper-layer
/// protocol after the extension headers, and for TCP and UDP the ports (absent in
/// non-first fragments). `None` if the bytes are not a valid IPv6 header or its
/// extension header chain does not walk.
pub fn flow_hash_ipv6(packet: &[u8], key: u64) -> Option<u32> {
    let ip = ipv6::Packet::new_checked(packet).ok()?;
    let bytes = ip.packet();
    let walk = ipv6ext::walk(bytes).ok()?;
    let mut tuple = [0u8; 37];
    tuple[0..16].copy_from_slice(&ip.src_addr().octets());
    tuple[16..32].copy_from_slice(&ip.dst_addr().octets());
    let protocol = u8::from(walk.protocol);
    tuple[32] = protocol;
    let first = walk.fragment.is_none_or(|(_, f)| f.frag_offset == 0);
    if first
        && matches!(protocol, ipv6::protocol::TCP | ipv6::protocol::UDP)
        && let Some(ports) = bytes.get(walk.offset..walk.offset + 4)
    {
        tuple[33..37].copy_from_slice(ports);
    }
    let hash = siphash24(key, key.rotate_left(32) ^ 0x5163_6469_7363, &tuple);
    Some((hash ^ (hash >> 32)) as u32)
}

/// Marks the IP header at `ip_offset` in `packet` Congestion Experienced if the packet
/// is ECN-capable: IPv4's with its header checksum patched incrementally (RFC 1624),
/// IPv6's in the traffic class (no checksum; RFC 3168 §5 and §9). Returns whether it
/// is ECN-capable (ECT(0), ECT(1), or already CE): then CoDel marks instead of
/// dropping (RFC 8289 §5, RFC 3168 §5). A missing or malformed header is not
/// ECN-capable.
pub fn mark_ce(packet: &mut [u8], ip_offset: usize) -> bool {
    let Some(bytes) = packet.get_mut(ip_offset..) else {
        return false;
    };
    if bytes.first().is_some_and(|b| b >> 4 == 6) {
        let Ok(mut ip) = ipv6::Packet::new_checked(bytes) else {
            return false;
        };
        let ecn = ip.ecn();
        if ecn == ECN_NOT_ECT {
            return false;
        }
        ip.set_ecn(ECN_CE);
        return true;
    }
    let Ok(mut ip) = ipv4::Packet::new_checked(bytes) else {
        return false;
    };
    let ecn = ip.ecn();
    if ecn == ECN_NOT_ECT {
        return false;
    }
    if ecn != ECN_CE {
        let first = ip.version() << 4 | (ip.header_len() / 4) as u8;
        let old_word = u16::from_be_bytes([first, ip.dscp() << 2 | ecn]);
        let new_word = u16::from_be_bytes([first, ip.dscp() << 2 | ECN_CE]);
        let sum = checksum::update(ip.checksum(), old_word, new_word);
        ip.set_ecn(ECN_CE);
        ip.set_checksum(sum);
    }
    true
}
