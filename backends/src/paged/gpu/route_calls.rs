//! The [`Router`] calls of [`DeviceRouter`]: the upsert (copied in, deduplicated, counted, then partitioned
//! by child or upserted in the frames), the routed find (scattered as it lands, looked up child by child,
//! gathered back), the framed find, and a part's download.

use super::route_framed::FramedRun;
use super::routing::{DeviceRouter, check_children, estimated_parts, layout_of, trace, widths};
use crate::device::layout::KeyLayout;
use crate::paged::protocol::{FramedUpsert, RouteMap, RoutedBatch, Router, SlotFrames, Upserted};
use crate::runtime::launch::fill_u32;
use crate::runtime::transfer::HostTransfer;
use crate::runtime::words::{bytes_of, bytes_of_mut, with_words_mut, words_of};
use crate::table::gpu::host_path::Dedup;
use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::scheme::ProbingScheme;
use hashtile_core::{Element, Key, Result, Value};

/// How an upsert batch goes in once its kept keys are counted.
enum Mode {
    /// Partitioned by child (each child's part queued by the caller).
    Parts(RoutedBatch),
    /// In the frames, chunk by chunk.
    Framed(FramedRun),
}

impl<R: HostTransfer, S: ProbingScheme, L: KeyLayout, K: Key, V: Value> Router<K, V>
    for DeviceRouter<R, S, L>
{
    fn batch_keys(&self) -> usize {
        self.sizes.insert
    }

    fn checks_sentinel(&self) -> bool {
        size_of::<K>() == size_of::<L::Key>()
    }

    fn upsert(
        &self,
        keys: &[K],
        values: &[V],
        route: RouteMap<'_>,
        framed: Option<FramedUpsert<'_>>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
    ) -> Result<Upserted<K, V>> {
        check_children(route)?;
        let (client, cache) = (&self.client, &self.cache);
        let mut trace = trace();
        let (kb, vb) = widths::<L>();
        let n = keys.len();
        let k = words_of::<K, L::Key>(keys);
        let v = words_of::<V, L::Value>(values);
        let entries = self.client.create_from_slice(bytes_of(route.entries));
        let dsts = [
            cache.take(client, "route keys in", n * kb),
            cache.take(client, "route values in", n * vb),
        ];
        // The duplicate pass runs over the whole batch (a key's occurrences may sit in different copy chunks),
        // its claims on each key chunk as it lands; the keys are routed while the values are still being copied
        // (steps 1-4 of the module docs).
        let dedup = Dedup::new(client, cache, n, kb == 8);
        // Queues the mark pass and the count of the kept keys per child: (the mask, the counts).
        let plan = |kh: &Handle| {
            let mask = dedup.mark(client, cache);
            let counts = self.zeroed_counts(route);
            self.count(kh, Some(&mask), n, (&entries, &counts), route);
            (mask, counts)
        };
        // Reads the counts and upserts in the frames (when every child's kept keys fit its room) or scatters
        // the keys; or finds the sentinel (its batch position).
        let lay_out = |kh: &Handle, (mask, counts): (&Handle, Handle)| {
            let read = client.read(vec![counts, dedup.guard()]);
            if let Some(index) =
                Dedup::sentinel_of(&read[1]).filter(|_| Router::<K, V>::checks_sentinel(self))
            {
                return Err(index);
            }
            let layout = layout_of(&read[0], route.children);
            if let Some(f) =
                framed.filter(|f| (0..route.children).all(|c| layout.1[c] <= f.room[c]))
            {
                return Ok(Mode::Framed(self.framed_run(f, layout.1, n)));
            }
            Ok(Mode::Parts(self.route_part(
                (kh, Some(mask)),
                n,
                &entries,
                layout,
                false,
                route,
            )))
        };
        // Scatters the values chunks that have landed (`(buffer, first position, values)`), or upserts their
        // pairs in the frames.
        let flush = |mode: &Mode,
                     kh: &Handle,
                     mask: &Handle,
                     waiting: &mut Vec<(Handle, usize, usize)>| {
            for (vh, base, m) in waiting.drain(..) {
                match mode {
                    Mode::Parts(b) => {
                        let chunk = vh.offset_start((base * vb) as u64);
                        self.scatter_values(b, (&chunk, base, m), mask);
                    }
                    Mode::Framed(run) => {
                        let f = framed.expect("framed");
                        self.upsert_chunk((kh, &vh, mask), (base, m), f, run, (&entries, route));
                    }
                }
            }
        };
        let mut keys_in: Option<Handle> = None;
        let mut planned: Option<(Handle, Handle)> = None;
        let mut routed: Option<std::result::Result<Mode, usize>> = None;
        let mut waiting: Vec<(Handle, usize, usize)> = Vec::new();
        let mut uploaded = R::upload_chunked(
            client,
            &self.stager,
            &[bytes_of(&k), bytes_of(&v)],
            &dsts,
            self.sizes.chunk * kb,
            &mut |src, off, len, h| {
                if src == 0 {
                    if off == 0 {
                        keys_in = Some(h.clone());
                        dedup.clear(client, dedup.slots);
                    }
                    dedup.claim(client, h, off / kb, len / kb);
                    return;
                }
                waiting.push((h.clone(), off / vb, len / vb));
                let kh = keys_in.as_ref().expect("the keys land first");
                // The first values chunk: every key has landed and been claimed.
                let Some((mask, counts)) = &planned else {
                    planned = Some(plan(kh));
                    return;
                };
                let r = routed.get_or_insert_with(|| lay_out(kh, (mask, counts.clone())));
                if let Ok(mode) = r {
                    flush(mode, kh, mask, &mut waiting);
                }
            },
        )?;
        let (kh, vh) = (uploaded.remove(0), uploaded.remove(0));
        // A batch of one values chunk is planned and routed here, after its copy.
        let (mask, counts) = planned.unwrap_or_else(|| plan(&kh));
        let routed = routed.unwrap_or_else(|| lay_out(&kh, (&mask, counts)));
        dedup.release(cache);
        let give_inputs = |kh, vh, mask| {
            cache.give("route keys in", kh, n * kb);
            cache.give("route values in", vh, n * vb);
            cache.give("dedup mask", mask, n * 4);
        };
        let mode = match routed {
            Ok(mode) => mode,
            Err(index) => {
                // The claims met the sentinel: nothing is routed or inserted.
                give_inputs(kh, vh, mask);
                return Err(hashtile_core::Error::SentinelKey { index });
            }
        };
        flush(&mode, &kh, &mask, &mut waiting);
        let batch = match mode {
            Mode::Framed(run) => {
                trace.mark(client, "framed upsert: copied, classified, inserted");
                let counts = self.settle_framed(run, (&kh, &mask, n), (&entries, route));
                give_inputs(kh, vh, mask);
                return counts.map(Upserted::Framed);
            }
            Mode::Parts(b) => b,
        };
        trace.mark(client, "route upsert: copied, routed, values scattered");
        let done = on_part(&batch);
        // One read settles every child the batch queued.
        let counters = done
            .as_ref()
            .map_or_else(|_| Vec::new(), |_| self.read_counters(&batch));
        self.give_back(batch);
        give_inputs(kh, vh, mask);
        done.map(|_| Upserted::Routed(counters))
    }

    fn counters(&self, batch: &RoutedBatch) -> Result<Vec<u32>> {
        Ok(self.read_counters(batch))
    }

    fn find(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        on_part: &mut dyn FnMut(&RoutedBatch) -> Result<()>,
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()> {
        check_children(route)?;
        let (client, cache) = (&self.client, &self.cache);
        let mut trace = trace();
        let (kb, vb) = widths::<L>();
        let n = keys.len();
        let words = n.div_ceil(32);
        let k = words_of::<K, L::Key>(keys);
        let entries = self.client.create_from_slice(bytes_of(route.entries));
        // Each chunk is scattered as it lands, into parts sized from each child's share of the directory
        // (their cursors carry over from chunk to chunk), so that only the children's finds and the gather
        // run after the copy; the cursors, read back once, give the parts' lengths.
        let with_bits = bits.is_some();
        let (starts, ends, total) = estimated_parts(route, n);
        // Each part sized ahead has slack (at least `CHUNK_ALIGN` keys): a batch that is small for its
        // children counts its keys first instead.
        let ahead = (total <= n + n / 4).then(|| {
            let parts = self.parts(n, total, false, with_bits);
            let cursor = self.per_child(starts.iter().copied(), route.children);
            let ends = self.per_child(ends.iter().copied(), route.children);
            let overflow = self.client.create_from_slice(bytes_of(&[0u32]));
            (parts, cursor, ends, overflow)
        });
        let counts = ahead.is_none().then(|| self.zeroed_counts(route));
        let mut uploaded = R::upload_chunked(
            client,
            &self.stager,
            &[bytes_of(&k)],
            &[cache.take(client, "route keys in", n * kb)],
            self.sizes.chunk * kb,
            &mut |_, off, len, h| {
                let chunk = h.clone().offset_start(off as u64);
                match (&ahead, &counts) {
                    (Some((parts, cursor, ends, overflow)), _) => {
                        let at = parts.positions.clone().offset_start((off / kb * 4) as u64);
                        self.scatter(
                            (&chunk, None),
                            len / kb,
                            (&entries, cursor),
                            (&parts.keys, None),
                            &at,
                            (total, Some((ends, overflow))),
                            route,
                        );
                    }
                    (None, Some(counts)) => {
                        self.count(&chunk, None, len / kb, (&entries, counts), route)
                    }
                    (None, None) => unreachable!("either parts sized ahead or counts"),
                }
            },
        )?;
        let kh = uploaded.remove(0);
        trace.mark(client, "route find: keys copied and scattered or counted");
        let scattered = ahead.and_then(|(parts, cursor, _, overflow)| {
            let read = client.read(vec![cursor, overflow]);
            if u32::from_bytes(&read[1])[0] == 0 {
                let ends = u32::from_bytes(&read[0]);
                let counts = (0..route.children)
                    .map(|c| ends[c] as usize - starts[c])
                    .collect();
                Some(self.routed(parts, (starts, counts), false, with_bits, route))
            } else {
                // A part overflowed (keys that collide in the route hash): counted and scattered again.
                self.give_parts(parts);
                None
            }
        });
        let batch = match scattered {
            Some(b) => b,
            None => {
                let counts = counts.unwrap_or_else(|| {
                    let counts = self.zeroed_counts(route);
                    self.count(&kh, None, n, (&entries, &counts), route);
                    counts
                });
                let layout = self.layout(counts, route.children);
                self.route_part((&kh, None), n, &entries, layout, with_bits, route)
            }
        };
        trace.mark(client, "route: parts read");
        cache.give("route keys in", kh, n * kb);
        let looked_up = on_part(&batch);
        trace.mark(client, "route find: copied, routed, children's finds");
        let oh = cache.take(client, "route out", n.max(1) * vb);
        let bh = bits
            .is_some()
            .then(|| cache.take(client, "route bits", words.max(1) * 4));
        if looked_up.is_ok() {
            if let Some(bh) = &bh {
                fill_u32(client, bh, words, 0);
            }
            self.gather(&batch, (&oh, bh.as_ref()), 0);
        }
        self.give_back(batch);
        looked_up?;
        trace.mark(client, "route find: gathered");
        with_words_mut::<V, L::Value, _>(out, |o| {
            R::download(client, &self.stager, &oh, bytes_of_mut(o))
        })?;
        if let (Some(bits), Some(bh)) = (bits, bh) {
            R::download(client, &self.stager, &bh, bytes_of_mut(&mut bits[..words]))?;
            cache.give("route bits", bh, words * 4);
        }
        trace.mark(client, "route find: answers copied out");
        cache.give("route out", oh, n * vb);
        Ok(())
    }

    fn find_framed(
        &self,
        keys: &[K],
        route: RouteMap<'_>,
        frames: &SlotFrames,
        descs: &[u32],
        out: &mut [V],
        bits: Option<&mut [u32]>,
    ) -> Result<()> {
        let client = &self.client;
        let mut trace = trace();
        let kb = widths::<L>().0;
        let k = words_of::<K, L::Key>(keys);
        let entries = client.create_from_slice(bytes_of(route.entries));
        let descs = client.create_from_slice(u32::as_bytes(descs));
        // The plain table's find: each chunk looked up as it lands, straight into the answers.
        with_words_mut::<V, L::Value, _>(out, |o| {
            self.link()
                .map_keys(bytes_of(&k), kb, bytes_of_mut(o), bits, |c| {
                    self.find_chunk(
                        (c.keys, c.n),
                        frames,
                        (&descs, &entries),
                        (c.out, c.bits),
                        route,
                    )
                })
        })?;
        trace.mark(client, "framed find: copied, looked up, answers copied out");
        Ok(())
    }

    fn download(&self, batch: &RoutedBatch, c: usize) -> Result<(Vec<K>, Vec<V>)> {
        let n = batch.counts[c];
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        // Only the part's bytes: the handle is bounded at both ends.
        let read = |h: Handle, out: &mut [u8]| {
            let end = h.size_in_used() - out.len() as u64;
            let all = self.client.read_one_unchecked(h.offset_end(end));
            out.copy_from_slice(&all[..out.len()]);
        };
        let mut k = vec![L::Key::default(); n];
        let mut v = vec![L::Value::default(); n];
        read(batch.keys_of(c), bytes_of_mut(&mut k));
        read(batch.values_of(c), bytes_of_mut(&mut v));
        let k: Vec<K> = k.iter().map(|w| K::narrow(w.widen())).collect();
        let v: Vec<V> = v.iter().map(|w| V::narrow(w.widen())).collect();
        Ok((k, v))
    }
}
