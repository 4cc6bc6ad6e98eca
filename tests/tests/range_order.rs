//! Device batches in table order (`hashtile::gpu::RangeOrder`) on every GPU backend present, against the
//! oracle: a batch partitioned by the table range of its keys' first buckets must insert, find (values, flags,
//! presence bits) and erase exactly as the callers' order does. Adversarial inputs: every range count from two
//! to more ranges than buckets, a load past the first buckets' room (evictions in the ordered insert), erase
//! batches with absent keys and repeats, and batches just below and at the size that is ordered.

use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{AUTO_TABLE_BYTES, MIN_ORDERED};
use hashtile::gpu::{GpuOptions, GpuTable, RangeOrder};
use hashtile::{
    Backend, Bcht, DoubleHashing, Engine, HashFamily, Iht, LinearProbing, P2bht, ProbingScheme,
    SchemeInfo,
};
use hashtile_tests::backends::present;
use hashtile_tests::keys::distinct_u32;
use std::collections::HashMap;

/// Inserts `n` keys at `load` in table order `order`, then finds every key and absent ones, erases half of
/// them (with absent keys and repeats in the batch), and finds again, each step against the oracle.
fn ordered_matches_oracle<R: HostTransfer, S: ProbingScheme + SchemeInfo>(
    opts: GpuOptions,
    bucket: u32,
    load: f64,
    n: usize,
    order: RangeOrder,
) {
    let num_buckets = (n as f64 / load / bucket as f64).ceil() as u32;
    ordered_in_buckets::<R, S>(opts, bucket, num_buckets, n, order);
}

/// [`ordered_matches_oracle`] in a table of (about) `num_buckets` buckets.
fn ordered_in_buckets<R: HostTransfer, S: ProbingScheme + SchemeInfo>(
    opts: GpuOptions,
    bucket: u32,
    num_buckets: u32,
    n: usize,
    order: RangeOrder,
) -> (bool, bool) {
    let num_buckets = hashtile::scheme::sequence_buckets(S::SEQUENCE, num_buckets);
    let load = n as f64 / (num_buckets as f64 * bucket as f64);
    let name = format!("{} B={bucket} load {load:.2} {order:?} n {n}", S::NAME);
    let mut t = GpuTable::<R, S>::new(
        &Default::default(),
        num_buckets,
        bucket,
        HashFamily::new(7),
        S::default_params(bucket),
        opts,
    )
    .unwrap();
    t.set_range_order(order);
    assert_eq!(t.range_order(), order);
    let ks = distinct_u32(0x0de7 ^ bucket, n);
    let values: Vec<u32> = ks.iter().map(|k| k.rotate_left(13) ^ 0x77).collect();
    let (kh, vh) = (t.upload(&ks), t.upload(&values));
    let ordered_insert = t.would_order_insert(n);
    let lost = t.insert_device_distinct(&kh, &vh, n).unwrap();
    assert_eq!(lost.untracked, 0, "{name}: untracked failures");
    let mut oracle: HashMap<u32, u32> = ks.iter().copied().zip(values.iter().copied()).collect();
    for p in &lost.pairs {
        oracle.remove(&(p.0 as u32));
    }
    assert_eq!(t.len(), oracle.len(), "{name}: len after insert");
    let mut stored: Vec<(u64, u64)> = t.pairs().unwrap();
    stored.sort_unstable();
    let mut want: Vec<(u64, u64)> = oracle.iter().map(|(&k, &v)| (k as u64, v as u64)).collect();
    want.sort_unstable();
    assert_eq!(stored, want, "{name}: stored pairs");
    // Present keys, then absent ones: values and flags in the callers' order.
    let all: std::collections::HashSet<u32> = ks.iter().copied().collect();
    let absent: Vec<u32> = distinct_u32(0xab5e ^ bucket, n / 2)
        .into_iter()
        .filter(|k| !all.contains(k))
        .collect();
    let q: Vec<u32> = ks.iter().chain(&absent).copied().collect();
    let check_finds = |t: &GpuTable<R, S>, oracle: &HashMap<u32, u32>, step: &str| {
        let qh = t.upload(&q);
        let (out, found) = (t.alloc_u32(q.len()), t.alloc_u32(q.len()));
        t.find_device(&qh, &out, Some(&found), q.len());
        let (got, flags) = (t.read_u32(out), t.read_u32(found));
        let out2 = t.alloc_u32(q.len());
        t.find_device(&qh, &out2, None, q.len());
        let got2 = t.read_u32(out2);
        for (i, k) in q.iter().enumerate() {
            let want = oracle.get(k).copied();
            assert_eq!(
                (got[i] != u32::MAX || flags[i] == 1).then_some(got[i]),
                want,
                "{name} {step}: find {k} at {i}"
            );
            assert_eq!(
                flags[i],
                u32::from(want.is_some()),
                "{name} {step}: flag of {k}"
            );
            assert_eq!(
                got2[i],
                want.unwrap_or(u32::MAX),
                "{name} {step}: value of {k}"
            );
        }
    };
    check_finds(&t, &oracle, "after insert");
    // Erase every other stored key, twice each, with absent keys among them.
    let gone: Vec<u32> = ks.iter().step_by(2).copied().collect();
    let batch: Vec<u32> = gone.iter().chain(&gone).chain(&absent).copied().collect();
    let bh = t.upload(&batch);
    let ordered_erase = t.would_order_erase(batch.len());
    let want_erased = gone.iter().filter(|k| oracle.contains_key(k)).count();
    let erased = t.erase_device(&bh, batch.len()).unwrap();
    assert_eq!(erased, want_erased, "{name}: erased");
    for k in &gone {
        oracle.remove(k);
    }
    assert_eq!(t.len(), oracle.len(), "{name}: len after erase");
    check_finds(&t, &oracle, "after erase");
    (ordered_insert, ordered_erase)
}

