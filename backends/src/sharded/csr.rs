//! [`ShardedCsrTable`] and [`ShardedCsrJoin`]: HashGraph's static CSR multimap and its hash join over shards,
//! as [`ShardedChainedTable`](super::ShardedChainedTable) spreads the chained one. A key's pairs all live in the
//! shard its route hash picks, so a build partitions the pairs by shard and each shard builds its own table from
//! its part (each on its device, on a thread of its own), and a lookup partitions the queries the same way and
//! joins the answers back in the caller's order. Two columns partitioned by one route are co-partitioned: a key
//! of the left column can only match right keys of its own shard, so a join is each shard's join of its two
//! parts, the positions in the parts turned back into the columns' positions.

use super::config::ShardedConfig;
use super::route::{Partition, ShardRoute};
use super::shard_set::{ShardSet, shard_accessors};
use super::shard_threads::{merge_failures, run_each};
use crate::csr::{CsrConfig, CsrJoin, CsrTable, JoinMethod};
use crate::results::FindAll;
use crate::runtime::host_io::check_len;
use crate::runtime::select::Backend;
use hashtile_core::{Error, Key, Result, Value};

/// A sharded table over ranks is not built for the CSR family.
fn refuse_ranks(config: &ShardedConfig<CsrConfig>) -> Result<()> {
    match config.ranks {
        Some(_) => Err(Error::InvalidConfig(
            "a sharded CSR table or join over ranks is not available yet; one process holds every shard"
                .into(),
        )),
        None => Ok(()),
    }
}

/// A static CSR multimap `K -> V` spread over shards: one [`CsrTable`] per device of the backend by default
/// (see [`ShardedConfig`]; [`ShardedConfig::shards`] puts several side by side on one device or the CPU), each
/// built from the pairs routed to it. Lookups take host data and answer in the caller's order, with a
/// [`CsrTable`]'s semantics (every bit pattern is a key; the order of one key's values is unspecified).
///
/// ```
/// use hashtile_backends::csr::CsrConfig;
/// use hashtile_backends::{Backend, BackendChoice, ShardedConfig, ShardedCsrTable};
/// let config =
///     ShardedConfig::new(CsrConfig::default().backend(BackendChoice::Exactly(Backend::Cpu))).shards(3);
/// let t = ShardedCsrTable::build(&config, &[7u32, 3, 7, 9], &[70u32, 30, 71, 90])?;
/// assert_eq!(t.count(&[7, 3, 5])?, vec![2, 1, 0]);
/// let all = t.find_all(&[5, 7])?;
/// assert_eq!(all.offsets, vec![0, 0, 2]);
/// assert_eq!(t.len(), 4);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct ShardedCsrTable<K: Key, V: Value> {
    set: ShardSet<CsrTable<K, V>, K, V>,
}

impl<K: Key, V: Value> ShardedCsrTable<K, V> {
    /// Builds the table of `(keys[i], values[i])` (duplicates all kept): the pairs partitioned by shard, each
    /// shard's table built from its part ([`CsrTable::build`], with the whole table's fixed vertex count divided
    /// among the shards, or its `range_factor` applied to each part). Errors are [`CsrTable::build`]'s and
    /// [`ShardedConfig::shard_devices`]'; over ranks, [`Error::InvalidConfig`].
    pub fn build(config: &ShardedConfig<CsrConfig>, keys: &[K], values: &[V]) -> Result<Self> {
        refuse_ranks(config)?;
        check_len("values", values.len(), keys.len())?;
        let mut devices = config.shard_devices()?;
        let n = devices.len();
        let route = ShardRoute::new(config.route_seed, n);
        let shards = if n == 1 {
            vec![CsrTable::build(
                &config.shard_table(1, devices[0]),
                keys,
                values,
            )?]
        } else {
            let p = Partition::new(&route, keys);
            let (ks, vs) = (p.parts(keys), p.parts(values));
            let built = run_each(&mut devices, |i, d| {
                CsrTable::build(&config.shard_table(n, *d), &ks[i], &vs[i])
            });
            merge_failures(&p, built)?
        };
        Ok(Self {
            set: ShardSet::new(shards, route, devices, config.backend()),
        })
    }

    shard_accessors!(CsrTable<K, V>, "pairs");

    /// How many values each query key has (0 when absent).
    pub fn count(&self, queries: &[K]) -> Result<Vec<u32>> {
        let mut out = vec![0u32; queries.len()];
        self.count_into(queries, &mut out)?;
        Ok(out)
    }

    /// How many values each query key has, into `out` (as long as `queries`).
    pub fn count_into(&self, queries: &[K], out: &mut [u32]) -> Result<()> {
        if let Some(one) = self.set.only() {
            return one.count_into(queries, out);
        }
        self.set
            .counts_into(queries, out, |s, q, o| s.count_into(q, o))
    }

    /// Every value of each query key ([`CsrTable::find_all`]).
    pub fn find_all(&self, queries: &[K]) -> Result<FindAll<V>> {
        let mut out = FindAll::default();
        self.find_all_into(queries, &mut out)?;
        Ok(out)
    }

    /// Every value of each query key into `out`, reusing its allocations ([`CsrTable::find_all_into`]): each
    /// shard answers its part, and the runs are joined in the caller's order. On an error, `out`'s contents are
    /// unspecified.
    pub fn find_all_into(&self, queries: &[K], out: &mut FindAll<V>) -> Result<()> {
        if let Some(one) = self.set.only() {
            return one.find_all_into(queries, out);
        }
        self.set
            .runs_into(queries, out, |s, q, o| s.find_all_into(q, o))
    }
}

