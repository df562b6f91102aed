//! The per-flow packet trace an experiment records through [`Sim::set_observer`]
//! (tcptrace's view, taken at the sender): data segments sent (retransmissions marked),
//! ACKs, SACK blocks and the receive window arriving back, and RTT samples (Karn: only
//! segments sent once).
//!
//! [`Sim::set_observer`]: crate::Sim::set_observer

use std::collections::VecDeque;
use std::net::IpAddr;

use impnet_core::Instant;
use impnet_phy::pcap::LINKTYPE_ETHERNET;
use impnet_wire::ethernet::{self, EtherType};
use impnet_wire::ipv4::{self, Protocol};
use impnet_wire::tcp::{self, Flags, Options};
use impnet_wire::{ipv6, ipv6ext};

use crate::analyze::Analyzer;
use crate::{FrameEvent, FrameKind, LinkId};

/// A data segment as the sender sent it; sequence numbers relative to the ISN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentPoint {
    /// Seconds since the start of the run.
    pub time: f64,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// It covers bytes sent before.
    pub retransmit: bool,
}

/// What the trace of one TCP flow holds.
#[derive(Debug, Clone, Default)]
pub struct FlowTrace {
    /// Data segments sent by the sender.
    pub segments: Vec<SegmentPoint>,
    /// (time s, relative cumulative ACK) of every ACK reaching the sender.
    pub acks: Vec<(f64, u64)>,
    /// (time s, ACK + window): the right edge the receiver allows.
    pub window: Vec<(f64, u64)>,
    /// (time s, left, right) of every SACK block reaching the sender.
    pub sacks: Vec<(f64, u64, u64)>,
    /// (time s, RTT ms) measured on segments sent once.
    pub rtt: Vec<(f64, f64)>,
    /// (time s, cwnd bytes, ssthresh bytes or None while unset, srtt ms).
    pub info: Vec<(f64, u32, Option<u32>, Option<f64>)>,
    /// (time s, payload bytes the receiving application has read so far).
    pub delivered: Vec<(f64, u64)>,
    /// Payload bytes in first transmissions.
    pub payload_bytes: u64,
    /// Frame bytes (all fragments, Ethernet header included) of first transmissions.
    pub wire_bytes: u64,
    /// Data segments retransmitted.
    pub retransmits: u64,
}

/// A TCP flow the tracer follows: its 4-tuple from the sender's side.
#[derive(Debug)]
pub(crate) struct Followed {
    link: LinkId,
    sender: (IpAddr, u16),
    receiver: (IpAddr, u16),
    isn: Option<u32>,
    peer_isn_seen: bool,
    /// Window-scale shift the receiver announced, once both ends offered scaling.
    peer_shift: u8,
    offered_scaling: bool,
    max_end: u64,
    /// Segments sent and not yet acknowledged: (start, end, time sent, retransmitted).
    outstanding: VecDeque<(u64, u64, f64, bool)>,
    /// A segment sent in fragments whose last fragment has not been seen: (IP
    /// identification, time, sequence number, TCP header length, frame bytes so far).
    pending_fragments: Option<(u32, f64, u32, usize, u64)>,
    last_ack: u64,
    pub(crate) trace: FlowTrace,
    /// `imp analyze`'s view of the flow: its frames as sent, both ways (what the
    /// link's pcap holds).
    pub(crate) judge: Analyzer,
}

/// `imp analyze`'s view of every TCP connection between two hosts on a link, from
/// its frames as sent (an FTP session's control connection beside its data one).
#[derive(Debug)]
pub(crate) struct HostsJudge {
    link: LinkId,
    hosts: (IpAddr, IpAddr),
    pub(crate) judge: Analyzer,
}

/// Every followed flow.
#[derive(Debug, Default)]
pub(crate) struct Tracer {
    pub(crate) flows: Vec<Followed>,
    /// The flows followed on each link (by `LinkId`), in order: a frame is matched
    /// against those of its link only.
    by_link: Vec<Vec<usize>>,
    /// Host pairs judged whole ([`Tracer::judge_hosts`]).
    pub(crate) hosts_judges: Vec<HostsJudge>,
    start: Instant,
}

impl Tracer {
    pub(crate) fn new(start: Instant) -> Tracer {
        Tracer {
            flows: Vec::new(),
            by_link: Vec::new(),
            hosts_judges: Vec::new(),
            start,
        }
    }

    /// Follow a flow from now on; returns its index.
    pub(crate) fn follow(
        &mut self,
        link: LinkId,
        sender: (IpAddr, u16),
        receiver: (IpAddr, u16),
    ) -> usize {
        self.flows.push(Followed {
            link,
            sender,
            receiver,
            isn: None,
            peer_isn_seen: false,
            peer_shift: 0,
            offered_scaling: false,
            max_end: 0,
            outstanding: VecDeque::new(),
            pending_fragments: None,
            last_ack: 0,
            trace: FlowTrace::default(),
            judge: Analyzer::new(),
        });
        let index = self.flows.len() - 1;
        if self.by_link.len() <= link.0 {
            self.by_link.resize_with(link.0 + 1, Vec::new);
        }
        self.by_link[link.0].push(index);
        index
    }