fn all_schemes<R: HostTransfer>(opts: GpuOptions) {
    let n = MIN_ORDERED + 1000;
    for bits in [1, 6, 8] {
        let order = RangeOrder::Ranges(bits);
        ordered_matches_oracle::<R, Bcht>(opts, 8, 0.8, n, order);
        ordered_matches_oracle::<R, LinearProbing>(opts, 1, 0.8, n, order);
    }
    let six = RangeOrder::Ranges(6);
    // Past the first buckets' room: many evictions in the ordered insert.
    ordered_matches_oracle::<R, Bcht>(opts, 8, 0.95, n, six);
    ordered_matches_oracle::<R, Bcht>(opts, 16, 0.9, n, six);
    ordered_matches_oracle::<R, DoubleHashing>(opts, 4, 0.9, n, six);
    ordered_matches_oracle::<R, Iht>(opts, 16, 0.9, n, six);
    ordered_matches_oracle::<R, P2bht>(opts, 16, 0.85, n, six);
    // Just below the ordered size, the callers' order, and the default (a table this small: the callers' order).
    ordered_matches_oracle::<R, Bcht>(opts, 8, 0.9, MIN_ORDERED - 1, six);
    ordered_matches_oracle::<R, Bcht>(opts, 8, 0.9, n, RangeOrder::Off);
    ordered_matches_oracle::<R, Bcht>(opts, 8, 0.9, n, RangeOrder::default());
    // The default on a table of 64 MiB of slots (2^23 one-slot buckets) with a dense batch (a key per four of its
    // lines): linear probing B = 1 orders its insert and its erase; BCHT B = 8 (tiles of eight lanes) its erase
    // only.
    let big = (AUTO_TABLE_BYTES / 8) as u32;
    let dense = AUTO_TABLE_BYTES / 256;
    assert_eq!(
        ordered_in_buckets::<R, LinearProbing>(opts, 1, big, dense, RangeOrder::Auto),
        (true, true)
    );
    assert_eq!(
        ordered_in_buckets::<R, Bcht>(opts, 8, big / 8, dense, RangeOrder::Auto),
        (false, true)
    );
}

#[test]
fn vulkan_ordered_batches_match_oracle() {
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
fn cuda_ordered_batches_match_oracle() {
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
