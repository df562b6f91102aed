//! ICMP on the stack: echo requests answered, echo sockets, ICMP errors sent (rate
//! limited) and received ones routed to the socket they concern.

use core::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use impnet_wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use impnet_wire::ipv4::{self, Protocol};

use crate::icmp::EchoSocket;
use crate::icmp::{EchoReply, IcmpError, IcmpHandle};
use crate::ip_options::IpOptions;
use crate::neighbor::{Origin, SocketKind};
use crate::socket::RecvQueue;
use crate::stack::ip::{IpMeta, OutputError};
use crate::stack::ipv4::SendOptions;
use crate::stack::{Event, Stack};
use crate::tcp::{IcmpNotice, TcpError};
use crate::time::Instant;
use crate::udp::UdpError;

/// A received ICMP error, as the sockets see it.
#[derive(Debug, Clone, Copy)]
enum ErrorKind {
    Unreachable(DstUnreachable),
    /// Fragmentation needed, with the next-hop MTU (0 from routers older than RFC 1191).
    TooBig(u16),
    TimeExceeded,
    ParamProblem,
}

impl From<OutputError> for IcmpError {
    fn from(error: OutputError) -> IcmpError {
        match error {
            OutputError::NoRoute | OutputError::NoSourceAddress | OutputError::AddrNotAvailable => {
                IcmpError::NoRoute
            }
            OutputError::TooBig { .. } => IcmpError::MessageTooLong,
            OutputError::QueueFull => IcmpError::NoBufferSpace,
        }
    }
}

impl Stack {
    /// Open an echo socket that sends requests and receives replies with identifier
    /// `ident`.
    pub fn icmp_bind(&mut self, ident: u16) -> Result<IcmpHandle, IcmpError> {
        if self.icmp.by_ident.contains_key(&ident) {
            return Err(IcmpError::IdentInUse);
        }
        let queue = RecvQueue::new(self.config.udp_queue_limit, self.config.udp_queue_bytes);
        let handle = IcmpHandle(self.icmp.sockets.insert(EchoSocket {
            ident,
            queue,
            error: None,
        }));
        self.icmp.by_ident.insert(ident, handle);
        Ok(handle)
    }

    /// Close an echo socket.
    pub fn icmp_close(&mut self, handle: IcmpHandle) -> Result<(), IcmpError> {
        let mut socket = self
            .icmp
            .sockets
            .remove(handle.0)
            .ok_or(IcmpError::InvalidHandle)?;
        self.icmp.by_ident.remove(&socket.ident);
        for buffer in socket.queue.drain() {
            self.pool.give(buffer);
        }
        Ok(())
    }

    /// Send an echo request to `dst` (fragmented if bigger than the route MTU): ICMP
    /// to an IPv4 address, ICMPv6 (RFC 4443 §4.1) to an IPv6 one.
    pub fn icmp_send_echo(
        &mut self,
        now: Instant,
        handle: IcmpHandle,
        dst: impl Into<IpAddr>,
        seq_no: u16,
        payload: &[u8],
    ) -> Result<(), IcmpError> {
        self.icmp_send_echo_with_options(now, handle, dst, seq_no, payload, &[])
    }

