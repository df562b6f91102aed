//! The loopback interface: datagrams to 127.0.0.0/8 and to the stack's own addresses
//! never reach a device. Output puts them in a queue inside the stack; the next
//! [`Stack::poll_transmit`] (or [`Stack::handle_timeout`]) takes them in as if they had
//! arrived, at the same instant. So a socket can talk to another socket of the same
//! stack, or to itself (RFC 9293 §3.5, simultaneous open of a connection whose two
//! ends are the same socket), with no network, as on Linux (`lo`), smoltcp and lwIP.
//!
//! The queue is bounded by `StackConfig::tx_queue_limit`; a poll takes in at most
//! [`LOOPBACK_ROUNDS`] rounds (each the packets queued when it began), so one call
//! always returns even if two sockets answer each other for ever. What is left is due
//! at once: [`Stack::poll_timeout`] gives the instant it was queued.
//!
//! A driver that models the loopback's cost (the simulator, for a host with a CPU)
//! carries it instead ([`Stack::set_loopback_by_driver`]): then a looped packet is
//! returned by [`Stack::poll_transmit`] on [`IfaceId::LOOPBACK`](crate::IfaceId::LOOPBACK)
//! as a bare IP packet, and the driver hands it back with [`Stack::handle_looped_packet`]
//! when it chooses. The stack stays clock-free either way; only who holds the queue
//! changes.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ethernet::{self, EtherType};

use crate::iface::IfaceId;
use crate::stack::ip::OutputError;
use crate::stack::{Outgoing, Stack, Transmit};
use crate::stats::IfaceStats;
use crate::time::Instant;

/// IP MTU of the loopback interface: the largest buffer the packet pool recycles, so a
/// looped segment costs no allocation (Linux's `lo` has 65536).
pub const LOOPBACK_MTU: usize = 16 * 1024;

/// Rounds of looped packets one [`Stack::poll_transmit`] call takes in at most.
pub(crate) const LOOPBACK_ROUNDS: usize = 256;

/// True for 127.0.0.0/8, the loopback network (RFC 1122 §3.2.1.3 (g): such an address
/// "MUST NOT appear outside a host").
pub fn is_loopback_addr(addr: Ipv4Addr) -> bool {
    addr.octets()[0] == 127
}

/// The loopback interface's state: packets looped back and not yet taken in.
#[derive(Debug, Default)]
pub(crate) struct Loopback {
    /// Whole IPv4 packets, oldest first. Invariant: at most `tx_queue_limit`.
    queue: VecDeque<Vec<u8>>,
    /// When the oldest packet in `queue` was looped (None when it is empty).
    since: Option<Instant>,
    /// Counters: a looped packet counts as sent and, when taken in, as received.
    pub(crate) stats: IfaceStats,
    /// The driver carries looped packets ([`Stack::set_loopback_by_driver`]): they go
    /// on the transmit queue, `queue` stays empty.
    by_driver: bool,
}

impl Loopback {
    /// True when no packet waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// When the oldest waiting packet was looped: it is due then.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.since
    }
}

impl Stack {
    /// The loopback interface's counters (also [`Stack::iface_stats`] of
    /// [`IfaceId::LOOPBACK`](crate::IfaceId::LOOPBACK)).
    pub fn loopback_stats(&self) -> &IfaceStats {
        &self.loopback.stats
    }

    /// Let the driver carry looped packets (true) or take them in inside
    /// [`Stack::poll_transmit`] (false, the default). When true, `poll_transmit` returns
    /// each looped packet as a [`Transmit`] on [`IfaceId::LOOPBACK`], the bare IP packet
    /// in the buffer (no link header), and the driver gives it back with
    /// [`Stack::handle_looped_packet`] whenever it models the loop to be done: a
    /// simulator charging the host's CPU for it, say. Packets already looped when it
    /// changes are taken in as before.
    pub fn set_loopback_by_driver(&mut self, on: bool) {
        self.loopback.by_driver = on;
    }

