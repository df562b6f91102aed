//! Frames made by hand, for tests and tools that put traffic on a link that no stack
//! sent ([`crate::Sim::inject`]): spoofed sources, floods, blind attacks, malformed
//! packets. Every length is computed from the `Repr`s, and the checksums are right,
//! so what a frame carries is exactly what its builder asked for.

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::ipv4::{self, Protocol};
use impnet_wire::{ethernet, tcp};

/// An IPv4 header with nothing special: TTL 64, DF set, identification 0, no options.
pub fn ip_repr(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    len: usize,
) -> ipv4::Repr<'static> {
    ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol,
        payload_len: len,
        ttl: 64,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    }
}

/// The Ethernet header (`macs`: source, destination) and the IPv4 header `ip` around a
/// payload of `ip.payload_len` bytes, which `write_payload` fills.
pub fn ip_frame(
    macs: (ethernet::Address, ethernet::Address),
    ip: &ipv4::Repr<'_>,
    write_payload: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let eth = ethernet::Repr {
        src: macs.0,
        dst: macs.1,
        ethertype: ethernet::EtherType::Ipv4,
        vlan: None,
    };
    let mut frame = vec![0u8; ethernet::HEADER_LEN + ip.buffer_len()];
    eth.emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
    let mut packet = ipv4::Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
    ip.emit(&mut packet);
    let header = ip.header_len();
    write_payload(&mut frame[ethernet::HEADER_LEN + header..]);
    frame
}

/// `segment` from `src` to `dst` (its ports replaced by theirs) in a frame, the IPv4
/// header as [`ip_repr`] makes it with identification `ident`.
pub fn tcp_frame(
    macs: (ethernet::Address, ethernet::Address),
    (src, dst): (SocketAddrV4, SocketAddrV4),
    segment: &tcp::Repr<'_>,
    ident: u16,
) -> Vec<u8> {
    let segment = tcp::Repr {
        src_port: src.port(),
        dst_port: dst.port(),
        ..*segment
    };
    let ip = ipv4::Repr {
        ident,
        ..ip_repr(*src.ip(), *dst.ip(), Protocol::Tcp, segment.buffer_len())
    };
    ip_frame(macs, &ip, |bytes| {
        segment.emit(
            &mut tcp::Packet::new_unchecked(bytes),
            src.ip(),
            dst.ip(),
            true,
        );
    })
}
