//! `imp link --tap A --tap B --impair ...`: an emulated link between two TAP devices.
//! Every frame the kernel sends into one TAP comes out of the other after passing the
//! link model (one model per direction, same settings, own random stream), in real
//! time. No IP stack is involved: two Linux hosts (namespaces) whose interfaces these
//! TAPs are see one Ethernet segment with the delay, rate and losses asked for.
//!
//! Both TAPs are opened with the virtio-net header and offloads (unless
//! `--no-offloads`): the kernel hands over 64 KiB TCP super-segments, the link model
//! carries each whole, charged for and losing the wire frames it stands for
//! (`LinkModel::submit_segmented`), and the other TAP gets it whole with its segment
//! size, so the receiving kernel sees what a veth would give it. A super-segment the
//! model loses a frame of is cut into its frames and the lost ones dropped.
//!
//! Each direction reads one TAP through a second descriptor of it and writes the
//! other. Both run on one thread, or with `--threads 2` each on its own, so that the
//! receiving kernel's work a write runs (its TCP, for the data one way and the
//! acknowledgements the other) runs on two cores: that gains when other work competes
//! for the cores, and costs wake-ups (an acknowledgement written by one thread wakes
//! the other) when it does not. A super-segment travels through the model in the
//! buffer it was read into (`LinkModel::submit_segmented_owned`): one read and one
//! write per 64 KiB, no copy in between.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use clap::Args;
use impnet_core::Instant;
use impnet_phy::{Device, Impair, LinkConfig, LinkStats, Tap, TapConfig};

use crate::impair;
use crate::tapargs::{check_ifname, fit_mtu, model};

