//! W9, the speed-up ladder: seed 000's 1981 plan for the BBN/Berkeley TCP ("4096 byte
//! segments ... fragmenting at the IP layer", "eliminate a copy of the data (when it is
//! read)", "checksum calculation support from the interface hardware", "a transmission
//! medium which allowed us to use 4k packets", "a variant on the send system call which
//! released the virtual memory") climbed on imp, in process: two stacks in one thread as
//! in W1 (`imp_side::Pair`), one bulk connection A -> B per rung, each rung adding one
//! change to the one before. imp alone: the point is what each step buys on one stack.
//!
//! | rung | record | MTU | segments | checksum | read | write |
//! |---|---|---|---|---|---|---|
//! | L1 | 1 KiB | 1500 | MSS | computed | copy | copy |
//! | L2 | 4 KiB | 1500 | MSS | computed | copy | copy |
//! | L3 | 4 KiB | 1500 | 4096 bytes, IP-fragmented | computed | copy | copy |
//! | L4 | 4 KiB | 1500 | 4096, fragmented | computed | lent (`recv_with`) | copy |
//! | L5 | 4 KiB | 1500 | 4096, fragmented | offloaded | lent | copy |
//! | L6 | 4 KiB | 9000 | MSS | offloaded | lent | copy |
//! | L7 | 4 KiB | 9000 | MSS | offloaded | lent | owned (`send_owned`) |
//! | L8 | 64 KiB | 9000 | MSS | offloaded | lent | owned |
//! | L9 | 64 KiB | 65535 | MSS | offloaded | lent | owned |
//! | L8c, L9c | as L8, L9 | | | | | copy |
//!
//! L8c and L9c stand beside the ladder: its top two rungs with copying writes, so the
//! owned write is measured against the copy at 64 KiB records as well as at 4 KiB
//! (L6 against L7).
//!
//! The application makes every record before writing it, as one read from a file
//! would: it copies the record from a pattern into its buffer (one reused buffer for
//! a copying write, a new `Vec` for `send_owned`, which keeps it). A copying write
//! then copies it into the send ring; `send_owned` does not. The reader copies out of
//! the receive ring into its buffer, or (lent) looks at the bytes in place and
//! consumes them. Under checksum offload a segment IP fragments still has its
//! checksum computed by the sender (no device sums a datagram it sees in fragments);
//! the receiver skips verifying (L5).
//!
//! Rows per rung: `W9-Ln` (Gbit/s of payload), `W9-Ln-cpu` (CPU s/GiB) and
//! `W9-Ln-x` (the speed-up over L1 in throughput, from runs made back to back in the
//! same repetition; its median over the repetitions).

use std::net::SocketAddrV4;

use impnet_core::tcp::{TcpConfig, TcpError, TcpHandle};

use super::imp_side::{B, Pair, bulk_config};
use super::{Sample, Stopwatch, pattern};

/// One rung: what the transfer uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rung {
    /// Row name (`W9-` + this).
    pub name: &'static str,
    /// What changed from the rung before, for the legend.
    pub change: &'static str,
    /// Application write size.
    pub record: usize,
    /// Link MTU.
    pub mtu: usize,
    /// `TcpConfig::segment_size`: segments larger than the MTU, fragmented by IP.
    pub segment_size: Option<u16>,
    /// Checksum offload on both stacks' interfaces.
    pub offload: bool,
    /// The reader borrows the receive ring (`recv_with`) instead of copying out.
    pub lend: bool,
    /// The writer hands its buffers over (`send_owned`) instead of copying them in.
    pub owned: bool,
}

const BASE: Rung = Rung {
    name: "L1",
    change: "1981: 1 KiB records, MTU 1500, checksums computed, copies both ends",
    record: 1024,
    mtu: 1500,
    segment_size: None,
    offload: false,
    lend: false,
    owned: false,
};

