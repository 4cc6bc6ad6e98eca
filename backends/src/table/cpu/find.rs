//! CPU lookups: a software pipeline that prefetches the buckets of keys a few positions ahead ([`Lookup`]).

use super::memory::*;
use super::table::*;
use hashtile_core::scheme::{ProbeState, SchemeInfo, action, blank_state};
use hashtile_core::{Key, ProbeStats, Value};
use rayon::prelude::*;
use std::sync::atomic::Ordering;

/// One key's lookup in flight (see [`CpuTable::lookups`]).
#[derive(Clone, Copy)]
pub(super) struct Lookup {
    pub(super) key: u64,
    pub(super) state: ProbeState,
    /// The bucket the next step reads.
    pub(super) bucket: u32,
    /// The key's slot once found, else [`NO_SLOT`] (slot indices are below 2^32 - 1: `TableConfig` checks).
    pub(super) slot: u32,
    pub(super) done: bool,
    pub(super) probes: u32,
}

/// [`Lookup::slot`] of a key not found (yet).
pub(super) const NO_SLOT: u32 = u32::MAX;

impl Lookup {
    /// A finished lookup with no answer (fills the pipeline's ring).
    const IDLE: Lookup = Lookup {
        key: 0,
        state: ProbeState {
            hash_index: 0,
            phase: 0,
            evictions: 0,
            rng: 1,
            aux: 0,
            aux2: 0,
        },
        bucket: 0,
        slot: NO_SLOT,
        done: true,
        probes: 0,
    };
    pub(super) fn slot(&self) -> Option<usize> {
        (self.slot != NO_SLOT).then_some(self.slot as usize)
    }
}

impl<S: SchemeInfo> CpuTable<S> {
    /// Starts looking up `key`: its first bucket named, nothing read yet.
    #[inline(always)]
    pub(super) fn lookup_start(&self, key: u64) -> Lookup {
        let mut state = blank_state();
        S::find_start(&mut state);
        Lookup {
            key,
            state,
            bucket: self.bucket_of(key, state.hash_index),
            slot: NO_SLOT,
            // The sentinel (all ones, the empty key word) is never stored: absent without a probe (a bucket
            // read would match its empty slots).
            done: key == EMPTY_KEY,
            probes: 0,
        }
    }

    /// Reads the bucket a lookup names and takes the scheme's find step (one probe). `VECTOR`: see
    /// [`CpuTable::view_as`].
    #[inline(always)]
    pub(super) fn lookup_step<const VECTOR: u8>(&self, l: &mut Lookup) {
        let view = self.view_as::<VECTOR>(l.bucket, l.key);
        l.probes += 1;
        let read_index = l.state.hash_index;
        let step = S::find_step(&mut l.state, view, self.params, self.bucket_size);
        match step.action {
            // A find's walk moves one probe on (strided sequences step from the bucket just read).
            action::NEXT if l.state.hash_index == read_index + 1 => {
                l.bucket = self.bucket_after(l.key, l.bucket, read_index)
            }
            action::NEXT => l.bucket = self.bucket_of(l.key, l.state.hash_index),
            action::FOUND => {
                l.slot = self.slot(l.bucket, step.slot) as u32;
                l.done = true;
            }
            action::ABSENT => l.done = true,
            other => unreachable!("find step returned action {other}"),
        }
    }

    /// A middle stage of [`CpuTable::lookups`]: one step of a lookup still going, then a prefetch of what it
    /// needs next. (A method, not a closure: closures are not compiled for AVX2 with their caller.)
    #[inline(always)]
    pub(super) fn lookup_advance<const VECTOR: u8>(&self, l: &mut Lookup) {
        if !l.done {
            self.lookup_step::<VECTOR>(l);
            if !l.done {
                self.prefetch_keys(l.bucket);
            } else if l.slot != NO_SLOT
                && let Some(a) = self.value_addr(l.slot as usize)
            {
                prefetch(a);
            }
        }
    }

    /// Looks up one key: the index of its slot. Adds the bucket reads to `probes`.
    pub(super) fn find_slot(&self, key: u64, probes: &mut u64) -> Option<usize> {
        let mut l = self.lookup_start(key);
        while !l.done {
            self.lookup_step::<SCALAR>(&mut l);
        }
        *probes += l.probes as u64;
        l.slot()
    }

    /// Looks up one key; adds the bucket reads to `probes`.
    #[cfg(test)]
    pub(super) fn find_one(&self, key: u64, probes: &mut u64) -> Option<u64> {
        self.find_slot(key, probes)
            .map(|i| self.value(i, Ordering::Acquire))
    }

    /// Looks up the keys `key_at(0..n)` in order, handing `(position, slot, probes)` of each to `emit`: the
    /// same answers and bucket reads as `find_slot` key by key, software-pipelined so that the cache misses of
    /// neighbouring keys overlap instead of queueing one after another. Three stages, [`LOOKUP_LAG`] keys
    /// apart: (1) hash the key and prefetch its first bucket; (2) read that bucket (in cache by now) and take
    /// one find step, then prefetch what the key needs next (its value line if found, its next bucket if
    /// not); (3) take a second step if needed, prefetching likewise; (4) finish the lookup (rarely more reads)
    /// and emit. Absent keys in full first buckets (common near load 0.9) then wait for no miss either.
    ///
    /// No thread may write key words meanwhile (the caller holds `&self`, or is the settle pass of an upsert):
    /// the buckets are read with vector loads where the CPU has AVX2 (see [`CpuTable::view_as`]).
    pub(super) fn lookups(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present; the quiet keys are this function's contract.
            return unsafe { self.lookups_avx512(n, key_at, emit) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; the quiet keys are this function's contract.
            return unsafe { self.lookups_avx2(n, key_at, emit) };
        }
        self.lookups_as::<SCALAR>(n, key_at, emit)
    }

