//! CPU inserts in bulk: duplicates settled (the last occurrence wins), the batch sorted by bucket range so
//! that each thread claims the slots of one L2-sized slice without locks.

use super::memory::*;
use super::table::*;
use hashtile_core::reduce::HostReduce;
use hashtile_core::scheme::{SchemeInfo, SchemeParams, action, blank_state, make_step};
use hashtile_core::{Key, ProbeStats, Value};
use rayon::prelude::*;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

thread_local! {
    /// The dedup set of [`dedup_keep_last`], reused across ranges and calls (it is cleared per range, within
    /// the cache-sized bounds of a range).
    static DEDUP: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Moves the last occurrence of each key of `items` (by `key`) to the end of `items`, in input order, and
/// returns where they start: `items[first..]` are the kept items. An open-addressing set, scanned from the
/// back: the first time a key is seen there is its last occurrence.
pub(super) fn dedup_keep_last<T: Copy>(items: &mut [T], key: impl Fn(&T) -> u64) -> usize {
    let m = items.len();
    if m <= 1 {
        return 0;
    }
    DEDUP.with_borrow_mut(|set| {
        let cap = (2 * m).next_power_of_two();
        let shift = 64 - cap.trailing_zeros();
        set.clear();
        set.resize(cap, EMPTY_KEY);
        let mut first = m;
        for j in (0..m).rev() {
            let it = items[j];
            let k = key(&it);
            // Fibonacci hashing of the folded key: its top bits depend on every key bit. (The table hash is
            // no good here: every key of a range shares its top bits.)
            let mut h = ((k ^ (k >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
            loop {
                let s = set[h];
                if s == EMPTY_KEY {
                    set[h] = k;
                    first -= 1;
                    items[first] = it;
                    break;
                }
                if s == k {
                    break;
                }
                h = (h + 1) & (cap - 1);
            }
        }
        first
    })
}

/// Splits `items` into consecutive slices of the lengths `starts` (prefix offsets, `len + 1` of them) gives.
pub(super) fn split_ranges<'a, T>(mut items: &'a mut [T], starts: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(starts.len().saturating_sub(1));
    for w in starts.windows(2) {
        let (head, tail) = std::mem::take(&mut items).split_at_mut(w[1] - w[0]);
        out.push(head);
        items = tail;
    }
    out
}

impl<S: SchemeInfo> CpuTable<S> {
    /// Inserts pairs (keys already validated, at most one occurrence of each key). Returns the probe statistics
    /// and every pair that could not be placed.
    pub fn insert_pairs(
        &mut self,
        pairs: &[(u64, u64)],
        deterministic: bool,
    ) -> (ProbeStats, Vec<(u64, u64)>) {
        let run = |chunk: &[(u64, u64)]| {
            let mut t = Tally::default();
            for &(k, v) in chunk {
                let o = self.insert_one(k, v, &mut t.probes);
                t.record(o);
            }
            t
        };
        let tally = if deterministic {
            run(pairs)
        } else {
            pairs
                .par_chunks(CHUNK)
                .map(run)
                .reduce(Tally::default, Tally::merge)
        };
        self.len.fetch_add(tally.added, Ordering::Relaxed);
        self.marks.fetch_sub(tally.reclaimed, Ordering::Relaxed);
        (
            ProbeStats {
                probes: tally.probes,
                ops: pairs.len() as u64,
                retries: 0,
            },
            tally.failed,
        )
    }

    /// `insert_or_apply` with the reduction `F`: the batch's values are folded per key in input order, each
    /// fold is combined with the key's stored value where there is one (`F::reduce_host(stored, folded)`), and
    /// the distinct keys are upserted. For [`Assign`](hashtile_core::reduce::Assign) that is [`CpuTable::upsert`]'s
    /// rule: the last occurrence wins.
    pub fn upsert_apply<F: HostReduce, K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
        deterministic: bool,
    ) -> (ProbeStats, Vec<(K, V)>) {
        let mut at = std::collections::HashMap::with_capacity(keys.len());
        let (mut ks, mut vs) = (Vec::new(), Vec::new());
        for (&k, &v) in keys.iter().zip(values) {
            match at.entry(k.widen()) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(ks.len());
                    ks.push(k);
                    vs.push(v);
                }
                std::collections::hash_map::Entry::Occupied(e) => {
                    let j = *e.get();
                    vs[j] = F::reduce_host(vs[j], v);
                }
            }
        }
        let mut stored = vec![V::default(); ks.len()];
        let mut bits = vec![0u32; ks.len().div_ceil(32)];
        self.find_typed(&ks, &mut stored, Some(&mut bits), deterministic);
        for (j, v) in vs.iter_mut().enumerate() {
            if crate::results::present(&bits, j) {
                *v = F::reduce_host(stored[j], *v);
            }
        }
        self.upsert(&ks, &vs, deterministic, false)
    }

    /// Upserts a batch of typed pairs (keys validated): the last occurrence of a key wins, stored keys get the
    /// new value. Returns the probe statistics and every pair that could not be placed.
    ///
    /// Deterministic mode inserts one pair at a time in input order, which settles duplicates and updates by
    /// itself. The parallel mode settles them before it moves anything, as the GPU host path does
    /// (`gpu::upsert`): in one concurrent pass, an update could search while another thread's cuckoo eviction
    /// carries its key in flight, miss it, and store the key a second time. So, with a barrier (the end of a
    /// rayon pass) after each step:
    ///
    /// 1. **Partition** (`CpuTable::partition`): a stable parallel counting sort of the pairs by the range of
    ///    buckets (a run of whole buckets, sized for L2) their first bucket falls in. Every occurrence of a
    ///    key lands in one range, in input order.
    /// 2. **Settle and update**, per range in parallel (`CpuTable::settle_range`): the last occurrence of each
    ///    key is kept (a small set that stays in cache); each kept key is looked up, and a stored one gets its
    ///    new value there and then. This is the update pass, merged with the plan's lookup: nothing moves during
    ///    it (no claims, no evictions), so a lookup cannot miss a stored key, and each value slot is written by
    ///    the one thread owning its key's range. What is left per range are the new keys: distinct and absent.
    /// 3. **New keys**, after every update, without the duplicate check (`upsert = 0`). Cuckoo schemes:
    ///    (a) per range in parallel, each key whose first bucket has room claims it without a lock (the range
    ///    owns those buckets, `CpuTable::claim_own`); (b) then the rest, per range in parallel, the general
    ///    way (locks, evictions). Stable schemes: all of them in rounds across the ranges
    ///    (`CpuTable::interleaved`), because their bucket choices are sensitive to the order.
    ///
    /// Each thread works through one range at a time, and most keys' first buckets lie in it, so the bucket
    /// and value reads and writes hit its cache instead of memory.
    pub fn upsert<K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
        deterministic: bool,
        distinct: bool,
    ) -> (ProbeStats, Vec<(K, V)>) {
        let n = keys.len();
        let bulk = SchemeParams {
            upsert: 0,
            ..self.params
        };
        let tally = if deterministic {
            let mut t = Tally::default();
            for (k, v) in keys.iter().zip(values) {
                let o = self.insert_one(k.widen(), v.widen(), &mut t.probes);
                t.record(o);
            }
            t
        } else if n == 0 {
            Tally::default()
        } else {
            let (mut pairs, starts) = self.partition(keys, |i| (keys[i], values[i]));
            let mut ranges = split_ranges(&mut pairs, &starts);
            // Per range: the new keys' span of the range's slice, and the update probes.
            let (plan, updates): (Vec<(usize, usize)>, u64) = if distinct {
                (ranges.iter().map(|r| (0, r.len())).collect(), 0)
            } else {
                let stored = !self.is_empty();
                let settled: Vec<(usize, usize, u64)> = ranges
                    .par_iter_mut()
                    .with_max_len(1)
                    .map(|r| {
                        self.settle_range(
                            r,
                            stored,
                            |&(k, _)| k.widen(),
                            |slot, &(_, v)| self.store_value(slot, v.widen(), Ordering::Release),
                        )
                    })
                    .collect();
                let probes = settled.iter().map(|s| s.2).sum();
                (
                    settled.into_iter().map(|(a, b, _)| (a, b)).collect(),
                    probes,
                )
            };
            let mut spans: Vec<&mut [(K, V)]> = ranges
                .into_iter()
                .zip(&plan)
                .map(|(r, &(a, b))| &mut r[a..b])
                .collect();
            let insert = |t: &mut Tally, &(k, v): &(K, V)| {
                let o = self.insert_one_with(k.widen(), v.widen(), bulk, &mut t.probes);
                t.record(o);
            };
            let mut t = if S::STABLE {
                let spans: Vec<&[(K, V)]> = spans.iter().map(|s| &**s).collect();
                self.interleaved(&spans, insert)
            } else {
                // 3a: claims in each range's own first buckets; the keys that need more are deferred.
                let first: Vec<(usize, Tally)> = spans
                    .par_iter_mut()
                    .with_max_len(1)
                    .map(|span| self.claim_own(span, bulk))
                    .collect();
                // 3b: the deferred keys, the general way (locks, eviction chains into other ranges).
                let mut t = spans
                    .par_iter()
                    .zip(first.par_iter())
                    .with_max_len(1)
                    .map(|(span, (deferred, _))| {
                        let mut t = Tally::default();
                        for it in &span[..*deferred] {
                            insert(&mut t, it);
                        }
                        // Each deferred key re-reads the first bucket the lock-free pass read.
                        t.retries += *deferred as u64;
                        t
                    })
                    .reduce(Tally::default, Tally::merge);
                for (_, f) in first {
                    t = t.merge(f);
                }
                t
            };
            t.probes += updates;
            t
        };
        self.len.fetch_add(tally.added, Ordering::Relaxed);
        self.marks.fetch_sub(tally.reclaimed, Ordering::Relaxed);
        (
            ProbeStats {
                probes: tally.probes,
                ops: n as u64,
                retries: tally.retries,
            },
            tally
                .failed
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect(),
        )
    }

    /// Step 3a of [`CpuTable::upsert`] for one range of new keys (cuckoo schemes): each key whose first insert
    /// step claims a slot in its first bucket takes it here, with two plain stores and no lock; the others are
    /// moved, in order, to the front of `span` and their count returned (the tally has one probe per key and
    /// the added keys). This is the common case (97% of the keys at load 0.8, 90% at 0.9) and the lock's
    /// atomic read-modify-write was a third of an insert's time.
    ///
    /// Sound because ranges own their buckets: a range is a run of whole buckets ([`CpuTable::partition`]),
    /// this pass only writes the first buckets of its range's keys, and nothing else runs meanwhile (no
    /// evictions: those wait for step 3b), so no other thread reads or writes these buckets' words.
    pub(super) fn claim_own<K: Key, V: Value>(
        &self,
        span: &mut [(K, V)],
        params: SchemeParams,
    ) -> (usize, Tally) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present; the buckets read are this range's own (see above), written by no one
            // else.
            return unsafe { self.claim_own_avx512(span, params) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; the buckets read are this range's own (see above), written by no one else.
            return unsafe { self.claim_own_avx2(span, params) };
        }
        self.claim_own_as::<SCALAR, K, V>(span, params)
    }

    /// [`CpuTable::claim_own_as`] compiled for AVX2, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX2, and no other thread accesses the first buckets of `span`'s keys during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn claim_own_avx2<K: Key, V: Value>(
        &self,
        span: &mut [(K, V)],
        params: SchemeParams,
    ) -> (usize, Tally) {
        self.claim_own_as::<AVX2, K, V>(span, params)
    }

    /// [`CpuTable::claim_own_as`] compiled for AVX-512F, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX-512F, and no other thread accesses the first buckets of `span`'s keys during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn claim_own_avx512<K: Key, V: Value>(
        &self,
        span: &mut [(K, V)],
        params: SchemeParams,
    ) -> (usize, Tally) {
        self.claim_own_as::<AVX512, K, V>(span, params)
    }

    /// See [`CpuTable::claim_own`]; `VECTOR`: see [`CpuTable::view_as`].
    #[inline(always)]
    pub(super) fn claim_own_as<const VECTOR: u8, K: Key, V: Value>(
        &self,
        span: &mut [(K, V)],
        params: SchemeParams,
    ) -> (usize, Tally) {
        let mut t = Tally {
            probes: span.len() as u64,
            ..Tally::default()
        };
        let mut deferred = 0;
        for j in 0..span.len() {
            let (k, v) = span[j];
            let key = k.widen();
            let mut state = blank_state();
            S::insert_start(&mut state, key_mix(key));
            let b = self.bucket_of(key, 0);
            let step = if state.hash_index == 0 {
                let view = self.view_as::<VECTOR>(b, key);
                S::insert_step(&mut state, view, params, self.bucket_size)
            } else {
                make_step(action::NEXT, 0, 0)
            };
            if step.action == action::CLAIM && step.target == 0 {
                // The slot is empty: the scheme chose it from the view, and only this thread writes here.
                let i = self.slot(b, step.slot);
                self.store_value(i, v.widen(), Ordering::Relaxed);
                self.keys[i].store(key, Ordering::Relaxed);
                t.added += 1;
            } else {
                span[deferred] = span[j];
                deferred += 1;
            }
        }
        (deferred, t)
    }

    /// Runs `insert` over the items of `spans` in rounds that take the same share of every span, in parallel
    /// over the rounds: an item's turn is independent of its span (its bucket range), as in a random order.
    /// Stable schemes need that: they choose the less loaded of their candidate buckets, and in range order
    /// the ranges not reached yet look empty, so early keys pile into them (simulated P2BHT, B = 16, load
    /// 0.9: 3000 failed inserts per 288K keys in range order against 24 in random order and in rounds).
    pub(super) fn interleaved<T: Sync>(
        &self,
        spans: &[&[T]],
        insert: impl Fn(&mut Tally, &T) + Sync,
    ) -> Tally {
        let rounds = spans.iter().map(|s| s.len()).max().unwrap_or(0);
        // At least CHUNK items per task, as the straight parallel loops have: a small batch then runs on one
        // thread, and concurrent inserts that pick the same less-loaded bucket (P2BHT at B = 8 and load 0.8
        // failed its build in 6 of 180 matrix runs with two threads on 3000 keys) stay out of small tables.
        let items: usize = spans.iter().map(|s| s.len()).sum();
        let per_task = rounds
            .div_ceil(8 * rayon::current_num_threads())
            .max((CHUNK * rounds).div_ceil(items.max(1)))
            .max(1);
        (0..rounds.div_ceil(per_task))
            .into_par_iter()
            .map(|task| {
                let mut t = Tally::default();
                for q in task * per_task..rounds.min((task + 1) * per_task) {
                    for span in spans {
                        let (lo, hi) = (q * span.len() / rounds, (q + 1) * span.len() / rounds);
                        for it in &span[lo..hi] {
                            insert(&mut t, it);
                        }
                    }
                }
                t
            })
            .reduce(Tally::default, Tally::merge)
    }

    /// `log2` of the number of bucket ranges a batch of `n` keys is partitioned into: ranges of about
    /// [`RANGE_BYTES`] of table, at least 4 per thread (load balance), at most one per [`MIN_RANGE_KEYS`] keys.
    pub(super) fn range_bits(&self, n: usize) -> u32 {
        let table_bytes = self.capacity() * 16 + self.num_buckets as usize;
        let wanted = table_bytes
            .div_ceil(RANGE_BYTES)
            .max(4 * rayon::current_num_threads())
            .next_power_of_two();
        let most = (n / MIN_RANGE_KEYS).max(1);
        let most = 1usize << (usize::BITS - 1 - most.leading_zeros()); // a power of two <= n / MIN_RANGE_KEYS
        wanted.min(most).trailing_zeros().min(16)
    }

    /// A stable parallel counting sort of the batch by bucket range: `item(i)` of every position `i`, grouped
    /// by the range of `keys[i]`'s first bucket, and the ranges' start offsets (`ranges + 1` of them).
    pub(super) fn partition<K: Key, T: Copy + Send + Sync>(
        &self,
        keys: &[K],
        item: impl Fn(usize) -> T + Sync,
    ) -> (Buffer<T>, Vec<usize>) {
        let n = keys.len();
        let bits = self.range_bits(n);
        let ranges = 1usize << bits;
        // Monotone in the bucket, so each range is a run of whole buckets: no bucket is first bucket to keys of
        // two ranges (`claim_own` relies on it). `scale` = 2^32 * ranges / buckets, rounded down.
        let scale = ((ranges as u64) << 32) / self.num_buckets as u64;
        let range_of =
            |i: usize| ((self.bucket_of(keys[i].widen(), 0) as u64 * scale) >> 32) as usize;
        // Two chunks per thread: each chunk has a histogram of all ranges, and those are prefix-summed serially.
        let chunk = n.div_ceil(2 * rayon::current_num_threads()).max(CHUNK);
        let chunks = n.div_ceil(chunk);
        // offsets[c * ranges + r]: first a histogram, then where chunk c writes its next item of range r.
        let mut offsets = vec![0usize; chunks * ranges];
        offsets
            .par_chunks_mut(ranges)
            .enumerate()
            .for_each(|(c, hist)| {
                for i in c * chunk..n.min((c + 1) * chunk) {
                    hist[range_of(i)] += 1;
                }
            });
        let mut starts = Vec::with_capacity(ranges + 1);
        let mut at = 0;
        for r in 0..ranges {
            starts.push(at);
            for c in 0..chunks {
                let count = offsets[c * ranges + r];
                offsets[c * ranges + r] = at;
                at += count;
            }
        }
        starts.push(at);
        // SAFETY: the scatter below writes all `n` elements (the spans tile `0..n`) before `out` is read.
        let out: Buffer<T> = unsafe { Buffer::uninit(n) };
        let dst = SharedPtr(out.ptr.as_ptr());
        offsets
            .par_chunks_mut(ranges)
            .enumerate()
            .for_each(|(c, next)| {
                for i in c * chunk..n.min((c + 1) * chunk) {
                    let r = range_of(i);
                    // SAFETY: the prefix sums give each (chunk, range) its own span of `0..n`, sized by the
                    // histogram of the same positions, so every index is written once, by one thread.
                    unsafe { dst.write(next[r], item(i)) };
                    next[r] += 1;
                }
            });
        (out, starts)
    }

    /// Settles one range of a partitioned batch (step 2 of [`CpuTable::upsert`]): keeps the last occurrence of
    /// each key, then looks each kept key up when the table holds anything (`stored`); `found(slot, item)` is
    /// called for stored keys, the others are gathered in input order into `items[a..b]`, which is returned
    /// with the probes of the successful lookups (they are the updates' bucket reads).
    ///
    /// No thread may write key words meanwhile (`found` may write values): the lookups are
    /// [`CpuTable::lookups`].
    pub(super) fn settle_range<T: Copy>(
        &self,
        items: &mut [T],
        stored: bool,
        key: impl Fn(&T) -> u64,
        found: impl Fn(usize, &T),
    ) -> (usize, usize, u64) {
        let first = dedup_keep_last(items, &key);
        if !stored {
            return (first, items.len(), 0);
        }
        // Cells: the pipeline reads keys ahead while the answers compact the new keys behind it (never past
        // the position being answered).
        let kept = Cell::from_mut(&mut items[first..]).as_slice_of_cells();
        let (mut probes, mut end) = (0u64, 0usize);
        self.lookups(
            kept.len(),
            |i| key(&kept[i].get()),
            |i, slot, p| {
                let it = kept[i].get();
                match slot {
                    Some(slot) => {
                        found(slot, &it);
                        probes += p as u64;
                    }
                    None => {
                        kept[end].set(it);
                        end += 1;
                    }
                }
            },
        );
        (first, first + end, probes)
    }

    /// Counts the distinct keys of a batch that are not stored (the capacity check near a full table).
    pub fn count_new<K: Key>(&self, keys: &[K]) -> usize {
        if keys.is_empty() {
            return 0;
        }
        let (mut sorted, starts) = self.partition(keys, |i| keys[i]);
        let stored = !self.is_empty();
        split_ranges(&mut sorted, &starts)
            .into_par_iter()
            .with_max_len(1)
            .map(|r| {
                let (a, b, _) = self.settle_range(r, stored, |k| k.widen(), |_, _| {});
                b - a
            })
            .sum()
    }
}
