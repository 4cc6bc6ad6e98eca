//! CSR (HashGraph) tables on the device, 32- and 64-bit keys ([`Key32`], [`Key64`]) and values (issue 11):
//! [`GpuCsr`] builds by the paper's v1 or binned v2 ([`build`]), looks keys up with tiles of 1-32 lanes per
//! query ([`lookup`]: `count`; `find_all` as count, scan, gather), and [`join::GpuJoin`] joins two key columns
//! (probe or intersect). The vertex of a key is `HashFamily::bucket(key, 0, vertices)`, the same hash as the CPU
//! table (`crate::csr`), which is the oracle in the tests. `CsrTable` and `CsrJoin` use these when their
//! configuration names (or `Auto` finds) a GPU, through [`DeviceCsr`] and [`join::DeviceJoin`].

pub mod build;
pub mod join;
pub mod lookup;

use crate::csr::config::{CsrBuild, DeviceCsrParams, check_lookup_tile};
use crate::results::FindAll;
use crate::runtime::dispatch::{OnRuntime, on_device, shared_stager};
use crate::runtime::host_io::{BatchSizes, DeviceCache, HostLink, check_out_len};
use crate::runtime::host_memory::{PinnedAlloc, zeroed_answers};
use crate::runtime::launch::{CUBE_SIZE, cube_count, fill_u32};
use crate::runtime::scan::{exclusive_scan, total_u64};
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::{bytes_of, bytes_of_mut, same_words};
use build::{csr_bin_count_kernel, csr_bin_place_kernel, csr_bin_scatter_kernel};
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::hash::{HashFamily, bucket_index, hash_key, hash_key32, seed_mix};
use hashtile_core::{Element, Error, Key, Result, Value};
use lookup::{LookupMode, csr_lookup_kernel, mode_word};
use std::sync::Arc;

/// The key width of a device CSR table: how a key word hashes to its vertex (the host's
/// `HashFamily::bucket(key, 0, vertices)`). [`Key32`] and [`Key64`].
#[cube]
pub trait CsrKey: Send + Sync + 'static {
    /// A key as kernels and the host arrays hold it.
    type Word: Int + CubeElement + hashtile_core::Key;
    /// The key's vertex (`mix`: the seed's precomputed part, used by 32-bit keys).
    fn vertex(key: Self::Word, vertices: u32, seed: u32, mix: u32) -> u32;
}

/// 32-bit keys.
pub struct Key32;
/// 64-bit keys.
pub struct Key64;

#[cube]
impl CsrKey for Key32 {
    type Word = u32;
    fn vertex(key: u32, vertices: u32, seed: u32, mix: u32) -> u32 {
        bucket_index(hash_key32(key, seed, mix), vertices)
    }
}

#[cube]
impl CsrKey for Key64 {
    type Word = u64;
    #[allow(unused_variables)]
    fn vertex(key: u64, vertices: u32, seed: u32, mix: u32) -> u32 {
        let lo = (key & 0xffff_ffffu64) as u32;
        let hi = (key >> 32u64) as u32;
        bucket_index(hash_key(lo, hi, seed), vertices)
    }
}

/// A CSR table of `K::Word -> V` pairs on the device of `client` (`GpuCsr<R>`: 32-bit keys and values).
pub struct GpuCsr<R: HostTransfer, K: CsrKey = Key32, V: CsrValue = u32> {
    _pairs: std::marker::PhantomData<(K, V)>,
    client: ComputeClient<R>,
    /// Host transfers (CUDA: a stream and pinned staging buffers), through the host-I/O layer every family
    /// shares.
    stager: Arc<R::Stager>,
    /// The lookups' batch buffers, kept between calls.
    cache: DeviceCache,
    /// How host batches of queries are cut for the device.
    sizes: BatchSizes,
    /// Distinct one-word stand-ins for the lookup kernel's unused arguments (wgpu mis-binds a buffer bound
    /// twice in one launch).
    dummies: [Handle; 3],
    vertices: u32,
    seed: u32,
    mix: u32,
    n: usize,
    /// Lanes per query in lookups (1: a thread per query).
    tile: u32,
    offsets: Handle,
    keys: Handle,
    values: Handle,
}

