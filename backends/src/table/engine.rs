//! The typed engine interface every static table implements; [`crate::HashTable`] sits on top.
//!
//! Keys and values cross this boundary as the caller's `K` and `V` slices, never widened on the way: a GPU
//! table of 32-bit pairs hands the caller's `&[u32]` to its copies as is ([`hashtile_core::Element::as_u32s`]).
//! Duplicates and updates are settled inside each engine (on GPUs by device passes, `gpu::upsert`). The
//! interface is the static table's only: containers built from static tables extend it in their own layers.

use hashtile_core::scheme::SchemeParams;
use hashtile_core::{HashFamily, Key, ProbeStats, Result, Value};

/// What an insert did: probe statistics and the pairs it could not place (normally none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inserted<K, V> {
    /// Probe statistics (zero probes where the backend does not count).
    pub stats: ProbeStats,
    /// Pairs that are not in the table.
    pub unplaced: Vec<(K, V)>,
}

impl<K: Key, V: Value> Inserted<K, V> {
    /// An insert's outcome from its statistics and the pairs it could not place as device words (widened to
    /// `u64`), narrowed back to the caller's types.
    pub(crate) fn from_words(stats: ProbeStats, lost: Vec<(u64, u64)>) -> Self {
        Self {
            stats,
            unplaced: lost
                .into_iter()
                .map(|(k, v)| (K::narrow(k), V::narrow(v)))
                .collect(),
        }
    }
}

