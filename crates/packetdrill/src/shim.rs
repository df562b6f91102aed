//! The stack under test on virtual time, and its one interface.
//!
//! `Shim` owns a [`Stack`] and the clock. Time moves only when packetdrill says so
//! (`usleep`, each `gettimeofday` by a microsecond so its spin loops end, and
//! `netdev_receive` when the stack has nothing to send yet) or when a blocking call
//! has nothing else to wait for. Every due timer fires at its own instant, so a
//! packet is stamped with the time the stack sent it.
//!
//! The link: packetdrill hands over and expects bare IP packets, which is what an
//! IP-level interface (`Medium::Ip`, no Ethernet, no ARP) takes and gives.
//!
//! The files of its methods are in `shim/`: the socket calls (`socket.rs`),
//! `getsockopt` and `setsockopt` (`sockopt.rs`), poll and epoll (`poll.rs`), and the
//! shim's side of the send-buffer model, the error queue and Fast Open (`sndbuf.rs`,
//! `errqueue.rs`, `fastopen.rs`). The types they work on are in leaves that never import
//! `Shim` ([`crate::socket`], [`crate::sndbuf`], [`crate::errqueue`],
//! [`crate::fastopen`], [`crate::poll`]).

mod errqueue;
mod fastopen;
mod poll;
mod sndbuf;
mod socket;
mod sockopt;

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

use impnet_core::tcp::{MtuProbing, TcpConfig, TcpEvent, TcpHandle};
use impnet_core::{
    Duration, Event, IfaceConfig, IfaceId, Instant, Offloads, Secret, Stack, StackConfig,
};
use impnet_wire::{ipv4, ipv6};

use crate::flags::Flags;
use crate::socket::Fd;

/// `gettimeofday` on the Unix clock: virtual zero is this many seconds after 1970.
pub(crate) const EPOCH_SECS: u64 = 1_000_000_000;
/// Timer rounds one advance runs at one instant before it gives up on a deadline that
/// does not move (it would be a bug in the stack; the shim must not spin for ever).
const SAME_INSTANT_ROUNDS: u32 = 10_000;

/// The largest TSO packet the interface takes (an IPv4 packet's limit).
const TSO_MAX: usize = 65535;

/// The lowest file descriptor handed out (0-2 are stdio on Linux).
const FIRST_FD: i32 = 3;

/// A packet the stack sent, with when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// Virtual time it left.
    pub at: Instant,
    /// The IP packet.
    pub packet: Vec<u8>,
}

/// The stack, its clock, its packets out and its file descriptors.
#[derive(Debug)]
pub struct Shim {
    pub(crate) stack: Stack,
    pub(crate) now: Instant,
    iface: IfaceId,
    pub(crate) flags: Flags,
    outbound: VecDeque<Sent>,
    pub(crate) fds: BTreeMap<i32, Fd>,
    /// Moves whenever anything changed (time, input, a socket call): blocked callers
    /// look again when it does.
    pub(crate) generation: u64,
    frame: Vec<u8>,
    /// When each connection first became writable or readable (its handshake done, as
    /// far as the shim sees it): Linux starts the clock of `tcpi_last_data_recv` at
    /// the handshake, before any data arrives.
    pub(crate) opened_at: BTreeMap<TcpHandle, Instant>,
}