/// A value type of device CSR tables (`u32`, `u64`).
pub trait CsrValue: CubePrimitive + CubeElement + hashtile_core::Value {}
impl CsrValue for u32 {}
impl CsrValue for u64 {}

/// Lanes per query of a lookup: `requested` (0: automatic, see [`crate::csr::CsrConfig::lookup_tile`]) checked
/// and clamped to the device's plane (a tile cannot span planes).
fn lookup_tile<R: Runtime>(client: &ComputeClient<R>, requested: u32) -> Result<u32> {
    check_lookup_tile(requested)?;
    let plane = client.properties().hardware.plane_size_max.max(1);
    // Automatic: 4 lanes. Measured on the H100 (2^25 keys, range factor 1; docs/PERFORMANCE.md): the best or
    // within 5% of it for count and find_all at 1 and at 32 duplicates per key, where a thread per query
    // gathers 32 values 4.6x slower and a 32-lane tile wastes lanes on short ranges.
    Ok(match requested {
        0 => 4.min(plane),
        t => t.min(plane),
    })
}

impl<R: HostTransfer, K: CsrKey, V: CsrValue> GpuCsr<R, K, V> {
    /// Builds the table of `(keys[i], values[i])` with `vertices` vertices and hash family `family` (function
    /// 0) by `method`, and waits for the device to finish it. The pairs are copied in chunks through the
    /// host-I/O layer's transfers, the keys first, each chunk of keys counted as it lands.
    pub fn build(
        client: &ComputeClient<R>,
        family: &HashFamily,
        vertices: u32,
        keys: &[K::Word],
        values: &[V],
        method: CsrBuild,
    ) -> Result<Self> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        check_build(vertices, method)?;
        let stager = shared_stager(client)?;
        let n = keys.len();
        let (seed, kb) = (family.seeds[0], size_of::<K::Word>());
        let (groups, shift) = grouping(method, vertices);
        let counts = client.empty(groups * 4);
        fill_u32(client, &counts, groups, 0);
        let dsts = [
            client.empty(n.max(1) * kb),
            client.empty(n.max(1) * size_of::<V>()),
        ];
        let h = R::upload_chunked(
            client,
            &stager,
            &[bytes_of(keys), bytes_of(values)],
            &dsts,
            BatchSizes::DEFAULT.chunk * kb,
            &mut |src, off, len, h| {
                if src == 0 {
                    let kh = h.clone().offset_start(off as u64);
                    let g = Grouping {
                        counts: &counts,
                        groups,
                        shift,
                    };
                    count_groups::<R, K>(client, &kh, len / kb, &g, vertices, seed);
                }
            },
        )?;
        Self::build_counted(
            client,
            family,
            vertices,
            (&h[0], &h[1], n),
            method,
            Some(counts),
        )
    }

    /// [`GpuCsr::build`] from `n` keys and values already on the device (buffers of at least one word each).
    pub fn build_device(
        client: &ComputeClient<R>,
        family: &HashFamily,
        vertices: u32,
        kh: &Handle,
        vh: &Handle,
        n: usize,
        method: CsrBuild,
    ) -> Result<Self> {
        Self::build_counted(client, family, vertices, (kh, vh, n), method, None)
    }

    /// [`GpuCsr::build_device`], the keys' counts per group ([`grouping`]) already queued into `counted`
    /// where given.
    fn build_counted(
        client: &ComputeClient<R>,
        family: &HashFamily,
        vertices: u32,
        (kh, vh, n): (&Handle, &Handle, usize),
        method: CsrBuild,
        counted: Option<Handle>,
    ) -> Result<Self> {
        check_build(vertices, method)?;
        // Host transfers (the table's later lookups from host data) go through the runtime's one stager.
        let stager = shared_stager(client)?;
        let seed = family.seeds[0];
        let mix = seed_mix(seed);
        let vn = vertices as usize;
        let (out_keys, out_values) = (
            client.empty(n.max(1) * size_of::<K::Word>()),
            client.empty(n.max(1) * size_of::<V>()),
        );
        let (groups, shift) = grouping(method, vertices);
        let counts = counted.unwrap_or_else(|| {
            let counts = client.empty(groups * 4);
            fill_u32(client, &counts, groups, 0);
            let g = Grouping {
                counts: &counts,
                groups,
                shift,
            };
            count_groups::<R, K>(client, kh, n, &g, vertices, seed);
            counts
        });
        let g = Grouping {
            counts: &counts,
            groups,
            shift,
        };
        let offsets = if shift > 0 {
            let offsets = client.empty((vn + 1) * 4);
            build_v2::<R, K, V>(
                client,
                (kh, vh, n),
                &g,
                &offsets,
                (&out_keys, &out_values),
                vertices,
                seed,
                mix,
            );
            offsets
        } else {
            let to = ScatterTo {
                keys: &out_keys,
                values: &out_values,
                pairs: &client.empty(8),
                packed: false,
            };
            scan_scatter::<R, K, V>(client, kh, vh, n, to, &g, vertices, seed, mix)
        };
        // The build returns a finished table, as the CPU one does: a device error surfaces here, and a caller
        // timing the build times the work, not its queueing.
        cubecl::future::block_on(client.sync())
            .map_err(|e| Error::Device(format!("CSR build: {e:?}")))?;
        Ok(Self {
            _pairs: std::marker::PhantomData,
            client: client.clone(),
            stager,
            cache: DeviceCache::default(),
            sizes: BatchSizes::DEFAULT,
            dummies: std::array::from_fn(|_| client.empty(8)),
            vertices,
            seed,
            mix,
            n,
            tile: 1,
            offsets,
            keys: out_keys,
            values: out_values,
        })
    }

    /// This table with its lookups from host queries cut into device batches of `keys` keys (copied in chunks
    /// of half that; `None`: the defaults, 2^26 keys per batch). Small values are for tests of the boundaries.
    pub fn with_batch_keys(mut self, keys: Option<usize>) -> Self {
        self.sizes = BatchSizes::from_keys(keys);
        self
    }

    /// What the host-I/O layer needs of this table for one call.
    fn link(&self) -> HostLink<'_, R> {
        HostLink {
            client: &self.client,
            stager: &self.stager,
            cache: &self.cache,
            sizes: self.sizes,
        }
    }

    /// This table with lookups run by tiles of `tile` lanes per query (0: automatic; a power of two up to 32,
    /// at most the device's plane size: wider requests run as wide as the plane).
    pub fn with_lookup_tile(mut self, tile: u32) -> Result<Self> {
        self.tile = lookup_tile(&self.client, tile)?;
        Ok(self)
    }

    /// Lanes per query in this table's lookups.
    pub fn tile(&self) -> u32 {
        self.tile
    }

    /// Number of pairs stored.
    pub fn len(&self) -> usize {
        self.n
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The client the table lives on.
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Copies the first `dst.len()` elements of device buffer `src` into `dst`, after the queued kernels.
    pub(crate) fn download<E: Element>(&self, src: &Handle, dst: &mut [E]) -> Result<()> {
        self.link().download(src, dst)
    }

    /// Queues the lookup kernel over `q` queries (`mode`: what it writes; `starts` and the outputs are only
    /// read or written by the modes that use them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lookup(
        &self,
        queries: &Handle,
        q: usize,
        mode: LookupMode,
        out_counts: &Handle,
        starts: &Handle,
        out: &Handle,
        out_index: &Handle,
        out_len: usize,
    ) {
        let gather = mode != LookupMode::Count;
        let tile = self.tile as usize;
        // SAFETY: indices are bounded by `q`, the table's offsets (`vertices + 1`, each at most `n`) and, when
        // gathering, by `starts` (an exclusive scan of this table's counts for the same queries: `<= out_len`).
        unsafe {
            csr_lookup_kernel::launch_unchecked::<K, V, R>(
                &self.client,
                cube_count(q * tile),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(queries.clone(), q),
                ArrayArg::from_raw_parts(self.offsets.clone(), self.vertices as usize + 1),
                ArrayArg::from_raw_parts(self.keys.clone(), self.n.max(1)),
                ArrayArg::from_raw_parts(self.values.clone(), self.n.max(1)),
                ArrayArg::from_raw_parts(out_counts.clone(), if gather { 1 } else { q }),
                ArrayArg::from_raw_parts(starts.clone(), if gather { q + 1 } else { 1 }),
                ArrayArg::from_raw_parts(out.clone(), out_len.max(1)),
                ArrayArg::from_raw_parts(
                    out_index.clone(),
                    if mode == LookupMode::Pairs {
                        out_len.max(1)
                    } else {
                        1
                    },
                ),
                self.vertices,
                self.seed,
                self.mix,
                self.tile,
                mode_word(mode),
            )
        }
    }

    /// The queries' match counts, on the device (`q` words), queued.
    pub(crate) fn counts_of(&self, queries: &Handle, q: usize) -> Handle {
        let counts = self.client.empty(q.max(1) * 4);
        self.queue_counts(queries, q, &counts);
        counts
    }

    /// Queues the match counts of `q` queries into `counts`.
    fn queue_counts(&self, queries: &Handle, q: usize, counts: &Handle) {
        let [no_starts, no_out, no_index] = &self.dummies;
        self.lookup(
            queries,
            q,
            LookupMode::Count,
            counts,
            no_starts,
            no_out,
            no_index,
            1,
        );
    }

    /// How many values each query key has ([`GpuCsr::count_into`] into a fresh vector).
    pub fn count(&self, queries: &[K::Word]) -> Result<Vec<u32>> {
        let mut out = zeroed_answers(queries.len());
        self.count_into(queries, &mut out)?;
        Ok(out)
    }

    /// How many values each query key has, into `out` (as long as `queries`): the queries are copied in chunks
    /// through the host-I/O layer, each chunk counted as it lands, the counts copied straight into `out`.
    pub fn count_into(&self, queries: &[K::Word], out: &mut [u32]) -> Result<()> {
        check_out_len(queries.len(), out.len())?;
        self.link().map_keys(
            bytes_of(queries),
            size_of::<K::Word>(),
            bytes_of_mut(out),
            None,
            |c| self.queue_counts(c.keys, c.n, c.out),
        )
    }

    /// Every value of each query key ([`GpuCsr::find_all_into`] into a fresh answer).
    pub fn find_all(&self, queries: &[K::Word]) -> Result<FindAll<V>> {
        let mut out = FindAll::default();
        self.find_all_into(queries, &mut out)?;
        Ok(out)
    }

    /// Every value of each query key into `out`, reusing its allocations (its previous contents are replaced):
    /// counts as the queries land, an exclusive scan of them, then a gather pass; the offsets and values
    /// copied straight into `out`'s vectors through the host-I/O layer. On an error, `out`'s contents are
    /// unspecified.
    pub fn find_all_into(&self, queries: &[K::Word], out: &mut FindAll<V>) -> Result<()> {
        self.link().find_all_into(
            bytes_of(queries),
            size_of::<K::Word>(),
            |c| self.queue_counts(c.keys, c.n, c.out),
            |qh, q, starts, values, total| self.gather_into(qh, q, starts, values, total),
            out,
        )
    }

    /// The second half of a `find_all` on device queries, queued: the matching values of query `i` go to
    /// `out[starts[i]..starts[i + 1]]` (`starts`, `total`: from [`GpuCsr::find_all_plan`] for the same queries).
    pub fn gather_into(
        &self,
        queries: &Handle,
        q: usize,
        starts: &Handle,
        out: &Handle,
        total: usize,
    ) {
        let (no_counts, no_index) = (self.client.empty(4), self.client.empty(4));
        self.lookup(
            queries,
            q,
            LookupMode::Values,
            &no_counts,
            starts,
            out,
            &no_index,
            total,
        );
    }

    /// The first half of a `find_all` on device queries: the exclusive scan of their counts (`q + 1` words)
    /// and the number of values, checked to fit 32-bit offsets.
    pub fn find_all_plan(&self, queries: &Handle, q: usize) -> Result<(Handle, usize)> {
        let counts = self.counts_of(queries, q);
        let total = checked_total(&self.client, &counts, q, "find_all")?;
        Ok((exclusive_scan(&self.client, &counts, q), total))
    }
}

