//! The `hashtile-bench` binary refuses every bad command line with one `error: ...` line on stderr and exit
//! status 2: no panic, no backtrace, no allocation the machine cannot hold. And a small good run succeeds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh scratch directory under the system's temp dir, unique to this call (tests run in parallel).
fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hashtile-bench-cli-{}-{name}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Runs the binary with `args` in a scratch directory (so a wrongly accepted run writes nothing here), with
/// backtraces on: a panic would show one.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hashtile-bench"))
        .args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run hashtile-bench")
}

/// `args` are refused: exit status 2 (not a signal), one `error: ...` line on stderr containing `fragment`,
/// no panic, no backtrace.
#[track_caller]
fn assert_refused(args: &[&str], fragment: &str) {
    let dir = scratch("refused");
    let out = run_in(&dir, args);
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "{args:?}: killed by a signal ({:?})\n{stderr}",
        out.status
    );
    assert!(!out.status.success(), "{args:?} was accepted\n{stderr}");
    assert_eq!(out.status.code(), Some(2), "{args:?}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    assert!(
        !stderr.to_lowercase().contains("backtrace"),
        "{args:?} printed a backtrace:\n{stderr}"
    );
    assert!(
        stderr.contains(fragment),
        "{args:?}: stderr lacks {fragment:?}:\n{stderr}"
    );
    assert!(
        stderr.starts_with("error: ") && stderr.trim_end().lines().count() == 1,
        "{args:?}: not one `error:` line:\n{stderr}"
    );
}

/// Small CPU options that make a wrongly accepted run fast.
const SMALL: [&str; 4] = ["--backend", "cpu", "--log2-keys", "8"];

