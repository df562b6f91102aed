//! The in-process workloads W1-W3 cut into a setup and a step: each stack (`imp_side`,
//! `smol`) sets a workload up once and then does one unit of it per call. `imp-bench`
//! times a loop of steps (the drivers below); the criterion benches
//! (`benches/workloads.rs`) time the steps themselves, on the same code.

use super::{Sample, Stopwatch, allocations, bulk_samples, pattern};

/// W1: one open connection carrying a stream A -> B.
pub trait Bulk: Sized {
    /// Two stacks back to back on a link of `mtu` bytes, checksums computed or
    /// offloaded, and one connection between them, established, nothing sent yet.
    fn open(mtu: usize, offload: bool) -> Self;

    /// One turn of the event loop: write as much of the stream's first `limit` bytes as
    /// the send buffer takes, move the frames, read all that arrived. Returns the bytes
    /// received so far. The pipe stays full from one call to the next.
    fn step(&mut self, limit: u64) -> u64;
}

/// W2: one open connection for 1-byte requests and responses, Nagle off on both ends.
pub trait PingPong: Sized {
    /// Two stacks back to back (MTU 1500, checksums computed) and the connection.
    fn open() -> Self;

    /// 1 byte there, read; 1 byte back, read.
    fn round_trip(&mut self);
}

/// W3: a server listening, connections opened and closed one after the other.
pub trait Churn: Sized {
    /// Two stacks back to back (MTU 1500, checksums computed), the server listening.
    fn open() -> Self;

    /// Connect, send 1 byte; the server reads it and closes first (it keeps TIME-WAIT);
    /// the client reads EOF and closes.
    fn connection(&mut self);
}

/// A bulk stream's bytes and progress, the same on every stack: the stream is one
/// 256 KiB pattern over and over, written and read in pieces of up to 256 KiB.
pub(crate) struct Stream {
    pattern: Vec<u8>,
    read_buffer: Vec<u8>,
    sent: u64,
    received: u64,
}

impl Stream {
    pub fn new() -> Stream {
        Stream {
            pattern: pattern(256 * 1024),
            read_buffer: vec![0; 256 * 1024],
            sent: 0,
            received: 0,
        }
    }

    /// Hand `send` the next pieces of the stream's first `limit` bytes until it takes
    /// none (it returns how many bytes it took: 0 when the send buffer is full).
    pub fn write(&mut self, limit: u64, mut send: impl FnMut(&[u8]) -> usize) {
        let len = self.pattern.len() as u64;
        while self.sent < limit {
            let start = (self.sent % len) as usize;
            let end = (start as u64 + (limit - self.sent).min(len)).min(len) as usize;
            match send(&self.pattern[start..end]) {
                0 => break,
                n => self.sent += n as u64,
            }
        }
    }

    /// Let `recv` fill the read buffer until it returns 0 (nothing more has arrived);
    /// returns the bytes received so far.
    pub fn read(&mut self, mut recv: impl FnMut(&mut [u8]) -> usize) -> u64 {
        loop {
            match recv(&mut self.read_buffer) {
                0 => return self.received,
                n => self.received += n as u64,
            }
        }
    }
}

/// W1: `total` bytes A -> B on one connection; throughput, CPU per GiB, and
/// allocations per GiB counted after a warm-up of 1/8 of the transfer.
pub(crate) fn bulk<F: Bulk>(workload: &str, mtu: usize, offload: bool, total: u64) -> Vec<Sample> {
    let mut flow = F::open(mtu, offload);
    let warm = total / 8;
    let mut received = 0;
    let mut counted: Option<(u64, u64)> = None;
    let watch = Stopwatch::start();
    while received < total {
        received = flow.step(total);
        if counted.is_none() && received >= warm {
            counted = Some((allocations(), received));
        }
    }
    let times = watch.stop();
    let allocs = counted.map(|(at, from)| {
        let bytes = (received - from).max(1) as f64;
        (allocations() - at) as f64 / bytes * (1u64 << 30) as f64
    });
    bulk_samples(workload, total, times, allocs)
}