/// The sum of `n` device counts, as a `usize`, or a typed error when 32-bit offsets cannot address it.
pub(crate) fn checked_total<R: Runtime>(
    client: &ComputeClient<R>,
    counts: &Handle,
    n: usize,
    what: &str,
) -> Result<usize> {
    let total = total_u64(client, counts, n);
    if total > u32::MAX as u64 {
        return Err(Error::InvalidConfig(format!(
            "{what} yields {total} results; device CSR offsets are 32-bit (at most 2^32 - 1): split the queries"
        )));
    }
    Ok(total as usize)
}

/// Checks a build's hash range and method.
fn check_build(vertices: u32, method: CsrBuild) -> Result<()> {
    if vertices == 0 {
        return Err(Error::InvalidConfig(
            "a CSR table needs at least one vertex".into(),
        ));
    }
    method.validate()
}

/// The groups a build counts its keys into: `(groups, shift)`, a group being `2^shift` consecutive vertices
/// (v2: a bin; v1, and v2 over a hash range within one bin of 2^32, whose bin arithmetic is 32-bit: one
/// vertex).
fn grouping(method: CsrBuild, vertices: u32) -> (usize, u32) {
    match method {
        CsrBuild::V2 { bin_vertices } if vertices <= u32::MAX - bin_vertices => (
            (vertices as usize).div_ceil(bin_vertices as usize),
            bin_vertices.trailing_zeros(),
        ),
        _ => (vertices as usize, 0),
    }
}