    /// As [`Stack::icmp_send_echo`], with IPv4 options in the request's header (e.g.
    /// [`ip_options::record_route`](crate::ip_options::record_route) or
    /// [`ip_options::timestamp`](crate::ip_options::timestamp)): the routers on the way
    /// and the host that answers fill them in, and [`EchoReply::options`] holds what
    /// came back. At most 40 bytes, padded to a multiple of 4 (else `MessageTooLong`);
    /// none to an IPv6 address (`OptionsOnIpv6`).
    pub fn icmp_send_echo_with_options(
        &mut self,
        now: Instant,
        handle: IcmpHandle,
        dst: impl Into<IpAddr>,
        seq_no: u16,
        payload: &[u8],
        ip_options: &[u8],
    ) -> Result<(), IcmpError> {
        let dst = match dst.into() {
            IpAddr::V4(dst) => dst,
            IpAddr::V6(_) if !ip_options.is_empty() => return Err(IcmpError::OptionsOnIpv6),
            IpAddr::V6(dst) => return self.icmp_send_echo6(now, handle, dst, seq_no, payload),
        };
        if ip_options.len() > crate::ip_options::MAX_OPTIONS_LEN
            || !ip_options.len().is_multiple_of(4)
        {
            return Err(IcmpError::MessageTooLong);
        }
        let ident = self
            .icmp
            .sockets
            .get(handle.0)
            .ok_or(IcmpError::InvalidHandle)?
            .ident;
        if payload.len()
            > crate::udp::MAX_PAYLOAD + impnet_wire::udp::HEADER_LEN - icmpv4::HEADER_LEN
        {
            return Err(IcmpError::MessageTooLong);
        }
        let route = self.route_output(dst, None)?;
        let repr = icmpv4::Repr::EchoRequest {
            ident,
            seq_no,
            data: payload,
        };
        let options = SendOptions {
            protocol: Protocol::Icmp,
            dont_frag: false,
            origin: Origin::Socket(SocketKind::Icmp, handle.0),
            ip_options,
            ttl: None,
        };
        self.send_icmp(now, &route, dst, &repr, options)?;
        self.stats.icmp.tx_echo_requests += 1;
        Ok(())
    }

    /// Take the oldest echo reply, copying its data into `buf`. A pending error (e.g.
    /// `HostUnreachable`) is returned once, before replies.
    pub fn icmp_recv(
        &mut self,
        handle: IcmpHandle,
        buf: &mut [u8],
    ) -> Result<EchoReply, IcmpError> {
        let socket = self
            .icmp
            .sockets
            .get_mut(handle.0)
            .ok_or(IcmpError::InvalidHandle)?;
        if let Some(error) = socket.error.take() {
            return Err(error);
        }
        let ((src, seq_no, ttl, options), data) =
            socket.queue.pop().ok_or(IcmpError::WouldBlock)?;
        let len = data.len().min(buf.len());
        buf[..len].copy_from_slice(&data[..len]);
        self.pool.give(data);
        Ok(EchoReply {
            src,
            seq_no,
            len,
            ttl,
            options,
        })
    }

    /// Emit `repr` as an IPv4 datagram along `route`.
    fn send_icmp(
        &mut self,
        now: Instant,
        route: &crate::stack::ipv4::OutputRoute,
        dst: Ipv4Addr,
        repr: &icmpv4::Repr<'_>,
        options: SendOptions<'_>,
    ) -> Result<(), OutputError> {
        let header_len = ipv4::HEADER_LEN + options.ip_options.len();
        let mut packet = self.pool.take();
        packet.resize(header_len + repr.buffer_len(), 0);
        repr.emit(&mut icmpv4::Packet::new_unchecked(
            &mut packet[header_len..],
        ));
        self.send_ipv4(now, route, dst, options, packet)?;
        self.stats.icmp.tx_messages += 1;
        Ok(())
    }

    /// An ICMP message arrived for us.
    #[inline(never)]
    pub(crate) fn handle_icmp(&mut self, now: Instant, meta: &IpMeta<'_>, payload: &[u8]) {
        self.stats.icmp.rx_messages += 1;
        let repr = match icmpv4::Packet::new_checked(payload).and_then(|p| icmpv4::Repr::parse(&p))
        {
            Ok(repr) => repr,
            Err(impnet_wire::Error::BadChecksum) => {
                self.stats.icmp.rx_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.icmp.rx_malformed += 1;
                return;
            }
        };
        match repr {
            icmpv4::Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => self.handle_echo_request(now, meta, ident, seq_no, data),
            icmpv4::Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => self.handle_echo_reply(meta, ident, seq_no, data),
            icmpv4::Repr::DstUnreachable {
                reason,
                invoking,
                next_hop_mtu,
            } => {
                self.stats.icmp.rx_dst_unreachable += 1;
                let kind = match reason {
                    DstUnreachable::FragRequired => ErrorKind::TooBig(next_hop_mtu),
                    reason => ErrorKind::Unreachable(reason),
                };
                self.handle_icmp_error(now, kind, invoking);
            }
            icmpv4::Repr::TimeExceeded { invoking, .. } => {
                self.stats.icmp.rx_time_exceeded += 1;
                self.handle_icmp_error(now, ErrorKind::TimeExceeded, invoking);
            }
            icmpv4::Repr::ParamProblem { invoking, .. } => {
                self.stats.icmp.rx_param_problem += 1;
                self.handle_icmp_error(now, ErrorKind::ParamProblem, invoking);
            }
        }
    }