    /// A packet [`Stack::poll_transmit`] returned on [`IfaceId::LOOPBACK`] (see
    /// [`Stack::set_loopback_by_driver`]), taken in as if it had arrived.
    pub fn handle_looped_packet(&mut self, now: Instant, packet: &[u8]) {
        self.handle_looped(now, packet);
    }

    /// Write a looped packet from the transmit queue into `buf` for the driver (None:
    /// it does not fit, counted as for any frame).
    pub(crate) fn pop_looped(&mut self, frame: Outgoing, buf: &mut [u8]) -> Option<Transmit> {
        let len = frame.payload.len();
        let Some(out) = buf.get_mut(..len) else {
            self.stats.link.tx_buffer_too_small += 1;
            self.pool.give(frame.payload);
            return None;
        };
        crate::tcp::buffer::copy_bytes(out, &frame.payload);
        self.pool.give(frame.payload);
        Some(Transmit {
            iface: IfaceId::LOOPBACK,
            len,
        })
    }

    /// Put an IPv4 packet for one of our addresses on the loopback queue.
    pub(crate) fn loop_back(&mut self, now: Instant, packet: Vec<u8>) -> Result<(), OutputError> {
        if self.loopback.by_driver {
            let len = packet.len() as u64;
            let ethertype = if packet.first().is_some_and(|b| b >> 4 == 6) {
                EtherType::Ipv6
            } else {
                EtherType::Ipv4
            };
            self.enqueue_frame(Outgoing {
                iface: IfaceId::LOOPBACK,
                dst_mac: ethernet::Address::BROADCAST,
                ethertype,
                payload: packet,
                gso_size: 0,
            })?;
            self.loopback.stats.tx_frames += 1;
            self.loopback.stats.tx_bytes += len;
            return Ok(());
        }
        if self.loopback.queue.len() >= self.config.tx_queue_limit {
            self.stats.link.tx_queue_full += 1;
            self.pool.give(packet);
            return Err(OutputError::QueueFull);
        }
        self.loopback.stats.tx_frames += 1;
        self.loopback.stats.tx_bytes += packet.len() as u64;
        self.loopback.since.get_or_insert(now);
        self.loopback.queue.push_back(packet);
        Ok(())
    }

    /// Take in one round of looped packets (those queued now; what they cause waits for
    /// the next round). False when none waited.
    pub(crate) fn run_loopback(&mut self, now: Instant) -> bool {
        let round = self.loopback.queue.len();
        if round == 0 {
            return false;
        }
        self.loopback.since = Some(now);
        for _ in 0..round {
            let Some(packet) = self.loopback.queue.pop_front() else {
                break;
            };
            self.handle_looped(now, &packet);
            self.pool.give(packet);
        }
        if self.loopback.queue.is_empty() {
            self.loopback.since = None;
        }
        true
    }

    /// A looped IPv4 packet, taken in as if it had arrived: validated (its checksum was
    /// never at risk and is not verified, as Linux's `lo` does), reassembled if a
    /// fragment, and delivered.
    fn handle_looped(&mut self, now: Instant, bytes: &[u8]) {
        self.loopback.stats.rx_frames += 1;
        self.loopback.stats.rx_bytes += bytes.len() as u64;
        if bytes.first().is_some_and(|b| b >> 4 == 6) {
            return self.handle_looped6(now, bytes);
        }
        self.stats.ipv4.rx_packets += 1;
        let Some(packet) = self.validate_ipv4(bytes, false) else {
            return;
        };
        let dst = packet.dst_addr();
        // A multicast datagram looped for the host's members (`IP_MULTICAST_LOOP`).
        let multicast = dst.is_multicast() && self.admitted_anywhere_v4(dst, packet.src_addr());
        if !multicast && !self.is_local_addr(dst) {
            self.stats.ipv4.rx_not_for_us += 1;
            return;
        }
        self.take_in(now, &packet, multicast, false);
    }
}