/// A build's per-group key counts (zeroed before the first [`count_groups`]).
struct Grouping<'a> {
    counts: &'a Handle,
    groups: usize,
    shift: u32,
}

/// The count pass both builds share, queued: adds the `n` keys of `kh` to their groups' counts (a chunk at a
/// time as a host build's keys land, or all at once).
fn count_groups<R: Runtime, K: CsrKey>(
    client: &ComputeClient<R>,
    kh: &Handle,
    n: usize,
    g: &Grouping<'_>,
    vertices: u32,
    seed: u32,
) {
    if n == 0 {
        return;
    }
    // SAFETY: indices are bounded by `n` and by `groups` (a vertex is < vertices, so its group < groups).
    unsafe {
        csr_bin_count_kernel::launch_unchecked::<K, R>(
            client,
            cube_count(n),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(kh.clone(), n),
            ArrayArg::from_raw_parts(g.counts.clone(), g.groups),
            vertices,
            seed,
            seed_mix(seed),
            g.shift,
        )
    }
}

/// Where a scatter pass puts each pair: the arrays it writes and whether 32-bit pairs go as one packed word.
struct ScatterTo<'a> {
    keys: &'a Handle,
    values: &'a Handle,
    pairs: &'a Handle,
    packed: bool,
}

/// The rest of the pass both builds share, queued after the counts ([`count_groups`]): scans the counts into
/// `groups + 1` offsets and moves every pair to its group's next slot of `to` (an atomic cursor per group;
/// v1 writes straight into the table's arrays, one vertex per group). Returns the offsets.
#[allow(clippy::too_many_arguments)]
fn scan_scatter<R: Runtime, K: CsrKey, V: CsrValue>(
    client: &ComputeClient<R>,
    kh: &Handle,
    vh: &Handle,
    n: usize,
    to: ScatterTo<'_>,
    g: &Grouping<'_>,
    vertices: u32,
    seed: u32,
    mix: u32,
) -> Handle {
    let (counts, groups, shift) = (g.counts, g.groups, g.shift);
    let offsets = exclusive_scan(client, counts, groups);
    if n > 0 {
        // The counts buffer becomes the cursor.
        fill_u32(client, counts, groups, 0);
        let len = |used: bool| if used { n } else { 1 };
        // SAFETY: as in `count_groups`; `offsets[g] + cursor[g] < offsets[g + 1] <= n`.
        unsafe {
            csr_bin_scatter_kernel::launch_unchecked::<K, V, R>(
                client,
                cube_count(n.div_ceil(build::SCATTER_PER_UNIT)),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(kh.clone(), n),
                ArrayArg::from_raw_parts(vh.clone(), n),
                ArrayArg::from_raw_parts(offsets.clone(), groups + 1),
                ArrayArg::from_raw_parts(counts.clone(), groups),
                ArrayArg::from_raw_parts(to.keys.clone(), len(!to.packed)),
                ArrayArg::from_raw_parts(to.values.clone(), len(!to.packed)),
                ArrayArg::from_raw_parts(to.pairs.clone(), len(to.packed)),
                vertices,
                seed,
                mix,
                shift,
                to.packed,
            )
        }
    }
    offsets
}

