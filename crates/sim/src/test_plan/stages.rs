//! One looped letter, stage by stage, from the model's own timestamps: seed 004's
//! Table IV (a letter's way from the user's SEND to its acknowledgment, in intervals)
//! and Table V (the SEND-to-RECEIVE round trip split between TCP, the line's driver and
//! the user). The host runs the plan's CPU ([`super::plan_cpu`]); the simulator stamps
//! each looped datagram when it goes into the loop, when the CPU takes it and when the
//! CPU is done with it ([`crate::Sim::record_loopback`]), and the CPU's report splits
//! its busy time by stage ([`crate::cpu::Stages`]).

use std::fmt::Write;
use std::net::SocketAddrV4;

use impnet_core::tcp::{TcpHandle, TcpState};
use impnet_core::{Duration, Instant};

use super::{Network, PORT, Test, cpu_free, cpu_wake, letter_bytes, network, plan_cpu};
use crate::cpu::{LoopRecord, Stages};
use crate::{HostId, Sim};

/// Letters sent before the one timed (the connection's first round trips set its
/// timers up).
const WARM_UP: usize = 3;

/// Seed 004's Table IV, cumulative: (milestone, ms since the user's SEND).
pub const TABLE_IV: [(&str, f64); 4] = [
    (
        "letter handed to the line (TCP Send 18.5 ms, RTP 9.9 ms)",
        28.4,
    ),
    ("letter received, user signalled", 110.5),
    ("user's RECEIVE done", 177.8),
    ("letter sent and acknowledged", 1259.0),
];

/// Seed 004's Table V, corrected for the timestamps' overhead: TCP, the RTP (the line's
/// driver) and the user, ms, from SEND to RECEIVE.
pub const TABLE_V: [f64; 3] = [46.1, 50.1, 49.7];

/// A looped letter's way, from the model's timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct LetterStages {
    /// The test it ran in (a1 or a2).
    pub test: Test,
    /// Letter length, bytes.
    pub letter: usize,
    /// Since the user's SEND: the letter went into the loop (the CPU done with the
    /// SEND, TCP's output and the loop's way in).
    pub into_loop: Duration,
    /// The CPU took it from the receive buffer.
    pub taken: Duration,
    /// The CPU was done taking it in: the letter readable, the user signalled.
    pub received: Duration,
    /// The user's RECEIVE was made (when the CPU was free) and done.
    pub receive_call: Duration,
    /// The receive done.
    pub receive_done: Duration,
    /// The ACK of the letter went into the loop.
    pub ack_into_loop: Duration,
    /// The CPU was done taking the ACK in: the letter sent and acknowledged.
    pub acked: Duration,
    /// CPU time from the SEND to the RECEIVE done, by stage.
    pub stages: Stages,
}

impl LetterStages {
    /// Table IV's milestones, in its order: into the loop, received, RECEIVE done,
    /// acknowledged.
    pub fn milestones(&self) -> [Duration; 4] {
        [self.into_loop, self.received, self.receive_done, self.acked]
    }

    /// Table V's three stages, ms: TCP (with IP and checksums), the driver (the loop's
    /// way in and out), the user (the calls and copies).
    pub fn table_v_ms(&self) -> [f64; 3] {
        let ms = |picos: u128| picos as f64 * 1e-9;
        let s = &self.stages;
        [ms(s.tcp + s.ip + s.checksum), ms(s.driver), ms(s.user)]
    }
}

/// Time one `letter`-byte letter of `test` (a1 or a2: a connection to itself) after
/// three others (the connection's first round trips set its timers up), on the
/// plan's CPU. An error says what failed.
pub fn letter_stages(test: Test, letter: usize, seed: u64) -> Result<LetterStages, String> {
    if !matches!(test, Test::SelfConnection | Test::Loopback) {
        return Err(format!("{}: stages are timed on a1 or a2", test.label()));
    }
    let Network {
        mut sim,
        exerciser: host,
        target,
        ..
    } = network(test, seed, Some(&plan_cpu(test)));
    let me = SocketAddrV4::new(target, PORT);
    let now = sim.now();
    let conn = sim
        .host_mut(host)
        .tcp_connect(now, me, me)
        .map_err(|e| format!("connect: {e}"))?;
    settle(&mut sim)?;
    let state = sim.host(host).tcp_info(conn).map(|i| i.state);
    if state != Some(TcpState::Established) {
        return Err(format!("the connection is {state:?}, not established"));
    }
    for _ in 0..WARM_UP {
        one_letter(&mut sim, host, conn, letter)?;
    }
    one_letter(&mut sim, host, conn, letter)
        .and_then(|t| t.stages(test, letter, sim.loopback_log(host)))
}

/// Run two quiet seconds (the handshake's or the last letter's ACKs and timers).
fn settle(sim: &mut Sim) -> Result<(), String> {
    sim.transmit_now().map_err(|e| e.to_string())?;
    let until = sim.now() + Duration::from_secs(2);
    sim.run_until(until, 100_000).map_err(|e| e.to_string())?;
    Ok(())
}

/// The instants one letter's user calls were made and done, and the CPU's stages then.
struct Timeline {
    send: Instant,
    receive_call: Instant,
    receive_done: Instant,
    before: Stages,
    at_receive: Stages,
}

