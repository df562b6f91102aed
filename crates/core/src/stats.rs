//! `netstat -s` style counters: one counter per event and per drop reason, grouped by
//! layer. Counters only ever grow (wrapping at 2^64, which never happens in practice).
//! [`Stats::for_each`] visits every counter by a dotted name (`tcp.rx_segments`), as
//! `imp ss --counters` lists them.

use alloc::string::String;

use crate::accept_any::AcceptAnyStats;

/// Link layer (Ethernet) counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames handed to `handle_frame`.
    pub rx_frames: u64,
    /// Frames returned by `poll_transmit`.
    pub tx_frames: u64,
    /// Dropped: shorter than an Ethernet header (on an IP-level interface: empty).
    pub rx_truncated: u64,
    /// Dropped: destination MAC neither ours nor broadcast.
    pub rx_not_for_us: u64,
    /// Dropped: an EtherType the stack does not speak (IPv6, VLAN, ...), or on an
    /// IP-level interface an IP version other than 4.
    pub rx_unknown_ethertype: u64,
    /// Dropped: the frame arrived on an interface id the stack does not have.
    pub rx_unknown_interface: u64,
    /// Dropped on output: the caller's buffer was too small for a queued frame.
    pub tx_buffer_too_small: u64,
    /// Dropped on output: the transmit queue was full.
    pub tx_queue_full: u64,
}

/// ARP (RFC 826) and neighbour cache counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArpStats {
    /// ARP requests received.
    pub rx_requests: u64,
    /// ARP replies received.
    pub rx_replies: u64,
    /// Dropped: malformed or unsupported ARP packets.
    pub rx_malformed: u64,
    /// ARP requests sent (resolution and retries).
    pub tx_requests: u64,
    /// ARP replies sent.
    pub tx_replies: u64,
    /// Gratuitous ARP announcements sent (RFC 5227 §2.3).
    pub tx_gratuitous: u64,
    /// Neighbour entries learned or refreshed.
    pub cache_updates: u64,
    /// Resolutions that exhausted their retries.
    pub resolution_failed: u64,
    /// Packets dropped because their neighbour never answered.
    pub dropped_unresolved: u64,
    /// Packets dropped because a resolution queue (per neighbour or total) was full.
    pub dropped_queue_full: u64,
    /// Packets dropped because the neighbour table was full of pending resolutions.
    pub dropped_table_full: u64,
}

/// IPv4 (RFC 791) counters, input and output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipv4Stats {
    /// IPv4 packets received (before validation).
    pub rx_packets: u64,
    /// Datagrams delivered to ICMP, UDP or TCP.
    pub rx_delivered: u64,
    /// Dropped: header checksum wrong.
    pub rx_bad_checksum: u64,
    /// Dropped: shorter than the header or than the total length says.
    pub rx_truncated: u64,
    /// Dropped: version field not 4.
    pub rx_bad_version: u64,
    /// Dropped: IHL below 5 or beyond the packet.
    pub rx_bad_ihl: u64,
    /// Dropped: total length smaller than the header (or otherwise impossible).
    pub rx_bad_length: u64,
    /// Dropped: malformed options or other forbidden field values.
    pub rx_bad_header: u64,
    /// Dropped: source address broadcast, multicast or otherwise not a host (RFC 1122
    /// §3.2.1.3).
    pub rx_bad_source: u64,
    /// Dropped: TTL expired (only when forwarding; a host accepts any TTL, RFC 1122
    /// §3.2.1.7).
    pub rx_ttl_expired: u64,
    /// Dropped: destination is not one of our addresses nor a broadcast (no forwarding).
    pub rx_not_for_us: u64,
    /// Dropped: a protocol number nothing handles.
    pub rx_unknown_protocol: u64,
    /// IPv4 packets (fragments counted one by one) queued for output.
    pub tx_packets: u64,
    /// Datagrams that had to be fragmented.
    pub tx_fragmented: u64,
    /// Fragments created by output fragmentation.
    pub tx_fragments: u64,
    /// Not sent: no route to the destination.
    pub tx_no_route: u64,
    /// Not sent: the outgoing interface has no IPv4 address to send from.
    pub tx_no_source_address: u64,
    /// Not sent: larger than the route MTU with DF set.
    pub tx_dont_fragment: u64,
}

