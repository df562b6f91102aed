//! Seed 004's local test plan (Cerf, 1976, §4.2): the bandwidth tests a1-a6 with 1-,
//! 90- and 972-byte letters and the counters of Tables I-III (`impnet_sim::test_plan`),
//! the reliability tests b1-b3 and the sizes (c). The tables go in
//! `scenarios/seeds/README.md` between generated markers; `the_readme_holds_the_tables`
//! fails when the committed copy differs (`IMP_UPDATE_SEED_TABLES=1` rewrites it).
//! The full two-hour transmission and the long wrap run are `#[ignore]`d; their
//! figures are kept by hand in the README.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::cell::RefCell;
use std::fmt::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::rc::Rc;

use impnet_core::tcp::TcpState;
use impnet_core::{Duration, Instant, Secret, SegmentKind, Stack, StackConfig};
use impnet_phy::LinkConfig;
use impnet_sim::alloc_count::{self, CountingAlloc};
use impnet_sim::bulk::{BulkConfig, BulkResult, run_bulk, run_bulk_beside};
use impnet_sim::seed_tables;
use impnet_sim::seed_tables::ledger::{Figure, Role};
use impnet_sim::test_plan::{self, LETTERS, LetterRun, Test};
use impnet_sim::{FrameKind, secret_for_seed};
use impnet_wire::ipv4::Cidr;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Letters per connection in a looped run.
const LOOPED_LETTERS: u64 = 1000;
/// The letter of the timed looped letter: Table IV's 10 characters.
const STAGE_LETTER: usize = 10;
/// Seconds of typing in a UCL run.
const UCL_SECONDS: u64 = 600;
const SEED: u64 = 1976;
/// Open/close cycles of b3.
const CYCLES: u64 = 300;
const BEGIN: &str = "<!-- BEGIN generated: cargo test -p impnet-sim --test test_plan -->";

fn bandwidth_runs() -> Vec<LetterRun> {
    let mut runs = Vec::new();
    for test in Test::ALL {
        for letter in LETTERS {
            let run = test_plan::run(test, letter, LOOPED_LETTERS, SEED).unwrap_or_else(|e| {
                panic!(
                    "{} with {letter}-byte letters (seed {SEED}): {e}",
                    test.label()
                )
            });
            runs.push(run);
        }
    }
    runs
}

#[test]
fn every_letter_comes_back_and_the_line_bounds_the_routed_runs() {
    for run in bandwidth_runs() {
        let name = format!("{} {}", run.test.label(), run.letter);
        let c = &run.counters;
        assert_eq!(c.storage_failures, 0, "{name}");
        // Every connection opened (a self-connection sends SYN and SYN-ACK to itself).
        assert!(c.sent.segments(SegmentKind::Syn) >= 2 * run.test.connections() as u64);
        // Looped runs end with every letter read, so their close is clean. Routed runs
        // stop at 60 s with letters in flight both ways: the exerciser, closed, answers
        // the echoes still arriving with a RST (RFC 1122 §4.2.2.13, "if new data is
        // received after CLOSE is called, its TCP SHOULD send a RST"), at most a few
        // per connection.
        let resets = c.sent.segments(SegmentKind::Rst);
        if run.test.routed() {
            assert!(
                resets <= 6 * run.test.connections() as u64,
                "{name}: {resets} resets"
            );
        } else {
            assert_eq!(resets, 0, "{name}: no reset");
        }
        // Every run takes virtual time now: the CPU charges the loop as it charges a
        // line's frames. Letters per second stay under the CPU's bound (a pipeline's
        // letters sharing a segment and a call at best) and the line's, and above a
        // fifth of a lone letter's rate.
        let rate = run.letters_per_s().expect("every run takes virtual time");
        let alone = run.cpu_bound_per_s.expect("the plan's hosts have a CPU");
        let cpu = test_plan::PIPELINE as f64 * alone;
        let bound = run.bound_per_s().map_or(cpu, |line| line.min(cpu));
        assert!(
            rate > 0.2 * alone.min(bound) && rate <= bound,
            "{name}: {rate} letters/s of {bound}"
        );
        if !run.test.routed() {
            // Looped: exactly the letters asked for, every byte checked, nothing lost.
            assert_eq!(run.letters, LOOPED_LETTERS * run.test.connections() as u64);
            // The letters go without a retransmission; the close's FINs, four ends'
            // on one CPU (a4, a5), may wait for it past their RTO and go twice.
            let ends = 2 * run.test.connections() as u64;
            assert_eq!(c.out_of_order, 0, "{name}");
            assert!(c.retransmissions <= 2 * ends, "{name}: {c:?}");
            assert!(c.duplicates <= c.retransmissions, "{name}: {c:?}");
            assert!(
                c.sent.segments(SegmentKind::Fin) >= run.test.connections() as u64,
                "{name}: every connection closed with a FIN: {c:?}"
            );
            // The CPU is what bounds them: busy nearly all the time.
            let busy = run.cpu_busy_pct.expect("a CPU");
            assert!(busy > 90.0, "{name}: CPU {busy}% busy");
        }
    }
}