    /// Judge every TCP connection between `hosts` on `link` from now on; returns its
    /// index in `hosts_judges`.
    pub(crate) fn judge_hosts(&mut self, link: LinkId, hosts: (IpAddr, IpAddr)) -> usize {
        self.hosts_judges.push(HostsJudge {
            link,
            hosts,
            judge: Analyzer::new(),
        });
        self.hosts_judges.len() - 1
    }

    pub(crate) fn seconds(&self, t: Instant) -> f64 {
        (t - self.start).as_secs_f64()
    }

    /// Look at one frame.
    pub(crate) fn observe(&mut self, event: &FrameEvent<'_>) {
        // Most links carry no followed flow (a dumbbell's bottleneck and far access
        // links): their frames are not parsed at all.
        let followed = self
            .by_link
            .get(event.link.0)
            .is_some_and(|f| !f.is_empty());
        if !followed && !self.hosts_judges.iter().any(|h| h.link == event.link) {
            return;
        }
        let Ok(frame) = ethernet::Frame::new_checked(event.frame) else {
            return;
        };
        let Some(ip) = TcpInIp::parse(frame.ethertype(), frame.payload()) else {
            return;
        };
        let time = self.seconds(event.time);
        let (src, dst) = (ip.src, ip.dst);
        let wire = event.frame.len() as u64;
        if let Some((ident, offset, more)) = ip.fragment.filter(|f| f.1 != 0) {
            if event.kind == FrameKind::Sent {
                let total = usize::from(offset) + ip.payload.len();
                let on_link = self
                    .by_link
                    .get(event.link.0)
                    .map_or(&[][..], Vec::as_slice);
                for &i in on_link {
                    let f = &mut self.flows[i];
                    if f.link == event.link && f.sender.0 == src && f.receiver.0 == dst {
                        f.on_fragment(ident, more, total, wire);
                    }
                }
            }
            return;
        }
        let Ok(seg) = tcp::Packet::new_checked(ip.payload) else {
            return;
        };
        let ports = (seg.src_port(), seg.dst_port());
        if event.kind == FrameKind::Sent {
            for h in &mut self.hosts_judges {
                if h.link == event.link && (h.hosts == (src, dst) || h.hosts == (dst, src)) {
                    h.judge
                        .frame(event.time.as_nanos(), LINKTYPE_ETHERNET, event.frame);
                }
            }
        }
        let on_link = self
            .by_link
            .get(event.link.0)
            .map_or(&[][..], Vec::as_slice);
        for &i in on_link {
            let f = &mut self.flows[i];
            if f.link != event.link {
                continue;
            }
            let (from, to) = ((src, ports.0), (dst, ports.1));
            if event.kind == FrameKind::Sent
                && ((from, to) == (f.sender, f.receiver) || (to, from) == (f.sender, f.receiver))
            {
                f.judge
                    .frame(event.time.as_nanos(), LINKTYPE_ETHERNET, event.frame);
            }
            if (src, ports.0) == f.sender && (dst, ports.1) == f.receiver {
                if event.kind != FrameKind::Sent {
                    continue;
                }
                match ip.fragment {
                    Some((ident, _, true)) => {
                        f.pending_fragments =
                            Some((ident, time, seg.seq_number(), seg.header_len(), wire));
                    }
                    _ => f.on_sent(time, &seg, wire),
                }
            } else if (src, ports.0) == f.receiver
                && (dst, ports.1) == f.sender
                && event.kind == FrameKind::Delivered
            {
                f.on_ack(time, &seg);
            }
        }
    }
}

/// A TCP segment, or a fragment of one, in an IPv4 or IPv6 packet.
struct TcpInIp<'a> {
    src: IpAddr,
    dst: IpAddr,
    /// (identification, offset in bytes, more fragments) when the packet is a fragment.
    fragment: Option<(u32, u16, bool)>,
    /// The TCP segment, or the fragment's data.
    payload: &'a [u8],
}

