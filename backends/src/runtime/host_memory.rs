//! Host memory of the host calls: page-locked memory ([`PinnedAlloc`], from a runtime's
//! `HostTransfer::alloc_pinned`) and the buffer users fill and pass as a slice ([`PinnedBuffer`]), which the
//! host calls copy at the full bus rate; huge-page advice for large arrays (`advise_huge_pages`, also the CPU
//! table's), the fresh answer vectors the host calls return (`answer_vec`, `zeroed_answers`) and room in the
//! caller's reused ones (`answer_room`).

use hashtile_core::{Element, Error, Result};

/// Page-locked host memory (freed with the runtime's own call on drop).
pub struct PinnedAlloc {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    /// Context word the free function needs (CUDA: the context to make current).
    pub(crate) ctx: usize,
    pub(crate) free: unsafe fn(*mut u8, usize),
}

// SAFETY: the allocation is plain host memory owned by this value; access goes through &/&mut borrows.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from the allocator `free` belongs to and is freed once.
        unsafe { (self.free)(self.ptr, self.ctx) }
    }
}

/// A host buffer of `T` in page-locked (pinned) memory when the backend has it (CUDA), so that the host API
/// moves it at the full bus rate (about 6x a `Vec` on an H100). Use it like a slice:
/// `table.insert(&keys[..], &values[..])` detects pinned memory by itself.
pub struct PinnedBuffer<T: Copy + Default> {
    pinned: Option<PinnedAlloc>,
    fallback: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> PinnedBuffer<T> {
    /// `len` default elements in pinned memory from `alloc` (ordinary memory when `alloc` is `None`).
    pub(crate) fn from_alloc(alloc: Option<PinnedAlloc>, len: usize) -> Self {
        match alloc {
            Some(a) => {
                debug_assert!(a.len >= len * size_of::<T>());
                debug_assert_eq!(a.ptr as usize % align_of::<T>(), 0);
                let mut b = Self {
                    pinned: Some(a),
                    fallback: Vec::new(),
                    len,
                };
                b.fill(T::default());
                b
            }
            None => Self {
                pinned: None,
                fallback: vec![T::default(); len],
                len,
            },
        }
    }
    /// `true` when the memory really is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }
}

impl<T: Copy + Default> std::ops::Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.pinned {
            // SAFETY: the allocation holds `len` initialised `T`s (filled on creation), aligned (page-aligned).
            Some(a) => unsafe { std::slice::from_raw_parts(a.ptr as *const T, self.len) },
            None => &self.fallback,
        }
    }
}

impl<T: Copy + Default> std::ops::DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.pinned {
            // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
            Some(a) => unsafe { std::slice::from_raw_parts_mut(a.ptr as *mut T, self.len) },
            None => &mut self.fallback,
        }
    }
}

