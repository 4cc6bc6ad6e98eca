//! NCCL between the GPUs of one process (`ncclCommInitAll`): one communicator and one stream per shard's device,
//! and each exchange step as one group of `ncclSend` / `ncclRecv` (NCCL's point-to-point all-to-all), queued
//! and waited for apart (the shards work in between), timed on the devices by events, through cudarc's
//! bindings. NCCL is loaded at its first use (`libnccl.so`, e.g. the `nvidia-nccl` wheel's, on the library
//! path); without it a sharded table exchanges through the host. NCCL's NVLink multicast (NVLS) serves
//! collectives only, which the exchange does not use; keep `NCCL_NVLS_ENABLE=0` on shared machines anyway.

use super::plan::Plan;
use cudarc::driver::{result as cu, sys};
use cudarc::nccl::{result as nccl, sys as nsys};
use hashtile_core::{Error, Result};
use std::ffi::c_int;

/// Communicators and streams of the shards' devices.
pub(crate) struct Nccl {
    comms: Vec<nsys::ncclComm_t>,
    streams: Vec<sys::CUstream>,
    ctxs: Vec<sys::CUcontext>,
    /// Events recorded on each stream before and after a step's group.
    begin: Vec<sys::CUevent>,
    end: Vec<sys::CUevent>,
}

// SAFETY: the raw handles are used by one call at a time (the sharded table's `&self` calls serialise on a
// mutex around the exchange) after making the device's context current.
unsafe impl Send for Nccl {}
// SAFETY: as above.
unsafe impl Sync for Nccl {}

fn nccl_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

fn cuda_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Device(format!("{what}: {e:?}"))
}

impl Nccl {
    /// Communicators for `devices` (distinct CUDA ordinals, one rank each), or `None` when the NCCL library
    /// is not found.
    pub fn new(devices: &[usize]) -> Result<Option<Self>> {
        // SAFETY: probes for the library by name; loads nothing else.
        if !unsafe { nsys::is_culib_present() } {
            return Ok(None);
        }
        let n = devices.len();
        let list: Vec<c_int> = devices.iter().map(|&d| d as c_int).collect();
        let mut comms = vec![std::ptr::null_mut(); n];
        // SAFETY: `comms` holds `n` slots and `list` `n` distinct device ordinals.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), n as c_int, list.as_ptr()) }
            .map_err(|e| nccl_error("ncclCommInitAll", e))?;
        let mut ctxs = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        let (mut begin, mut end) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for &d in devices {
            let dev = cu::device::get(d as c_int).map_err(|e| cuda_error("cuDeviceGet", e))?;
            // SAFETY: a valid device; the primary context CubeCL also uses, retained for the process.
            let ctx = unsafe { cu::primary_ctx::retain(dev) }
                .map_err(|e| cuda_error("cuDevicePrimaryCtxRetain", e))?;
            // SAFETY: the retained primary context.
            unsafe { cu::ctx::set_current(ctx) }.map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
            let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(|e| cuda_error("cuStreamCreate", e))?;
            let event = || {
                cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(|e| cuda_error("cuEventCreate", e))
            };
            begin.push(event()?);
            end.push(event()?);
            ctxs.push(ctx);
            streams.push(stream);
        }
        Ok(Some(Self {
            comms,
            streams,
            ctxs,
            begin,
            end,
        }))
    }