    /// RFC 1122 §3.2.2.6: "Every host MUST implement an ICMP Echo server function that
    /// receives Echo Requests and sends corresponding Echo Replies." Requests to a
    /// broadcast address are ignored ("MAY be silently discarded").
    fn handle_echo_request(
        &mut self,
        now: Instant,
        meta: &IpMeta<'_>,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) {
        self.stats.icmp.rx_echo_requests += 1;
        if meta.broadcast {
            self.stats.icmp.rx_echo_broadcast_ignored += 1;
            return;
        }
        // The reply's source is the request's destination (RFC 1122 §3.2.2.6).
        let Ok(route) = self.route_output(meta.src, Some(meta.dst)) else {
            return;
        };
        let repr = icmpv4::Repr::EchoReply {
            ident,
            seq_no,
            data,
        };
        // RFC 1122 §3.2.2.6: Record Route and Timestamp options in the request
        // "SHOULD be updated to include the current host and included in the IP header
        // of the Echo Reply message". Others are not echoed; malformed ones are dropped.
        let mut echoed = IpOptions::from_header(meta.header);
        let stamp = self.ip_timestamp(now);
        let echoed = if echoed.stamp(meta.dst, stamp) {
            echoed
        } else {
            IpOptions::default()
        };
        let options = SendOptions {
            protocol: Protocol::Icmp,
            dont_frag: false,
            origin: Origin::Stack,
            ip_options: echoed.as_slice(),
            ttl: None,
        };
        if self
            .send_icmp(now, &route, meta.src, &repr, options)
            .is_ok()
        {
            self.stats.icmp.tx_echo_replies += 1;
        }
    }

    fn handle_echo_reply(&mut self, meta: &IpMeta<'_>, ident: u16, seq_no: u16, data: &[u8]) {
        self.stats.icmp.rx_echo_replies += 1;
        let Some(&handle) = self.icmp.by_ident.get(&ident) else {
            self.stats.icmp.rx_no_socket += 1;
            return;
        };
        let mut buffer = self.pool.take();
        buffer.extend_from_slice(data);
        let Some(socket) = self.icmp.sockets.get_mut(handle.0) else {
            return;
        };
        let was_quiet = socket.error.is_none() && socket.queue.is_empty();
        let options = IpOptions::from_header(meta.header);
        match socket
            .queue
            .push((meta.src.into(), seq_no, meta.ttl, options), buffer)
        {
            Ok(()) if was_quiet => self.push_event(Event::Icmp(handle)),
            Ok(()) => {}
            Err(buffer) => {
                self.stats.icmp.rx_queue_full += 1;
                self.pool.give(buffer);
            }
        }
    }

