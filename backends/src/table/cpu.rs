//! The CPU backend: plain Rust, multi-threaded with rayon, always available.
//!
//! It runs the very same scheme step functions as the GPU tile driver (they are `#[cube]` functions written in
//! plain integer arithmetic, so they are ordinary Rust functions on the host) with the same hash family and
//! the same bucket layout, so a table built here places keys by the same rules as on a GPU.
//!
//! Storage is widened: keys and values are `u64` words in two arrays (`u64::MAX` = empty key), which serves
//! 32- and 64-bit elements alike. Each bucket has a spin lock; a step's memory action (claim, evict, update)
//! runs under the lock of the bucket it touches, and a claim re-checks that its slot is still empty, which gives
//! it compare-and-swap semantics. (Passes of a parallel upsert in which each bucket has a single writer skip
//! the locks: see [`CpuTable::upsert`].) In **deterministic** mode operations run one at a time, in input order, on
//! the calling thread: the placement and the probe counts are then exactly reproducible.
//!
//! The parallel paths were bound by cache misses: a random key cost a bucket of keys, a value and a lock word,
//! each in a different array, one miss after another. Parallel upserts therefore sort the batch by bucket range
//! first ([`CpuTable::upsert`]) so that each thread works inside a slice of the table that its L2 holds (and
//! claims the slots of that slice without locks), and finds run a software pipeline that prefetches the
//! buckets of the keys a few positions ahead ([`CpuTable::lookups`]), reading buckets with AVX2 / AVX-512
//! compares where the CPU has them. Large arrays sit on transparent huge pages ([`Buffer`]).

use hashtile_core::hash::{
    self, MAX_HASHES, bucket_index, hash_key, hash_key32, overflow_bucket, seed_mix,
};
use hashtile_core::scheme::{
    BucketView, NO_NEXT, ProbeState, ProbingScheme, SchemeInfo, SchemeParams, action, blank_state,
    make_step,
};
use hashtile_core::{HashFamily, Key, ProbeStats, Value};
use rayon::prelude::*;
use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The empty key word.
pub const EMPTY_KEY: u64 = u64::MAX;
/// The key word of an erased slot ([`CpuTable::erase_stored`]): never a 32-bit key, and neither empty nor a
/// match for any key, so lookups probe past it and inserts do not claim it (the slot stays taken until the
/// next rebuild).
pub const ERASED_KEY: u64 = u64::MAX - 1;

/// How a bucket is read (`view_as`'s `VECTOR`): one atomic load per slot, ...
const SCALAR: u8 = 0;
/// ... four slots per AVX2 comparison, ...
const AVX2: u8 = 1;
/// ... or eight per AVX-512F comparison.
const AVX512: u8 = 2;

/// Table bytes (keys, values, locks) per bucket range of the parallel upsert's partition. A range's buckets
/// and its share of the batch then fit in one core's L2 (1 MB per core on the 2-core EPYC this was tuned on)
/// beside the dedup scratch.
const RANGE_BYTES: usize = 256 << 10;
/// Fewest batch keys per range worth a range of its own: below this, per-range overhead outweighs locality.
const MIN_RANGE_KEYS: usize = 1024;
/// Keys per rayon task of the straight parallel loops.
const CHUNK: usize = 4096;
/// Keys between the stages of a pipelined lookup ([`CpuTable::lookups`]): enough misses in flight to cover
/// the memory latency, few enough that the lines are still in L1 when the key's turn comes.
const LOOKUP_LAG: usize = 8;

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

/// What a run of inserts did. Each rayon task keeps its own and they are merged at the end: a shared
/// `len.fetch_add` per key was one contended cache line bounced between the cores on every insert.
#[derive(Debug, Default)]
struct Tally {
    probes: u64,
    /// Of `probes`, bucket re-reads the parallel protocol caused (see [`CpuTable::claim_own`]).
    retries: u64,
    added: usize,
    failed: Vec<(u64, u64)>,
}

