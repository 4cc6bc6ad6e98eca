//! Criterion bench of the CPU backend: BCHT insert and find at load 0.9.

use criterion::{Criterion, criterion_group, criterion_main};
use hashtile::{Backend, BackendChoice, Bcht, HashTable, TableConfig};

fn bench(c: &mut Criterion) {
    let n = 1 << 16;
    let keys: Vec<u32> = (0..n as u32)
        .map(|i| hashtile::hash::fmix32(i ^ 0xabcd))
        .collect();
    let cfg = TableConfig::for_keys(n, 0.9).backend(BackendChoice::Exactly(Backend::Cpu));
    c.bench_function("cpu bcht insert 2^16 @0.9", |b| {
        b.iter(|| {
            let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg.clone()).unwrap();
            t.insert(&keys, &keys).unwrap();
        })
    });
    let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg).unwrap();
    t.insert(&keys, &keys).unwrap();
    c.bench_function("cpu bcht find 2^16 @0.9 (all present)", |b| {
        b.iter(|| t.find(&keys).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