    /// [`CpuTable::lookups_as`] compiled for AVX2, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX2, and no thread writes key words during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn lookups_avx2(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        self.lookups_as::<AVX2>(n, key_at, emit)
    }

    /// [`CpuTable::lookups_as`] compiled for AVX-512F, with vector views.
    ///
    /// # Safety
    /// The CPU has AVX-512F, and no thread writes key words during the call.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn lookups_avx512(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        self.lookups_as::<AVX512>(n, key_at, emit)
    }

    /// The lookup pipeline of [`CpuTable::lookups`]; `VECTOR`: see [`CpuTable::view_as`].
    #[inline(always)]
    pub(super) fn lookups_as<const VECTOR: u8>(
        &self,
        n: usize,
        key_at: impl Fn(usize) -> u64,
        mut emit: impl FnMut(usize, Option<usize>, u32),
    ) {
        const LAG: usize = LOOKUP_LAG;
        // A power of two above the 3 * LAG keys in flight.
        const RING: usize = (3 * LAG + 1).next_power_of_two();
        let mut ring = [Lookup::IDLE; RING];
        for i in 0..n + 3 * LAG {
            // Positions before 0 wrap to huge numbers and fail the `< n` tests.
            let last = i.wrapping_sub(3 * LAG);
            if last < n {
                // The last stage first: it frees the ring entry the first stage refills.
                let l = &mut ring[last % RING];
                while !l.done {
                    self.lookup_step::<VECTOR>(l);
                }
                emit(last, l.slot(), l.probes);
            }
            let second = i.wrapping_sub(2 * LAG);
            if second < n {
                self.lookup_advance::<VECTOR>(&mut ring[second % RING]);
            }
            let first = i.wrapping_sub(LAG);
            if first < n {
                self.lookup_advance::<VECTOR>(&mut ring[first % RING]);
            }
            if i < n {
                let l = self.lookup_start(key_at(i));
                self.prefetch_keys(l.bucket);
                ring[i % RING] = l;
            }
        }
    }

    /// Looks up `keys` in order (pipelined, see [`CpuTable::lookups`]), handing `(position, answer)` to
    /// `emit`; adds the bucket reads to `probes`.
    pub(super) fn find_run<K: Key>(
        &self,
        keys: &[K],
        probes: &mut u64,
        mut emit: impl FnMut(usize, Option<u64>),
    ) {
        self.lookups(
            keys.len(),
            |i| keys[i].widen(),
            |i, slot, p| {
                *probes += p as u64;
                emit(i, slot.map(|s| self.value(s, Ordering::Acquire)));
            },
        );
    }

    /// Looks up keys into `out` (same length).
    pub fn find_keys(
        &self,
        keys: &[u64],
        deterministic: bool,
        out: &mut [Option<u64>],
    ) -> ProbeStats {
        let run = |(ks, os): (&[u64], &mut [Option<u64>])| {
            let mut probes = 0u64;
            self.find_run(ks, &mut probes, |i, r| os[i] = r);
            probes
        };
        let probes = if deterministic {
            run((keys, out))
        } else {
            keys.par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .map(run)
                .sum()
        };
        ProbeStats {
            probes,
            ops: keys.len() as u64,
            retries: 0,
        }
    }

    /// Looks typed keys up: `out[i]` = value or `V::ABSENT`; presence bits into `found` when given, set in the
    /// same pipelined pass (a stored all-ones value reads as `V::ABSENT`, so presence cannot come from the values
    /// afterwards: a second, scalar lookup of every absent-looking key made absent finds 4-6x slower than present
    /// ones).
    pub fn find_typed<K: Key, V: Value>(
        &self,
        keys: &[K],
        out: &mut [V],
        found: Option<&mut [u32]>,
        deterministic: bool,
    ) -> ProbeStats {
        let n = keys.len();
        // One chunk of keys with its answers and (where asked for) its presence words: chunks are whole words.
        const _: () = assert!(CHUNK.is_multiple_of(32));
        let run = |(ks, os, mut bs): (&[K], &mut [V], Option<&mut [u32]>)| {
            let mut probes = 0u64;
            if let Some(b) = bs.as_deref_mut() {
                b.fill(0);
            }
            self.find_run(ks, &mut probes, |i, r| {
                os[i] = r.map_or(V::ABSENT, V::narrow);
                if let (Some(b), Some(_)) = (bs.as_deref_mut(), r) {
                    b[i / 32] |= 1 << (i % 32);
                }
            });
            probes
        };
        let words = n.div_ceil(32);
        let probes = match (deterministic, found) {
            (true, found) => run((keys, out, found.map(|b| &mut b[..words]))),
            (false, Some(bits)) => keys
                .par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .zip(bits[..words].par_chunks_mut(CHUNK / 32))
                .map(|((ks, os), bs)| run((ks, os, Some(bs))))
                .sum(),
            (false, None) => keys
                .par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .map(|(ks, os)| run((ks, os, None)))
                .sum(),
        };
        ProbeStats {
            probes,
            ops: n as u64,
            retries: 0,
        }
    }
}