    /// Queues one exchange step on the NCCL streams and returns at once: each move's words, `(plan, word
    /// bytes, send addresses, receive addresses)` with each source's send region and each destination's receive
    /// region at the addresses given (every buffer's writes finished before), a group per move. Events around
    /// the step time it on each device ([`Nccl::wait`]).
    pub fn start(&self, moves: &[(&Plan, usize, Vec<u64>, Vec<u64>)]) -> Result<()> {
        self.record(&self.begin)?;
        // One group per move, queued back to back on each stream (measured no different from one group for all
        // moves on two H200s: a step of 2^26 pairs per GPU took 2.2-2.4 ms of NCCL's time either way).
        for (plan, word_bytes, send, recv) in moves {
            nccl::group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
            let mut queued = Ok(());
            'all: for (from, &send_at) in send.iter().enumerate() {
                for (to, &recv_at) in recv.iter().enumerate() {
                    if let Err(e) = self.queue(plan, *word_bytes, (from, send_at), (to, recv_at)) {
                        queued = Err(e);
                        break 'all;
                    }
                }
            }
            // The group is always closed, even when queueing failed.
            let ended = nccl::group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
            queued?;
            ended?;
        }
        self.record(&self.end)
    }

    /// Waits for the step [`Nccl::start`] queued; returns its time on the devices (the slowest device's,
    /// between the events around the group), in milliseconds.
    pub fn wait(&self) -> Result<f64> {
        let mut ms = 0f64;
        for (d, (ctx, stream)) in self.ctxs.iter().zip(&self.streams).enumerate() {
            // SAFETY: the retained context, its stream and the events recorded on it by `start`.
            unsafe {
                cu::ctx::set_current(*ctx).map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
                cu::stream::synchronize(*stream)
                    .map_err(|e| cuda_error("cuStreamSynchronize", e))?;
                let t = cu::event::elapsed(self.begin[d], self.end[d])
                    .map_err(|e| cuda_error("cuEventElapsedTime", e))?;
                ms = ms.max(t as f64);
            }
        }
        Ok(ms)
    }

    /// Records `events[d]` on device `d`'s NCCL stream, for every device.
    fn record(&self, events: &[sys::CUevent]) -> Result<()> {
        for ((ctx, stream), ev) in self.ctxs.iter().zip(&self.streams).zip(events) {
            // SAFETY: the retained context, its stream and an event made in it.
            unsafe {
                cu::ctx::set_current(*ctx).map_err(|e| cuda_error("cuCtxSetCurrent", e))?;
                cu::event::record(*ev, *stream).map_err(|e| cuda_error("cuEventRecord", e))?;
            }
        }
        Ok(())
    }

    /// Queues `from`'s send of its words for `to` and `to`'s receive of them (inside a group).
    fn queue(
        &self,
        plan: &Plan,
        word_bytes: usize,
        (from, send_at): (usize, u64),
        (to, recv_at): (usize, u64),
    ) -> Result<()> {
        let bytes = plan.count(from, to) * word_bytes;
        if bytes == 0 {
            return Ok(());
        }
        let src = send_at + (plan.send_start(from, to) * word_bytes) as u64;
        let dst = recv_at + (plan.recv_start(to, from) * word_bytes) as u64;
        // SAFETY: both ranges lie in live device buffers of the plan's sizes; the streams and communicators
        // are this struct's.
        unsafe {
            nccl::send(
                src as *const std::ffi::c_void,
                bytes,
                nsys::ncclDataType_t::ncclUint8,
                to as c_int,
                self.comms[from],
                self.streams[from] as nsys::cudaStream_t,
            )
            .and_then(|_| {
                nccl::recv(
                    dst as *mut std::ffi::c_void,
                    bytes,
                    nsys::ncclDataType_t::ncclUint8,
                    from as c_int,
                    self.comms[to],
                    self.streams[to] as nsys::cudaStream_t,
                )
            })
        }
        .map(|_| ())
        .map_err(|e| nccl_error("ncclSend/ncclRecv", e))
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        for c in &self.comms {
            // SAFETY: communicators made by `ncclCommInitAll`, destroyed once.
            let _ = unsafe { nccl::comm_destroy(*c) };
        }
        for (d, (ctx, stream)) in self.ctxs.iter().zip(&self.streams).enumerate() {
            // SAFETY: the retained context, its stream and events, destroyed once.
            unsafe {
                let _ = cu::ctx::set_current(*ctx);
                let _ = cu::stream::destroy(*stream);
                let _ = cu::event::destroy(self.begin[d]);
                let _ = cu::event::destroy(self.end[d]);
            }
        }
    }
}
