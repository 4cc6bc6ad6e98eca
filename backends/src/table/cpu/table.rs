//! The CPU table itself ([`CpuTable`]): its arrays, hashing, bucket views and locks, single inserts, and the
//! whole-table calls (pairs, erase, clear, placement).

use super::memory::*;
use hashtile_core::HashFamily;
use hashtile_core::hash::{self, MAX_HASHES, bucket_index, hash_key, hash_key32, seed_mix};
use hashtile_core::scheme::{
    BucketView, NO_NEXT, ProbingScheme, SchemeInfo, SchemeParams, action, blank_state, no_mark,
    reclaim_step, sequence, sequence_advance, sequence_bucket, sequence_function, sequence_stride,
};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Outcome of one insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InsertOutcome {
    /// A new key took a slot.
    Added,
    /// A new key took an erased slot (an insert over marks, [`reclaim_step()`]).
    Reclaimed,
    /// The key was present; its value was replaced.
    Updated,
    /// The scheme gave up; this pair (the one in hand, possibly an evicted older pair) is not in the table.
    Failed(u64, u64),
}

/// What a run of inserts did. Each rayon task keeps its own and they are merged at the end: a shared
/// `len.fetch_add` per key was one contended cache line bounced between the cores on every insert.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) probes: u64,
    /// Of `probes`, bucket re-reads the parallel protocol caused (see [`CpuTable::claim_own`]).
    pub(super) retries: u64,
    pub(super) added: usize,
    /// Of `added`, keys that took an erased slot.
    pub(super) reclaimed: usize,
    pub(super) failed: Vec<(u64, u64)>,
}

impl Tally {
    pub(super) fn record(&mut self, o: InsertOutcome) {
        match o {
            InsertOutcome::Added => self.added += 1,
            InsertOutcome::Reclaimed => {
                self.added += 1;
                self.reclaimed += 1;
            }
            InsertOutcome::Updated => {}
            InsertOutcome::Failed(k, v) => self.failed.push((k, v)),
        }
    }
    pub(super) fn merge(mut self, mut other: Tally) -> Tally {
        self.probes += other.probes;
        self.retries += other.retries;
        self.added += other.added;
        self.reclaimed += other.reclaimed;
        self.failed.append(&mut other.failed);
        self
    }
}

/// A hash table in host memory, driven by scheme `S`.
pub struct CpuTable<S: ProbingScheme> {
    pub(super) keys: Buffer<AtomicU64>,
    /// One value per slot; none at all for a set's table (`keys_only`), whose values read as 0.
    values: Buffer<AtomicU64>,
    keys_only: bool,
    pub(super) locks: Box<[AtomicBool]>,
    pub(super) num_buckets: u32,
    pub(super) bucket_size: u32,
    pub(super) family: HashFamily,
    /// `seed_mix` of each seed of `family`: hashing a key whose high word is 0 then skips one `fmix32`.
    pub(super) seed_mixes: [u32; MAX_HASHES],
    pub(super) params: SchemeParams,
    pub(super) len: AtomicUsize,
    /// Slots marked erased ([`CpuTable::erase_stored`]) and not taken again: inserts take them on their walk
    /// while there are any (every scheme, [`reclaim_step()`]).
    pub(super) marks: AtomicUsize,
    pub(super) _scheme: PhantomData<S>,
}

/// Mixes a key into the seed of its eviction randomness (`hash::key_mix`, as the GPU layouts do).
pub fn key_mix(key: u64) -> u32 {
    hash::key_mix(key as u32, (key >> 32) as u32)
}