impl Tally {
    fn record(&mut self, o: InsertOutcome) {
        match o {
            InsertOutcome::Added => self.added += 1,
            InsertOutcome::Updated => {}
            InsertOutcome::Failed(k, v) => self.failed.push((k, v)),
        }
    }
    fn merge(mut self, mut other: Tally) -> Tally {
        self.probes += other.probes;
        self.retries += other.retries;
        self.added += other.added;
        self.failed.append(&mut other.failed);
        self
    }
}

/// Arrays at least this large are aligned to, and advised for, transparent huge pages (2 MiB on x86-64).
const HUGE_PAGE: usize = 2 << 20;

/// A heap array of `len` elements for the big, randomly accessed arrays (table words, a partitioned batch).
/// Aligned to 128 bytes, so a bucket (a power of two of slots) never straddles more cache lines than its size
/// needs (16 keys: 2 lines, not 3 as at malloc's 16-byte alignment); from 2 MiB on, aligned to and advised
/// for huge pages: random reads then stop missing the TLB (4 KiB pages gave a page walk per key on a table of
/// tens of MB), and allocating a table takes a few faults instead of one per 4 KiB.
///
/// Elements are never dropped (checked at compile time: `T` has no drop glue).
struct Buffer<T> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
}

// SAFETY: a `Buffer<T>` owns its elements like a `Box<[T]>`.
unsafe impl<T: Send> Send for Buffer<T> {}
// SAFETY: as above; shared access hands out `&[T]` only.
unsafe impl<T: Sync> Sync for Buffer<T> {}

impl<T> Buffer<T> {
    /// Storage for `len` elements, not initialised.
    ///
    /// # Safety
    /// Every element must be written (through `as_mut_ptr`) before the buffer is dereferenced.
    unsafe fn uninit(len: usize) -> Self {
        const { assert!(!std::mem::needs_drop::<T>()) };
        let bytes = len
            .checked_mul(size_of::<T>())
            .and_then(|b| b.checked_next_multiple_of(128))
            .expect("array too large");
        if bytes == 0 {
            // Nothing to allocate; `Drop` skips zero-sized layouts.
            return Self {
                ptr: NonNull::dangling(),
                len,
                layout: Layout::new::<()>(),
            };
        }
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { 128 }.max(align_of::<T>());
        let layout = Layout::from_size_align(bytes, align).expect("array too large");
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        if align == HUGE_PAGE {
            advise_huge_pages(raw, bytes);
        }
        Self { ptr, len, layout }
    }

    /// `len` elements `make()`, written in parallel (a sequential fill of a large table took longer than
    /// inserting into it).
    fn filled(len: usize, make: impl Fn() -> T + Sync) -> Self
    where
        T: Send,
    {
        // SAFETY: every element is written below, before the buffer is handed out.
        let b = unsafe { Self::uninit(len) };
        let dst = SharedPtr(b.ptr.as_ptr());
        (0..len.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
            for i in c * CHUNK..len.min((c + 1) * CHUNK) {
                // SAFETY: `i < len`, and each index belongs to one chunk.
                unsafe { dst.write(i, make()) };
            }
        });
        b
    }
}

impl<T> Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is valid for `len` initialised elements (the `uninit` contract) for as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for Buffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        if self.layout.size() != 0 {
            // SAFETY: allocated in `uninit` with this layout (elements have no drop glue).
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), self.layout) }
        }
    }
}

