//! Seed 003's "10 minute transmission timeout" (RFC 793's user timeout: "if the user
//! timeout expires, flush all queues, signal the user 'error: connection aborted due to
//! user timeout'"): on seed 003's 9600 bit/s line, a transfer runs for a minute, then
//! the line goes dead (both directions, for good). The `vm-1990` model
//! ([`LegacyProfile::Vm1990`]) goes on retransmitting with RFC 793's backoff and aborts
//! the connection 10 minutes after it last got data through; a TCP with imp's defaults
//! on the same line is still retrying then (it gives up after its retransmission
//! count, RFC 1122's R2, which at this line's RTO comes later). `imp analyze`, on
//! the frames the sender sent (a capture on its interface), reports the abort.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;

use impnet_core::tcp::{LegacyProfile, TcpError, TcpHandle};
use impnet_core::{Duration, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_phy::pcap::LINKTYPE_ETHERNET;
use impnet_sim::analyze::{Analysis, Analyzer};
use impnet_sim::{Flow, HostId, LinkId, Sim};
use impnet_wire::ipv4::Cidr;

const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 21;
/// When the line goes dead.
const DEAD_AT: Duration = Duration::from_secs(60);

/// Seed 003's 9600 bit/s modem line (7680 bit/s of 8-bit bytes, 60 ms, a 4 KB
/// buffer, 232-byte packets), without its noise: the line dies cleanly.
fn line() -> LinkConfig {
    LinkConfig {
        rate_bps: 7680,
        delay: Duration::from_millis(60),
        queue_limit_bytes: 4096,
        mtu: 232 + 14,
        ..LinkConfig::default()
    }
}

struct Run {
    /// When the sender's connection ended, and how.
    ended: Option<(Instant, TcpError)>,
    /// Bytes the receiver read before the line died.
    delivered: usize,
    /// When the receiver last read new data.
    last_progress: Instant,
    /// `imp analyze` on a capture at the sender's end of the line: every frame it sent
    /// (the line dead or not) and every frame that reached it.
    analysis: Analysis,
}

/// A sender with `config` writes 100 bytes at a time (the VM's FTP server's records)
/// to a receiver with imp's defaults (a 384-byte window, as in seed 003); the line dies
/// at [`DEAD_AT`]; the run lasts until `until`.
fn run(mut config: StackConfig, until: Duration) -> Run {
    // A serial line has no ARP: the sender keeps its peer's mapping for the run (else,
    // the line dead, its retransmissions would wait for ARP replies that never come).
    config.arp.entry_lifetime = Duration::from_secs(3600);
    let mut sim = Sim::new(1990);
    let sender = sim.add_host("sender", config);
    let mut receiver_config = StackConfig::default();
    receiver_config.tcp.recv_buffer = 384;
    let receiver = sim.add_host("receiver", receiver_config);
    let link = sim
        .connect(
            sender,
            Cidr::new(SENDER, 24).unwrap(),
            receiver,
            Cidr::new(RECEIVER, 24).unwrap(),
            line(),
        )
        .unwrap();
    let analyzer = Rc::new(RefCell::new(Analyzer::new()));
    let capture = Rc::clone(&analyzer);
    sim.set_observer(Some(Box::new(move |event| {
        // At the sender's end: what it sent, and what reached it.
        let seen = match event.kind {
            impnet_sim::FrameKind::Sent => event.from_side == 0,
            impnet_sim::FrameKind::Delivered => event.from_side == 1,
        };
        if seen {
            let ts = event.time.as_nanos();
            capture
                .borrow_mut()
                .frame(ts, LINKTYPE_ETHERNET, event.frame);
        }
    })));
    let listener = sim
        .host_mut(receiver)
        .tcp_listen(SocketAddrV4::new(RECEIVER, PORT), 4)
        .unwrap();
    let conn = sim
        .host_mut(sender)
        .tcp_connect(
            Instant::ZERO,
            SocketAddrV4::new(SENDER, 0),
            SocketAddrV4::new(RECEIVER, PORT),
        )
        .unwrap();
    let mut out = drive(&mut sim, (sender, receiver, link), (conn, listener), until);
    sim.set_observer(None);
    out.analysis = Rc::try_unwrap(analyzer)
        .expect("the observer is gone")
        .into_inner()
        .finish();
    out
}

fn drive(
    sim: &mut Sim,
    (sender, receiver, link): (HostId, HostId, LinkId),
    (conn, listener): (TcpHandle, TcpHandle),
    until: Duration,
) -> Run {
    let mut accepted = None;
    let mut out = Run {
        ended: None,
        delivered: 0,
        last_progress: Instant::ZERO,
        analysis: Analysis::default(),
    };
    let end = Instant::ZERO + until;
    sim.run(u64::MAX / 4, end + Duration::from_secs(1), |sim| {
        let now = sim.now();
        if now >= Instant::ZERO + DEAD_AT && sim.is_link_up(link) {
            sim.set_link_up(link, false);
        }
        let s = sim.host_mut(sender);
        match s.tcp_error(conn) {
            Ok(Some(e)) | Err(e) => {
                out.ended = Some((now, e));
                return Flow::Done;
            }
            Ok(None) => while s.tcp_send(now, conn, &[b'r'; 100]).is_ok_and(|n| n > 0) {},
        }
        let r = sim.host_mut(receiver);
        if accepted.is_none() {
            accepted = r.tcp_accept(listener).ok();
        }
        if let Some(a) = accepted {
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = r.tcp_recv(now, a, &mut buf) {
                out.delivered += n;
                out.last_progress = now;
            }
        }
        if now >= end {
            return Flow::Done;
        }
        // Look at least once a second, so the abort is seen when it happens.
        Flow::WakeAt((now + Duration::from_secs(1)).min(end))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn the_vm_model_aborts_ten_minutes_after_the_line_went_dead() {
    let mut vm = StackConfig::default();
    LegacyProfile::Vm1990.apply(&mut vm.tcp);
    let r = run(vm, DEAD_AT + Duration::from_secs(700));
    assert!(
        r.delivered > 20_000,
        "a minute at 9600: {} bytes",
        r.delivered
    );
    let (at, error) = r.ended.expect("the VM gives up");
    assert_eq!(error, TcpError::TimedOut);
    // The user timeout runs from the last data that got through (an ACK that moved
    // the window, at most a round trip of the small window before the line died).
    let silent = at - r.last_progress;
    println!(
        "vm-1990: {} bytes, line dead at {:?}, last progress {:?}, aborted at {:?} \
         ({:?} after the last progress)",
        r.delivered, DEAD_AT, r.last_progress, at, silent
    );
    let since_dead = at - (Instant::ZERO + DEAD_AT);
    assert!(
        since_dead >= Duration::from_secs(595) && since_dead <= Duration::from_secs(601),
        "aborted {since_dead:?} after the line died"
    );
    // `imp analyze` sees it in the sender's frames: the same data sent again and again
    // with nothing acknowledged, then a RST, some 10 minutes after the last progress.
    let data = &r.analysis.connections[0].directions[0];
    let gave_up = data.gave_up.expect("the analyzer reports the abort");
    println!("imp analyze: {}", gave_up.describe());
    assert!(gave_up.reset, "{gave_up:?}");
    assert!(gave_up.retransmissions >= 3, "{gave_up:?}");
    assert!(
        (590.0..=605.0).contains(&gave_up.seconds),
        "{gave_up:?} against {silent:?}"
    );
    assert_eq!(r.analysis.connections[0].directions[1].gave_up, None);
}

#[test]
fn a_modern_tcp_is_still_retrying_at_ten_minutes() {
    let mut good = StackConfig::default();
    good.tcp.recv_buffer = 384;
    let r = run(good, DEAD_AT + Duration::from_secs(610));
    assert!(r.delivered > 20_000, "{} bytes", r.delivered);
    assert_eq!(r.ended, None, "a TCP without a user timeout");
    // Still retrying when the capture ends: no abort to report.
    let data = &r.analysis.connections[0].directions[0];
    assert!(data.retransmissions >= 3, "{data:?}");
    assert_eq!(data.gave_up, None, "{data:?}");
}
