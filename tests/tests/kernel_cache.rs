//! The persistent kernel cache (`hashtile::set_kernel_cache`) and `HashTable::warm_up`: warming a table up
//! compiles every kernel its inserts and finds launch, and a second process of the same build loads every
//! kernel the first one compiled instead of compiling it again, and answers the same.
//!
//! CubeCL's configuration is per process and fixed at the first client, so this is a test binary of its own,
//! and the second process is this binary again, started by the test on the same cache directory.

use hashtile::{
    Backend, BackendChoice, Bcht, HashTable, Iht, KernelCache, TableConfig, kernel_cache_dir,
    set_kernel_cache,
};
use hashtile_tests::backends::present;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Set (to the cache root) in the second process only.
const CHILD_ROOT: &str = "HASHTILE_TEST_KERNEL_CACHE_ROOT";

/// The configuration of the tables [`work`] builds.
fn config(backend: Backend) -> TableConfig {
    TableConfig::for_keys(50_000, 0.8).backend(BackendChoice::Exactly(backend))
}

/// The GPU backends present.
fn gpus() -> Vec<Backend> {
    [Backend::Vulkan, Backend::Cuda]
        .into_iter()
        .filter(|&b| present(b))
        .collect()
}

/// Builds a table of each scheme on every GPU present, checks it against a `HashMap`, and reports the first
/// calls' times (for reading, never asserted).
fn work(who: &str) {
    for backend in gpus() {
        let keys: Vec<u32> = (0..50_000u32)
            .map(|i| hashtile::hash::fmix32(i ^ 0x5eed))
            .filter(|&k| k != u32::MAX)
            .collect();
        let values: Vec<u32> = keys.iter().map(|k| k.rotate_left(7)).collect();
        let oracle: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
        let queries: Vec<u32> = keys.iter().copied().chain(1..1000).collect();
        let cfg = config(backend);
        let mut bcht: HashTable<Bcht, u32, u32> = HashTable::new(cfg.clone()).unwrap();
        let t = Instant::now();
        bcht.insert(&keys, &values).unwrap();
        let insert = t.elapsed();
        let t = Instant::now();
        let found = bcht.find(&queries).unwrap();
        let find = t.elapsed();
        for (k, got) in queries.iter().zip(found) {
            assert_eq!(
                oracle.get(k).copied(),
                got,
                "{who}: BCHT on {backend}, key {k}"
            );
        }
        let mut iht: HashTable<Iht, u32, u32> = HashTable::new(cfg).unwrap();
        iht.insert(&keys, &values).unwrap();
        for (k, got) in queries.iter().zip(iht.find(&queries).unwrap()) {
            assert_eq!(
                oracle.get(k).copied(),
                got,
                "{who}: IHT on {backend}, key {k}"
            );
        }
        eprintln!(
            "{who} process on {backend}: first insert {:.1} ms, first find {:.1} ms",
            insert.as_secs_f64() * 1e3,
            find.as_secs_f64() * 1e3
        );
    }
}

/// Every file under `dir` with its length (the cache appends an entry per kernel it compiles).
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "log") {
                out.push((p.clone(), e.metadata().unwrap().len()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_second_process_loads_every_kernel_from_the_cache() {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        set_kernel_cache(KernelCache::Dir(root.into())).unwrap();
        work("second");
        return;
    }
    let root = std::env::temp_dir().join(format!("hashtile-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    set_kernel_cache(KernelCache::Dir(root.clone())).unwrap();
    // Fixed now: a second setting is refused, and the configuration stays.
    assert!(set_kernel_cache(KernelCache::Off).is_err());
    if gpus().is_empty() {
        return;
    }
    // Warming tables up compiles what their calls need: the calls then compile nothing more.
    for backend in gpus() {
        let bcht: HashTable<Bcht, u32, u32> = HashTable::new(config(backend)).unwrap();
        bcht.warm_up().unwrap();
        assert!(bcht.is_empty(), "warm_up changed the table");
        let iht: HashTable<Iht, u32, u32> = HashTable::new(config(backend)).unwrap();
        iht.warm_up().unwrap();
    }
    let dir = kernel_cache_dir(&KernelCache::Dir(root.clone())).unwrap();
    let before = files(&dir);
    assert!(
        !before.is_empty(),
        "no compiled kernel was written under {}",
        dir.display()
    );
    work("first");
    assert_eq!(
        files(&dir),
        before,
        "the calls after warm_up compiled kernels warm_up did not"
    );
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_second_process_loads_every_kernel_from_the_cache",
            "--nocapture",
        ])
        .env(CHILD_ROOT, &root)
        .status()
        .unwrap();
    assert!(status.success(), "the second process failed");
    // Every kernel the second process launched came from the cache: nothing was compiled and appended.
    assert_eq!(
        files(&dir),
        before,
        "the second process compiled kernels again"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
