//! `hashtile-bench first-call`: what a fresh process pays for its first `insert` and `find` (issue 30's "first
//! call"), with the persistent kernel cache (`hashtile::set_kernel_cache`). The mode runs this binary again as
//! child processes on one cache directory, emptied first: a cold process (every kernel compiled), then warm
//! ones (every kernel loaded from the cache). Each child builds a table of `2^log2-keys` host keys at load 0.8
//! and times its first `insert` and first `find` as users call them (host `Vec`s in and out), then the same
//! calls on a second table of the same process (nothing left to compile or load: the steady state the first
//! calls are compared with). Every answer is checked against a `HashMap`. One CSV row per process.

use crate::checks::{
    available_backend, check_csv_path, check_log2_keys, check_repeats, with_scheme,
};
use crate::common::distinct_keys;
use hashtile::{BackendChoice, HashTable, KernelCache, SchemeInfo, TableConfig, set_kernel_cache};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Options of the `first-call` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct FirstCallArgs {
    /// Backend: auto, cuda or vulkan (the CPU backend compiles nothing).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Probing scheme (as `rates --scheme`).
    #[arg(long, default_value = "bcht")]
    pub scheme: String,
    /// Keys of each table, as a power of two.
    #[arg(long, default_value_t = 20)]
    pub log2_keys: u32,
    /// Warm processes after the cold one.
    #[arg(long, default_value_t = 2)]
    pub warm: usize,
    /// The cache directory (emptied first); default: a directory under the system's temporary directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench-first-call.csv")]
    pub csv: String,
    /// Internal: run as one measured child process (`cold` or `warm`).
    #[arg(long, hide = true)]
    pub child: Option<String>,
}

/// Checks the `first-call` mode's options.
pub fn check(a: FirstCallArgs) -> Result<FirstCallArgs, String> {
    check_log2_keys("--log2-keys", a.log2_keys)?;
    check_repeats("--warm", a.warm.max(1))?;
    check_csv_path(&a.csv)?;
    crate::checks::scheme_name("--scheme", &a.scheme)?;
    if a.backend == BackendChoice::Exactly(hashtile::Backend::Cpu) {
        return Err(
            "--backend cpu: the CPU backend compiles no kernels (use auto, cuda or vulkan)".into(),
        );
    }
    Ok(a)
}

/// The CSV header; a child prints one row.
const HEADER: &str = "process,backend,scheme,keys,first_insert_ms,first_find_ms,steady_insert_ms,steady_find_ms,correct";

/// Runs the mode (or, with `--child`, one measured process); returns the exit status (2 when an answer was
/// wrong).
pub fn run(a: &FirstCallArgs) -> Result<i32, String> {
    let dir = a
        .cache_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("hashtile-bench-first-call"));
    if let Some(which) = &a.child {
        return child(a, which, dir);
    }
    // The children make the first clients: this process makes none.
    let _ = std::fs::remove_dir_all(&dir);
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut rows = vec![HEADER.to_string()];
    let mut status = 0;
    let backend = match a.backend {
        BackendChoice::Auto => "auto".to_string(),
        BackendChoice::Exactly(b) => b.to_string(),
    };
    let processes = std::iter::once("cold").chain(std::iter::repeat_n("warm", a.warm));
    for (i, which) in processes.enumerate() {
        eprintln!("first-call: process {} ({which})", i + 1);
        let out = std::process::Command::new(&exe)
            .args(["first-call", "--backend", &backend, "--scheme", &a.scheme])
            .args(["--log2-keys", &a.log2_keys.to_string(), "--child", which])
            .arg("--cache-dir")
            .arg(&dir)
            .output()
            .map_err(|e| format!("starting a child process: {e}"))?;
        std::io::stderr().write_all(&out.stderr).ok();
        let text = String::from_utf8_lossy(&out.stdout);
        let row = text
            .lines()
            .find(|l| l.starts_with(which))
            .ok_or_else(|| format!("the {which} process printed no result ({})", out.status))?;
        if row.ends_with("false") || !out.status.success() {
            status = 2;
        }
        rows.push(row.to_string());
    }
    for r in &rows {
        println!("{r}");
    }
    std::fs::write(&a.csv, rows.join("\n") + "\n").map_err(|e| format!("{}: {e}", a.csv))?;
    Ok(status)
}

/// One measured process: the kernel cache in `dir`, a first table and a second one.
fn child(a: &FirstCallArgs, which: &str, dir: PathBuf) -> Result<i32, String> {
    set_kernel_cache(KernelCache::Dir(dir)).map_err(|e| e.to_string())?;
    let backend = available_backend(a.backend)?;
    let n = 1usize << a.log2_keys;
    let all = distinct_keys(n, 7);
    let keys = &all[..n];
    let values: Vec<u32> = keys.iter().map(|k| k.rotate_left(5)).collect();
    let oracle: HashMap<u32, u32> = keys.iter().copied().zip(values.iter().copied()).collect();
    // Half present, half absent.
    let queries: Vec<u32> = all.iter().step_by(2).copied().collect();
    let name = crate::checks::scheme_name("--scheme", &a.scheme)?;
    with_scheme!(
        name,
        |S| {
            let config = TableConfig::for_keys(n, 0.8).backend(BackendChoice::Exactly(backend));
            let mut times = [0f64; 4];
            let mut correct = true;
            for table in 0..2 {
                let mut t: HashTable<S, u32, u32> =
                    HashTable::new(config.clone()).map_err(|e| e.to_string())?;
                let start = Instant::now();
                t.insert(keys, &values).map_err(|e| e.to_string())?;
                times[2 * table] = start.elapsed().as_secs_f64() * 1e3;
                let start = Instant::now();
                let got = t.find(&queries).map_err(|e| e.to_string())?;
                times[2 * table + 1] = start.elapsed().as_secs_f64() * 1e3;
                correct &= crate::common::check(&oracle, &queries, &got);
            }
            println!(
                "{which},{backend},{},{n},{:.2},{:.2},{:.2},{:.2},{correct}",
                <S as SchemeInfo>::NAME,
                times[0],
                times[1],
                times[2],
                times[3]
            );
            Ok(if correct { 0 } else { 2 })
        },
        |other| Err(format!("unknown scheme '{other}'"))
    )
}
