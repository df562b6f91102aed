//! Seed 004's UCL runs (§4.3, "UCL/SU-DSL Experiments"): terminal-to-terminal letters
//! between SU-DSL and University College London, of which the report says only that "a
//! connection running up to 1 letters/second can be sustained indefinitely by UCL" and
//! that "the round-trip delays are horrendous (2-8 seconds!)", their cause not yet
//! tracked down. Nothing here is fitted to those two figures: the path is a stated
//! model of the 1976 route and the machines are the plan's.
//!
//! The model: SU-DSL's ELF (the 1975 CPU model, [`CpuProfile::elf_1975`]) on its
//! 50 kbit/s line (5 ms) to an IMP (a router that costs nothing); from the IMP to UCL
//! the ARPANET and its transatlantic circuit, taken as one 9.6 kbit/s line (the London
//! TIP's line rate) with 400 ms one way (a satellite hop, about 270 ms, and the
//! terrestrial hops on both sides) and 1% of frames lost (an assumption: the report
//! gives no loss figure), a 4 KiB queue; UCL's host on the same CPU model (the report
//! gives none for it). Both TCPs are the 1975 model (`LegacyProfile::Exerciser1975`):
//! a segment per letter, and the ELF's retransmission process waking every 4 s (Table
//! IV), resending each letter unacknowledged for 4 s and sending the ACKs no data
//! carried. SU-DSL types
//! 10-character letters at a fixed rate, whatever came back; UCL echoes each.

use std::fmt::Write;
use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::{LegacyProfile, TcpHandle};
use impnet_core::{Duration, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_wire::ipv4::Cidr;

use super::{LINE_BPS, cidr, cpu_free, cpu_wake};
use crate::cpu::CpuProfile;
use crate::{HostId, Sim};

/// Letter length: the report's 10 characters.
pub const UCL_LETTER: usize = 10;
/// Rate of the transatlantic line, bit/s.
pub const ATLANTIC_BPS: u64 = 9_600;
/// Its one-way delay.
pub const ATLANTIC_DELAY: Duration = Duration::from_millis(400);
/// Its frame loss.
pub const ATLANTIC_LOSS: f64 = 0.01;
/// The TCPs' fixed retransmission timeout.
pub const UCL_TIMEOUT: Duration = Duration::from_secs(4);

const SU: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const UCL: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const PORT: u16 = 23;

/// What one UCL run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct UclRun {
    /// Letters typed per second.
    pub offered_per_s: f64,
    /// Letters typed.
    pub typed: u64,
    /// Letters whose echo came back whole.
    pub echoed: u64,
    /// Virtual seconds of typing.
    pub seconds: f64,
    /// Round trips (letter typed to its echo read), sorted.
    pub round_trips: Vec<Duration>,
    /// Segments retransmitted, both ends.
    pub retransmissions: u64,
    /// SU-DSL's CPU busy share, %.
    pub su_busy_pct: f64,
}

impl UclRun {
    /// Echoed letters per second of typing.
    pub fn echoed_per_s(&self) -> f64 {
        self.echoed as f64 / self.seconds
    }

    /// The round trip at quantile `q` (0 to 1).
    pub fn round_trip(&self, q: f64) -> Duration {
        let n = self.round_trips.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let i = ((n - 1) as f64 * q).round() as usize;
        self.round_trips[i.min(n - 1)]
    }
}

fn tcp_config() -> StackConfig {
    let mut config = StackConfig::default();
    LegacyProfile::Exerciser1975 {
        timeout: UCL_TIMEOUT,
    }
    .apply(&mut config.tcp);
    config
}

/// SU-DSL, the IMP and UCL; the two hosts on the 1975 CPU model.
fn network(seed: u64) -> (Sim, HostId, HostId) {
    let mut sim = Sim::new(seed);
    let su = sim.add_host("su-dsl", tcp_config());
    let imp = sim.add_router("imp", tcp_config());
    let ucl = sim.add_host("ucl", tcp_config());
    let vdh = LinkConfig::default()
        .with_rate_bps(LINE_BPS)
        .with_delay(Duration::from_millis(5));
    let atlantic = LinkConfig::default()
        .with_rate_bps(ATLANTIC_BPS)
        .with_delay(ATLANTIC_DELAY)
        .with_loss(ATLANTIC_LOSS)
        .with_queue_limit_bytes(4096);
    for (host, addr, line) in [(su, SU, vdh), (ucl, UCL, atlantic)] {
        let [a, b, c, _] = addr.octets();
        let gateway = Ipv4Addr::new(a, b, c, 254);
        let link = sim
            .connect(host, cidr(addr), imp, cidr(gateway), line)
            .expect("the line is valid");
        let iface = sim.iface_on(host, link).expect("the host is on its link");
        let default = Cidr::new(Ipv4Addr::UNSPECIFIED, 0).expect("/0 is valid");
        sim.host_mut(host)
            .routes_mut()
            .add(default, Some(gateway), iface);
        sim.set_cpu(host, Some(CpuProfile::elf_1975()));
    }
    (sim, su, ucl)
}

