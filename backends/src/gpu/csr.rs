//! CSR (HashGraph) tables on the device, 32- and 64-bit keys ([`Key32`], [`Key64`]) and values (issue 11): the build v1 of the
//! paper (count with one atomic per key, [`super::scan::exclusive_scan`], place with an atomic cursor per
//! vertex) and thread-per-query lookups (`count`, `find_all` as count, scan, gather). The vertex of a key is
//! `HashFamily::bucket(key, 0, vertices)`, the same hash as the CPU table (`crate::csr`), which is the oracle
//! in the tests. `CsrTable` builds one when its configuration names (or `Auto` finds) a GPU, through
//! [`DeviceCsr`]. Not yet here: the binned v2 build, tile-cooperative range reads, joins.

use super::layout::{same_words, same_words_vec};
use super::scan::exclusive_scan;
use super::{CUBE_SIZE, cube_count, fill_u32};
use crate::csr::FindAll;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::hash::{HashFamily, bucket_index, hash_key, hash_key32, seed_mix};
use hashtile_core::{Element, Error, Key, Result, Value};

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

/// Count pass: `counts[vertex(key)] += 1` for every key.
#[cube(launch_unchecked)]
pub fn csr_count_kernel<K: CsrKey>(
    keys: &Array<K::Word>,
    counts: &Array<Atomic<u32>>,
    vertices: u32,
    seed: u32,
    mix: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < keys.len() {
        let v = K::vertex(keys[pos], vertices, seed, mix);
        counts[v as usize].fetch_add(1u32);
    }
}

/// Place pass: each pair goes to `offsets[v] + cursor[v]++` of its vertex `v` (order within a vertex is the
/// atomics' order: unspecified).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn csr_place_kernel<K: CsrKey, V: CubePrimitive>(
    keys: &Array<K::Word>,
    values: &Array<V>,
    offsets: &Array<u32>,
    cursor: &Array<Atomic<u32>>,
    out_keys: &mut Array<K::Word>,
    out_values: &mut Array<V>,
    vertices: u32,
    seed: u32,
    mix: u32,
) {
    let pos = ABSOLUTE_POS;
    if pos < keys.len() {
        let key = keys[pos];
        let v = K::vertex(key, vertices, seed, mix) as usize;
        let at = (offsets[v] + cursor[v].fetch_add(1u32)) as usize;
        out_keys[at] = key;
        out_values[at] = values[pos];
    }
}

/// Lookup pass over one query per unit: with `gather` off, `out_counts[i]` = the matches of `queries[i]`; with
/// it on, the matching values go to `out_values[starts[i]..]`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn csr_lookup_kernel<K: CsrKey, V: CubePrimitive>(
    queries: &Array<K::Word>,
    offsets: &Array<u32>,
    keys: &Array<K::Word>,
    values: &Array<V>,
    out_counts: &mut Array<u32>,
    starts: &Array<u32>,
    out_values: &mut Array<V>,
    vertices: u32,
    seed: u32,
    mix: u32,
    #[comptime] gather: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos < queries.len() {
        let q = queries[pos];
        let v = K::vertex(q, vertices, seed, mix) as usize;
        let end = offsets[v + 1] as usize;
        let mut j = offsets[v] as usize;
        let mut found = u32::new(0);
        let mut out = 0usize;
        if comptime!(gather) {
            out = starts[pos] as usize;
        }
        while j < end {
            if keys[j] == q {
                if comptime!(gather) {
                    out_values[out] = values[j];
                    out += 1;
                }
                found += 1u32;
            }
            j += 1;
        }
        if comptime!(!gather) {
            out_counts[pos] = found;
        }
    }
}

/// A CSR table of `K::Word -> V` pairs on the device of `client` (`GpuCsr<R>`: 32-bit keys and values).
pub struct GpuCsr<R: Runtime, K: CsrKey = Key32, V: CsrValue = u32> {
    _pairs: std::marker::PhantomData<(K, V)>,
    client: ComputeClient<R>,
    vertices: u32,
    seed: u32,
    mix: u32,
    n: usize,
    offsets: Handle,
    keys: Handle,
    values: Handle,
}

