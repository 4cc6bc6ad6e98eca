//! # hashtile-probing
//!
//! Probing schemes: each file is one scheme's placement rules, written against
//! [`hashtile_core::ProbingScheme`] with no GPU-specific code (no lanes, no atomics, no memory), so that one
//! source runs in the GPU tile driver and in the CPU backend.
//!
//! | scheme | file | paper |
//! |---|---|---|
//! | [`Bcht`] bucketed cuckoo, `h` hash functions, first-fit placement, bounded eviction chain | `bcht.rs` | BGHT §3.1, Listings 3–4 |
//! | [`Iht`] iceberg: primary below a threshold, else the less loaded of two secondaries; stable | `iht.rs` | BGHT §3.2, Listing 5 |
//! | [`P2bht`] power-of-two choices: the less loaded of two buckets; stable | `p2bht.rs` | BGHT §3.1, §4.3 |
//! | [`Cht1`] 1-slot cuckoo with 4 hash functions (CUDPP) | `cht1.rs` | BGHT §7 baseline |
//! | [`LinearProbing`] linear probing over buckets of `B` slots (the window a tile reads); stable | `linear.rs` | cuCollections |
//! | [`DoubleHashing`] double hashing: an odd step from a second hash function; stable | `double.rs` | cuCollections |
//! | [`Chain`] slab-list chaining: claim, follow, append; tombstoned erase | `chain.rs` | SlabHash §4 |
//!
//! [`NoEvictions`] (`no_evictions.rs`) adapts a cuckoo scheme to launches that move no pair (counting in the table).

pub mod bcht;
pub mod chain;
pub mod cht1;
pub mod double;
pub mod iht;
pub mod linear;
pub mod no_evictions;
pub mod p2bht;

pub use bcht::Bcht;
pub use chain::Chain;
pub use cht1::Cht1;
pub use double::DoubleHashing;
pub use iht::Iht;
pub use linear::LinearProbing;
pub use no_evictions::NoEvictions;
pub use p2bht::P2bht;
