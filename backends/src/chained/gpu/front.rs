//! The GPU store as `ChainedTable` holds it, whatever the runtime and width ([`DeviceChained`]), made on the
//! runtime a backend names ([`device_chained`]).

use super::kernel::DEFAULT_TILE;
use super::store::*;
use crate::device::layout::KeyLayout;
use cubecl::prelude::*;
use hashtile_core::{HashFamily, Result};
/// A GPU table read back: slab words, a wide table's values, the pool bitmap.
pub(crate) type Slabs = (Vec<u64>, Option<Vec<u64>>, Vec<u32>);

/// A chained table's GPU store behind `ChainedTable`, whatever the runtime: keys and values
/// of one word type `W`, `u32` ([`Packed`]) or `u64` ([`Wide`](crate::device::layout::Wide); 32-bit keys or values of a table with a 64-bit
/// side are widened by the caller).
pub(crate) trait DeviceChained<W>: Send + Sync {
    fn insert(&mut self, keys: &[W], values: &[W], unique: bool) -> Result<usize>;
    fn erase(&mut self, keys: &[W], all: bool) -> Result<usize>;
    fn find(&self, keys: &[W]) -> Result<Vec<Option<W>>>;
    fn count(&self, keys: &[W]) -> Result<Vec<u32>>;
    fn find_all(&self, keys: &[W]) -> Result<(Vec<usize>, Vec<W>)>;
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>>;
    fn flush(&mut self) -> Result<usize>;
    fn len(&self) -> usize;
    fn download(&self) -> Result<Slabs>;
    fn shape_of(&self) -> (u32, u32);
}

/// The GPU store as `ChainedTable` uses it: host data moves through the runtime's shared
/// host-transfer stager ([`Staging`]), not through CubeCL's pageable `create_from_slice` / `read_one`.
struct Staged<R: crate::runtime::transfer::HostTransfer, L: KeyLayout> {
    table: GpuChained<R, L>,
    io: Staging<R>,
}

impl<
    R: crate::runtime::transfer::HostTransfer,
    W: hashtile_core::Element,
    L: KeyLayout<Key = W, Value = W>,
> DeviceChained<W> for Staged<R, L>
{
    fn insert(&mut self, keys: &[W], values: &[W], unique: bool) -> Result<usize> {
        self.table.insert_via(&self.io, keys, values, unique)
    }
    fn erase(&mut self, keys: &[W], all: bool) -> Result<usize> {
        self.table.erase_via(&self.io, keys, all)
    }
    fn find(&self, keys: &[W]) -> Result<Vec<Option<W>>> {
        self.table.find_via(&self.io, keys)
    }
    fn count(&self, keys: &[W]) -> Result<Vec<u32>> {
        self.table.count_via(&self.io, keys)
    }
    fn find_all(&self, keys: &[W]) -> Result<(Vec<usize>, Vec<W>)> {
        self.table.find_all_via(&self.io, keys)
    }
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>> {
        self.table.apply_via(&self.io, ops, keys, values)
    }
    fn flush(&mut self) -> Result<usize> {
        self.table.flush()
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn download(&self) -> Result<Slabs> {
        let (words, bits) = self.table.download()?;
        Ok((words, self.table.download_values()?, bits))
    }
    fn shape_of(&self) -> (u32, u32) {
        self.table.shape_of()
    }
}

/// An empty GPU store of layout `L` on `backend` (checked available and not the CPU by the caller).
pub(crate) fn device_chained<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>(
    backend: crate::select::Backend,
    family: HashFamily,
    buckets: u32,
    pool: u32,
) -> Result<Box<dyn DeviceChained<W>>> {
    struct Make<L> {
        family: HashFamily,
        buckets: u32,
        pool: u32,
        _layout: std::marker::PhantomData<L>,
    }
    impl<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>
        crate::runtime::dispatch::OnRuntime for Make<L>
    {
        type Out = Box<dyn DeviceChained<W>>;
        fn run<R: crate::runtime::transfer::HostTransfer>(
            self,
            client: ComputeClient<R>,
        ) -> Result<Self::Out> {
            let stager = crate::runtime::dispatch::shared_stager(&client)?;
            let probe = stager.clone();
            let free: FreeMemory = std::sync::Arc::new(move || R::free_device_memory(&probe));
            let table = GpuChained::<R, L>::with_memory_probe(
                &client,
                self.family,
                self.buckets,
                self.pool,
                DEFAULT_TILE,
                Some(free),
            )?;
            Ok(Box::new(Staged {
                table,
                io: Staging { client, stager },
            }))
        }
    }
    crate::runtime::dispatch::on_backend(
        backend,
        Make::<L> {
            family,
            buckets,
            pool,
            _layout: std::marker::PhantomData,
        },
    )
}
