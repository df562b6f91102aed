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
//! The loopback interface is charged too: a host with a CPU carries its own looped
//! datagrams (datagrams to its own addresses and 127/8; see
//! [`impnet_core::Stack::set_loopback_by_driver`]). A looped datagram costs what any
//! datagram costs at IP and TCP (both ways: out and in), plus the loop's own work,
//! [`CpuProfile::loopback`], once into the loop and once out of it: by default a device
//! frame's cost (`frame`, and `frame_byte` per byte), the driver's code run on a loop
//! that has no wire. The loop has no rate, no delay and no loss: a datagram is in the
//! host's receive buffers the moment the work that sent it is done, and waits there for
//! the CPU like any frame.
//!
//! The profiles `vax-11/750` and `vax-11/780` are derived from seed 000 alone (see
//! [`CpuProfile::from_breakdown`]): the 1981 kernel profile of a 1024-byte-record
//! transfer (Ethernet 20%, IP 10%, TCP 30%, checksum 25%, user system calls 15%) and
//! its measurement (4 MB in 28 s, the 11/750 saturated), and "on 11/780's, these
//! numbers typically scale up by 1.4".

use std::collections::VecDeque;

use impnet_core::{Duration, IfaceId, IfaceStats, Instant, Stats};

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
    /// The loopback interface, per datagram put into the loop and per datagram taken
    /// from it. None: as a device frame (`frame`, plus `frame_byte` per byte), the
    /// driver's code run on a loop without a wire; `Some(0)`: a cross-patch inside the
    /// stack that costs nothing beyond IP and TCP.
    pub loopback: Option<Picos>,
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
            loopback: None,
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

    /// The 1975 ELF machine of seed 004 (a PDP-11/20 running the SU-DSL TCP), from the
    /// report's delay budget of one looped letter alone (Table V, corrected for the
    /// timestamps' overhead): TCP 46.1 ms, the RTP (the VDH line's driver) 50.1 ms, the
    /// user 49.7 ms. A looped letter passes TCP twice (out and in), the driver twice
    /// and the user twice (SEND, RECEIVE), so 23.05 ms per segment, 25.05 ms per
    /// frame, 24.85 ms per socket call; 8 receive buffers (the VDH's). The same
    /// figures as the `elf-1975` profile of `scenarios/seeds/004-selfloop-letters.toml`.
    pub fn elf_1975() -> CpuProfile {
        CpuProfile {
            name: "elf-1975".to_string(),
            frame: picos(25_050.0),
            frame_byte: 0,
            file_byte: 0,
            loopback: None,
            packet: 0,
            segment: picos(23_050.0),
            checksum_byte: 0,
            copy_byte: 0,
            call: picos(24_850.0),
            handoff: 0,
            rx_buffers: 8,
            checksum_offload: false,
            copy_on_send: true,
            copy_on_receive: true,
        }
    }

    /// The CPU time `work` costs.
    pub fn cost(&self, work: &Work) -> Duration {
        let total = self.cost_by_stage(work).total();
        Duration::from_nanos(u64::try_from(total.div_ceil(1000)).unwrap_or(u64::MAX))
    }

    /// What `work` costs, stage by stage, in picoseconds.
    pub fn cost_by_stage(&self, work: &Work) -> Stages {
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
        let (loop_each, loop_byte) = match self.loopback {
            None => (self.frame, self.frame_byte),
            Some(each) => (each, 0),
        };
        let sum = |terms: &[(u64, Picos)]| -> u128 {
            terms
                .iter()
                .map(|&(count, cost)| u128::from(count) * u128::from(cost))
                .sum()
        };
        Stages {
            driver: sum(&[
                (work.frames, self.frame),
                (work.frame_bytes, self.frame_byte),
                (work.looped, loop_each),
                (work.looped_bytes, loop_byte),
            ]),
            ip: sum(&[(work.packets, self.packet)]),
            tcp: sum(&[(work.segments, self.segment)]),
            checksum: sum(&[(checksummed, self.checksum_byte)]),
            user: sum(&[
                (copied, self.copy_byte),
                (work.socket_calls, self.call),
                (handoffs, self.handoff),
            ]),
        }
    }
}

/// CPU time by stage, picoseconds: where a host's time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    /// The device's driver, and the loopback interface's own work.
    pub driver: u128,
    /// IP, per packet.
    pub ip: u128,
    /// TCP, per segment.
    pub tcp: u128,
    /// Checksums computed in software.
    pub checksum: u128,
    /// The user's side: socket calls, copies, hand-offs.
    pub user: u128,
}

impl Stages {
    /// All of it.
    pub fn total(&self) -> u128 {
        self.driver + self.ip + self.tcp + self.checksum + self.user
    }

    /// What was spent since `before`.
    pub fn since(&self, before: &Stages) -> Stages {
        Stages {
            driver: self.driver - before.driver,
            ip: self.ip - before.ip,
            tcp: self.tcp - before.tcp,
            checksum: self.checksum - before.checksum,
            user: self.user - before.user,
        }
    }

