//! What a discipline needs to know about a packet without parsing it: its flow and
//! where its IPv4 header is (for ECN marking).

use impnet_wire::{checksum, ethernet, ipv4};

use crate::tcp::isn::siphash24;

/// The ECN codepoints (RFC 3168 §5): Not-ECT, ECT(1), ECT(0), CE.
const ECN_NOT_ECT: u8 = 0b00;
const ECN_CE: u8 = 0b11;

/// What the caller tells a [`Qdisc`](super::Qdisc) about a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketMeta {
    /// The flow the packet belongs to (FQ-CoDel's queue is chosen from it); 0 for
    /// packets of no particular flow.
    pub flow_hash: u32,
    /// Where the packet's IPv4 header starts within its bytes (0 for a bare IPv4
    /// packet, 14 for an untagged Ethernet frame), or `None` if it carries no IPv4
    /// header: such a packet is never CE-marked.
    pub ipv4_offset: Option<usize>,
}

impl PacketMeta {
    /// A packet that is not IPv4 (never marked), in flow `flow_hash`.
    pub const fn opaque(flow_hash: u32) -> PacketMeta {
        PacketMeta {
            flow_hash,
            ipv4_offset: None,
        }
    }

    /// The meta of a bare IPv4 packet: its 5-tuple hash under `key`
    /// ([`flow_hash_ipv4`]). Bytes that are not a valid IPv4 header give hash 0 and no
    /// header offset.
    pub fn ipv4(packet: &[u8], key: u64) -> PacketMeta {
        PacketMeta::at_offset(packet, 0, key)
    }

    /// The meta of an Ethernet frame: an untagged frame with EtherType IPv4 has its
    /// header at offset 14 and is hashed by 5-tuple; any other frame is opaque, hash 0.
    pub fn ethernet(frame: &[u8], key: u64) -> PacketMeta {
        let ethertype = frame.get(12..14);
        if ethertype != Some(&[0x08, 0x00][..]) {
            return PacketMeta::opaque(0);
        }
        PacketMeta::at_offset(frame, ethernet::HEADER_LEN, key)
    }

    /// The meta of bytes whose IPv4 header starts at `offset`.
    pub fn at_offset(bytes: &[u8], offset: usize, key: u64) -> PacketMeta {
        let Some(ip) = bytes.get(offset..) else {
            return PacketMeta::opaque(0);
        };
        match flow_hash_ipv4(ip, key) {
            Some(flow_hash) => PacketMeta {
                flow_hash,
                ipv4_offset: Some(offset),
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

/// Marks the IPv4 header at `ipv4_offset` in `packet` Congestion Experienced, patching
/// the header checksum incrementally (RFC 1624), if the packet is ECN-capable. Returns
/// whether it is (ECT(0), ECT(1), or already CE): then CoDel marks instead of dropping
/// (RFC 8289 §5, RFC 3168 §5). A missing or malformed header is not ECN-capable.
pub fn mark_ce(packet: &mut [u8], ipv4_offset: usize) -> bool {
    let Some(bytes) = packet.get_mut(ipv4_offset..) else {
        return false;
    };
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