    /// RFC 1122 §3.2.2.1: "A Destination Unreachable message that is received MUST be
    /// reported to the transport layer." The quoted header and 8 bytes name the socket.
    fn handle_icmp_error(&mut self, now: Instant, kind: ErrorKind, invoking: &[u8]) {
        let Ok(quoted) = ipv4::Packet::new_checked(invoking).or_else(|_| {
            // The quote holds only header + 8 bytes: its total length is larger.
            let header = ipv4::Packet::new_unchecked(invoking);
            if invoking.len() >= ipv4::HEADER_LEN && header.header_len() <= invoking.len() {
                Ok(header)
            } else {
                Err(impnet_wire::Error::Truncated {
                    need: ipv4::HEADER_LEN,
                    have: invoking.len(),
                })
            }
        }) else {
            self.stats.icmp.rx_malformed += 1;
            return;
        };
        let header_len = quoted.header_len();
        let transport = &invoking[header_len..];
        if transport.len() < 8 || !self.is_local_addr(quoted.src_addr()) {
            self.stats.icmp.rx_malformed += 1;
            return;
        }
        let event = match quoted.protocol() {
            Protocol::Udp => {
                let local = SocketAddrV4::new(
                    quoted.src_addr(),
                    u16::from_be_bytes([transport[0], transport[1]]),
                );
                self.udp
                    .set_error_by_addr(local.into(), udp_error(kind))
                    .map(Event::Udp)
            }
            Protocol::Icmp if transport[0] == 8 => {
                let ident = u16::from_be_bytes([transport[4], transport[5]]);
                let handle = self.icmp.by_ident.get(&ident).copied();
                handle
                    .filter(|&h| self.icmp.set_error(h, icmp_error(kind)))
                    .map(Event::Icmp)
            }
            Protocol::Tcp => {
                let local = SocketAddrV4::new(
                    quoted.src_addr(),
                    u16::from_be_bytes([transport[0], transport[1]]),
                );
                let remote = SocketAddrV4::new(
                    quoted.dst_addr(),
                    u16::from_be_bytes([transport[2], transport[3]]),
                );
                let seq =
                    u32::from_be_bytes([transport[4], transport[5], transport[6], transport[7]]);
                let notice = tcp_notice(kind, quoted.total_len());
                self.tcp.handle_icmp(now, local, remote, seq, notice);
                return;
            }
            _ => None,
        };
        match event {
            Some(event) => self.push_event(event),
            None => self.stats.icmp.rx_no_socket += 1,
        }
    }

    /// RFC 1122 §3.2.2.1: a host SHOULD send Port Unreachable for a datagram no
    /// transport socket takes; it quotes the header and first 8 data bytes (RFC 792).
    pub(crate) fn send_port_unreachable(
        &mut self,
        now: Instant,
        meta: &IpMeta<'_>,
        payload: &[u8],
    ) {
        self.send_icmp_error(now, meta, payload, DstUnreachable::PortUnreachable);
    }

    /// Send a Destination Unreachable about a datagram we received, subject to the
    /// RFC 1122 §3.2.2 rules and the rate limit.
    #[cold]
    #[inline(never)]
    pub(crate) fn send_icmp_error(
        &mut self,
        now: Instant,
        meta: &IpMeta<'_>,
        payload: &[u8],
        reason: DstUnreachable,
    ) {
        let mut quote = [0u8; ipv4::MAX_HEADER_LEN + 8];
        let header_len = meta.header.len().min(ipv4::MAX_HEADER_LEN);
        let data_len = payload.len().min(8);
        quote[..header_len].copy_from_slice(&meta.header[..header_len]);
        quote[header_len..header_len + data_len].copy_from_slice(&payload[..data_len]);
        let repr = icmpv4::Repr::DstUnreachable {
            reason,
            next_hop_mtu: 0,
            invoking: &quote[..header_len + data_len],
        };
        if self.send_icmp_error_repr(now, meta.src, Some(meta.dst), &repr) {
            self.stats.icmp.tx_dst_unreachable += 1;
        }
    }

    /// Fragment reassembly timed out with fragment zero held: RFC 1122 §3.3.2, "an ICMP
    /// Time Exceeded error message SHOULD be sent".
    pub(crate) fn send_reassembly_timeout(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        quote: &[u8],
    ) {
        let repr = icmpv4::Repr::TimeExceeded {
            reason: TimeExceeded::FragExpired,
            invoking: quote,
        };
        if self.send_icmp_error_repr(now, src, Some(dst), &repr) {
            self.stats.icmp.tx_time_exceeded += 1;
        }
    }

