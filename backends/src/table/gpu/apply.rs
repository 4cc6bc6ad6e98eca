//! `insert_or_apply` on GPU tables: a batch's pairs are combined with what the table stores by a reduction
//! (`hashtile_core::reduce`), from device data ([`GpuTable::insert_or_apply_device`]) or host data (in device
//! batches, through [`crate::HashTable::insert_or_apply`]). Three ways, by what the scheme and layout allow:
//!
//! - **In the table** (packed pairs of a scheme whose racing upserts converge under the table's parameters,
//!   `SchemeInfo::upserts_converge`: linear probing, double hashing, IHT's default walk): one insert launch with
//!   upserts on, updates combining the stored value by compare-and-swap of the pair; a key's copies meet in its
//!   one slot. (The atomic folds of the built-in reductions need the scheme's constant,
//!   `ProbingScheme::UPSERTS_CONVERGE`: IHT combines by the compare-and-swap loop.)
//! - **In the table without evictions** (packed pairs of a first-fit cuckoo scheme, `ProbingScheme::FIRST_FIT`:
//!   BCHT, 1CHT): the same launch under `NoEvictions`, which turns the scheme's evictions into failures so that
//!   nothing moves and copies meet as above; the keys it fails (every candidate full) go through duplicates
//!   first, below.
//! - **Duplicates first** (every other scheme and layout, and `Assign`: cuckoo evictions and load-balancing
//!   choices can send racing copies of a key to different slots, and racing copies keep no batch order): the
//!   upsert's passes with two changes (`super::upsert`). Beside
//!   the duplicate pass's mark, a reduce pass folds every key's values into its last occurrence (a copy of the
//!   values: a caller's device buffer is never written), and the classify pass combines a stored key's value
//!   with the folded one in place instead of replacing it. The new keys, distinct and absent after both, then go
//!   in by the masked bulk insert. Nothing races: the classify launch moves no pair and touches each stored key
//!   once, and the insert launch holds only keys that are not stored.

use super::GpuTable;
use super::device::Selection;
use super::device::Unplaced;
use super::host_path::Dedup;
use super::upsert::{MASK_NEW, sentinel_scan_kernel, split_pairs_kernel};
use crate::device::counters::FAILED_AT;
use crate::device::layout::KeyLayout;
use crate::runtime::launch::{CUBE_SIZE, copy, cube_count};
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::words_of;
use crate::table::engine::Inserted;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::reduce::{Assign, Reduce, kind};
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Error, Key, ProbeStats, Result, Value};
use hashtile_probing::NoEvictions;

