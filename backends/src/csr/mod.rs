//! Static CSR hash tables (HashGraph, `../shared/papers/hashgraph-csr-hash-tables.txt`): the hash values are the
//! vertices of a graph in compressed-sparse-row form. A build **counts** the keys that hash to each vertex,
//! **prefix-sums** the counts into offsets, and **places** every pair in its vertex's contiguous range. There are
//! no empty slots (so no sentinel key: every bit pattern is a key), no probing past a key's own range, and
//! duplicate keys cost nothing extra: the table is a multimap.
//!
//! The number of vertices (the hash range) is the load knob; the paper uses N/2 .. 2N for N keys.
//!
//! Backends: the CPU build (also the GPU one's oracle) places pairs in input order within a vertex (a parallel
//! sort by `(vertex, position)`), so its layout is deterministic; the device build (`gpu::csr::GpuCsr`, 32- and
//! 64-bit keys and values; [`CsrBuild`]: the paper's v1 or binned v2) places with atomics. The order of a key's
//! values in [`CsrTable::find_all`] is therefore **unspecified** in the API; compare them as multisets. `Auto`
//! picks a GPU when one is there (as `HashTable` does) and the CPU otherwise; joins run where tables do.
//!
//! ```
//! use hashtile_backends::csr::{CsrConfig, CsrTable, JoinMethod, CsrJoin};
//!
//! let keys = [7u32, 3, 7, 9, 7];
//! let values = [70u32, 30, 71, 90, 72];
//! let t = CsrTable::build(&CsrConfig::default(), &keys, &values)?;
//! assert_eq!(t.count(&[7, 3, 5])?, vec![3, 1, 0]);
//! let all = t.find_all(&[7, 5])?;
//! assert_eq!(all.offsets, vec![0, 3, 3]);
//! let mut sevens = all.values.clone();
//! sevens.sort();
//! assert_eq!(sevens, vec![70, 71, 72]);
//!
//! // A hash join: the matching (left index, right index) pairs; the size comes first.
//! let join = CsrJoin::plan(&CsrConfig::default(), &keys, &[9u32, 7], JoinMethod::Probe)?;
//! assert_eq!(join.len(), 4);
//! let (mut left, mut right) = (vec![0u32; join.len()], vec![0u32; join.len()]);
//! join.write_into(&mut left, &mut right)?;
//! let mut pairs: Vec<(u32, u32)> = left.into_iter().zip(right).collect();
//! pairs.sort();
//! assert_eq!(pairs, vec![(0, 1), (2, 1), (3, 0), (4, 1)]);
//! # Ok::<(), hashtile_core::Error>(())
//! ```

pub mod config;
pub mod cpu;
pub mod gpu;

use crate::results::FindAll;
use crate::runtime::dispatch::{TableStream, table_stream};
use crate::runtime::host_io::check_out_len;
use crate::runtime::host_memory::{PinnedBuffer, zeroed_answers};
pub use config::{CsrBuild, CsrConfig, DeviceCsrParams, JoinMethod, check_lookup_tile};
use cpu::{HostCsr, HostJoin, intersect_vertex};

use crate::csr::gpu::DeviceCsr;
use crate::csr::gpu::join::DeviceJoin;
use crate::runtime::select::Backend;
use hashtile_core::{Element, Error, HashFamily, Key, Result, Value};
use rayon::prelude::*;
use std::sync::Arc;

/// A static CSR hash table (multimap) of `K -> V` pairs, on the CPU or a GPU ([`CsrConfig::backend`]).
#[derive(Clone)]
pub struct CsrTable<K: Key, V: Value> {
    vertices: u32,
    len: usize,
    store: Store<K, V>,
    /// The CubeCL stream every call runs on, whichever thread calls (`dispatch::table_stream`, NOTES.md D38),
    /// shared by the table's clones.
    stream: Arc<TableStream>,
}

/// Where a table's pairs live.
#[derive(Clone)]
enum Store<K: Key, V: Value> {
    Host(HostCsr<K, V>),
    /// A device table of the same widths.
    Device(Backend, Arc<dyn DeviceCsr<K, V>>),
}

impl<K: Key, V: Value> std::fmt::Debug for CsrTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrTable")
            .field("backend", &self.backend())
            .field("vertices", &self.vertices)
            .field("len", &self.len)
            .finish()
    }
}