/// Fragment reassembly (RFC 791, RFC 815) counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Fragments received.
    pub fragments: u64,
    /// Datagrams reassembled and delivered.
    pub reassembled: u64,
    /// Datagrams dropped because their fragments did not all arrive in time.
    pub timeout: u64,
    /// Datagrams dropped because a fragment's bytes conflicted with bytes already held.
    pub overlap_conflict: u64,
    /// Datagrams dropped to stay under the memory limit.
    pub memory: u64,
    /// Fragments dropped as malformed (non-final fragment not a multiple of 8 bytes,
    /// beyond 65535 bytes, data past a known end).
    pub bad_fragment: u64,
    /// Identical duplicate fragments (no new bytes), accepted and ignored.
    pub duplicates: u64,
}

/// ICMP (RFC 792) counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IcmpStats {
    /// ICMP messages received.
    pub rx_messages: u64,
    /// Dropped: checksum wrong.
    pub rx_bad_checksum: u64,
    /// Dropped: malformed or of a type we ignore.
    pub rx_malformed: u64,
    /// Echo requests received.
    pub rx_echo_requests: u64,
    /// Echo requests to a broadcast address, ignored (RFC 1122 §3.2.2.6 allows it).
    pub rx_echo_broadcast_ignored: u64,
    /// Echo replies received.
    pub rx_echo_replies: u64,
    /// Destination unreachable received.
    pub rx_dst_unreachable: u64,
    /// Time exceeded received.
    pub rx_time_exceeded: u64,
    /// Parameter problem received.
    pub rx_param_problem: u64,
    /// Dropped: echo reply or error for which no socket exists.
    pub rx_no_socket: u64,
    /// Dropped: the echo socket's receive queue was full.
    pub rx_queue_full: u64,
    /// ICMP messages queued for output.
    pub tx_messages: u64,
    /// Echo replies sent.
    pub tx_echo_replies: u64,
    /// Echo requests sent.
    pub tx_echo_requests: u64,
    /// Destination unreachable sent.
    pub tx_dst_unreachable: u64,
    /// Time exceeded sent.
    pub tx_time_exceeded: u64,
    /// Parameter problem sent (a forwarded datagram's options were malformed).
    pub tx_param_problem: u64,
    /// Error messages not sent because the token bucket was empty.
    pub rate_limited: u64,
}

/// UDP (RFC 768) counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received.
    pub rx_datagrams: u64,
    /// Datagrams queued on a socket.
    pub rx_delivered: u64,
    /// Dropped: checksum wrong.
    pub rx_bad_checksum: u64,
    /// Dropped: truncated or length field wrong.
    pub rx_malformed: u64,
    /// Dropped: no socket bound to the destination port.
    pub rx_no_port: u64,
    /// Dropped: the socket's receive queue was full (datagrams or bytes).
    pub rx_queue_full: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
}

/// TCP segment counters kept by the stack around the TCP layer (input checks and
/// output wrapping); connection-level counters live with TCP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpSegmentStats {
    /// Segments received and handed to TCP.
    pub rx_segments: u64,
    /// Dropped: checksum wrong.
    pub rx_bad_checksum: u64,
    /// Dropped: malformed header or options.
    pub rx_malformed: u64,
    /// Dropped: addressed to a broadcast address.
    pub rx_broadcast: u64,
    /// Segments wrapped in IPv4 and sent (or queued for ARP).
    pub tx_segments: u64,
    /// Segments received (passed the checks), by kind.
    pub rx_kinds: SegmentKinds,
    /// Segments sent, by kind.
    pub tx_kinds: SegmentKinds,
}