impl<'a> TcpInIp<'a> {
    fn parse(ethertype: EtherType, packet: &'a [u8]) -> Option<TcpInIp<'a>> {
        match ethertype {
            EtherType::Ipv4 => {
                let ip = ipv4::Packet::new_checked(packet).ok()?;
                if ip.protocol() != Protocol::Tcp {
                    return None;
                }
                let fragment = (ip.frag_offset() != 0 || ip.more_frags())
                    .then(|| (u32::from(ip.ident()), ip.frag_offset(), ip.more_frags()));
                Some(TcpInIp {
                    src: IpAddr::V4(ip.src_addr()),
                    dst: IpAddr::V4(ip.dst_addr()),
                    fragment,
                    payload: &packet[ip.header_len()..usize::from(ip.total_len())],
                })
            }
            EtherType::Ipv6 => {
                let ip = ipv6::Packet::new_checked(packet).ok()?;
                let whole = &packet[..ipv6::HEADER_LEN + usize::from(ip.payload_len())];
                let walk = ipv6ext::walk(whole).ok()?;
                let fragment = walk
                    .fragment
                    .map(|(_, f)| (f.ident, f.frag_offset, f.more_frags))
                    .filter(|&(_, offset, more)| offset != 0 || more);
                // After a fragment header that stopped the walk, `protocol` is the
                // fragment header's Next Header.
                if walk.protocol != ipv6::NextHeader::Tcp {
                    return None;
                }
                Some(TcpInIp {
                    src: IpAddr::V6(ip.src_addr()),
                    dst: IpAddr::V6(ip.dst_addr()),
                    fragment,
                    payload: whole.get(walk.offset..)?,
                })
            }
            _ => None,
        }
    }
}

impl Followed {
    fn rel(&self, seq: u32) -> u64 {
        let isn = self.isn.unwrap_or(seq);
        // Sequence numbers wrap; the trace unwraps them against the highest seen.
        let offset = seq.wrapping_sub(isn.wrapping_add(1)) as u64;
        let base = self.max_end & !0xffff_ffff;
        let candidate = base + offset;
        if candidate + (1 << 31) < self.max_end {
            candidate + (1 << 32)
        } else if candidate > self.max_end + (1 << 31) && candidate >= (1 << 32) {
            candidate - (1 << 32)
        } else {
            candidate
        }
    }

    fn on_fragment(&mut self, ident: u32, more: bool, total: usize, wire: u64) {
        let Some((id, time, seq, header, bytes)) = self.pending_fragments else {
            return;
        };
        if id != ident {
            return;
        }
        if more {
            self.pending_fragments = Some((id, time, seq, header, bytes + wire));
        } else {
            self.pending_fragments = None;
            let len = total.saturating_sub(header) as u64;
            self.on_data(time, seq, len, bytes + wire);
        }
    }

    fn on_sent(&mut self, time: f64, seg: &tcp::Packet<&[u8]>, wire: u64) {
        if seg.flags().contains(Flags::SYN) {
            self.isn = Some(seg.seq_number());
            self.offered_scaling = Options::parse(seg.options())
                .map(|o| o.window_scale.is_some())
                .unwrap_or(false);
            return;
        }
        self.on_data(time, seg.seq_number(), seg.payload().len() as u64, wire);
    }

    fn on_data(&mut self, time: f64, seq: u32, len: u64, wire: u64) {
        if len == 0 || self.isn.is_none() {
            return;
        }
        let start = self.rel(seq);
        let end = start + len;
        let retransmit = start < self.max_end;
        if retransmit {
            self.trace.retransmits += 1;
            for entry in self.outstanding.iter_mut() {
                if entry.1 > start && entry.0 < end {
                    entry.3 = true;
                }
            }
        } else {
            self.trace.payload_bytes += len;
            self.trace.wire_bytes += wire;
            self.outstanding.push_back((start, end, time, false));
        }
        self.max_end = self.max_end.max(end);
        self.trace.segments.push(SegmentPoint {
            time,
            start,
            end,
            retransmit,
        });
    }

    fn on_ack(&mut self, time: f64, seg: &tcp::Packet<&[u8]>) {
        let flags = seg.flags();
        let options = Options::parse(seg.options()).unwrap_or_default();
        if flags.contains(Flags::SYN) {
            self.peer_isn_seen = true;
            if self.offered_scaling {
                self.peer_shift = options.window_scale.unwrap_or(0);
            }
            return;
        }
        if !flags.contains(Flags::ACK) || self.isn.is_none() {
            return;
        }
        let ack = self.rel(seg.ack_number());
        let window = u64::from(seg.window_len()) << self.peer_shift;
        self.trace.acks.push((time, ack));
        self.trace.window.push((time, ack + window));
        for block in options.sack() {
            let (left, right) = (self.rel(block.left), self.rel(block.right));
            self.trace.sacks.push((time, left, right));
        }
        if ack > self.last_ack {
            self.last_ack = ack;
            while let Some(&(_, end, sent, retransmitted)) = self.outstanding.front() {
                if end > ack {
                    break;
                }
                self.outstanding.pop_front();
                if !retransmitted && self.outstanding.front().is_none_or(|n| n.1 > ack) {
                    // The segment whose end the ACK covers exactly gives the sample.
                    self.trace.rtt.push((time, (time - sent) * 1e3));
                }
            }
        }
    }
}

/// The backlog of one router's egress queue over a run (the link direction the router
/// sends on), sampled every `sample_interval`.
#[derive(Debug, Clone, Default)]
pub struct QueueTrace {
    /// Index of the router in the scenario's nodes.
    pub router: usize,
    /// Index of the link in the scenario's links.
    pub link: usize,
    /// Which end of the link the router is (0 = `a`).
    pub side: usize,
    /// `ROUTER-LINK`, the stem of the plot's file names.
    pub name: String,
    /// (time s, backlog bytes, queueing delay ms) at each sample.
    pub samples: Vec<(f64, u64, f64)>,
}