    /// Send an ICMP error back to `to` from `from` (or the outgoing interface's
    /// address), if the bucket has a token. RFC 1122 §3.2.2: never about a datagram
    /// from a non-unicast source.
    pub(crate) fn send_icmp_error_repr(
        &mut self,
        now: Instant,
        to: Ipv4Addr,
        from: Option<Ipv4Addr>,
        repr: &icmpv4::Repr<'_>,
    ) -> bool {
        if to.is_unspecified() || to.is_broadcast() || to.is_multicast() {
            return false;
        }
        if !self.icmp_limiter.try_take(now) {
            self.stats.icmp.rate_limited += 1;
            return false;
        }
        let Ok(route) = self.route_output(to, from) else {
            return false;
        };
        let options = SendOptions {
            protocol: Protocol::Icmp,
            dont_frag: false,
            origin: Origin::Stack,
            ip_options: &[],
            ttl: None,
        };
        self.send_icmp(now, &route, to, repr, options).is_ok()
    }
}

/// What an ICMP error means to TCP (RFC 1122 §4.2.3.9): port and protocol
/// unreachable and the administrative prohibitions are hard errors, the rest soft;
/// fragmentation needed is path MTU discovery (RFC 1191), with the MTU estimated from
/// the quoted datagram's length when an old router sent none (RFC 1191 §7 plateaus).
fn tcp_notice(kind: ErrorKind, quoted_len: u16) -> IcmpNotice {
    match kind {
        ErrorKind::TooBig(0) => IcmpNotice::PacketTooBig {
            mtu: plateau_below(quoted_len),
        },
        ErrorKind::TooBig(mtu) => IcmpNotice::PacketTooBig { mtu },
        ErrorKind::Unreachable(
            DstUnreachable::PortUnreachable | DstUnreachable::ProtoUnreachable,
        ) => IcmpNotice::Hard(TcpError::ConnectionRefused),
        ErrorKind::Unreachable(
            DstUnreachable::NetProhibited
            | DstUnreachable::HostProhibited
            | DstUnreachable::CommProhibited,
        ) => IcmpNotice::Hard(TcpError::Prohibited),
        ErrorKind::Unreachable(
            DstUnreachable::NetUnreachable
            | DstUnreachable::DstNetUnknown
            | DstUnreachable::NetUnreachToS,
        ) => IcmpNotice::Soft(TcpError::NetUnreachable),
        ErrorKind::Unreachable(_) | ErrorKind::TimeExceeded | ErrorKind::ParamProblem => {
            IcmpNotice::Soft(TcpError::HostUnreachable)
        }
    }
}

/// RFC 1191 §7: the largest plateau MTU below `len`.
fn plateau_below(len: u16) -> u16 {
    const PLATEAUS: [u16; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    PLATEAUS.into_iter().find(|&p| p < len).unwrap_or(68)
}

fn udp_error(kind: ErrorKind) -> UdpError {
    match kind {
        ErrorKind::TooBig(mtu) => UdpError::FragmentationNeeded {
            mtu: usize::from(mtu),
        },
        ErrorKind::Unreachable(DstUnreachable::PortUnreachable) => UdpError::PortUnreachable,
        ErrorKind::Unreachable(DstUnreachable::NetUnreachable | DstUnreachable::DstNetUnknown) => {
            UdpError::NetUnreachable
        }
        ErrorKind::Unreachable(_) | ErrorKind::ParamProblem => UdpError::HostUnreachable,
        ErrorKind::TimeExceeded => UdpError::TimeExceeded,
    }
}

fn icmp_error(kind: ErrorKind) -> IcmpError {
    match kind {
        ErrorKind::TooBig(_) => IcmpError::Unreachable,
        ErrorKind::Unreachable(
            DstUnreachable::HostUnreachable | DstUnreachable::DstHostUnknown,
        ) => IcmpError::HostUnreachable,
        ErrorKind::Unreachable(DstUnreachable::NetUnreachable | DstUnreachable::DstNetUnknown) => {
            IcmpError::NetUnreachable
        }
        ErrorKind::Unreachable(_) | ErrorKind::ParamProblem => IcmpError::Unreachable,
        ErrorKind::TimeExceeded => IcmpError::TimeExceeded,
    }
}
