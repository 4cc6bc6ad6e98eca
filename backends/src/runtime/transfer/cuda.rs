//! [`HostTransfer`] on CUDA: the host path's own stream with a ring of pinned staging buffers (a host copy into
//! a stage overlaps the copy engine draining the others), direct copies from pinned sources, and the copy
//! ceilings the benchmarks measure. The trait and the Vulkan side are in `transfer.rs`.

use super::*;
use crate::runtime::trace::Trace;
use cubecl::cuda::CudaRuntime;
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::sync::Mutex;

/// Bytes per staging buffer, and buffers in the ring: the host fills one while the copy engine drains
/// the others.
const STAGE_BYTES: usize = 16 << 20;
/// The finest cut of a pinned source (see `upload_chunked`).
const PINNED_MIN_CHUNK: usize = 4 << 20;
const STAGES: usize = 4;

struct Stage {
    buf: PinnedAlloc,
    /// Recorded after the last copy that used `buf`.
    done: sys::CUevent,
    /// A device-to-host copy landed in `buf` (its offset in the download and its length) and still has
    /// to be handed to the download's consumer.
    pending_out: Option<(usize, usize)>,
}

/// Chunks of a chunked upload whose copies are queued ahead of the one whose `landed` call is next, by
/// default: the host's turn per chunk (an event wait and the `landed` callback's kernel launches, about 80 us
/// with the host path's per-segment passes) then never leaves the copy engine without queued work. One
/// ahead was enough while the callbacks launched one kernel each.
const COPY_AHEAD: usize = 4;

struct Inner {
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    /// Copies from the device into page-locked memory (paged tables' page-outs): a stream of their own,
    /// so that they run beside the uploads queued on `stream` (the bus is full duplex).
    out_stream: sys::CUstream,
    stages: Vec<Stage>,
    next: usize,
    /// Recorded after the copy of each chunk of a chunked upload (`COPY_AHEAD + 1`, in rotation).
    chunk_done: Vec<sys::CUevent>,
}

/// A CUDA stream of the host path's own with a ring of pinned staging buffers (see the module docs).
pub struct CudaStager(Mutex<Inner>);

// SAFETY: the raw CUDA handles are only used under the mutex, after making the context current.
unsafe impl Send for CudaStager {}
// SAFETY: as above.
unsafe impl Sync for CudaStager {}

unsafe fn free_pinned(p: *mut u8, ctx: usize) {
    // SAFETY: `p` came from `cu::malloc_host` in context `ctx`, which stays retained.
    unsafe {
        let _ = cu::ctx::set_current(ctx as sys::CUcontext);
        let _ = cu::free_host(p.cast());
    }
}

fn check<T>(what: &str, r: std::result::Result<T, cudarc::driver::DriverError>) -> Result<T> {
    r.map_err(|e| device_error(what, e))
}

fn make_current(ctx: sys::CUcontext) -> Result<()> {
    // SAFETY: `ctx` is the device's primary context, retained for the stager's lifetime.
    check("cuCtxSetCurrent", unsafe { cu::ctx::set_current(ctx) })
}

fn pinned(ctx: sys::CUcontext, n: usize) -> Result<PinnedAlloc> {
    make_current(ctx)?;
    // SAFETY: plain page-locked host allocation; freed by `free_pinned`.
    let ptr = check("cuMemHostAlloc", unsafe { cu::malloc_host(n.max(1), 0) })?;
    Ok(PinnedAlloc {
        ptr: ptr.cast(),
        len: n,
        ctx: ctx as usize,
        free: free_pinned,
    })
}

