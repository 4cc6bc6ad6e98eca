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
//!   reads an upload, the host waits for this stream, and before a read-back, for CubeCL's streams;
//! - a paged table's page-ins leave their copies in flight (`upload_queued`: an event per page-in, waited for
//!   at the child's first use), and its page-outs into pinned memory run on a second stream of the stager, so
//!   that a swap's copy-out and the next child's copy-in share the (full-duplex) bus.
//!
//! On **Vulkan** (wgpu) the plain CubeCL calls are used (`create_from_slice`, `read_one`): simpler, and the
//! software and hardware Vulkan targets CI and users run are not bus-bound.

use cubecl::prelude::*;
use cubecl::server::Handle;
use hashtile_core::{Error, Result};

/// Moves host slices into new device buffers and device buffers into host slices, for one runtime.
pub trait HostTransfer: Runtime {
    /// Per-table transfer state (CUDA: a stream and pinned staging buffers).
    type Stager: Send + Sync + 'static;
    /// Makes the transfer state for `client`'s device.
    fn stager(client: &ComputeClient<Self>) -> Result<Self::Stager>;
    /// The ordinal of `client`'s device among the runtime's devices (0 where the runtime has one device or no
    /// driver ordinals: Vulkan), so that transfer state is made and shared per device.
    fn ordinal(client: &ComputeClient<Self>) -> Result<usize>;
    /// A new device buffer holding `src` (ready for kernels when this returns).
    fn upload(client: &ComputeClient<Self>, stager: &Self::Stager, src: &[u8]) -> Result<Handle> {
        let dst = client.empty(src.len().max(4));
        let mut h = Self::upload_chunked(
            client,
            stager,
            &[src],
            &[dst],
            usize::MAX,
            &mut |_, _, _, _| {},
        )?;
        Ok(h.remove(0))
    }
    /// `true` when [`HostTransfer::upload_chunked`] copies into the `dsts` it is given (else it returns buffers
    /// of its own, and a caller that needs the bytes in a given buffer copies them there).
    const UPLOADS_INTO_DSTS: bool;
    /// Device buffers holding `srcs` (written into `dsts`, one per source and at least as large, where the
    /// runtime can write into a buffer: CUDA; else new ones), copied one after the other in chunks of `chunk`
    /// bytes; `landed(source, offset, len, buffer)` is called for each chunk once its bytes are on the device (in
    /// order), so that a kernel over that chunk can be queued while the next chunks are still being copied
    /// (CUDA: the copy engine and the kernels overlap; later sources' copies overlap earlier sources' kernels).
    fn upload_chunked(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        srcs: &[&[u8]],
        dsts: &[Handle],
        chunk: usize,
        landed: &mut dyn FnMut(usize, usize, usize, &Handle),
    ) -> Result<Vec<Handle>>;
    /// The completion of a copy [`HostTransfer::upload_queued`] left in flight (CUDA: an event recorded after
    /// it on the stager's stream).
    type Fence: Send + Sync + 'static;
    /// Copies `srcs` into `dsts` (whole, one per source) like [`HostTransfer::upload_chunked`], but returns as
    /// soon as the copies are queued where the runtime can (CUDA, page-locked sources): the buffers may be
    /// read once [`HostTransfer::wait`] has returned for the fence, and the sources must stay alive and
    /// unchanged until then (a dropped fence waits too). `None`: the copies are done already.
    fn upload_queued(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        srcs: &[&[u8]],
        dsts: &[Handle],
    ) -> Result<(Vec<Handle>, Option<Self::Fence>)>;
    /// Waits until the copies behind `fence` are done (an error leaves the fence failing: keep it, so that
    /// every later wait reports it too).
    fn wait(fence: &mut Self::Fence) -> Result<()>;
    /// Copies the first `dst.len()` bytes of `src` into `dst`, after all queued kernels.
    fn download(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        src: &Handle,
        dst: &mut [u8],
    ) -> Result<()>;
    /// Hands the first `len` bytes of `src` to `consume(offset, bytes)` piece by piece as they arrive (in
    /// order, after all queued kernels; CUDA: each piece from a pinned staging buffer while the next pieces
    /// are copied), so that a caller that transforms the bytes (presence bits into `Option`s, 32-bit offsets
    /// into `usize`) writes its answer in the same pass, with no intermediate host buffer. Pieces start at
    /// multiples of 8 bytes.
    fn download_with(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        src: &Handle,
        len: usize,
        consume: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()>;
    /// [`HostTransfer::download_with`] of a buffer whose writers the caller has waited for: the copy does not
    /// wait for kernels queued since, which run beside it where the runtime can (CUDA: the copies go on the
    /// stager's stream while CubeCL's runs the kernels). Those kernels must not write `src`.
    fn download_ready_with(
        client: &ComputeClient<Self>,
        stager: &Self::Stager,
        src: &Handle,
        len: usize,
        consume: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        Self::download_with(client, stager, src, len, consume)
    }
    /// Host memory the device can copy at the full bus rate (`n` bytes), or `None` when the runtime has none
    /// (then a [`PinnedBuffer`] falls back to ordinary memory).
    fn alloc_pinned(stager: &Self::Stager, n: usize) -> Option<PinnedAlloc>;
    /// Device memory free for new buffers, in bytes, when the runtime can tell.
    fn free_device_memory(stager: &Self::Stager) -> Option<u64>;
    /// Measures the bus with plain driver copies of `bytes` bytes (the ceiling the host path is judged
    /// against), or `None` when the runtime has no such copies.
    fn copy_ceiling(client: &ComputeClient<Self>, bytes: usize) -> Result<Option<CopyCeiling>>;
}

/// Plain driver copy rates between host and device, in GB/s (10^9 bytes/s): best of three copies of the same
/// bytes, from (to) ordinary pageable memory and from (to) pinned memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyCeiling {
    /// Bytes per copy.
    pub bytes: usize,
    /// Host to device from pageable memory (`cuMemcpyHtoD` of a `Vec`).
    pub h2d_pageable: f64,
    /// Host to device from pinned memory.
    pub h2d_pinned: f64,
    /// Device to host into pageable memory.
    pub d2h_pageable: f64,
    /// Device to host into pinned memory.
    pub d2h_pinned: f64,
}

