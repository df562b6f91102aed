//! Where a host's time goes: a CPU cost model for simulated hosts.
//!
//! The protocol core does not know about time spent: it counts the work each call did
//! ([`impnet_core::Stats`]: frames, IPv4 packets, TCP segments, and in
//! [`impnet_core::WorkStats`] the bytes checksummed and copied and the socket calls).
//! A host given a [`CpuProfile`] ([`crate::Sim::set_cpu`]) has one CPU: after every
//! call into its stack the simulator takes the difference of those counters, prices it
//! with the profile, and the CPU is busy that long. Work is serialised: frames that
//! arrive while the CPU is busy wait in the device's receive buffers (a pool of
//! [`CpuProfile::rx_buffers`]; a frame that finds none free is dropped and counted as
//! "no receive buffer", as seed 001 counted them), and what a piece of work sends
//! leaves when the work is done. A saturated host therefore slows its flows down, and
//! its idle share is what is left of the run.
//!
//! The profiles `vax-11/750` and `vax-11/780` are derived from seed 000 alone (see
//! [`CpuProfile::from_breakdown`]): the 1981 kernel profile of a 1024-byte-record
//! transfer (Ethernet 20%, IP 10%, TCP 30%, checksum 25%, user system calls 15%) and
//! its measurement (4 MB in 28 s, the 11/750 saturated), and "on 11/780's, these
//! numbers typically scale up by 1.4".

use std::collections::VecDeque;

use impnet_core::{Duration, IfaceId, Instant, Stats};

/// Picoseconds (costs per byte of a fast machine are fractions of a nanosecond).
pub type Picos = u64;

/// Per-unit costs of one host's CPU, and the device's receive buffer pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuProfile {
    /// Name, for reports.
    pub name: String,
    /// Device and driver, per frame received or sent (the interrupt, the driver).
    pub frame: Picos,
    /// Device, per byte of a frame received or sent (programmed I/O; 0 for DMA).
    pub frame_byte: Picos,
    /// IP, per packet (each fragment) received or sent.
    pub packet: Picos,
    /// TCP, per segment received or sent.
    pub segment: Picos,
    /// The Internet checksum, per byte computed in software.
    pub checksum_byte: Picos,
    /// Copying between the application and the stack, per byte.
    pub copy_byte: Picos,
    /// A system call that moves data (each socket send or receive).
    pub call: Picos,
    /// A hand-off between processes (the application switched in to make its calls):
    /// per batch of socket calls.
    pub handoff: Picos,
    /// An application reading its file system, per byte (an `ftp` server reading the
    /// file it sends): charged by the application, not counted by the stack.
    pub file_byte: Picos,
    /// The device's receive buffers: frames waiting for the CPU beyond these are
    /// dropped ("no receive buffer").
    pub rx_buffers: usize,
    /// The interface computes and checks checksums: the CPU does not pay for them.
    pub checksum_offload: bool,
    /// A send copies the application's bytes (false: a send that hands its pages to
    /// the stack and releases them, seed 000's last rung).
    pub copy_on_send: bool,
    /// A receive copies into the application's buffer (false: page-aligned receive
    /// buffers remapped instead of copied).
    pub copy_on_receive: bool,
}

/// Seed 000's kernel profile: the share of system time in each part.
#[derive(Debug, Clone, Copy)]
pub struct Breakdown {
    /// Ethernet handling (interrupts, the driver).
    pub ethernet: f64,
    /// IP packet processing.
    pub ip: f64,
    /// TCP processing.
    pub tcp: f64,
    /// Checksumming.
    pub checksum: f64,
    /// User system call handling (the call, and the copy between user and kernel).
    pub syscall: f64,
}

/// The measurement a breakdown is scaled to: `bytes` in records of `record` bytes took
/// `seconds` of a saturated CPU, each record one segment with `ip_bytes` of IPv4.
#[derive(Debug, Clone, Copy)]
pub struct Measurement {
    /// Bytes transferred.
    pub bytes: u64,
    /// Record (and segment) size.
    pub record: u64,
    /// Bytes of IPv4 per segment (header, TCP header, data).
    pub ip_bytes: u64,
    /// Seconds the transfer took, the sender's CPU saturated.
    pub seconds: f64,
}

