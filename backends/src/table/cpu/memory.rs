//! The slot words (empty and erased keys), the tuning constants, and host memory for the big, randomly accessed arrays: huge-page buffers, a pointer rayon tasks share, cache
//! prefetches, and the AVX2 / AVX-512 bucket compares.

use crate::runtime::host_memory::advise_huge_pages;
use rayon::prelude::*;
use std::alloc::Layout;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// The empty key word.
pub const EMPTY_KEY: u64 = u64::MAX;
/// The key word of an erased slot (`CpuTable::erase_stored`): never a 32-bit key, and neither empty nor a
/// match for any key, so lookups probe past it and inserts do not claim it (the slot stays taken until the
/// next rebuild).
pub const ERASED_KEY: u64 = u64::MAX - 1;

/// How a bucket is read (`view_as`'s `VECTOR`): one atomic load per slot, ...
pub(super) const SCALAR: u8 = 0;
/// ... four slots per AVX2 comparison, ...
pub(super) const AVX2: u8 = 1;
/// ... or eight per AVX-512F comparison.
pub(super) const AVX512: u8 = 2;

/// Table bytes (keys, values, locks) per bucket range of the parallel upsert's partition. A range's buckets
/// and its share of the batch then fit in one core's L2 (1 MB per core on the 2-core EPYC this was tuned on)
/// beside the dedup scratch.
pub(super) const RANGE_BYTES: usize = 256 << 10;
/// Fewest batch keys per range worth a range of its own: below this, per-range overhead outweighs locality.
pub(super) const MIN_RANGE_KEYS: usize = 1024;
/// Keys per rayon task of the straight parallel loops.
pub(super) const CHUNK: usize = 4096;
/// Keys between the stages of a pipelined lookup ([`CpuTable::lookups`]): enough misses in flight to cover
/// the memory latency, few enough that the lines are still in L1 when the key's turn comes.
pub(super) const LOOKUP_LAG: usize = 8;

/// Arrays at least this large are aligned to, and advised for, transparent huge pages (2 MiB on x86-64).
pub(super) use crate::runtime::host_memory::HUGE_PAGE;

/// A heap array of `len` elements for the big, randomly accessed arrays (table words, a partitioned batch).
/// Aligned to 128 bytes, so a bucket (a power of two of slots) never straddles more cache lines than its size
/// needs (16 keys: 2 lines, not 3 as at malloc's 16-byte alignment); from 2 MiB on, aligned to and advised
/// for huge pages: random reads then stop missing the TLB (4 KiB pages gave a page walk per key on a table of
/// tens of MB), and allocating a table takes a few faults instead of one per 4 KiB.
///
/// Elements are never dropped (checked at compile time: `T` has no drop glue).
pub(super) struct Buffer<T> {
    pub(super) ptr: NonNull<T>,
    pub(super) len: usize,
    pub(super) layout: Layout,
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
    pub(super) unsafe fn uninit(len: usize) -> Self {
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
    pub(super) fn filled(len: usize, make: impl Fn() -> T + Sync) -> Self
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

/// Hints the CPU to fetch the cache line at `p` into L1 (a no-op off x86-64).
#[inline(always)]
pub(super) fn prefetch(p: *const AtomicU64) {
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
pub(super) unsafe fn masks_avx2(p: *const u64, slots: usize, key: u64) -> (u32, u32) {
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
pub(super) unsafe fn masks_avx512(p: *const u64, slots: usize, key: u64) -> (u32, u32) {
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
pub(super) struct SharedPtr<T>(pub(super) *mut T);
// SAFETY: only used to write disjoint, in-bounds elements from different threads (see `CpuTable::partition`).
unsafe impl<T: Send> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedPtr<T> {}
impl<T> SharedPtr<T> {
    /// Writes element `i`.
    ///
    /// # Safety
    /// `i` is in bounds of the allocation and no other thread reads or writes element `i` meanwhile.
    pub(super) unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: upheld by the caller.
        unsafe { self.0.add(i).write(v) }
    }
}