impl<K: Key, V: Value> CsrTable<K, V> {
    /// Builds the table of `(keys[i], values[i])`: count, prefix sum, place. Duplicate keys are all kept.
    pub fn build(cfg: &CsrConfig, keys: &[K], values: &[V]) -> Result<Self> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                what: "values",
                got: values.len(),
                expected: keys.len(),
            });
        }
        let vertices = cfg.vertices_for(keys.len())?;
        cfg.check_knobs()?;
        let family = HashFamily::new(cfg.seed);
        let stream = table_stream();
        let store = stream.id().executes(|| -> Result<Store<K, V>> {
            Ok(match cfg.backend_for()? {
                Backend::Cpu => Store::Host(HostCsr::build(family, vertices, keys, values)),
                b => Store::Device(
                    b,
                    crate::csr::gpu::device_csr(
                        b,
                        cfg.device_params(family, vertices)?,
                        keys,
                        values,
                        cfg.batch_keys,
                    )?,
                ),
            })
        })?;
        Ok(Self {
            vertices,
            len: keys.len(),
            store,
            stream: Arc::new(stream),
        })
    }

    /// Number of vertices (the hash range).
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// Number of pairs stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no pair is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backend the table lives on.
    pub fn backend(&self) -> Backend {
        match &self.store {
            Store::Host(_) => Backend::Cpu,
            Store::Device(b, _) => *b,
        }
    }

    /// How many values each query key has (0 when absent).
    pub fn count(&self, queries: &[K]) -> Result<Vec<u32>> {
        let mut out = zeroed_answers(queries.len());
        self.count_into(queries, &mut out)?;
        Ok(out)
    }

    /// How many values each query key has (0 when absent), into `out` (as long as `queries`; on GPUs copied
    /// straight there).
    pub fn count_into(&self, queries: &[K], out: &mut [u32]) -> Result<()> {
        check_out_len(queries.len(), out.len())?;
        match &self.store {
            Store::Host(h) => {
                h.count_into(queries, out);
                Ok(())
            }
            Store::Device(_, d) => self.stream.id().executes(|| d.count_into(queries, out)),
        }
    }

    /// Every value of each query key (multimap semantics; the order of one key's values is unspecified):
    /// [`CsrTable::find_all_into`] into a fresh answer.
    pub fn find_all(&self, queries: &[K]) -> Result<FindAll<V>> {
        let mut out = FindAll::default();
        self.find_all_into(queries, &mut out)?;
        Ok(out)
    }

    /// Every value of each query key into `out`, reusing its allocations (its previous contents are replaced):
    /// `out.values[out.offsets[i]..out.offsets[i + 1]]` are query `i`'s, in an unspecified order. Keep one
    /// `out` for batch after batch: on GPUs the offsets and values are copied straight into its vectors, whose
    /// memory a previous call has touched already (the first touch of fresh memory costs most of a large
    /// [`CsrTable::find_all`]). On an error, `out`'s contents are unspecified.
    pub fn find_all_into(&self, queries: &[K], out: &mut FindAll<V>) -> Result<()> {
        match &self.store {
            Store::Host(h) => h.find_all_into(queries, out),
            Store::Device(_, d) => self.stream.id().executes(|| d.find_all_into(queries, out)),
        }
    }

    /// A host buffer of `n` elements in page-locked memory on the table's device when its backend has it
    /// (CUDA), else ordinary memory: the table's lookups move it at the full bus rate, as
    /// [`HashTable::pinned_buffer`](crate::HashTable::pinned_buffer)'s.
    ///
    /// ```
    /// use hashtile_backends::csr::{CsrConfig, CsrTable};
    /// use hashtile_backends::{Backend, BackendChoice};
    /// let cfg = CsrConfig::default().backend(BackendChoice::Exactly(Backend::Cpu));
    /// let t: CsrTable<u32, u32> = CsrTable::build(&cfg, &[7, 7, 3], &[70, 71, 30])?;
    /// let mut queries = t.pinned_buffer::<u32>(2);
    /// queries.copy_from_slice(&[7, 9]);
    /// let mut counts = t.pinned_buffer::<u32>(2);
    /// t.count_into(&queries, &mut counts)?;
    /// assert_eq!(&counts[..], &[2, 0]);
    /// # Ok::<(), hashtile_core::Error>(())
    /// ```
    pub fn pinned_buffer<E: Element>(&self, n: usize) -> PinnedBuffer<E> {
        let alloc = match &self.store {
            Store::Host(_) => None,
            Store::Device(_, d) => d.alloc_pinned(n * size_of::<E>()),
        };
        PinnedBuffer::from_alloc(alloc, n)
    }

    /// The stored pairs (CPU: in placement order, vertex by vertex; GPU: by vertex, in an unspecified order
    /// within one).
    pub fn pairs(&self) -> Result<Vec<(K, V)>> {
        match &self.store {
            Store::Host(h) => Ok(h.pairs()),
            Store::Device(_, d) => self.stream.id().executes(|| d.pairs()),
        }
    }
}