/// What a TCP segment is, for counting: the first of RST, SYN, FIN that it carries,
/// else data when it has payload, else a bare ACK (window updates, duplicate ACKs and
/// keep-alives included). The kinds of the 1976 line tables (seed 004, Tables I-III:
/// data, null and special packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// RST set.
    Rst,
    /// SYN set (SYN and SYN-ACK).
    Syn,
    /// FIN set (with or without data).
    Fin,
    /// Payload, no control bit but ACK and PSH.
    Data,
    /// No payload, no SYN, FIN or RST: an acknowledgment (or window update) alone.
    AckOnly,
}

impl SegmentKind {
    /// Every kind, in the order the counters list them.
    pub const ALL: [SegmentKind; 5] = [
        SegmentKind::Data,
        SegmentKind::AckOnly,
        SegmentKind::Syn,
        SegmentKind::Fin,
        SegmentKind::Rst,
    ];

    /// The kind of a segment with TCP control bits `flags` (byte 13 of the header)
    /// and `payload` bytes of data.
    pub const fn of(flags: u8, payload: usize) -> SegmentKind {
        if flags & 0x04 != 0 {
            SegmentKind::Rst
        } else if flags & 0x02 != 0 {
            SegmentKind::Syn
        } else if flags & 0x01 != 0 {
            SegmentKind::Fin
        } else if payload > 0 {
            SegmentKind::Data
        } else {
            SegmentKind::AckOnly
        }
    }

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            SegmentKind::Rst => "RST",
            SegmentKind::Syn => "SYN",
            SegmentKind::Fin => "FIN",
            SegmentKind::Data => "data",
            SegmentKind::AckOnly => "ACK only",
        }
    }

    const fn index(self) -> usize {
        match self {
            SegmentKind::Data => 0,
            SegmentKind::AckOnly => 1,
            SegmentKind::Syn => 2,
            SegmentKind::Fin => 3,
            SegmentKind::Rst => 4,
        }
    }
}

/// TCP segments and their IPv4 bytes (headers included) per [`SegmentKind`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentKinds {
    segments: [u64; 5],
    bytes: [u64; 5],
}

impl SegmentKinds {
    /// Count one segment of `kind`, `ip_bytes` long as an IPv4 packet.
    pub fn count(&mut self, kind: SegmentKind, ip_bytes: usize) {
        self.segments[kind.index()] += 1;
        self.bytes[kind.index()] += ip_bytes as u64;
    }

    /// Segments of `kind`.
    pub fn segments(&self, kind: SegmentKind) -> u64 {
        self.segments[kind.index()]
    }

    /// IPv4 bytes of the segments of `kind`.
    pub fn bytes(&self, kind: SegmentKind) -> u64 {
        self.bytes[kind.index()]
    }

    /// Add `other`'s counts to these.
    pub fn add(&mut self, other: &SegmentKinds) {
        for i in 0..5 {
            self.segments[i] += other.segments[i];
            self.bytes[i] += other.bytes[i];
        }
    }

    /// The counts of `self` less those of `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &SegmentKinds) -> SegmentKinds {
        let mut out = self.clone();
        for i in 0..5 {
            out.segments[i] -= earlier.segments[i];
            out.bytes[i] -= earlier.bytes[i];
        }
        out
    }
}

/// Every counter of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Ethernet.
    pub link: LinkStats,
    /// ARP and the neighbour cache.
    pub arp: ArpStats,
    /// IPv4.
    pub ipv4: Ipv4Stats,
    /// IPv4 fragment reassembly.
    pub reassembly: ReassemblyStats,
    /// ICMP.
    pub icmp: IcmpStats,
    /// UDP.
    pub udp: UdpStats,
    /// TCP segments at the IP boundary.
    pub tcp: TcpSegmentStats,
    /// IPv4 forwarding (all interfaces together).
    pub forward: ForwardStats,
    /// IPv6 forwarding (all interfaces together).
    pub forward6: ForwardStats,
    /// The work the stack did for its host's CPU (what a cost model charges for).
    pub work: WorkStats,
    /// IPv6, ICMPv6 and neighbour discovery.
    pub ipv6: Ipv6Stats,
    /// IPv6 fragment reassembly.
    pub reassembly6: ReassemblyStats,
    /// The accept-any mode of transparent proxies.
    pub accept_any: crate::accept_any::AcceptAnyStats,
    /// IPv4 multicast and IGMP.
    pub igmp: IgmpStats,
}