/// A value type of device CSR tables (`u32`, `u64`).
pub trait CsrValue: CubePrimitive + CubeElement + hashtile_core::Value {}
impl CsrValue for u32 {}
impl CsrValue for u64 {}

impl<R: Runtime, K: CsrKey, V: CsrValue> GpuCsr<R, K, V> {
    /// Builds the table of `(keys[i], values[i])` with `vertices` vertices and hash family `family` (function 0),
    /// and waits for the device to finish it.
    pub fn build(
        client: &ComputeClient<R>,
        family: &HashFamily,
        vertices: u32,
        keys: &[K::Word],
        values: &[V],
    ) -> Result<Self> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        if vertices == 0 {
            return Err(Error::InvalidConfig(
                "a CSR table needs at least one vertex".into(),
            ));
        }
        let n = keys.len();
        let seed = family.seeds[0];
        let mix = seed_mix(seed);
        let vn = vertices as usize;
        // A one-word buffer stands in for an empty input (the kernels then do nothing).
        let (no_key, no_value) = ([K::Word::EMPTY], [V::ABSENT]);
        let kh = client.create_from_slice(K::Word::as_bytes(if keys.is_empty() {
            &no_key
        } else {
            keys
        }));
        let vh = client.create_from_slice(V::as_bytes(if values.is_empty() {
            &no_value
        } else {
            values
        }));
        let counts = client.empty(vn * 4);
        fill_u32(client, &counts, vn, 0);
        let (out_keys, out_values) = (
            client.empty(n.max(1) * size_of::<K::Word>()),
            client.empty(n.max(1) * size_of::<V>()),
        );
        if n > 0 {
            // SAFETY: indices are bounded by `n` and by `vertices` (`bucket_index` < vertices).
            unsafe {
                csr_count_kernel::launch_unchecked::<K, R>(
                    client,
                    cube_count(n),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(kh.clone(), n),
                    ArrayArg::from_raw_parts(counts.clone(), vn),
                    vertices,
                    seed,
                    mix,
                )
            }
        }
        let offsets = exclusive_scan(client, &counts, vn);
        if n > 0 {
            // The counts buffer becomes the cursor.
            fill_u32(client, &counts, vn, 0);
            // SAFETY: as above; `offsets[v] + cursor[v] < offsets[v + 1] <= n`.
            unsafe {
                csr_place_kernel::launch_unchecked::<K, V, R>(
                    client,
                    cube_count(n),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(kh, n),
                    ArrayArg::from_raw_parts(vh, n),
                    ArrayArg::from_raw_parts(offsets.clone(), vn + 1),
                    ArrayArg::from_raw_parts(counts, vn),
                    ArrayArg::from_raw_parts(out_keys.clone(), n),
                    ArrayArg::from_raw_parts(out_values.clone(), n),
                    vertices,
                    seed,
                    mix,
                )
            }
        }
        // The build returns a finished table, as the CPU one does: a device error surfaces here, and a caller
        // timing the build times the work, not its queueing.
        cubecl::future::block_on(client.sync())
            .map_err(|e| Error::Device(format!("CSR build: {e:?}")))?;
        Ok(Self {
            _pairs: std::marker::PhantomData,
            client: client.clone(),
            vertices,
            seed,
            mix,
            n,
            offsets,
            keys: out_keys,
            values: out_values,
        })
    }

    /// Number of pairs stored.
    pub fn len(&self) -> usize {
        self.n
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Queues the lookup kernel over `q` queries (`gather`: write values from `starts`).
    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &self,
        queries: &Handle,
        q: usize,
        out_counts: &Handle,
        starts: &Handle,
        out: &Handle,
        out_len: usize,
        gather: bool,
    ) {
        // SAFETY: indices are bounded by `q`, the table's offsets (`vertices + 1`, each at most `n`) and, with
        // `gather`, by `starts` (an exclusive scan of this table's counts for the same queries: `<= out_len`).
        unsafe {
            csr_lookup_kernel::launch_unchecked::<K, V, R>(
                &self.client,
                cube_count(q),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(queries.clone(), q),
                ArrayArg::from_raw_parts(self.offsets.clone(), self.vertices as usize + 1),
                ArrayArg::from_raw_parts(self.keys.clone(), self.n.max(1)),
                ArrayArg::from_raw_parts(self.values.clone(), self.n.max(1)),
                ArrayArg::from_raw_parts(out_counts.clone(), if gather { 1 } else { q }),
                ArrayArg::from_raw_parts(starts.clone(), if gather { q + 1 } else { 1 }),
                ArrayArg::from_raw_parts(out.clone(), out_len.max(1)),
                self.vertices,
                self.seed,
                self.mix,
                gather,
            )
        }
    }

    /// The queries' match counts, on the device (`q` words).
    fn counts_of(&self, queries: &Handle, q: usize) -> Handle {
        let counts = self.client.empty(q.max(1) * 4);
        // Two distinct stand-ins: wgpu mis-binds a buffer bound twice in one launch.
        let (no_starts, no_out) = (self.client.empty(4), self.client.empty(size_of::<V>()));
        self.lookup(queries, q, &counts, &no_starts, &no_out, 1, false);
        counts
    }

    /// How many values each query key has.
    pub fn count(&self, queries: &[K::Word]) -> Result<Vec<u32>> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let qh = self.client.create_from_slice(K::Word::as_bytes(queries));
        let counts = self.counts_of(&qh, queries.len());
        Ok(u32::from_bytes(&self.client.read_one_unchecked(counts))[..queries.len()].to_vec())
    }

    /// Every value of each query key: counts, an exclusive scan of them, then a gather pass.
    pub fn find_all(&self, queries: &[K::Word]) -> Result<FindAll<V>> {
        let q = queries.len();
        if q == 0 {
            return Ok(FindAll {
                offsets: vec![0],
                values: Vec::new(),
            });
        }
        let qh = self.client.create_from_slice(K::Word::as_bytes(queries));
        let counts = self.counts_of(&qh, q);
        let starts = exclusive_scan(&self.client, &counts, q);
        let starts_host =
            u32::from_bytes(&self.client.read_one_unchecked(starts.clone()))[..q + 1].to_vec();
        let total = starts_host[q] as usize;
        let out = self.client.empty(total.max(1) * size_of::<V>());
        let dummy = self.client.empty(4);
        self.lookup(&qh, q, &dummy, &starts, &out, total, true);
        let values = V::from_bytes(&self.client.read_one_unchecked(out))[..total].to_vec();
        Ok(FindAll {
            offsets: starts_host.into_iter().map(|s| s as usize).collect(),
            values,
        })
    }
}