/// The v2 build, queued (bins of `2^g.shift` vertices, counted into `g`): the shared pass into a binned copy,
/// then one cube per bin writes its offsets and places its pairs.
#[allow(clippy::too_many_arguments)]
fn build_v2<R: Runtime, K: CsrKey, V: CsrValue>(
    client: &ComputeClient<R>,
    (kh, vh, n): (&Handle, &Handle, usize),
    g: &Grouping<'_>,
    offsets: &Handle,
    (out_keys, out_values): (&Handle, &Handle),
    vertices: u32,
    seed: u32,
    mix: u32,
) {
    let bins = g.groups;
    let bin_vertices = 1u32 << g.shift;
    // 32-bit keys and values travel as one word through the bins.
    let packed = size_of::<K::Word>() == 4 && size_of::<V>() == 4;
    let (binned_keys, binned_values, binned_pairs) = if packed {
        (client.empty(8), client.empty(8), client.empty(n.max(1) * 8))
    } else {
        (
            client.empty(n.max(1) * size_of::<K::Word>()),
            client.empty(n.max(1) * size_of::<V>()),
            client.empty(8),
        )
    };
    let to = ScatterTo {
        keys: &binned_keys,
        values: &binned_values,
        pairs: &binned_pairs,
        packed,
    };
    let bin_offsets = scan_scatter::<R, K, V>(client, kh, vh, n, to, g, vertices, seed, mix);
    let len = |used: bool| if used { n.max(1) } else { 1 };
    // SAFETY: one cube per bin; a bin's keys lie in `bin_offsets[b]..bin_offsets[b + 1]` and hash into its
    // `bin_vertices` vertices (the shared counters), and its outputs into the same range of the outputs.
    unsafe {
        csr_bin_place_kernel::launch_unchecked::<K, V, R>(
            client,
            cube_count(bins * CUBE_SIZE as usize),
            CubeDim::new_1d(CUBE_SIZE),
            ArrayArg::from_raw_parts(binned_keys, len(!packed)),
            ArrayArg::from_raw_parts(binned_values, len(!packed)),
            ArrayArg::from_raw_parts(binned_pairs, len(packed)),
            ArrayArg::from_raw_parts(bin_offsets, bins + 1),
            ArrayArg::from_raw_parts(offsets.clone(), vertices as usize + 1),
            ArrayArg::from_raw_parts(out_keys.clone(), n.max(1)),
            ArrayArg::from_raw_parts(out_values.clone(), n.max(1)),
            vertices,
            seed,
            mix,
            bin_vertices,
            packed,
        )
    }
}

