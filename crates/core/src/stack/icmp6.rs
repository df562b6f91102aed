//! ICMPv6 for the sockets: echo requests from an echo socket to an IPv6 address, the
//! replies queued to it, and received ICMPv6 errors handed to the socket whose packet
//! they quote (UDP, echo, TCP), as `stack/icmp.rs` does for IPv4.

use alloc::collections::VecDeque;
use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

use impnet_wire::icmpv6::{self, DstUnreachable};
use impnet_wire::ipv6::{self, NextHeader};

use crate::icmp::{IcmpError, IcmpHandle};
use crate::ip_options::IpOptions;
use crate::neighbor::{Origin, Pending, SocketKind};
use crate::stack::ip::Meta6;
use crate::stack::{Event, Stack};
use crate::tcp::{IcmpNotice, TcpError};
use crate::time::Instant;
use crate::udp::{UdpError, UdpHandle};

/// The most echo data one request carries: the IPv6 payload length (16 bits) less
/// the ICMPv6 header.
const MAX_ECHO6_DATA: usize = u16::MAX as usize - icmpv6::HEADER_LEN;

/// A received ICMPv6 error, as the sockets see it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Error6 {
    Unreachable(DstUnreachable),
    /// Packet Too Big with the next link's MTU.
    TooBig(u32),
    TimeExceeded,
    ParamProblem,
}

impl Stack {
    /// An echo request from the echo socket `handle` to an IPv6 address (RFC 4443
    /// §4.1), fragmented at the source if it does not fit the path MTU.
    pub(crate) fn icmp_send_echo6(
        &mut self,
        now: Instant,
        handle: IcmpHandle,
        dst: Ipv6Addr,
        seq_no: u16,
        payload: &[u8],
    ) -> Result<(), IcmpError> {
        let ident = self
            .icmp
            .sockets
            .get(handle.0)
            .ok_or(IcmpError::InvalidHandle)?
            .ident;
        if payload.len() > MAX_ECHO6_DATA {
            return Err(IcmpError::MessageTooLong);
        }
        if dst.is_unspecified() {
            return Err(IcmpError::NoRoute);
        }
        let route = self.route_output6(now, dst, None).inspect_err(|_| {
            self.stats.ipv6.tx_no_route += 1;
        })?;
        let repr = icmpv6::Repr::EchoRequest {
            ident,
            seq_no,
            data: payload,
        };
        let mut packet = self.pool.take();
        packet.resize(ipv6::HEADER_LEN + repr.buffer_len(), 0);
        repr.emit(
            &mut icmpv6::Packet::new_unchecked(&mut packet[ipv6::HEADER_LEN..]),
            &route.src,
            &dst,
        );
        self.stats.ipv6.icmp_tx += 1;
        let origin = Origin::Socket(SocketKind::Icmp, handle.0);
        self.send_ipv6_routed(now, &route, dst, (NextHeader::Icmpv6, None), packet, origin)?;
        self.stats.ipv6.echo_requests_sent += 1;
        Ok(())
    }

    /// An ICMPv6 echo reply: queued to the echo socket with its identifier, with the
    /// reply's hop limit in [`EchoReply::ttl`](crate::EchoReply::ttl).
    pub(crate) fn handle_echo_reply6(
        &mut self,
        meta: &Meta6<'_>,
        (ident, seq_no): (u16, u16),
        data: &[u8],
    ) {
        self.stats.ipv6.echo_replies_received += 1;
        let Some(&handle) = self.icmp.by_ident.get(&ident) else {
            self.stats.icmp.rx_no_socket += 1;
            return;
        };
        let Some(socket) = self.icmp.sockets.get_mut(handle.0) else {
            return;
        };
        let mut buffer = self.pool.take();
        buffer.extend_from_slice(data);
        let was_quiet = socket.error.is_none() && socket.queue.is_empty();
        let meta = (
            IpAddr::V6(meta.src),
            seq_no,
            meta.hop_limit,
            IpOptions::default(),
        );
        match socket.queue.push(meta, buffer) {
            Ok(()) if was_quiet => self.push_event(Event::Icmp(handle)),
            Ok(()) => {}
            Err(buffer) => {
                self.stats.icmp.rx_queue_full += 1;
                self.pool.give(buffer);
            }
        }
    }

    /// RFC 4443 §2.4 (d): an ICMPv6 error is passed "to the upper-layer process" that
    /// sent the packet it quotes: the UDP socket bound to its source (Linux's
    /// `IPV6_RECVERR`-less behaviour: the next call fails), the echo socket with its
    /// identifier, or the TCP connection of its 4-tuple (RFC 5461: soft errors but for
    /// port unreachable and prohibitions).
    pub(crate) fn handle_icmpv6_error(&mut self, now: Instant, error: Error6, invoking: &[u8]) {
        self.stats.ipv6.errors_received += 1;
        if let Error6::TooBig(mtu) = error {
            self.handle_packet_too_big(now, mtu, invoking);
        }
        let Some(quoted) = Quoted::parse(invoking) else {
            return;
        };
        if !self.v6.is_local(quoted.src) {
            return;
        }
        let t = quoted.transport;
        let local = SocketAddr::V6(SocketAddrV6::new(
            quoted.src,
            u16::from_be_bytes([t[0], t[1]]),
            0,
            0,
        ));
        let event = match quoted.protocol {
            NextHeader::Udp => self
                .udp
                .set_error_by_addr(local, udp_error(error))
                .map(Event::Udp),
            NextHeader::Icmpv6 if t[0] == u8::from(icmpv6::Message::EchoRequest) => {
                let ident = u16::from_be_bytes([t[4], t[5]]);
                let handle = self.icmp.by_ident.get(&ident).copied();
                handle
                    .filter(|&h| self.icmp.set_error(h, icmp_error(error)))
                    .map(Event::Icmp)
            }
            NextHeader::Tcp => {
                let remote = SocketAddr::V6(SocketAddrV6::new(
                    quoted.dst,
                    u16::from_be_bytes([t[2], t[3]]),
                    0,
                    0,
                ));
                let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
                self.tcp
                    .handle_icmp(now, local, remote, seq, tcp_notice(error));
                return;
            }
            _ => return,
        };
        if let Some(event) = event {
            self.stats.ipv6.errors_to_sockets += 1;
            self.push_event(event);
        }
    }

