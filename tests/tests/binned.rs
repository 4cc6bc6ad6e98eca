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
use hashtile_tests::keys::distinct_u32;
use std::collections::HashMap;

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
    let all = distinct_u32(0x5eed ^ bucket, n);
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
        let absent = distinct_u32(0xab5e ^ bucket, 500);
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
        let placed: Vec<(u64, u32)> = Engine::<u64, u64>::placement(&t).unwrap();
        // The binned build fills each first bucket with exactly min(count, B) of the keys whose first bucket it
        // is (the placement is a function of the hashes; only which keys make the surplus varies), and the
        // surplus cannot add to them (their first buckets are full).
        if expect {
            let family = HashFamily::new(11);
            let in_first = placed
                .iter()
                .filter(|&&(k, b)| family.probe_bucket::<S>(k, 0, num_buckets) == b)
                .count();
            let want: usize = first_bucket_counts::<S>(&family, batch, num_buckets)
                .values()
                .map(|&c| c.min(bucket as usize))
                .sum();
            // Nothing moves a stored pair of a stable scheme; a cuckoo surplus may evict keys from their first
            // buckets.
            if S::STABLE {
                assert_eq!(in_first, want, "{name}: keys in their first bucket");
            } else {
                assert!(
                    in_first <= want,
                    "{name}: {in_first} keys in their first bucket, at most {want}"
                );
            }
        }
        // First buckets first: a key outside its first bucket found that bucket full.
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

/// How many of `keys` have each bucket as their first (probe 0) bucket.
fn first_bucket_counts<S: ProbingScheme>(
    family: &HashFamily,
    keys: &[u32],
    num_buckets: u32,
) -> HashMap<u32, usize> {
    let mut counts = HashMap::new();
    for &k in keys {
        *counts
            .entry(family.probe_bucket::<S>(k as u64, 0, num_buckets))
            .or_default() += 1;
    }
    counts
}

/// What binning does to where keys sit (issue 32), against the probing build of the same keys: the shares of
/// keys at their first candidate bucket, their second, and beyond, and the average probes of a find of every
/// key. Both builds are the CPU backend's deterministic ones, one key at a time under the GPU's rules: the
/// probing build in input order; the binned build's model first inserts, in input order, the keys their first
/// bucket admits (the first `B` to hash there: each lands there, as the placement kernel puts it), then the
/// surplus (the GPU inserts it concurrently; after the placement, `min(count, B)` keys per first bucket on every
/// backend, which the device test above checks). Deterministic: a snapshot.
fn placement_table<S: SchemeInfo>(bucket: u32) -> String {
    use hashtile::{BackendChoice, HashTable, TableConfig};
    use std::fmt::Write;
    const N: usize = 1 << 14;
    let keys = distinct_u32(0x5eed, N);
    let mut out = format!(
        "{} B={bucket} N={N}\nload  build    first   second  later   find-probes\n",
        S::NAME
    );
    for load in [0.8, 0.9, 0.95] {
        let cfg = TableConfig::for_keys(N, load)
            .bucket_size(bucket)
            .deterministic(true)
            .max_rebuilds(0)
            .backend(BackendChoice::Exactly(Backend::Cpu));
        let mut probing: HashTable<S, u32, u32> = HashTable::new(cfg.clone()).unwrap();
        let nb = (probing.capacity() / probing.bucket_size() as usize) as u32;
        let family = probing.family();
        // The binned order: each first bucket's first `B` keys, then the rest, each part in input order.
        let mut seen: HashMap<u32, usize> = HashMap::new();
        let (admitted, surplus): (Vec<u32>, Vec<u32>) = keys.iter().partition(|&&k| {
            let c = seen
                .entry(family.probe_bucket::<S>(k as u64, 0, nb))
                .or_default();
            *c += 1;
            *c <= bucket as usize
        });
        let binned_order: Vec<u32> = admitted.into_iter().chain(surplus).collect();
        let mut binned: HashTable<S, u32, u32> = HashTable::new(cfg).unwrap();
        for (name, t, order) in [
            ("probing", &mut probing, &keys),
            ("binned ", &mut binned, &binned_order),
        ] {
            if t.insert(order, order).is_err() {
                writeln!(out, "{load:.2}  {name}  build failed").unwrap();
                continue;
            }
            let mut at = [0usize; 3];
            for (k, b) in t.placement().unwrap() {
                let i = t.candidate_buckets(k).iter().position(|&c| c == b).unwrap();
                at[i.min(2)] += 1;
            }
            t.find(&keys).unwrap();
            let share = |c: usize| c as f64 / N as f64;
            writeln!(
                out,
                "{load:.2}  {name}  {:.4}  {:.4}  {:.4}  {:.4}",
                share(at[0]),
                share(at[1]),
                share(at[2]),
                t.last_find_probes().average()
            )
            .unwrap();
        }
    }
    out
}

#[test]
fn binned_placement_against_probing() {
    insta::assert_snapshot!(placement_table::<Bcht>(8));
    insta::assert_snapshot!(placement_table::<Bcht>(16));
    insta::assert_snapshot!(placement_table::<LinearProbing>(4));
    insta::assert_snapshot!(placement_table::<DoubleHashing>(4));
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