/// Slot bytes up to which a table counts as held by the L2 cache when a launch folds in it (the L2 cache of an
/// H100 or H200 holds 50 MB): see `GpuTable::fold_tile_width`.
const CACHED_SLOT_BYTES: usize = 48 << 20;

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout> GpuTable<R, S, L> {
    /// Inserts `n` pairs already on the device (`keys`, `values`: `n` elements of the layout's key and value
    /// types each), combining values by the reduction `F`: a stored key's value becomes
    /// `F::reduce(stored, v)`, and a key repeated in the batch is stored (or combined) once, with the reduction
    /// of its values (for [`Assign`]: its last value). Waits for the result.
    ///
    /// Unlike [`GpuTable::insert_device`], keys may repeat. A sentinel key (all ones) refuses the whole batch
    /// with [`Error::SentinelKey`], the table unchanged. The caller keeps the batch's new keys within the
    /// capacity (as for `insert_device`): pairs that do not fit come back in the [`Unplaced`].
    pub fn insert_or_apply_device<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        self.apply_batch::<F>(keys, values, n, false, false)
    }

    /// [`GpuTable::insert_device`] of a batch none of whose keys is in the table, as the caller knows (a sharded
    /// table's exchange steps: disjoint keys of one batch, into a shard empty before it): repeats within the
    /// batch are settled as `insert_device` settles them, but no pass looks for the batch's keys in the table
    /// first. A key that is in the table after all may then be stored twice.
    pub(crate) fn insert_device_absent(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        if L::MOVES_PAIRS && S::UPSERTS_CONVERGE && self.options.use_cas && self.params.upsert == 1
        {
            // The in-table insert looks for each key on its way anyway.
            return self.insert_device(keys, values, n);
        }
        self.apply_batch::<Assign>(keys, values, n, false, true)
    }

    /// [`GpuTable::insert_or_apply_device`] of a batch none of whose keys is in the table, as the caller knows
    /// (see [`GpuTable::insert_device_absent`]): repeats within the batch are reduced as `insert_or_apply_device`
    /// reduces them, with no pass looking for the keys in the table first.
    pub(crate) fn insert_or_apply_device_absent<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        self.apply_batch::<F>(keys, values, n, false, true)
    }

    /// [`GpuTable::insert_or_apply_device`]; `scanned`: the caller has checked the keys for the sentinel (host
    /// data), so the in-table way skips its own scan and read-back (the duplicates-first way checks during its
    /// claims at no cost); `absent`: no key of the batch is in the table (no classify pass).
    fn apply_batch<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        scanned: bool,
        absent: bool,
    ) -> Result<Unplaced> {
        if n == 0 {
            return Ok(Unplaced::default());
        }
        // `Assign` keeps the batch's last value, an order racing copies do not keep: it settles duplicates first.
        let in_table = self.upserts_converge || S::FIRST_FIT;
        if L::MOVES_PAIRS && in_table && self.options.use_cas && F::KIND != kind::ASSIGN {
            if !scanned {
                self.check_sentinel(keys, n)?;
            }
            return if self.upserts_converge {
                self.apply_in_table::<F>(keys, values, n)
            } else {
                self.apply_unmoved::<F>(keys, values, n)
            };
        }
        self.apply_dedup::<F>(keys, values, n, absent)
    }

    /// Insert-or-apply with the batch's duplicates settled first (the module docs); `absent`: no key of the
    /// batch is in the table (no classify pass).
    fn apply_dedup<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        absent: bool,
    ) -> Result<Unplaced> {
        let client = self.client.clone();
        let dedup = Dedup::new(&client, &self.cache, n, size_of::<L::Key>() > 4);
        dedup.clear(&client, dedup.slots);
        dedup.claim(&client, keys, 0, n);
        let mask = dedup.mark(&client, &self.cache);
        // Before anything changes the table: a batch holding the sentinel keeps none of its positions.
        dedup.gate(&client, &mask, n);
        let value_bytes = n * size_of::<L::Value>();
        let folded = (F::KIND != kind::ASSIGN).then(|| {
            let h = self.cache.take(&client, "apply values", value_bytes);
            copy::<R, L::Value>(&client, values, &h, n);
            dedup.reduce::<L::Value, F, R>(&client, values, &h);
            h
        });
        let values_in = folded.as_ref().unwrap_or(values);
        if self.len > 0 && !absent {
            self.launch_classify::<F>(keys, Some(values_in), &mask, n);
        }
        let out = match dedup.sentinel(&client) {
            Some(index) => Err(Error::SentinelKey { index }),
            None => self
                .insert_masked(keys, values_in, &mask, MASK_NEW, n)
                .map(|pairs| Unplaced {
                    pairs,
                    untracked: 0,
                }),
        };
        dedup.release(&self.cache);
        self.cache.give("dedup mask", mask, n * 4);
        if let Some(h) = folded {
            self.cache.give("apply values", h, value_bytes);
        }
        out
    }

    /// Insert-or-apply of a batch in the table itself, for packed pairs of a scheme whose racing upserts of one
    /// key converge on one slot (`upserts_converge`: linear probing, double hashing, IHT's default walk): one
    /// insert launch with upserts on, whose updates combine the stored value with the lane's by a
    /// compare-and-swap of the pair (cuCollections' way). A key's copies meet in its slot: the first claims it,
    /// the others re-read and combine: one pass over the batch, whose keys the caller has checked for the
    /// sentinel.
    fn apply_in_table<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        self.queue_fold::<S, F>(keys, values, n, None);
        self.note_queued(n);
        let pairs = self.settle_all()?;
        Ok(Unplaced {
            pairs,
            untracked: 0,
        })
    }

    /// Insert-or-apply in the table for a first-fit cuckoo scheme (`ProbingScheme::FIRST_FIT` without
    /// `UPSERTS_CONVERGE`: BCHT, 1CHT), whose keys the caller has checked for the sentinel: one insert launch of
    /// the scheme with its evictions turned into failures ([`NoEvictions`]), in which a key's copies meet in one
    /// slot and fold there as on linear probing. A pair fails only where every candidate bucket was full without
    /// its key, and a full bucket stays full while nothing moves, so each copy of such a key fails and none was
    /// stored: the failures (a batch-sized buffer, not the table's stash: at load 0.9 with `B = 8` about 2% of
    /// the keys fail, and every copy of each) then go in by duplicates first, with evictions.
    fn apply_unmoved<F: Reduce>(
        &mut self,
        keys: &Handle,
        values: &Handle,
        n: usize,
    ) -> Result<Unplaced> {
        // Inserts queued before this call settle first: the launch below counts into the same words.
        let mut pairs = self.settle_all()?;
        let client = self.client.clone();
        let failed_bytes = n * L::STASH_WORDS * 8;
        let failed = self.cache.take(&client, "unmoved failures", failed_bytes);
        self.queue_fold::<NoEvictions<S>, F>(keys, values, n, Some((&failed, n * L::STASH_WORDS)));
        // The failures are in `failed`, not the stash: the counters settle without them.
        let mut c = self.take_counters();
        let k = std::mem::take(&mut c[FAILED_AT as usize]) as usize;
        self.settle_counters(&c, n as u64);
        let mut out = Ok(Unplaced::default());
        tracing::debug!(target: "hashtile", failed = k, pairs = n, "counting launch without evictions");
        if k > 0 {
            let probes = self.last_insert_probes;
            let (kb, vb) = (k * size_of::<L::Key>(), k * size_of::<L::Value>());
            let fk = self.cache.take(&client, "unmoved keys", kb);
            let fv = self.cache.take(&client, "unmoved values", vb);
            // SAFETY: the kernel indexes `k` positions of each array, and `failed` holds `n >= k` words.
            unsafe {
                split_pairs_kernel::launch_unchecked::<L, R>(
                    &client,
                    cube_count(k),
                    CubeDim::new_1d(CUBE_SIZE),
                    ArrayArg::from_raw_parts(failed.clone(), k),
                    ArrayArg::from_raw_parts(fk.clone(), k),
                    ArrayArg::from_raw_parts(fv.clone(), k),
                )
            }
            out = self.apply_dedup::<F>(&fk, &fv, k, true);
            self.last_insert_probes = probes.merged(self.last_insert_probes);
            self.cache.give("unmoved keys", fk, kb);
            self.cache.give("unmoved values", fv, vb);
        }
        self.cache.give("unmoved failures", failed, failed_bytes);
        let mut out = out?;
        pairs.append(&mut out.pairs);
        out.pairs = pairs;
        Ok(out)
    }

    /// Queues the launch that folds `n` pairs into the table under scheme `Sch` (the table's own, or
    /// `NoEvictions` of it): every position, upserts on, in [`GpuTable::fold_tile_width`]'s tiles, counting into
    /// the table's counters; the pairs it gives up on go to `failed` where given, else to the stash.
    fn queue_fold<Sch: ProbingScheme, F: Reduce>(
        &self,
        keys: &Handle,
        values: &Handle,
        n: usize,
        failed: Option<(&Handle, usize)>,
    ) {
        let tw = self.fold_tile_width();
        let all = Selection::All;
        self.queue_insert_as::<Sch, F>(
            keys,
            values,
            all,
            n,
            Some(true),
            &self.counters,
            failed,
            tw,
        );
    }

    /// The tile width of a launch that folds in the table. A table of at most [`CACHED_SLOT_BYTES`] of slots
    /// (a counting table of repeated keys, typically) folds in tiles of a quarter of a bucket (at least one
    /// lane), each lane holding four of its slots: its slots stay in the L2 cache and the launch is bound by the
    /// instructions it issues, which a narrower tile spends fewer of per key. A larger table, whose reads go to
    /// memory, keeps the table's tiles. H200, G keys/s, tiles of `B`, `B / 2`, `B / 4` lanes: `count_16` (2^26
    /// keys from 2^22, a 40 MiB table) at loads 0.8 / 0.9, BCHT B = 8 14.3 / 13.1, 19.6 / 17.1, 22.5 / 18.1;
    /// double hashing B = 4 18.9 / 14.6, 22.3 / 17.0, 25.4 / 22.7; 2^26 keys drawn from as many (a 640 MiB
    /// table), load 0.8, tiles of `B` against `B / 4`: BCHT B = 8 12.0 against 10.4, double B = 4 10.2 against
    /// 9.1 (NOTES.md D30).
    fn fold_tile_width(&self) -> u32 {
        if self.capacity() * L::WORD_BYTES <= CACHED_SLOT_BYTES {
            super::fewest_lanes(self.bucket_size, self.tile_width)
        } else {
            self.tile_width
        }
    }

    /// [`Error::SentinelKey`] for the first sentinel key among the `n` device keys `keys` (a scan kernel and a
    /// one-word read-back).
    fn check_sentinel(&self, keys: &Handle, n: usize) -> Result<()> {
        let guard = self.client.create_from_slice(&u32::MAX.to_le_bytes());
        // SAFETY: indices are bounded by `n` (the keys) and 1 (the guard word).
        unsafe {
            sentinel_scan_kernel::launch_unchecked::<L::Key, R>(
                &self.client,
                cube_count(n),
                CubeDim::new_1d(CUBE_SIZE),
                ArrayArg::from_raw_parts(keys.clone(), n),
                ArrayArg::from_raw_parts(guard.clone(), 1),
            )
        }
        match Dedup::sentinel_of(&self.client.read_one_unchecked(guard)) {
            Some(index) => Err(Error::SentinelKey { index }),
            None => Ok(()),
        }
    }

    /// [`GpuTable::insert_or_apply_device`] of host pairs that the caller has checked for the sentinel
    /// (`HashTable`'s scan), one device batch ([`crate::runtime::host_io::BatchSizes`]'s `insert`) after
    /// another: a later batch's keys that an earlier one stored are combined with it, so the result is the same
    /// as one batch's. Returns the batches' probe statistics and the pairs not placed.
    pub(crate) fn insert_or_apply_words<F: Reduce>(
        &mut self,
        keys: &[L::Key],
        values: &[L::Value],
    ) -> Result<(ProbeStats, Vec<(u64, u64)>)> {
        let step = self.batch.insert.max(1);
        let mut stats = ProbeStats::default();
        let mut lost = Vec::new();
        for (i, (ks, vs)) in keys.chunks(step).zip(values.chunks(step)).enumerate() {
            let kh = self.upload(ks);
            let vh = self.upload(vs);
            let done = self
                .apply_batch::<F>(&kh, &vh, ks.len(), true, false)
                .map_err(|e| match e {
                    Error::SentinelKey { index } => Error::SentinelKey {
                        index: index + i * step,
                    },
                    e => e,
                })?;
            lost.extend(done.pairs);
            stats = stats.merged(self.last_insert_probes);
        }
        Ok((stats, lost))
    }

    /// [`GpuTable::insert_or_apply_words`] of the caller's key and value types (widened or kept as the layout
    /// needs), with the unplaced pairs narrowed back.
    pub(crate) fn insert_or_apply_typed<F: Reduce, K: Key, V: Value>(
        &mut self,
        keys: &[K],
        values: &[V],
    ) -> Result<Inserted<K, V>> {
        let k = words_of::<K, L::Key>(keys);
        let v = words_of::<V, L::Value>(values);
        let (stats, lost) = self.insert_or_apply_words::<F>(&k, &v)?;
        Ok(Inserted::from_words(stats, lost))
    }
}