pub use super::host_memory::{PinnedAlloc, PinnedBuffer};

/// Copies `src` into `dst` (same length) with all cores when it is large: one core copies about 10 GB/s,
/// less than the pinned bus.
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    // SAFETY: `MaybeUninit<u8>` has `u8`'s layout, and the copy writes only initialised bytes, so `dst` stays
    // initialised; the borrow is unique.
    let dst = unsafe { &mut *(std::ptr::from_mut(dst) as *mut [std::mem::MaybeUninit<u8>]) };
    par_copy_uninit(dst, src);
}

/// [`par_copy`] into memory not written yet (the room of an answer vector): the download is its first write.
///
/// Copies of more than 256 KiB run on the thread pool in at least eight pieces of 128 KiB to 1 MiB. One thread
/// copies about 5 GB/s: with copies up to 4 MiB on one thread (before 2026-11-28), a 2^20-key insert from
/// `Vec`s spent 1.4-1.6 ms of its 2.1-2.2 staging its 8 MB (H200), where a large call's 16 MiB stages ran on the
/// pool at about 20 GB/s.
pub(crate) fn par_copy_uninit(dst: &mut [std::mem::MaybeUninit<u8>], src: &[u8]) {
    use rayon::prelude::*;
    const ALONE: usize = 256 << 10;
    if src.len() <= ALONE {
        dst.write_copy_of_slice(src);
    } else {
        let piece = (src.len() / 8).clamp(128 << 10, 1 << 20);
        dst.par_chunks_mut(piece)
            .zip(src.par_chunks(piece))
            .for_each(|(d, s)| {
                d.write_copy_of_slice(s);
            });
    }
}

/// Waits for all of CubeCL's queued work on `client`'s device (a device error surfaces as `Error::Device`).
pub(crate) fn sync_device<R: Runtime>(client: &ComputeClient<R>) -> Result<()> {
    cubecl::future::block_on(client.sync()).map_err(|e| device_error("device sync", e))
}

fn device_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

#[cfg(feature = "vulkan")]
impl HostTransfer for cubecl::wgpu::WgpuRuntime {
    type Stager = ();
    const UPLOADS_INTO_DSTS: bool = false;
    fn stager(_: &ComputeClient<Self>) -> Result<()> {
        Ok(())
    }
    fn ordinal(_: &ComputeClient<Self>) -> Result<usize> {
        Ok(0)
    }
    fn upload_chunked(
        client: &ComputeClient<Self>,
        _: &(),
        srcs: &[&[u8]],
        _: &[Handle],
        chunk: usize,
        landed: &mut dyn FnMut(usize, usize, usize, &Handle),
    ) -> Result<Vec<Handle>> {
        let mut out = Vec::with_capacity(srcs.len());
        for (i, src) in srcs.iter().enumerate() {
            let h = client.create_from_slice(if src.is_empty() { &[0; 4] } else { src });
            for (c, piece) in src.chunks(chunk.max(1)).enumerate() {
                landed(i, c * chunk, piece.len(), &h);
            }
            out.push(h);
        }
        Ok(out)
    }
    type Fence = ();
    fn upload_queued(
        client: &ComputeClient<Self>,
        stager: &(),
        srcs: &[&[u8]],
        dsts: &[Handle],
    ) -> Result<(Vec<Handle>, Option<()>)> {
        let h = Self::upload_chunked(client, stager, srcs, dsts, usize::MAX, &mut |_, _, _, _| {})?;
        Ok((h, None))
    }
    fn wait(_: &mut ()) -> Result<()> {
        Ok(())
    }
    fn download(client: &ComputeClient<Self>, s: &(), src: &Handle, dst: &mut [u8]) -> Result<()> {
        let len = dst.len();
        Self::download_with(client, s, src, len, &mut |_, b| dst.copy_from_slice(b))
    }
    fn download_with(
        client: &ComputeClient<Self>,
        _: &(),
        src: &Handle,
        len: usize,
        consume: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let bytes = client
            .read_one(src.clone())
            .map_err(|e| device_error("read-back", e))?;
        consume(0, &bytes[..len]);
        Ok(())
    }
    fn alloc_pinned(_: &(), _: usize) -> Option<PinnedAlloc> {
        None
    }
    fn free_device_memory(_: &()) -> Option<u64> {
        None
    }
    fn copy_ceiling(_: &ComputeClient<Self>, _: usize) -> Result<Option<CopyCeiling>> {
        Ok(None)
    }
}

#[cfg(feature = "cuda")]
pub use cuda::CudaStager;
#[cfg(feature = "cuda")]
pub(crate) use cuda::device_ptr;

#[cfg(feature = "cuda")]
mod cuda;
