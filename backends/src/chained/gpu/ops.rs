//! The chained store's device-resident lookups, flush, slab handouts and census, and what a user kernel needs to
//! call the device function ([`ChainedDeviceRef`]). (Calls on host data: `host.rs`.)

use super::alloc::*;
use super::kernel::*;
use super::store::*;
use crate::device::layout::KeyLayout;
use crate::runtime::host_io::element;
use crate::runtime::launch::{CUBE_SIZE, cube_count};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::{Error, Result};

impl<R: HostTransfer, L: KeyLayout> GpuChained<R, L> {
    /// Queues `find` of `n` keys already on the device: `(values, found)`, a value and a `u32` per key
    /// (`found`: [`status::FOUND`] if the key is stored; its value is then the first copy's).
    pub fn find_device(&self, keys: &Handle, n: usize) -> (Handle, Handle) {
        self.walk_device(keys, n, op::FIND, n, None)
    }

    /// Queues a launch of a walk `mode` ([`op::FIND`], [`op::ERASE`], [`op::COUNT`], [`op::GATHER`],
    /// [`op::ERASE_ALL`]) over `n` keys on the device: `(out, aux)`, `out` the values found or gathered
    /// (`out_len`), `aux` the statuses or counts; `aux` in: the gather's starts (`n + 1`).
    pub(crate) fn walk_device(
        &self,
        keys: &Handle,
        n: usize,
        mode: u32,
        out_len: usize,
        aux: Option<Handle>,
    ) -> (Handle, Handle) {
        let out = self.client.empty(out_len.max(1) * Self::VALUE_BYTES);
        let aux_len = if aux.is_some() { n + 1 } else { n.max(1) };
        let aux = aux.unwrap_or_else(|| self.client.empty(n.max(1) * 4));
        let arrays = Arrays {
            ops: None,
            keys,
            values: None,
            n,
        };
        self.launch(Launch {
            out: Some((&out, out_len)),
            aux: Some((&aux, aux_len)),
            ..Launch::new::<L>(mode, arrays, n)
        });
        (out, aux)
    }

    /// The first `n` elements of a device buffer, through CubeCL's own copy (counters and small reads).
    pub(crate) fn read<E: hashtile_core::Element>(&self, h: Handle, n: usize) -> Result<Vec<E>> {
        let bytes = self
            .client
            .read_one(h)
            .map_err(|e| Error::Device(format!("{e:?}")))?;
        let w = size_of::<E>();
        Ok(bytes[..n * w].chunks_exact(w).map(element).collect())
    }