    fn add(&mut self, other: &Stages) {
        self.driver += other.driver;
        self.ip += other.ip;
        self.tcp += other.tcp;
        self.checksum += other.checksum;
        self.user += other.user;
    }
}

/// Work counted between two looks at a stack's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames received and sent.
    pub frames: u64,
    /// Bytes of those frames.
    pub frame_bytes: u64,
    /// Datagrams put into the loopback interface and taken from it.
    pub looped: u64,
    /// Bytes of those datagrams.
    pub looped_bytes: u64,
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
    /// over its interfaces, which the caller passes, and the loopback interface's).
    pub fn totals(
        stats: &Stats,
        tx_frames: u64,
        tx_bytes: u64,
        rx_bytes: u64,
        looped: &IfaceStats,
    ) -> Work {
        Work {
            frames: stats.link.rx_frames + tx_frames,
            frame_bytes: rx_bytes + tx_bytes,
            looped: looped.tx_frames + looped.rx_frames,
            looped_bytes: looped.tx_bytes + looped.rx_bytes,
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
            looped: self.looped.saturating_sub(before.looped),
            looped_bytes: self.looped_bytes.saturating_sub(before.looped_bytes),
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
    /// The busy time by stage, picoseconds (`busy` is their sum, rounded up per
    /// charge to the nanosecond).
    pub stages: Stages,
}

/// One looped datagram's passage through a host with a CPU (kept when asked:
/// [`crate::Sim::record_loopback`]): the model's own timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopRecord {
    /// The datagram's length (IP header included).
    pub bytes: usize,
    /// The work that sent it was done: it went into the loop (and at once into a
    /// receive buffer: the loop has no delay).
    pub looped: Instant,
    /// The CPU took it from its receive buffer (later than `looped` when busy).
    pub taken: Option<Instant>,
    /// The CPU was done with it and with what taking it in made the stack send.
    pub done: Option<Instant>,
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
    /// Looped datagrams' timestamps (None: not kept).
    pub(crate) loop_log: Option<Vec<LoopRecord>>,
    /// Index in `loop_log` of the next looped datagram the CPU will take.
    pub(crate) loop_next: usize,
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
            loop_log: None,
            loop_next: 0,
        }
    }

    /// A looped datagram whose sending work is done, `now`: into a receive buffer.
    pub(crate) fn receive_looped(&mut self, now: Instant, packet: &[u8]) {
        let before = self.report.no_rx_buffer;
        self.receive(IfaceId::LOOPBACK, packet);
        if let Some(log) = &mut self.loop_log
            && self.report.no_rx_buffer == before
        {
            log.push(LoopRecord {
                bytes: packet.len(),
                looped: now,
                taken: None,
                done: None,
            });
        }
    }

    /// The CPU takes the next looped datagram at `now`; the index of its record.
    pub(crate) fn take_looped(&mut self, now: Instant) -> Option<usize> {
        let log = self.loop_log.as_mut()?;
        let record = log.get_mut(self.loop_next)?;
        record.taken = Some(now);
        self.loop_next += 1;
        Some(self.loop_next - 1)
    }

    /// The CPU is done with the looped datagram of record `index`.
    pub(crate) fn done_looped(&mut self, index: usize) {
        let done = self.busy_until;
        if let Some(record) = self.loop_log.as_mut().and_then(|l| l.get_mut(index)) {
            record.done = Some(done);
        }
    }

    /// Charges the work done since the last charge, starting no earlier than `now`;
    /// returns when the CPU is done with it.
    pub(crate) fn charge(&mut self, now: Instant, totals: Work) -> Instant {
        let work = totals.since(&self.seen);
        self.seen = totals;
        let cost = self.profile.cost(&work);
        self.report.stages.add(&self.profile.cost_by_stage(&work));
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
        r.looped += w.looped;
        r.looped_bytes += w.looped_bytes;
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
            looped: 0,
            looped_bytes: 0,
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

    #[test]
    fn a_looped_datagram_costs_a_frame_each_way_unless_the_loop_is_priced_apart() {
        let elf = CpuProfile::elf_1975();
        // One looped 10-character letter: a segment out and in, into and out of the
        // loop, a SEND and a RECEIVE: Table V's 145.9 ms.
        let letter = Work {
            looped: 2,
            looped_bytes: 2 * 62,
            segments: 2,
            socket_calls: 2,
            copied_from_user: 10,
            copied_to_user: 10,
            ..Work::default()
        };
        let ms = elf.cost(&letter).as_secs_f64() * 1e3;
        assert!((ms - 145.9).abs() < 1e-6, "{ms}");
        let stages = elf.cost_by_stage(&letter);
        assert_eq!(stages.driver, 2 * elf.frame as u128);
        assert_eq!(stages.tcp, 2 * elf.segment as u128);
        assert_eq!(stages.user, 2 * elf.call as u128);
        // A cross-patch that bypasses the driver costs TCP and the user only.
        let patch = CpuProfile {
            loopback: Some(0),
            ..elf.clone()
        };
        assert_eq!(patch.cost_by_stage(&letter).driver, 0);
        assert!(patch.cost(&letter) < elf.cost(&letter));
    }
}