/// The two assumptions [`CpuProfile::from_breakdown`] needs that seed 000 does not
/// state.
#[derive(Debug, Clone, Copy)]
pub struct Assumptions {
    /// ACKs the sender received per data segment: imp's receiver (delayed ACKs, one
    /// per two full-sized segments) gives 0.5.
    pub acks_per_segment: f64,
    /// The share of "user system call handling" that is the per-byte copy between the
    /// user's buffer and the kernel's (the rest is per call).
    pub copy_share_of_syscall: f64,
}

impl Assumptions {
    /// What the shipped VAX profiles assume: 0.5 ACKs per segment, and a quarter of
    /// the system call time in the copy.
    pub const VAX: Assumptions = Assumptions {
        acks_per_segment: 0.5,
        copy_share_of_syscall: 0.25,
    };
}

fn picos(micros: f64) -> Picos {
    (micros * 1e6).round() as Picos
}

impl CpuProfile {
    /// A profile whose costs reproduce `breakdown` on the sending host of `measured`:
    /// per record the sender sends one data frame (one IPv4 packet, one TCP segment)
    /// and receives `acks_per_segment` ACK frames; Ethernet, IP and TCP time is spread
    /// over those frames, packets and segments alike; the checksum runs over the IPv4
    /// bytes of both; system call time is one call per record plus the copy of its
    /// bytes, in the proportion the assumptions give.
    pub fn from_breakdown(
        name: &str,
        breakdown: Breakdown,
        measured: Measurement,
        assume: Assumptions,
    ) -> CpuProfile {
        let records = measured.bytes as f64 / measured.record as f64;
        let per_record = measured.seconds * 1e6 / records; // µs
        let units = 1.0 + assume.acks_per_segment;
        let ack_ip_bytes = 40.0;
        let checksummed = measured.ip_bytes as f64 + assume.acks_per_segment * ack_ip_bytes;
        let syscall = breakdown.syscall * per_record;
        CpuProfile {
            name: name.to_string(),
            frame: picos(breakdown.ethernet * per_record / units),
            frame_byte: 0,
            packet: picos(breakdown.ip * per_record / units),
            segment: picos(breakdown.tcp * per_record / units),
            checksum_byte: picos(breakdown.checksum * per_record / checksummed),
            copy_byte: picos(syscall * assume.copy_share_of_syscall / measured.record as f64),
            call: picos(syscall * (1.0 - assume.copy_share_of_syscall)),
            handoff: 0,
            file_byte: 0,
            rx_buffers: 32,
            checksum_offload: false,
            copy_on_send: true,
            copy_on_receive: true,
        }
    }

    /// Seed 000's 11/750: its breakdown scaled to 4 MB in 28 s in 1024-byte records
    /// (1064 bytes of IPv4 each), with [`Assumptions::VAX`].
    pub fn vax_11_750() -> CpuProfile {
        CpuProfile::from_breakdown(
            "vax-11/750",
            Breakdown {
                ethernet: 0.20,
                ip: 0.10,
                tcp: 0.30,
                checksum: 0.25,
                syscall: 0.15,
            },
            Measurement {
                bytes: 4 << 20,
                record: 1024,
                ip_bytes: 1024 + 40,
                seconds: 28.0,
            },
            Assumptions::VAX,
        )
    }

    /// The 11/780: the 11/750 1.4 times faster ("on 11/780's, these numbers typically
    /// scale up by 1.4").
    pub fn vax_11_780() -> CpuProfile {
        let slow = CpuProfile::vax_11_750();
        let scale = |p: Picos| (p as f64 / 1.4).round() as Picos;
        CpuProfile {
            name: "vax-11/780".to_string(),
            frame: scale(slow.frame),
            frame_byte: scale(slow.frame_byte),
            packet: scale(slow.packet),
            segment: scale(slow.segment),
            checksum_byte: scale(slow.checksum_byte),
            copy_byte: scale(slow.copy_byte),
            call: scale(slow.call),
            handoff: scale(slow.handoff),
            file_byte: scale(slow.file_byte),
            ..slow
        }
    }

    /// A shipped profile by name: `vax-11/750` or `vax-11/780`.
    pub fn builtin(name: &str) -> Option<CpuProfile> {
        match name {
            "vax-11/750" => Some(CpuProfile::vax_11_750()),
            "vax-11/780" => Some(CpuProfile::vax_11_780()),
            _ => None,
        }
    }

