//! Page-locked host memory ([`PinnedAlloc`], from a runtime's `HostTransfer::alloc_pinned`) and the host
//! buffer users fill and pass as a slice ([`PinnedBuffer`]), which the host calls copy at the full bus rate.

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
