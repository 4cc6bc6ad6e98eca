//! The `#[cube]` layer every GPU family builds on: a table's shape and hash functions ([`shape`]), how slots
//! hold pairs ([`layout`]; sets' keys-only layouts: [`set_layout`]), a key's bucket per probe under a scheme ([`probe`]), the one work-sharing tile driver every
//! operation runs on ([`driver`]) and its vocabulary ([`operation`]), slab lists and their allocator for schemes that chain ([`slab`]), and the
//! device API's cooperative find ([`find`]) and writes ([`mod@write`]), with the write counters they share with the
//! tables' own kernels ([`counters`]); and the partition of a batch by the route hash that paged and sharded
//! tables share ([`route`]).

pub mod counters;
pub mod driver;
pub mod find;
pub mod lane;
pub mod layout;
pub mod merge;
pub mod operation;
pub mod probe;
pub mod route;
pub mod set_layout;
pub mod shape;
pub mod slab;
pub(crate) mod window;
pub mod write;
