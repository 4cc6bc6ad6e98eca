//! Host data through the devices: each shard held here takes an equal, contiguous share of the caller's batch
//! over its own GPU's link (its table's staging), the device-data call routes and exchanges it
//! (`sharded::device`, `sharded::device_writes`), and a find's answers come back over the same links into the
//! caller's memory: no host partition and no host join, every link busy at once. A table over ranks takes
//! every host call this way (each rank's batch is its own), and a host find of 32-bit pairs on GPUs does too.
//! Writes refuse the sentinel key before anything moves (the callers check).

use super::ShardedTable;
use super::device::gpu;
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::{bytes_of, bytes_of_mut};
use cubecl::server::Handle;
use hashtile_core::reduce::Reduce;
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};

impl<S: SchemeInfo, K: Key, V: Value> ShardedTable<S, K, V> {
    /// Keys per share of a batch of `n` over the shards held here.
    fn share(&self, n: usize) -> usize {
        n.div_ceil(self.shards.len()).max(1)
    }

    /// Each held shard's share of `data` (`share` items each) uploaded over its own link, each shard on a thread
    /// of its own; the shares' lengths.
    fn upload_shares<R: HostTransfer, T: hashtile_core::Element>(
        &self,
        data: &[T],
        share: usize,
    ) -> Result<(Vec<Handle>, Vec<usize>)> {
        let lens: Vec<usize> = (0..self.shards.len())
            .map(|g| data.len().saturating_sub(g * share).min(share))
            .collect();
        let handles = super::shard_threads::run_each_ref(&self.shards, |g, shard| {
            let part = &data[(g * share).min(data.len())..][..lens[g]];
            let t = gpu::<R, S, K, V>(shard)?;
            shard
                .stream()
                .executes(|| R::upload(t.client(), t.host_stager(), bytes_of(part)))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        Ok((handles, lens))
    }

    /// [`Error::InvalidConfig`] when device calls would not see the keys the caller gave: a table that swaps a
    /// reserved key on the host.
    fn check_through_devices(&self) -> Result<()> {
        if self.shards[0].swaps_keys() {
            return Err(Error::InvalidConfig(
                "host calls of a table over ranks go through the devices, which store keys as given: \
                 a reserved key is not supported there"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The pairs' keys and values uploaded in equal shares ([`ShardedTable::upload_shares`]), checked first: the
    /// key buffers, the value buffers and the shares' lengths.
    fn upload_pairs<R: HostTransfer>(
        &self,
        keys: &[K],
        values: &[V],
    ) -> Result<(Vec<Handle>, Vec<Handle>, Vec<usize>)> {
        self.check_through_devices()?;
        let share = self.share(keys.len());
        let (kh, lens) = self.upload_shares::<R, K>(keys, share)?;
        let (vh, _) = self.upload_shares::<R, V>(values, share)?;
        Ok((kh, vh, lens))
    }

    /// Host inserts through the devices ([`ShardedTable::insert_device`]: a key repeated in the batch, or by
    /// several ranks, is stored once with one of its values).
    pub(super) fn insert_host<R: HostTransfer>(&mut self, keys: &[K], values: &[V]) -> Result<()> {
        let (kh, vh, lens) = self.upload_pairs::<R>(keys, values)?;
        self.insert_device::<R>(&kh, &vh, &lens)
    }

    /// Host counting through the devices ([`ShardedTable::insert_or_apply_device`]).
    pub(super) fn insert_or_apply_host<F: Reduce, R: HostTransfer>(
        &mut self,
        keys: &[K],
        values: &[V],
    ) -> Result<()> {
        let (kh, vh, lens) = self.upload_pairs::<R>(keys, values)?;
        self.insert_or_apply_device::<F, R>(&kh, &vh, &lens)
    }

    /// Host erases through the devices ([`ShardedTable::erase_device`]).
    pub(super) fn erase_host<R: HostTransfer>(&mut self, keys: &[K]) -> Result<usize> {
        self.check_through_devices()?;
        let (kh, lens) = self.upload_shares::<R, K>(keys, self.share(keys.len()))?;
        self.erase_device::<R>(&kh, &lens)
    }

    /// Host finds through the devices: [`ShardedTable::find_device`] answers every share, and each share's
    /// values (into `values`) and presence flags (into `flags`, 1 or 0 per key) come back over its own link. The
    /// sentinel key is answered absent there, as every find answers it (the find kernels never look it up).
    pub(crate) fn find_host<R: HostTransfer>(
        &self,
        keys: &[K],
        values: Option<&mut [V]>,
        flags: Option<&mut [u32]>,
    ) -> Result<()> {
        self.check_through_devices()?;
        let n = self.shards.len();
        let per = self.share(keys.len());
        let (kh, lens) = self.upload_shares::<R, K>(keys, per)?;
        let answers = |g: usize| -> Result<Handle> {
            let t = gpu::<R, S, K, V>(&self.shards[g])?;
            Ok(self.shards[g]
                .stream()
                .executes(|| t.client().empty(lens[g].max(1) * 4)))
        };
        let out = (0..n).map(answers).collect::<Result<Vec<_>>>()?;
        let found = (0..n).map(answers).collect::<Result<Vec<_>>>()?;
        self.find_device::<R>(&kh, &lens, &out, &found)?;
        let mut value_parts: Vec<Option<&mut [V]>> = match values {
            Some(v) => v.chunks_mut(per).map(Some).collect(),
            None => Vec::new(),
        };
        let mut flag_parts: Vec<Option<&mut [u32]>> = match flags {
            Some(f) => f.chunks_mut(per).map(Some).collect(),
            None => Vec::new(),
        };
        value_parts.resize_with(n, || None);
        flag_parts.resize_with(n, || None);
        std::thread::scope(|sc| {
            let handles: Vec<_> = value_parts
                .into_iter()
                .zip(flag_parts)
                .enumerate()
                .map(|(g, (v, f))| {
                    let (shard, out, found) = (&self.shards[g], &out[g], &found[g]);
                    sc.spawn(move || -> Result<()> {
                        let t = gpu::<R, S, K, V>(shard)?;
                        shard.stream().executes(|| {
                            if let Some(v) = v {
                                R::download(t.client(), t.host_stager(), out, bytes_of_mut(v))?;
                            }
                            if let Some(f) = f {
                                R::download(t.client(), t.host_stager(), found, bytes_of_mut(f))?;
                            }
                            Ok(())
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(super::shard_threads::join_thread)
                .collect::<Result<Vec<()>>>()
        })?;
        Ok(())
    }
}