    /// The CPU time `work` costs.
    pub fn cost(&self, work: &Work) -> Duration {
        let copied = if self.copy_on_send {
            work.copied_from_user
        } else {
            0
        } + if self.copy_on_receive {
            work.copied_to_user
        } else {
            0
        };
        let checksummed = if self.checksum_offload {
            0
        } else {
            work.checksummed_bytes
        };
        let handoffs = u64::from(work.socket_calls > 0);
        let total: u128 = [
            (work.frames, self.frame),
            (work.frame_bytes, self.frame_byte),
            (work.packets, self.packet),
            (work.segments, self.segment),
            (checksummed, self.checksum_byte),
            (copied, self.copy_byte),
            (work.socket_calls, self.call),
            (handoffs, self.handoff),
        ]
        .iter()
        .map(|&(count, cost)| u128::from(count) * u128::from(cost))
        .sum();
        Duration::from_nanos(u64::try_from(total.div_ceil(1000)).unwrap_or(u64::MAX))
    }
}

/// Work counted between two looks at a stack's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames received and sent.
    pub frames: u64,
    /// Bytes of those frames.
    pub frame_bytes: u64,
    /// IPv4 packets (fragments) received and sent.
    pub packets: u64,
    /// TCP segments received and sent.
    pub segments: u64,
    /// Bytes checksummed in software.
    pub checksummed_bytes: u64,
    /// Socket calls that moved data.
    pub socket_calls: u64,
    /// Bytes copied in by sends.
    pub copied_from_user: u64,
    /// Bytes copied out by receives.
    pub copied_to_user: u64,
}

impl Work {
    /// The running totals in a stack's counters (`tx_frames` and `tx_bytes` summed
    /// over its interfaces, which the caller passes).
    pub fn totals(stats: &Stats, tx_frames: u64, tx_bytes: u64, rx_bytes: u64) -> Work {
        Work {
            frames: stats.link.rx_frames + tx_frames,
            frame_bytes: rx_bytes + tx_bytes,
            packets: stats.ipv4.rx_packets + stats.ipv4.tx_packets,
            segments: stats.tcp.rx_segments + stats.tcp.tx_segments,
            checksummed_bytes: stats.work.checksummed_bytes,
            socket_calls: stats.work.socket_calls,
            copied_from_user: stats.work.copied_from_user,
            copied_to_user: stats.work.copied_to_user,
        }
    }

    /// What was done since `before`.
    pub fn since(&self, before: &Work) -> Work {
        Work {
            frames: self.frames.saturating_sub(before.frames),
            frame_bytes: self.frame_bytes.saturating_sub(before.frame_bytes),
            packets: self.packets.saturating_sub(before.packets),
            segments: self.segments.saturating_sub(before.segments),
            checksummed_bytes: self
                .checksummed_bytes
                .saturating_sub(before.checksummed_bytes),
            socket_calls: self.socket_calls.saturating_sub(before.socket_calls),
            copied_from_user: self
                .copied_from_user
                .saturating_sub(before.copied_from_user),
            copied_to_user: self.copied_to_user.saturating_sub(before.copied_to_user),
        }
    }
}

/// What a host's CPU did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuReport {
    /// Time the CPU was busy.
    pub busy: Duration,
    /// Frames dropped because every receive buffer held a frame waiting for the CPU.
    pub no_rx_buffer: u64,
    /// The most frames that waited for the CPU at once.
    pub max_backlog: usize,
    /// The work done, summed.
    pub work: Work,
}

/// A simulated host's CPU: its profile and its state.
pub(crate) struct Cpu {
    pub(crate) profile: CpuProfile,
    /// The CPU is busy until then.
    pub(crate) busy_until: Instant,
    /// The stack's counters when the CPU last charged for them.
    pub(crate) seen: Work,
    /// Frames in receive buffers, waiting for the CPU.
    pub(crate) rx: VecDeque<(IfaceId, Vec<u8>)>,
    /// Frames sent by work not finished yet: (when it finishes, interface, frame).
    pub(crate) outbox: VecDeque<(Instant, IfaceId, Vec<u8>)>,
    /// Buffers to reuse.
    pub(crate) spare: Vec<Vec<u8>>,
    pub(crate) report: CpuReport,
}