/// A hash join of two key columns: every `(i, j)` with `left[i] == right[j]`. [`CsrJoin::plan`] builds the
/// tables and counts the matches, so that the caller can allocate the output ([`CsrJoin::len`]) before
/// [`CsrJoin::write_into`] fills it. The order of the pairs is unspecified. The join runs where
/// [`CsrConfig::backend`] resolves to (`Auto`: a GPU when one is there).
#[derive(Clone)]
pub struct CsrJoin<K: Key> {
    store: JoinStore<K>,
    /// Number of matching pairs.
    pairs: usize,
    /// The stream the join's device work runs on (as [`CsrTable`]'s), shared by its clones.
    stream: Arc<TableStream>,
}

/// Where a planned join lives.
#[derive(Clone)]
enum JoinStore<K: Key> {
    Host(Box<HostJoin<K>>),
    Device(Backend, Arc<dyn DeviceJoin>),
}

impl<K: Key> std::fmt::Debug for CsrJoin<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrJoin")
            .field("backend", &self.backend())
            .field("pairs", &self.pairs)
            .finish()
    }
}

impl<K: Key> CsrJoin<K> {
    /// Builds what `method` needs for `left` and `right` and counts the matching pairs.
    pub fn plan(cfg: &CsrConfig, left: &[K], right: &[K], method: JoinMethod) -> Result<Self> {
        if left.len() > u32::MAX as usize || right.len() > u32::MAX as usize {
            return Err(Error::InvalidConfig(
                "join positions are 32-bit: each side holds at most 2^32 - 1 keys".into(),
            ));
        }
        // Both sides share one hash range (sized by the larger side) so that `Intersect` can pair vertices.
        let vertices = cfg.vertices_for(left.len().max(right.len()))?;
        cfg.check_knobs()?;
        let family = HashFamily::new(cfg.seed);
        let backend = cfg.backend_for()?;
        let stream = Arc::new(table_stream());
        if backend != Backend::Cpu {
            let params = cfg.device_params(family, vertices)?;
            let d = stream.id().executes(|| {
                crate::csr::gpu::join::device_join(backend, params, left, right, method)
            })?;
            return Ok(Self {
                pairs: d.len(),
                store: JoinStore::Device(backend, d),
                stream,
            });
        }
        let positions = |n: usize| (0..n as u32).collect::<Vec<u32>>();
        let left_table = HostCsr::build(family, vertices, left, &positions(left.len()));
        let (probe, right_table, pairs) = match method {
            JoinMethod::Probe => {
                let pairs = right
                    .par_iter()
                    .map(|&k| left_table.matches(k).count())
                    .sum();
                (right.to_vec(), None, pairs)
            }
            JoinMethod::Intersect => {
                let r = HostCsr::build(family, vertices, right, &positions(right.len()));
                let pairs = (0..vertices as usize)
                    .into_par_iter()
                    .map(|v| intersect_vertex(&left_table, &r, v).count())
                    .sum();
                (Vec::new(), Some(r), pairs)
            }
        };
        Ok(Self {
            store: JoinStore::Host(Box::new(HostJoin {
                left: left_table,
                probe,
                right: right_table,
            })),
            pairs,
            stream,
        })
    }

    /// Number of matching pairs.
    pub fn len(&self) -> usize {
        self.pairs
    }

    /// `true` when nothing matches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backend the join runs on.
    pub fn backend(&self) -> Backend {
        match &self.store {
            JoinStore::Host(_) => Backend::Cpu,
            JoinStore::Device(b, _) => *b,
        }
    }

    /// Writes the matching pairs: `left_out[k]` and `right_out[k]` are the positions of pair `k` in the left
    /// and right columns. Both slices must hold exactly [`CsrJoin::len`] entries.
    pub fn write_into(&self, left_out: &mut [u32], right_out: &mut [u32]) -> Result<()> {
        for (what, got) in [("left_out", left_out.len()), ("right_out", right_out.len())] {
            if got != self.len() {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected: self.len(),
                });
            }
        }
        match &self.store {
            JoinStore::Host(h) => {
                h.write_into(left_out, right_out);
                Ok(())
            }
            JoinStore::Device(_, d) => self
                .stream
                .id()
                .executes(|| d.write_into(left_out, right_out)),
        }
    }
}
