//! `imp-bench`'s in-process workloads as criterion benches: imp and smoltcp side by side
//! in one group per workload, each stack driven by the same set-up and step that
//! `imp-bench` times (`impnet_bench::workload`).
//!
//! - W1a / W1b bulk (MTU 1500 with checksums / MTU 65535 with checksum offload): one
//!   connection opened before measuring and kept streaming; an iteration carries
//!   `BULK_BYTES` more of the stream, so every iteration sees the steady state.
//! - W2 ping-pong: an iteration is one 1-byte round trip on an open connection.
//! - W3 churn: an iteration is one connection: connect, 1 byte, close (the server
//!   keeps TIME-WAIT).
//! - W7 forwarding (imp only: smoltcp does not forward): an iteration is one batch of
//!   prebuilt 64-byte UDP frames through the router alone (`handle_frame` and
//!   `poll_transmit` per frame).
//!
//! `cargo bench -p impnet-bench --bench workloads`

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use impnet_bench::workload::{Bulk, Churn, PingPong};
use impnet_bench::{imp_side, smol, w7};

/// Stream bytes per bulk iteration: four socket buffers' worth (256 KiB each).
const BULK_BYTES: u64 = 1 << 20;

/// One stack's bulk stream. The target grows by `BULK_BYTES` per iteration, so what one
/// iteration reads past its target counts for the next one.
fn bulk<F: Bulk>(group: &mut BenchmarkGroup<WallTime>, name: &str, mtu: usize, offload: bool) {
    let mut flow = F::open(mtu, offload);
    let (mut target, mut received) = (0, 0);
    group.bench_function(name, |b| {
        b.iter(|| {
            target += BULK_BYTES;
            while received < target {
                received = flow.step(u64::MAX);
            }
        })
    });
}

fn bench_bulk(c: &mut Criterion) {
    for (workload, mtu, offload) in [
        ("W1a-bulk-mtu1500", 1500, false),
        ("W1b-bulk-mtu65535-offload", 65535, true),
    ] {
        let mut group = c.benchmark_group(workload);
        group.throughput(Throughput::Bytes(BULK_BYTES));
        group.sample_size(50);
        bulk::<imp_side::Bulk>(&mut group, "imp", mtu, offload);
        bulk::<smol::Bulk>(&mut group, "smoltcp", mtu, offload);
        group.finish();
    }
}

fn ping_pong<P: PingPong>(group: &mut BenchmarkGroup<WallTime>, name: &str) {
    let mut connection = P::open();
    group.bench_function(name, |b| b.iter(|| connection.round_trip()));
}

fn bench_ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("W2-ping-pong");
    group.throughput(Throughput::Elements(1));
    ping_pong::<imp_side::PingPong>(&mut group, "imp");
    ping_pong::<smol::PingPong>(&mut group, "smoltcp");
    group.finish();
}

fn churn<C: Churn>(group: &mut BenchmarkGroup<WallTime>, name: &str) {
    let mut server = C::open();
    group.bench_function(name, |b| b.iter(|| server.connection()));
}

fn bench_churn(c: &mut Criterion) {
    let mut group = c.benchmark_group("W3-churn");
    group.throughput(Throughput::Elements(1));
    churn::<imp_side::Churn>(&mut group, "imp");
    churn::<smol::Churn>(&mut group, "smoltcp");
    group.finish();
}

fn bench_forward(c: &mut Criterion) {
    let mut router = w7::Router::new(w7::BASE_ROUTES);
    let mut group = c.benchmark_group("W7-fwd-udp64");
    group.throughput(Throughput::Elements(router.batch_len() as u64));
    group.bench_function("imp", |b| b.iter(|| router.forward_batch()));
    group.finish();
}

criterion_group!(
    benches,
    bench_bulk,
    bench_ping_pong,
    bench_churn,
    bench_forward
);
criterion_main!(benches);