impl Cpu {
    pub(crate) fn new(profile: CpuProfile, seen: Work) -> Cpu {
        Cpu {
            profile,
            busy_until: Instant::ZERO,
            seen,
            rx: VecDeque::new(),
            outbox: VecDeque::new(),
            spare: Vec::new(),
            report: CpuReport::default(),
        }
    }

    /// Charges the work done since the last charge, starting no earlier than `now`;
    /// returns when the CPU is done with it.
    pub(crate) fn charge(&mut self, now: Instant, totals: Work) -> Instant {
        let work = totals.since(&self.seen);
        self.seen = totals;
        let cost = self.profile.cost(&work);
        self.add_work(&work);
        self.spend(now, cost)
    }

    /// The CPU is busy for `cost` more, from `now` or when it is free.
    pub(crate) fn spend(&mut self, now: Instant, cost: Duration) -> Instant {
        if cost > Duration::ZERO {
            self.busy_until = self.busy_until.max(now) + cost;
            self.report.busy = self.report.busy + cost;
        }
        self.busy_until.max(now)
    }

    fn add_work(&mut self, w: &Work) {
        let r = &mut self.report.work;
        r.frames += w.frames;
        r.frame_bytes += w.frame_bytes;
        r.packets += w.packets;
        r.segments += w.segments;
        r.checksummed_bytes += w.checksummed_bytes;
        r.socket_calls += w.socket_calls;
        r.copied_from_user += w.copied_from_user;
        r.copied_to_user += w.copied_to_user;
    }

    /// A frame arrived: into a free receive buffer, or dropped.
    pub(crate) fn receive(&mut self, iface: IfaceId, frame: &[u8]) {
        if self.rx.len() >= self.profile.rx_buffers {
            self.report.no_rx_buffer += 1;
            return;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        self.rx.push_back((iface, buf));
        self.report.max_backlog = self.report.max_backlog.max(self.rx.len());
    }

    /// When this CPU next has something to do: a frame to hand to the link, or a
    /// received frame to process once the CPU is free.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        let out = self.outbox.front().map(|&(t, _, _)| t);
        let rx = (!self.rx.is_empty()).then_some(self.busy_until);
        match (out, rx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vax_profile_reproduces_its_breakdown_and_the_28_seconds() {
        let vax = CpuProfile::vax_11_750();
        // One 1024-byte record: a data frame out and half an ACK in, per the
        // assumptions; priced over 4096 records it is 28 s.
        let per_record = Work {
            frames: 3,
            frame_bytes: 0,
            packets: 3,
            segments: 3,
            checksummed_bytes: 2 * 1064 + 40,
            socket_calls: 2,
            copied_from_user: 2048,
            copied_to_user: 0,
        };
        let two = vax.cost(&per_record).as_secs_f64();
        let total = two / 2.0 * 4096.0;
        assert!((total - 28.0).abs() < 0.01, "{total}");
        let checksum = vax.checksum_byte as f64 * (2.0 * 1064.0 + 40.0) * 1e-12;
        assert!((checksum / two - 0.25).abs() < 0.001, "{}", checksum / two);
        let tcp = vax.segment as f64 * 3.0 * 1e-12;
        assert!((tcp / two - 0.30).abs() < 0.001);
    }

    #[test]
    fn the_780_is_1_4_times_the_750_and_toggles_remove_their_costs() {
        let slow = CpuProfile::vax_11_750();
        let fast = CpuProfile::vax_11_780();
        let work = Work {
            frames: 10,
            packets: 10,
            segments: 7,
            checksummed_bytes: 5000,
            socket_calls: 3,
            copied_from_user: 3000,
            copied_to_user: 1000,
            ..Work::default()
        };
        let ratio = slow.cost(&work).as_secs_f64() / fast.cost(&work).as_secs_f64();
        assert!((ratio - 1.4).abs() < 0.001, "{ratio}");
        let offload = CpuProfile {
            checksum_offload: true,
            ..slow.clone()
        };
        let saved = slow.cost(&work).as_nanos() - offload.cost(&work).as_nanos();
        assert!(saved.abs_diff(slow.checksum_byte * 5000 / 1000) <= 1);
        let zero_copy = CpuProfile {
            copy_on_send: false,
            copy_on_receive: false,
            ..slow.clone()
        };
        let saved = slow.cost(&work).as_nanos() - zero_copy.cost(&work).as_nanos();
        assert!(saved.abs_diff(slow.copy_byte * 4000 / 1000) <= 1);
    }
}