/// What the README's prose claims of the looped runs on the 1975 CPU: the cross-patch
/// beats the looped interface, which costs the driver twice per datagram; one
/// connection to itself beats an exerciser and an echoer on one CPU; through the IMP
/// (two CPUs, one at each end) a letter goes at the looped interface's rate or better.
#[test]
fn the_cross_patch_beats_the_looped_interface_and_both_are_cpu_bound() {
    let rate = |test: Test, letter: usize| {
        test_plan::run(test, letter, 200, SEED)
            .unwrap_or_else(|e| panic!("{e}"))
            .letters_per_s()
            .expect("virtual time")
    };
    for letter in LETTERS {
        let (a1, a2, a4, a5) = (
            rate(Test::SelfConnection, letter),
            rate(Test::Loopback, letter),
            rate(Test::TwoSelf, letter),
            rate(Test::TwoLoopback, letter),
        );
        assert!(
            a1 > a2,
            "{letter} bytes: cross-patch {a1} against interface {a2}"
        );
        assert!(
            a4 > a5,
            "{letter} bytes: cross-patch {a4} against interface {a5}"
        );
        assert!(
            a1 > a4 && a2 > a5,
            "{letter} bytes: one connection to itself is cheaper"
        );
    }
    // Without a CPU model the looped runs take no virtual time, as before.
    let free = test_plan::run_on(Test::Loopback, 90, 100, SEED, None).unwrap();
    assert_eq!((free.letters, free.letters_per_s()), (100, None));
}

/// Table IV's milestones come in the report's order and Table V's stages add up to the
/// SEND-to-RECEIVE time; the cross-patch has no driver stage.
#[test]
fn a_looped_letter_is_timed_stage_by_stage() {
    for test in [Test::SelfConnection, Test::Loopback] {
        let s =
            test_plan::letter_stages(test, STAGE_LETTER, SEED).unwrap_or_else(|e| panic!("{e}"));
        let name = test.label();
        assert!(s.into_loop > Duration::ZERO, "{name}: {s:?}");
        assert!(
            s.into_loop <= s.taken && s.taken < s.received,
            "{name}: {s:?}"
        );
        assert!(
            s.received <= s.receive_call && s.receive_call < s.receive_done,
            "{name}: {s:?}"
        );
        assert!(
            s.into_loop < s.ack_into_loop && s.ack_into_loop < s.acked,
            "{name}: {s:?}"
        );
        // The CPU was busy from the SEND to the RECEIVE's end: its stages are that time.
        let [tcp, driver, user] = s.table_v_ms();
        let elapsed = s.receive_done.as_secs_f64() * 1e3;
        assert!(
            (tcp + driver + user - elapsed).abs() < 0.01,
            "{name}: {s:?}"
        );
        assert!(tcp > 0.0 && user > 0.0, "{name}: {s:?}");
        assert_eq!(driver > 0.0, test == Test::Loopback, "{name}: {s:?}");
    }
}

/// The UCL runs: a letter a second is sustained over the transatlantic model, with
/// round trips of seconds; the losses are repaired by the fixed 4 s timer.
#[test]
fn ucl_sustains_a_letter_a_second_with_round_trips_of_seconds() {
    let r = test_plan::ucl_run(1.0, UCL_SECONDS, SEED).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.echoed, r.typed, "{r:?}");
    assert!(r.echoed_per_s() > 0.95, "{r:?}");
    // A round trip is the satellite twice and both CPUs' work: over a second.
    assert!(r.round_trip(0.0) > Duration::from_secs(1), "{r:?}");
    // A lost letter or echo waits the 4 s timer: the slowest round trips are longer.
    assert!(r.retransmissions > 0, "{r:?}");
    assert!(r.round_trip(1.0) > test_plan::UCL_TIMEOUT, "{r:?}");
}

