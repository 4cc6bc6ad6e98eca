//! Construction of the GPU engines for each compiled-in runtime.

use crate::engine::Engine;
use hashtile_core::scheme::{ProbingScheme, SchemeParams};
use hashtile_core::{HashFamily, Result};

/// A CUDA table: compare-and-swap claims, plain reads.
#[cfg(feature = "cuda")]
pub fn cuda<S: ProbingScheme>(
    nb: u32,
    b: u32,
    fam: HashFamily,
    p: SchemeParams,
    count_probes: bool,
) -> Result<Box<dyn Engine>> {
    use crate::gpu::{GpuOptions, GpuTable};
    let opts = GpuOptions {
        use_cas: true,
        plain_reads: true,
    };
    let mut t =
        GpuTable::<cubecl::cuda::CudaRuntime, S>::new(&Default::default(), nb, b, fam, p, opts)?;
    t.set_count_probes(count_probes);
    Ok(Box::new(t))
}

/// CUDA is not compiled in.
#[cfg(not(feature = "cuda"))]
pub fn cuda<S: ProbingScheme>(
    _: u32,
    _: u32,
    _: HashFamily,
    _: SchemeParams,
    _: bool,
) -> Result<Box<dyn Engine>> {
    unreachable!("availability is checked before construction")
}

/// A Vulkan table: compare-and-swap claims as on CUDA (needs the patched cubecl-opt in `vendor/`, see NOTES.md),
/// atomic reads (wgpu cannot bind one buffer twice in a launch, so the plain-read alias is unavailable).
#[cfg(feature = "vulkan")]
pub fn vulkan<S: ProbingScheme>(
    nb: u32,
    b: u32,
    fam: HashFamily,
    p: SchemeParams,
    count_probes: bool,
) -> Result<Box<dyn Engine>> {
    use crate::gpu::{GpuOptions, GpuTable};
    let opts = GpuOptions {
        use_cas: true,
        plain_reads: false,
    };
    let mut t =
        GpuTable::<cubecl::wgpu::WgpuRuntime, S>::new(&Default::default(), nb, b, fam, p, opts)?;
    t.set_count_probes(count_probes);
    Ok(Box::new(t))
}

/// Vulkan is not compiled in.
#[cfg(not(feature = "vulkan"))]
pub fn vulkan<S: ProbingScheme>(
    _: u32,
    _: u32,
    _: HashFamily,
    _: SchemeParams,
    _: bool,
) -> Result<Box<dyn Engine>> {
    unreachable!("availability is checked before construction")
}
