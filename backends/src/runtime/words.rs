//! Host byte and word casts: the caller's `K` / `V` slices seen as the device's words without a copy where the
//! widths match, widened or narrowed where they do not.

use crate::results::FindAll;
use hashtile_core::Element;
use std::mem::MaybeUninit;

/// `s` as a slice of `W` when `E` and `W` have one width (no copy), else `None`.
pub(crate) fn same_words<E: Element, W: Element>(s: &[E]) -> Option<&[W]> {
    (E::BITS == W::BITS).then(|| {
        // SAFETY: every `Element` of a width has that size and alignment and accepts every bit pattern (the
        // trait's contract, kept by its seal: the primitive integers and `#[repr(transparent)]` newtypes).
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<W>(), s.len()) }
    })
}

/// `true` when `E` and `W` are one type (not only one width): containers of one cast to the other's.
fn same_type<E: 'static, W: 'static>() -> bool {
    std::any::TypeId::of::<E>() == std::any::TypeId::of::<W>()
}

/// `v` as a vector of `Option<W>` when `E` and `W` are the same type (no copy), else `Err(v)` unchanged.
pub(crate) fn same_options_vec<E: Element, W: Element>(
    v: Vec<Option<E>>,
) -> std::result::Result<Vec<Option<W>>, Vec<Option<E>>> {
    if !same_type::<E, W>() {
        return Err(v);
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `E` and `W` are one type, so `Option<E>` and `Option<W>` are one type too, and the allocation's
    // layout, length and capacity carry over.
    Ok(unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<Option<W>>(), v.len(), v.capacity()) })
}

/// Mutable [`same_words`].
pub(crate) fn same_words_mut<E: Element, W: Element>(s: &mut [E]) -> Option<&mut [W]> {
    (E::BITS == W::BITS).then(|| {
        // SAFETY: as in `same_words` (every `W` written is a valid `E` too); the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<W>(), s.len()) }
    })
}

/// `out` as multimap answers of `W` when `E` and `W` are the same type (no copy), else `None`.
pub(crate) fn same_find_all_mut<E: Element, W: Element>(
    out: &mut FindAll<E>,
) -> Option<&mut FindAll<W>> {
    same_type::<E, W>().then(|| {
        // SAFETY: `E` and `W` are one type, so `FindAll<E>` and `FindAll<W>` are one type too; the borrow is
        // unique.
        unsafe { &mut *std::ptr::from_mut(out).cast::<FindAll<W>>() }
    })
}

/// Runs `f` on `out` as the layout's words `W` (a `find_all_into`): in place when the widths match, else on a
/// temporary whose values are narrowed into `out.values` after (both of `out`'s allocations reused: the
/// temporary takes `out`'s offsets, which are `u32` whatever the width, and gives them back).
pub(crate) fn with_find_all_words<E: Element, W: Element>(
    out: &mut FindAll<E>,
    f: impl FnOnce(&mut FindAll<W>) -> hashtile_core::Result<()>,
) -> hashtile_core::Result<()> {
    use rayon::prelude::*;
    if let Some(o) = same_find_all_mut::<E, W>(out) {
        return f(o);
    }
    let mut wide = FindAll {
        offsets: std::mem::take(&mut out.offsets),
        values: Vec::new(),
    };
    let done = f(&mut wide);
    out.offsets = wide.offsets;
    done?;
    out.values.clear();
    super::host_memory::answer_room(&mut out.values, wide.values.len());
    // An indexed parallel extend writes straight into the reserved room.
    out.values
        .par_extend(wide.values.par_iter().map(|w| E::narrow(w.widen())));
    Ok(())
}

/// Runs `f` on `out` as the layout's words `W`: in place when the widths match, else on widened words that are
/// narrowed into `out` after (the answers of a find into the caller's slice).
pub(crate) fn with_words_mut<E: Element, W: Element, T>(
    out: &mut [E],
    f: impl FnOnce(&mut [W]) -> hashtile_core::Result<T>,
) -> hashtile_core::Result<T> {
    if let Some(o) = same_words_mut::<E, W>(out) {
        return f(o);
    }
    let mut wide = vec![W::default(); out.len()];
    let done = f(&mut wide)?;
    for (o, w) in out.iter_mut().zip(&wide) {
        *o = E::narrow(w.widen());
    }
    Ok(done)
}

/// `s` as the layout's words: as is when the widths match, else widened (a copy; only a table of a 32-bit key
/// with a 64-bit value, or the reverse, widens, and only into the [`Wide`] layout).
pub(crate) fn words_of<E: Element, W: Element>(s: &[E]) -> std::borrow::Cow<'_, [W]> {
    debug_assert!(
        W::BITS >= E::BITS,
        "layout words are never narrower than the data"
    );
    match same_words(s) {
        Some(w) => std::borrow::Cow::Borrowed(w),
        None => {
            use rayon::prelude::*;
            std::borrow::Cow::Owned(s.par_iter().map(|e| W::narrow(e.widen())).collect())
        }
    }
}

/// The bytes of a slice of elements (what the host path copies).
pub(crate) fn bytes_of<E: Element>(s: &[E]) -> &[u8] {
    // SAFETY: `u32` and `u64` (the only elements) have no padding and every byte is initialised.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a slice of elements not yet written (an answer vector's room), writable.
pub(crate) fn uninit_bytes_of_mut<E: Element>(s: &mut [MaybeUninit<E>]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<E>` has `E`'s size and no validity requirement, so its bytes are `MaybeUninit<u8>`s;
    // the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a slice of elements, writable.
pub(crate) fn bytes_of_mut<E: Element>(s: &mut [E]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`, and any byte pattern is a valid `u32` / `u64`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}