/// One backend's table of `K -> V`.
pub trait Engine<K: Key, V: Value>: Send + Sync {
    /// Upserts a batch of equal lengths. The **last** occurrence of a key in the batch wins; a stored key gets
    /// the new value. Unless [`Engine::checks_in_pipeline`] says so for this batch size, the caller has checked
    /// the keys for the sentinel and the batch's new keys against the capacity; an engine that checks returns
    /// `Error::SentinelKey` / `Error::CapacityExceeded` with the table unchanged.
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>>;
    /// `true` when [`Engine::upsert`] of `n` keys checks the sentinel and the capacity itself (GPUs, for one
    /// device batch: the sentinel during the copy, the capacity from the duplicate pass's own mask), so that
    /// the caller skips its host scan and its separate count of new keys.
    fn checks_in_pipeline(&self, _n: usize) -> bool {
        false
    }
    /// Counts the distinct keys of a batch that are not stored (the exact capacity check near a full table).
    fn count_new(&self, keys: &[K]) -> Result<usize>;
    /// Inserts pairs whose keys are distinct and not stored (rebuilds): no duplicate or update passes.
    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>>;
    /// Looks keys up: `out[i]` = the value, or `V::ABSENT`; if `found` is given (`keys.len().div_ceil(32)`
    /// words), bit `i % 32` of `found[i / 32]` is set for present keys.
    fn find_into(&self, keys: &[K], out: &mut [V], found: Option<&mut [u32]>)
    -> Result<ProbeStats>;
    /// Presence of keys: bit `i % 32` of `found[i / 32]` (`keys.len().div_ceil(32)` words, zeroed by the caller)
    /// is set for present keys. By default [`Engine::find_into`] into values nobody reads; GPU tables copy the
    /// bits alone back.
    fn contains_into(&self, keys: &[K], found: &mut [u32]) -> Result<ProbeStats> {
        let mut out = vec![V::default(); keys.len()];
        self.find_into(keys, &mut out, Some(found))
    }
    /// Looks keys up as `Some(value)` / `None`, with the probe statistics: by default [`Engine::find_into`]
    /// with presence bits, the answers built from both (`options_by_bits`); GPU tables build them as the
    /// values leave the staging buffers (`runtime::host_io`), with no host copy of the values.
    fn find_options(&self, keys: &[K]) -> Result<(Vec<Option<V>>, ProbeStats)> {
        options_by_bits(self, keys)
    }
    /// Every stored pair.
    fn pairs(&self) -> Result<Vec<(K, V)>>;
    /// Empties the table and switches to `family` (used by rebuilds).
    fn reset(&mut self, family: HashFamily) -> Result<()>;
    /// Rebuilds the table from its own pairs under `family`, erased slots dropped, where the pairs live (GPU
    /// tables: on the device, no pair crosses the bus; by default through [`Engine::pairs`]); returns the pairs
    /// it could not place, which are no longer stored.
    fn rebuild_in_place(&mut self, family: HashFamily) -> Result<Vec<(K, V)>> {
        let pairs = self.pairs()?;
        refill(self, family, pairs)
    }
    /// Moves the stored pairs into a table of `num_buckets` buckets (the same bucket size) under `params` and
    /// `family`, erased slots dropped, where the pairs live (GPU tables: on the device); returns the pairs it
    /// could not place, which are no longer stored. Growth ([`TableConfig::growth`](crate::TableConfig)); by
    /// default the engine cannot.
    fn regrow(
        &mut self,
        _num_buckets: u32,
        _params: SchemeParams,
        _family: HashFamily,
    ) -> Result<Vec<(K, V)>> {
        Err(hashtile_core::Error::InvalidConfig(
            "this table cannot change its capacity".into(),
        ))
    }
    /// Stored pairs.
    fn len(&self) -> usize;
    /// `true` when no pair is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots.
    fn capacity(&self) -> usize;
    /// The hash family in use.
    fn family(&self) -> HashFamily;
    /// For placement checks: `(key, bucket index)` of every stored pair.
    fn placement(&self) -> Result<Vec<(K, u32)>>;
    /// Host memory of `bytes` bytes that the engine copies at the full bus rate (pinned memory on CUDA), or
    /// `None` when ordinary memory is as good (CPU, Vulkan).
    fn alloc_pinned(&self, _bytes: usize) -> Option<crate::runtime::transfer::PinnedAlloc> {
        None
    }
    /// Tombstone erase: marks the slots of the stored keys among `keys` (repeats count once; never the
    /// sentinel key, which the caller leaves out) erased in place and returns how many were; `None` where the
    /// table cannot (64-bit keys: no key word to spare for the mark), leaving it unchanged. An erased slot stays
    /// taken (lookups probe past it; inserts take it again where [`Engine::takes_marks`]) until the table is
    /// rebuilt ([`Engine::reset`], [`Engine::rebuild_in_place`], or a rebuild of its owner's). A scheme that
    /// moves pairs (`ProbingScheme::STABLE` unset) must be rebuilt before its next insert unless its inserts take
    /// marks: an eviction would carry a mark on as if it were a pair.
    fn erase_stored(&mut self, _keys: &[K]) -> Result<Option<usize>> {
        Ok(None)
    }
    /// Slots marked erased ([`Engine::erase_stored`]) that no insert has taken again and no rebuild reclaimed.
    /// Where [`Engine::takes_marks`], inserts take marks on their walk; other schemes' marks stay until a
    /// rebuild.
    fn marks(&self) -> usize {
        0
    }
    /// Whether inserts take marks again ([`Engine::marks`]): every scheme of the static tables (a cuckoo table
    /// whose inserts do not, claiming by exchange, is rebuilt at once after an erase: its evictions would
    /// exchange marks away). `false` by default.
    fn takes_marks(&self) -> bool {
        false
    }
    /// The engine as `Any`, for the operations generic over a user's type (`insert_or_apply`'s reduction),
    /// which a trait object cannot carry: `crate::table::apply` downcasts to the concrete engine.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    /// [`Engine::as_any_mut`] for reads (a sharded table's device finds reach the GPU table this way).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Empties `engine` under `family` and inserts `pairs` (distinct keys): the pairs it could not place. Every
/// rebuild goes through it (the default [`Engine::rebuild_in_place`], the static table's re-seeded rebuilds and
/// its erase of 64-bit keys).
pub(crate) fn refill<K: Key, V: Value, E: Engine<K, V> + ?Sized>(
    engine: &mut E,
    family: HashFamily,
    pairs: Vec<(K, V)>,
) -> Result<Vec<(K, V)>> {
    engine.reset(family)?;
    let (keys, values): (Vec<K>, Vec<V>) = pairs.into_iter().unzip();
    Ok(engine.insert_distinct(&keys, &values)?.unplaced)
}

/// [`Engine::find_options`] through [`Engine::find_into`] with presence bits (the default, and the fallback of
/// engines that build answers otherwise).
pub(crate) fn options_by_bits<K: Key, V: Value, E: Engine<K, V> + ?Sized>(
    engine: &E,
    keys: &[K],
) -> Result<(Vec<Option<V>>, ProbeStats)> {
    // Zeroed vectors come from the allocator as untouched pages (no host pass); the engine overwrites all.
    let mut out = vec![V::default(); keys.len()];
    let mut bits = vec![0u32; keys.len().div_ceil(32)];
    let stats = engine.find_into(keys, &mut out, Some(&mut bits))?;
    Ok((crate::results::options_from_bits(&out, &bits), stats))
}
