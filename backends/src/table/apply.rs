//! `insert_or_apply`'s way to its engine. The reduction is a type of the caller's (its `#[cube]` function is
//! compiled into the kernels), and a generic method cannot sit on the `Engine` trait object, so the call
//! downcasts the engine to the concrete types `HashTable::new` makes (`make_engine`): the CPU engine, or a GPU
//! table of either layout on each compiled-in runtime.

use crate::device::layout::{Packed, Wide};
use crate::table::CpuEngine;
use crate::table::engine::{Engine, Inserted};
use crate::table::gpu::GpuTable;
use hashtile_core::reduce::{Reduction, SignedMax, SignedMin, kind};
use hashtile_core::scheme::SchemeInfo;
use hashtile_core::{Error, Key, Result, Value};

/// Inserts `keys` / `values` into `engine` (one of `make_engine`'s, scheme `S`), combining values by `F`.
pub(crate) fn insert_or_apply<F: Reduction, S: SchemeInfo, K: Key, V: Value>(
    engine: &mut dyn Engine<K, V>,
    keys: &[K],
    values: &[V],
) -> Result<Inserted<K, V>> {
    // The device words of signed values are unsigned: the built-in Min and Max would order them as such.
    if V::SIGNED && F::KIND == kind::MIN {
        return insert_or_apply::<SignedMin, S, K, V>(engine, keys, values);
    }
    if V::SIGNED && F::KIND == kind::MAX {
        return insert_or_apply::<SignedMax, S, K, V>(engine, keys, values);
    }
    let any = engine.as_any_mut();
    if let Some(e) = any.downcast_mut::<CpuEngine<S>>() {
        let (stats, unplaced) = e
            .table
            .upsert_apply::<F, K, V>(keys, values, e.deterministic);
        return Ok(Inserted { stats, unplaced });
    }
    macro_rules! on_runtime {
        ($runtime:ty) => {
            if let Some(t) = any.downcast_mut::<GpuTable<$runtime, S, Packed>>() {
                return t.insert_or_apply_typed::<F, K, V>(keys, values);
            }
            if let Some(t) = any.downcast_mut::<GpuTable<$runtime, S, Wide>>() {
                return t.insert_or_apply_typed::<F, K, V>(keys, values);
            }
        };
    }
    #[cfg(feature = "cuda")]
    on_runtime!(cubecl::cuda::CudaRuntime);
    #[cfg(feature = "vulkan")]
    on_runtime!(cubecl::wgpu::WgpuRuntime);
    Err(Error::InvalidConfig(
        "insert_or_apply: the table's engine is none of the types HashTable::new makes".into(),
    ))
}
