//! Construction of the GPU engines for each compiled-in runtime.

#[allow(unused_imports)] // unused when no GPU runtime is compiled in
use crate::device::layout::{Packed, Wide};
use crate::table::engine::Engine;
use crate::table::gpu::GpuTable;
use hashtile_core::scheme::{ProbingScheme, SchemeParams};
use hashtile_core::{HashFamily, Key, Result, Value};

/// What a GPU engine is built from.
#[derive(Debug, Clone, Copy)]
pub struct GpuSpec {
    /// Buckets.
    pub num_buckets: u32,
    /// Slots per bucket.
    pub bucket_size: u32,
    /// Hash functions.
    pub family: HashFamily,
    /// Scheme parameters.
    pub params: SchemeParams,
    /// Count probes on the device.
    pub count_probes: bool,
    /// Pairs wider than 64 bits: the [`crate::device::layout::Wide`] layout (parallel key and value arrays); else
    /// [`crate::device::layout::Packed`] words.
    pub wide: bool,
    /// Keys per device batch and find chunk of the host path (`None`: the defaults).
    pub batch_keys: Option<usize>,
    /// Copy through the process's shared stager (paged tables' children) instead of one of the table's own.
    pub share_stager: bool,
}

/// A table on runtime `R` with `options`: packed 32-bit pairs, or wide pairs in parallel arrays.
#[allow(dead_code)] // unused when no GPU runtime is compiled in
fn build<R: crate::runtime::transfer::HostTransfer, S: ProbingScheme, K: Key, V: Value>(
    spec: GpuSpec,
    options: crate::table::gpu::GpuOptions,
) -> Result<Box<dyn Engine<K, V>>> {
    let device = Default::default();
    let GpuSpec {
        num_buckets: nb,
        bucket_size: b,
        family: fam,
        params: p,
        ..
    } = spec;
    if spec.wide {
        let mut t = if spec.share_stager {
            GpuTable::<R, S, Wide>::new_sharing_stager(&device, nb, b, fam, p, options)?
        } else {
            GpuTable::<R, S, Wide>::new(&device, nb, b, fam, p, options)?
        };
        t.set_count_probes(spec.count_probes);
        t.set_batch_keys(spec.batch_keys);
        Ok(Box::new(t))
    } else {
        let mut t = if spec.share_stager {
            GpuTable::<R, S, Packed>::new_sharing_stager(&device, nb, b, fam, p, options)?
        } else {
            GpuTable::<R, S, Packed>::new(&device, nb, b, fam, p, options)?
        };
        t.set_count_probes(spec.count_probes);
        t.set_batch_keys(spec.batch_keys);
        Ok(Box::new(t))
    }
}

/// A CUDA table: compare-and-swap claims, plain reads.
#[cfg(feature = "cuda")]
pub fn cuda<S: ProbingScheme, K: Key, V: Value>(spec: GpuSpec) -> Result<Box<dyn Engine<K, V>>> {
    let opts = crate::table::gpu::GpuOptions {
        use_cas: true,
        plain_reads: true,
    };
    build::<cubecl::cuda::CudaRuntime, S, K, V>(spec, opts)
}

/// CUDA is not compiled in.
#[cfg(not(feature = "cuda"))]
pub fn cuda<S: ProbingScheme, K: Key, V: Value>(_: GpuSpec) -> Result<Box<dyn Engine<K, V>>> {
    unreachable!("availability is checked before construction")
}

/// A Vulkan table: compare-and-swap claims as on CUDA (needs the patched cubecl-opt in `vendor/`, see NOTES.md),
/// atomic reads (wgpu cannot bind one buffer twice in a launch, so the plain-read alias is unavailable).
#[cfg(feature = "vulkan")]
pub fn vulkan<S: ProbingScheme, K: Key, V: Value>(spec: GpuSpec) -> Result<Box<dyn Engine<K, V>>> {
    let opts = crate::table::gpu::GpuOptions {
        use_cas: true,
        plain_reads: false,
    };
    build::<cubecl::wgpu::WgpuRuntime, S, K, V>(spec, opts)
}

/// Vulkan is not compiled in.
#[cfg(not(feature = "vulkan"))]
pub fn vulkan<S: ProbingScheme, K: Key, V: Value>(_: GpuSpec) -> Result<Box<dyn Engine<K, V>>> {
    unreachable!("availability is checked before construction")
}