/// W1 (row `workload`) on two stacks at once, as [`interleaved`] does W2 and W3: both
/// connections open, then at least `total` bytes each in [`BLOCKS`] blocks taken in
/// turn, each block a stack's steps until it has received its share so far. The
/// stream has no end, so no block drains the pipe with a short last segment (which
/// Nagle and delayed ACKs would hold); between steps nothing is in flight. Each
/// stack's throughput and CPU per GiB are over its own blocks, its allocations per GiB
/// over its blocks after the first eighth.
pub(crate) fn interleaved_bulk<A: Bulk, B: Bulk>(
    workload: &str,
    mtu: usize,
    offload: bool,
    total: u64,
) -> [Vec<Sample>; 2] {
    let (mut a, mut b) = (A::open(mtu, offload), B::open(mtu, offload));
    let per_block = (total / BLOCKS).max(1);
    let mut times = [(0.0f64, 0.0f64); 2];
    let mut received = [0u64; 2];
    // Allocations and the bytes received while they were counted.
    let mut allocs = [(0u64, 0u64); 2];
    for block in 0..2 * BLOCKS {
        let b_turn = (block % 2 == 1) != ((block / 2) % 2 == 1);
        let side = usize::from(b_turn);
        let end = per_block * (block / 2 + 1);
        let (from, at) = (received[side], allocations());
        let watch = Stopwatch::start();
        while received[side] < end {
            received[side] = if b_turn {
                b.step(u64::MAX)
            } else {
                a.step(u64::MAX)
            };
        }
        let (wall, cpu) = watch.stop();
        times[side] = (times[side].0 + wall, times[side].1 + cpu);
        if block / 2 >= BLOCKS / 8 {
            let (count, bytes) = allocs[side];
            allocs[side] = (count + allocations() - at, bytes + received[side] - from);
        }
    }
    [0, 1].map(|side| {
        let (count, bytes) = allocs[side];
        let per_gib = count as f64 / bytes.max(1) as f64 * (1u64 << 30) as f64;
        bulk_samples(workload, received[side], times[side], Some(per_gib))
    })
}

/// W2 (row `name`): `rounds` 1-byte round trips; round trips/s.
pub(crate) fn ping_pong<P: PingPong>(name: &str, rounds: u64) -> Vec<Sample> {
    let mut connection = P::open();
    let watch = Stopwatch::start();
    for _ in 0..rounds {
        connection.round_trip();
    }
    let (wall, _) = watch.stop();
    vec![Sample::new(name, "round trips/s", rounds as f64 / wall)]
}

/// How many blocks each of two stacks runs in [`interleaved`].
const BLOCKS: u64 = 50;

/// One unit of W2 or W3 (a round trip, a connection), whichever stack runs it.
pub(crate) trait Unit {
    fn open() -> Self;
    fn unit(&mut self);
}

impl<P: PingPong> Unit for Ping<P> {
    fn open() -> Self {
        Ping(P::open())
    }
    fn unit(&mut self) {
        self.0.round_trip();
    }
}

impl<C: Churn> Unit for Conns<C> {
    fn open() -> Self {
        Conns(C::open())
    }
    fn unit(&mut self) {
        self.0.connection();
    }
}

/// W2 as a [`Unit`].
pub(crate) struct Ping<P>(P);

/// W3 as a [`Unit`].
pub(crate) struct Conns<C>(C);

/// W2 or W3 (row `name`, `unit` per second) on two stacks at once: both set up, then
/// `count` units each in [`BLOCKS`] blocks taken in turn (A B, B A, A B, ...), each
/// stack's rate its units over the time of its own blocks. On a shared machine whose
/// speed drifts by 2x from one second to the next, two stacks run one after the other
/// see different machines; in blocks of milliseconds taken in turn they see the same
/// one, so their ratio holds from run to run where the rates do not.
pub(crate) fn interleaved<A: Unit, B: Unit>(
    name: &str,
    unit: &'static str,
    count: u64,
) -> [Sample; 2] {
    let (mut a, mut b) = (A::open(), B::open());
    let per_block = (count / BLOCKS).max(1);
    let mut seconds = [0.0f64; 2];
    for block in 0..2 * BLOCKS {
        // A B, B A, A B, ...: neither always goes first.
        let b_turn = (block % 2 == 1) != ((block / 2) % 2 == 1);
        let watch = Stopwatch::start();
        for _ in 0..per_block {
            if b_turn { b.unit() } else { a.unit() }
        }
        seconds[usize::from(b_turn)] += watch.wall_elapsed().as_secs_f64();
    }
    let units = (per_block * BLOCKS) as f64;
    seconds.map(|s| Sample::new(name, unit, units / s))
}

/// W3 (row `name`): `count` connections; connections/s.
pub(crate) fn churn<C: Churn>(name: &str, count: u64) -> Vec<Sample> {
    let mut server = C::open();
    let watch = Stopwatch::start();
    for _ in 0..count {
        server.connection();
    }
    let (wall, _) = watch.stop();
    vec![Sample::new(name, "connections/s", count as f64 / wall)]
}