impl<S: SchemeInfo> CpuTable<S> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots.
    pub fn new(
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
    ) -> Self {
        Self::with_values(num_buckets, bucket_size, family, params, true)
    }

    /// [`CpuTable::new`], or without `values` a set's table: keys alone (half the memory), every value read
    /// as 0 and every value written dropped.
    pub fn with_values(
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
        values: bool,
    ) -> Self {
        let slots = num_buckets as usize * bucket_size as usize;
        Self {
            keys: Buffer::filled(slots, || AtomicU64::new(EMPTY_KEY)),
            values: Buffer::filled(if values { slots } else { 0 }, || AtomicU64::new(0)),
            keys_only: !values,
            locks: (0..num_buckets)
                .into_par_iter()
                .with_min_len(1 << 14)
                .map(|_| AtomicBool::new(false))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            num_buckets,
            bucket_size,
            family,
            seed_mixes: family.seeds.map(seed_mix),
            params,
            len: AtomicUsize::new(0),
            marks: AtomicUsize::new(0),
            _scheme: PhantomData,
        }
    }

    /// An empty table of the same shape with hash family `family`. [`CpuTable::clear_with`] does the same in
    /// place, without allocating and first-touching a whole new table.
    pub fn emptied(&self, family: HashFamily) -> Self {
        Self::with_values(
            self.num_buckets,
            self.bucket_size,
            family,
            self.params,
            !self.keys_only,
        )
    }

    /// Empties the table in place and switches to hash family `family` (a rebuild's reset, or `clear`).
    pub fn clear_with(&mut self, family: HashFamily) {
        self.family = family;
        self.seed_mixes = family.seeds.map(seed_mix);
        self.clear();
    }

    /// Stored pairs.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots.
    pub fn capacity(&self) -> usize {
        self.keys.len()
    }
    /// Slots per bucket.
    pub fn bucket_size(&self) -> u32 {
        self.bucket_size
    }
    /// The hash family in use.
    pub fn family(&self) -> HashFamily {
        self.family
    }

    /// `hash_key` of `key` under function `i`, by its cheaper form for keys whose high word is 0 (all 32-bit
    /// keys): the same value.
    #[inline(always)]
    pub(super) fn hash_of(&self, key: u64, i: u32) -> u32 {
        let (lo, hi) = (key as u32, (key >> 32) as u32);
        let i = i as usize;
        if hi == 0 {
            hash_key32(lo, self.family.seeds[i], self.seed_mixes[i])
        } else {
            hash_key(lo, hi, self.family.seeds[i])
        }
    }

    /// The bucket of `key` under the family's hash function `f` (before any sequence).
    #[inline(always)]
    fn family_bucket(&self, key: u64, f: u32) -> u32 {
        bucket_index(self.hash_of(key, f), self.num_buckets)
    }

    /// The bucket of `key` under probe index `i`, along the scheme's sequence (`ProbingScheme::SEQUENCE`).
    #[inline(always)]
    pub(super) fn bucket_of(&self, key: u64, i: u32) -> u32 {
        let kind = S::SEQUENCE;
        let hashed = |f: u32| self.family_bucket(key, f);
        if kind == sequence::HASHES {
            return hashed(i);
        }
        let second = if kind == sequence::DOUBLE {
            hashed(1)
        } else {
            0
        };
        let mix = if kind == sequence::OVERFLOW {
            key_mix(key)
        } else {
            0
        };
        sequence_bucket(
            kind,
            hashed(sequence_function(kind, i)),
            second,
            mix,
            i,
            self.num_buckets,
        )
    }

    /// The bucket of probe `read_index + 1` of `key`, whose probe `read_index` read `bucket`: along a strided
    /// sequence an add and a compare from `bucket` (`sequence_advance`, as the GPU driver's finds step; double
    /// hashing hashes its stride, without the remainder), else [`CpuTable::bucket_of`].
    #[inline(always)]
    pub(super) fn bucket_after(&self, key: u64, bucket: u32, read_index: u32) -> u32 {
        let kind = S::SEQUENCE;
        if kind != sequence::LINEAR && kind != sequence::DOUBLE {
            return self.bucket_of(key, read_index + 1);
        }
        let second = if kind == sequence::DOUBLE {
            self.family_bucket(key, 1)
        } else {
            0
        };
        sequence_advance(
            bucket,
            sequence_stride(kind, second, self.num_buckets),
            self.num_buckets,
        )
    }

    pub(super) fn lock(&self, b: u32) -> BucketGuard<'_> {
        let l = &self.locks[b as usize];
        while l
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        BucketGuard(l)
    }

    /// Reads bucket `b` for `key`, one atomic load per slot (other threads may be claiming and evicting).
    pub(super) fn view(&self, b: u32, key: u64) -> BucketView {
        self.view_as::<SCALAR>(b, key)
    }

    /// Reads bucket `b` for `key`. [`AVX2`] and [`AVX512`] views compare four or eight slots per instruction;
    /// they may only be taken by code compiled for that extension (inlined into a `#[target_feature]` function
    /// reached after `is_x86_feature_detected!`), and while no thread writes the bucket's key words: they read
    /// them with plain vector loads. That holds for every lookup made under `&self` (all key writers take
    /// `&mut self`), for the settle pass of an upsert (it writes values only) and for the lock-free claims of
    /// [`CpuTable::claim_own`] (each bucket has one writer, the reader). Scanning a 16-slot bucket one atomic
    /// load at a time was what bound absent-key finds, not memory (they ran as fast on a table in L2): AVX2
    /// views took absent finds at load 0.9 from about 50 to 75 M keys/s, AVX-512 to about 80.
    #[inline(always)]
    pub(super) fn view_as<const VECTOR: u8>(&self, b: u32, key: u64) -> BucketView {
        let base = b as usize * self.bucket_size as usize;
        let words = &self.keys[base..base + self.bucket_size as usize];
        #[cfg(target_arch = "x86_64")]
        if VECTOR == AVX512 && self.bucket_size >= 8 {
            // SAFETY: as below, with AVX-512F present and 64-byte alignment (buckets of 8 or more slots).
            let (empty, matched) = unsafe {
                let p = words.as_ptr().cast::<u64>();
                match words.len() {
                    8 => masks_avx512(p, 8, key),
                    16 => masks_avx512(p, 16, key),
                    _ => masks_avx512(p, words.len(), key),
                }
            };
            return BucketView {
                empty,
                matched,
                next: NO_NEXT,
            };
        }
        #[cfg(target_arch = "x86_64")]
        if VECTOR != SCALAR && self.bucket_size >= 4 {
            // SAFETY: AVX2 is present and no key word is being written (this function's contract); `words` is
            // in bounds, and 32-byte aligned: a bucket of 4 or more slots (a power of two) starts at a multiple
            // of 32 bytes of a 128-byte-aligned array.
            let (empty, matched) = unsafe {
                let p = words.as_ptr().cast::<u64>();
                // Constant sizes unroll the loop.
                match words.len() {
                    4 => masks_avx2(p, 4, key),
                    8 => masks_avx2(p, 8, key),
                    16 => masks_avx2(p, 16, key),
                    _ => masks_avx2(p, words.len(), key),
                }
            };
            return BucketView {
                empty,
                matched,
                next: NO_NEXT,
            };
        }
        let (mut empty, mut matched) = (0u32, 0u32);
        // Branch-free: which slots match is random, and a mispredicted branch per slot cost more than the
        // two masks.
        for (s, w) in words.iter().enumerate() {
            let k = w.load(Ordering::Acquire);
            empty |= ((k == EMPTY_KEY) as u32) << s;
            matched |= ((k == key) as u32) << s;
        }
        BucketView {
            empty,
            matched,
            next: NO_NEXT,
        }
    }

    pub(super) fn slot(&self, b: u32, s: u32) -> usize {
        b as usize * self.bucket_size as usize + s as usize
    }

    /// Prefetches the key lines of bucket `b`.
    #[inline(always)]
    pub(super) fn prefetch_keys(&self, b: u32) {
        // Pointer arithmetic without bounds checks: a prefetch never faults, and `b` is a bucket anyway.
        let p = self
            .keys
            .as_ptr()
            .wrapping_add(b as usize * self.bucket_size as usize);
        prefetch(p);
        if self.bucket_size > 8 {
            prefetch(p.wrapping_add(8));
            for w in (16..self.bucket_size as usize).step_by(8) {
                prefetch(p.wrapping_add(w));
            }
        }
    }

    /// Inserts one pair with the table's parameters; adds the bucket reads to `probes`.
    pub(super) fn insert_one(&self, key: u64, value: u64, probes: &mut u64) -> InsertOutcome {
        self.insert_one_with(key, value, self.params, probes)
    }

    /// Inserts one pair with `params` (the upsert flag may differ from the table's); adds the bucket reads
    /// to `probes`. The caller adds `Added` outcomes to `len` (see [`Tally`]).
    pub(super) fn insert_one_with(
        &self,
        key: u64,
        value: u64,
        params: SchemeParams,
        probes: &mut u64,
    ) -> InsertOutcome {
        let (mut k, mut v) = (key, value);
        let mut state = blank_state();
        S::insert_start(&mut state, key_mix(k));
        // Erased slots are taken again along the walk (see `reclaim_step`) while the table holds any.
        let reclaims = self.marks.load(Ordering::Relaxed) > 0;
        // Keys promised new take the first mark at once.
        let absent = params.upsert == 0;
        let mut mark = no_mark();
        loop {
            let read_index = state.hash_index;
            let b = self.bucket_of(k, read_index);
            let view = self.view(b, k);
            *probes += 1;
            let mut step = S::insert_step(&mut state, view, params, self.bucket_size);
            if reclaims {
                step = reclaim_step(step, self.marked(b), read_index, absent, &mut mark);
            }
            match step.action {
                action::NEXT => {}
                action::CLAIM => {
                    if self.claim(k, v, step.target, step.slot, EMPTY_KEY) {
                        return InsertOutcome::Added;
                    } // lost the slot: the state still names a bucket to re-read
                }
                action::EVICT => {
                    let tb = self.bucket_of(k, step.target);
                    let i = self.slot(tb, step.slot);
                    let (ek, ev) = {
                        let _g = self.lock(tb);
                        let ek = self.keys[i].swap(k, Ordering::AcqRel);
                        let ev = self.swap_value(i, v);
                        (ek, ev)
                    };
                    if ek == EMPTY_KEY {
                        // The slot emptied under us (cannot happen without deletes); our pair is placed.
                        return InsertOutcome::Added;
                    }
                    let from = (0..self.params.num_hashes)
                        .find(|&j| self.bucket_of(ek, j) == tb)
                        .unwrap_or(0);
                    S::after_evict(&mut state, from, self.params);
                    (k, v) = (ek, ev);
                }
                action::UPDATE => {
                    let i = self.slot(b, step.slot);
                    let _g = self.lock(b);
                    if self.keys[i].load(Ordering::Relaxed) == k {
                        self.store_value(i, v, Ordering::Release);
                        return InsertOutcome::Updated;
                    }
                }
                action::RECLAIM => {
                    if self.claim(k, v, step.target, step.slot, ERASED_KEY) {
                        return InsertOutcome::Reclaimed;
                    }
                    // Another insert took the mark: walk again from the start.
                    S::insert_start(&mut state, key_mix(k));
                    mark = no_mark();
                }
                action::FAIL => return InsertOutcome::Failed(k, v),
                other => unreachable!("insert step returned action {other}"),
            }
        }
    }

    /// Stores `(k, v)` in slot `slot` of `k`'s bucket under hash index `target` if the slot still holds `expected`
    /// (empty, or erased), under the bucket's lock; `false` when another insert took it first.
    fn claim(&self, k: u64, v: u64, target: u32, slot: u32, expected: u64) -> bool {
        let tb = self.bucket_of(k, target);
        let i = self.slot(tb, slot);
        let _g = self.lock(tb);
        let free = self.keys[i].load(Ordering::Relaxed) == expected;
        if free {
            self.store_value(i, v, Ordering::Relaxed);
            self.keys[i].store(k, Ordering::Release);
        }
        free
    }

    /// Every stored pair, in slot order (a set's with value 0).
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        (self.keys.iter().enumerate())
            .filter_map(|(i, k)| {
                let k = k.load(Ordering::Acquire);
                (k != EMPTY_KEY && k != ERASED_KEY).then(|| (k, self.value(i, Ordering::Acquire)))
            })
            .collect()
    }

    /// Whether the table stores values (a set's does not).
    pub fn has_values(&self) -> bool {
        !self.keys_only
    }

    /// The value of slot `i` (0 in a set's table).
    #[inline(always)]
    pub(super) fn value(&self, i: usize, order: Ordering) -> u64 {
        if self.keys_only {
            0
        } else {
            self.values[i].load(order)
        }
    }

    /// Writes the value of slot `i` (nothing in a set's table).
    #[inline(always)]
    pub(super) fn store_value(&self, i: usize, v: u64, order: Ordering) {
        if !self.keys_only {
            self.values[i].store(v, order);
        }
    }

    /// Exchanges the value of slot `i` (0 back in a set's table).
    #[inline(always)]
    fn swap_value(&self, i: usize, v: u64) -> u64 {
        if self.keys_only {
            0
        } else {
            self.values[i].swap(v, Ordering::AcqRel)
        }
    }

    /// The address of slot `i`'s value, to prefetch (`None` in a set's table).
    #[inline(always)]
    pub(super) fn value_addr(&self, i: usize) -> Option<*const AtomicU64> {
        (!self.keys_only).then(|| self.values.as_ptr().wrapping_add(i))
    }

    /// Tombstone erase (32-bit keys: [`ERASED_KEY`] is then never a key): marks the slot of each stored key of
    /// `keys` erased and returns how many were. The slots stay taken until the next rebuild, which must come
    /// before the next insert of a scheme that moves pairs (an eviction would carry a mark on).
    pub fn erase_stored(&self, keys: &[u64]) -> usize {
        let erased = keys
            .par_iter()
            .with_min_len(CHUNK)
            .filter(|&&key| {
                let mut probes = 0;
                self.find_slot(key, &mut probes).is_some_and(|i| {
                    // Only one of two equal keys erases the slot.
                    self.keys[i]
                        .compare_exchange(key, ERASED_KEY, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                })
            })
            .count();
        self.len.fetch_sub(erased, Ordering::Relaxed);
        self.marks.fetch_add(erased, Ordering::Relaxed);
        erased
    }

    /// Slots marked erased and not taken again by an insert.
    pub fn marks(&self) -> usize {
        self.marks.load(Ordering::Relaxed)
    }

    /// The erased slots of bucket `b`, as a view's mask.
    fn marked(&self, b: u32) -> u32 {
        let base = b as usize * self.bucket_size as usize;
        (self.keys[base..base + self.bucket_size as usize].iter())
            .enumerate()
            .filter(|(_, w)| w.load(Ordering::Acquire) == ERASED_KEY)
            .fold(0u32, |m, (s, _)| m | (1 << s))
    }

    /// Removes every pair.
    pub fn clear(&mut self) {
        self.keys
            .par_iter()
            .with_min_len(1 << 14)
            .for_each(|k| k.store(EMPTY_KEY, Ordering::Relaxed));
        self.len.store(0, Ordering::Relaxed);
        self.marks.store(0, Ordering::Relaxed);
    }

    /// The bucket indices `key` may occupy (one per hash function, `count` of them: `SchemeInfo::candidates`),
    /// for placement checks.
    pub fn candidate_buckets(&self, key: u64, count: u32) -> Vec<u32> {
        (0..count).map(|i| self.bucket_of(key, i)).collect()
    }

    /// The bucket each stored key sits in, for placement checks: `(key, bucket)`.
    pub fn placement(&self) -> Vec<(u64, u32)> {
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let k = k.load(Ordering::Acquire);
                (k != EMPTY_KEY && k != ERASED_KEY)
                    .then(|| (k, (i / self.bucket_size as usize) as u32))
            })
            .collect()
    }
}