impl Shim {
    /// A stack set up as `flags` say, at virtual time zero.
    pub fn new(flags: Flags) -> Shim {
        let tcp = TcpConfig {
            send_buffer: flags.sndbuf,
            recv_buffer: flags.rcvbuf,
            congestion: flags.congestion,
            ecn: flags.ecn,
            mss: u16::try_from(flags.mtu - 40).unwrap_or(u16::MAX),
            rto_floor: flags.rto_floor,
            // Linux's `tcp_reset`: data that came before a RST stays readable, and a
            // reset child stays in the accept queue.
            reset_keeps_data: true,
            // Linux's `tcp_ack`: an ACK of data not yet sent is dropped without an ACK.
            unsent_ack_silent: true,
            // Linux's `tcp_rcv_synsent_state_process`: a SYN-ACK echoing a timestamp
            // we never sent is refused with a RST.
            syn_sent_tsecr_check: true,
            // Linux's lone FIN: it goes whatever cwnd says (`tcp_cwnd_test`), and the
            // loss probe after it resends it alone.
            lone_fin_as_linux: true,
            // Linux's window rules where they differ from the RFCs' (the scripts are
            // Linux's): slow start grows by all a stretch ACK acknowledged
            // (`tcp_slow_start`), CUBIC's ssthresh comes from cwnd, recovery ends with
            // cwnd = ssthresh (`tcp_end_cwnd_reduction`).
            abc_limit: None,
            // Linux's HyStart leaves slow start at once on the delay signal, with an
            // RTT sample from every ACK.
            hystart_exit_at_once: true,
            cubic_ssthresh_from_cwnd: true,
            cwnd_ssthresh_after_recovery: true,
            // Linux delays the ACK of a reply to data just sent (`icsk_ack.pingpong`).
            interactive_delayed_ack: true,
            // TCP_INFO's `tcpi_busy_time` and `tcpi_rwnd_limited`.
            send_chronographs: true,
            // Linux grows cwnd by what an ACK newly delivered (`tcp_cong_control`).
            cwnd_growth_newly_delivered: true,
            // Linux's `tcp_mtu_probing` (0 by default: neither black-hole detection
            // nor probing) and `tcp_base_mss`.
            black_hole_detection: flags.mtu_probing != MtuProbing::Off,
            mtu_probing: flags.mtu_probing,
            base_mss: flags.base_mss,
            ..TcpConfig::default()
        };
        // IPv6 as on packetdrill's TUN device: one static address, no router to ask
        // (no solicitations or advertisements), no one to check for duplicates.
        let ipv6 = impnet_core::Ipv6Config {
            dad_transmits: 0,
            accept_ra: false,
            slaac: false,
            router_solicitations: 0,
            ..impnet_core::Ipv6Config::default()
        };
        let config = StackConfig {
            tcp,
            ipv6,
            ..StackConfig::default()
        };
        let mut seed = [0u8; Secret::LEN];
        seed[..8].copy_from_slice(&flags.seed.to_le_bytes());
        let mut stack = Stack::new(config, Secret::from_bytes(seed));
        // packetdrill's own TUN device takes TSO packets (TUN_F_TSO4): Linux hands it
        // one large segment per burst, and the scripts are written that way.
        let mut iface_config =
            IfaceConfig::ip(flags.mtu).with_offloads(Offloads::NONE.with_tso(TSO_MAX));
        iface_config.addrs.push(ipv4::Cidr {
            address: flags.local_ip,
            prefix_len: flags.prefix_len,
        });
        let _ = stack.tcp_set_fast_open_key(None, &flags.fastopen_key);
        let iface = stack.add_interface(iface_config);
        stack
            .routes_mut()
            .add(ipv4::Cidr::DEFAULT_ROUTE, Some(flags.gateway_ip), iface);
        let cidr6 = ipv6::Cidr {
            address: flags.local_ip6,
            prefix_len: flags.prefix_len6,
        };
        stack.add_address6(Instant::from_nanos(0), iface, cidr6);
        stack
            .routes6_mut()
            .add(ipv6::Cidr::DEFAULT_ROUTE, Some(flags.gateway_ip6), iface);
        let mut shim = Shim {
            stack,
            now: Instant::from_nanos(0),
            iface,
            frame: vec![0; TSO_MAX.max(flags.mtu)],
            flags,
            outbound: VecDeque::new(),
            fds: BTreeMap::new(),
            generation: 0,
            opened_at: BTreeMap::new(),
        };
        shim.flush();
        shim
    }

    /// Virtual time in microseconds.
    pub fn now_micros(&self) -> u64 {
        self.now.as_nanos() / 1000
    }

