//! The GPU store as `ChainedTable` holds it, whatever the runtime and width ([`DeviceChained`]), made on the
//! runtime a backend names ([`device_chained`]).

use super::store::*;
use crate::device::layout::KeyLayout;
use crate::results::FindAll;
use crate::runtime::host_io::BatchSizes;
use crate::runtime::host_memory::PinnedAlloc;
use crate::runtime::transfer::HostTransfer;
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
    fn find_into(&self, keys: &[W], out: &mut [W]) -> Result<()>;
    fn find_bits_into(&self, keys: &[W], out: &mut [W], found: &mut [u32]) -> Result<()>;
    fn count_into(&self, keys: &[W], out: &mut [u32]) -> Result<()>;
    fn find_all_into(&self, keys: &[W], out: &mut FindAll<W>) -> Result<()>;
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>>;
    fn flush(&mut self) -> Result<usize>;
    fn len(&self) -> usize;
    fn download(&self) -> Result<Slabs>;
    fn shape_of(&self) -> (u32, u32);
    /// Page-locked host memory on the store's device (its stager's), `None` where the runtime has none.
    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc>;
}

impl<R: HostTransfer, W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>> DeviceChained<W>
    for GpuChained<R, L>
{
    fn insert(&mut self, keys: &[W], values: &[W], unique: bool) -> Result<usize> {
        GpuChained::insert(self, keys, values, unique)
    }
    fn erase(&mut self, keys: &[W], all: bool) -> Result<usize> {
        GpuChained::erase(self, keys, all)
    }
    fn find(&self, keys: &[W]) -> Result<Vec<Option<W>>> {
        GpuChained::find(self, keys)
    }
    fn find_into(&self, keys: &[W], out: &mut [W]) -> Result<()> {
        GpuChained::find_into(self, keys, out)
    }
    fn find_bits_into(&self, keys: &[W], out: &mut [W], found: &mut [u32]) -> Result<()> {
        GpuChained::find_bits_into(self, keys, out, found)
    }
    fn count_into(&self, keys: &[W], out: &mut [u32]) -> Result<()> {
        GpuChained::count_into(self, keys, out)
    }
    fn find_all_into(&self, keys: &[W], out: &mut FindAll<W>) -> Result<()> {
        GpuChained::find_all_into(self, keys, out)
    }
    fn apply(&mut self, ops: &[u32], keys: &[W], values: &[W]) -> Result<Vec<(W, u32)>> {
        GpuChained::apply(self, ops, keys, values)
    }
    fn flush(&mut self) -> Result<usize> {
        GpuChained::flush(self)
    }
    fn len(&self) -> usize {
        GpuChained::len(self)
    }
    fn download(&self) -> Result<Slabs> {
        let (words, bits) = GpuChained::download(self)?;
        Ok((words, self.download_values()?, bits))
    }
    fn shape_of(&self) -> (u32, u32) {
        GpuChained::shape_of(self)
    }
    fn alloc_pinned(&self, bytes: usize) -> Option<PinnedAlloc> {
        R::alloc_pinned(&self.stager, bytes)
    }
}

/// What a `ChainedTable`'s GPU store is made with.
pub(crate) struct StoreSpec<W> {
    pub(crate) family: HashFamily,
    pub(crate) buckets: u32,
    pub(crate) pool: u32,
    /// The front end's reserved keys as store words (the empty sentinel, then the tombstone), refused by the
    /// host calls.
    pub(crate) reserved: [W; 2],
    /// How host batches are cut for the device.
    pub(crate) sizes: BatchSizes,
}

/// An empty GPU store of layout `L` on device `device` of `backend` (checked available and not the CPU by the
/// caller).
pub(crate) fn device_chained<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>(
    backend: crate::runtime::select::Backend,
    device: usize,
    spec: StoreSpec<W>,
) -> Result<Box<dyn DeviceChained<W>>> {
    struct Make<W, L>(StoreSpec<W>, std::marker::PhantomData<L>);
    impl<W: hashtile_core::Element, L: KeyLayout<Key = W, Value = W>>
        crate::runtime::dispatch::OnRuntime for Make<W, L>
    {
        type Out = Box<dyn DeviceChained<W>>;
        fn run<R: HostTransfer>(self, client: ComputeClient<R>) -> Result<Self::Out> {
            let s = self.0;
            let mut table = GpuChained::<R, L>::new(&client, s.family, s.buckets, s.pool)?;
            table.reserved = Some(s.reserved);
            table.sizes = s.sizes;
            Ok(Box::new(table))
        }
    }
    crate::runtime::dispatch::on_device(
        backend,
        device,
        Make::<W, L>(spec, std::marker::PhantomData),
    )
}
