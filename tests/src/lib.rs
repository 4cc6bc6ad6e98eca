//! What the integration tests (`tests/tests/*.rs`) call, one module per job: the backends a test runs on, and
//! per table family its oracles, generators and table builders, and the checks that tests run over several
//! backends, runtimes, schemes or widths (each test's own comment says what it covers).

pub mod backends;
pub mod chained;
pub mod chained_gpu;
pub mod joins;
pub mod keys;
pub mod paged;
pub mod paged_sequences;