/// Options of `imp link`.
#[derive(Debug, Args)]
pub struct LinkArgs {
    /// A TAP device to join (created if missing); give exactly two: --tap a --tap b.
    #[arg(long = "tap", value_name = "NAME", required = true)]
    pub taps: Vec<String>,
    /// The link model for each direction: delay=20ms,loss=1%,rate=100mbit[,queue=..,
    /// reorder=..,duplicate=..,corrupt=..]. Without it the link is ideal.
    #[arg(long, value_name = "SPEC", value_parser = impair::parse_impair)]
    pub impair: Option<LinkConfig>,
    /// IP MTU of both TAPs (the kernel sides should use the same).
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Open the TAPs without the virtio-net header and offloads: every frame crosses
    /// the link as one wire frame, each a system call (the behaviour before offloads).
    #[arg(long)]
    pub no_offloads: bool,
    /// 1: one thread moves both directions; 2: a thread per direction, which gains
    /// when other work competes for the cores and costs wake-ups when it does not.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// Frames read from one side per turn before the frames due are written out.
const BATCH: usize = 64;

/// Frames at least this long (the 64 KiB super-segments) go onto the link in the
/// buffer they were read into; shorter ones are copied into one of the link's.
const MOVE_MIN: usize = 4096;

/// Longest sleep, so a signal is noticed.
const MAX_WAIT: StdDuration = StdDuration::from_millis(100);

/// Check the arguments before anything opens: two different TAP names Linux
/// accepts, an MTU a TAP takes.
pub fn validate(args: &LinkArgs) -> Result<(), String> {
    let [a, b] = args.taps.as_slice() else {
        return Err(format!(
            "imp link joins exactly two TAP devices (--tap A --tap B); {} given",
            args.taps.len()
        ));
    };
    check_ifname("--tap", a)?;
    check_ifname("--tap", b)?;
    if a == b {
        return Err(format!(
            "imp link needs two different TAP devices, not {a} twice"
        ));
    }
    if !(1..=2).contains(&args.threads) {
        return Err(format!(
            "--threads {}: give 1 (both directions on one thread) or 2 (one each)",
            args.threads
        ));
    }
    if !(68..=65535).contains(&args.mtu) {
        return Err(format!("--mtu {}: give 68 to 65535", args.mtu));
    }
    if args.impair.is_some_and(|c| c.arq.is_some()) {
        return Err(
            "--impair arq=...: imp link's two directions run apart, so a line's \
                    acknowledgements could not cross; link-level retransmission runs in \
                    imp sim (a link's `arq`) and on one device's both directions (--impair)"
                .into(),
        );
    }
    Ok(())
}

/// Run `imp link`.
pub fn run(args: &LinkArgs) -> Result<(), String> {
    validate(args)?;
    let [a, b] = args.taps.as_slice() else {
        return Err("imp link joins exactly two TAP devices".into());
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    }
    let config = args.impair.unwrap_or_default();
    let (tap_a, tap_b) = (open(args, a, &config)?, open(args, b, &config)?);
    let config = fit_mtu(config, tap_a.wire_frame_limit());
    let seed = RandomState::new().hash_one(std::process::id());
    // Each wrapper's send model is the direction *into* its TAP.
    let side_a = Impair::new(tap_a, model(config, seed)?);
    let side_b = Impair::new(tap_b, model(config, seed ^ 0x5eed_0b0b)?);
    let offloaded = side_a.inner().offloads() && side_b.inner().offloads();
    println!(
        "imp link: {} <-> {} ({}, {}); stop with Ctrl-C",
        side_a.inner().name(),
        side_b.inner().name(),
        impair::describe(&config),
        if offloaded {
            "offloads: 64 KiB segments"
        } else {
            "no offloads"
        }
    );
    let _ = std::io::stdout().flush();
    let names = (
        side_a.inner().name().to_owned(),
        side_b.inner().name().to_owned(),
    );
    // Each direction reads one TAP through a handle of its own and writes the other.
    let clone = |side: &Impair<Tap>| {
        side.inner()
            .try_clone()
            .map_err(|e| format!("cannot share TAP {}: {e}", side.inner().name()))
    };
    let (read_a, read_b) = (clone(&side_a)?, clone(&side_b)?);
    let (a_to_b, b_to_a) = (
        Direction::new(read_a, side_b),
        Direction::new(read_b, side_a),
    );
    let epoch = StdInstant::now();
    let (a_to_b, b_to_a) = if args.threads == 1 {
        let (a_to_b, b_to_a) = both_on_one_thread(a_to_b, b_to_a, epoch, &stop);
        (Ok(a_to_b), b_to_a)
    } else {
        // The receiving kernel's work for the data (run by the write) and for the
        // acknowledgements coming back run on two cores at once.
        std::thread::scope(|s| {
            let stop = &stop;
            let a_to_b = s.spawn(move || a_to_b.run(epoch, stop));
            let b_to_a = b_to_a.run(epoch, stop);
            (a_to_b.join(), b_to_a)
        })
    };
    let a_to_b = a_to_b.map_err(|_| "imp link's a -> b thread panicked".to_owned())?;
    report_direction(&names.0, &names.1, a_to_b.to.tx_stats());
    report_direction(&names.1, &names.0, b_to_a.to.tx_stats());
    let errors = a_to_b.errors + b_to_a.errors;
    if errors > 0 {
        println!("imp link: {errors} device errors (frames lost while a side was down)");
    }
    Ok(())
}

/// One direction of the link: frames read from `from` pass `to`'s send model into
/// `to`'s TAP.
struct Direction {
    from: Tap,
    to: Impair<Tap>,
    /// What the next frame is read into (`from`'s MTU long).
    buf: Vec<u8>,
    errors: u64,
}

impl Direction {
    fn new(from: Tap, to: Impair<Tap>) -> Direction {
        let buf = vec![0u8; from.mtu()];
        Direction {
            from,
            to,
            buf,
            errors: 0,
        }
    }

    /// Forward until `stop` is set, on the clock that started at `epoch`. The TAP is
    /// read only when it may hold frames: not after a sleep that ended at a deadline
    /// with nothing to read (one `readv` less per due frame on a delayed link).
    fn run(mut self, epoch: StdInstant, stop: &AtomicBool) -> Direction {
        let now = || Instant::from_nanos(epoch.elapsed().as_nanos() as u64);
        let mut readable = true;
        while !stop.load(Ordering::Relaxed) {
            let more = readable && self.forward(now());
            let t = now();
            self.deliver(t);
            readable = more || wait_readable(&[self.from.as_raw_fd()], self.wait(t))[0];
        }
        self
    }

    /// Hands the frames due by `t` to `to`'s TAP.
    fn deliver(&mut self, t: Instant) {
        if self.to.handle_timeout(t).is_err() {
            self.errors += 1;
        }
    }

    /// How long to sleep from `t` at most: until the next frame is due.
    fn wait(&self, t: Instant) -> StdDuration {
        self.to.poll_at().map_or(MAX_WAIT, |d| {
            StdDuration::from_nanos(d.saturating_duration_since(t).as_nanos()).min(MAX_WAIT)
        })
    }

