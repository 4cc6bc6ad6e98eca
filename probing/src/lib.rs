//! # hashtile-probing
//!
//! Probing schemes: each file is one scheme's placement rules, written against
//! [`hashtile_core::ProbingScheme`] with no GPU-specific code (no lanes, no atomics, no memory), so that one
//! source runs in the GPU tile driver and in the CPU backend.
//!
//! | scheme | file | paper |
//! |---|---|---|
//! | [`Bcht`] bucketed cuckoo, `h` hash functions, first-fit placement, bounded eviction chain | `bcht.rs` | BGHT §3.1, Listings 3–4 |

pub mod bcht;

pub use bcht::Bcht;
