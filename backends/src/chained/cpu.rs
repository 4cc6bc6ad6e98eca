//! The CPU store of a chained table: the slab lists and the slab allocator's accounting that the GPU table has,
//! driven by the same scheme steps (`hashtile_probing::Chain`). It is the oracle of the GPU table and the
//! backend without a GPU.
//!
//! **Layout.** One slab array: slab `b < buckets` is bucket `b`'s head, the pool's slabs follow
//! (`buckets + p`). A slab has [`SLAB_SLOTS`] key and value words and a link (`next`, [`NO_NEXT`]: none). Keys
//! are widened to `u64`; [`EMPTY`] and [`TOMBSTONE`] are reserved.
//!
//! **Concurrency.** An operation holds its bucket's lock for its whole walk, so operations on one list run one
//! after another and operations on different lists in parallel: a batch's result is that of some order of its
//! operations, as the GPU table promises. The allocator is shared: a bitmap of pool slabs claimed by
//! compare-and-swap, with a count of free slabs.

use super::config::{ChainStats, NeedSlab, SLAB_SLOTS};
use hashtile_core::scheme::{
    BucketView, NO_NEXT, ProbingScheme, SchemeParams, action, blank_state,
};
use hashtile_core::{Error, HashFamily, Result};
use hashtile_probing::Chain;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The empty slot's key word.
pub const EMPTY: u64 = u64::MAX;
/// An erased slot's key word: neither empty (searches go on past it) nor any key.
pub const TOMBSTONE: u64 = u64::MAX - 1;

/// Relaxed is enough for every word: each is only touched under its bucket's lock (whose acquire / release
/// orders them), or with `&mut self`.
const R: Ordering = Ordering::Relaxed;

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// A new slot holds the pair.
    Inserted,
    /// The key was there (replace): its first copy's value is overwritten.
    Updated,
}

/// Slab lists and their allocator, on the CPU.
pub struct CpuChained {
    family: HashFamily,
    buckets: u32,
    keys: Vec<AtomicU64>,
    values: Vec<AtomicU64>,
    next: Vec<AtomicU32>,
    /// Bit `p` of the bitmap: pool slab `p` is in a list.
    used: Vec<AtomicU32>,
    pool: u32,
    free: AtomicUsize,
    /// Where allocations start looking (spreads threads over the bitmap).
    cursor: AtomicUsize,
    locks: Vec<AtomicBool>,
    len: AtomicUsize,
}

/// A bucket's lock, released on drop.
struct Held<'a>(&'a AtomicBool);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// `n` fresh atomics from `make`, or a typed error when the host cannot hold them.
fn atomics<T>(n: usize, make: impl Fn() -> T, what: &'static str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        what,
        device: "host",
        needed: (n * size_of::<T>()) as u64,
        available: 0,
    })?;
    v.extend((0..n).map(|_| make()));
    Ok(v)
}

impl CpuChained {
    /// `buckets` empty lists and a pool of `pool` free slabs.
    pub fn new(family: HashFamily, buckets: u32, pool: u32) -> Result<Self> {
        let mut t = Self {
            family,
            buckets,
            keys: Vec::new(),
            values: Vec::new(),
            next: Vec::new(),
            used: Vec::new(),
            pool: 0,
            free: AtomicUsize::new(0),
            cursor: AtomicUsize::new(0),
            locks: atomics(buckets as usize, || AtomicBool::new(false), "bucket locks")?,
            len: AtomicUsize::new(0),
        };
        t.grow_slabs(buckets as usize)?;
        t.grow(pool)?;
        Ok(t)
    }

    /// Appends `n` empty, unlinked slabs to the slab array.
    fn grow_slabs(&mut self, n: usize) -> Result<()> {
        let words = n * SLAB_SLOTS;
        self.keys
            .extend(atomics(words, || AtomicU64::new(EMPTY), "slab keys")?);
        self.values
            .extend(atomics(words, || AtomicU64::new(0), "slab values")?);
        self.next
            .extend(atomics(n, || AtomicU32::new(NO_NEXT), "slab links")?);
        Ok(())
    }