/// Both ends of the terminal connection and what moved.
struct Terminals {
    su: HostId,
    ucl: HostId,
    conn: TcpHandle,
    listener: TcpHandle,
    echo: Option<TcpHandle>,
    pending: Vec<u8>,
    typed_at: Vec<Instant>,
    read: usize,
    round_trips: Vec<Duration>,
}

impl Terminals {
    /// Type due letters, echo at UCL, read echoes; each end only when its CPU is free.
    fn drive(&mut self, sim: &mut Sim, next_letter: &mut Instant, gap: Duration, end: Instant) {
        let now = sim.now();
        let mut buf = [0u8; 4096];
        if cpu_free(sim, self.su) {
            while *next_letter <= now && *next_letter < end {
                let letter = [b'x'; UCL_LETTER];
                if sim.host_mut(self.su).tcp_send(now, self.conn, &letter) != Ok(UCL_LETTER) {
                    break;
                }
                self.typed_at.push(*next_letter);
                *next_letter += gap;
            }
            while let Ok(n @ 1..) = sim.host_mut(self.su).tcp_recv(now, self.conn, &mut buf) {
                self.read += n;
                while self.round_trips.len() < self.read / UCL_LETTER {
                    let typed = self.typed_at[self.round_trips.len()];
                    self.round_trips.push(now - typed);
                }
            }
        }
        if cpu_free(sim, self.ucl) {
            let stack = sim.host_mut(self.ucl);
            if self.echo.is_none() {
                self.echo = stack.tcp_accept(self.listener).ok();
            }
            if let Some(echo) = self.echo {
                while let Ok(n @ 1..) = stack.tcp_recv(now, echo, &mut buf) {
                    self.pending.extend_from_slice(&buf[..n]);
                }
                let n = stack.tcp_send(now, echo, &self.pending).unwrap_or(0);
                self.pending.drain(..n);
            }
        }
    }
}

/// Type `letters_per_s` letters a second for `seconds` from SU-DSL to UCL's echoer and
/// wait up to a minute for the last echoes. An error says what failed.
pub fn ucl_run(letters_per_s: f64, seconds: u64, seed: u64) -> Result<UclRun, String> {
    let (mut sim, su, ucl) = network(seed);
    let start = sim.now();
    let remote = SocketAddrV4::new(UCL, PORT);
    let listener = sim
        .host_mut(ucl)
        .tcp_listen(remote, 1)
        .map_err(|e| format!("listen: {e}"))?;
    let conn = sim
        .host_mut(su)
        .tcp_connect(start, SocketAddrV4::new(SU, 0), remote)
        .map_err(|e| format!("connect: {e}"))?;
    let mut t = Terminals {
        su,
        ucl,
        conn,
        listener,
        echo: None,
        pending: Vec::new(),
        typed_at: Vec::new(),
        read: 0,
        round_trips: Vec::new(),
    };
    let gap = Duration::from_nanos((1e9 / letters_per_s) as u64);
    // Typing starts once the connection is open (a second in).
    let mut next_letter = start + Duration::from_secs(1);
    let end = next_letter + Duration::from_secs(seconds);
    let stop = end + Duration::from_secs(60);
    while sim.now() < stop && !(sim.now() >= end && t.round_trips.len() == t.typed_at.len()) {
        t.drive(&mut sim, &mut next_letter, gap, end);
        sim.transmit_now().map_err(|e| e.to_string())?;
        // The next letter to type (one due now waits for the CPU: its wake-up below).
        let letter = (next_letter < end && next_letter > sim.now()).then_some(next_letter);
        let wake = [letter, cpu_wake(&sim, [su, ucl].into_iter()), Some(stop)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(stop);
        if sim.next_event().is_none_or(|n| n > wake) {
            sim.run_until(wake, 1).map_err(|e| e.to_string())?;
        } else {
            sim.step();
        }
    }
    let retransmissions = [su, ucl]
        .iter()
        .map(|&h| sim.host(h).tcp_stats().retransmitted)
        .sum();
    let busy = sim.cpu_report(su).map_or(0.0, |r| r.busy.as_secs_f64());
    let mut round_trips = t.round_trips;
    round_trips.sort_unstable();
    Ok(UclRun {
        offered_per_s: letters_per_s,
        typed: t.typed_at.len() as u64,
        echoed: round_trips.len() as u64,
        seconds: seconds as f64,
        round_trips,
        retransmissions,
        su_busy_pct: 100.0 * busy / (sim.now() - start).as_secs_f64(),
    })
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The UCL rows beside the report's figures.
pub fn markdown(runs: &[UclRun]) -> String {
    let mut out = String::from(
        "| letters typed per second | 1976 | letters echoed per second | round trip: min, median, 90th percentile, max | retransmissions | SU-DSL CPU busy |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {:.1} | up to 1 letter/s sustained; round trips 2-8 s | {:.2} ({} of {}) | {}, {}, {}, {} | {} | {:.0}% |",
            r.offered_per_s,
            r.echoed_per_s(),
            r.echoed,
            r.typed,
            secs(r.round_trip(0.0)),
            secs(r.round_trip(0.5)),
            secs(r.round_trip(0.9)),
            secs(r.round_trip(1.0)),
            r.retransmissions,
            r.su_busy_pct
        );
    }
    out
}