/// Asks Linux to back `[p, p + bytes)` (2 MiB aligned) with transparent huge pages; hosts whose THP setting is
/// `madvise` (the default on many distributions) only use them where asked. A hint: failure changes nothing.
#[cfg(target_os = "linux")]
fn advise_huge_pages(p: *mut u8, bytes: usize) {
    use std::ffi::{c_int, c_void};
    // From the C library std already links against (the `libc` crate is not a dependency of this crate).
    unsafe extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }
    const MADV_HUGEPAGE: c_int = 14;
    // SAFETY: `p` is page aligned and `[p, p + bytes)` is one allocation of ours; the advice changes no
    // contents.
    unsafe {
        madvise(p.cast(), bytes, MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_p: *mut u8, _bytes: usize) {}

/// One key's lookup in flight (see [`CpuTable::lookups`]).
#[derive(Clone, Copy)]
struct Lookup {
    key: u64,
    state: ProbeState,
    /// The bucket the next step reads.
    bucket: u32,
    /// The key's slot once found, else [`NO_SLOT`] (slot indices are below 2^32 - 1: `TableConfig` checks).
    slot: u32,
    done: bool,
    probes: u8,
}

/// [`Lookup::slot`] of a key not found (yet).
const NO_SLOT: u32 = u32::MAX;

impl Lookup {
    /// A finished lookup with no answer (fills the pipeline's ring).
    const IDLE: Lookup = Lookup {
        key: 0,
        state: ProbeState {
            hash_index: 0,
            phase: 0,
            evictions: 0,
            rng: 1,
            aux: 0,
            aux2: 0,
        },
        bucket: 0,
        slot: NO_SLOT,
        done: true,
        probes: 0,
    };
    fn slot(&self) -> Option<usize> {
        (self.slot != NO_SLOT).then_some(self.slot as usize)
    }
}

/// A hash table in host memory, driven by scheme `S`.
pub struct CpuTable<S: ProbingScheme> {
    keys: Buffer<AtomicU64>,
    values: Buffer<AtomicU64>,
    locks: Box<[AtomicBool]>,
    num_buckets: u32,
    bucket_size: u32,
    family: HashFamily,
    /// `seed_mix` of each seed of `family`: hashing a key whose high word is 0 then skips one `fmix32`.
    seed_mixes: [u32; MAX_HASHES],
    params: SchemeParams,
    len: AtomicUsize,
    _scheme: PhantomData<S>,
}

/// Mixes a key into the seed of its eviction randomness (`hash::key_mix`, as the GPU layouts do).
pub fn key_mix(key: u64) -> u32 {
    hash::key_mix(key as u32, (key >> 32) as u32)
}

/// Hints the CPU to fetch the cache line at `p` into L1 (a no-op off x86-64).
#[inline(always)]
fn prefetch(p: *const AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and does not access memory as far as the program can see.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The empty and matching slots of the `slots` keys at `p` (a multiple of 4), four per comparison.
///
/// # Safety
/// Only code compiled for AVX2 may call it (it is inlined into such a function); `p` is 32-byte aligned and
/// valid for `slots` words that no thread writes meanwhile.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn masks_avx2(p: *const u64, slots: usize, key: u64) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract (AVX2 present; `p..p + slots` aligned, valid and not written).
    unsafe {
        let want = _mm256_set1_epi64x(key as i64);
        let none = _mm256_set1_epi64x(EMPTY_KEY as i64);
        let (mut empty, mut matched) = (0u32, 0u32);
        for g in (0..slots).step_by(4) {
            let w = _mm256_load_si256(p.add(g).cast());
            let e = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(w, none)));
            let m = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(w, want)));
            empty |= (e as u32) << g;
            matched |= (m as u32) << g;
        }
        (empty, matched)
    }
}

/// [`masks_avx2`] eight slots per comparison, for code compiled for AVX-512F; `p` 64-byte aligned, `slots` a
/// multiple of 8.
///
/// # Safety
/// As for [`masks_avx2`], with AVX-512F and 64-byte alignment.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn masks_avx512(p: *const u64, slots: usize, key: u64) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    unsafe {
        let want = _mm512_set1_epi64(key as i64);
        let none = _mm512_set1_epi64(EMPTY_KEY as i64);
        let (mut empty, mut matched) = (0u32, 0u32);
        for g in (0..slots).step_by(8) {
            let w = _mm512_load_si512(p.add(g).cast());
            empty |= (_mm512_cmpeq_epi64_mask(w, none) as u32) << g;
            matched |= (_mm512_cmpeq_epi64_mask(w, want) as u32) << g;
        }
        (empty, matched)
    }
}

