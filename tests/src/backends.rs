//! The backends a test runs on, and whether each answers on this machine.

use hashtile::Backend;
use std::io::Write;

/// Every backend, in the order the tests run them (each test skips those that are not [`present`]).
pub const BACKENDS: [Backend; 3] = [Backend::Cpu, Backend::Vulkan, Backend::Cuda];

/// `true` when `backend` answers. Otherwise reports the skip on the real stderr (libtest captures
/// `eprintln!` of passing tests; this line must show in CI logs) and returns `false`, or panics when
/// `HASHTILE_REQUIRE_GPU` (comma-separated backend names) requires the backend.
pub fn present(backend: Backend) -> bool {
    if hashtile::is_available(backend) {
        return true;
    }
    let required = std::env::var("HASHTILE_REQUIRE_GPU").unwrap_or_default();
    assert!(
        !required.split(',').any(|b| b.trim() == backend.to_string()),
        "HASHTILE_REQUIRE_GPU names {backend}, but no {backend} device answers"
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED: backend {backend} is not available on this machine (no device); nothing was tested"
    );
    false
}

/// The backends a table is tested on: the CPU, and each GPU present.
pub fn present_backends() -> Vec<Backend> {
    let mut b = vec![Backend::Cpu];
    b.extend(
        [Backend::Vulkan, Backend::Cuda]
            .into_iter()
            .filter(|&g| present(g)),
    );
    b
}