/// W4's step through `n` connections: the next round trip goes to `(at + stride) % n`.
/// The stride is coprime with `n`, so `n` steps visit every connection once (a stride
/// sharing a factor with `n` would cycle through only `n / gcd` of them: the former
/// `7919 % n + 1` is 7920 at every size above 7919 and at 100, and shared 80 with 100k,
/// so W4 "at 100k" touched 1,250 connections and "at 100" five). Near 7919 (a prime),
/// so consecutive round trips land far apart in the table.
pub fn scale_stride(n: usize) -> usize {
    if n <= 1 {
        return 1;
    }
    let mut stride = 7919 % n;
    while stride == 0 || gcd(stride, n) != 1 {
        stride = (stride + 1) % n;
    }
    stride
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::{BLOCKS, Bulk, Unit, interleaved, interleaved_bulk, scale_stride};

    /// Whether walking `n` steps of `stride` from 0 visits each of `n` connections once.
    fn visits_all(n: usize, stride: usize) -> bool {
        let mut seen = vec![false; n];
        let mut at = 0;
        for _ in 0..n {
            if seen[at] {
                return false;
            }
            seen[at] = true;
            at = (at + stride) % n;
        }
        true
    }

    #[test]
    fn the_stride_visits_every_connection_at_every_size() {
        for n in [
            1, 2, 3, 10, 100, 7919, 7920, 10_000, 16_000, 100_000, 1_000_000,
        ] {
            assert!(visits_all(n, scale_stride(n)), "n = {n}");
        }
        // The former stride did not (it shares 20 with 100, 80 with 100k).
        assert!(!visits_all(100, 7919 % 100 + 1));
        assert!(!visits_all(100_000, 7920));
    }

    thread_local! {
        /// Which stack ran each unit, in order.
        static RAN: std::cell::RefCell<Vec<char>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    struct A;
    struct B;

    impl Unit for A {
        fn open() -> A {
            A
        }
        fn unit(&mut self) {
            RAN.with(|ran| ran.borrow_mut().push('a'));
        }
    }

    impl Unit for B {
        fn open() -> B {
            B
        }
        fn unit(&mut self) {
            RAN.with(|ran| ran.borrow_mut().push('b'));
        }
    }

    #[test]
    fn interleaved_runs_each_stack_its_units_in_blocks_taken_in_turn() {
        RAN.with(|ran| ran.borrow_mut().clear());
        let [a, b] = interleaved::<A, B>("W2", "round trips/s", 3 * BLOCKS);
        let ran = RAN.with(|ran| ran.borrow().clone());
        assert_eq!(ran.len() as u64, 6 * BLOCKS);
        assert_eq!(ran.iter().filter(|&&c| c == 'a').count() as u64, 3 * BLOCKS);
        // Blocks of three: a b, b a, a b, ...
        let blocks: String = ran.chunks(3).map(|block| block[0]).collect();
        assert!(
            ran.chunks(3)
                .all(|block| block.iter().all(|&c| c == block[0]))
        );
        assert!(blocks.starts_with("abbaabba"), "{blocks}");
        for sample in [&a, &b] {
            assert_eq!(sample.workload, "W2");
            assert!(sample.value.is_finite() && sample.value > 0.0);
        }
    }

    /// A bulk flow that delivers 1,000 bytes a step, logging its side's letter.
    struct Flow<const SECOND: bool>(u64);

    impl<const SECOND: bool> Bulk for Flow<SECOND> {
        fn open(_: usize, _: bool) -> Self {
            Flow(0)
        }
        fn step(&mut self, limit: u64) -> u64 {
            assert_eq!(limit, u64::MAX, "the interleaved stream has no end");
            RAN.with(|ran| ran.borrow_mut().push(if SECOND { 'b' } else { 'a' }));
            self.0 += 1000;
            self.0
        }
    }

    #[test]
    fn interleaved_bulk_gives_each_stack_its_share_per_block_in_turn() {
        RAN.with(|ran| ran.borrow_mut().clear());
        // 2,500 bytes a block: three steps each (the last one past the share).
        let [a, b] = interleaved_bulk::<Flow<false>, Flow<true>>("W1a", 1500, false, 2500 * BLOCKS);
        let ran = RAN.with(|ran| ran.borrow().clone());
        // Block k ends once the side has 2,500 * k bytes: steps 3, 2, 3, 2, ... (the
        // overshoot counts towards the next block).
        let steps = |side: char| ran.iter().filter(|&&c| c == side).count() as u64;
        assert_eq!(steps('a'), 2500 * BLOCKS / 1000);
        assert_eq!(steps('b'), steps('a'));
        let mut turns: Vec<char> = ran.clone();
        turns.dedup();
        assert!(
            turns.iter().collect::<String>().starts_with("abab"),
            "{turns:?}"
        );
        for samples in [&a, &b] {
            assert_eq!(samples[0].workload, "W1a");
            assert_eq!(samples[0].unit, "Gbit/s");
            assert!(samples[0].value.is_finite() && samples[0].value > 0.0);
        }
    }

    #[test]
    fn the_stride_is_near_7919_when_the_table_is_larger() {
        assert_eq!(scale_stride(100_000), 7919);
        assert_eq!(scale_stride(10_000_000), 7919);
        assert_eq!(scale_stride(100), 19);
    }
}
