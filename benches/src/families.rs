//! The other families' calls on host data beside the static table's, for the `host` mode: `ChainedTable<u32,
//! u32>` (load 0.6, `ChainedConfig::for_keys`) and `CsrTable<u32, u32>` (`CsrConfig::default()`) on the same
//! backend, the same `N` keys and values in `Vec`s, each call's copies both ways included, every answer
//! checked against the inputs. Each rate is set against the static table's call of the same shape **in the
//! same run**: inserts (chained `insert` and `replace`, the CSR build) against `HashTable::insert`; calls that
//! answer into the caller's slice (`find_into`, `count_into`) and erases against `HashTable::find_into`;
//! `find`, which returns a fresh vector of `Option`s, against `HashTable::find`. The bar each ratio must reach
//! (issue 29's acceptance 8: one host-I/O layer, one speed) is 0.7, and 0.5 for `find_all` and `find_all_into`,
//! which also return their offsets (set against `find_into`); `find_all_into` answers into one `FindAll` reused
//! across runs (as the `find_into` rows reuse their slice), so its gap to `find_all` is the first touch of
//! fresh memory. `count`, which returns a fresh vector, is shown against `find_into` without a bar: its gap to
//! `count_into` is the first touch of fresh memory, not the layer.

use crate::common::time;
use hashtile::{Backend, BackendChoice, ChainedConfig, ChainedTable, CsrConfig, CsrTable, FindAll};
use rayon::prelude::*;
use std::cell::RefCell;

/// The static table's rates from `Vec`s in the same run (M keys/s).
#[derive(Debug, Clone, Copy)]
pub struct StaticRates {
    /// `HashTable::insert` of all keys into an empty table.
    pub insert: f64,
    /// `HashTable::find_into` of all keys, all present.
    pub find_into: f64,
    /// `HashTable::find` (fresh `Option`s) of all keys, all present.
    pub find: f64,
}

/// One call of a family, against the static table.
#[derive(Debug, Clone)]
pub struct FamilyRow {
    /// `chained ...` or `csr ...`.
    pub call: &'static str,
    /// Median M keys/s.
    pub rate: f64,
    /// The static call it is set against (`static insert`, `static find_into`).
    pub reference: &'static str,
    /// That call's M keys/s.
    pub reference_rate: f64,
    /// The ratio the call must reach.
    pub bar: f64,
    /// Every answer matched the inputs.
    pub ok: bool,
}

/// What a call is set against: the static reference's name and rate, and the bar (`NaN`: none).
fn against(call: &str, s: StaticRates) -> (&'static str, f64, f64) {
    if call.ends_with("insert") || call.ends_with("replace") || call.ends_with("build") {
        ("static insert", s.insert, 0.7)
    } else if call.ends_with(" find") {
        ("static find", s.find, 0.7)
    } else if call.ends_with("find_all") || call.ends_with("find_all_into") {
        ("static find_into", s.find_into, 0.5)
    } else if call.ends_with(" count") {
        ("static find_into", s.find_into, f64::NAN)
    } else {
        ("static find_into", s.find_into, 0.7)
    }
}