/// IPv4 multicast and IGMP (RFC 3376, RFC 2236) counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgmpStats {
    /// IGMP messages received (to a group we are in).
    pub rx_messages: u64,
    /// IGMP messages that did not parse (short, bad checksum, unknown type, a
    /// fragment).
    pub rx_malformed: u64,
    /// Membership queries received (general and group-specific, every version).
    pub queries_received: u64,
    /// Other hosts' reports and leaves heard (a host needs nothing from them).
    pub rx_reports: u64,
    /// Membership reports sent (IGMPv3 and v2; state changes and answers).
    pub reports_sent: u64,
    /// Answers to queries not sent because another host reported the group first
    /// (IGMPv2 compatibility, RFC 2236 §3).
    pub reports_suppressed: u64,
    /// IGMPv2 Leave Group messages sent.
    pub leaves_sent: u64,
    /// Frames to a 01:00:5e multicast MAC of no group we are in, dropped.
    pub rx_multicast_filtered: u64,
    /// IPv4 datagrams to a group the interface is not in, dropped.
    pub rx_not_member: u64,
    /// IPv4 datagrams to a group from a source the interface's (or the socket's)
    /// filter does not take (source-specific joins), dropped.
    pub rx_source_filtered: u64,
    /// UDP datagrams sent to a multicast group.
    pub tx_multicast: u64,
    /// Copies of those looped back to this host's members (`IP_MULTICAST_LOOP`).
    pub tx_looped: u64,
}

/// IPv6 (RFC 8200), ICMPv6 (RFC 4443) and neighbour discovery (RFC 4861, 4862)
/// counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipv6Stats {
    /// IPv6 packets received (before validation).
    pub rx_packets: u64,
    /// Packets delivered to ICMPv6, UDP or TCP.
    pub rx_delivered: u64,
    /// Dropped: too short, wrong version or a payload length past the packet.
    pub rx_malformed: u64,
    /// Dropped: a multicast or otherwise invalid source address.
    pub rx_bad_source: u64,
    /// Dropped: not for one of our addresses or groups (and not forwarded).
    pub rx_not_for_us: u64,
    /// Dropped with a Parameter Problem (bad extension header chain or option).
    pub rx_param_problem: u64,
    /// Dropped: a next header we do not speak.
    pub rx_unknown_next_header: u64,
    /// Arrived on an interface where IPv6 is not enabled.
    pub rx_disabled: u64,
    /// Packets sent (each fragment counted).
    pub tx_packets: u64,
    /// Not sent: no route or no source address.
    pub tx_no_route: u64,
    /// Datagrams we fragmented (RFC 8200 §4.5) and the fragments made.
    pub tx_fragmented: u64,
    /// Fragments sent.
    pub tx_fragments: u64,
    /// Dropped while waiting for a neighbour (resolution failed or queue full).
    pub tx_unresolved: u64,
    /// TCP segments larger than the path MTU, dropped (TCP sends them again cut to
    /// the MSS the Packet Too Big taught it).
    pub tx_too_big: u64,
    /// ICMPv6 messages received and sent.
    pub icmp_rx: u64,
    /// ICMPv6 messages sent.
    pub icmp_tx: u64,
    /// ICMPv6 messages dropped: bad checksum or malformed.
    pub icmp_rx_bad: u64,
    /// Echo requests answered.
    pub echo_replies: u64,
    /// Echo requests sent by echo sockets.
    pub echo_requests_sent: u64,
    /// Echo replies received (queued to a socket or not).
    pub echo_replies_received: u64,
    /// ICMPv6 errors received (Destination Unreachable, Packet Too Big, Time
    /// Exceeded, Parameter Problem).
    pub errors_received: u64,
    /// Received errors handed to the UDP or echo socket whose datagram they quote.
    pub errors_to_sockets: u64,
    /// MLDv2 reports sent (state changes and answers to queries).
    pub mld_reports_sent: u64,
    /// MLD queries received (general and group-specific, either version).
    pub mld_queries_received: u64,
    /// MLD messages dropped: a query from a non-link-local source or a hop limit
    /// other than 1 (RFC 3810 §5.1.14, §5.2.13).
    pub mld_invalid: u64,
    /// Frames to a 33:33 multicast MAC of no group we are in, dropped.
    pub rx_multicast_filtered: u64,
    /// ICMPv6 errors sent.
    pub errors_sent: u64,
    /// ICMPv6 errors not sent for the rate limit.
    pub errors_rate_limited: u64,
    /// Packet Too Big messages that lowered a path MTU.
    pub pmtu_lowered: u64,
    /// Neighbor solicitations sent and received.
    pub ns_sent: u64,
    /// Neighbor solicitations received.
    pub ns_received: u64,
    /// Neighbor advertisements sent.
    pub na_sent: u64,
    /// Neighbor advertisements received.
    pub na_received: u64,
    /// Router solicitations sent.
    pub rs_sent: u64,
    /// Router advertisements received (and taken).
    pub ra_received: u64,
    /// Router advertisements sent (we forward and were asked).
    pub ra_sent: u64,
    /// Neighbour discovery messages dropped as invalid (RFC 4861 §6.1, §7.1).
    pub nd_invalid: u64,
    /// Addresses found duplicate by detection and given up.
    pub dad_duplicates: u64,
}

