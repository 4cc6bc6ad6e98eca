//! The CPU backend: plain Rust, multi-threaded with rayon, always available.
//!
//! It runs the very same scheme step functions as the GPU tile driver (they are `#[cube]` functions written in
//! plain integer arithmetic, so they are ordinary Rust functions on the host) with the same hash family and
//! the same bucket layout, so a table built here places keys by the same rules as on a GPU.
//!
//! Storage is widened: keys and values are `u64` words in two arrays (`u64::MAX` = empty key), which serves
//! 32- and 64-bit elements alike. Each bucket has a spin lock; a step's memory action (claim, evict, update)
//! runs under the lock of the bucket it touches, and a claim re-checks that its slot is still empty, which gives
//! it compare-and-swap semantics. In **deterministic** mode operations run one at a time, in input order, on
//! the calling thread: the placement and the probe counts are then exactly reproducible.

use hashtile_core::hash::{bucket_index, fmix32, hash_key};
use hashtile_core::scheme::{BucketView, ProbingScheme, SchemeParams, action, blank_state};
use hashtile_core::{HashFamily, Key, ProbeStats, Value};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The empty key word.
pub const EMPTY_KEY: u64 = u64::MAX;

const PLAN_SKIP: u8 = 0;
const PLAN_NEW: u8 = 1;
const PLAN_UPDATE: u8 = 2;

/// Outcome of one insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InsertOutcome {
    /// A new key took a slot.
    Added,
    /// The key was present; its value was replaced.
    Updated,
    /// The scheme gave up; this pair (the one in hand, possibly an evicted older pair) is not in the table.
    Failed(u64, u64),
}

/// A hash table in host memory, driven by scheme `S`.
pub struct CpuTable<S: ProbingScheme> {
    keys: Box<[AtomicU64]>,
    values: Box<[AtomicU64]>,
    locks: Box<[AtomicBool]>,
    num_buckets: u32,
    bucket_size: u32,
    family: HashFamily,
    params: SchemeParams,
    len: AtomicUsize,
    _scheme: PhantomData<S>,
}

fn atomic_vec(n: usize, v: u64) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(v)).collect()
}

/// Mixes a key into the seed of its eviction randomness (same formula as the GPU driver).
pub fn key_mix(key: u64) -> u32 {
    fmix32(key as u32 ^ fmix32((key >> 32) as u32))
}

