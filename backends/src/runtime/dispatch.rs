//! The one way to pick and hold a runtime: `on_backend` runs a piece of work (`OnRuntime`) on the CubeCL
//! runtime a [`Backend`] names, and `shared_stager` keeps one set of host transfers per runtime for the
//! process.

use super::kernel_cache::client;
use super::transfer::CopyCeiling;
use crate::runtime::transfer::HostTransfer;
use crate::select::Backend;
use cubecl::prelude::*;
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

/// Runs `work` on `backend` (checked available and not the CPU by the caller).
pub(crate) fn on_backend<W: OnRuntime>(backend: Backend, work: W) -> Result<W::Out> {
    let _ = &work;
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => work.run(client::<cubecl::cuda::CudaRuntime>(&Default::default())),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => work.run(client::<cubecl::wgpu::WgpuRuntime>(&Default::default())),
        b => Err(crate::select::unavailable(b)),
    }
}

/// The host transfers every table of runtime `R` that does not own a stager shares (CSR tables and joins,
/// chained tables, paged tables' children). A stager holds a stream and pinned
/// staging buffers, whose allocation costs about as much as building a table of 2^25 keys (measured on the H100:
/// 1.1 G keys/s with a stager per table, 8.5 without), so it is made once per runtime and kept for the
/// process. Its transfers are serialised by its own lock.
pub(crate) fn shared_stager<R: HostTransfer>(client: &ComputeClient<R>) -> Result<Arc<R::Stager>> {
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Stagers = Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>;
    static STAGERS: OnceLock<Stagers> = OnceLock::new();
    let mut m = STAGERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = m
        .get(&TypeId::of::<R>())
        .and_then(|s| s.downcast_ref::<Arc<R::Stager>>())
    {
        return Ok(s.clone());
    }
    let s = Arc::new(R::stager(client)?);
    m.insert(TypeId::of::<R>(), Box::new(s.clone()));
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