    /// Compacts every list and frees the slabs left over; returns how many.
    pub fn flush(&mut self) -> Result<usize> {
        self.settle()?;
        let freed = self.client.create_from_slice(u32::as_bytes(&[0u32]));
        // SAFETY: thread `b < buckets` walks bucket `b`'s list: links below `buckets + pool`.
        unsafe {
            chained_flush_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(self.buckets as usize),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slabs.clone(), self.slab_words(self.pool)),
                ArrayArg::from_raw_parts(self.values.clone(), self.value_words()),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                ArrayArg::from_raw_parts(freed.clone(), 1),
                self.buckets,
            )
        }
        let freed = self.read::<u32>(freed, 1)?[0] as usize;
        // Compacted: no tombstones are left, and every list's slabs but its last are full.
        self.occupied = Some(self.len as u64);
        self.free_floor = None;
        Ok(freed)
    }

    /// Takes `n` free slabs from the pool on the device (the allocator alone, as inserts call it: one atomic
    /// per slab in the common case): a buffer of `n` pool indices, `u32::MAX` for each slab the pool did not
    /// have. The slabs stay empty and unlinked; give them back with [`GpuChained::release_device`] (or they
    /// are lost to the table). Queued, not waited for.
    pub fn allocate_device(&mut self, n: usize) -> Handle {
        let out = self.client.empty(n.max(1) * 4);
        self.free_floor = None;
        self.outside += n as u64;
        // SAFETY: thread `t < n` writes `out[t]`; the bitmap has `ceil(pool / 32)` words.
        unsafe {
            chained_alloc_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(n.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                self.pool,
                n as u32,
                ArrayArg::from_raw_parts(out.clone(), n.max(1)),
            )
        }
        out
    }

    /// Gives back the `n` slabs [`GpuChained::allocate_device`] took (`u32::MAX` entries are skipped).
    /// Queued, not waited for.
    pub fn release_device(&mut self, slabs: &Handle, n: usize) {
        self.outside = self.outside.saturating_sub(n as u64);
        // SAFETY: thread `t < n` reads `slabs[t]`, a pool index below `pool` or `u32::MAX`.
        unsafe {
            chained_free_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(n.max(1)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                ArrayArg::from_raw_parts(slabs.clone(), n.max(1)),
                n as u32,
            )
        }
    }

    /// The client the table's buffers live on (for callers that put their own operation arrays there).
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Pairs stored (those of queued inserts counted once [`GpuChained::settle`]d).
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole table read back: slab words and the pool bitmap (for the invariant check). Wide tables'
    /// values: [`GpuChained::download_values`].
    pub fn download(&self) -> Result<(Vec<u64>, Vec<u32>)> {
        let words = self.read::<u64>(self.slabs.clone(), self.slab_words(self.pool))?;
        let bits = self.read(self.bitmap.clone(), Self::bitmap_words(self.pool))?;
        Ok((words, bits))
    }

    /// A wide table's value array read back (at its key words' indices); `None` for packed tables.
    pub fn download_values(&self) -> Result<Option<Vec<u64>>> {
        if L::MOVES_PAIRS {
            return Ok(None);
        }
        Ok(Some(self.read::<u64>(
            self.values.clone(),
            self.slab_words(self.pool),
        )?))
    }

    /// Lists and pool slabs.
    pub fn shape_of(&self) -> (u32, u32) {
        (self.buckets, self.pool)
    }

    /// Device handles for calling [`chained_tile_op()`] from your own kernel (see [`ChainedDeviceRef`]). Call
    /// [`GpuChained::reserve`] first for the slabs your kernel's inserts may take, and
    /// [`GpuChained::recount`] after a kernel that changed the table. The handles stay valid until the pool
    /// grows (a call that inserts from the host may grow it). Until [`GpuChained::recount`], queued inserts
    /// no longer bound the pool by the table's occupancy (your kernel may insert).
    pub fn device_ref(&mut self) -> ChainedDeviceRef {
        self.occupied = None;
        self.free_floor = None;
        ChainedDeviceRef {
            slabs: self.slabs.clone(),
            slab_words: self.slab_words(self.pool),
            values: self.values.clone(),
            value_words: self.value_words(),
            bitmap: self.bitmap.clone(),
            bitmap_words: Self::bitmap_words(self.pool),
            pool: self.pool,
            shape: self.client.create_from_slice(u32::as_bytes(&self.shape())),
            tile_width: self.tile,
            plain: self.plain_reads,
            resident: self.resident,
        }
    }

    /// Grows the pool, if needed, so that at least `free` slabs are free (reads how many are in use).
    pub fn reserve(&mut self, free: u32) -> Result<()> {
        let used = self.used_slabs()?;
        let want = used as u64 + free as u64;
        if want > self.pool as u64 {
            let grown = want.max(2 * self.pool as u64).min(u32::MAX as u64) as u32;
            self.resize(grown)?;
        }
        self.free_floor = None;
        Ok(())
    }

    /// Counts the pairs stored, on the device (after a kernel of yours changed the table; waits), and makes it
    /// [`GpuChained::len`]; also counts the occupied slots again, for [`GpuChained::insert_queued`]'s bound.
    /// Queued inserts are settled first.
    pub fn recount(&mut self) -> Result<usize> {
        self.settle()?;
        let words = self.slab_words(self.pool);
        let count = self.client.create_from_slice(u32::as_bytes(&[0u32; 2]));
        // SAFETY: thread `t < words` reads slab word `t` and adds to `count[0]` and `count[1]`.
        unsafe {
            chained_live_kernel::launch_unchecked::<L, R>(
                &self.client,
                cube_count(words),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.slabs.clone(), words),
                ArrayArg::from_raw_parts(count.clone(), 2),
                self.tile,
            )
        }
        let c = self.read::<u32>(count, 2)?;
        self.len = c[0] as usize;
        self.occupied = Some(c[1] as u64);
        Ok(self.len)
    }
}

/// What a kernel of yours needs to call [`chained_tile_op()`] on a [`GpuChained`] table (from
/// [`GpuChained::device_ref`]). Bind `slabs` as the atomic array; as `slabs_plain` bind `slabs` again where
/// `plain` (CUDA), else a one-word dummy, and pass `plain` as the compile-time flag; a kernel that only finds
/// or counts may bind a dummy as the atomic array and the slabs as `slabs_plain` with `plain == true`. Build
/// `meta` in the kernel with [`crate::device::shape::load_meta()`] of `shape`.
#[derive(Debug, Clone)]
pub struct ChainedDeviceRef {
    /// The slab words (`Array<Atomic<u64>>` or `Array<u64>`, `slab_words` long).
    pub slabs: Handle,
    /// Length of `slabs`.
    pub slab_words: usize,
    /// A wide table's values (`slab_values`, `Array<u64>`); a one-word dummy for packed tables.
    pub values: Handle,
    /// Length of `values`.
    pub value_words: usize,
    /// The allocator's bitmap (`Array<Atomic<u32>>`, `bitmap_words` long).
    pub bitmap: Handle,
    /// Length of `bitmap`.
    pub bitmap_words: usize,
    /// Pool slabs (the `pool` argument).
    pub pool: u32,
    /// The shape words (`Array<u32>`, [`crate::device::shape::SHAPE_WORDS`] long).
    pub shape: Handle,
    /// Lanes per tile (the compile-time `tw`).
    pub tile_width: u32,
    /// Whether this runtime may bind the slabs twice (CUDA): the compile-time `plain`.
    pub plain: bool,
    /// The table's allocator: the compile-time `resident` ([`SlabAllocator::ResidentBlocks`]).
    pub resident: bool,
}