    /// Move up to `BATCH` frames the kernel wrote into `from`'s TAP onto the link
    /// towards `to`. True if more may be waiting. A super-segment goes onto the link in
    /// the buffer it was read into (the model keeps it while it travels, and the next
    /// frame is read into a spare one), not copied.
    fn forward(&mut self, now: Instant) -> bool {
        for _ in 0..BATCH {
            let sent = match self.from.recv_offloaded(now, &mut self.buf) {
                Ok(Some((len, offload))) => match offload.gso_size {
                    Some(gso_size) if len >= MOVE_MIN => {
                        let spare = self.to.spare_buffer(self.buf.len());
                        let mut frame = std::mem::replace(&mut self.buf, spare);
                        frame.truncate(len);
                        self.to.send_segmented_owned(now, frame, gso_size)
                    }
                    Some(gso_size) => self.to.send_segmented(now, &self.buf[..len], gso_size),
                    None => self.to.send(now, &self.buf[..len]),
                },
                Ok(None) => return false,
                // A side whose interface is down, or a frame too large: lost, as on a wire.
                Err(_) => {
                    self.errors += 1;
                    return false;
                }
            };
            if sent.is_err() {
                self.errors += 1;
            }
        }
        true
    }
}

/// Both directions on the calling thread until `stop` is set: each TAP is read when it
/// may hold frames, and the thread sleeps until either is readable or a frame is due.
fn both_on_one_thread(
    mut a_to_b: Direction,
    mut b_to_a: Direction,
    epoch: StdInstant,
    stop: &AtomicBool,
) -> (Direction, Direction) {
    let now = || Instant::from_nanos(epoch.elapsed().as_nanos() as u64);
    let mut readable = [true, true];
    while !stop.load(Ordering::Relaxed) {
        let more_a = readable[0] && a_to_b.forward(now());
        let more_b = readable[1] && b_to_a.forward(now());
        let t = now();
        a_to_b.deliver(t);
        b_to_a.deliver(t);
        // While either side has more, both are read each turn (neither starves).
        readable = if more_a || more_b {
            [true, true]
        } else {
            let fds = [a_to_b.from.as_raw_fd(), b_to_a.from.as_raw_fd()];
            wait_readable(&fds, a_to_b.wait(t).min(b_to_a.wait(t)))
        };
    }
    (a_to_b, b_to_a)
}

/// Open (or create) the TAP `name`, with offloads unless `--no-offloads`. A link that
/// flips bits must hand on frames whose checksums show it: then partial checksums are
/// completed on the way in and never left to the receiver.
fn open(args: &LinkArgs, name: &str, config: &LinkConfig) -> Result<Tap, String> {
    let corrupts = config.corrupt > 0.0;
    let tap = TapConfig::new(name)
        .mtu(args.mtu)
        .offloads(!args.no_offloads)
        .partial_checksums(!corrupts)
        .complete_checksums(corrupts);
    Tap::open_with(&tap).map_err(|e| format!("cannot open TAP {name}: {e}"))
}

/// Sleep until one of `fds` is readable or `timeout` has passed (`ppoll`, ns
/// precision). Which may hold frames: none when the time passed with nothing to read,
/// all when the wait was interrupted.
fn wait_readable<const N: usize>(fds: &[i32; N], timeout: StdDuration) -> [bool; N] {
    let mut pollfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pollfds` is a live array of the given length, `ts` a live timespec, and
    // a null signal mask is allowed.
    let ready = unsafe {
        libc::ppoll(
            pollfds.as_mut_ptr(),
            N as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if ready < 0 {
        return [true; N];
    }
    pollfds.map(|p| p.revents != 0)
}

/// What one direction of the link did: frames delivered, lost, dropped, marked CE.
fn report_direction(from: &str, to: &str, s: &LinkStats) {
    let mut marked = if s.ce_marked > 0 {
        format!(", {} marked CE (ECN)", s.ce_marked)
    } else {
        String::new()
    };
    if s.dropped_police + s.police_marked + s.shaped > 0 {
        marked.push_str(&format!(
            ", {} shaped, {} policed (dropped), {} policed (marked)",
            s.shaped, s.dropped_police, s.police_marked
        ));
    }
    if s.super_segments + s.super_segments_cut > 0 {
        marked.push_str(&format!(
            "; {} super-segments carried whole, {} cut",
            s.super_segments, s.super_segments_cut
        ));
    }
    println!(
        "imp link: {from} -> {to}: {} frames delivered, {} lost, {} dropped by the queue{marked}",
        s.delivered, s.dropped_loss, s.dropped_queue
    );
}
