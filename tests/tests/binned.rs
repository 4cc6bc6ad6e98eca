//! The binned build (issue 32, `hashtile::gpu::Binning`) on every GPU backend present, against the oracle: a
//! device batch into an empty table, binned into small slices so that small tables have many bins, must store
//! every pair exactly once (or hand it back), count `len` exactly, answer every find, and leave each key in its
//! first bucket unless that bucket is full (the placement the probing insert leaves, which finds rely on). A
//! second batch into the filled table (probing, not binned) must keep all of it. Adversarial inputs: one bin for
//! the whole table, a load past the first buckets' room (many keys in the surplus, evictions among them), buckets
//! of one slot. Schemes that may not bin (IHT, P2BHT) go through the probing insert with the same answers.

use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{Binning, GpuOptions, GpuTable};
use hashtile::{
    Backend, Bcht, Cht1, DoubleHashing, Engine, HashFamily, Iht, LinearProbing, P2bht,
    ProbingScheme, SchemeInfo,
};
use hashtile_tests::backends::present;
use std::collections::HashMap;

/// Distinct keys, none the sentinel, from `salt`.
fn keys(salt: u32, n: usize) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    (0u32..)
        .map(|i| hashtile::hash::fmix32(i ^ salt))
        .filter(|&k| k != u32::MAX && seen.insert(k))
        .take(n)
        .collect()
}

/// Builds most of `n` keys at `load` with `binning`, then inserts the rest, checking each step against the
/// oracle.
fn binned_matches_oracle<R: HostTransfer, S: ProbingScheme + SchemeInfo>(
    opts: GpuOptions,
    bucket: u32,
    load: f64,
    n: usize,
    binning: Binning,
) {
    let name = format!("{} B={bucket} load {load} {binning:?}", S::NAME);
    let num_buckets = hashtile::scheme::sequence_buckets(
        S::SEQUENCE,
        (n as f64 / load / bucket as f64).ceil() as u32,
    );
    let mut t = GpuTable::<R, S>::new(
        &Default::default(),
        num_buckets,
        bucket,
        HashFamily::new(11),
        S::default_params(bucket),
        opts,
    )
    .unwrap();
    t.set_binning(binning);
    assert_eq!(t.binning(), binning);
    // The table is sized for `n` keys at `load`: a build of seven eighths, then the last eighth.
    let all = keys(0x5eed ^ bucket, n);
    let (first, extra) = all.split_at(n - n / 8);
    let mut oracle: HashMap<u32, u32> = HashMap::new();
    let mut lost_all: Vec<(u64, u64)> = Vec::new();
    for (round, batch) in [first, extra].into_iter().enumerate() {
        let values: Vec<u32> = batch
            .iter()
            .map(|k| k.rotate_left(9) ^ round as u32)
            .collect();
        // Binned: the first batch, into the empty table, of a scheme that fills first buckets first, with slices
        // given; never the second, nor with binning off (the default).
        let expect = round == 0 && S::FILLS_FIRST && matches!(binning, Binning::Slices(_));
        assert_eq!(
            t.would_bin(batch.len()),
            expect,
            "{name} round {round}: binned"
        );
        let (kh, vh) = (t.upload(batch), t.upload(&values));
        let lost = t.insert_device_distinct(&kh, &vh, batch.len()).unwrap();
        assert_eq!(
            lost.untracked, 0,
            "{name} round {round}: untracked failures"
        );
        lost_all.extend(&lost.pairs);
        oracle.extend(batch.iter().copied().zip(values));
        // Every pair stored exactly once, or handed back.
        let mut stored: Vec<(u64, u64)> = t.pairs().unwrap();
        assert_eq!(t.len(), stored.len(), "{name} round {round}: len");
        stored.extend(&lost_all);
        stored.sort_unstable();
        let mut want: Vec<(u64, u64)> =
            oracle.iter().map(|(&k, &v)| (k as u64, v as u64)).collect();
        want.sort_unstable();
        assert_eq!(
            stored, want,
            "{name} round {round}: stored + unplaced pairs"
        );
        // Finds of every key and of absent ones.
        let absent = keys(0xab5e ^ bucket, 500);
        let absent: Vec<u32> = absent
            .into_iter()
            .filter(|k| !oracle.contains_key(k))
            .collect();
        let q: Vec<u32> = oracle.keys().chain(&absent).copied().collect();
        let unplaced: std::collections::HashSet<u64> = lost_all.iter().map(|p| p.0).collect();
        for (k, got) in q.iter().zip(t.find_keys(&q).unwrap()) {
            let want = oracle
                .get(k)
                .copied()
                .filter(|_| !unplaced.contains(&(*k as u64)));
            assert_eq!(got, want, "{name} round {round}: find {k}");
        }
        // First buckets first: a key outside its first bucket found that bucket full.
        let placed: Vec<(u64, u32)> = Engine::<u64, u64>::placement(&t).unwrap();
        let mut fill: HashMap<u32, u32> = HashMap::new();
        for &(_, b) in &placed {
            *fill.entry(b).or_default() += 1;
        }
        let family = HashFamily::new(11);
        for &(k, b) in &placed {
            let first = family.probe_bucket::<S>(k, 0, num_buckets);
            if S::FILLS_FIRST && b != first {
                assert_eq!(
                    fill.get(&first).copied().unwrap_or(0),
                    bucket,
                    "{name} round {round}: key {k} in bucket {b}, its first bucket {first} has room"
                );
            }
        }
    }
}

fn all_schemes<R: HostTransfer>(opts: GpuOptions) {
    // Slices of 1 KB (two buckets of eight pairs): hundreds of bins in a small table.
    let small = Binning::Slices(1 << 10);
    binned_matches_oracle::<R, Bcht>(opts, 8, 0.8, 20_000, small);
    binned_matches_oracle::<R, Bcht>(opts, 8, 0.93, 20_000, small);
    binned_matches_oracle::<R, Bcht>(opts, 16, 0.9, 20_000, small);
    binned_matches_oracle::<R, Cht1>(opts, 1, 0.5, 20_000, small);
    binned_matches_oracle::<R, LinearProbing>(opts, 4, 0.9, 20_000, small);
    binned_matches_oracle::<R, LinearProbing>(opts, 1, 0.8, 20_000, small);
    binned_matches_oracle::<R, DoubleHashing>(opts, 8, 0.9, 20_000, small);
    // One bin for the whole table (slices larger than it): one cube places every key.
    binned_matches_oracle::<R, Bcht>(opts, 8, 0.9, 20_000, Binning::Slices(64 << 20));
    // Off, the default: the probing insert.
    binned_matches_oracle::<R, Bcht>(opts, 8, 0.9, 20_000, Binning::default());
    // Schemes that choose by load or cap their first bucket are never binned.
    binned_matches_oracle::<R, Iht>(opts, 16, 0.9, 20_000, small);
    binned_matches_oracle::<R, P2bht>(opts, 16, 0.8, 20_000, small);
}

#[test]
fn vulkan_binned_builds_match_oracle() {
    #[cfg(feature = "vulkan")]
    if present(Backend::Vulkan) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: false,
        };
        all_schemes::<hashtile::cubecl::wgpu::WgpuRuntime>(opts);
    }
    #[cfg(not(feature = "vulkan"))]
    present(Backend::Vulkan);
}

#[test]
fn cuda_binned_builds_match_oracle() {
    #[cfg(feature = "cuda")]
    if present(Backend::Cuda) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: true,
        };
        all_schemes::<hashtile::cubecl::cuda::CudaRuntime>(opts);
    }
    #[cfg(not(feature = "cuda"))]
    present(Backend::Cuda);
}