pub(super) struct BucketGuard<'a>(&'a AtomicBool);
impl Drop for BucketGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashtile_probing::{Bcht, LinearProbing};

    /// A set's table holds no values: it allocates none, drops the values it is given, reads 0 for every key,
    /// and keeps its keys through evictions (BCHT) and first-fit walks alike.
    fn keys_only_round_trip<S: SchemeInfo>(bucket: u32) {
        let n = 20_000u32;
        let keys: Vec<u32> = (0..n).map(|i| hash::fmix32(i ^ 0x51)).collect();
        let distinct: std::collections::HashSet<u32> = keys.iter().copied().collect();
        let nb = (n as f64 / 0.85 / bucket as f64).ceil() as u32;
        let mut t = CpuTable::<S>::with_values(
            nb,
            bucket,
            HashFamily::new(5),
            S::default_params(bucket),
            false,
        );
        assert!(!t.has_values());
        assert_eq!(t.values.len(), 0, "no value storage");
        let values: Vec<u32> = keys.iter().map(|k| k ^ 7).collect();
        let (_, unplaced) = t.upsert(&keys, &values, false, false);
        assert!(unplaced.is_empty());
        assert_eq!(t.len(), distinct.len());
        let mut stored: Vec<(u64, u64)> = t.pairs();
        stored.sort_unstable();
        let mut want: Vec<(u64, u64)> = distinct.iter().map(|&k| (k as u64, 0)).collect();
        want.sort_unstable();
        assert_eq!(stored, want, "every key once, value 0");
        let mut probes = 0;
        for &k in keys.iter().take(1000) {
            assert_eq!(t.find_one(k as u64, &mut probes), Some(0));
        }
        assert_eq!(t.find_one(u32::MAX as u64 - 5, &mut probes), None);
    }

    #[test]
    fn keys_only_tables_store_no_values() {
        keys_only_round_trip::<Bcht>(8);
        keys_only_round_trip::<LinearProbing>(4);
        // With values: as before.
        let t = CpuTable::<Bcht>::new(64, 8, HashFamily::new(5), Bcht::default_params(8));
        assert!(t.has_values());
        assert_eq!(t.values.len(), 512);
    }
}