/// The work behind the other counters that a host's CPU pays per byte or per call:
/// what a cost model (the simulator's `cpu` profiles) turns into CPU time, with the
/// frame, packet and segment counts of the other counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkStats {
    /// Bytes the Internet checksum ran over in software: every IPv4 packet received on
    /// an interface without receive checksum offload (header and payload), and every
    /// TCP segment with its IPv4 header sent through one without transmit offload.
    pub checksummed_bytes: u64,
    /// Socket calls that move data (TCP send and receive, UDP send and receive).
    pub socket_calls: u64,
    /// Bytes copied from the application into the stack by those calls.
    pub copied_from_user: u64,
    /// Bytes copied from the stack to the application by those calls.
    pub copied_to_user: u64,
}

/// Forwarding counters of one address family (IPv4, RFC 1812; IPv6, RFC 8200 and
/// 4443), for the stack and per interface ([`IfaceStats`]). A datagram is counted on
/// the interface it arrived on. For IPv6, `ttl_exceeded` counts the hop limit
/// (Time Exceeded), `frag_needed` Packet Too Big (routers never fragment IPv6, so
/// `fragmented`, `broadcast` and `bad_option` stay 0), `martian` link-local or
/// unspecified sources and destinations (RFC 4291 §2.5.6: never forwarded) and
/// `no_route` Destination Unreachable code 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Datagrams forwarded (handed to the outgoing interface or its neighbour queue).
    pub forwarded: u64,
    /// Bytes of IPv4 forwarded (headers included, before any fragmentation).
    pub forwarded_bytes: u64,
    /// Forwarded datagrams that were fragmented to fit the next hop.
    pub fragmented: u64,
    /// Not forwarded: no route to the destination (ICMP net unreachable sent).
    pub no_route: u64,
    /// Not forwarded: TTL would reach zero (ICMP time exceeded sent).
    pub ttl_exceeded: u64,
    /// Not forwarded: too big for the next hop with DF set (ICMP fragmentation needed).
    pub frag_needed: u64,
    /// Not forwarded: a martian source or destination (RFC 1812 §5.3.7, §4.2.3.1).
    pub martian: u64,
    /// Not forwarded: a unicast datagram that came in a link-layer broadcast (RFC 1812
    /// §5.3.4), or a directed broadcast to another network.
    pub broadcast: u64,
    /// Not forwarded: a malformed IP option (ICMP parameter problem sent).
    pub bad_option: u64,
    /// Not forwarded: an access-control rule denied it.
    pub denied: u64,
    /// Dropped on the way out: the egress queue or the neighbour queue was full, or
    /// the next hop never answered ARP (ICMP host unreachable sent).
    pub egress_dropped: u64,
}

