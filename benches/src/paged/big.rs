//! `big`: a table of `--big-gib` GiB of slots under a budget of `--big-budget-gib` GiB (hash-routed, keys
//! generated per batch), built and sampled; swap GB/s against the pinned ceiling.

use super::args::PagedSetup;
use super::common::{ABSENT_FROM, VALUE_MASK, ceiling, key, lib, pinned_gbs, save, with_switches};
use hashtile::{BackendChoice, Bcht, DeviceBudget, PagedConfig, PagedTable, Placement};
use rayon::prelude::*;
use std::time::Instant;

/// Keys of the `big` table: 32-bit pairs in BCHT children, or 64-bit pairs in IHT children (16-byte slots: the
/// only way to fill a table past 2^32 slots with distinct keys).
trait BigKey: hashtile::Key + hashtile::Value {
    /// Device bytes of one slot.
    const SLOT_BYTES: u64;
    /// First counter of the absent keys.
    const ABSENT_COUNTER: u64;
    /// The key of counter `i` (a bijection, never the sentinel, for the counters used).
    fn of(i: u64) -> Self;
    /// Its stored value.
    fn value(self) -> Self;
}

impl BigKey for u32 {
    const SLOT_BYTES: u64 = 8;
    const ABSENT_COUNTER: u64 = ABSENT_FROM;
    fn of(i: u64) -> Self {
        key(i)
    }
    fn value(self) -> Self {
        self ^ VALUE_MASK
    }
}

