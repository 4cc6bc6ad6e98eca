//! Host <-> device copies of the host API, per runtime ([`HostTransfer`]).
//!
//! CubeCL 0.10 uploads through `create_from_slice`, which copies the data twice on the host and then copies
//! from pageable memory, and reads back whole buffers into fresh allocations; it has no way to write into an
//! existing buffer from pinned memory. So on **CUDA** the host path uses cudarc (already in the dependency
//! tree through cubecl-cuda) on a stream of its own, in CubeCL's context (the device's primary context):
//!
//! - pageable data moves through a ring of pinned staging buffers: the host copies piece `k + 1` into a free
//!   buffer (in parallel) while the copy engine moves piece `k`;
//! - pinned data (a [`PinnedBuffer`], or any page-locked memory: detected with `cuPointerGetAttribute`) is
//!   copied directly, at the full bus rate;
//! - device pointers come from CubeCL's own buffers (`ComputeClient::get_resource`); before a CubeCL kernel
//!   reads an upload, the host waits for this stream, and before a read-back, for CubeCL's streams.
//!
//! On **Vulkan** (wgpu) the plain CubeCL calls are used (`create_from_slice`, `read_one`): simpler, and the
//! software and hardware Vulkan targets CI and users run are not bus-bound.

use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::{Error, Result};

/// Moves host slices into new device buffers and device buffers into host slices, for one runtime.
pub trait HostTransfer: Runtime {
    /// Per-table transfer state (CUDA: a stream and pinned staging buffers).
    type Stager: Send + Sync;
    /// Makes the transfer state for `client`'s device.
    fn stager(client: &ComputeClient<Self>) -> Result<Self::Stager>;
    /// A new device buffer holding `src` (ready for kernels when this returns).
    fn upload(client: &ComputeClient<Self>, stager: &Self::Stager, src: &[u8]) -> Result<Handle>;
    /// Copies the first `dst.len()` bytes of `src` into `dst`, after all queued kernels.
    fn download(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        src: &Handle,
        dst: &mut [u8],
    ) -> Result<()>;
    /// Host memory the device can copy at the full bus rate (`n` bytes), or `None` when the runtime has none
    /// (then a [`PinnedBuffer`] falls back to ordinary memory).
    fn alloc_pinned(stager: &Self::Stager, n: usize) -> Option<PinnedAlloc>;
    /// Device memory free for new buffers, in bytes, when the runtime can tell.
    fn free_device_memory(stager: &Self::Stager) -> Option<u64>;
}

/// Page-locked host memory (freed with the runtime's own call on drop).
pub struct PinnedAlloc {
    ptr: *mut u8,
    len: usize,
    /// Context word the free function needs (CUDA: the context to make current).
    ctx: usize,
    free: unsafe fn(*mut u8, usize),
}

// SAFETY: the allocation is plain host memory owned by this value; access goes through &/&mut borrows.
unsafe impl Send for PinnedAlloc {}
// SAFETY: as above.
unsafe impl Sync for PinnedAlloc {}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from the allocator `free` belongs to and is freed once.
        unsafe { (self.free)(self.ptr, self.ctx) }
    }
}

/// A host buffer of `T` in page-locked (pinned) memory when the backend has it (CUDA), so that the host API
/// moves it at the full bus rate (about 6x a `Vec` on an H100). Use it like a slice:
/// `table.insert(&keys[..], &values[..])` detects pinned memory by itself.
pub struct PinnedBuffer<T: Copy + Default> {
    pinned: Option<PinnedAlloc>,
    fallback: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> PinnedBuffer<T> {
    /// `len` default elements in pinned memory from `alloc` (ordinary memory when `alloc` is `None`).
    pub(crate) fn from_alloc(alloc: Option<PinnedAlloc>, len: usize) -> Self {
        match alloc {
            Some(a) => {
                debug_assert!(a.len >= len * size_of::<T>());
                debug_assert_eq!(a.ptr as usize % align_of::<T>(), 0);
                let mut b = Self {
                    pinned: Some(a),
                    fallback: Vec::new(),
                    len,
                };
                b.fill(T::default());
                b
            }
            None => Self {
                pinned: None,
                fallback: vec![T::default(); len],
                len,
            },
        }
    }
    /// `true` when the memory really is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }
}

impl<T: Copy + Default> std::ops::Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.pinned {
            // SAFETY: the allocation holds `len` initialised `T`s (filled on creation), aligned (page-aligned).
            Some(a) => unsafe { std::slice::from_raw_parts(a.ptr as *const T, self.len) },
            None => &self.fallback,
        }
    }
}

