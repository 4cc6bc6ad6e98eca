//! The lanes per tile of a launch are the launch's choice (`GpuTable::set_find_tile_width`,
//! `GpuTable::set_insert_tile_width`): a tile may serve a bucket with fewer lanes than the table's own, each lane
//! holding up to four slots. Whatever the widths, a table must store and answer exactly what a `HashMap` does:
//! every scheme with multi-slot buckets, every width each launch accepts (the defaults included), upserts of
//! stored keys with new values, present and absent finds, near-full tables. Widths a bucket
//! cannot be served by are typed errors that change nothing.

use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{GpuOptions, GpuTable};
use hashtile::{
    Backend, Bcht, DoubleHashing, Error, HashFamily, Iht, LinearProbing, P2bht, ProbingScheme,
    SchemeInfo,
};
use hashtile_tests::backends::present;
use hashtile_tests::keys::distinct_u32;
use std::collections::HashMap;

/// The widths a launch of `what` accepts on a table of `bucket` slots in tiles of `tile` lanes: powers of two
/// from the tile down to four slots a lane (inserts: never one lane unless the table's tiles are).
fn widths(bucket: u32, tile: u32, insert: bool) -> Vec<u32> {
    (0..6)
        .map(|i| 1u32 << i)
        .filter(|&w| w <= tile && bucket / w <= 4 && !(insert && w == 1 && tile != 1))
        .collect()
}

/// Fills a table at `load` in tiles of `insert` lanes (a batch of distinct keys, then a batch giving a third of
/// them new values), and finds every key and as many absent ones in tiles of every
/// width the finds accept, each answer against the oracle.
fn matches_oracle<R: HostTransfer, S: ProbingScheme + SchemeInfo>(
    opts: GpuOptions,
    bucket: u32,
    load: f64,
    insert: Option<u32>,
) {
    let n = 3000usize;
    let buckets = (n as f64 / load / bucket as f64).ceil() as u32;
    let buckets = hashtile::scheme::sequence_buckets(S::SEQUENCE, buckets);
    let mut t = GpuTable::<R, S>::new(
        &Default::default(),
        buckets,
        bucket,
        HashFamily::new(11),
        S::default_params(bucket),
        opts,
    )
    .unwrap();
    t.set_insert_tile_width(insert).unwrap();
    let name = format!(
        "{} B={bucket} load {load} insert lanes {}",
        S::NAME,
        t.insert_tile_width()
    );
    let ks = distinct_u32(0x7e1d ^ bucket, n);
    // (Repeats within a batch leave one of their values on linear probing and double hashing, as documented:
    // `tests/device_writes.rs` covers them.)
    let values: Vec<u32> = ks.iter().map(|k| k ^ 0x5a5a).collect();
    let (kh, vh) = (t.upload(&ks), t.upload(&values));
    let lost = t.insert_device(&kh, &vh, n).unwrap();
    let mut oracle: HashMap<u32, u32> = ks.iter().copied().zip(values.iter().copied()).collect();
    for p in &lost.pairs {
        oracle.remove(&(p.0 as u32));
    }
    assert_eq!(lost.untracked, 0, "{name}: untracked failures");
    // Stored keys with new values.
    let third: Vec<u32> = ks.iter().step_by(3).copied().collect();
    let newer: Vec<u32> = third.iter().map(|k| k.rotate_left(7)).collect();
    let (kh, vh) = (t.upload(&third), t.upload(&newer));
    let lost2 = t.insert_device(&kh, &vh, third.len()).unwrap();
    assert_eq!(lost2.untracked, 0, "{name}: untracked failures");
    let unplaced: std::collections::HashSet<u32> = lost2.pairs.iter().map(|p| p.0 as u32).collect();
    for (&k, &v) in third.iter().zip(&newer) {
        if unplaced.contains(&k) {
            oracle.remove(&k);
        } else {
            oracle.insert(k, v);
        }
    }
    assert_eq!(t.len(), oracle.len(), "{name}: len");
    let all: std::collections::HashSet<u32> = ks.iter().copied().collect();
    let absent: Vec<u32> = distinct_u32(0xab5e ^ bucket, n)
        .into_iter()
        .filter(|k| !all.contains(k))
        .collect();
    let q: Vec<u32> = ks.iter().chain(&absent).copied().collect();
    let qh = t.upload(&q);
    for w in widths(bucket, t.tile_width(), false) {
        t.set_find_tile_width(Some(w)).unwrap();
        let (out, found) = (t.alloc_u32(q.len()), t.alloc_u32(q.len()));
        t.find_device(&qh, &out, Some(&found), q.len());
        let (got, flags) = (t.read_u32(out), t.read_u32(found));
        for (i, k) in q.iter().enumerate() {
            let want = oracle.get(k).copied();
            assert_eq!(
                flags[i],
                u32::from(want.is_some()),
                "{name}, find lanes {w}: presence of {k}"
            );
            assert_eq!(
                got[i],
                want.unwrap_or(u32::MAX),
                "{name}, find lanes {w}: value of {k}"
            );
        }
    }
}