    /// A new file descriptor number: one the host also has open (on `/dev/null`), so
    /// the host gives it to nobody else while the shim uses it. packetdrill closes
    /// the sockets a script leaves open with the C library's own `close`, not the
    /// table's, at the end of every run: that close then succeeds. The lowest free
    /// number the shim knows of when the host has none to give.
    pub(crate) fn free_fd(&self) -> i32 {
        // SAFETY: open with a constant path and flags.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd >= 0 && !self.fds.contains_key(&fd) {
            return fd;
        }
        let mut fd = FIRST_FD;
        while self.fds.contains_key(&fd) {
            fd += 1;
        }
        fd
    }

    /// Give the host's descriptor behind a shim descriptor back.
    pub(crate) fn release_fd(fd: i32) {
        // SAFETY: closing a descriptor free_fd opened for this number.
        unsafe { libc::close(fd) };
    }

    /// A packet from the script (an IP packet) goes into the stack now.
    pub fn packet_in(&mut self, packet: &[u8]) {
        let writers = self.before_packet();
        self.stack.handle_frame(self.now, self.iface, packet);
        self.flush();
        self.after_packet(&writers);
    }

    /// The oldest packet the stack sent that nobody took yet.
    pub fn next_sent(&mut self) -> Option<Sent> {
        self.outbound.pop_front()
    }

    /// Whether a packet waits in [`Shim::next_sent`].
    pub fn has_sent(&self) -> bool {
        !self.outbound.is_empty()
    }

    /// Move the clock to `to` (never back), firing each timer at its own instant.
    pub fn advance_to(&mut self, to: Instant) {
        let mut rounds = 0;
        while let Some(due) = self.stack.poll_timeout() {
            if due > to {
                break;
            }
            if due <= self.now {
                rounds += 1;
                if rounds > SAME_INSTANT_ROUNDS {
                    break;
                }
            }
            self.now = self.now.max(due);
            self.stack.handle_timeout(self.now);
            self.flush();
        }
        if to > self.now {
            self.now = to;
            self.generation += 1;
        }
    }

    /// Move the clock by `by`.
    pub fn advance_by(&mut self, by: Duration) {
        self.advance_to(self.now + by);
    }

    /// Move the clock to the stack's next deadline (at most `limit`) and fire what is
    /// due then; false when no deadline comes before `limit` (then the clock is at
    /// `limit`, or unmoved without one).
    pub fn advance_to_next_deadline(&mut self, limit: Option<Instant>) -> bool {
        match (self.stack.poll_timeout(), limit) {
            (Some(due), Some(limit)) if due > limit => {
                self.advance_to(limit);
                false
            }
            (Some(due), _) => {
                self.advance_to(due.max(self.now));
                true
            }
            (None, Some(limit)) => {
                self.advance_to(limit);
                false
            }
            (None, None) => false,
        }
    }

    /// Take everything the stack wants to send, stamped now.
    pub(crate) fn flush(&mut self) {
        self.generation += 1;
        while let Some(transmit) = self.stack.poll_transmit(self.now, &mut self.frame) {
            self.outbound.push_back(Sent {
                at: self.now,
                packet: self.frame[..transmit.len].to_vec(),
            });
        }
        // Linux splits an skb where a packet of it ends (`tso_fragment`).
        self.track_sent();
        while let Some(event) = self.stack.poll_event() {
            match event {
                Event::Tcp(TcpEvent::Writable(handle) | TcpEvent::Readable(handle)) => {
                    self.opened_at.entry(handle).or_insert(self.now);
                }
                Event::Tcp(TcpEvent::Closed(handle)) => {
                    self.opened_at.remove(&handle);
                }
                _ => {}
            }
        }
        self.update_error_queues();
    }

    /// The route MTU less the IP (IPv4 or, with `v6`, IPv6) and TCP headers.
    pub(crate) fn route_mss(&self, v6: bool) -> u16 {
        let headers = if v6 { 60 } else { 40 };
        u16::try_from(self.flags.mtu.saturating_sub(headers)).unwrap_or(u16::MAX)
    }

    /// Our address of the family (`v6`): the interface's one source address of it.
    pub(crate) fn local_ip(&self, v6: bool) -> IpAddr {
        if v6 {
            IpAddr::V6(self.flags.local_ip6)
        } else {
            IpAddr::V4(self.flags.local_ip)
        }
    }

    /// Whether `addr` may be bound: ours, or the unspecified or loopback address.
    pub(crate) fn bindable(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip();
        ip.is_unspecified() || ip.is_loopback() || ip == self.local_ip(addr.is_ipv6())
    }
}