impl<R: Runtime, K: CsrKey, V: CsrValue> GpuCsr<R, K, V> {
    /// The stored pairs, read back: by vertex, in an unspecified order within one (atomic placement).
    pub fn pairs(&self) -> Result<Vec<(K::Word, V)>> {
        if self.n == 0 {
            return Ok(Vec::new());
        }
        let keys = K::Word::from_bytes(&self.client.read_one_unchecked(self.keys.clone()))
            [..self.n]
            .to_vec();
        let values =
            V::from_bytes(&self.client.read_one_unchecked(self.values.clone()))[..self.n].to_vec();
        Ok(keys.into_iter().zip(values).collect())
    }
}

/// A device CSR table of the caller's `K -> V` pairs behind one runtime-free interface: what `CsrTable` holds for
/// a GPU backend. The table has the caller's widths, so keys and values cross as they are (`same_words`: no
/// copy, as `Engine` does for hash tables).
pub trait DeviceCsr<K: Key, V: Value>: Send + Sync {
    /// [`GpuCsr::count`].
    fn count(&self, queries: &[K]) -> Result<Vec<u32>>;
    /// [`GpuCsr::find_all`].
    fn find_all(&self, queries: &[K]) -> Result<FindAll<V>>;
    /// [`GpuCsr::pairs`].
    fn pairs(&self) -> Result<Vec<(K, V)>>;
}

