//! [`CpuEngine`]: the CPU table behind the static table's [`Engine`] surface.

use super::CpuTable;
use crate::runtime::host_memory::check_host_memory;
use crate::table::engine::{Engine, Inserted};
use hashtile_core::scheme::{SchemeInfo, SchemeParams};
use hashtile_core::{HashFamily, Key, ProbeStats, Result, Value};

/// The CPU engine: a [`CpuTable`] behind [`Engine`], run in parallel or, with `deterministic`, one
/// operation at a time in input order.
pub(crate) struct CpuEngine<S: SchemeInfo> {
    pub(crate) table: CpuTable<S>,
    pub(crate) deterministic: bool,
}

impl<S: SchemeInfo> CpuEngine<S> {
    pub(crate) fn new(table: CpuTable<S>, deterministic: bool) -> Self {
        Self {
            table,
            deterministic,
        }
    }
}

impl<S: SchemeInfo, K: Key, V: Value> Engine<K, V> for CpuEngine<S> {
    fn upsert(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        let (stats, unplaced) = self.table.upsert(keys, values, self.deterministic, false);
        Ok(Inserted { stats, unplaced })
    }
    fn insert_distinct(&mut self, keys: &[K], values: &[V]) -> Result<Inserted<K, V>> {
        let (stats, unplaced) = self.table.upsert(keys, values, self.deterministic, true);
        Ok(Inserted { stats, unplaced })
    }
    fn count_new(&self, keys: &[K]) -> Result<usize> {
        Ok(self.table.count_new(keys))
    }
    fn find_into(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
    ) -> Result<ProbeStats> {
        Ok(self.table.find_typed(keys, out, found, self.deterministic))
    }
    fn pairs(&self) -> Result<Vec<(K, V)>> {
        Ok(self
            .table
            .pairs()
            .into_iter()
            .map(|(k, v)| (K::narrow(k), V::narrow(v)))
            .collect())
    }
    fn reset(&mut self, family: HashFamily) -> Result<()> {
        self.table = self.table.emptied(family);
        Ok(())
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn capacity(&self) -> usize {
        self.table.capacity()
    }
    fn family(&self) -> HashFamily {
        self.table.family()
    }
    fn placement(&self) -> Result<Vec<(K, u32)>> {
        Ok(self
            .table
            .placement()
            .into_iter()
            .map(|(k, b)| (K::narrow(k), b))
            .collect())
    }
    fn erase_stored(&mut self, keys: &[K]) -> Result<Option<usize>> {
        if K::BITS > 32 {
            return Ok(None);
        }
        let wide: Vec<u64> = keys.iter().map(|k| k.widen()).collect();
        Ok(Some(self.table.erase_stored(&wide)))
    }
    fn marks(&self) -> usize {
        self.table.marks()
    }
    fn takes_marks(&self) -> bool {
        true
    }
    fn regrow(
        &mut self,
        num_buckets: u32,
        params: SchemeParams,
        family: HashFamily,
    ) -> Result<Vec<(K, V)>> {
        let bucket_size = self.table.bucket_size();
        // Both tables live at once while the pairs move: 16 bytes per new slot, and the old pairs' copy.
        let slots = num_buckets as u64 * bucket_size as u64;
        check_host_memory("the grown table", slots * 16 + self.table.len() as u64 * 16)?;
        let pairs = Engine::<K, V>::pairs(self)?;
        let values = self.table.has_values();
        self.table = CpuTable::with_values(num_buckets, bucket_size, family, params, values);
        let (keys, values): (Vec<K>, Vec<V>) = pairs.into_iter().unzip();
        Ok(Engine::<K, V>::insert_distinct(self, &keys, &values)?.unplaced)
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