    /// The store a GPU table's slab words and pool bitmap describe (`super::super::gpu::chained`'s layout: 16
    /// packed words per slab, word 15 the link), so that [`CpuChained::check`] can check a GPU table.
    pub fn from_packed(
        family: HashFamily,
        buckets: u32,
        pool: u32,
        words: &[u64],
        bitmap: &[u32],
    ) -> Result<Self> {
        Self::from_slabs(family, buckets, pool, words, None, bitmap)
    }

    /// [`CpuChained::from_packed`] of either GPU layout: packed pairs (`values == None`), or a wide table's
    /// 64-bit key words (all ones: empty, all ones minus one: tombstone) with its values at the same indices.
    pub fn from_slabs(
        family: HashFamily,
        buckets: u32,
        pool: u32,
        words: &[u64],
        wide_values: Option<&[u64]>,
        bitmap: &[u32],
    ) -> Result<Self> {
        let slabs = buckets as usize + pool as usize;
        if words.len() != slabs * 16
            || bitmap.len() != (pool.div_ceil(32).max(1)) as usize
            || wide_values.is_some_and(|v| v.len() != words.len())
        {
            return Err(Error::InvalidConfig(format!(
                "{} slab words and {} bitmap words do not describe {buckets} buckets and {pool} pool slabs",
                words.len(),
                bitmap.len()
            )));
        }
        let mut keys = Vec::with_capacity(slabs * SLAB_SLOTS);
        let mut values = Vec::with_capacity(slabs * SLAB_SLOTS);
        let mut next = Vec::with_capacity(slabs);
        let mut len = 0;
        for (s, slab) in words.chunks(16).enumerate() {
            for (i, &w) in slab[..SLAB_SLOTS].iter().enumerate() {
                let (k, v) = match wide_values {
                    None => match w {
                        u64::MAX => (EMPTY, 0),
                        w if (w >> 32) as u32 == u32::MAX - 1 => (TOMBSTONE, 0),
                        w => {
                            len += 1;
                            (w >> 32, w & 0xffff_ffff)
                        }
                    },
                    Some(vals) => match w {
                        u64::MAX => (EMPTY, 0),
                        w if w == u64::MAX - 1 => (TOMBSTONE, 0),
                        w => {
                            len += 1;
                            (w, vals[s * 16 + i])
                        }
                    },
                };
                keys.push(AtomicU64::new(k));
                values.push(AtomicU64::new(v));
            }
            next.push(AtomicU32::new(slab[15] as u32));
        }
        let used: usize = bitmap.iter().map(|w| w.count_ones() as usize).sum();
        Ok(Self {
            family,
            buckets,
            keys,
            values,
            next,
            used: bitmap.iter().map(|&w| AtomicU32::new(w)).collect(),
            pool,
            free: AtomicUsize::new(pool as usize - used.min(pool as usize)),
            cursor: AtomicUsize::new(0),
            locks: atomics(buckets as usize, || AtomicBool::new(false), "bucket locks")?,
            len: AtomicUsize::new(len),
        })
    }