/// Per-interface counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfaceStats {
    /// Frames received on the interface.
    pub rx_frames: u64,
    /// Bytes of those frames (Ethernet header included; on an IP-level interface, the
    /// IP packets).
    pub rx_bytes: u64,
    /// Frames sent on the interface.
    pub tx_frames: u64,
    /// Bytes of those frames (Ethernet header included; on an IP-level interface, the
    /// IP packets).
    pub tx_bytes: u64,
    /// Forwarding of IPv4 datagrams that arrived here.
    pub forward: ForwardStats,
    /// Forwarding of IPv6 packets that arrived here.
    pub forward6: ForwardStats,
}

impl ForwardStats {
    /// The counters of both families added up (e.g. [`IfaceStats::forward`] and
    /// [`IfaceStats::forward6`]).
    #[must_use]
    pub fn plus(&self, other: &ForwardStats) -> ForwardStats {
        ForwardStats {
            forwarded: self.forwarded + other.forwarded,
            forwarded_bytes: self.forwarded_bytes + other.forwarded_bytes,
            fragmented: self.fragmented + other.fragmented,
            no_route: self.no_route + other.no_route,
            ttl_exceeded: self.ttl_exceeded + other.ttl_exceeded,
            frag_needed: self.frag_needed + other.frag_needed,
            martian: self.martian + other.martian,
            broadcast: self.broadcast + other.broadcast,
            bad_option: self.bad_option + other.bad_option,
            denied: self.denied + other.denied,
            egress_dropped: self.egress_dropped + other.egress_dropped,
        }
    }
}

