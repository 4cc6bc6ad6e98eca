//! The `rates` mode's rows of a table's life through `HashTable`, with host data as users call it, on any
//! backend, every answer checked:
//!
//! - `--growth`: N pairs built into a table sized for them in one call (`build (one batch)`), the same N pairs in
//!   64 batches into that table (`64 batches (sized)`: the cost of the calls alone), and in 64 batches into a
//!   table that starts sized for one batch and grows (`TableConfig::growth` at the load: `growth (64
//!   batches)`); the rate of each is N over its total time, so the ratios give growth's amortised cost against
//!   one build (issue 30: within 2x) and against the same calls without growth.
//! - `--aging`: N pairs at the load, then 20 rounds of "erase a random half, insert as many new keys"
//!   (`aging round`: keys erased and inserted per second), with the finds of every stored key after the first
//!   round and after the last (`aging find (round 1)`, `aging find (round 20)`: within 10% of each other, issue
//!   30); `len` and every answer are checked each round.
//! - `--mixed`: N pairs at the load, then one `HashTable::apply` of N operations on distinct keys (half finds of
//!   stored keys, a quarter replaces: half of stored keys, half of new ones, a quarter erases of stored keys):
//!   `mixed batch` (operations per second, every outcome checked), against `find (N stored)`, a `find_into` of
//!   the N stored keys from host data on the same table in the same run.
//! - `--set` (beside the device rows of `ops`): a `HashSet` of N keys from host data (`set insert (host)`, then
//!   `set contains (host)` of the N keys), against a `HashTable`'s insert of N pairs and `find_into` of the N
//!   keys (`insert (host)`, `find_into (host)`) in the same run: a set's call moves its keys alone across the
//!   bus.

use super::args::Args;
use super::shared::{Row, params_for};
use hashtile::{Backend, BackendChoice, HashSet, HashTable, Op, Outcome, SchemeInfo, TableConfig};
use indicatif::ProgressBar;
use std::time::Instant;

/// Batches of the growth row.
pub const GROWTH_BATCHES: usize = 64;
/// Rounds of the aging rows.
pub const AGING_ROUNDS: usize = 20;

/// Timed rows each option adds per load (for the progress bar).
pub fn rows_of(args: &Args) -> u64 {
    3 * u64::from(args.growth)
        + 3 * u64::from(args.aging)
        + 2 * u64::from(args.mixed)
        + 4 * u64::from(args.set)
}

/// The value stored with `key` (a function of the key: checks need no map).
fn value_of(key: u32) -> u32 {
    key.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995
}

fn config<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    n: usize,
    load: f64,
) -> hashtile::Result<TableConfig> {
    Ok(TableConfig::for_keys(n, load)
        .bucket_size(args.cur_bucket)
        .params(params_for::<S>(args)?)
        .backend(BackendChoice::Exactly(backend))
        .copy_chunks(args.copy_chunks))
}

/// `true` when `t` holds exactly `keys`, each with its [`value_of`].
fn holds<S: SchemeInfo>(t: &HashTable<S, u32, u32>, keys: &[u32]) -> hashtile::Result<bool> {
    let got = t.find(keys)?;
    Ok(t.len() == keys.len() && got.iter().zip(keys).all(|(g, &k)| *g == Some(value_of(k))))
}

fn row(
    args: &Args,
    backend: Backend,
    load: f64,
    op: &'static str,
    rates: Vec<f64>,
    ok: bool,
) -> Row {
    Row {
        scheme: args.cur_scheme.clone(),
        bucket: args.cur_bucket,
        backend,
        load,
        op,
        present: 1.0,
        rates,
        checked: ok,
        unplaced: 0,
    }
}