impl BigKey for u64 {
    const SLOT_BYTES: u64 = 16;
    const ABSENT_COUNTER: u64 = 1 << 62;
    fn of(i: u64) -> Self {
        // The splitmix64 finaliser is a bijection of u64; the one counter that gives the sentinel takes the key
        // of counter 2^63, which is never used.
        let f = |x: u64| {
            let mut z = x ^ 0x6a09_e667_f3bc_c908;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        match f(i) {
            u64::MAX => f(1 << 63),
            k => k,
        }
    }
    fn value(self) -> Self {
        self ^ 0x5555_5555_5555_5555
    }
}

/// The `big` experiment with the key width `--big-keys` asks for.
pub(super) fn big(s: &PagedSetup) -> Result<bool, String> {
    if s.big_keys == 64 {
        big_of::<hashtile::Iht, u64>(s)
    } else {
        big_of::<Bcht, u32>(s)
    }
}

fn big_of<S: hashtile::SchemeInfo, K: BigKey>(s: &PagedSetup) -> Result<bool, String> {
    let gib = s.big_gib;
    // Children: a power of two near 64 MiB each.
    let children = ((gib << 30) / (64 << 20)).next_power_of_two() as usize;
    let child_bytes = (gib << 30) / children as u64;
    let budget = ((s.big_budget_gib << 30) / child_bytes).max(1) as usize;
    let child_slots = (child_bytes / K::SLOT_BYTES) as usize;
    let ceil = ceiling(s.backend)?;
    let pinned = pinned_gbs(&ceil);
    let cfg = PagedConfig::with_child_slots(child_slots)
        .backend(BackendChoice::Exactly(s.backend))
        .placement(Placement::HashRouted)
        .initial_children(children)
        .budget(DeviceBudget::Children(budget));
    let cfg = with_switches(s, cfg);
    // Making the table pages the children past the budget out at once (their pinned host images are
    // allocated then): timed apart from the build.
    let t_new = Instant::now();
    let mut t: PagedTable<S, K, K> = PagedTable::new(cfg).map_err(lib)?;
    let create_s = t_new.elapsed().as_secs_f64();
    let n = child_slots * children * 3 / 4;
    let b = 1usize << 27;
    let make = |from: u64, m: usize| -> (Vec<K>, Vec<K>) {
        let k: Vec<K> = (0..m as u64)
            .into_par_iter()
            .map(|i| K::of(from + i))
            .collect();
        let v = k.par_iter().map(|k| k.value()).collect();
        (k, v)
    };
    let mut secs = 0.0;
    let mut at = 0;
    let t_all = Instant::now();
    eprintln!(
        "  big: {gib} GiB of {}-bit pairs ({} {}), {children} children, {budget} resident, {n} keys",
        K::BITS,
        S::NAME,
        t.bucket_size()
    );
    while at < n {
        let m = b.min(n - at);
        let (k, v) = make(at as u64, m);
        let before = t.paging().bytes_moved;
        let t0 = Instant::now();
        t.insert(&k, &v).map_err(lib)?;
        let bs = t0.elapsed().as_secs_f64();
        secs += bs;
        at += m;
        eprintln!(
            "  big: {at}/{n} keys, batch {:.2} s, {:.1} GB swapped ({:.1} GB/s; pinned {pinned:.1})",
            bs,
            (t.paging().bytes_moved - before) as f64 / 1e9,
            (t.paging().bytes_moved - before) as f64 / 1e9 / bs
        );
    }
    let moved = t.paging().bytes_moved as f64 / 1e9;
    // Warm-up: a find of 2^22 stored keys whose children are resident compiles the find's kernels (each
    // kernel compiles at its first launch: 210 of a 524 ms find in session 14's call C), pages nothing, and
    // leaves the paging state as the build left it.
    let resident: std::collections::HashSet<usize> = t.resident_children().into_iter().collect();
    let warm: Vec<K> = (0..n as u64)
        .map(K::of)
        .filter(|k| t.child_of(*k).is_some_and(|c| resident.contains(&c)))
        .take(1 << 22)
        .collect();
    let swaps = t.paging().swaps_in;
    let mut out = vec![K::default(); warm.len()];
    t.find_into(&warm, &mut out).map_err(lib)?;
    if t.paging().swaps_in != swaps {
        return Err("the warm-up find paged children in".into());
    }
    // Sample: 2^24 stored keys spread over the whole range, then 2^20 absent ones.
    let m = (1usize << 24).min(n);
    let step = n as u64 / m as u64;
    let mut q: Vec<K> = (0..m as u64)
        .into_par_iter()
        .map(|i| K::of(i * step))
        .collect();
    q.extend((0..1u64 << 20).map(|i| K::of(K::ABSENT_COUNTER + i)));
    let before = t.paging().bytes_moved;
    let mut out = vec![K::default(); q.len()];
    let t0 = Instant::now();
    t.find_into(&q, &mut out).map_err(lib)?;
    let fs = t0.elapsed().as_secs_f64();
    let fmoved = (t.paging().bytes_moved - before) as f64 / 1e9;
    let ok = q
        .par_iter()
        .zip(out.par_iter())
        .enumerate()
        .all(|(i, (k, g))| {
            if i < m {
                *g == k.value()
            } else {
                *g == <K as hashtile::Value>::ABSENT
            }
        })
        && t.len() == n;
    let csv = format!(
        "table_GiB,key_bits,budget_GiB,children,resident,keys,create_s,build_s,build_M_keys_per_s,build_swap_GB,build_swap_GB_per_s,find_keys,find_s,find_swap_GB,find_swap_GB_per_s,pinned_GB_per_s,build_of_pinned,find_of_pinned,wall_s,ok\n\
         {gib},{},{},{children},{budget},{n},{create_s:.3},{secs:.3},{:.1},{moved:.2},{:.2},{},{fs:.3},{fmoved:.2},{:.2},{pinned:.2},{:.3},{:.3},{:.1},{ok}\n",
        K::BITS,
        s.big_budget_gib,
        n as f64 / secs / 1e6,
        moved / secs,
        q.len(),
        fmoved / fs,
        moved / secs / pinned,
        fmoved / fs / pinned,
        t_all.elapsed().as_secs_f64()
    );
    eprintln!(
        "  big: {gib} GiB in {children} children, {budget} resident: made in {create_s:.2} s; build {:.1} M keys/s, swaps {:.1} GB/s ({:.2} of pinned); find {:.1} GB/s ({:.2}); answers {}",
        n as f64 / secs / 1e6,
        moved / secs,
        moved / secs / pinned,
        fmoved / fs,
        fmoved / fs / pinned,
        if ok { "right" } else { "WRONG" }
    );
    save(s, &format!("big_{gib}g_{}bit", K::BITS), &csv, None)?;
    Ok(ok)
}