    /// Grows the pool by `extra` free slabs (between batches: `&mut self`). Slab indices stay valid.
    pub fn grow(&mut self, extra: u32) -> Result<()> {
        let pool = self
            .pool
            .checked_add(extra)
            .filter(|&p| (self.buckets as u64 + p as u64) < NO_NEXT as u64)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "a chained table addresses at most 2^32 - 1 slabs (32-bit links): {} buckets and a pool of {} + {extra}",
                    self.buckets, self.pool
                ))
            })?;
        self.grow_slabs(extra as usize)?;
        let words = pool.div_ceil(32) as usize;
        let more = words - self.used.len();
        self.used
            .extend(atomics(more, || AtomicU32::new(0), "slab bitmap")?);
        self.pool = pool;
        self.free.fetch_add(extra as usize, R);
        Ok(())
    }

    fn lock(&self, b: u32) -> Held<'_> {
        let l = &self.locks[b as usize];
        while l
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        Held(l)
    }

    /// The bucket (list head) of `key`.
    pub fn bucket_of(&self, key: u64) -> u32 {
        self.family.bucket(key, 0, self.buckets)
    }

    fn view(&self, slab: u32, key: u64) -> BucketView {
        let base = slab as usize * SLAB_SLOTS;
        let (mut empty, mut matched) = (0u32, 0u32);
        for s in 0..SLAB_SLOTS {
            let k = self.keys[base + s].load(R);
            empty |= ((k == EMPTY) as u32) << s;
            matched |= ((k == key) as u32) << s;
        }
        BucketView {
            empty,
            matched,
            next: self.next[slab as usize].load(R),
        }
    }

    /// Takes a free pool slab (its slab index), or `None` when the pool is exhausted.
    fn alloc(&self) -> Option<u32> {
        // Reserve a slab first, so that a scan never runs on an exhausted bitmap.
        self.free.fetch_update(R, R, |f| f.checked_sub(1)).ok()?;
        let words = self.used.len();
        let start = self.cursor.fetch_add(1, R) % words;
        loop {
            for i in 0..words {
                let w = (start + i) % words;
                let mut cur = self.used[w].load(R);
                loop {
                    // Bits past the pool's end count as taken.
                    let valid = if (w + 1) * 32 <= self.pool as usize {
                        u32::MAX
                    } else {
                        (1u32 << (self.pool as usize - w * 32)) - 1
                    };
                    let open = !cur & valid;
                    if open == 0 {
                        break;
                    }
                    let bit = open.trailing_zeros();
                    match self.used[w].compare_exchange_weak(cur, cur | 1 << bit, R, R) {
                        Ok(_) => return Some(self.buckets + (w * 32) as u32 + bit),
                        Err(now) => cur = now,
                    }
                }
            }
            // A reserved slab exists: another thread freed and re-took bits while we scanned; look again.
        }
    }

    /// Returns pool slab `slab` (a slab index) to the allocator.
    fn release(&self, slab: u32) {
        let p = (slab - self.buckets) as usize;
        let was = self.used[p / 32].fetch_and(!(1u32 << (p % 32)), R);
        debug_assert!(was & 1 << (p % 32) != 0, "slab {slab} freed twice");
        self.free.fetch_add(1, R);
    }

    /// Inserts `(key, value)`: a further copy (`unique == false`) or insert-or-overwrite (`true`).
    pub fn insert(
        &self,
        key: u64,
        value: u64,
        unique: bool,
    ) -> std::result::Result<Placed, NeedSlab> {
        let params = SchemeParams {
            upsert: unique as u32,
            ..chain_params()
        };
        let b = self.bucket_of(key);
        let _g = self.lock(b);
        let mut state = blank_state();
        Chain::insert_start(&mut state, 1);
        let mut slab = b;
        loop {
            let view = self.view(slab, key);
            let step = Chain::insert_step(&mut state, view, params, 16);
            let at = slab as usize * SLAB_SLOTS + step.slot as usize;
            match step.action {
                action::CLAIM => {
                    self.values[at].store(value, R);
                    self.keys[at].store(key, R);
                    self.len.fetch_add(1, R);
                    return Ok(Placed::Inserted);
                }
                action::UPDATE => {
                    self.values[at].store(value, R);
                    return Ok(Placed::Updated);
                }
                action::FOLLOW => slab = view.next,
                action::APPEND => {
                    let s = self.alloc().ok_or(NeedSlab)?;
                    self.next[slab as usize].store(s, R);
                    slab = s;
                }
                other => unreachable!("chained insert step returned action {other}"),
            }
        }
    }

    /// Walks `key`'s list, handing each slab's matches (slot indices into the slab array) to `take`, which
    /// returns `false` to stop. `all`: every match; else the first.
    fn walk(&self, key: u64, all: bool, mut take: impl FnMut(usize) -> bool) {
        let params = chain_params();
        let mut state = blank_state();
        Chain::find_start(&mut state);
        let mut slab = self.bucket_of(key);
        loop {
            let view = self.view(slab, key);
            let mut step = Chain::find_step(&mut state, view, params, 16);
            if step.action == action::FOUND {
                let base = slab as usize * SLAB_SLOTS;
                if !all {
                    take(base + step.slot as usize);
                    return;
                }
                let mut m = view.matched;
                while m != 0 {
                    if !take(base + m.trailing_zeros() as usize) {
                        return;
                    }
                    m &= m - 1;
                }
                step = Chain::find_more(&mut state, view, params);
            }
            match step.action {
                action::FOLLOW => slab = view.next,
                action::ABSENT => return,
                other => unreachable!("chained find step returned action {other}"),
            }
        }
    }

    /// The value of `key`'s first copy.
    pub fn find(&self, key: u64) -> Option<u64> {
        let _g = self.lock(self.bucket_of(key));
        let mut got = None;
        self.walk(key, false, |i| {
            got = Some(self.values[i].load(R));
            false
        });
        got
    }

    /// Every value of `key`, in list order, appended to `out`.
    pub fn find_all(&self, key: u64, out: &mut Vec<u64>) {
        let _g = self.lock(self.bucket_of(key));
        self.walk(key, true, |i| {
            out.push(self.values[i].load(R));
            true
        });
    }

    /// How many copies of `key` are stored.
    pub fn count(&self, key: u64) -> u32 {
        let _g = self.lock(self.bucket_of(key));
        let mut n = 0;
        self.walk(key, true, |_| {
            n += 1;
            true
        });
        n
    }

    /// Erases `key`'s first copy (`all == false`) or every copy; returns how many.
    pub fn erase(&self, key: u64, all: bool) -> usize {
        let _g = self.lock(self.bucket_of(key));
        let mut n = 0;
        self.walk(key, all, |i| {
            self.keys[i].store(TOMBSTONE, R);
            n += 1;
            true
        });
        self.len.fetch_sub(n, R);
        n
    }

    /// Pairs stored.
    pub fn len(&self) -> usize {
        self.len.load(R)
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of lists.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Pool slabs in all, and free.
    pub fn pool(&self) -> (u32, usize) {
        (self.pool, self.free.load(R))
    }

    /// Rewrites every list into its fewest slabs, in list order, without tombstones, and frees the slabs left
    /// over. Returns how many were freed.
    pub fn flush(&mut self) -> usize {
        use rayon::prelude::*;
        let this = &*self;
        (0..this.buckets)
            .into_par_iter()
            .map(|b| {
                let mut slabs = vec![b];
                let mut live = Vec::new();
                loop {
                    let s = *slabs.last().expect("a list has a head");
                    let base = s as usize * SLAB_SLOTS;
                    for i in base..base + SLAB_SLOTS {
                        let k = this.keys[i].load(R);
                        if k != EMPTY && k != TOMBSTONE {
                            live.push((k, this.values[i].load(R)));
                        }
                    }
                    match this.next[s as usize].load(R) {
                        NO_NEXT => break,
                        n => slabs.push(n),
                    }
                }
                let keep = live.len().div_ceil(SLAB_SLOTS).max(1);
                for (j, &s) in slabs.iter().enumerate().take(keep) {
                    let base = s as usize * SLAB_SLOTS;
                    for i in 0..SLAB_SLOTS {
                        let (k, v) = live.get(j * SLAB_SLOTS + i).copied().unwrap_or((EMPTY, 0));
                        this.keys[base + i].store(k, R);
                        this.values[base + i].store(v, R);
                    }
                }
                this.next[slabs[keep - 1] as usize].store(NO_NEXT, R);
                for &s in &slabs[keep..] {
                    let base = s as usize * SLAB_SLOTS;
                    for i in base..base + SLAB_SLOTS {
                        this.keys[i].store(EMPTY, R);
                    }
                    this.next[s as usize].store(NO_NEXT, R);
                    this.release(s);
                }
                slabs.len() - keep
            })
            .sum()
    }

    /// Every stored pair, list by list.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(self.len());
        for b in 0..self.buckets {
            let mut s = b;
            loop {
                let base = s as usize * SLAB_SLOTS;
                for i in base..base + SLAB_SLOTS {
                    let k = self.keys[i].load(R);
                    if k != EMPTY && k != TOMBSTONE {
                        out.push((k, self.values[i].load(R)));
                    }
                }
                match self.next[s as usize].load(R) {
                    NO_NEXT => break,
                    n => s = n,
                }
            }
        }
        out
    }

    /// Checks the table's invariants (`&mut self`: nothing runs meanwhile) and counts what it holds:
    /// - every key lives in its own bucket's list;
    /// - in list order, no filled slot follows an empty one (what ends searches early);
    /// - every pool slab is in exactly one list or free in the allocator, never both (no leak, no slab twice);
    /// - the stored-pair and free-slab counts match what the lists hold.
    pub fn check(&mut self) -> std::result::Result<ChainStats, String> {
        let mut seen = vec![false; self.pool as usize];
        let mut stats = ChainStats {
            buckets: self.buckets as usize,
            pool_slabs: self.pool as usize,
            ..ChainStats::default()
        };
        for b in 0..self.buckets {
            let (mut s, mut hole) = (b, false);
            loop {
                if s >= self.buckets {
                    let p = (s - self.buckets) as usize;
                    if p >= self.pool as usize {
                        return Err(format!("bucket {b}: link to slab {s} past the pool"));
                    }
                    if std::mem::replace(&mut seen[p], true) {
                        return Err(format!("bucket {b}: slab {s} is in two lists (or a cycle)"));
                    }
                    if self.used[p / 32].load(R) & 1 << (p % 32) == 0 {
                        return Err(format!("bucket {b}: slab {s} is in a list and free"));
                    }
                    stats.list_slabs += 1;
                }
                let base = s as usize * SLAB_SLOTS;
                for i in base..base + SLAB_SLOTS {
                    match self.keys[i].load(R) {
                        EMPTY => hole = true,
                        k => {
                            if hole {
                                return Err(format!(
                                    "bucket {b}: a filled slot after an empty one"
                                ));
                            }
                            if k == TOMBSTONE {
                                stats.tombstones += 1;
                            } else {
                                if self.bucket_of(k) != b {
                                    return Err(format!("key {k:#x} in bucket {b}'s list"));
                                }
                                stats.live += 1;
                            }
                        }
                    }
                }
                match self.next[s as usize].load(R) {
                    NO_NEXT => break,
                    n => s = n,
                }
            }
        }
        let marked: usize = self
            .used
            .iter()
            .map(|w| w.load(R).count_ones() as usize)
            .sum();
        if marked != stats.list_slabs {
            return Err(format!(
                "{marked} pool slabs marked used, {} in lists: a leak",
                stats.list_slabs
            ));
        }
        stats.free_slabs = self.free.load(R);
        if stats.free_slabs + stats.list_slabs != self.pool as usize {
            return Err(format!(
                "free count {} + slabs in lists {} != pool {}",
                stats.free_slabs, stats.list_slabs, self.pool
            ));
        }
        if stats.live != self.len() {
            return Err(format!(
                "len {} but {} pairs in the lists",
                self.len(),
                stats.live
            ));
        }
        Ok(stats)
    }
}

/// The chaining scheme's parameters (replace mode; inserts lower `upsert`).
pub fn chain_params() -> SchemeParams {
    use hashtile_core::scheme::SchemeInfo;
    Chain::default_params(16)
}