/// Without a CPU model the looped runs take no virtual time; this prints what they take
/// on this machine (a measurement, asserted on nothing but the letters).
#[test]
#[ignore = "wall-clock measurement; run by hand in release, figures in scenarios/seeds/README.md"]
fn looped_letters_per_wall_second() {
    for test in [Test::SelfConnection, Test::Loopback, Test::TwoLoopback] {
        for letter in LETTERS {
            let letters = 100_000;
            let start = std::time::Instant::now();
            let run = test_plan::run_on(test, letter, letters, SEED, None)
                .unwrap_or_else(|e| panic!("{e}"));
            let wall = start.elapsed().as_secs_f64();
            assert_eq!(run.letters, letters * test.connections() as u64);
            println!(
                "{} {letter:>3} bytes: {} letters in {wall:.3} s wall, {:.0} letters/s",
                test.label(),
                run.letters,
                run.letters as f64 / wall
            );
        }
    }
}

/// b1's transfer: through the network to a sink, every byte checked.
fn transmission(seconds: u64) -> BulkResult {
    let link = LinkConfig::default()
        .with_rate_bps(1_000_000)
        .with_delay(Duration::from_millis(20))
        .with_loss(0.001);
    let bytes = 1_000_000 / 8 * seconds * 95 / 100;
    let mut config = BulkConfig::new(bytes, link, SEED);
    config.time_limit = Duration::from_secs(seconds * 2);
    run_bulk(&config).unwrap_or_else(|e| panic!("{e}"))
}

fn b1_row(seconds: u64, r: &BulkResult) -> String {
    format!(
        "| b1: transmit {} min to a sink (1 Mbit/s, 40 ms RTT, 0.1% loss) | {} bytes in {:.0} s, {:.0} kbit/s, {} retransmitted segments, stream {} |\n",
        seconds / 60,
        r.bytes,
        r.seconds,
        r.goodput_bps / 1e3,
        r.retransmits,
        if r.hash_ok { "intact" } else { "CORRUPTED" }
    )
}

#[test]
fn b1_a_long_transmission_arrives_intact() {
    let r = transmission(120);
    assert!(r.hash_ok, "every byte arrives in order");
    assert!(r.retransmits > 0, "the losses were repaired");
    assert!(r.capacity_pct > 80.0, "{r:?}");
}

/// The full two hours (`cargo test --release -p impnet-sim --test test_plan -- --ignored`).
#[test]
#[ignore = "two hours of virtual time; run by hand, figures in scenarios/seeds/README.md"]
fn b1_two_hours() {
    let r = transmission(7200);
    println!("{}", b1_row(7200, &r));
    assert!(r.hash_ok && r.capacity_pct > 80.0, "{r:?}");
}

/// What b2 saw: wraps of the sender's sequence numbers, the old segment PAWS refused.
#[derive(Debug, Default)]
struct Wraps {
    /// The last data sequence number sent, and its unwrapped value.
    last: Option<(u32, u64)>,
    wraps: u64,
    /// End of the data sent, unwrapped.
    sent_end: u64,
    /// The first data sequence number, unwrapped (its own value).
    start: Option<u64>,
    /// A data frame sent after the first MiB, and its unwrapped sequence number.
    old: Option<(Vec<u8>, u64)>,
}

/// The sender's data segments (side 0 of the link): sequence number and length.
fn data_segment(frame: &[u8]) -> Option<(u32, usize)> {
    let ip = frame.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let tcp = ip.get(ihl..total)?;
    let doff = usize::from(tcp.get(12)? >> 4) * 4;
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    let len = tcp.len().checked_sub(doff)?;
    (len > 0).then_some((seq, len))
}