/// The growth rows of scheme `S` at `load`: `keys[..n]` built at once and grown batch by batch.
pub fn growth_rows<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    n: usize,
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let keys = &keys[..n];
    let values: Vec<u32> = keys.iter().map(|&k| value_of(k)).collect();
    let batch = n.div_ceil(GROWTH_BATCHES).max(1);
    let (mut once, mut sized, mut grown) = (Vec::new(), Vec::new(), Vec::new());
    let mut ok = true;
    for run in 0..=args.runs {
        let mut t = HashTable::<S, u32, u32>::new(config::<S>(args, backend, n, load)?)?;
        let t0 = Instant::now();
        t.insert(keys, &values)?;
        let dt_once = t0.elapsed().as_secs_f64();
        drop(t);
        let mut t = HashTable::<S, u32, u32>::new(config::<S>(args, backend, n, load)?)?;
        let t0 = Instant::now();
        for (k, v) in keys.chunks(batch).zip(values.chunks(batch)) {
            t.insert(k, v)?;
        }
        let dt_sized = t0.elapsed().as_secs_f64();
        drop(t);
        let cfg = config::<S>(args, backend, batch, load)?.growth(load);
        let mut t = HashTable::<S, u32, u32>::new(cfg)?;
        let t0 = Instant::now();
        for (k, v) in keys.chunks(batch).zip(values.chunks(batch)) {
            t.insert(k, v)?;
        }
        let dt_grown = t0.elapsed().as_secs_f64();
        if run > 0 {
            once.push(n as f64 / dt_once / 1e6);
            sized.push(n as f64 / dt_sized / 1e6);
            grown.push(n as f64 / dt_grown / 1e6);
        } else {
            ok &= holds(&t, keys)? && t.load_factor() <= load;
        }
        bar.inc(3);
    }
    Ok(vec![
        row(args, backend, load, "build (one batch)", once, ok),
        row(args, backend, load, "64 batches (sized)", sized, ok),
        row(args, backend, load, "growth (64 batches)", grown, ok),
    ])
}

/// The aging rows of scheme `S` at `load`: `keys[..n]` built, then [`AGING_ROUNDS`] rounds of erasing a random
/// half of the stored keys and inserting as many fresh ones (`fresh(i)`: distinct from every key before).
pub fn aging_rows<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    n: usize,
    fresh: impl Fn(usize) -> u32,
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let mut t = HashTable::<S, u32, u32>::new(config::<S>(args, backend, n, load)?)?;
    let mut stored: Vec<u32> = keys[..n].to_vec();
    let values: Vec<u32> = stored.iter().map(|&k| value_of(k)).collect();
    t.insert(&stored, &values)?;
    let (mut rounds, mut first, mut last) = (Vec::new(), Vec::new(), Vec::new());
    let mut ok = true;
    let mut next_fresh = 0usize;
    let find_rate = |t: &HashTable<S, u32, u32>, stored: &[u32], ok: &mut bool| {
        let t0 = Instant::now();
        let got = t.find(stored);
        let dt = t0.elapsed().as_secs_f64();
        *ok &= got.is_ok_and(|g| g.iter().zip(stored).all(|(g, &k)| *g == Some(value_of(k))));
        stored.len() as f64 / dt / 1e6
    };
    for round in 1..=AGING_ROUNDS {
        // A random half: the stored keys whose round-salted mix has its top bit set.
        let salt = hashtile::hash::fmix32(round as u32 ^ args.seed);
        let (gone, kept): (Vec<u32>, Vec<u32>) = stored
            .iter()
            .partition(|&&k| hashtile::hash::fmix32(k ^ salt) >> 31 == 1);
        let new: Vec<u32> = (0..gone.len()).map(|i| fresh(next_fresh + i)).collect();
        next_fresh += gone.len();
        let new_values: Vec<u32> = new.iter().map(|&k| value_of(k)).collect();
        let t0 = Instant::now();
        let erased = t.erase(&gone)?;
        t.insert(&new, &new_values)?;
        let dt = t0.elapsed().as_secs_f64();
        rounds.push(2.0 * gone.len() as f64 / dt / 1e6);
        stored = kept;
        stored.extend_from_slice(&new);
        ok &= erased == gone.len() && t.len() == n;
        ok &= t
            .find(&gone[..gone.len().min(1 << 16)])?
            .iter()
            .all(Option::is_none);
        if round == 1 || round == AGING_ROUNDS {
            let mut rates = Vec::new();
            for _ in 0..=args.runs {
                rates.push(find_rate(&t, &stored, &mut ok));
            }
            rates.remove(0);
            if round == 1 {
                first = rates;
            } else {
                last = rates;
            }
        }
        if round % 7 == 0 {
            ok &= holds(&t, &stored)?;
        }
    }
    bar.inc(3 * (args.runs as u64 + 1));
    Ok(vec![
        row(args, backend, load, "aging round", rounds, ok),
        row(args, backend, load, "aging find (round 1)", first, ok),
        row(args, backend, load, "aging find (round 20)", last, ok),
    ])
}