/// A raw pointer that rayon tasks may share: the parallel scatter writes disjoint elements through it.
struct SharedPtr<T>(*mut T);
// SAFETY: only used to write disjoint, in-bounds elements from different threads (see `CpuTable::partition`).
unsafe impl<T: Send> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedPtr<T> {}
impl<T> SharedPtr<T> {
    /// Writes element `i`.
    ///
    /// # Safety
    /// `i` is in bounds of the allocation and no other thread reads or writes element `i` meanwhile.
    unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: upheld by the caller.
        unsafe { self.0.add(i).write(v) }
    }
}

thread_local! {
    /// The dedup set of [`dedup_keep_last`], reused across ranges and calls (it is cleared per range, within
    /// the cache-sized bounds of a range).
    static DEDUP: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Moves the last occurrence of each key of `items` (by `key`) to the end of `items`, in input order, and
/// returns where they start: `items[first..]` are the kept items. An open-addressing set, scanned from the
/// back: the first time a key is seen there is its last occurrence.
fn dedup_keep_last<T: Copy>(items: &mut [T], key: impl Fn(&T) -> u64) -> usize {
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
fn split_ranges<'a, T>(mut items: &'a mut [T], starts: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(starts.len().saturating_sub(1));
    for w in starts.windows(2) {
        let (head, tail) = std::mem::take(&mut items).split_at_mut(w[1] - w[0]);
        out.push(head);
        items = tail;
    }
    out
}

impl<S: SchemeInfo> CpuTable<S> {
    /// An empty table of `num_buckets` buckets of `bucket_size` slots.
    pub fn new(
        num_buckets: u32,
        bucket_size: u32,
        family: HashFamily,
        params: SchemeParams,
    ) -> Self {
        let slots = num_buckets as usize * bucket_size as usize;
        Self {
            keys: Buffer::filled(slots, || AtomicU64::new(EMPTY_KEY)),
            values: Buffer::filled(slots, || AtomicU64::new(0)),
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
            _scheme: PhantomData,
        }
    }

    /// An empty table of the same shape with hash family `family`. [`CpuTable::clear_with`] does the same in
    /// place, without allocating and first-touching a whole new table.
    pub fn emptied(&self, family: HashFamily) -> Self {
        Self::new(self.num_buckets, self.bucket_size, family, self.params)
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
    /// The hash family in use.
    pub fn family(&self) -> HashFamily {
        self.family
    }

    /// `hash_key` of `key` under function `i`, by its cheaper form for keys whose high word is 0 (all 32-bit
    /// keys): the same value.
    #[inline(always)]
    fn hash_of(&self, key: u64, i: u32) -> u32 {
        let (lo, hi) = (key as u32, (key >> 32) as u32);
        let i = i as usize;
        if hi == 0 {
            hash_key32(lo, self.family.seeds[i], self.seed_mixes[i])
        } else {
            hash_key(lo, hi, self.family.seeds[i])
        }
    }

    /// The bucket of `key` under hash index `i`: the family's function `i`, or past the family's functions the
    /// key's overflow sequence (only schemes with `ProbingScheme::OVERFLOW` ask for those).
    #[inline(always)]
    fn bucket_of(&self, key: u64, i: u32) -> u32 {
        if S::OVERFLOW && i as usize >= MAX_HASHES {
            let last = MAX_HASHES as u32 - 1;
            overflow_bucket(
                self.bucket_of(key, last),
                key_mix(key),
                i - last,
                self.num_buckets,
            )
        } else {
            bucket_index(self.hash_of(key, i), self.num_buckets)
        }
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

    /// Reads bucket `b` for `key`, one atomic load per slot (other threads may be claiming and evicting).
    fn view(&self, b: u32, key: u64) -> BucketView {
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
    fn view_as<const VECTOR: u8>(&self, b: u32, key: u64) -> BucketView {
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

    fn slot(&self, b: u32, s: u32) -> usize {
        b as usize * self.bucket_size as usize + s as usize
    }

    /// Prefetches the key lines of bucket `b`.
    #[inline(always)]
    fn prefetch_keys(&self, b: u32) {
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
    fn insert_one(&self, key: u64, value: u64, probes: &mut u64) -> InsertOutcome {
        self.insert_one_with(key, value, self.params, probes)
    }

    /// Inserts one pair with `params` (the upsert flag may differ from the table's); adds the bucket reads
    /// to `probes`. The caller adds `Added` outcomes to `len` (see [`Tally`]).
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

    /// Starts looking up `key`: its first bucket named, nothing read yet.
    #[inline(always)]
    fn lookup_start(&self, key: u64) -> Lookup {
        let mut state = blank_state();
        S::find_start(&mut state);
        Lookup {
            key,
            state,
            bucket: self.bucket_of(key, state.hash_index),
            slot: NO_SLOT,
            // The sentinel (all ones, the empty key word) is never stored: absent without a probe (a bucket
            // read would match its empty slots).
            done: key == EMPTY_KEY,
            probes: 0,
        }
    }

    /// Reads the bucket a lookup names and takes the scheme's find step (one probe). `VECTOR`: see
    /// [`CpuTable::view_as`].
    #[inline(always)]
    fn lookup_step<const VECTOR: u8>(&self, l: &mut Lookup) {
        let view = self.view_as::<VECTOR>(l.bucket, l.key);
        l.probes += 1;
        let step = S::find_step(&mut l.state, view, self.params, self.bucket_size);
        match step.action {
            action::NEXT => l.bucket = self.bucket_of(l.key, l.state.hash_index),
            action::FOUND => {
                l.slot = self.slot(l.bucket, step.slot) as u32;
                l.done = true;
            }
            action::ABSENT => l.done = true,
            other => unreachable!("find step returned action {other}"),
        }
    }

    /// A middle stage of [`CpuTable::lookups`]: one step of a lookup still going, then a prefetch of what it
    /// needs next. (A method, not a closure: closures are not compiled for AVX2 with their caller.)
    #[inline(always)]
    fn lookup_advance<const VECTOR: u8>(&self, l: &mut Lookup) {
        if !l.done {
            self.lookup_step::<VECTOR>(l);
            if !l.done {
                self.prefetch_keys(l.bucket);
            } else if l.slot != NO_SLOT {
                prefetch(self.values.as_ptr().wrapping_add(l.slot as usize));
            }
        }
    }

    /// Looks up one key: the index of its slot. Adds the bucket reads to `probes`.
    fn find_slot(&self, key: u64, probes: &mut u64) -> Option<usize> {
        let mut l = self.lookup_start(key);
        while !l.done {
            self.lookup_step::<SCALAR>(&mut l);
        }
        *probes += l.probes as u64;
        l.slot()
    }

    /// Looks up one key; adds the bucket reads to `probes`.
    fn find_one(&self, key: u64, probes: &mut u64) -> Option<u64> {
        self.find_slot(key, probes)
            .map(|i| self.values[i].load(Ordering::Acquire))
    }

    /// Looks up the keys `key_at(0..n)` in order, handing `(position, slot, probes)` of each to `emit`: the
    /// same answers and bucket reads as `find_slot` key by key, software-pipelined so that the cache misses of
    /// neighbouring keys overlap instead of queueing one after another. Three stages, [`LOOKUP_LAG`] keys
    /// apart: (1) hash the key and prefetch its first bucket; (2) read that bucket (in cache by now) and take
    /// one find step, then prefetch what the key needs next (its value line if found, its next bucket if
    /// not); (3) take a second step if needed, prefetching likewise; (4) finish the lookup (rarely more reads)
    /// and emit. Absent keys in full first buckets (common near load 0.9) then wait for no miss either.
    ///
    /// No thread may write key words meanwhile (the caller holds `&self`, or is the settle pass of an upsert):
    /// the buckets are read with vector loads where the CPU has AVX2 (see [`CpuTable::view_as`]).
    fn lookups(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present; the quiet keys are this function's contract.
            return unsafe { self.lookups_avx512(n, key_at, emit) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; the quiet keys are this function's contract.
            return unsafe { self.lookups_avx2(n, key_at, emit) };
        }
        self.lookups_as::<SCALAR>(n, key_at, emit)
    }

    /// [`CpuTable::lookups_as`] compiled for AVX2, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX2, and no thread writes key words during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn lookups_avx2(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        self.lookups_as::<AVX2>(n, key_at, emit)
    }

    /// [`CpuTable::lookups_as`] compiled for AVX-512F, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX-512F, and no thread writes key words during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn lookups_avx512(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        self.lookups_as::<AVX512>(n, key_at, emit)
    }

    /// The lookup pipeline of [`CpuTable::lookups`]; `VECTOR`: see [`CpuTable::view_as`].
    #[inline(always)]
    fn lookups_as<const VECTOR: u8>(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        mut emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        const LAG: usize = LOOKUP_LAG;
        // A power of two above the 3 * LAG keys in flight.
        const RING: usize = (3 * LAG + 1).next_power_of_two();
        let mut ring = [Lookup::IDLE; RING];
        for i in 0..n + 3 * LAG {
            // Positions before 0 wrap to huge numbers and fail the `< n` tests.
            let last = i.wrapping_sub(3 * LAG);
            if last < n {
                // The last stage first: it frees the ring entry the first stage refills.
                let l = &mut ring[last % RING];
                while !l.done {
                    self.lookup_step::<VECTOR>(l);
                }
                emit(last, l.slot(), l.probes as u32);
            }
            let second = i.wrapping_sub(2 * LAG);
            if second < n {
                self.lookup_advance::<VECTOR>(&mut ring[second % RING]);
            }
            let first = i.wrapping_sub(LAG);
            if first < n {
                self.lookup_advance::<VECTOR>(&mut ring[first % RING]);
            }
            if i < n {
                let l = self.lookup_start(key_at(i));
                self.prefetch_keys(l.bucket);
                ring[i % RING] = l;
            }
        }
    }

    /// Looks up `keys` in order (pipelined, see [`CpuTable::lookups`]), handing `(position, answer)` to
    /// `emit`; adds the bucket reads to `probes`.
    fn find_run<K: Key>(
        &self,
        keys: &[K],
        probes: &mut u64,
        mut emit: impl FnMut(usize, Option<u64>),
    ) {
        self.lookups(
            keys.len(),
            |i| keys[i].widen(),
            |i, slot, p| {
                *probes += p as u64;
                emit(i, slot.map(|s| self.values[s].load(Ordering::Acquire)));
            },
        );
    }

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
        (
            ProbeStats {
                probes: tally.probes,
                ops: pairs.len() as u64,
                retries: 0,
            },
            tally.failed,
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
            self.find_run(ks, &mut probes, |i, r| os[i] = r);
            probes
        };
        let probes = if deterministic {
            run((keys, out))
        } else {
            keys.par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
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
    /// itself. The parallel mode settles them before it moves anything, as the GPU host path does
    /// (`gpu::upsert`): in one concurrent pass, an update could search while another thread's cuckoo eviction
    /// carries its key in flight, miss it, and store the key a second time. So, with a barrier (the end of a
    /// rayon pass) after each step:
    ///
    /// 1. **Partition** ([`CpuTable::partition`]): a stable parallel counting sort of the pairs by the range of
    ///    buckets (a run of whole buckets, sized for L2) their first bucket falls in. Every occurrence of a
    ///    key lands in one range, in input order.
    /// 2. **Settle and update**, per range in parallel ([`CpuTable::settle_range`]): the last occurrence of each
    ///    key is kept (a small set that stays in cache); each kept key is looked up, and a stored one gets its
    ///    new value there and then. This is the update pass, merged with the plan's lookup: nothing moves during
    ///    it (no claims, no evictions), so a lookup cannot miss a stored key, and each value slot is written by
    ///    the one thread owning its key's range. What is left per range are the new keys: distinct and absent.
    /// 3. **New keys**, after every update, without the duplicate check (`upsert = 0`). Cuckoo schemes:
    ///    (a) per range in parallel, each key whose first bucket has room claims it without a lock (the range
    ///    owns those buckets, [`CpuTable::claim_own`]); (b) then the rest, per range in parallel, the general
    ///    way (locks, evictions). Stable schemes: all of them in rounds across the ranges
    ///    ([`CpuTable::interleaved`]), because their bucket choices are sensitive to the order.
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
                            |slot, &(_, v)| self.values[slot].store(v.widen(), Ordering::Release),
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
    fn claim_own<K: Key, V: Value>(
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
    fn claim_own_as<const VECTOR: u8, K: Key, V: Value>(
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
                self.values[i].store(v.widen(), Ordering::Relaxed);
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
    fn interleaved<T: Sync>(
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
    fn range_bits(&self, n: usize) -> u32 {
        let table_bytes = self.capacity() * 16 + self.num_buckets as usize;
        let wanted = table_bytes
            .div_ceil(
                std::env::var("HT_RB")
                    .ok()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(RANGE_BYTES),
            )
            .max(4 * rayon::current_num_threads())
            .next_power_of_two();
        let most = (n / MIN_RANGE_KEYS).max(1);
        let most = 1usize << (usize::BITS - 1 - most.leading_zeros()); // a power of two <= n / MIN_RANGE_KEYS
        wanted.min(most).trailing_zeros().min(16)
    }

    /// A stable parallel counting sort of the batch by bucket range: `item(i)` of every position `i`, grouped
    /// by the range of `keys[i]`'s first bucket, and the ranges' start offsets (`ranges + 1` of them).
    fn partition<K: Key, T: Copy + Send + Sync>(
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
    fn settle_range<T: Copy>(
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
            self.find_run(ks, &mut probes, |i, r| {
                os[i] = r.map_or(V::ABSENT, V::narrow)
            });
            probes
        };
        let probes = if deterministic {
            run((keys, &mut *out))
        } else {
            keys.par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .map(run)
                .sum()
        };
        if let Some(bits) = found {
            // Absent keys read V::ABSENT; only those need a second look (a stored all-ones value).
            let out = &*out;
            crate::results::bits_from(bits, n, |i| {
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
                (k != EMPTY_KEY && k != ERASED_KEY).then(|| (k, v.load(Ordering::Acquire)))
            })
            .collect()
    }

    /// Tombstone erase (stable schemes, 32-bit keys: [`ERASED_KEY`] is then never a key): marks the slot of
    /// each stored key of `keys` erased and returns how many were. The slots stay taken until the next rebuild.
    pub fn erase_stored(&self, keys: &[u64]) -> usize {
        debug_assert!(
            S::STABLE,
            "erased slots of a moving scheme could be evicted into"
        );
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
        erased
    }

    /// Removes every pair.
    pub fn clear(&mut self) {
        self.keys
            .par_iter()
            .with_min_len(1 << 14)
            .for_each(|k| k.store(EMPTY_KEY, Ordering::Relaxed));
        self.len.store(0, Ordering::Relaxed);
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

struct BucketGuard<'a>(&'a AtomicBool);
impl Drop for BucketGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