/// `SMALL` followed by `more`.
fn small(more: &[&'static str]) -> Vec<&'static str> {
    SMALL.iter().chain(more).copied().collect()
}

#[test]
fn zero_runs() {
    assert_refused(&small(&["--runs", "0"]), "--runs 0: must be at least 1");
    assert_refused(
        &["sweep", "--backend", "cpu", "--quick", "--runs", "0"],
        "--runs 0: must be at least 1",
    );
    assert_refused(
        &["sweep", "--backend", "cpu", "--quick", "--seeds", "0"],
        "--seeds 0",
    );
}

#[test]
fn key_counts_out_of_range() {
    assert_refused(&["--log2-keys", "40"], "--log2-keys 40: must be in 1..=30");
    assert_refused(&["--log2-keys", "0"], "--log2-keys 0: must be in 1..=30");
    assert_refused(&["--log2-keys", "99999999999"], "invalid value");
    assert_refused(
        &["sweep", "--quick", "--max-log2-keys", "31"],
        "--max-log2-keys 31",
    );
    assert_refused(
        &["sweep", "--quick", "--probe-log2-keys", "0"],
        "--probe-log2-keys 0",
    );
    // 2^30 keys at load 0.1 need more slots than a table can index.
    assert_refused(
        &["--backend", "cpu", "--log2-keys", "30", "--load", "0.1"],
        "more than a table can index",
    );
}

/// Sizes the host cannot hold are refused before allocating. Only where the refusal is certain: 2^30 keys
/// at load 1 need over 100 GiB on the CPU backend.
#[test]
fn more_than_host_memory() {
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    match avail {
        Some(kb) if kb < 64 << 20 => assert_refused(
            &[
                "--backend",
                "cpu",
                "--log2-keys",
                "30",
                "--load",
                "1",
                "--runs",
                "1",
            ],
            "of host memory",
        ),
        _ => eprintln!("skipped: MemAvailable unknown or at least 64 GiB"),
    }
}

#[test]
fn bad_load_factors() {
    for load in ["-0.5", "nan", "1.5", "0", "inf", "0.8,-1"] {
        assert_refused(&small(&["--load", load]), "a load factor must be in (0, 1]");
    }
    assert_refused(&small(&["--load", "0.8,x"]), "invalid value 'x'");
    assert_refused(
        &[
            "sweep",
            "--backend",
            "cpu",
            "--quick",
            "--success-load",
            "1.5",
        ],
        "--success-load 1.5",
    );
    assert_refused(
        &[
            "sweep",
            "--backend",
            "cpu",
            "--quick",
            "--size-load",
            "-0.5",
        ],
        "--size-load -0.5",
    );
}

#[test]
fn bad_bucket_sizes() {
    assert_refused(
        &small(&["--bucket", "3"]),
        "--bucket 3: a bucket size must be a power of two",
    );
    assert_refused(&small(&["--bucket", "16,64"]), "--bucket 64");
    assert_refused(&small(&["--bucket", "0"]), "--bucket 0");
    assert_refused(
        &["sweep", "--backend", "cpu", "--quick", "--scheme", "iht:3"],
        "a bucket size must be a power of two",
    );
    assert_refused(
        &["sweep", "--backend", "cpu", "--quick", "--scheme", "iht:x"],
        "bad bucket size 'x'",
    );
}

#[test]
fn unknown_names_and_flags() {
    assert_refused(&small(&["--scheme", "cuckoo"]), "unknown scheme 'cuckoo'");
    assert_refused(&small(&["--scheme", "bcht,"]), "unknown scheme ''");
    assert_refused(
        &["sweep", "--backend", "cpu", "--scheme", "cuckoo"],
        "unknown scheme 'cuckoo'",
    );
    assert_refused(&["--frobnicate"], "unexpected argument '--frobnicate'");
    assert_refused(
        &["sweep", "--frobnicate"],
        "unexpected argument '--frobnicate'",
    );
    assert_refused(&["--backend", "tpu"], "unknown backend 'tpu'");
    assert_refused(
        &small(&["--claim", "swap"]),
        "possible values: cas, exchange",
    );
    assert_refused(&small(&["--runs", "five"]), "invalid value 'five'");
    assert_refused(&small(&["--csv", "/no/such/dir/out.csv"]), "does not exist");
    assert_refused(
        &small(&["--num-hashes", "9"]),
        "BCHT needs 2..=4 hash functions",
    );
}

#[test]
fn unavailable_cuda() {
    if hashtile::is_available(hashtile::Backend::Cuda) {
        eprintln!("skipped: CUDA is available here");
        return;
    }
    assert_refused(
        &["--backend", "cuda", "--log2-keys", "8", "--runs", "1"],
        "backend cuda is not available",
    );
    assert_refused(
        &["sweep", "--backend", "cuda", "--quick"],
        "backend cuda is not available",
    );
}

#[test]
fn help_succeeds() {
    let dir = scratch("help");
    let out = run_in(&dir, &["--help"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--log2-keys"));
}

#[test]
fn small_cpu_run_writes_its_csv() {
    let dir = scratch("smoke");
    let csv = dir.join("rates.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_hashtile-bench"))
        .args([
            "--backend",
            "cpu",
            "--log2-keys",
            "10",
            "--load",
            "0.8",
            "--runs",
            "1",
            "--csv",
        ])
        .arg(&csv)
        .current_dir(&dir)
        .output()
        .expect("run hashtile-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    let text = std::fs::read_to_string(&csv).expect("CSV written");
    // Header, then insert and three find mixes, every one checked against the oracle.
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.starts_with("cpu,bcht,16,1024,0.8,") && l.contains(",true,")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn small_cpu_sweep_succeeds() {
    let dir = scratch("sweep");
    let out = Command::new(env!("CARGO_BIN_EXE_hashtile-bench"))
        .args([
            "sweep",
            "--backend",
            "cpu",
            "--scheme",
            "bcht",
            "--experiments",
            "success",
            "--success-log2-keys",
            "8",
            "--success-load",
            "0.5",
            "--seeds",
            "2",
            "--out",
            "out",
        ])
        .current_dir(&dir)
        .output()
        .expect("run hashtile-bench sweep");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(dir.join("out/success_rate.csv").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn host_mode_bad_inputs_are_refused() {
    assert_refused(&["host", "--runs", "0"], "--runs 0");
    assert_refused(&["host", "--log2-keys", "40"], "--log2-keys 40");
    assert_refused(&["host", "--load", "1.5"], "load factor");
    assert_refused(&["host", "--bucket", "3"], "--bucket 3");
    assert_refused(&["host", "--scheme", "cuckoo"], "unknown scheme");
    assert_refused(
        &["host", "--scheme", "1cht", "--bucket", "8"],
        "one-slot buckets",
    );
}

/// The host mode on the CPU backend: every call's answers checked, a CSV row per call with the HashMap ratio.
#[test]
fn small_cpu_host_run_writes_its_csv() {
    let dir = scratch("host");
    let out = run_in(
        &dir,
        &[
            "host",
            "--backend",
            "cpu",
            "--log2-keys",
            "12",
            "--load",
            "0.8",
            "--runs",
            "1",
            "--csv",
            "host.csv",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "host run failed:\n{stderr}");
    let csv = std::fs::read_to_string(dir.join("host.csv")).expect("host.csv written");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    // 7 calls x {vec, pinned} at one load factor (the count among them), each checked and set against std
    // HashMap.
    assert_eq!(rows.len(), 14, "{csv}");
    assert!(rows.iter().all(|r| r.ends_with(",true")), "{csv}");
    assert!(rows.iter().all(|r| r.contains("std HashMap")), "{csv}");
    assert_eq!(
        rows.iter().filter(|r| r.contains(",count,")).count(),
        2,
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `host --families`: the chained and CSR calls after the static ones, each against the static table's call of
/// the same run with its bar, every answer checked.
#[test]
fn small_cpu_host_run_times_the_families() {
    let dir = scratch("host-families");
    let out = run_in(
        &dir,
        &[
            "host",
            "--backend",
            "cpu",
            "--log2-keys",
            "12",
            "--load",
            "0.8",
            "--runs",
            "1",
            "--families",
            "--csv",
            "host.csv",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "host run failed:\n{stderr}");
    let csv = std::fs::read_to_string(dir.join("host.csv")).expect("host.csv written");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    // 14 static rows, then 9 chained and 5 CSR calls.
    assert_eq!(rows.len(), 28, "{csv}");
    assert!(rows.iter().all(|r| r.ends_with(",true")), "{csv}");
    let families: Vec<&&str> = rows[14..].iter().collect();
    assert!(
        families.iter().all(
            |r| [",static insert,", ",static find,", ",static find_into,"]
                .iter()
                .any(|s| r.contains(s))
        ),
        "{csv}"
    );
    for call in [
        "chained insert",
        "chained find",
        "chained erase",
        "chained find_all_into",
        "csr build",
        "csr find_all",
        "csr find_all_into",
    ] {
        assert!(families.iter().any(|r| r.contains(call)), "{call}: {csv}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("acceptance 8"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn csr_mode_refuses_bad_input_and_checks_its_answers() {
    assert_refused(
        &["csr", "--log2-keys", "10", "--dups", "3"],
        "--dups 3: must divide 2^10",
    );
    assert_refused(&["csr", "--log2-keys", "10", "--dups", "0"], "--dups 0");
    assert_refused(
        &["csr", "--log2-keys", "10", "--range", "-1"],
        "--range -1: must be finite, positive",
    );
    assert_refused(&["csr", "--log2-keys", "40"], "--log2-keys 40");
    assert_refused(&["csr", "--runs", "0"], "--runs 0: must be at least 1");
    assert_refused(
        &["csr", "--builds", "v3"],
        "'v3': expected v1, v2 or v2:BINS",
    );
    assert_refused(
        &["csr", "--builds", "v2:100"],
        "bin_vertices must be a power of two from 256 to 4096",
    );
    assert_refused(
        &["csr", "--tiles", "3"],
        "--tiles 3: must be 0 or a power of two up to 32",
    );
    // A small run: every answer checked, exit 0, CSV and plots written.
    let dir = scratch("csr");
    let out = run_in(
        &dir,
        &[
            "csr",
            "--backend",
            "cpu",
            "--log2-keys",
            "10",
            "--dups",
            "1,8",
            "--range",
            "1",
            "--runs",
            "1",
            "--csv",
            "c.csv",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(" NO"), "{stdout}");
    let csv = std::fs::read_to_string(dir.join("c.csv")).unwrap();
    // Per duplicate count: build, count, find_all, two joins; then the BCHT baseline row.
    assert_eq!(csv.lines().count(), 1 + 2 * 5 + 1, "{csv}");
    assert!(csv.lines().all(|l| !l.ends_with(",false")), "{csv}");
    let svg = std::fs::read_to_string(dir.join("c_host_vs_dups.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("find_all"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scan_mode_refuses_bad_input() {
    assert_refused(
        &["scan", "--backend", "cpu"],
        "the scan is a device primitive",
    );
    assert_refused(&["scan", "--log2-words", "40"], "--log2-words 40");
    assert_refused(&["scan", "--runs", "0"], "--runs 0: must be at least 1");
}

#[test]
fn paged_mode_refuses_bad_input_and_checks_its_answers() {
    assert_refused(
        &["paged", "--children", "6"],
        "--children 6: a power of two",
    );
    assert_refused(&["paged", "--child-mib", "0"], "--child-mib 0");
    assert_refused(
        &["paged", "--log2-keys", "12", "--log2-batch", "13"],
        "--log2-batch 13",
    );
    assert_refused(
        &["paged", "--big-gib", "2", "--big-budget-gib", "3"],
        "the budget at most the table",
    );
    assert_refused(&["paged", "--runs", "0"], "--runs 0: must be at least 1");
    // A small run of every experiment on the CPU: every answer checked (exit 0), one CSV each.
    let dir = scratch("paged");
    let out = run_in(
        &dir,
        &[
            "paged",
            "--backend",
            "cpu",
            "--children",
            "4",
            "--child-mib",
            "1",
            "--log2-keys",
            "15",
            "--log2-batch",
            "12",
            "--runs",
            "1",
            "--big-gib",
            "1",
            "--big-budget-gib",
            "1",
            "--experiments",
            "residency,skew,rebuild,growth",
            "--out-dir",
            "out",
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["residency", "skew", "rebuild", "growth_1mib"] {
        let csv = std::fs::read_to_string(dir.join(format!("out/paged_{name}.csv"))).unwrap();
        assert!(csv.lines().count() >= 2, "{name}: {csv}");
        assert!(!csv.contains("false"), "{name}: {csv}");
    }
    let svg = std::fs::read_to_string(dir.join("out/paged_residency.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("plain table"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}
