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
) -> Result<Box<dyn Engine>> {
    use crate::gpu::{GpuOptions, GpuTable};
    let opts = GpuOptions {
        use_cas: true,
        plain_reads: true,
    };
    Ok(Box::new(GpuTable::<cubecl::cuda::CudaRuntime, S>::new(
        &Default::default(),
        nb,
        b,
        fam,
        p,
        opts,
    )?))
}

/// CUDA is not compiled in.
#[cfg(not(feature = "cuda"))]
pub fn cuda<S: ProbingScheme>(
    _: u32,
    _: u32,
    _: HashFamily,
    _: SchemeParams,
) -> Result<Box<dyn Engine>> {
    unreachable!("availability is checked before construction")
}

/// A Vulkan table: exchange claims (cubecl 0.10's SPIR-V compiler cannot emit compare-and-swap, see
/// docs/CUBECL_SPIRV_CAS.md), atomic reads (a buffer cannot be bound twice).
#[cfg(feature = "vulkan")]
pub fn vulkan<S: ProbingScheme>(
    nb: u32,
    b: u32,
    fam: HashFamily,
    p: SchemeParams,
) -> Result<Box<dyn Engine>> {
    use crate::gpu::{GpuOptions, GpuTable};
    let opts = GpuOptions {
        use_cas: false,
        plain_reads: false,
    };
    Ok(Box::new(GpuTable::<cubecl::wgpu::WgpuRuntime, S>::new(
        &Default::default(),
        nb,
        b,
        fam,
        p,
        opts,
    )?))
}

/// Vulkan is not compiled in.
#[cfg(not(feature = "vulkan"))]
pub fn vulkan<S: ProbingScheme>(
    _: u32,
    _: u32,
    _: HashFamily,
    _: SchemeParams,
) -> Result<Box<dyn Engine>> {
    unreachable!("availability is checked before construction")
}