impl<R: HostTransfer, K: CsrKey, V: CsrValue> GpuCsr<R, K, V> {
    /// The stored pairs, read back: by vertex, in an unspecified order within one (atomic placement).
    pub fn pairs(&self) -> Result<Vec<(K::Word, V)>> {
        if self.n == 0 {
            return Ok(Vec::new());
        }
        let mut keys = vec![K::Word::default(); self.n];
        self.download(&self.keys, &mut keys)?;
        let mut values = vec![V::default(); self.n];
        self.download(&self.values, &mut values)?;
        Ok(keys.into_iter().zip(values).collect())
    }
}

/// A device CSR table of the caller's `K -> V` pairs behind one runtime-free interface: what `CsrTable` holds for
/// a GPU backend. The table has the caller's widths, so keys and values cross as they are (`same_words`: no
/// copy, as `Engine` does for hash tables).
pub trait DeviceCsr<K: Key, V: Value>: Send + Sync {
    /// [`GpuCsr::count_into`].
    fn count_into(&self, queries: &[K], out: &mut [u32]) -> Result<()>;
    /// [`GpuCsr::find_all_into`].
    fn find_all_into(&self, queries: &[K], out: &mut FindAll<V>) -> Result<()>;
    /// [`GpuCsr::pairs`].
    fn pairs(&self) -> Result<Vec<(K, V)>>;
    /// Page-locked host memory on the table's device (its stager's), `None` where the runtime has none.
    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc>;
}