/// `true` if `p` is page-locked host memory the driver knows (a `PinnedBuffer`, or registered memory).
/// `cuPointerGetAttributes` (plural) answers "unknown" for pageable memory instead of failing, so
/// compute-sanitizer sees no API error.
fn is_pinned(p: *const u8) -> bool {
    let mut kind: u32 = 0;
    let mut attr = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    let mut data = [(&mut kind as *mut u32).cast::<std::ffi::c_void>()];
    // SAFETY: a query of one attribute into `kind`; unknown pointers leave it 0.
    let r = unsafe {
        sys::cuPointerGetAttributes(1, &mut attr, data.as_mut_ptr(), p as sys::CUdeviceptr)
    };
    r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

/// The device address of `h` (for copies and NCCL transfers CubeCL does not make).
pub(crate) fn device_ptr(client: &ComputeClient<CudaRuntime>, h: &Handle) -> Result<u64> {
    let r = client
        .get_resource(h.clone())
        .map_err(|e| device_error("device pointer", e))?;
    Ok(r.resource().ptr)
}

/// The device addresses of `dsts` (0 where the source is empty: nothing is copied there), after waiting
/// for CubeCL's queued kernels: CubeCL may hand out memory one of them still reads (an upload's
/// destinations are all allocated before it queues kernels of its own, so one wait is enough).
fn upload_targets(
    client: &ComputeClient<CudaRuntime>,
    srcs: &[&[u8]],
    dsts: &[Handle],
) -> Result<Vec<u64>> {
    let mut ptrs = Vec::with_capacity(srcs.len());
    for (h, s) in dsts.iter().zip(srcs) {
        ptrs.push(if s.is_empty() {
            0
        } else {
            device_ptr(client, h)?
        });
    }
    sync_device(client)?;
    Ok(ptrs)
}

impl Inner {
    /// Waits for stage `i`'s last copy; a copy-out that landed in it goes to `consume` (its offset in the
    /// download, and its bytes).
    fn reclaim(&mut self, i: usize, consume: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        let st = &mut self.stages[i];
        // SAFETY: `done` is a live event of this context.
        check("cuEventSynchronize", unsafe {
            cu::event::synchronize(st.done)
        })?;
        if let Some((off, n)) = st.pending_out.take() {
            // SAFETY: the copy-out behind `done` wrote `n <= STAGE_BYTES` bytes into the stage.
            let s = unsafe { std::slice::from_raw_parts(st.buf.ptr as *const u8, n) };
            consume(off, s);
        }
        Ok(())
    }
    /// The next stage of the ring, free (a pending copy-out from it handed to `consume` first; uploads
    /// never meet one: a download hands out or forgets all of its own before it returns).
    fn take_stage(&mut self, consume: &mut dyn FnMut(usize, &[u8])) -> Result<usize> {
        let i = self.next;
        self.next = (self.next + 1) % self.stages.len();
        self.reclaim(i, consume)?;
        Ok(i)
    }
    /// Waits for every stage, handing pending copy-outs to `consume` oldest first.
    fn drain(&mut self, consume: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        for k in 0..self.stages.len() {
            let i = (self.next + k) % self.stages.len();
            self.reclaim(i, consume)?;
        }
        Ok(())
    }
    /// After a failed copy: waits for the stream and forgets pending copy-outs, whose destination the
    /// caller is about to take back.
    fn abandon(&mut self) {
        // SAFETY: `stream` is this stager's live stream.
        let _ = unsafe { cu::stream::synchronize(self.stream) };
        for st in &mut self.stages {
            st.pending_out = None;
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the handles belong to this stager; the stream is idle once synchronised.
        unsafe {
            let _ = cu::ctx::set_current(self.ctx);
            let _ = cu::stream::synchronize(self.stream);
            for st in &self.stages {
                let _ = cu::event::destroy(st.done);
            }
            for &e in &self.chunk_done {
                let _ = cu::event::destroy(e);
            }
            let _ = cu::stream::synchronize(self.out_stream);
            let _ = cu::stream::destroy(self.stream);
            let _ = cu::stream::destroy(self.out_stream);
        }
    }
}

/// An event recorded after copies queued by `upload_queued` (destroyed once waited for, or on drop).
pub struct CudaFence {
    ctx: sys::CUcontext,
    event: sys::CUevent,
}

// SAFETY: the event is only touched by `wait` or `drop`, which take the fence by value or by `&mut`.
unsafe impl Send for CudaFence {}
// SAFETY: as above; `&CudaFence` gives no access to the event.
unsafe impl Sync for CudaFence {}

impl CudaFence {
    /// Waits for the event and destroys it; on an error the event stays (later waits fail again).
    fn finish(&mut self) -> Result<()> {
        if self.event.is_null() {
            return Ok(());
        }
        make_current(self.ctx)?;
        // SAFETY: a live event of this context, recorded once.
        check("cuEventSynchronize", unsafe {
            cu::event::synchronize(self.event)
        })?;
        let event = std::mem::replace(&mut self.event, std::ptr::null_mut());
        // SAFETY: completed above; destroyed once.
        let _ = unsafe { cu::event::destroy(event) };
        Ok(())
    }
}

impl Drop for CudaFence {
    fn drop(&mut self) {
        // The copies read host memory the fence's owner is about to free: they finish first.
        let _ = self.finish();
    }
}

impl HostTransfer for CudaRuntime {
    type Stager = CudaStager;
    const UPLOADS_INTO_DSTS: bool = true;

    fn ordinal(client: &ComputeClient<Self>) -> Result<usize> {
        // The client does not say which device it drives; a buffer of its own does.
        let probe = client.empty(4);
        let ptr = device_ptr(client, &probe)?;
        let mut ordinal: std::ffi::c_int = 0;
        // SAFETY: a query of one attribute of a live device allocation into `ordinal`.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut std::ffi::c_int).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr as sys::CUdeviceptr,
            )
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(device_error("cuPointerGetAttribute", r));
        }
        Ok(ordinal.max(0) as usize)
    }

    fn stager(client: &ComputeClient<Self>) -> Result<CudaStager> {
        // CubeCL runs in the device's primary context; retaining it again gives the same context.
        let ordinal = Self::ordinal(client)?;
        let dev = check("cuDeviceGet", cu::device::get(ordinal as std::ffi::c_int))?;
        // SAFETY: `dev` is a valid device; the retained context is never released (CubeCL keeps it too).
        let ctx = check("cuDevicePrimaryCtxRetain", unsafe {
            cu::primary_ctx::retain(dev)
        })?;
        make_current(ctx)?;
        let stream = check(
            "cuStreamCreate",
            cu::stream::create(cu::stream::StreamKind::NonBlocking),
        )?;
        let out_stream = check(
            "cuStreamCreate",
            cu::stream::create(cu::stream::StreamKind::NonBlocking),
        )?;
        let mut stages = Vec::with_capacity(STAGES);
        for _ in 0..STAGES {
            let done = check(
                "cuEventCreate",
                cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING),
            )?;
            // SAFETY: a fresh event recorded on a fresh stream completes at once.
            check("cuEventRecord", unsafe { cu::event::record(done, stream) })?;
            stages.push(Stage {
                buf: pinned(ctx, STAGE_BYTES)?,
                done,
                pending_out: None,
            });
        }
        let event = || {
            check(
                "cuEventCreate",
                cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING),
            )
        };
        let chunk_done = (0..=COPY_AHEAD)
            .map(|_| event())
            .collect::<Result<Vec<_>>>()?;
        Ok(CudaStager(Mutex::new(Inner {
            ctx,
            stream,
            out_stream,
            stages,
            next: 0,
            chunk_done,
        })))
    }

    fn upload_chunked(
        client: &ComputeClient<Self>,
        stager: &CudaStager,
        srcs: &[&[u8]],
        dsts: &[Handle],
        chunk: usize,
        landed: &mut dyn FnMut(usize, usize, usize, &Handle),
    ) -> Result<Vec<Handle>> {
        let handles: Vec<Handle> = dsts.to_vec();
        let ptrs = upload_targets(client, srcs, dsts)?;
        let mut st = stager.0.lock().expect("stager poisoned");
        make_current(st.ctx)?;
        let stream = st.stream;
        let chunk = chunk.max(1);
        // Chunks whose copies are queued and whose `landed` calls are still due, oldest first.
        let mut due: std::collections::VecDeque<(usize, usize, usize, sys::CUevent)> =
            std::collections::VecDeque::new();
        let ahead = COPY_AHEAD;
        let mut n_chunks = 0usize;
        // Diagnosis (a TRACE subscriber): where the host's time goes per chunked upload: queueing copies
        // (pageable sources: the staging copies), waiting for chunks to land, and the `landed` callbacks.
        let mut timeline = Trace::new("chunked upload");
        let mut run = |st: &mut Inner| -> Result<()> {
            for (i, (src, &dst)) in srcs.iter().zip(&ptrs).enumerate() {
                let pinned = !src.is_empty() && is_pinned(src.as_ptr());
                // Pinned memory copies ~7x faster than the staging ring fills, so a pinned source is
                // cut 4x finer (down to 4 MB): each chunk's kernel then waits on a shorter copy (H100,
                // 2^26-key pinned insert: 2.4 G keys/s at 16 MB chunks, 2.8 at 4 MB; pageable sources
                // lose at 4 MB: the per-chunk waits stall the staging copies).
                let chunk = if pinned && chunk / 4 >= PINNED_MIN_CHUNK {
                    chunk / 4
                } else {
                    chunk
                };
                for (c, piece) in src.chunks(chunk).enumerate() {
                    let off = c * chunk;
                    if pinned {
                        // SAFETY: the range lies inside the buffer; `src` stays borrowed until the
                        // stream syncs.
                        check("cuMemcpyHtoDAsync", unsafe {
                            cu::memcpy_htod_async(dst + off as u64, piece, stream)
                        })?;
                    } else {
                        for (k, sub) in piece.chunks(STAGE_BYTES).enumerate() {
                            let j = st.take_stage(&mut |_, _| {})?;
                            let stage = &mut st.stages[j];
                            // SAFETY: the stage's last copy is finished (`take_stage`), so the host may
                            // write it; the device range lies inside the buffer; the stage stays
                            // untouched until its event (recorded right after) completes.
                            unsafe {
                                let buf = std::slice::from_raw_parts_mut(stage.buf.ptr, sub.len());
                                par_copy(buf, sub);
                                check(
                                    "cuMemcpyHtoDAsync",
                                    cu::memcpy_htod_async(
                                        dst + (off + k * STAGE_BYTES) as u64,
                                        &*buf,
                                        stream,
                                    ),
                                )?;
                                check("cuEventRecord", cu::event::record(stage.done, stream))?;
                            }
                        }
                    }
                    // Events rotate through `ahead + 1` slots: an event is recorded again only after
                    // its chunk left `due` (at most `ahead` are due when this one is recorded).
                    let ev = st.chunk_done[n_chunks % (ahead + 1)];
                    n_chunks += 1;
                    // SAFETY: a live event of this context, recorded on this stager's stream.
                    check("cuEventRecord", unsafe { cu::event::record(ev, stream) })?;
                    timeline.lap("queueing");
                    due.push_back((i, off, piece.len(), ev));
                    // The oldest chunk has landed once its event completes: queue its kernels, which then
                    // run while the chunks queued after it are copied.
                    if due.len() > ahead {
                        let (pi, o, l, e) = due.pop_front().expect("non-empty");
                        // SAFETY: a live event.
                        check("cuEventSynchronize", unsafe { cu::event::synchronize(e) })?;
                        timeline.lap("waiting");
                        landed(pi, o, l, &handles[pi]);
                        timeline.lap("landed");
                    }
                }
            }
            while let Some((pi, o, l, e)) = due.pop_front() {
                // SAFETY: a live event.
                check("cuEventSynchronize", unsafe { cu::event::synchronize(e) })?;
                timeline.lap("waiting");
                landed(pi, o, l, &handles[pi]);
                timeline.lap("landed");
            }
            Ok(())
        };
        let r = run(&mut st);
        timeline.report("upload", n_chunks);
        // SAFETY: `stream` is this stager's live stream; after this no copy reads the sources.
        let synced = check("cuStreamSynchronize", unsafe {
            cu::stream::synchronize(stream)
        });
        r.and(synced).map(|_| handles)
    }

    type Fence = CudaFence;

    fn upload_queued(
        client: &ComputeClient<Self>,
        stager: &CudaStager,
        srcs: &[&[u8]],
        dsts: &[Handle],
    ) -> Result<(Vec<Handle>, Option<CudaFence>)> {
        if srcs.iter().any(|s| !s.is_empty() && !is_pinned(s.as_ptr())) {
            // Pageable sources pass through the staging ring, which the host fills: no queueing.
            let h =
                Self::upload_chunked(client, stager, srcs, dsts, usize::MAX, &mut |_, _, _, _| {})?;
            return Ok((h, None));
        }
        // The destination may be memory a queued kernel still reads (a frame a paged-out child left).
        let ptrs = upload_targets(client, srcs, dsts)?;
        let st = stager.0.lock().expect("stager poisoned");
        make_current(st.ctx)?;
        let queue = || -> Result<sys::CUevent> {
            for (src, &dst) in srcs.iter().zip(&ptrs) {
                if !src.is_empty() {
                    // SAFETY: `dst` holds at least `src.len()` bytes (the caller's buffers); the source stays
                    // alive and unchanged until the fence is waited for (the trait's contract).
                    check("cuMemcpyHtoDAsync", unsafe {
                        cu::memcpy_htod_async(dst, src, st.stream)
                    })?;
                }
            }
            let event = check(
                "cuEventCreate",
                cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING),
            )?;
            // SAFETY: a fresh event of this context, on this stager's live stream.
            if let Err(e) = check("cuEventRecord", unsafe {
                cu::event::record(event, st.stream)
            }) {
                // SAFETY: never recorded; destroyed once.
                let _ = unsafe { cu::event::destroy(event) };
                return Err(e);
            }
            Ok(event)
        };
        match queue() {
            Ok(event) => Ok((dsts.to_vec(), Some(CudaFence { ctx: st.ctx, event }))),
            Err(e) => {
                // SAFETY: this stager's live stream; no copy may outlive the error.
                let _ = unsafe { cu::stream::synchronize(st.stream) };
                Err(e)
            }
        }
    }

    fn wait(fence: &mut CudaFence) -> Result<()> {
        fence.finish()
    }

    fn download(
        client: &ComputeClient<Self>,
        stager: &CudaStager,
        src: &Handle,
        dst: &mut [u8],
    ) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        if !is_pinned(dst.as_ptr()) {
            let len = dst.len();
            return Self::download_with(client, stager, src, len, &mut |off, b| {
                par_copy(&mut dst[off..off + b.len()], b)
            });
        }
        sync_device(client)?; // the kernels that write `src` are done
        let from = device_ptr(client, src)?;
        let st = stager.0.lock().expect("stager poisoned");
        make_current(st.ctx)?;
        // On the copy-out stream, beside uploads queued on the other one (`upload_queued`), which never
        // write `src`: their owners wait for them before anything reads their buffers.
        let out = st.out_stream;
        // SAFETY: `src` holds at least `dst.len()` bytes; the stream is synchronised below.
        unsafe {
            check(
                "cuMemcpyDtoHAsync",
                cu::memcpy_dtoh_async(&mut *dst, from, out),
            )?;
            check("cuStreamSynchronize", cu::stream::synchronize(out))?;
        }
        Ok(())
    }

    fn download_with(
        client: &ComputeClient<Self>,
        stager: &CudaStager,
        src: &Handle,
        len: usize,
        consume: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        sync_device(client)?; // the kernels that write `src` are done
        Self::download_ready_with(client, stager, src, len, consume)
    }

    fn download_ready_with(
        client: &ComputeClient<Self>,
        stager: &CudaStager,
        src: &Handle,
        len: usize,
        consume: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let from = device_ptr(client, src)?;
        let mut st = stager.0.lock().expect("stager poisoned");
        make_current(st.ctx)?;
        let stream = st.stream;
        // Each piece lands in a staging buffer of the ring; the host hands it to `consume` when the ring
        // comes round to that buffer again, while the copy engine fills the others.
        let mut copy = |st: &mut Inner| -> Result<()> {
            for off in (0..len).step_by(STAGE_BYTES) {
                let n = (len - off).min(STAGE_BYTES);
                let i = st.take_stage(consume)?;
                let stage = &mut st.stages[i];
                // SAFETY: the stage is free (`take_stage`); the device range lies inside `src`.
                unsafe {
                    let buf = std::slice::from_raw_parts_mut(stage.buf.ptr, n);
                    check(
                        "cuMemcpyDtoHAsync",
                        cu::memcpy_dtoh_async(buf, from + off as u64, stream),
                    )?;
                    check("cuEventRecord", cu::event::record(stage.done, stream))?;
                }
                stage.pending_out = Some((off, n));
            }
            st.drain(consume)
        };
        let r = copy(&mut st);
        if r.is_err() {
            st.abandon();
        }
        r
    }

    fn alloc_pinned(stager: &CudaStager, n: usize) -> Option<PinnedAlloc> {
        let ctx = stager.0.lock().expect("stager poisoned").ctx;
        pinned(ctx, n).ok()
    }

    fn copy_ceiling(client: &ComputeClient<Self>, bytes: usize) -> Result<Option<CopyCeiling>> {
        let stager = Self::stager(client)?;
        let ctx = stager.0.lock().expect("stager poisoned").ctx;
        let dev = client.empty(bytes.max(4));
        let ptr = device_ptr(client, &dev)?;
        sync_device(client)?;
        let mut pageable = vec![0x5au8; bytes];
        let pin = pinned(ctx, bytes)?;
        // SAFETY: `pin` holds `bytes` bytes; filled before any copy reads it.
        let pin = unsafe {
            std::ptr::write_bytes(pin.ptr, 0xa5, bytes);
            (pin.ptr, pin)
        };
        make_current(ctx)?;
        let best = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
            let mut best = f64::INFINITY;
            for _ in 0..3 {
                let t0 = std::time::Instant::now();
                f()?;
                best = best.min(t0.elapsed().as_secs_f64());
            }
            Ok(bytes as f64 / best / 1e9)
        };
        // SAFETY (all four): `ptr` is a device buffer of `bytes` bytes; the host buffers hold `bytes` bytes
        // and outlive the synchronous copies.
        let h2d_pageable = best(&mut || {
            check("cuMemcpyHtoD", unsafe {
                cu::memcpy_htod_sync(ptr, &pageable)
            })
        })?;
        let h2d_pinned = best(&mut || {
            let src = unsafe { std::slice::from_raw_parts(pin.0 as *const u8, bytes) };
            check("cuMemcpyHtoD", unsafe { cu::memcpy_htod_sync(ptr, src) })
        })?;
        let d2h_pageable = best(&mut || {
            check("cuMemcpyDtoH", unsafe {
                cu::memcpy_dtoh_sync(&mut pageable, ptr)
            })
        })?;
        let d2h_pinned = best(&mut || {
            let dst = unsafe { std::slice::from_raw_parts_mut(pin.0, bytes) };
            check("cuMemcpyDtoH", unsafe { cu::memcpy_dtoh_sync(dst, ptr) })
        })?;
        drop(pin);
        Ok(Some(CopyCeiling {
            bytes,
            h2d_pageable,
            h2d_pinned,
            d2h_pageable,
            d2h_pinned,
        }))
    }

    fn free_device_memory(stager: &CudaStager) -> Option<u64> {
        let st = stager.0.lock().expect("stager poisoned");
        make_current(st.ctx).ok()?;
        cu::mem_get_info().ok().map(|(free, _)| free as u64)
    }
}