/// Send one letter to ourselves, read it back, wait until it is acknowledged and the
/// host quiet; the loop's records of it are kept from the SEND on.
fn one_letter(
    sim: &mut Sim,
    host: HostId,
    conn: TcpHandle,
    letter: usize,
) -> Result<Timeline, String> {
    sim.record_loopback(host);
    let report = |sim: &Sim| sim.cpu_report(host).map(|r| r.stages).unwrap_or_default();
    let send = sim.now();
    let before = report(sim);
    let mut bytes = vec![0u8; letter];
    letter_bytes(0, &mut bytes);
    let sent = sim.host_mut(host).tcp_send(send, conn, &bytes);
    if sent != Ok(letter) {
        return Err(format!("SEND took {sent:?} of {letter} bytes"));
    }
    sim.transmit_now().map_err(|e| e.to_string())?;
    let mut read = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut receive = None;
    for _ in 0..1_000_000 {
        let now = sim.now();
        if read < letter && cpu_free(sim, host) {
            let got = sim
                .host_mut(host)
                .tcp_recv(now, conn, &mut buf)
                .unwrap_or(0);
            read += got;
            if read >= letter {
                sim.transmit_now().map_err(|e| e.to_string())?;
                let done = sim.cpu_busy_until(host).unwrap_or(now);
                receive = Some((now, done, report(sim)));
            }
        }
        let acked = sim
            .host(host)
            .tcp_info(conn)
            .is_some_and(|i| i.bytes_in_flight == 0);
        if let Some((receive_call, receive_done, at_receive)) = receive
            && acked
            && cpu_free(sim, host)
        {
            settle(sim)?;
            return Ok(Timeline {
                send,
                receive_call,
                receive_done,
                before,
                at_receive,
            });
        }
        let wake = cpu_wake(sim, std::iter::once(host));
        match (wake, sim.next_event()) {
            (Some(w), next) if next.is_none_or(|t| t > w) => {
                sim.run_until(w, 1).map_err(|e| e.to_string())?;
            }
            _ => {
                if !sim.step() {
                    return Err(format!("idle at {:?} with the letter out", sim.now()));
                }
            }
        }
    }
    Err("step cap reached".into())
}

impl Timeline {
    /// The letter's stages: its datagram is the first looped one carrying `letter`
    /// bytes more than the shortest, its ACK the first after it without them.
    fn stages(self, test: Test, letter: usize, log: &[LoopRecord]) -> Result<LetterStages, String> {
        let shortest = log.iter().map(|r| r.bytes).min().unwrap_or(0);
        let data = log
            .iter()
            .position(|r| r.bytes >= shortest + letter && letter > 0)
            .ok_or("no looped datagram carried the letter")?;
        let ack = log[data + 1..]
            .iter()
            .find(|r| r.bytes + letter == log[data].bytes)
            .ok_or("the letter's ACK never went through the loop")?;
        let data = &log[data];
        let since = |t: Option<Instant>| t.map_or(Duration::ZERO, |t| t - self.send);
        Ok(LetterStages {
            test,
            letter,
            into_loop: since(Some(data.looped)),
            taken: since(data.taken),
            received: since(data.done),
            receive_call: since(Some(self.receive_call)),
            receive_done: since(Some(self.receive_done)),
            ack_into_loop: since(Some(ack.looped)),
            acked: since(ack.done),
            stages: self.at_receive.since(&self.before),
        })
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Tables IV and V beside imp's stages for each of `runs`.
pub fn markdown(runs: &[LetterStages]) -> String {
    let mut out = String::from("| milestone, since the user's SEND | 1975 (Table IV) |");
    let mut rule = String::from("|---|---|");
    for r in runs {
        let _ = write!(out, " imp {} |", r.test.label());
        rule.push_str("---|");
    }
    let _ = writeln!(out, "\n{rule}");
    for (i, (what, then)) in TABLE_IV.iter().enumerate() {
        let _ = write!(out, "| {what} | {then:.1} ms |");
        for r in runs {
            let _ = write!(out, " {} |", ms(r.milestones()[i]));
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\nTable V, CPU time from SEND to RECEIVE done by stage:\n\n\
         | stage | 1975 (Table V) |"
    );
    for r in runs {
        let _ = write!(out, " imp {} |", r.test.label());
    }
    let _ = writeln!(out, "\n{rule}");
    let total_1975: f64 = TABLE_V.iter().sum();
    for (i, name) in ["TCP", "driver (the 1975 RTP; imp's loop)", "user"]
        .iter()
        .enumerate()
    {
        let _ = write!(
            out,
            "| {name} | {:.1} ms ({:.1}%) |",
            TABLE_V[i],
            100.0 * TABLE_V[i] / total_1975
        );
        for r in runs {
            let v = r.table_v_ms();
            let total: f64 = v.iter().sum();
            let _ = write!(out, " {:.1} ms ({:.1}%) |", v[i], 100.0 * v[i] / total);
        }
        out.push('\n');
    }
    let _ = write!(out, "| total | {total_1975:.1} ms |");
    for r in runs {
        let total: f64 = r.table_v_ms().iter().sum();
        let _ = write!(out, " {total:.1} ms |");
    }
    out.push('\n');
    out
}