/// `for_each` (and, for tests, `for_each_mut`) on a group of counters: every field by
/// its name, in declaration order. The struct is destructured whole, so a counter added
/// to it and not listed here is a compile error rather than a counter never reported.
/// Fields after `not counters:` are deliberately left out (they are not single counters).
macro_rules! counter_group {
    ($group:ident { $($field:ident),+ $(,)? } $(not counters: $($skip:ident),+)?) => {
        impl $group {
            /// Call `f` with each counter of the group and its field name, in declaration
            /// order.
            pub fn for_each(&self, f: &mut dyn FnMut(&'static str, u64)) {
                let $group { $($field,)+ $($($skip: _,)+)? } = self;
                $( f(stringify!($field), *$field); )+
            }

            /// [`Self::for_each`] with each counter writable: how tests give every
            /// counter a distinct value.
            #[cfg(test)]
            fn for_each_mut(&mut self, f: &mut dyn FnMut(&'static str, &mut u64)) {
                let $group { $($field,)+ $($($skip: _,)+)? } = self;
                $( f(stringify!($field), $field); )+
            }
        }
    };
}

counter_group!(LinkStats {
    rx_frames,
    tx_frames,
    rx_truncated,
    rx_not_for_us,
    rx_unknown_ethertype,
    rx_unknown_interface,
    tx_buffer_too_small,
    tx_queue_full,
});

counter_group!(ArpStats {
    rx_requests,
    rx_replies,
    rx_malformed,
    tx_requests,
    tx_replies,
    tx_gratuitous,
    cache_updates,
    resolution_failed,
    dropped_unresolved,
    dropped_queue_full,
    dropped_table_full,
});

counter_group!(Ipv4Stats {
    rx_packets,
    rx_delivered,
    rx_bad_checksum,
    rx_truncated,
    rx_bad_version,
    rx_bad_ihl,
    rx_bad_length,
    rx_bad_header,
    rx_bad_source,
    rx_ttl_expired,
    rx_not_for_us,
    rx_unknown_protocol,
    tx_packets,
    tx_fragmented,
    tx_fragments,
    tx_no_route,
    tx_no_source_address,
    tx_dont_fragment,
});

counter_group!(ReassemblyStats {
    fragments,
    reassembled,
    timeout,
    overlap_conflict,
    memory,
    bad_fragment,
    duplicates,
});

counter_group!(IcmpStats {
    rx_messages,
    rx_bad_checksum,
    rx_malformed,
    rx_echo_requests,
    rx_echo_broadcast_ignored,
    rx_echo_replies,
    rx_dst_unreachable,
    rx_time_exceeded,
    rx_param_problem,
    rx_no_socket,
    rx_queue_full,
    tx_messages,
    tx_echo_replies,
    tx_echo_requests,
    tx_dst_unreachable,
    tx_time_exceeded,
    tx_param_problem,
    rate_limited,
});

counter_group!(UdpStats {
    rx_datagrams,
    rx_delivered,
    rx_bad_checksum,
    rx_malformed,
    rx_no_port,
    rx_queue_full,
    tx_datagrams,
});

// The per-kind tables are reported by kind (`SegmentKinds::segments`), not as named
// counters: `imp ss --counters` has never listed them.
counter_group!(TcpSegmentStats {
    rx_segments,
    rx_bad_checksum,
    rx_malformed,
    rx_broadcast,
    tx_segments,
} not counters: rx_kinds, tx_kinds);

counter_group!(ForwardStats {
    forwarded,
    forwarded_bytes,
    fragmented,
    no_route,
    ttl_exceeded,
    frag_needed,
    martian,
    broadcast,
    bad_option,
    denied,
    egress_dropped,
});

counter_group!(WorkStats {
    checksummed_bytes,
    socket_calls,
    copied_from_user,
    copied_to_user,
});

counter_group!(Ipv6Stats {
    rx_packets,
    rx_delivered,
    rx_malformed,
    rx_bad_source,
    rx_not_for_us,
    rx_param_problem,
    rx_unknown_next_header,
    rx_disabled,
    tx_packets,
    tx_no_route,
    tx_fragmented,
    tx_fragments,
    tx_unresolved,
    tx_too_big,
    icmp_rx,
    icmp_tx,
    icmp_rx_bad,
    echo_replies,
    echo_requests_sent,
    echo_replies_received,
    errors_received,
    errors_to_sockets,
    mld_reports_sent,
    mld_queries_received,
    mld_invalid,
    rx_multicast_filtered,
    errors_sent,
    errors_rate_limited,
    pmtu_lowered,
    ns_sent,
    ns_received,
    na_sent,
    na_received,
    rs_sent,
    ra_received,
    ra_sent,
    nd_invalid,
    dad_duplicates,
});

counter_group!(AcceptAnyStats {
    rx_taken,
    rate_limited,
    sources_full,
    udp_caught,
});

counter_group!(IgmpStats {
    rx_messages,
    rx_malformed,
    queries_received,
    rx_reports,
    reports_sent,
    reports_suppressed,
    leaves_sent,
    rx_multicast_filtered,
    rx_not_member,
    rx_source_filtered,
    tx_multicast,
    tx_looped,
});

/// What a group's `for_each` calls: a field name and its counter.
type GroupVisitor<'a> = dyn FnMut(&'static str, u64) + 'a;

/// What a group's `for_each_mut` calls: a field name and its counter, writable.
#[cfg(test)]
type GroupVisitorMut<'a> = dyn FnMut(&'static str, &mut u64) + 'a;

/// Calls `$visit` on each group of a destructured [`Stats`] with its field name as
/// the prefix, in declaration order.
macro_rules! visit_groups {
    ($stats:expr, $visit:ident, $method:ident; $($group:ident),+ $(,)?) => {{
        let Stats { $($group),+ } = $stats;
        $( $visit(stringify!($group), &mut |f| $group.$method(f)); )+
    }};
}