/// `s` as the device table's words (the table was built for the caller's widths).
fn words<E: Element, W: Element>(s: &[E]) -> &[W] {
    same_words(s).expect("a device CSR table has its caller's key and value widths")
}

impl<R: Runtime, CK: CsrKey, CV: CsrValue, K: Key, V: Value> DeviceCsr<K, V> for GpuCsr<R, CK, CV> {
    fn count(&self, queries: &[K]) -> Result<Vec<u32>> {
        GpuCsr::count(self, words(queries))
    }
    fn find_all(&self, queries: &[K]) -> Result<FindAll<V>> {
        let FindAll { offsets, values } = GpuCsr::find_all(self, words(queries))?;
        Ok(FindAll {
            offsets,
            values: same_words_vec(values)
                .expect("a device CSR table has its caller's value width"),
        })
    }
    fn pairs(&self) -> Result<Vec<(K, V)>> {
        // Pairs are read back as two arrays and zipped anyway: one pass converts them.
        Ok(GpuCsr::pairs(self)?
            .into_iter()
            .map(|(k, v)| (K::narrow(k.widen()), V::narrow(v.widen())))
            .collect())
    }
}

/// Builds a device CSR table of the caller's `K -> V` pairs on `backend`, which the caller has checked is
/// available and not the CPU.
pub(crate) fn device_csr<K: Key, V: Value>(
    backend: crate::select::Backend,
    family: &HashFamily,
    vertices: u32,
    keys: &[K],
    values: &[V],
) -> Result<std::sync::Arc<dyn DeviceCsr<K, V>>> {
    #[allow(dead_code)]
    fn on<R: Runtime, K: Key, V: Value>(
        client: ComputeClient<R>,
        family: &HashFamily,
        vertices: u32,
        keys: &[K],
        values: &[V],
    ) -> Result<std::sync::Arc<dyn DeviceCsr<K, V>>> {
        fn build<R: Runtime, CK: CsrKey, CV: CsrValue, K: Key, V: Value>(
            c: &ComputeClient<R>,
            f: &HashFamily,
            v: u32,
            keys: &[K],
            values: &[V],
        ) -> Result<std::sync::Arc<dyn DeviceCsr<K, V>>> {
            let t = GpuCsr::<R, CK, CV>::build(c, f, v, words(keys), words(values))?;
            Ok(std::sync::Arc::new(t))
        }
        match (K::BITS, V::BITS) {
            (32, 32) => build::<R, Key32, u32, K, V>(&client, family, vertices, keys, values),
            (32, _) => build::<R, Key32, u64, K, V>(&client, family, vertices, keys, values),
            (_, 32) => build::<R, Key64, u32, K, V>(&client, family, vertices, keys, values),
            _ => build::<R, Key64, u64, K, V>(&client, family, vertices, keys, values),
        }
    }
    let _ = (family, vertices, keys, values);
    match backend {
        #[cfg(feature = "cuda")]
        crate::select::Backend::Cuda => {
            use cubecl::cuda::CudaRuntime;
            on(
                CudaRuntime::client(&Default::default()),
                family,
                vertices,
                keys,
                values,
            )
        }
        #[cfg(feature = "vulkan")]
        crate::select::Backend::Vulkan => {
            use cubecl::wgpu::WgpuRuntime;
            on(
                WgpuRuntime::client(&Default::default()),
                family,
                vertices,
                keys,
                values,
            )
        }
        b => Err(crate::table::unavailable(b)),
    }
}
