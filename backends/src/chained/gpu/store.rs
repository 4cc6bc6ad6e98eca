//! The GPU store of a chained table ([`GpuChained`]): its slab and value arrays, the pool and its growth, and
//! the host calls that insert (the placing launches, queued inserts and their settling).

use super::alloc::*;
use super::kernel::*;
use crate::device::layout::{KeyLayout, Packed};
use crate::device::shape::{shape_scalars, shape_words_of};
use crate::runtime::host_io::{BatchSizes, DeviceCache};
use crate::runtime::launch::{CUBE_SIZE, copy, cube_count, fill_u32, fill_u64};
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::tile::EMPTY_WORD;
use hashtile_core::{Error, HashFamily, Result};
use hashtile_probing::Chain;

/// The operation arrays of a launch (`n` words each; `ops` and `values` bound only where the mode reads them).
pub(crate) struct Arrays<'a> {
    pub(crate) ops: Option<&'a Handle>,
    pub(crate) keys: &'a Handle,
    pub(crate) values: Option<&'a Handle>,
    pub(crate) n: usize,
}

/// One launch of [`chained_kernel`]: the operations and where they write (`None`: an argument the launch does
/// not use, bound to a dummy). Made by [`Launch::new`] with every optional part unused.
pub(crate) struct Launch<'a> {
    pub(crate) mode: u32,
    pub(crate) arrays: Arrays<'a>,
    /// Operations run: the first `m` of `arrays`, or the `m` that `sel` names.
    pub(crate) m: usize,
    pub(crate) sel: Option<&'a Handle>,
    /// The values found or gathered, and its length.
    pub(crate) out: Option<(&'a Handle, usize)>,
    /// The statuses or counts (or, for gathers, the starts), and its length.
    pub(crate) aux: Option<(&'a Handle, usize)>,
    /// The retry list of inserts that found the pool empty, and its length.
    pub(crate) retry: Option<(&'a Handle, usize)>,
    /// The counters ([`COUNTER_WORDS`]).
    pub(crate) counters: Option<&'a Handle>,
    /// The host calls' compact answers (see [`chained_kernel`]): presence bits for finds (`bits`), the
    /// counters' erase lines for erases.
    pub(crate) compact: bool,
    /// A compact find's presence bits (`ceil(m / 32)` words, zeroed).
    pub(crate) bits: Option<&'a Handle>,
    /// The reserved-key guard word the launch is gated on.
    pub(crate) gate: Option<&'a Handle>,
    /// Position of the first operation of `arrays` in the host batch.
    pub(crate) base: usize,
    /// Which phase of a wide table's mixed batch (see [`chained_kernel`]).
    pub(crate) phase: u32,
}

impl<'a> Launch<'a> {
    /// A launch of `mode` over the first `m` operations of `arrays`, writing nothing yet.
    pub(crate) fn new<L: KeyLayout>(mode: u32, arrays: Arrays<'a>, m: usize) -> Self {
        Self {
            mode,
            arrays,
            m,
            sel: None,
            out: None,
            aux: None,
            retry: None,
            counters: None,
            compact: false,
            bits: None,
            gate: None,
            base: 0,
            // Mixed batches of wide tables run their inserts in launches of their own (their erases and
            // finds first, in phase 1).
            phase: if mode == op::MIXED && !L::MOVES_PAIRS {
                2
            } else {
                0
            },
        }
    }
}

/// A chained table on a device: 32-bit keys and values packed into the slab words ([`Packed`], the default),
/// or 64-bit keys in the slab words and 64-bit values in an array beside them ([`Wide`](crate::device::layout::Wide)).
pub struct GpuChained<R: HostTransfer, L: KeyLayout = Packed> {
    pub(crate) client: ComputeClient<R>,
    /// Host data moves through the host-I/O layer ([`crate::runtime::host_io`]) with the runtime's shared
    /// stager (CUDA: pinned staging buffers and a copy stream).
    pub(crate) stager: std::sync::Arc<R::Stager>,
    /// The host calls' batch buffers, kept between calls.
    pub(crate) cache: DeviceCache,
    /// How host batches are cut for the device.
    pub(crate) sizes: BatchSizes,
    /// The reserved keys of the table's front end (the empty sentinel and the tombstone as key words), which
    /// the host calls refuse with a typed error, checked on the device as the keys land; `None`: unchecked (a
    /// store made directly, whose caller keeps them out).
    pub(crate) reserved: Option<[L::Key; 2]>,
    /// Distinct one-word buffers for the kernel arguments a launch does not use (wgpu mis-binds a buffer
    /// bound twice in one launch), made once.
    pub(crate) dummies: [Handle; 11],
    pub(crate) family: HashFamily,
    pub(crate) buckets: u32,
    pub(crate) pool: u32,
    pub(crate) slabs: Handle,
    /// The values of a wide table, at their key words' indices (a one-word dummy for packed tables).
    pub(crate) values: Handle,
    pub(crate) bitmap: Handle,
    pub(crate) tile: u32,
    /// Inserts read slabs with plain loads first (CUDA, where the slab array may be bound twice).
    pub(crate) plain_reads: bool,
    pub(crate) len: usize,
    /// The counters that queued inserts add their new pairs to, until [`GpuChained::settle`] reads them.
    pub(crate) queued: Option<Handle>,
    /// A lower bound of the free pool slabs (`None`: not known since the last change that took slabs), so
    /// that queued inserts need not read the device to know the pool suffices.
    pub(crate) free_floor: Option<u64>,
    /// An upper bound of the occupied pair slots (live pairs and tombstones; `None`: unknown, after a kernel
    /// of the user's may have inserted). Slots never become empty again except by flush, and a list links a
    /// slab only after its tail is full, so the lists hold at most `occupied / 15` pool slabs: a bound on the
    /// pool that needs no read of the device (see [`GpuChained::insert_queued`]).
    pub(crate) occupied: Option<u64>,
    /// Pairs of queued launches counted into `occupied` (each launch's `n`), replaced by the exact count when
    /// they settle.
    pub(crate) queued_pairs: u64,
    /// Slabs handed out by [`GpuChained::allocate_device`] and not given back (an upper bound).
    pub(crate) outside: u64,
    /// At most this many tiles run at once on the device (each holds at most one slab not yet in a list).
    pub(crate) resident_tiles: u64,
    pub(crate) stats: QueueStats,
    /// Slabs come from each tile's resident block of the bitmap (SlabAlloc's) rather than hashed words.
    pub(crate) resident: bool,
    pub(crate) _layout: std::marker::PhantomData<L>,
}

/// How often queued inserts ([`GpuChained::insert_queued`]) had to wait for the device or grow the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Launches queued without any read of the device.
    pub queued: u64,
    /// Reads of the slabs in use (a wait for the device each) when the bounds could not prove the pool
    /// sufficient.
    pub pool_reads: u64,
    /// Pool growths.
    pub pool_grows: u64,
}

impl<R: HostTransfer, L: KeyLayout> GpuChained<R, L> {
    /// `buckets` empty lists and a pool of `pool` free slabs on `client`'s device, read by tiles of 8 lanes
    /// (two slab words per lane, four tiles per plane of 32): on the H100 they build 1.2x and find 1.25x
    /// faster than tiles of 16, as a plane step's control work is shared by four operations instead of two
    /// (`docs/PERFORMANCE.md`).
    pub fn new(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
    ) -> Result<Self> {
        Self::with_tile_width(client, family, buckets, pool, DEFAULT_TILE)
    }

    /// [`GpuChained::new`] with tiles of `tile_width` lanes: 16 (a lane per slab word) or 8 (two words per
    /// lane, four tiles per plane of 32); at most the plane size. A design-space knob: narrower tiles serve
    /// more operations per plane step.
    pub fn with_tile_width(
        client: &ComputeClient<R>,
        family: HashFamily,
        buckets: u32,
        pool: u32,
        tile_width: u32,
    ) -> Result<Self> {
        let plane = crate::device::shape::tile_width_for(client, SLAB_WORDS, 8)?;
        if !matches!(tile_width, 8 | 16) || tile_width > plane {
            return Err(Error::InvalidConfig(format!(
                "chained tables read a slab with tiles of 8 or 16 lanes (at most {plane} here), got {tile_width}"
            )));
        }
        let tile = tile_width;
        // An NVIDIA multiprocessor keeps at most 2048 threads resident; elsewhere, a generous 2^17 tiles.
        let resident_tiles = match client.properties().hardware.num_streaming_multiprocessors {
            Some(sms) => sms as u64 * 2048 / tile as u64,
            None => 1 << 17,
        };
        let mut t = Self {
            client: client.clone(),
            stager: crate::runtime::dispatch::shared_stager(client)?,
            cache: DeviceCache::default(),
            sizes: BatchSizes::DEFAULT,
            reserved: None,
            dummies: std::array::from_fn(|_| client.empty(8)),
            family,
            buckets,
            pool: 0,
            slabs: client.empty(8),
            values: client.empty(8),
            bitmap: client.empty(4),
            tile,
            plain_reads: R::name(client) == "cuda",
            len: 0,
            queued: None,
            free_floor: None,
            occupied: Some(0),
            queued_pairs: 0,
            outside: 0,
            resident_tiles,
            stats: QueueStats::default(),
            resident: false,
            _layout: std::marker::PhantomData,
        };
        t.resize(pool.max(32))?;
        Ok(t)
    }

    pub(crate) fn slab_words(&self, pool: u32) -> usize {
        (self.buckets as usize + pool as usize) * SLAB_WORDS as usize
    }

    /// Bytes of one value in kernels' inputs and outputs.
    pub(crate) const VALUE_BYTES: usize = (<L::Value as hashtile_core::Element>::BITS / 8) as usize;

    /// Length of the value array as bound (a one-word dummy for packed tables).
    pub(crate) fn value_words(&self) -> usize {
        if L::MOVES_PAIRS {
            1
        } else {
            self.slab_words(self.pool)
        }
    }

    pub(crate) fn bitmap_words(pool: u32) -> usize {
        pool.div_ceil(32).max(1) as usize
    }

    /// Grows the pool to `pool` slabs: new arrays, the old contents copied, the rest empty (queued).
    pub(crate) fn resize(&mut self, pool: u32) -> Result<()> {
        if self.buckets as u64 + pool as u64 >= u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "a chained table addresses at most 2^32 - 1 slabs: {} buckets and a pool of {pool}",
                self.buckets
            )));
        }
        let (old_words, new_words) = (self.slab_words(self.pool), self.slab_words(pool));
        if let Some(free) = R::free_device_memory(&self.stager) {
            // The new arrays live beside the old ones until the copy is done.
            let arrays = if L::MOVES_PAIRS { 1 } else { 2 };
            let needed = (arrays * new_words * 8 + Self::bitmap_words(pool) * 4) as u64;
            if needed > free {
                return Err(Error::OutOfMemory {
                    what: "chained table slabs",
                    device: "device",
                    needed,
                    available: free,
                });
            }
        }
        let slabs = self.client.empty(new_words * 8);
        fill_u64(&self.client, &slabs, new_words, EMPTY_WORD);
        let (old_bits, new_bits) = (Self::bitmap_words(self.pool), Self::bitmap_words(pool));
        let bitmap = self.client.empty(new_bits * 4);
        fill_u32(&self.client, &bitmap, new_bits, 0);
        let wide = !L::MOVES_PAIRS;
        let values = if wide {
            let v = self.client.empty(new_words * 8);
            fill_u64(&self.client, &v, new_words, 0);
            v
        } else {
            self.values.clone()
        };
        if self.pool > 0 {
            copy::<R, u64>(&self.client, &self.slabs, &slabs, old_words);
            copy::<R, u32>(&self.client, &self.bitmap, &bitmap, old_bits);
            if wide {
                copy::<R, u64>(&self.client, &self.values, &values, old_words);
            }
        }
        self.slabs = slabs;
        self.values = values;
        self.bitmap = bitmap;
        self.pool = pool;
        Ok(())
    }

    /// The table's shape for kernels. Its rule is the multimap's (`upsert == 0`: an `op::INSERT` stores a
    /// further copy); unique inserts are `op::REPLACE` operations, which upsert whatever the rule.
    pub(crate) fn shape(&self) -> [u32; crate::device::shape::SHAPE_WORDS] {
        let params = hashtile_core::scheme::SchemeParams {
            upsert: 0,
            ..Chain::default_params(SLAB_WORDS)
        };
        shape_words_of(self.buckets, self.family, params)
    }

    /// [`GpuChained::insert`] of `n` pairs already on the device. Operations that found the pool empty run
    /// again (from the device's list of them) after it grows; waits for the device (one small read per pass).
    pub fn insert_device(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        unique: bool,
    ) -> Result<usize> {
        let mode = if unique { op::REPLACE } else { op::INSERT };
        self.free_floor = None;
        let (added, _) = self.run_placing(mode, (None, keys, Some(values)), n, None, None)?;
        Ok(added)
    }

    /// Slabs a launch of `n` inserts holds outside the lists at any moment, at most: each running tile holds
    /// at most one (taken and not yet linked, or linked and not yet written to), and a launch runs at most
    /// `ceil(n / tile)` tiles, no more than the device keeps resident at once.
    pub(crate) fn held_at_most(&self, n: usize) -> u64 {
        (n as u64)
            .div_ceil(self.tile as u64)
            .min(self.resident_tiles)
    }

    /// [`GpuChained::insert_device`] without waiting for the device, where the pool provably holds every slab
    /// the pairs could need: the launch is only queued, and its new pairs are counted on the device until
    /// [`GpuChained::settle`]. This is the call for many small batches (SlabHash's incremental inserts): a
    /// batch of 2^15 pairs takes a few microseconds of kernel time, about what a read from the device costs.
    ///
    /// Two bounds prove the pool sufficient, the first without any read:
    /// - **occupancy:** a list links a slab only once its tail is full, and a slot never becomes empty again
    ///   (tombstones stay until a flush), so the lists hold at most `occupied / 15` pool slabs, where
    ///   `occupied` (live pairs and tombstones, counted on the host as an upper bound) includes this launch's
    ///   `n`; plus the slabs running tiles hold and those [`GpuChained::allocate_device`] handed out;
    /// - **free slabs:** a read of the slabs in use, after which each launch may take at most `n` new slabs
    ///   (each holds at least one of its pairs) plus what its tiles hold.
    ///
    /// Where neither holds, the pool grows first (at least doubling; a queued copy). [`QueueStats`] counts
    /// the reads and growths.
    pub fn insert_queued(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        unique: bool,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let held = self.held_at_most(n);
        let by_occupancy = self
            .occupied
            .map(|o| (o + n as u64) / (SLAB_WORDS as u64 - 1) + held + self.outside);
        let need = n as u64 + held;
        let proven = by_occupancy.is_some_and(|u| u <= self.pool as u64)
            || self.free_floor.is_some_and(|f| f >= need);
        if !proven {
            self.stats.pool_reads += 1;
            let used = self.used_slabs()? as u64;
            // The tighter of the two bounds, now that the slabs in use are known.
            let want = by_occupancy.map_or(used + need, |u| u.min(used + need));
            if want > self.pool as u64 {
                // Grown now, without waiting (the copy is queued): the bound then holds for this launch.
                let grown = want.max(2 * self.pool as u64);
                if grown >= u32::MAX as u64 - self.buckets as u64 {
                    return self.insert_device(keys, values, n, unique).map(|_| ());
                }
                self.stats.pool_grows += 1;
                self.resize(grown as u32)?;
            }
            self.free_floor = Some(self.pool as u64 - used);
        }
        self.stats.queued += 1;
        // The free floor falls by what this launch may take (or becomes unknown if it could take more).
        self.free_floor = self.free_floor.and_then(|f| f.checked_sub(need));
        if let Some(o) = &mut self.occupied {
            *o += n as u64;
        }
        self.queued_pairs += n as u64;
        let mode = if unique { op::REPLACE } else { op::INSERT };
        let counters = match &self.queued {
            Some(c) => c.clone(),
            None => {
                let c = self.fresh_counters();
                self.queued = Some(c.clone());
                c
            }
        };
        let arrays = Arrays {
            ops: None,
            keys,
            values: Some(values),
            n,
        };
        self.launch(Launch {
            counters: Some(&counters),
            ..Launch::new::<L>(mode, arrays, n)
        });
        Ok(())
    }

    /// A zeroed counter array ([`COUNTER_WORDS`]) for one launch or a run of queued ones.
    pub(crate) fn fresh_counters(&self) -> Handle {
        self.client
            .create_from_slice(u32::as_bytes(&[0; COUNTER_WORDS]))
    }

    /// Waits for queued inserts ([`GpuChained::insert_queued`]) and counts their new pairs into
    /// [`GpuChained::len`]; returns the length.
    pub fn settle(&mut self) -> Result<usize> {
        if let Some(c) = self.queued.take() {
            let c = self.read(c, COUNTER_WORDS)?;
            if c[0] > 0 {
                return Err(Error::Device(format!(
                    "{} queued inserts found the pool empty (the pool bound was wrong): the table misses them",
                    c[0]
                )));
            }
            let added = counter_lines(&c, 1);
            self.len += added;
            // The launches' bound replaced by what they stored.
            if let Some(o) = &mut self.occupied {
                *o = *o - self.queued_pairs + added as u64;
            }
            self.queued_pairs = 0;
        }
        Ok(self.len)
    }

    /// Chooses how inserts take pool slabs (the default: [`SlabAllocator::HashedBitmap`]).
    pub fn set_allocator(&mut self, a: SlabAllocator) {
        self.resident = a == SlabAllocator::ResidentBlocks;
    }

    /// How often [`GpuChained::insert_queued`] waited for the device or grew the pool, since the table was
    /// made.
    pub fn queue_stats(&self) -> QueueStats {
        self.stats
    }

    /// Pool slabs in use (counted on the device from the allocator's bitmap; waits).
    pub fn used_slabs(&self) -> Result<u32> {
        let words = Self::bitmap_words(self.pool);
        let count = self.client.create_from_slice(u32::as_bytes(&[0u32]));
        // SAFETY: thread `t < words` reads bitmap word `t` and adds to `count[0]`.
        unsafe {
            chained_used_kernel::launch_unchecked::<R>(
                &self.client,
                cube_count(words),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(self.bitmap.clone(), words),
                words as u32,
                ArrayArg::from_raw_parts(count.clone(), 1),
            )
        }
        Ok(self.read(count, 1)?[0])
    }

    /// A mixed batch of `n` operations already on the device: operation `ops[q]` ([`op::INSERT`] to
    /// [`op::FIND`]) of `keys[q]` (and `values[q]`, which only inserts read). Returns `(out, aux)`: the value
    /// found and the [`status`] of each operation. Operations on distinct keys commute; operations on one key
    /// run in an unspecified order and never corrupt the table. Waits for the device.
    pub fn apply_device(
        &mut self,
        ops: &Handle,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<(Handle, Handle)> {
        let out = self.client.empty(n.max(1) * Self::VALUE_BYTES);
        let aux = self.client.empty(n.max(1) * 4);
        self.free_floor = None;
        if n > 0 {
            let mut erased_first = 0;
            if !L::MOVES_PAIRS {
                // Wide tables: the erases and finds first, then the inserts (see `chained_tile_op`).
                let counters = self.fresh_counters();
                let arrays = Arrays {
                    ops: Some(ops),
                    keys,
                    values: Some(values),
                    n,
                };
                self.launch(Launch {
                    out: Some((&out, n)),
                    aux: Some((&aux, n)),
                    counters: Some(&counters),
                    phase: 1,
                    ..Launch::new::<L>(op::MIXED, arrays, n)
                });
                erased_first = counter_lines(
                    &self.read::<u32>(counters, COUNTER_WORDS)?,
                    1 + NEW_COUNTERS,
                );
            }
            self.len -= erased_first;
            let reports = Some((&out, &aux));
            self.run_placing(op::MIXED, (Some(ops), keys, Some(values)), n, reports, None)?;
        }
        Ok((out, aux))
    }

    /// Runs `n` operations of an insert `mode` or of [`op::MIXED`] until none waits for a slab: those that
    /// found the pool empty are recorded on the device and run again, only they, after the pool has grown.
    /// Returns how many new pairs the inserts stored and how many the erases of a mixed batch removed.
    /// `reports`: `out` and `aux` of mixed batches (`n` words each). `queued`: the retry list (`n` words) and
    /// counters of a first pass over all `n` operations that the caller queued already (the host calls queue
    /// one launch per landed chunk); its counters are read here, as a pass of this function's own would be.
    pub(crate) fn run_placing(
        &mut self,
        mode: u32,
        (ops, keys, values): (Option<&Handle>, &Handle, Option<&Handle>),
        n: usize,
        reports: Option<(&Handle, &Handle)>,
        mut queued: Option<(Handle, Handle)>,
    ) -> Result<(usize, usize)> {
        let (mut added, mut erased) = (0usize, 0usize);
        let mut sel: Option<(Handle, usize)> = None;
        loop {
            let m = sel.as_ref().map_or(n, |s| s.1);
            if m == 0 {
                break;
            }
            let (retry, counters) = match queued.take() {
                Some(first) => first,
                None => {
                    let retry = self.client.empty(m * 4);
                    let counters = self.fresh_counters();
                    let arrays = Arrays {
                        ops,
                        keys,
                        values,
                        n,
                    };
                    self.launch(Launch {
                        sel: sel.as_ref().map(|s| &s.0),
                        out: reports.map(|r| (r.0, n)),
                        aux: reports.map(|r| (r.1, n)),
                        retry: Some((&retry, m)),
                        counters: Some(&counters),
                        ..Launch::new::<L>(mode, arrays, m)
                    });
                    (retry, counters)
                }
            };
            let c = self.read(counters, COUNTER_WORDS)?;
            // Counted as each pass lands, so that the table's length stays right if growing fails below.
            let (a, e) = (counter_lines(&c, 1), counter_lines(&c, 1 + NEW_COUNTERS));
            (added, erased) = (added + a, erased + e);
            self.len = self.len + a - e;
            if let Some(o) = &mut self.occupied {
                *o += a as u64;
            }
            if c[0] > 0 {
                // Only real device-memory exhaustion fails here (typed, where the runtime can tell): the
                // operations still waiting are not done, everything else is, and the table stays valid.
                self.resize(self.pool.saturating_mul(2).max(self.pool + c[0]))?;
            }
            sel = Some((retry, c[0] as usize));
        }
        Ok((added, erased))
    }

    /// One launch of [`chained_kernel`] (see [`Launch`]).
    pub(crate) fn launch(&self, l: Launch<'_>) {
        let mode = l.mode;
        let words = self.slab_words(self.pool);
        // Finds and counts bind the array only without atomics; changes bind it with atomics, and on CUDA
        // also without (plain first reads); Vulkan binds a buffer once.
        let read_only = matches!(mode, op::FIND | op::COUNT | op::GATHER);
        let plain = read_only || self.plain_reads;
        // A distinct dummy for each argument the launch leaves unused.
        let mut dummies = self.dummies.iter();
        let mut or_dummy = |h: Option<(&Handle, usize)>| match h {
            Some((h, len)) => (h.clone(), len.max(1)),
            None => (dummies.next().expect("a dummy per argument").clone(), 1),
        };
        let (atomic, atomic_len) = or_dummy((!read_only).then_some((&self.slabs, words)));
        let (plain_h, plain_len) = or_dummy(plain.then_some((&self.slabs, words)));
        let n = l.arrays.n.max(1);
        let ops = or_dummy(l.arrays.ops.map(|h| (h, n)));
        let values = or_dummy(l.arrays.values.map(|h| (h, n)));
        let sel = or_dummy(l.sel.map(|h| (h, l.m)));
        let out = or_dummy(l.out);
        let aux = or_dummy(l.aux);
        let retry = or_dummy(l.retry);
        let counters = or_dummy(l.counters.map(|h| (h, COUNTER_WORDS)));
        let bits = or_dummy(l.bits.map(|h| (h, l.m.div_ceil(32))));
        let gate = or_dummy(l.gate.map(|h| (h, 1)));
        // SAFETY: each buffer holds at least `len` elements (see below for how the kernel indexes them).
        let arg = |(h, len): (Handle, usize)| unsafe { ArrayArg::from_raw_parts(h, len) };
        // SAFETY: thread `t < m` reads operation `t` (or `sel[t] < n`) of arrays of `n`; it writes `out[q]` and
        // `aux[q]` (`q < n`), or (GATHER) `out[aux[q]..aux[q + 1]]`, `retry[< m]` and (compact finds)
        // `found_bits[< ceil(m / 32)]`. Slabs are addressed by bucket indices below `buckets` and links below
        // `buckets + pool`. Arguments a mode does not use are never indexed.
        // Launches of multimap inserts with more threads than the device holds at once take the entry held to
        // 32 registers a thread (see it): there, the cubes resident per multiprocessor set the rate. A smaller
        // launch is resident whole either way.
        macro_rules! launch {
            ($kernel:ident) => {
                $kernel::launch_unchecked::<L, R>(
                    &self.client,
                    cube_count(l.m.max(1)),
                    CubeDim::new_1d(CUBE_SIZE),
                    arg(ops),
                    ArrayArg::from_raw_parts(l.arrays.keys.clone(), n),
                    arg(values),
                    arg(sel),
                    l.m as u32,
                    ArrayArg::from_raw_parts(atomic, atomic_len),
                    ArrayArg::from_raw_parts(plain_h, plain_len),
                    ArrayArg::from_raw_parts(self.values.clone(), self.value_words()),
                    ArrayArg::from_raw_parts(self.bitmap.clone(), Self::bitmap_words(self.pool)),
                    self.pool,
                    arg(out),
                    arg(aux),
                    arg(retry),
                    arg(counters),
                    arg(bits),
                    arg(gate),
                    l.base as u32,
                    shape_scalars::<R>(self.shape()),
                    mode,
                    l.sel.is_some(),
                    plain,
                    l.phase,
                    self.resident,
                    self.tile,
                    l.compact,
                    l.gate.is_some(),
                )
            };
        }
        unsafe {
            if mode == op::INSERT && l.m as u64 > self.resident_tiles * self.tile as u64 {
                launch!(chained_insert_kernel_min_blocks_8)
            } else {
                launch!(chained_kernel)
            }
        }
    }
}