/// Transparent huge pages are this large (x86-64).
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Asks Linux to back the 2 MiB-aligned part of `[p, p + bytes)` with transparent huge pages; hosts whose THP
/// setting is `madvise` (the default on many distributions) only use them where asked. A hint: failure changes
/// nothing.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge_pages(p: *mut u8, bytes: usize) {
    use std::ffi::{c_int, c_void};
    // From the C library std already links against (the `libc` crate is not a dependency of this crate).
    unsafe extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }
    const MADV_HUGEPAGE: c_int = 14;
    let (start, end) = (p as usize, p as usize + bytes);
    let (first, last) = (
        start.next_multiple_of(HUGE_PAGE),
        end / HUGE_PAGE * HUGE_PAGE,
    );
    if last > first {
        // SAFETY: `[first, last)` is page aligned and lies inside one allocation of the caller's; the advice
        // changes no contents.
        unsafe {
            madvise(first as *mut c_void, last - first, MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_pages(_p: *mut u8, _bytes: usize) {}

/// Answers at least this large are advised for huge pages (smaller ones would only split the allocator's
/// mappings).
const ADVISED_ANSWER: usize = 2 * HUGE_PAGE;

/// An empty vector with room for `n` answers, advised for huge pages when large. A host call's answers (an
/// `Option`, a count or an offset per key) are fresh memory the caller keeps, and touching it for the first time
/// at 4 KiB pages costs more than writing it: a fault per page (128 MB of answers took 50 ms to touch on 2 cores,
/// against 12 ms with huge pages and 15 ms to write the same bytes once touched).
pub(crate) fn answer_vec<T>(n: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    let bytes = n * size_of::<T>();
    if bytes >= ADVISED_ANSWER {
        advise_huge_pages(v.as_mut_ptr().cast(), bytes);
    }
    v
}

/// Makes room for `extra` more answers after those `v` holds (which stay): none is made when `v`'s allocation
/// suffices (the caller's answer vectors are reused between calls, so their memory is touched already); an
/// empty `v` that is too small gets a fresh [`answer_vec`] (its old allocation freed first, so the peak is one
/// answer, not two); a non-empty one (a later device batch's answers after the earlier ones) grows as
/// `Vec::reserve` grows it, its new room advised for huge pages as [`answer_vec`]'s.
/// Returns whether the room is fresh (never touched: its first write faults its pages in; see [`Prefault`]).
pub(crate) fn answer_room<T>(v: &mut Vec<T>, extra: usize) -> bool {
    if v.capacity() - v.len() >= extra {
        return false;
    }
    if v.is_empty() {
        *v = Vec::new();
        *v = answer_vec(extra);
        return true;
    }
    v.reserve(extra);
    let spare = v.spare_capacity_mut();
    let bytes = size_of_val(spare);
    if bytes >= ADVISED_ANSWER {
        advise_huge_pages(spare.as_mut_ptr().cast(), bytes);
    }
    true
}

/// Fresh answers smaller than this are faulted in by the writes that fill them (a thread costs more).
const PREFAULTED_ANSWER: usize = 16 << 20;

/// Bytes of fresh memory one prefault thread takes at least.
const PREFAULT_SHARE: usize = 16 << 20;

/// Fresh answer memory faulted in on background threads while a host call's keys travel to the device; dropping
/// it waits for them. The downloads that fill a fresh answer write it piece by piece as pieces leave their
/// staging buffers, so only a few pages fault at once: on an H100 host, a fresh 128 MiB of offsets took 7.4
/// ms to fill against 3.2 ms once touched, while 8 threads fault the same memory in (huge pages) in 4 ms.
pub(crate) struct Prefault {
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Prefault {
    /// Starts faulting in the first `len` elements of `v`'s spare capacity when they are at least
    /// [`PREFAULTED_ANSWER`] bytes (else does nothing): one write per 4 KiB page, on up to half the host's
    /// cores.
    ///
    /// # Safety
    /// Until the returned value is dropped, `v` must neither be read from, written to, grown, shrunk nor freed
    /// (the threads write into its spare capacity).
    pub(crate) unsafe fn start<T>(v: &mut Vec<T>, len: usize) -> Self {
        let spare = &mut v.spare_capacity_mut()[..len];
        let bytes = size_of_val(spare);
        if bytes < PREFAULTED_ANSWER {
            return Self {
                threads: Vec::new(),
            };
        }
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = (bytes / PREFAULT_SHARE).clamp(1, (cores / 2).max(1));
        let share = bytes.div_ceil(threads).next_multiple_of(4096);
        let base = spare.as_mut_ptr() as usize;
        let threads = (0..threads)
            .map(|t| {
                let (from, to) = (t * share, ((t + 1) * share).min(bytes));
                std::thread::spawn(move || {
                    let mut at = from;
                    while at < to {
                        // SAFETY: `[base, base + bytes)` is spare capacity of the caller's vector, which nothing
                        // else touches until this thread is joined (the caller's promise); a byte of uninitialised
                        // memory may be written.
                        unsafe { std::ptr::write_volatile((base + at) as *mut u8, 0) };
                        at += 4096;
                    }
                })
            })
            .collect();
        Self { threads }
    }
}

impl Drop for Prefault {
    fn drop(&mut self) {
        for t in self.threads.drain(..) {
            // A thread that panicked faulted less in; the memory is still the caller's.
            let _ = t.join();
        }
    }
}

/// `n` zeroed answers, advised as [`answer_vec`]'s: a large zeroed vector comes from the allocator as untouched
/// pages, so the download that fills it is their first write.
pub(crate) fn zeroed_answers<E: Element>(n: usize) -> Vec<E> {
    let mut v = vec![E::default(); n];
    let bytes = n * size_of::<E>();
    if bytes >= ADVISED_ANSWER {
        advise_huge_pages(v.as_mut_ptr().cast(), bytes);
    }
    v
}

/// `OutOfMemory` when `needed` bytes exceed what `device` reports `available` (nothing when it cannot tell): the
/// one refusal behind the host and device memory checks.
pub(crate) fn refuse_beyond(
    what: &'static str,
    device: &'static str,
    needed: u64,
    available: Option<u64>,
) -> Result<()> {
    match available {
        Some(a) if needed > a => Err(Error::OutOfMemory {
            what,
            device,
            needed,
            available: a,
        }),
        _ => Ok(()),
    }
}

/// Refuses a host allocation of `needed` bytes beyond the memory Linux reports available.
pub(crate) fn check_host_memory(what: &'static str, needed: u64) -> Result<()> {
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    refuse_beyond(what, "host", needed, available)
}

/// Fills `offsets` (cleared, its room reused) with `0` and the running sums of `counts`, and returns the total:
/// a [`FindAll`](crate::results::FindAll)'s offsets made on the host. A total past `u32::MAX` is a typed error (its offsets are 32-bit).
pub(crate) fn offsets_from_counts(
    offsets: &mut Vec<u32>,
    counts: impl ExactSizeIterator<Item = usize>,
) -> Result<usize> {
    offsets.clear();
    answer_room(offsets, counts.len() + 1);
    offsets.push(0);
    let mut sum = 0usize;
    for c in counts {
        sum += c;
        let o = u32::try_from(sum).map_err(|_| crate::results::past_32_bit_offsets(sum as u64))?;
        offsets.push(o);
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh answer past the threshold is faulted in on threads, joined on drop; one below it starts none. The
    /// vector is then written and read as any other (its contents were never the prefault's).
    #[test]
    fn prefault_then_fill() {
        for n in [1000usize, (PREFAULTED_ANSWER / 8) * 3 + 5] {
            let mut v: Vec<u64> = answer_vec(n);
            let fresh = answer_room(&mut v, n);
            assert!(!fresh, "answer_vec made the room already");
            // SAFETY: `v` is untouched until the prefault is dropped.
            let p = unsafe { Prefault::start(&mut v, n) };
            let threads = p.threads.len();
            assert_eq!(
                threads == 0,
                n * 8 < PREFAULTED_ANSWER,
                "{n} answers, {threads} threads"
            );
            drop(p);
            v.extend((0..n as u64).map(|i| i * 3));
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
        }
    }

    /// `answer_room` says when it made fresh room: an empty vector too small, or a grown one; never when the
    /// room is there.
    #[test]
    fn answer_room_reports_fresh_room() {
        let mut v: Vec<u32> = Vec::new();
        assert!(answer_room(&mut v, 10));
        v.extend([1, 2, 3]);
        let room = v.capacity() - v.len();
        assert!(!answer_room(&mut v, room));
        assert!(answer_room(&mut v, room + 100));
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    fn offsets_are_running_sums_and_refuse_past_32_bits() {
        let mut offsets = vec![7, 7, 7];
        assert_eq!(
            offsets_from_counts(&mut offsets, [2, 0, 3].into_iter()),
            Ok(5)
        );
        assert_eq!(offsets, [0, 2, 2, 5]);
        let all = crate::results::FindAll {
            offsets,
            values: vec![1u32, 2, 3, 4, 5],
        };
        assert_eq!(all.get(2), Some(&[3, 4, 5][..]));
        assert_eq!(all.get(3), None);
        // One value past what 32-bit offsets address: a typed error, not a wrapped offset.
        let mut offsets = Vec::new();
        let past = offsets_from_counts(&mut offsets, [u32::MAX as usize, 1].into_iter());
        assert!(matches!(past, Err(hashtile_core::Error::InvalidConfig(_))));
    }
}
