//! The one way to pick and hold a runtime: `on_backend` runs a piece of work (`OnRuntime`) on the CubeCL
//! runtime a [`Backend`] names, and `shared_stager` keeps one set of host transfers per runtime and device
//! for the process.

use super::kernel_cache::client;
use super::transfer::CopyCeiling;
use crate::runtime::select::Backend;
use crate::runtime::transfer::HostTransfer;
use cubecl::prelude::*;
use cubecl::stream_id::StreamId;
use hashtile_core::Result;
use std::sync::Arc;

/// Work that runs on whichever CubeCL runtime a backend names ([`on_backend`]): Rust has no closures generic
/// over a type, so each device entry point is a small struct with this trait.
pub(crate) trait OnRuntime {
    /// What the work returns.
    type Out;
    /// The work, on `client`.
    fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<Self::Out>;
}

/// Runs `work` on `backend`'s default device (checked available and not the CPU by the caller).
pub(crate) fn on_backend<W: OnRuntime>(backend: Backend, work: W) -> Result<W::Out> {
    on_device(backend, 0, work)
}

/// Runs `work` on device `device` of `backend` (checked available and not the CPU by the caller; a CUDA
/// ordinal past the driver's devices is [`hashtile_core::Error::InvalidConfig`]). Vulkan's device 0 is the adapter wgpu
/// prefers, its others the discrete GPUs in wgpu's order.
pub(crate) fn on_device<W: OnRuntime>(backend: Backend, device: usize, work: W) -> Result<W::Out> {
    let _ = &work;
    let count = crate::runtime::select::device_count(backend);
    if backend == Backend::Cuda && device >= count {
        return Err(hashtile_core::Error::InvalidConfig(format!(
            "device {device} of {backend} asked for; {count} answered"
        )));
    }
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => work.run(client::<cubecl::cuda::CudaRuntime>(
            &cubecl::cuda::CudaDevice::new(device),
        )),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => work.run(client::<cubecl::wgpu::WgpuRuntime>(&if device == 0 {
            Default::default()
        } else {
            cubecl::wgpu::WgpuDevice::DiscreteGpu(device)
        })),
        b => Err(crate::runtime::select::unavailable(b)),
    }
}

/// A CubeCL stream of a table's own, leased for the table's life. CubeCL queues work on a stream per calling
/// thread, and a table's buffers written on one thread's stream and read on another's were seen to give wrong
/// answers (several tables on one Vulkan device called from threads made per call: a counting pass read a buffer
/// before its writes), so every table runs each call on the stream it was made with ([`StreamId::executes`]),
/// whichever thread calls: tables move between threads, and tables on different streams still run at the same
/// time. The ids start far from the ones CubeCL gives threads (a counter from 0); ids share a device's streams
/// modulo their number.
///
/// Each CubeCL stream has memory pools of its own, and a pool keeps the memory freed into it for that stream
/// alone. A dropped table's lease therefore goes back to a free list, and the next table takes the most recently
/// returned one: a program that drops a table and makes another (a benchmark's runs, a rebuild into a new table)
/// finds the first table's device memory in its stream's pools instead of allocating afresh (a fresh stream per
/// table cost the paged benchmark's plain fill, 8 batches into a new table of 2^27 slots, 0.78x on an H200), and
/// freed memory waits in at most as many streams as tables were alive at once.
pub(crate) struct TableStream(StreamId);

/// Stream ids of dropped tables (the most recently returned last) and the next new id.
struct StreamLeases {
    free: std::sync::Mutex<Vec<u64>>,
    next: std::sync::atomic::AtomicU64,
}

impl StreamLeases {
    /// The id a table returned last, else a new one.
    fn take(&self) -> u64 {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        reused.unwrap_or_else(|| self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
    fn give(&self, id: u64) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(id);
    }
}

static LEASES: StreamLeases = StreamLeases {
    free: std::sync::Mutex::new(Vec::new()),
    next: std::sync::atomic::AtomicU64::new(1 << 48),
};

impl TableStream {
    /// The stream's id (for [`StreamId::executes`]).
    pub(crate) fn id(&self) -> StreamId {
        self.0
    }
}

impl Drop for TableStream {
    fn drop(&mut self) {
        LEASES.give(self.0.value);
    }
}

/// A stream for a new table: the one a table returned last, else a new id (see [`TableStream`]).
pub(crate) fn table_stream() -> TableStream {
    TableStream(StreamId {
        value: LEASES.take(),
    })
}

/// The host transfers every table of runtime `R` on `client`'s device that does not own a stager shares (CSR tables and joins,
/// chained tables, paged tables' children). A stager holds a stream and pinned
/// staging buffers, whose allocation costs about as much as building a table of 2^25 keys (measured on the H100:
/// 1.1 G keys/s with a stager per table, 8.5 without), so it is made once per runtime and kept for the
/// process. Its transfers are serialised by its own lock.
pub(crate) fn shared_stager<R: HostTransfer>(client: &ComputeClient<R>) -> Result<Arc<R::Stager>> {
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Stagers = Mutex<HashMap<(TypeId, usize), Box<dyn Any + Send + Sync>>>;
    static STAGERS: OnceLock<Stagers> = OnceLock::new();
    let id = (TypeId::of::<R>(), R::ordinal(client)?);
    let mut m = STAGERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = m.get(&id).and_then(|s| s.downcast_ref::<Arc<R::Stager>>()) {
        return Ok(s.clone());
    }
    let s = Arc::new(R::stager(client)?);
    m.insert(id, Box::new(s.clone()));
    Ok(s)
}

/// Measures [`CopyCeiling`] on `backend`'s default device (`Ok(None)` for backends without driver copies:
/// the CPU backend and Vulkan).
pub fn measure_copy_ceiling(backend: Backend, bytes: usize) -> Result<Option<CopyCeiling>> {
    struct Measure(usize);
    impl OnRuntime for Measure {
        type Out = Option<CopyCeiling>;
        fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<Self::Out> {
            R::copy_ceiling(&client, self.0)
        }
    }
    // Only CUDA has driver copies: no other backend's client is made just to answer `None`.
    match backend {
        Backend::Cuda if cfg!(feature = "cuda") => on_backend(backend, Measure(bytes)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::StreamLeases;

    #[test]
    fn a_new_table_takes_the_stream_returned_last() {
        let leases = StreamLeases {
            free: std::sync::Mutex::new(Vec::new()),
            next: std::sync::atomic::AtomicU64::new(7),
        };
        let (a, b, c) = (leases.take(), leases.take(), leases.take());
        assert_eq!(
            (a, b, c),
            (7, 8, 9),
            "tables alive at once have streams of their own"
        );
        leases.give(a);
        leases.give(c);
        assert_eq!(leases.take(), c, "the stream whose pools were freed last");
        assert_eq!(leases.take(), a);
        assert_eq!(leases.take(), 10, "no stream returned: a new one");
    }
}
