//! Writes into one slice from many threads at indices no two threads share: the scatters of the host passes
//! (a mixed batch's outcomes in batch order, a paged or sharded batch's parts, answers back in order) whose
//! index sets are disjoint by construction but not contiguous, so `par_chunks_mut` cannot split them.

use std::marker::PhantomData;

/// A slice written through shared references, each index by at most one thread.
pub(crate) struct DisjointWrites<'a, T> {
    ptr: *mut T,
    len: usize,
    _slice: PhantomData<&'a mut [T]>,
}

// SAFETY: every caller of `write` promises that no index is written by two threads, and nothing reads the slice
// while the writer lives (it holds the slice's unique borrow).
unsafe impl<T: Send> Sync for DisjointWrites<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for DisjointWrites<'_, T> {}

impl<'a, T> DisjointWrites<'a, T> {
    /// Writes into `slice` for as long as the writer lives.
    pub(crate) fn new(slice: &'a mut [T]) -> Self {
        Self {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _slice: PhantomData,
        }
    }

    /// Writes `value` at `i` (checked in bounds).
    ///
    /// # Safety
    /// No other thread writes index `i` while this writer lives.
    #[inline]
    pub(crate) unsafe fn write(&self, i: usize, value: T) {
        assert!(i < self.len, "disjoint write at {i} of {}", self.len);
        // SAFETY: in bounds (checked), and index `i` is this thread's alone (the caller's promise).
        unsafe { self.ptr.add(i).write(value) }
    }
}