/// b2: `bytes` at a high rate with timestamps; an old segment from the first cycle is
/// sent again when its sequence number is back in the window. The wraps, PAWS drops.
fn wraps(bytes: u64) -> (BulkResult, u64, u64) {
    let link = LinkConfig::default()
        .with_rate_bps(40_000_000_000)
        .with_delay(Duration::from_micros(50))
        .with_mtu(65535);
    let mut config = BulkConfig::new(bytes, link, SEED);
    config.record = 256 * 1024;
    config.time_limit = Duration::from_secs(600);
    let seen = Rc::new(RefCell::new(Wraps::default()));
    let (mut injected, mut paws, mut observing) = (false, 0, false);
    let result = run_bulk_beside(&config, |sim, transfer| {
        if !observing {
            observing = true;
            let seen = Rc::clone(&seen);
            sim.set_observer(Some(Box::new(move |event| {
                if event.kind != FrameKind::Sent || event.from_side != 0 {
                    return;
                }
                let Some((seq, len)) = data_segment(event.frame) else {
                    return;
                };
                let mut w = seen.borrow_mut();
                let unwrapped = match w.last {
                    None => u64::from(seq),
                    Some((last, at)) => {
                        if seq < last && seq.wrapping_sub(last) < 1 << 31 {
                            w.wraps += 1;
                        }
                        at.wrapping_add_signed(i64::from(seq.wrapping_sub(last) as i32))
                    }
                };
                w.last = Some((seq, unwrapped));
                w.sent_end = w.sent_end.max(unwrapped + len as u64);
                let start = *w.start.get_or_insert(unwrapped);
                if w.old.is_none() && unwrapped >= start + (1 << 20) {
                    w.old = Some((event.frame.to_vec(), unwrapped));
                }
            })));
        }
        paws = sim.host(transfer.receiver).tcp_stats().paws_drops;
        let w = seen.borrow();
        if let Some((frame, at)) = &w.old
            && !injected
        {
            // Once the data sent reaches 200 kB short of the old segment's number one
            // cycle later, the old segment's sequence number is in the window again
            // (200 kB: more than the two 64 kB segments that may go between two calls).
            let again = at + (1 << 32);
            if w.sent_end + 200_000 >= again && w.sent_end < again {
                injected = true;
                let frame = frame.clone();
                drop(w);
                sim.inject(transfer.link, 0, &frame);
            }
        }
        None
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(injected, "the old segment went back on the wire");
    let wraps = seen.borrow().wraps;
    (result, wraps, paws)
}

#[test]
fn b2_sequence_numbers_wrap_and_paws_refuses_an_old_segment() {
    // The old segment is taken after 1 MiB; one cycle later it is in the window again.
    let (r, wraps, paws) = wraps((1 << 32) + (4 << 20));
    assert!(r.hash_ok, "no byte corrupted");
    assert!(wraps >= 1, "the sequence numbers wrapped");
    assert!(paws >= 1, "PAWS refused the old segment");
}

#[test]
#[ignore = "17 GB; run by hand, figures in scenarios/seeds/README.md"]
fn b2_several_wraps() {
    let (r, wraps, paws) = wraps(4 << 32);
    println!(
        "{} bytes in {:.2} s virtual: {wraps} wraps, {paws} PAWS drops, stream ok {}",
        r.bytes, r.seconds, r.hash_ok
    );
    assert!(r.hash_ok && wraps >= 3 && paws >= 1);
}

#[test]
fn b3_open_and_close_hundreds_of_times() {
    for test in [Test::Loopback, Test::Router] {
        let r = test_plan::open_close(test, CYCLES, SEED).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.cycles, CYCLES);
        if test.routed() {
            // At least a round trip each: four 5 ms hops there and back.
            let rtt = Duration::from_millis(20);
            assert!(r.open_mean >= rtt && r.close_mean >= rtt, "{r:?}");
        } else {
            assert_eq!(
                (r.open_mean, r.close_mean),
                (Duration::ZERO, Duration::ZERO)
            );
        }
    }
}

fn b3_rows() -> String {
    let mut out = String::new();
    for test in [Test::Loopback, Test::Router] {
        let r = test_plan::open_close(test, CYCLES, SEED).unwrap_or_else(|e| panic!("{e}"));
        let _ = writeln!(
            out,
            "| b3: open and close {} times, {} | mean open {:.2} ms, mean close {:.2} ms (virtual) |",
            r.cycles,
            test.path().trim_start_matches("to itself, "),
            r.open_mean.as_secs_f64() * 1e3,
            r.close_mean.as_secs_f64() * 1e3
        );
    }
    out
}

/// Memory a stack holds for `pairs` idle established connections over 127.0.0.1 (two
/// ends each), per connection end: the counting allocator before and after.
fn bytes_per_connection(pairs: u16) -> (usize, usize) {
    let now = Instant::ZERO;
    let secret: Secret = secret_for_seed(SEED);
    let base = alloc_count::live_bytes();
    let mut stack = Stack::new(StackConfig::default(), secret);
    let mut config =
        impnet_core::IfaceConfig::new(impnet_wire::ethernet::Address([2, 0, 0, 0, 0, 1]), 1500);
    config
        .addrs
        .push(Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24).unwrap());
    stack.add_interface(config);
    let mut buf = vec![0u8; 1514];
    let local = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 80);
    let listener = stack.tcp_listen(local, usize::from(pairs)).unwrap();
    let drain = |stack: &mut Stack, buf: &mut [u8]| {
        while stack.poll_transmit(now, buf).is_some() {}
        while stack.poll_event().is_some() {}
    };
    drain(&mut stack, &mut buf);
    let empty = alloc_count::live_bytes() - base;
    let mut conns = Vec::new();
    for _ in 0..pairs {
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        conns.push(stack.tcp_connect(now, any, local).unwrap());
        drain(&mut stack, &mut buf);
        conns.push(stack.tcp_accept(listener).unwrap());
    }
    for c in &conns {
        assert_eq!(stack.tcp_info(*c).unwrap().state, TcpState::Established);
    }
    let held = alloc_count::live_bytes() - base;
    drop(buf);
    let per_end = (held - empty).unsigned_abs() / conns.len();
    (per_end, empty.unsigned_abs())
}