/// The mixed-batch rows of scheme `S` at `load` (`keys`: the run's `2n` distinct keys; the first `n` stored,
/// the rest new): one [`HashTable::apply`] of `n` operations on distinct keys against a `find_into` of the `n`
/// stored keys, each on a fresh table per run.
pub fn mixed_rows<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    n: usize,
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let stored = &keys[..n];
    let values: Vec<u32> = stored.iter().map(|&k| value_of(k)).collect();
    // Operation `i` by `i % 8`: four finds, a replace of a stored key, a replace of a new key, two erases.
    let (ops, want): (Vec<Op<u32, u32>>, Vec<Outcome<u32>>) = (0..n)
        .map(|i| {
            let k = stored[i];
            match i % 8 {
                0..=3 => (Op::Find(k), Outcome::Found(value_of(k))),
                4 => (Op::Replace(k, value_of(k) ^ 1), Outcome::Updated),
                5 => {
                    let k = keys[n + i];
                    (Op::Replace(k, value_of(k)), Outcome::Inserted)
                }
                _ => (Op::Erase(k), Outcome::Erased),
            }
        })
        .unzip();
    let inserted = want.iter().filter(|o| **o == Outcome::Inserted).count();
    let erased = want.iter().filter(|o| **o == Outcome::Erased).count();
    let (mut mixed, mut finds) = (Vec::new(), Vec::new());
    let mut ok = true;
    let mut out = vec![0u32; n];
    for run in 0..=args.runs {
        let mut t = HashTable::<S, u32, u32>::new(config::<S>(args, backend, n, load)?)?;
        t.insert(stored, &values)?;
        let t0 = Instant::now();
        t.find_into(stored, &mut out)?;
        let dt_find = t0.elapsed().as_secs_f64();
        ok &= out == values;
        let t0 = Instant::now();
        let got = t.apply(&ops)?;
        let dt = t0.elapsed().as_secs_f64();
        ok &= got == want && t.len() == n + inserted - erased;
        if run > 0 {
            finds.push(n as f64 / dt_find / 1e6);
            mixed.push(n as f64 / dt / 1e6);
        }
        bar.inc(2);
    }
    Ok(vec![
        row(args, backend, load, "mixed batch", mixed, ok),
        row(args, backend, load, "find (N stored)", finds, ok),
    ])
}

/// The host-data set rows of scheme `S` at `load` (see the module docs): `keys[..n]` into a fresh `HashSet` and
/// a fresh `HashTable` per run, each looked up again.
pub fn set_host_rows<S: SchemeInfo>(
    args: &Args,
    backend: Backend,
    load: f64,
    keys: &[u32],
    n: usize,
    bar: &ProgressBar,
) -> hashtile::Result<Vec<Row>> {
    let keys = &keys[..n];
    let values: Vec<u32> = keys.iter().map(|&k| value_of(k)).collect();
    let (mut si, mut sc, mut mi, mut mf) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ok = true;
    let mut out = vec![0u32; n];
    let rate = |t0: Instant| n as f64 / t0.elapsed().as_secs_f64() / 1e6;
    for run in 0..=args.runs {
        let mut s = HashSet::<S, u32>::new(config::<S>(args, backend, n, load)?)?;
        let t0 = Instant::now();
        let added = s.insert(keys)?;
        let r_si = rate(t0);
        let t0 = Instant::now();
        let found = s.contains(keys)?;
        let r_sc = rate(t0);
        ok &= added == n && found.iter().all(|&f| f);
        drop(s);
        let mut t = HashTable::<S, u32, u32>::new(config::<S>(args, backend, n, load)?)?;
        let t0 = Instant::now();
        t.insert(keys, &values)?;
        let r_mi = rate(t0);
        let t0 = Instant::now();
        t.find_into(keys, &mut out)?;
        let r_mf = rate(t0);
        ok &= out == values;
        if run > 0 {
            si.push(r_si);
            sc.push(r_sc);
            mi.push(r_mi);
            mf.push(r_mf);
        }
        bar.inc(4);
    }
    Ok(vec![
        row(args, backend, load, "set insert (host)", si, ok),
        row(args, backend, load, "set contains (host)", sc, ok),
        row(args, backend, load, "insert (host)", mi, ok),
        row(args, backend, load, "find_into (host)", mf, ok),
    ])
}