/// The rungs, each one change from the one before (`LADDER` of them), then rungs
/// beside the ladder: the top two with copying writes, to set the owned write against
/// the copy at 64 KiB records.
pub(crate) const RUNGS: [Rung; 11] = [
    BASE,
    Rung {
        name: "L2",
        change: "4 KiB records",
        record: 4096,
        ..BASE
    },
    Rung {
        name: "L3",
        change: "4096-byte segments, fragmented by IP",
        record: 4096,
        segment_size: Some(4096),
        ..BASE
    },
    Rung {
        name: "L4",
        change: "reads lend the receive ring (no copy out)",
        record: 4096,
        segment_size: Some(4096),
        lend: true,
        ..BASE
    },
    Rung {
        name: "L5",
        change: "checksum offload",
        record: 4096,
        segment_size: Some(4096),
        lend: true,
        offload: true,
        ..BASE
    },
    Rung {
        name: "L6",
        change: "MTU 9000 (no fragments)",
        record: 4096,
        mtu: 9000,
        lend: true,
        offload: true,
        ..BASE
    },
    Rung {
        name: "L7",
        change: "writes hand their buffers over (no copy in)",
        record: 4096,
        mtu: 9000,
        lend: true,
        offload: true,
        owned: true,
        ..BASE
    },
    Rung {
        name: "L8",
        change: "64 KiB records",
        record: 65536,
        mtu: 9000,
        lend: true,
        offload: true,
        owned: true,
        ..BASE
    },
    Rung {
        name: "L9",
        change: "MTU 65535",
        record: 65536,
        mtu: 65535,
        lend: true,
        offload: true,
        owned: true,
        ..BASE
    },
    Rung {
        name: "L8c",
        change: "beside the ladder: L8 with copying writes",
        record: 65536,
        mtu: 9000,
        lend: true,
        offload: true,
        ..BASE
    },
    Rung {
        name: "L9c",
        change: "beside the ladder: L9 with copying writes",
        record: 65536,
        mtu: 65535,
        lend: true,
        offload: true,
        ..BASE
    },
];

/// How many of `RUNGS` make the ladder proper.
const LADDER: usize = 9;

const PORT: u16 = 5009;

/// One rung's transfer: the pair, the connection and the writer's state.
struct Flow {
    rung: Rung,
    pair: Pair,
    client: TcpHandle,
    server: TcpHandle,
    /// The stream's source: records are cut from it.
    pattern: Vec<u8>,
    /// The copying writer's record buffer, and how much of it was written.
    record: Vec<u8>,
    record_sent: usize,
    /// The owned writer's record the send buffer had no room for yet.
    waiting: Option<Vec<u8>>,
    /// The copying reader's buffer.
    read_buffer: Vec<u8>,
    /// Stream bytes made into records, and received.
    made: u64,
    received: u64,
    /// The writer closed its half after the last record (as ttcp closes).
    closed: bool,
}

impl Flow {
    fn open(rung: Rung) -> Flow {
        let tcp = TcpConfig {
            segment_size: rung.segment_size,
            ..bulk_config()
        };
        let mut pair = Pair::new(rung.mtu, rung.offload, tcp);
        let listener = pair
            .b
            .tcp_listen(SocketAddrV4::new(B, PORT), 8)
            .expect("listen");
        let (client, server) = pair.open(listener, PORT);
        Flow {
            rung,
            pair,
            client,
            server,
            pattern: pattern(256 * 1024),
            record: vec![0; rung.record],
            record_sent: rung.record,
            waiting: None,
            read_buffer: vec![0; 256 * 1024],
            made: 0,
            received: 0,
            closed: false,
        }
    }

    /// The next record's bytes, cut from the pattern (records divide its length).
    fn next_piece(&mut self) -> &[u8] {
        let at = (self.made % self.pattern.len() as u64) as usize;
        self.made += self.rung.record as u64;
        &self.pattern[at..at + self.rung.record]
    }

    /// Write records of the stream's first `limit` bytes until the send buffer is full;
    /// after the last one, close the sending half (its FIN pushes the tail, which
    /// Nagle's algorithm would otherwise hold until the peer's delayed ACK).
    fn write(&mut self, limit: u64) {
        let now = self.pair.now();
        self.write_records(limit);
        let done = self.made >= limit && self.waiting.is_none();
        if done && self.record_sent == self.record.len() && !self.closed {
            self.pair
                .a
                .tcp_shutdown(now, self.client)
                .expect("imp shutdown");
            self.closed = true;
        }
    }

    /// Write records until the send buffer is full or the stream's `limit` is reached.
    fn write_records(&mut self, limit: u64) {
        let now = self.pair.now();
        loop {
            if self.rung.owned {
                let record = match self.waiting.take() {
                    Some(record) => record,
                    None if self.made < limit => self.next_piece().to_vec(),
                    None => return,
                };
                match self.pair.a.tcp_send_owned(now, self.client, record) {
                    Ok(()) => {}
                    Err(e) if e.error == TcpError::WouldBlock => {
                        self.waiting = Some(e.data);
                        return;
                    }
                    Err(e) => panic!("imp send_owned: {e}"),
                }
            } else {
                if self.record_sent == self.record.len() {
                    if self.made >= limit {
                        return;
                    }
                    let mut record = std::mem::take(&mut self.record);
                    record.copy_from_slice(self.next_piece());
                    self.record = record;
                    self.record_sent = 0;
                }
                let rest = &self.record[self.record_sent..];
                match self.pair.a.tcp_send(now, self.client, rest) {
                    Ok(n) => self.record_sent += n,
                    Err(TcpError::WouldBlock) => return,
                    Err(e) => panic!("imp send: {e}"),
                }
            }
        }
    }