fn sizes_row() -> String {
    let (per_end, empty) = bytes_per_connection(100);
    // The packet-buffer pool: what a stack keeps for reuse after the a1 run's traffic.
    format!(
        "| c: memory (counting allocator) | an empty stack with one interface {empty} B; an idle established connection end {per_end} B (200 ends over 127.0.0.1); packet-buffer pool at most `pool_buffers` (128) x 16 KiB |\n"
    )
}

#[test]
fn c_an_idle_connection_costs_a_few_kib() {
    let (per_end, _) = bytes_per_connection(100);
    assert!(
        per_end > 200 && per_end < 8 * 1024,
        "{per_end} bytes per connection end"
    );
}

/// The figures ledger's rows of the test plan: Table I's rate and line use through
/// the IMP (a3, 1-byte letters), Table IV's milestones and Table V's stages (a2, the
/// looped interface), the UCL runs.
fn ledger_rows(
    runs: &[LetterRun],
    stages: &[test_plan::LetterStages],
    ucl: &[test_plan::UclRun],
) -> String {
    let mut rows = Vec::new();
    let a3 = runs
        .iter()
        .find(|r| r.test == Test::Router && r.letter == 1)
        .expect("a3 with 1-byte letters");
    let rate = a3.letters_per_s().unwrap_or(0.0);
    rows.push(Figure::new(
        "004",
        "Table I: letters a second looped through the IMP (imp: a3, through a router, 1-byte letters)",
        ("6.6-6.7", (6.6, 6.7)),
        (rate, format!("{rate:.2}")),
        Role::Model,
        "",
    ));
    let out = &a3.directions[0];
    let use_pct = match (out.rate_bps, out.line_bytes) {
        (Some(rate), Some(carried)) => 100.0 * carried as f64 * 8.0 / (rate as f64 * a3.seconds),
        _ => 0.0,
    };
    rows.push(Figure::new(
        "004",
        "Table III: line use each way (a3, 1-byte letters)",
        ("about 20%", (20.0, 20.0)),
        (use_pct, format!("{use_pct:.1}%")),
        Role::Model,
        "imp's frames are a letter and its header, where the 1975 line also carried the \
         RTP's HELLOs, null packets and RFNMs (Table III), not modelled",
    ));
    let a2 = stages
        .iter()
        .find(|s| s.test == Test::Loopback)
        .expect("a2's looped letter");
    let why_iv = [
        "imp's model charges the SEND call and the driver before the letter leaves; the \
         1975 driver's output ran after",
        "imp's self-connection takes in its own ACK (46.1 ms of TCP, 50.1 of driver) before \
         the user's RECEIVE",
        "the same ACK inside the span",
        "imp ACKs at once; the 1975 TCP waited for its retransmission process (\"about 1.1 \
         seconds\")",
    ];
    for (((what, ms), imp), why) in test_plan::TABLE_IV.iter().zip(a2.milestones()).zip(why_iv) {
        let imp_ms = imp.as_secs_f64() * 1e3;
        rows.push(Figure::new(
            "004",
            format!("Table IV: {what} (imp: a2, the looped interface)"),
            (&format!("{ms} ms"), (*ms, *ms)),
            (imp_ms, format!("{imp_ms:.1} ms")),
            Role::Model,
            why,
        ));
    }
    for (what, ms) in ["TCP", "the RTP (driver)", "user"]
        .iter()
        .zip(test_plan::TABLE_V)
    {
        rows.push(Figure::new(
            "004",
            format!("Table V: {what}, a letter's CPU time"),
            (&format!("{ms} ms"), (ms, ms)),
            (ms, format!("{ms} ms (the CPU model's costs, `elf-1975`)")),
            Role::Given,
            "the report's own budget of a letter, given to the CPU model as it stands",
        ));
    }
    let one = ucl
        .iter()
        .find(|u| (u.offered_per_s - 1.0).abs() < 1e-9)
        .expect("the UCL run at a letter a second");
    let per_s = one.echoed_per_s();
    rows.push(Figure::new(
        "004",
        "UCL (§4.3): letters a second sustained",
        ("up to 1", (1.0, 1.0)),
        (per_s, format!("{per_s:.2}")),
        Role::Model,
        "",
    ));
    for (what, value, q, why) in [
        (
            "UCL: shortest round trip",
            2.0,
            0.0,
            "the model's floor (the satellite twice and both CPUs' work) is below the \
             report's 2 s; what made every 1976 round trip at least 2 s is not in the model",
        ),
        ("UCL: longest round trip", 8.0, 1.0, ""),
    ] {
        let rt = one.round_trip(q).as_secs_f64();
        rows.push(Figure::new(
            "004",
            what,
            (&format!("{value} s (\"2-8 seconds\")"), (value, value)),
            (rt, format!("{rt:.2} s")),
            Role::Model,
            why,
        ));
    }
    seed_tables::ledger::rows_markdown(&rows).unwrap_or_else(|e| panic!("{e}"))
}

