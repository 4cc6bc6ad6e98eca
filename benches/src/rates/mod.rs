//! `hashtile-bench rates` (also what runs without a subcommand): insert and find rates (M keys/s) of each asked
//! scheme and bucket size at each load factor, every result checked against a `std::collections::HashMap`
//! oracle in the same run, written as CSV.
//!
//! Layout: `args` (the options and their checks), `ops` (the device counting and erase rows, `--count`,
//! `--erase`), `lifecycle` (growth and aging through `HashTable`, `--growth`, `--aging`), `measure` (one scheme
//! at one load factor; the sweep measures with it too), `wide` (the same with 64-bit pairs, `--wide`), `run` (the mode: every measurement, the CSV
//! and the table) and `shared` (the row and the empty GPU table they all use).

pub mod args;
mod lifecycle;
pub mod measure;
mod ops;
mod run;
mod shared;
mod wide;

pub use args::{Args, check};
pub use run::run;