impl Stats {
    /// Call `f` with every counter of the stack and its dotted name, group then field
    /// (`tcp.rx_segments`, `forward6.no_route`), in declaration order: how `imp ss
    /// --counters` lists them, as `nstat` lists the kernel's. The per-kind segment
    /// tables (`tcp.rx_kinds`, `tcp.tx_kinds`) are not visited.
    pub fn for_each(&self, f: &mut dyn FnMut(&str, u64)) {
        let mut name = String::new();
        let mut visit = |prefix: &str, group: &mut dyn FnMut(&mut GroupVisitor<'_>)| {
            group(&mut |field, value| {
                dotted(&mut name, prefix, field);
                f(&name, value);
            });
        };
        visit_groups!(self, visit, for_each;
            link, arp, ipv4, reassembly, icmp, udp, tcp, forward, forward6, work, ipv6,
            reassembly6, accept_any, igmp);
    }

    /// [`Self::for_each`] with each counter writable.
    #[cfg(test)]
    fn for_each_mut(&mut self, f: &mut dyn FnMut(&str, &mut u64)) {
        let mut name = String::new();
        let mut visit = |prefix: &str, group: &mut dyn FnMut(&mut GroupVisitorMut<'_>)| {
            group(&mut |field, value| {
                dotted(&mut name, prefix, field);
                f(&name, value);
            });
        };
        visit_groups!(self, visit, for_each_mut;
            link, arp, ipv4, reassembly, icmp, udp, tcp, forward, forward6, work, ipv6,
            reassembly6, accept_any, igmp);
    }
}

/// `prefix.field` into `name` (one buffer reused for every counter).
fn dotted(name: &mut String, prefix: &str, field: &str) {
    name.clear();
    name.push_str(prefix);
    name.push('.');
    name.push_str(field);
}

#[cfg(test)]
mod tests {
    use super::Stats;
    use alloc::collections::BTreeSet;
    use alloc::format;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    /// Stats whose counters are 1000, 1001, ... in visiting order, and the names and
    /// values given.
    fn distinct() -> (Stats, Vec<(String, u64)>) {
        let mut stats = Stats::default();
        let mut given = Vec::new();
        let mut next = 1000;
        stats.for_each_mut(&mut |name, counter| {
            *counter = next;
            given.push((name.to_string(), next));
            next += 1;
        });
        (stats, given)
    }

    #[test]
    fn for_each_visits_every_counter_under_its_own_name() {
        let (stats, given) = distinct();
        let mut seen = Vec::new();
        stats.for_each(&mut |name, value| seen.push((name.to_string(), value)));
        assert_eq!(seen, given);
        // Checked against the derived Debug text, which the visitor does not use: each
        // value sits under its field name inside its group's braces.
        let text = format!("{stats:?}");
        for (name, value) in &seen {
            let (group, field) = name.split_once('.').expect("group.field");
            let start = text
                .find(&format!(" {group}: "))
                .unwrap_or_else(|| panic!("{group} in {text}"));
            let end = start + text[start..].find('}').expect("the group closes");
            assert!(
                text[start..end].contains(&format!(" {field}: {value}")),
                "{name} = {value} in {}",
                &text[start..end]
            );
        }
        // And every number field in that text is one of them (the per-kind tables
        // are lists, not `name: number`).
        let numbers = text
            .match_indices(": ")
            .filter(|(at, _)| text.as_bytes().get(at + 2).is_some_and(u8::is_ascii_digit))
            .count();
        assert_eq!(numbers, seen.len(), "{text}");
    }

    #[test]
    fn counter_names_are_unique() {
        let (stats, _) = distinct();
        let mut names = Vec::new();
        stats.for_each(&mut |name, _| names.push(name.to_string()));
        let unique: BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(names.iter().any(|n| n == "tcp.rx_segments"), "{names:?}");
    }
}
