//! The checks of what the user typed that the modes share: repeat counts, key counts, load factors, bucket
//! sizes, scheme names, table sizes, output paths and the backend. Each returns its one-line error; `main`
//! prints it as `error: ...` and exits with status 2, before anything is measured.

use hashtile::{
    Backend, BackendChoice, Bcht, Cht1, DoubleHashing, Error, HashTable, Iht, LinearProbing, P2bht,
    SchemeInfo, TableConfig,
};
use std::path::Path;

/// Largest `--log2-keys` (and every other `log2` size): the key generator draws `2 * 2^30` distinct 32-bit keys,
/// and 2^31 keys would need more distinct keys than `u32` has (without the sentinel).
pub const MAX_LOG2_KEYS: u32 = 30;

/// Largest `--runs` / `--seeds`: far more than any measurement needs; bounds the loops and progress counters.
pub const MAX_REPEATS: usize = 100_000;

/// Names of the schemes, as `--scheme` spells them.
pub const SCHEMES: [&str; 6] = [
    Bcht::NAME,
    Iht::NAME,
    P2bht::NAME,
    Cht1::NAME,
    LinearProbing::NAME,
    DoubleHashing::NAME,
];

/// The one dispatch from a scheme's name to its type: `$body` with `$s` bound to the scheme whose
/// `SchemeInfo::NAME` is `$name` (one of [`SCHEMES`]), or `$unknown` with `$other` bound to any other name. A new
/// scheme is its type in the list below and in [`SCHEMES`] (and in the sweep's `for_each_scheme!`, which lists
/// them in legend order).
macro_rules! with_scheme {
    ($name:expr, |$s:ident| $body:expr, |$other:ident| $unknown:expr) => {
        with_scheme!(@among [Bcht, Iht, P2bht, Cht1, LinearProbing, DoubleHashing] $name, |$s| $body, |$other| $unknown)
    };
    (@among [$($ty:ident),*] $name:expr, |$s:ident| $body:expr, |$other:ident| $unknown:expr) => {
        match $name {
            $(
                n if n == <hashtile::$ty as hashtile::SchemeInfo>::NAME => {
                    type $s = hashtile::$ty;
                    $body
                }
            )*
            $other => $unknown,
        }
    };
}
pub(crate) use with_scheme;

/// `--runs` / `--seeds`: at least 1 (the median of no runs does not exist), at most [`MAX_REPEATS`].
pub fn check_repeats(flag: &str, v: usize) -> Result<usize, String> {
    if (1..=MAX_REPEATS).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{flag} {v}: must be at least 1 and at most {MAX_REPEATS}"
        ))
    }
}

/// A number of keys given as a power of two: `1..=`[`MAX_LOG2_KEYS`].
pub fn check_log2_keys(flag: &str, v: u32) -> Result<u32, String> {
    if (1..=MAX_LOG2_KEYS).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{flag} {v}: must be in 1..={MAX_LOG2_KEYS} (2 to 2^{MAX_LOG2_KEYS} keys)"
        ))
    }
}

/// A list of load factors: not empty, each in `(0, 1]` (NaN and infinities are not).
pub fn check_loads(flag: &str, loads: &[f64]) -> Result<(), String> {
    if loads.is_empty() {
        return Err(format!("{flag}: no load factor given"));
    }
    match loads.iter().find(|&&l| !(l > 0.0 && l <= 1.0)) {
        Some(bad) => Err(format!(
            "{flag} {bad}: a load factor must be in (0, 1] (greater than 0, at most 1)"
        )),
        None => Ok(()),
    }
}

/// Sorted, de-duplicated copy of a list of load factors, each checked by [`check_loads`].
pub fn load_list(flag: &str, loads: &[f64]) -> Result<Vec<f64>, String> {
    check_loads(flag, loads)?;
    let mut v = loads.to_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    Ok(v)
}

/// A bucket size: a power of two in `1..=32`.
pub fn check_bucket(flag: &str, b: u32) -> Result<u32, String> {
    if b.is_power_of_two() && b <= 32 {
        Ok(b)
    } else {
        Err(format!(
            "{flag} {b}: a bucket size must be a power of two in 1..=32 (1, 2, 4, 8, 16 or 32)"
        ))
    }
}

/// The scheme called `name` (any case), as [`SCHEMES`] spells it.
pub fn scheme_name(flag: &str, name: &str) -> Result<&'static str, String> {
    let trimmed = name.trim();
    SCHEMES
        .iter()
        .copied()
        .find(|s| s.eq_ignore_ascii_case(trimmed))
        .ok_or_else(|| {
            format!(
                "{flag}: unknown scheme '{name}' (expected one of {})",
                SCHEMES.join(", ")
            )
        })
}

/// Slots of a table for `n` keys at `load` in buckets of `bucket` slots, as `TableConfig::for_keys` sizes it;
/// an error if that many slots do not fit the tables' `u32` slot indices.
pub fn table_slots(what: &str, n: usize, load: f64, bucket: u32) -> Result<u64, String> {
    let cfg = TableConfig::for_keys(n, load);
    let b = bucket.max(1) as u64;
    let slots = (cfg.capacity as u64).div_ceil(b).max(1).saturating_mul(b);
    if slots >= u32::MAX as u64 {
        return Err(format!(
            "{what}: {n} keys at load factor {load} need {slots} slots (buckets of {bucket}), more than a table \
             can index (2^32 - 1); use fewer keys or a higher load factor"
        ));
    }
    Ok(slots)
}

/// The backend `choice` resolves to, or an error if it does not answer on this machine (only possible for
/// an explicitly requested GPU backend: `auto` falls back to the CPU). Checked before any GPU call, which
/// without a driver would panic inside the runtime.
pub fn available_backend(choice: BackendChoice) -> Result<Backend, String> {
    let backend = hashtile::resolve(choice);
    if hashtile::is_available(backend) {
        return Ok(backend);
    }
    // `HashTable::new` refuses an unavailable backend, saying why and what to do, before allocating anything.
    let probe = HashTable::<Bcht, u32, u32>::new(
        TableConfig::with_capacity(16).backend(BackendChoice::Exactly(backend)),
    );
    let why = match probe {
        Err(Error::BackendUnavailable { reason, how, .. }) if !how.is_empty() => {
            format!("{reason}. {how}")
        }
        Err(Error::BackendUnavailable { reason, .. }) => reason,
        _ => "no device answered".to_string(),
    };
    Err(format!(
        "backend {backend} is not available: {why} (--backend cpu runs anywhere)"
    ))
}

/// The CSV file can be created where asked: its directory exists, and the path is not a directory.
pub fn check_csv_path(csv: &str) -> Result<(), String> {
    if csv.is_empty() {
        return Err("--csv: empty file name".into());
    }
    let path = Path::new(csv);
    if path.is_dir() {
        return Err(format!("--csv {csv}: is a directory, not a file"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "--csv {csv}: directory {} does not exist",
            dir.display()
        ));
    }
    Ok(())
}