    /// Neighbour discovery for `addr` on `iface` failed: the packets that waited are
    /// dropped, and a UDP or echo socket that sent one hears `HostUnreachable` (RFC
    /// 4861 §7.2.2: "the sender SHOULD be informed", as ARP's failure does).
    pub(crate) fn on_neighbor6_failed(&mut self, now: Instant, dropped: VecDeque<Pending>) {
        for pending in dropped {
            self.stats.ipv6.tx_unresolved += 1;
            let event = match pending.origin {
                Origin::Socket(SocketKind::Udp, slot) => {
                    let handle = UdpHandle(slot);
                    self.udp
                        .set_error_by_handle(handle, UdpError::HostUnreachable)
                        .then_some(Event::Udp(handle))
                }
                Origin::Socket(SocketKind::Icmp, slot) => {
                    let handle = IcmpHandle(slot);
                    self.icmp
                        .set_error(handle, IcmpError::HostUnreachable)
                        .then_some(Event::Icmp(handle))
                }
                Origin::Forwarded => {
                    self.forward_unresolved6(now, &pending.packet);
                    None
                }
                Origin::Stack | Origin::Tcp | Origin::Socket(SocketKind::Raw, _) => None,
            };
            if let Some(event) = event {
                self.push_event(event);
            }
            self.pool.give(pending.packet);
        }
    }
}

/// The part of a quoted packet that names its socket.
struct Quoted<'a> {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    protocol: NextHeader,
    /// The first 8 bytes of the upper-layer header.
    transport: &'a [u8],
}

impl<'a> Quoted<'a> {
    /// The quote's addresses and upper-layer header (None when the quote is too short
    /// or not a first fragment: a later fragment names no port).
    fn parse(invoking: &'a [u8]) -> Option<Quoted<'a>> {
        if invoking.len() < ipv6::HEADER_LEN + 8 {
            return None;
        }
        let header = ipv6::Packet::new_unchecked(invoking);
        let walk = impnet_wire::ipv6ext::walk(invoking).ok()?;
        if walk.fragment.is_some_and(|(_, f)| f.frag_offset != 0) {
            return None;
        }
        Some(Quoted {
            src: header.src_addr(),
            dst: header.dst_addr(),
            protocol: walk.protocol,
            transport: invoking.get(walk.offset..walk.offset + 8)?,
        })
    }
}

/// What an ICMPv6 error means to TCP (RFC 5461 §4.1; as `tcp_notice` for IPv4): port
/// unreachable and prohibitions are hard errors, the rest soft.
/// A Packet Too Big lowers the connection's MSS to MTU - 60: TCP's notice counts an
/// IPv4 header of 20 bytes, so it is given the MTU less 20.
fn tcp_notice(error: Error6) -> IcmpNotice {
    match error {
        Error6::TooBig(mtu) => {
            let mtu = usize::try_from(mtu)
                .unwrap_or(usize::MAX)
                .max(ipv6::MIN_MTU);
            IcmpNotice::PacketTooBig {
                mtu: u16::try_from(mtu - 20).unwrap_or(u16::MAX),
            }
        }
        Error6::Unreachable(DstUnreachable::PortUnreachable) => {
            IcmpNotice::Hard(TcpError::ConnectionRefused)
        }
        Error6::Unreachable(DstUnreachable::AdminProhibited | DstUnreachable::FailedPolicy) => {
            IcmpNotice::Hard(TcpError::Prohibited)
        }
        Error6::Unreachable(DstUnreachable::NoRoute | DstUnreachable::RejectRoute) => {
            IcmpNotice::Soft(TcpError::NetUnreachable)
        }
        Error6::Unreachable(_) | Error6::TimeExceeded | Error6::ParamProblem => {
            IcmpNotice::Soft(TcpError::HostUnreachable)
        }
    }
}

fn udp_error(error: Error6) -> UdpError {
    match error {
        Error6::TooBig(mtu) => UdpError::FragmentationNeeded {
            mtu: usize::try_from(mtu).unwrap_or(usize::MAX),
        },
        Error6::Unreachable(DstUnreachable::PortUnreachable) => UdpError::PortUnreachable,
        Error6::Unreachable(DstUnreachable::NoRoute | DstUnreachable::RejectRoute) => {
            UdpError::NetUnreachable
        }
        Error6::Unreachable(_) | Error6::ParamProblem => UdpError::HostUnreachable,
        Error6::TimeExceeded => UdpError::TimeExceeded,
    }
}

fn icmp_error(error: Error6) -> IcmpError {
    match error {
        Error6::Unreachable(DstUnreachable::AddrUnreachable) => IcmpError::HostUnreachable,
        Error6::Unreachable(DstUnreachable::NoRoute | DstUnreachable::RejectRoute) => {
            IcmpError::NetUnreachable
        }
        Error6::Unreachable(_) | Error6::TooBig(_) | Error6::ParamProblem => IcmpError::Unreachable,
        Error6::TimeExceeded => IcmpError::TimeExceeded,
    }
}