impl<T: Copy + Default> std::ops::DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.pinned {
            // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
            Some(a) => unsafe { std::slice::from_raw_parts_mut(a.ptr as *mut T, self.len) },
            None => &mut self.fallback,
        }
    }
}

/// Copies `src` into `dst` (same length) with all cores when it is large: one core copies about 10 GB/s,
/// less than the pinned bus.
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    if src.len() <= 4 * PIECE {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

fn device_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

#[cfg(feature = "vulkan")]
impl HostTransfer for cubecl::wgpu::WgpuRuntime {
    type Stager = ();
    fn stager(_: &ComputeClient<Self>) -> Result<()> {
        Ok(())
    }
    fn upload(client: &ComputeClient<Self>, _: &(), src: &[u8]) -> Result<Handle> {
        Ok(client.create_from_slice(src))
    }
    fn download(client: &ComputeClient<Self>, _: &(), src: &Handle, dst: &mut [u8]) -> Result<()> {
        let bytes = client
            .read_one(src.clone())
            .map_err(|e| device_error("read-back", e))?;
        dst.copy_from_slice(&bytes[..dst.len()]);
        Ok(())
    }
    fn alloc_pinned(_: &(), _: usize) -> Option<PinnedAlloc> {
        None
    }
    fn free_device_memory(_: &()) -> Option<u64> {
        None
    }
}

#[cfg(feature = "cuda")]
pub use cuda::CudaStager;

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use cubecl::cuda::CudaRuntime;
    use cudarc::driver::result as cu;
    use cudarc::driver::sys;
    use std::sync::Mutex;

    /// Bytes per staging buffer, and buffers in the ring: the host fills one while the copy engine drains
    /// the others.
    const STAGE_BYTES: usize = 16 << 20;
    const STAGES: usize = 4;

    struct Stage {
        buf: PinnedAlloc,
        /// Recorded after the last copy that used `buf`.
        done: sys::CUevent,
        /// A device-to-host copy landed in `buf` and still has to be copied out to `dst`.
        pending_out: Option<(*mut u8, usize)>,
    }

    struct Inner {
        ctx: sys::CUcontext,
        stream: sys::CUstream,
        stages: Vec<Stage>,
        next: usize,
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
    fn is_pinned(p: *const u8) -> bool {
        let mut kind: u32 = 0;
        // SAFETY: a query; an unknown (pageable) pointer makes it return an error, not fault.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                p as sys::CUdeviceptr,
            )
        };
        r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
    }

    fn device_ptr(client: &ComputeClient<CudaRuntime>, h: &Handle) -> Result<u64> {
        let r = client
            .get_resource(h.clone())
            .map_err(|e| device_error("device pointer", e))?;
        Ok(r.resource().ptr)
    }

    fn sync_cubecl(client: &ComputeClient<CudaRuntime>) -> Result<()> {
        cubecl::future::block_on(client.sync()).map_err(|e| device_error("device sync", e))
    }

    impl Inner {
        /// Waits for stage `i`'s last copy and finishes a pending copy-out from it.
        fn reclaim(&mut self, i: usize) -> Result<()> {
            let st = &mut self.stages[i];
            // SAFETY: `done` is a live event of this context.
            check("cuEventSynchronize", unsafe {
                cu::event::synchronize(st.done)
            })?;
            if let Some((dst, n)) = st.pending_out.take() {
                // SAFETY: `dst` points into the caller's slice of `download`, which is still borrowed (every
                // pending copy-out is finished before `download` returns); `n <= STAGE_BYTES`.
                let (d, s) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(dst, n),
                        std::slice::from_raw_parts(st.buf.ptr as *const u8, n),
                    )
                };
                par_copy(d, s);
            }
            Ok(())
        }
        fn take_stage(&mut self) -> Result<usize> {
            let i = self.next;
            self.next = (self.next + 1) % self.stages.len();
            self.reclaim(i)?;
            Ok(i)
        }
        fn drain(&mut self) -> Result<()> {
            for i in 0..self.stages.len() {
                self.reclaim(i)?;
            }
            Ok(())
        }
    }

    impl HostTransfer for CudaRuntime {
        type Stager = CudaStager;

        fn stager(client: &ComputeClient<Self>) -> Result<CudaStager> {
            // CubeCL runs in the device's primary context; retaining it again gives the same context.
            let _ = client.properties();
            let dev = check("cuDeviceGet", cu::device::get(0))?;
            // SAFETY: `dev` is a valid device; the retained context is never released (CubeCL keeps it too).
            let ctx = check("cuDevicePrimaryCtxRetain", unsafe {
                cu::primary_ctx::retain(dev)
            })?;
            make_current(ctx)?;
            let stream = check(
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
            Ok(CudaStager(Mutex::new(Inner {
                ctx,
                stream,
                stages,
                next: 0,
            })))
        }

        fn upload(client: &ComputeClient<Self>, stager: &CudaStager, src: &[u8]) -> Result<Handle> {
            let h = client.empty(src.len().max(4));
            if src.is_empty() {
                return Ok(h);
            }
            let dst = device_ptr(client, &h)?;
            // CubeCL queues the buffer's allocation on its own stream: let that finish first.
            sync_cubecl(client)?;
            let mut st = stager.0.lock().expect("stager poisoned");
            make_current(st.ctx)?;
            let stream = st.stream;
            if is_pinned(src.as_ptr()) {
                // SAFETY: `dst` holds `src.len()` bytes; `src` stays borrowed until the stream syncs below.
                check("cuMemcpyHtoDAsync", unsafe {
                    cu::memcpy_htod_async(dst, src, stream)
                })?;
            } else {
                for (k, piece) in src.chunks(STAGE_BYTES).enumerate() {
                    let i = st.take_stage()?;
                    let stage = &mut st.stages[i];
                    // SAFETY: the stage's last copy is finished (`take_stage`), so the host may write it.
                    let buf = unsafe { std::slice::from_raw_parts_mut(stage.buf.ptr, piece.len()) };
                    par_copy(buf, piece);
                    // SAFETY: the piece's device range lies inside `h`; the stage stays untouched until its
                    // event (recorded right after) completes.
                    unsafe {
                        check(
                            "cuMemcpyHtoDAsync",
                            cu::memcpy_htod_async(dst + (k * STAGE_BYTES) as u64, &*buf, stream),
                        )?;
                        check("cuEventRecord", cu::event::record(stage.done, stream))?;
                    }
                }
            }
            // CubeCL's kernels run on CubeCL's streams: the data must be in place before they are queued.
            // SAFETY: `stream` is this stager's live stream.
            check("cuStreamSynchronize", unsafe {
                cu::stream::synchronize(stream)
            })?;
            Ok(h)
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
            sync_cubecl(client)?; // the kernels that write `src` are done
            let from = device_ptr(client, src)?;
            let mut st = stager.0.lock().expect("stager poisoned");
            make_current(st.ctx)?;
            let stream = st.stream;
            if is_pinned(dst.as_ptr()) {
                // SAFETY: `src` holds at least `dst.len()` bytes; the stream is synchronised below.
                unsafe {
                    check(
                        "cuMemcpyDtoHAsync",
                        cu::memcpy_dtoh_async(&mut *dst, from, stream),
                    )?;
                    check("cuStreamSynchronize", cu::stream::synchronize(stream))?;
                }
                return Ok(());
            }
            for (k, piece) in dst.chunks_mut(STAGE_BYTES).enumerate() {
                let i = st.take_stage()?;
                let stage = &mut st.stages[i];
                // SAFETY: the stage is free (`take_stage`); the device range lies inside `src`.
                unsafe {
                    let buf = std::slice::from_raw_parts_mut(stage.buf.ptr, piece.len());
                    check(
                        "cuMemcpyDtoHAsync",
                        cu::memcpy_dtoh_async(buf, from + (k * STAGE_BYTES) as u64, stream),
                    )?;
                    check("cuEventRecord", cu::event::record(stage.done, stream))?;
                }
                stage.pending_out = Some((piece.as_mut_ptr(), piece.len()));
            }
            st.drain()
        }

        fn alloc_pinned(stager: &CudaStager, n: usize) -> Option<PinnedAlloc> {
            let ctx = stager.0.lock().expect("stager poisoned").ctx;
            pinned(ctx, n).ok()
        }

        fn free_device_memory(stager: &CudaStager) -> Option<u64> {
            let st = stager.0.lock().expect("stager poisoned");
            make_current(st.ctx).ok()?;
            cu::mem_get_info().ok().map(|(free, _)| free as u64)
        }
    }
}
