//! Internet checksum throughput: the fast `checksum::data` against the plain 16-bit
//! loop `data_simple` and against `copy_from_slice` of the same bytes (memcpy: the
//! bandwidth a checksum folded into the copy could hope for).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use impnet_wire::checksum;

fn bench_checksum(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for size in [1500usize, 64 * 1024] {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        let mut dst = vec![0u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("data", size), &data, |b, data| {
            b.iter(|| checksum::data(black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("data_simple", size), &data, |b, data| {
            b.iter(|| checksum::data_simple(black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("memcpy", size), &data, |b, data| {
            b.iter(|| {
                dst.copy_from_slice(black_box(data));
                black_box(&mut dst);
            })
        });
        group.bench_with_input(
            BenchmarkId::new("memcpy_then_data", size),
            &data,
            |b, data| {
                b.iter(|| {
                    dst.copy_from_slice(black_box(data));
                    checksum::data(black_box(&dst))
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("copy_and_sum", size), &data, |b, data| {
            b.iter(|| checksum::copy_and_sum(black_box(&mut dst), black_box(data)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_checksum);
criterion_main!(benches);
