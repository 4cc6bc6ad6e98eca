//! Construction of GPU tables for each compiled-in runtime: `build` makes the [`GpuTable`] a [`GpuSpec`]
//! describes on the runtime and device a backend and the spec name (`runtime::dispatch::on_device`), with the layout its
//! pairs need, and hands the concrete table to a `WrapTable` (`AsEngine`: a boxed [`Engine`]; owners that
//! extend the table wrap it in their own type).

use crate::device::layout::{KeyLayout, Packed, Wide};
use crate::device::set_layout::{Keys32, Keys64};
use crate::runtime::dispatch::{OnRuntime, on_device};
use crate::runtime::select::Backend;
use crate::runtime::transfer::HostTransfer;
use crate::table::engine::Engine;
use crate::table::gpu::{GpuOptions, GpuTable};
use cubecl::prelude::*;
use hashtile_core::scheme::{ProbingScheme, SchemeParams};
use hashtile_core::{HashFamily, Key, Result, Value};
use std::marker::PhantomData;

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
    /// A set's table: keys alone ([`Keys32`] words of 4 bytes, or [`Keys64`] with `wide`).
    pub keys_only: bool,
    /// Keys per device batch and find chunk of the host path (`None`: the defaults).
    pub batch_keys: Option<usize>,
    /// The fewest copy chunks of a device batch of the host path (`TableConfig::copy_chunks`).
    pub copy_chunks: usize,
    /// Copy through the process's shared stager (tables that come in numbers) instead of one of the table's
    /// own.
    pub share_stager: bool,
    /// Which of the backend's devices holds the table.
    pub device: usize,
    /// Racing upserts of one key converge on one slot under `params` (`SchemeInfo::upserts_converge`): the
    /// table's insert-or-apply then combines a batch's copies in the table.
    pub upserts_converge: bool,
}

/// What [`build`] does with the table it made: the table's type depends on the runtime and the layout, so the
/// wrapper is generic over both.
pub(crate) trait WrapTable<S: ProbingScheme> {
    /// What the wrapper makes of a table.
    type Out;
    /// Wraps `table`.
    fn wrap<R: HostTransfer, L: KeyLayout>(self, table: GpuTable<R, S, L>) -> Self::Out;
}

/// Boxes the table as an [`Engine`] of `K -> V` ([`crate::HashTable`]'s engine).
pub(crate) struct AsEngine<K, V>(PhantomData<fn() -> (K, V)>);

impl<K, V> Default for AsEngine<K, V> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<S: ProbingScheme, K: Key, V: Value> WrapTable<S> for AsEngine<K, V> {
    type Out = Box<dyn Engine<K, V>>;
    fn wrap<R: HostTransfer, L: KeyLayout>(self, table: GpuTable<R, S, L>) -> Self::Out {
        Box::new(table)
    }
}

/// How a table on `backend` claims slots. CUDA: compare-and-swap claims, plain reads. Vulkan: compare-and-swap
/// claims as on CUDA (needs the patched cubecl-opt in `vendor/`, see NOTES.md), atomic reads (wgpu cannot bind
/// one buffer twice in a launch, so the plain-read alias is unavailable).
pub(crate) fn options_for(backend: Backend) -> GpuOptions {
    GpuOptions {
        use_cas: true,
        plain_reads: backend == Backend::Cuda,
    }
}

/// The table `spec` describes on `backend` (available and not the CPU: checked by the caller), handed to
/// `wrap`: packed 32-bit pairs, wide pairs in parallel arrays, or a set's keys alone.
pub(crate) fn build<S: ProbingScheme, W: WrapTable<S>>(
    backend: Backend,
    spec: GpuSpec,
    wrap: W,
) -> Result<W::Out> {
    on_device(
        backend,
        spec.device,
        Build {
            spec,
            options: options_for(backend),
            wrap,
            _scheme: PhantomData::<fn() -> S>,
        },
    )
}

/// [`build`]'s work on the chosen runtime.
struct Build<S, W> {
    spec: GpuSpec,
    options: GpuOptions,
    wrap: W,
    _scheme: PhantomData<fn() -> S>,
}

impl<S: ProbingScheme, W: WrapTable<S>> OnRuntime for Build<S, W> {
    type Out = W::Out;
    fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<W::Out> {
        if self.spec.keys_only && self.spec.wide {
            let t = table::<R, S, Keys64>(client, self.spec, self.options)?;
            Ok(self.wrap.wrap(t))
        } else if self.spec.keys_only {
            let t = table::<R, S, Keys32>(client, self.spec, self.options)?;
            Ok(self.wrap.wrap(t))
        } else if self.spec.wide {
            let t = table::<R, S, Wide>(client, self.spec, self.options)?;
            Ok(self.wrap.wrap(t))
        } else {
            let t = table::<R, S, Packed>(client, self.spec, self.options)?;
            Ok(self.wrap.wrap(t))
        }
    }
}

/// A table of layout `L` on `client`, as `spec` says.
fn table<R: HostTransfer, S: ProbingScheme, L: KeyLayout>(
    client: ComputeClient<R>,
    spec: GpuSpec,
    options: GpuOptions,
) -> Result<GpuTable<R, S, L>> {
    let mut t = GpuTable::<R, S, L>::build(
        client,
        spec.num_buckets,
        spec.bucket_size,
        spec.family,
        spec.params,
        options,
        spec.share_stager,
        spec.upserts_converge,
    )?;
    t.set_count_probes(spec.count_probes);
    t.set_batch_keys(spec.batch_keys);
    t.set_copy_chunks(spec.copy_chunks);
    Ok(t)
}
