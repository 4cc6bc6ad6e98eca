//! [`CpuChild`]: a paged table's child on the CPU backend, the static CPU engine with logical residency. Its
//! table stays in memory, but a paged-out child refuses work as a device child does, so that the paged table's
//! manager is checked by the CPU oracle tests; paging copies nothing and reports the bytes a device table of
//! its slots would move.

use crate::paged::protocol::{PagedChild, Rebuilt, SplitSpec, paged_out};
use crate::runtime::transfer::PinnedAlloc;
use crate::table::CpuEngine;
use crate::table::engine::{Engine, Inserted};
use hashtile_core::hash::route_hash;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{HashFamily, Key, ProbeStats, Result, Value};

/// The CPU engine of a paged table's child, and its residency.
pub(crate) struct CpuChild<S: SchemeInfo> {
    engine: CpuEngine<S>,
    /// The table counts as in device memory.
    resident: bool,
    /// The "host copy" matches the table (nothing changed since the last page-out): paging out copies nothing.
    image_current: bool,
}

/// Pairs.
type Pairs<K, V> = Vec<(K, V)>;

impl<S: SchemeInfo> CpuChild<S> {
    /// A resident child over `engine`.
    pub(crate) fn new(engine: CpuEngine<S>) -> Self {
        Self {
            engine,
            resident: true,
            image_current: false,
        }
    }

    fn check_resident(&self) -> Result<()> {
        if self.resident {
            Ok(())
        } else {
            Err(paged_out())
        }
    }

    /// Checks residency and marks the host copy stale, before a call that changes the table.
    fn changing(&mut self) -> Result<&mut CpuEngine<S>> {
        self.check_resident()?;
        self.image_current = false;
        Ok(&mut self.engine)
    }
}

impl<S: SchemeInfo, K: Key, V: Value> Engine<K, V> for CpuChild<S> {
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.changing()?.upsert(keys, values)
    }
    fn checks_in_pipeline(&self, n: usize) -> bool {
        Engine::<K, V>::checks_in_pipeline(&self.engine, n)
    }
    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        self.changing()?.insert_distinct(keys, values)
    }
    fn count_new(&self, keys: &[K]) -> Result<usize> {
        self.check_resident()?;
        Engine::<K, V>::count_new(&self.engine, keys)
    }
    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        self.check_resident()?;
        self.engine.find_into(keys, out, found)
    }
    fn pairs(&self) -> Result<Vec<(K, V)>> {
        self.check_resident()?;
        self.engine.pairs()
    }
    fn reset(&mut self, family: HashFamily) -> Result<()> {
        Engine::<K, V>::reset(self.changing()?, family)
    }
    fn len(&self) -> usize {
        Engine::<K, V>::len(&self.engine)
    }
    fn capacity(&self) -> usize {
        Engine::<K, V>::capacity(&self.engine)
    }
    fn family(&self) -> HashFamily {
        Engine::<K, V>::family(&self.engine)
    }
    fn placement(&self) -> Result<Vec<(K, u32)>> {
        self.check_resident()?;
        Engine::<K, V>::placement(&self.engine)
    }
    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        Engine::<K, V>::alloc_pinned(&self.engine, bytes)
    }
    fn erase_stored(&mut self, keys: &[K]) -> Result<Option<usize>> {
        if !S::STABLE || K::BITS > 32 {
            return Ok(None);
        }
        Engine::<K, V>::erase_stored(self.changing()?, keys)
    }
    fn marks(&self) -> usize {
        Engine::<K, V>::marks(&self.engine)
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl<S: SchemeInfo, K: Key, V: Value> PagedChild<K, V> for CpuChild<S> {
    fn rebuild_split(
        &mut self,
        family: HashFamily,
        split: Option<SplitSpec>,
    ) -> Result<Rebuilt<K, V>> {
        self.check_resident()?;
        let all = Engine::<K, V>::pairs(self)?;
        let (high, low): (Pairs<K, V>, Pairs<K, V>) = match split {
            Some(sp) => all
                .into_iter()
                .partition(|(k, _)| route_hash(k.widen(), sp.seed) >> (63 - sp.depth) & 1 == 1),
            None => (Vec::new(), all),
        };
        Engine::<K, V>::reset(self, family)?;
        let (k, v): (Vec<K>, Vec<V>) = low.into_iter().unzip();
        let lost = Engine::<K, V>::insert_distinct(self, &k, &v)?.unplaced;
        let split = match split {
            Some(sp) => {
                let table = self.engine.table.emptied(sp.family);
                let mut other = Self::new(CpuEngine::new(table, self.engine.deterministic));
                let (k, v): (Vec<K>, Vec<V>) = high.into_iter().unzip();
                let lost = Engine::<K, V>::insert_distinct(&mut other, &k, &v)?.unplaced;
                Some((Box::new(other) as Box<dyn PagedChild<K, V>>, lost))
            }
            None => None,
        };
        Ok(Rebuilt { lost, split })
    }
    fn page_out(&mut self) -> Result<u64> {
        if !self.resident {
            return Ok(0);
        }
        self.resident = false;
        let copied = if self.image_current {
            0
        } else {
            PagedChild::<K, V>::device_bytes(self)
        };
        self.image_current = true;
        Ok(copied)
    }
    fn page_in(&mut self) -> Result<u64> {
        if self.resident {
            return Ok(0);
        }
        self.resident = true;
        Ok(PagedChild::<K, V>::device_bytes(self))
    }
    fn is_resident(&self) -> bool {
        self.resident
    }
    fn device_bytes(&self) -> u64 {
        // What a device table of these slots holds: one packed word per slot, or a key and a value word (the
        // wide layout, for any 64-bit element).
        let per_slot = if K::BITS > 32 || V::BITS > 32 { 16 } else { 8 };
        self.engine.table.capacity() as u64 * per_slot
    }
}