/// A hash join of two key columns over shards: every `(i, j)` with `left[i] == right[j]`, as [`CsrJoin`] finds
/// them on one device. Both columns are partitioned by one route, so each shard joins its own parts (on its
/// device, on a thread of its own) and the positions come back as the columns'. [`ShardedCsrJoin::plan`] counts
/// the matches, so that the caller can allocate the output ([`ShardedCsrJoin::len`]) before
/// [`ShardedCsrJoin::write_into`] fills it; the pairs come shard by shard, in an unspecified order within one.
///
/// ```
/// use hashtile_backends::csr::{CsrConfig, JoinMethod};
/// use hashtile_backends::{Backend, BackendChoice, ShardedConfig, ShardedCsrJoin};
/// let config =
///     ShardedConfig::new(CsrConfig::default().backend(BackendChoice::Exactly(Backend::Cpu))).shards(2);
/// let join = ShardedCsrJoin::plan(&config, &[7u32, 3, 7, 9, 7], &[9u32, 7], JoinMethod::Probe)?;
/// assert_eq!(join.len(), 4);
/// let (mut left, mut right) = (vec![0u32; join.len()], vec![0u32; join.len()]);
/// join.write_into(&mut left, &mut right)?;
/// let mut pairs: Vec<(u32, u32)> = left.into_iter().zip(right).collect();
/// pairs.sort();
/// assert_eq!(pairs, vec![(0, 1), (2, 1), (3, 0), (4, 1)]);
/// # Ok::<(), hashtile_core::Error>(())
/// ```
pub struct ShardedCsrJoin<K: Key> {
    /// Each shard's join, with its parts' positions in the columns (empty for one shard: the columns' own).
    shards: Vec<ShardJoin<K>>,
    pairs: usize,
    backend: Backend,
}

/// One shard's join of its parts, and where each part's keys sit in their column.
struct ShardJoin<K: Key> {
    join: CsrJoin<K>,
    left_at: Vec<u32>,
    right_at: Vec<u32>,
}

impl<K: Key> ShardedCsrJoin<K> {
    /// Partitions both columns by shard, builds what `method` needs for each shard's parts and counts the
    /// matching pairs ([`CsrJoin::plan`] per shard). Errors are [`CsrJoin::plan`]'s; over ranks,
    /// [`Error::InvalidConfig`].
    pub fn plan(
        config: &ShardedConfig<CsrConfig>,
        left: &[K],
        right: &[K],
        method: JoinMethod,
    ) -> Result<Self> {
        refuse_ranks(config)?;
        if left.len() > u32::MAX as usize || right.len() > u32::MAX as usize {
            return Err(Error::InvalidConfig(
                "join positions are 32-bit: each side holds at most 2^32 - 1 keys".into(),
            ));
        }
        let mut devices = config.shard_devices()?;
        let n = devices.len();
        let backend = config.backend();
        if n == 1 {
            let join = CsrJoin::plan(&config.shard_table(1, devices[0]), left, right, method)?;
            return Ok(Self {
                pairs: join.len(),
                shards: vec![ShardJoin {
                    join,
                    left_at: Vec::new(),
                    right_at: Vec::new(),
                }],
                backend,
            });
        }
        let route = ShardRoute::new(config.route_seed, n);
        let (pl, pr) = (Partition::new(&route, left), Partition::new(&route, right));
        let (lk, rk) = (pl.parts(left), pr.parts(right));
        let positions = |len: usize| (0..len as u32).collect::<Vec<u32>>();
        let (mut la, mut ra) = (
            pl.parts(&positions(left.len())),
            pr.parts(&positions(right.len())),
        );
        let planned = run_each(&mut devices, |i, d| {
            CsrJoin::plan(&config.shard_table(n, *d), &lk[i], &rk[i], method)
        });
        let joins = merge_failures(&pl, planned)?;
        let shards: Vec<ShardJoin<K>> = joins
            .into_iter()
            .enumerate()
            .map(|(i, join)| ShardJoin {
                join,
                left_at: std::mem::take(&mut la[i]),
                right_at: std::mem::take(&mut ra[i]),
            })
            .collect();
        Ok(Self {
            pairs: shards.iter().map(|s| s.join.len()).sum(),
            shards,
            backend,
        })
    }

    /// Number of matching pairs.
    pub fn len(&self) -> usize {
        self.pairs
    }

    /// `true` when nothing matches.
    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }

    /// The backend the join runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Writes the matching pairs: `left_out[k]` and `right_out[k]` are the positions of pair `k` in the left
    /// and right columns, shard by shard. Both slices must hold exactly [`ShardedCsrJoin::len`] entries.
    pub fn write_into(&self, left_out: &mut [u32], right_out: &mut [u32]) -> Result<()> {
        check_len("left_out", left_out.len(), self.pairs)?;
        check_len("right_out", right_out.len(), self.pairs)?;
        if let [one] = &self.shards[..] {
            return one.join.write_into(left_out, right_out);
        }
        // Each shard's slice of the outputs.
        let mut work = Vec::with_capacity(self.shards.len());
        let (mut lo, mut ro) = (left_out, right_out);
        for s in &self.shards {
            let (l, lrest) = lo.split_at_mut(s.join.len());
            let (r, rrest) = ro.split_at_mut(s.join.len());
            work.push((s, l, r));
            (lo, ro) = (lrest, rrest);
        }
        let done = run_each(&mut work, |_, (s, l, r)| {
            s.join.write_into(l, r)?;
            for x in l.iter_mut() {
                *x = s.left_at[*x as usize];
            }
            for x in r.iter_mut() {
                *x = s.right_at[*x as usize];
            }
            Ok(())
        });
        done.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}