/// `s` as the device table's words (the table was built for the caller's widths).
fn words<E: Element, W: Element>(s: &[E]) -> &[W] {
    same_words(s).expect("a device CSR table has its caller's key and value widths")
}

impl<R: HostTransfer, CK: CsrKey, CV: CsrValue, K: Key, V: Value> DeviceCsr<K, V>
    for GpuCsr<R, CK, CV>
{
    fn count_into(&self, queries: &[K], out: &mut [u32]) -> Result<()> {
        GpuCsr::count_into(self, words(queries), out)
    }
    fn find_all_into(&self, queries: &[K], out: &mut FindAll<V>) -> Result<()> {
        // In place for the table's own value type; other types of its width (signed, newtypes) convert.
        crate::runtime::words::with_find_all_words::<V, CV>(out, |o| {
            GpuCsr::find_all_into(self, words(queries), o)
        })
    }
    fn pairs(&self) -> Result<Vec<(K, V)>> {
        // Pairs are read back as two arrays and zipped anyway: one pass converts them.
        Ok(GpuCsr::pairs(self)?
            .into_iter()
            .map(|(k, v)| (K::narrow(k.widen()), V::narrow(v.widen())))
            .collect())
    }
    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        R::alloc_pinned(&self.stager, bytes)
    }
}

/// Builds a device CSR table of the caller's `K -> V` pairs on `backend`, which the caller has checked is
/// available and not the CPU.
pub(crate) fn device_csr<K: Key, V: Value>(
    backend: crate::runtime::select::Backend,
    p: DeviceCsrParams,
    keys: &[K],
    values: &[V],
    batch_keys: Option<usize>,
) -> Result<std::sync::Arc<dyn DeviceCsr<K, V>>> {
    struct Build<'a, K, V> {
        p: DeviceCsrParams,
        keys: &'a [K],
        values: &'a [V],
        batch_keys: Option<usize>,
    }
    impl<K: Key, V: Value> OnRuntime for Build<'_, K, V> {
        type Out = std::sync::Arc<dyn DeviceCsr<K, V>>;
        fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<Self::Out> {
            fn build<R: HostTransfer, CK: CsrKey, CV: CsrValue, K: Key, V: Value>(
                c: &ComputeClient<R>,
                p: DeviceCsrParams,
                (keys, values): (&[K], &[V]),
                batch_keys: Option<usize>,
            ) -> Result<std::sync::Arc<dyn DeviceCsr<K, V>>> {
                let t = GpuCsr::<R, CK, CV>::build(
                    c,
                    &p.family,
                    p.vertices,
                    words(keys),
                    words(values),
                    p.build,
                )?
                .with_lookup_tile(p.lookup_tile)?
                .with_batch_keys(batch_keys);
                Ok(std::sync::Arc::new(t))
            }
            let (p, kv, b) = (self.p, (self.keys, self.values), self.batch_keys);
            match (K::BITS, V::BITS) {
                (32, 32) => build::<R, Key32, u32, K, V>(&client, p, kv, b),
                (32, _) => build::<R, Key32, u64, K, V>(&client, p, kv, b),
                (_, 32) => build::<R, Key64, u32, K, V>(&client, p, kv, b),
                _ => build::<R, Key64, u64, K, V>(&client, p, kv, b),
            }
        }
    }
    let p_device = p.device;
    let work = Build {
        p,
        keys,
        values,
        batch_keys,
    };
    on_device(backend, p_device, work)
}