/// The test plan's README block and its rows of the figures ledger.
fn readme_block() -> (String, String) {
    let runs = bandwidth_runs();
    let mut out = test_plan::markdown(&runs);
    let stages: Vec<_> = [Test::SelfConnection, Test::Loopback]
        .into_iter()
        .map(|t| test_plan::letter_stages(t, STAGE_LETTER, SEED).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let _ = write!(
        out,
        "\nOne looped {STAGE_LETTER}-byte letter on the 1975 CPU, stage by stage (Table IV), from the model's timestamps:\n\n{}",
        test_plan::stages_markdown(&stages)
    );
    let ucl: Vec<_> = [0.5, 1.0, 2.0]
        .into_iter()
        .map(|rate| test_plan::ucl_run(rate, UCL_SECONDS, SEED).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let _ = write!(
        out,
        "\nThe UCL runs (§4.3), {UCL_SECONDS} s of typing {}-character letters over the transatlantic model:\n\n{}",
        test_plan::UCL_LETTER,
        test_plan::ucl_markdown(&ucl)
    );
    out.push_str("\nReliability (b) and sizes (c), CI forms:\n\n| test | imp |\n|---|---|\n");
    out.push_str(&b1_row(120, &transmission(120)));
    out.push_str(&b3_rows());
    out.push_str(&sizes_row());
    let ledger = ledger_rows(&runs, &stages, &ucl);
    (out, ledger)
}

#[test]
fn the_readme_holds_the_tables() {
    let (tables, ledger) = readme_block();
    check_block(BEGIN, &tables);
    check_block(&seed_tables::ledger::begin_marker("test_plan"), &ledger);
}

/// The README's block after the marker line `begin` is `text` (or is rewritten to it
/// with `IMP_UPDATE_SEED_TABLES=1`).
fn check_block(begin: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds/README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let committed = seed_tables::committed_block(&readme, begin);
    if committed == Some(text) {
        return;
    }
    if std::env::var_os("IMP_UPDATE_SEED_TABLES").is_some() {
        let updated = seed_tables::replace_block(&readme, begin, text)
            .unwrap_or_else(|| panic!("scenarios/seeds/README.md has no `{begin}` block"));
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "scenarios/seeds/README.md: the block `{begin}` differs from the runs.\n--- committed:\n{}--- now:\n{text}---\n\
         Regenerate with `IMP_UPDATE_SEED_TABLES=1 cargo test -p impnet-sim --test test_plan readme`.",
        committed.unwrap_or("(no block)\n")
    );
}