    /// Read all that arrived; the bytes received so far.
    fn read(&mut self) -> u64 {
        let now = self.pair.now();
        loop {
            let result = if self.rung.lend {
                self.pair.b.tcp_recv_with(now, self.server, <[u8]>::len)
            } else {
                self.pair
                    .b
                    .tcp_recv(now, self.server, &mut self.read_buffer)
            };
            match result {
                Ok(0) => return self.received,
                Ok(n) => self.received += n as u64,
                Err(TcpError::WouldBlock) => return self.received,
                Err(e) => panic!("imp recv: {e}"),
            }
        }
    }

    /// One turn of the loop: write, move the frames, read.
    fn step(&mut self, limit: u64) -> u64 {
        self.write(limit);
        self.pair.pump();
        self.read()
    }
}

/// `total` bytes A -> B on one rung: (wall s, CPU s).
fn climb(rung: Rung, total: u64) -> (f64, f64) {
    let mut flow = Flow::open(rung);
    let watch = Stopwatch::start();
    while flow.step(total) < total {}
    watch.stop()
}

/// Every rung once, in order, `total` bytes each: throughput, CPU per GiB and the
/// speed-up over the first rung.
pub(crate) fn run(total: u64) -> Vec<Sample> {
    let gib = total as f64 / (1u64 << 30) as f64;
    let mut samples = Vec::new();
    let mut first = None;
    for rung in RUNGS {
        let (wall, cpu) = climb(rung, total);
        let gbits = total as f64 * 8.0 / wall / 1e9;
        let base = *first.get_or_insert(gbits);
        let name = format!("W9-{}", rung.name);
        samples.push(Sample::new(name.clone(), "Gbit/s", gbits));
        samples.push(Sample::new(format!("{name}-cpu"), "CPU s/GiB", cpu / gib));
        samples.push(Sample::new(format!("{name}-x"), "x over L1", gbits / base));
    }
    samples
}

/// The legend printed above the table: what each rung changed.
pub(crate) fn legend() -> String {
    let mut text = String::from("W9 ladder (each rung adds one change to the one before):");
    for (i, rung) in RUNGS.iter().enumerate() {
        let indent = if i < LADDER { "  " } else { "    " };
        text.push_str(&format!("\n{indent}{}: {}", rung.name, rung.change));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rung moves the whole stream, and the rungs differ only where they say.
    #[test]
    fn every_rung_moves_the_stream() {
        for rung in RUNGS {
            let mut flow = Flow::open(rung);
            let total = 3 << 20;
            let started = std::time::Instant::now();
            while flow.step(total) < total {
                let waited = started.elapsed();
                assert!(
                    waited.as_secs() < 20,
                    "{}: stalled at {}",
                    rung.name,
                    flow.received
                );
            }
            assert_eq!(flow.received, total, "{}", rung.name);
            let frag = flow.pair.a.stats().ipv4.tx_fragments > 0;
            assert_eq!(
                frag,
                rung.segment_size.is_some(),
                "{}: fragments",
                rung.name
            );
        }
        for pair in RUNGS[..LADDER].windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let changes = [
                a.record != b.record,
                a.mtu != b.mtu,
                a.segment_size != b.segment_size,
                a.offload != b.offload,
                a.lend != b.lend,
                a.owned != b.owned,
            ];
            let n = changes.iter().filter(|&&c| c).count();
            // MTU 9000 also ends the forced segment size (the two go together).
            assert!(
                n == 1 || (n == 2 && a.mtu != b.mtu),
                "{} -> {}",
                a.name,
                b.name
            );
        }
        // Beside the ladder: a rung of it with copying writes.
        for side in &RUNGS[LADDER..] {
            let twin = RUNGS[..LADDER]
                .iter()
                .find(|r| side.name.starts_with(r.name))
                .expect("its rung");
            assert!(twin.owned && !side.owned, "{}", side.name);
            assert_eq!(
                (twin.record, twin.mtu),
                (side.record, side.mtu),
                "{}",
                side.name
            );
        }
    }
}