/// Widths that do not fit are [`Error::InvalidConfig`], and the table keeps its widths.
fn refuses_misfits<R: HostTransfer>(opts: GpuOptions) {
    let mut t = GpuTable::<R, Bcht>::new(
        &Default::default(),
        64,
        16,
        HashFamily::new(3),
        Bcht::default_params(16),
        opts,
    )
    .unwrap();
    let (find, insert) = (t.find_tile_width(), t.insert_tile_width());
    let tile = t.tile_width();
    for bad in [0, 3, 2 * tile, tile / 8] {
        assert!(
            matches!(
                t.set_find_tile_width(Some(bad)),
                Err(Error::InvalidConfig(_))
            ),
            "find {bad}"
        );
        assert!(
            matches!(
                t.set_insert_tile_width(Some(bad)),
                Err(Error::InvalidConfig(_))
            ),
            "insert {bad}"
        );
    }
    assert_eq!((t.find_tile_width(), t.insert_tile_width()), (find, insert));
    // The defaults: finds four slots a lane, inserts two.
    assert_eq!(find, 16 / 4);
    assert_eq!(insert, (16 / 2).min(tile));
}

fn every_scheme<R: HostTransfer>(opts: GpuOptions) {
    refuses_misfits::<R>(opts);
    for bucket in [4, 8, 16, 32] {
        // The tile a table of this bucket size gets here (the plane size caps it).
        let tile = GpuTable::<R, Bcht>::new(
            &Default::default(),
            8,
            bucket,
            HashFamily::new(1),
            Bcht::default_params(bucket),
            opts,
        )
        .unwrap()
        .tile_width();
        for w in widths(bucket, tile, true) {
            matches_oracle::<R, Bcht>(opts, bucket, 0.9, Some(w));
            matches_oracle::<R, Iht>(opts, bucket, 0.9, Some(w));
            matches_oracle::<R, P2bht>(opts, bucket, 0.8, Some(w));
            matches_oracle::<R, DoubleHashing>(opts, bucket, 0.9, Some(w));
            matches_oracle::<R, LinearProbing>(opts, bucket, 0.9, Some(w));
        }
        // The default widths, and a near-full table.
        matches_oracle::<R, Bcht>(opts, bucket, 0.97, None);
    }
}

#[test]
fn vulkan_tile_widths_match_oracle() {
    #[cfg(feature = "vulkan")]
    if present(Backend::Vulkan) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: false,
        };
        every_scheme::<hashtile::cubecl::wgpu::WgpuRuntime>(opts);
    }
    #[cfg(not(feature = "vulkan"))]
    present(Backend::Vulkan);
}

#[test]
fn cuda_tile_widths_match_oracle() {
    #[cfg(feature = "cuda")]
    if present(Backend::Cuda) {
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: true,
        };
        every_scheme::<hashtile::cubecl::cuda::CudaRuntime>(opts);
    }
    #[cfg(not(feature = "cuda"))]
    present(Backend::Cuda);
}