/// Times every family call on `backend` with `keys` (distinct, none reserved by any family) and `values`,
/// `runs` timed runs after a warm-up each.
pub fn run(
    backend: Backend,
    keys: &[u32],
    values: &[u32],
    runs: usize,
    refs: StaticRates,
) -> hashtile::Result<Vec<FamilyRow>> {
    let n = keys.len();
    let mut rows = Vec::new();
    let mut push = |call: &'static str, (rate, ok): (f64, bool)| {
        let (reference, reference_rate, bar) = against(call, refs);
        rows.push(FamilyRow {
            call,
            rate,
            reference,
            reference_rate,
            bar,
            ok,
        });
    };
    let found = |got: &[Option<u32>]| got.par_iter().zip(values).all(|(g, v)| *g == Some(*v));
    let ones = |got: &[u32]| got.par_iter().all(|&c| c == 1);
    let one_each = |offsets: &[u32], got: &[u32]| {
        offsets
            .par_iter()
            .enumerate()
            .all(|(i, &o)| o as usize == i)
            && got == values
    };

    // Chained: fresh tables for the calls that fill or empty one (made untimed), one filled table for lookups.
    let cfg = ChainedConfig::for_keys(n, 0.6).backend(BackendChoice::Exactly(backend));
    let fresh = || ChainedTable::<u32, u32>::new(cfg.clone());
    let t = RefCell::new(fresh()?);
    eprintln!(
        "host: chained: insert, replace, find, find_into, count_into, count, find_all, find_all_into, erase"
    );
    let r = time(
        runs,
        n,
        || {
            *t.borrow_mut() = fresh()?;
            Ok(())
        },
        || t.borrow_mut().insert(keys, values),
        |()| t.borrow().len() == n,
    )?;
    push("chained insert", r);
    let r = time(
        runs,
        n,
        || {
            *t.borrow_mut() = fresh()?;
            Ok(())
        },
        || t.borrow_mut().replace(keys, values),
        |added| added == n && t.borrow().len() == n,
    )?;
    push("chained replace", r);
    let filled = t.into_inner();
    let r = time(runs, n, || Ok(()), || filled.find(keys), |g| found(&g))?;
    push("chained find", r);
    let out = RefCell::new(vec![0u32; n]);
    let r = time(
        runs,
        n,
        || Ok(()),
        || filled.find_into(keys, &mut out.borrow_mut()),
        |()| out.borrow().par_iter().zip(values).all(|(g, v)| g == v),
    )?;
    push("chained find_into", r);
    let r = time(
        runs,
        n,
        || Ok(()),
        || filled.count_into(keys, &mut out.borrow_mut()),
        |()| ones(&out.borrow()),
    )?;
    push("chained count_into", r);
    let r = time(runs, n, || Ok(()), || filled.count(keys), |g| ones(&g))?;
    push("chained count", r);
    let r = time(
        runs,
        n,
        || Ok(()),
        || filled.find_all(keys),
        |g| one_each(&g.offsets, &g.values),
    )?;
    push("chained find_all", r);
    let all = RefCell::new(FindAll::default());
    let r = time(
        runs,
        n,
        || Ok(()),
        || filled.find_all_into(keys, &mut all.borrow_mut()),
        |()| {
            let a = all.borrow();
            one_each(&a.offsets, &a.values)
        },
    )?;
    push("chained find_all_into", r);
    drop(filled);
    let t = RefCell::new(fresh()?);
    let r = time(
        runs,
        n,
        || {
            let mut f = fresh()?;
            f.replace(keys, values)?;
            *t.borrow_mut() = f;
            Ok(())
        },
        || t.borrow_mut().erase(keys),
        |erased| erased == n && t.borrow().is_empty(),
    )?;
    push("chained erase", r);
    drop(t);

    // CSR: each build timed whole (the previous table dropped untimed), then lookups on one table.
    eprintln!("host: csr: build, count_into, count, find_all, find_all_into");
    let cfg = CsrConfig {
        backend: BackendChoice::Exactly(backend),
        ..CsrConfig::default()
    };
    let table = RefCell::new(None);
    let r = time(
        runs,
        n,
        || {
            table.borrow_mut().take();
            Ok(())
        },
        || CsrTable::<u32, u32>::build(&cfg, keys, values),
        |c| {
            let ok = c.len() == n;
            *table.borrow_mut() = Some(c);
            ok
        },
    )?;
    push("csr build", r);
    let table = table.into_inner().expect("built");
    let r = time(
        runs,
        n,
        || Ok(()),
        || table.count_into(keys, &mut out.borrow_mut()),
        |()| ones(&out.borrow()),
    )?;
    push("csr count_into", r);
    let r = time(runs, n, || Ok(()), || table.count(keys), |g| ones(&g))?;
    push("csr count", r);
    let r = time(
        runs,
        n,
        || Ok(()),
        || table.find_all(keys),
        |g| one_each(&g.offsets, &g.values),
    )?;
    push("csr find_all", r);
    let r = time(
        runs,
        n,
        || Ok(()),
        || table.find_all_into(keys, &mut all.borrow_mut()),
        |()| {
            let a = all.borrow();
            one_each(&a.offsets, &a.values)
        },
    )?;
    push("csr find_all_into", r);
    Ok(rows)
}