impl<S: ProbingScheme> CpuTable<S> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots.
    pub fn new(
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
    ) -> Self {
        let slots = num_buckets as usize * bucket_size as usize;
        Self {
            keys: atomic_vec(slots, EMPTY_KEY),
            values: atomic_vec(slots, 0),
            locks: (0..num_buckets).map(|_| AtomicBool::new(false)).collect(),
            num_buckets,
            bucket_size,
            family,
            params,
            len: AtomicUsize::new(0),
            _scheme: PhantomData,
        }
    }

    /// An empty table of the same shape with hash family `family`.
    pub fn emptied(&self, family: HashFamily) -> Self {
        Self::new(self.num_buckets, self.bucket_size, family, self.params)
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
    /// The hash family in use.
    pub fn family(&self) -> HashFamily {
        self.family
    }

    fn bucket_of(&self, key: u64, i: u32) -> u32 {
        bucket_index(
            hash_key(
                key as u32,
                (key >> 32) as u32,
                self.family.seeds[i as usize],
            ),
            self.num_buckets,
        )
    }

    fn lock(&self, b: u32) -> BucketGuard<'_> {
        let l = &self.locks[b as usize];
        while l
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        BucketGuard(l)
    }

    fn view(&self, b: u32, key: u64) -> BucketView {
        let base = b as usize * self.bucket_size as usize;
        let (mut empty, mut matched) = (0u32, 0u32);
        for s in 0..self.bucket_size as usize {
            let k = self.keys[base + s].load(Ordering::Acquire);
            if k == EMPTY_KEY {
                empty |= 1 << s;
            } else if k == key {
                matched |= 1 << s;
            }
        }
        BucketView { empty, matched }
    }

    fn slot(&self, b: u32, s: u32) -> usize {
        b as usize * self.bucket_size as usize + s as usize
    }

    /// Inserts one pair with the table's parameters; adds the bucket reads to `probes`.
    fn insert_one(&self, key: u64, value: u64, probes: &mut u64) -> InsertOutcome {
        self.insert_one_with(key, value, self.params, probes)
    }

    /// Inserts one pair with `params` (the upsert flag may differ from the table's); adds the bucket reads
    /// to `probes`.
    fn insert_one_with(
        &self,
        key: u64,
        value: u64,
        params: SchemeParams,
        probes: &mut u64,
    ) -> InsertOutcome {
        let (mut k, mut v) = (key, value);
        let mut state = blank_state();
        S::insert_start(&mut state, key_mix(k));
        loop {
            let b = self.bucket_of(k, state.hash_index);
            let view = self.view(b, k);
            *probes += 1;
            let step = S::insert_step(&mut state, view, params, self.bucket_size);
            match step.action {
                action::NEXT => {}
                action::CLAIM => {
                    let tb = self.bucket_of(k, step.target);
                    let i = self.slot(tb, step.slot);
                    let _g = self.lock(tb);
                    if self.keys[i].load(Ordering::Relaxed) == EMPTY_KEY {
                        self.values[i].store(v, Ordering::Relaxed);
                        self.keys[i].store(k, Ordering::Release);
                        self.len.fetch_add(1, Ordering::Relaxed);
                        return InsertOutcome::Added;
                    } // lost the slot: the state still names a bucket to re-read
                }
                action::EVICT => {
                    let tb = self.bucket_of(k, step.target);
                    let i = self.slot(tb, step.slot);
                    let (ek, ev) = {
                        let _g = self.lock(tb);
                        let ek = self.keys[i].swap(k, Ordering::AcqRel);
                        let ev = self.values[i].swap(v, Ordering::AcqRel);
                        (ek, ev)
                    };
                    if ek == EMPTY_KEY {
                        // The slot emptied under us (cannot happen without deletes); our pair is placed.
                        self.len.fetch_add(1, Ordering::Relaxed);
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
                        self.values[i].store(v, Ordering::Release);
                        return InsertOutcome::Updated;
                    }
                }
                action::FAIL => return InsertOutcome::Failed(k, v),
                other => unreachable!("insert step returned action {other}"),
            }
        }
    }

    /// Looks up one key; adds the bucket reads to `probes`.
    fn find_one(&self, key: u64, probes: &mut u64) -> Option<u64> {
        let mut state = blank_state();
        S::find_start(&mut state);
        loop {
            let b = self.bucket_of(key, state.hash_index);
            let view = self.view(b, key);
            *probes += 1;
            let step = S::find_step(&mut state, view, self.params, self.bucket_size);
            match step.action {
                action::NEXT => {}
                action::FOUND => {
                    return Some(self.values[self.slot(b, step.slot)].load(Ordering::Acquire));
                }
                action::ABSENT => return None,
                other => unreachable!("find step returned action {other}"),
            }
        }
    }

    /// Inserts pairs (keys already validated, at most one occurrence of each key). Returns the probe statistics
    /// and every pair that could not be placed.
    pub fn insert_pairs(
        &self,
        pairs: &[(u64, u64)],
        deterministic: bool,
    ) -> (ProbeStats, Vec<(u64, u64)>) {
        let failed = Mutex::new(Vec::new());
        let run = |chunk: &[(u64, u64)]| {
            let mut probes = 0u64;
            for &(k, v) in chunk {
                if let InsertOutcome::Failed(fk, fv) = self.insert_one(k, v, &mut probes) {
                    failed.lock().expect("poisoned").push((fk, fv));
                }
            }
            probes
        };
        let probes = if deterministic {
            run(pairs)
        } else {
            pairs.par_chunks(4096).map(run).sum()
        };
        (
            ProbeStats {
                probes,
                ops: pairs.len() as u64,
                retries: 0,
            },
            failed.into_inner().expect("poisoned"),
        )
    }

    /// Looks up keys into `out` (same length).
    pub fn find_keys(
        &self,
        keys: &[u64],
        deterministic: bool,
        out: &mut [Option<u64>],
    ) -> ProbeStats {
        let run = |(ks, os): (&[u64], &mut [Option<u64>])| {
            let mut probes = 0u64;
            for (k, o) in ks.iter().zip(os.iter_mut()) {
                *o = self.find_one(*k, &mut probes);
            }
            probes
        };
        let probes = if deterministic {
            run((keys, out))
        } else {
            keys.par_chunks(4096)
                .zip(out.par_chunks_mut(4096))
                .map(run)
                .sum()
        };
        ProbeStats {
            probes,
            ops: keys.len() as u64,
            retries: 0,
        }
    }

    /// Upserts a batch of typed pairs (keys validated): the last occurrence of a key wins, stored keys get the
    /// new value. Returns the probe statistics and every pair that could not be placed.
    ///
    /// Deterministic mode inserts one pair at a time in input order, which settles duplicates and updates by
    /// itself. The parallel mode settles them first, as the GPU host path does (`gpu::upsert`): a scratch
    /// open-addressing array of `2n` words marks each key's last occurrence (one compare-and-swap and one
    /// atomic max per key, all threads), a parallel lookup sorts the kept keys into updates and new keys, and
    /// the updates run before the new keys (an update must not search while an eviction carries its key), the
    /// new keys without the duplicate check.
    pub fn upsert<K: Key, V: Value>(
        &self,
        keys: &[K],
        values: &[V],
        deterministic: bool,
        distinct: bool,
    ) -> (ProbeStats, Vec<(K, V)>) {
        let n = keys.len();
        let failed = Mutex::new(Vec::new());
        let record = |o: InsertOutcome| {
            if let InsertOutcome::Failed(fk, fv) = o {
                failed
                    .lock()
                    .expect("poisoned")
                    .push((K::narrow(fk), V::narrow(fv)));
            }
        };
        let bulk = SchemeParams {
            upsert: 0,
            ..self.params
        };
        let probes = if deterministic {
            let mut probes = 0u64;
            for (k, v) in keys.iter().zip(values) {
                record(self.insert_one(k.widen(), v.widen(), &mut probes));
            }
            probes
        } else if distinct {
            self.par_insert(n, |i| Some((keys[i], values[i], bulk)), &record)
        } else {
            let mask = self.plan(keys);
            let updates = self.par_insert(
                n,
                |i| (mask[i] == PLAN_UPDATE).then(|| (keys[i], values[i], self.params)),
                &record,
            );
            updates
                + self.par_insert(
                    n,
                    |i| (mask[i] == PLAN_NEW).then(|| (keys[i], values[i], bulk)),
                    &record,
                )
        };
        (
            ProbeStats {
                probes,
                ops: n as u64,
                retries: 0,
            },
            failed.into_inner().expect("poisoned"),
        )
    }

    /// Runs `insert_one_with` in parallel over the positions `pick` selects; returns the probes.
    fn par_insert<K: Key, V: Value>(
        &self,
        n: usize,
        pick: impl Fn(usize) -> Option<(K, V, SchemeParams)> + Sync,
        record: &(impl Fn(InsertOutcome) + Sync),
    ) -> u64 {
        (0..n)
            .into_par_iter()
            .with_min_len(4096)
            .map(|i| {
                let mut probes = 0u64;
                if let Some((k, v, p)) = pick(i) {
                    record(self.insert_one_with(k.widen(), v.widen(), p, &mut probes));
                }
                probes
            })
            .sum()
    }

    /// The duplicate and update plan of a batch (see [`CpuTable::upsert`]): per position, skip (an earlier
    /// occurrence of a key that occurs again), new, or update.
    fn plan<K: Key>(&self, keys: &[K]) -> Vec<u8> {
        let n = keys.len();
        let slots = (2 * n.max(1)).next_power_of_two();
        let mask = slots - 1;
        let scratch = atomic_vec(slots, EMPTY_KEY);
        let last: Box<[AtomicU64]> = (0..slots).map(|_| AtomicU64::new(0)).collect();
        let slot_of: Vec<usize> = keys
            .par_iter()
            .enumerate()
            .with_min_len(4096)
            .map(|(i, k)| {
                let k = k.widen();
                let mut h = key_mix(k) as usize & mask;
                loop {
                    match scratch[h].compare_exchange(
                        EMPTY_KEY,
                        k,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break,
                        Err(old) if old == k => break,
                        Err(_) => h = (h + 1) & mask,
                    }
                }
                last[h].fetch_max(i as u64, Ordering::AcqRel);
                h
            })
            .collect();
        let stored = !self.is_empty();
        keys.par_iter()
            .enumerate()
            .with_min_len(4096)
            .map(|(i, k)| {
                if last[slot_of[i]].load(Ordering::Acquire) != i as u64 {
                    PLAN_SKIP
                } else if stored && self.find_one(k.widen(), &mut 0).is_some() {
                    PLAN_UPDATE
                } else {
                    PLAN_NEW
                }
            })
            .collect()
    }

    /// Counts the distinct keys of a batch that are not stored (the capacity check near a full table).
    pub fn count_new<K: Key>(&self, keys: &[K]) -> usize {
        self.plan(keys)
            .par_iter()
            .filter(|&&m| m == PLAN_NEW)
            .count()
    }

    /// Looks typed keys up: `out[i]` = value or `V::ABSENT`; presence bits into `found` when given.
    pub fn find_typed<K: Key, V: Value>(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
        deterministic: bool,
    ) -> ProbeStats {
        let n = keys.len();
        let run = |(ks, os): (&[K], &mut [V])| {
            let mut probes = 0u64;
            for (k, o) in ks.iter().zip(os.iter_mut()) {
                *o = self
                    .find_one(k.widen(), &mut probes)
                    .map_or(V::ABSENT, V::narrow);
            }
            probes
        };
        let probes = if deterministic {
            run((keys, &mut *out))
        } else {
            keys.par_chunks(4096)
                .zip(out.par_chunks_mut(4096))
                .map(run)
                .sum()
        };
        if let Some(bits) = found {
            // Absent keys read V::ABSENT; only those need a second look (a stored all-ones value).
            let out = &*out;
            crate::engine::bits_from(bits, n, |i| {
                out[i] != V::ABSENT || self.find_one(keys[i].widen(), &mut 0).is_some()
            });
        }
        ProbeStats {
            probes,
            ops: n as u64,
            retries: 0,
        }
    }

    /// Every stored pair, in slot order.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        self.keys
            .iter()
            .zip(self.values.iter())
            .filter_map(|(k, v)| {
                let k = k.load(Ordering::Acquire);
                (k != EMPTY_KEY).then(|| (k, v.load(Ordering::Acquire)))
            })
            .collect()
    }

    /// Removes every pair.
    pub fn clear(&self) {
        self.keys
            .par_iter()
            .for_each(|k| k.store(EMPTY_KEY, Ordering::Relaxed));
        self.len.store(0, Ordering::Relaxed);
    }

    /// The bucket indices `key` may occupy (one per hash function), for placement checks.
    pub fn candidate_buckets(&self, key: u64) -> Vec<u32> {
        (0..self.params.num_hashes)
            .map(|i| self.bucket_of(key, i))
            .collect()
    }

    /// The bucket each stored key sits in, for placement checks: `(key, bucket)`.
    pub fn placement(&self) -> Vec<(u64, u32)> {
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let k = k.load(Ordering::Acquire);
                (k != EMPTY_KEY).then(|| (k, (i / self.bucket_size as usize) as u32))
            })
            .collect()
    }
}

struct BucketGuard<'a>(&'a AtomicBool);
impl Drop for BucketGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
