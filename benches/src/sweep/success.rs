//! Experiment 4: build success rate over hash-function seeds, with no rebuilds.

use super::common::{Ctx, KeySet, config};
use super::schemes::bucket_of;
use crate::common::check;
use hashtile::{DEFAULT_SEED, Error, HashTable, SchemeInfo};
use std::collections::{HashMap, HashSet};

/// One load factor of experiment 4.
#[derive(Debug, Clone)]
pub(super) struct SuccessPoint {
    /// Scheme name.
    pub(super) scheme: &'static str,
    /// Bucket size.
    pub(super) bucket: u32,
    /// Load factor.
    pub(super) load: f64,
    /// Builds that succeeded.
    pub(super) successes: usize,
    /// Builds tried.
    pub(super) seeds: usize,
    /// Every build, successful or not, matched the oracle (failed builds: the unplaced pairs returned plus the
    /// stored ones are exactly the input).
    pub(super) checked: bool,
}

impl SuccessPoint {
    /// Fraction of successful builds.
    pub(super) fn fraction(&self) -> f64 {
        self.successes as f64 / self.seeds as f64
    }
}

/// The master seed of the `i`-th build of experiment 4.
fn build_seed(i: usize) -> u64 {
    DEFAULT_SEED ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Build success of scheme `S` at `load` over `--seeds` hash-function seeds, no rebuilds (experiment 4).
pub(super) fn success_point<S: SchemeInfo>(
    ctx: &Ctx,
    data: &KeySet,
    load: f64,
) -> Result<SuccessPoint, String> {
    let bucket = bucket_of::<S>(ctx.bucket_for(S::NAME))?;
    let keys = data.inserted();
    let mut successes = 0;
    let mut checked = true;
    for i in 0..ctx.plan.seeds {
        let cfg = config::<S>(ctx, data.n, load, bucket)
            .seed(build_seed(i))
            .max_rebuilds(0)
            .deterministic(true);
        let mut t = HashTable::<S, u32, u32>::new(cfg).map_err(|e| e.to_string())?;
        match t.insert(keys, &data.values) {
            Ok(()) => {
                successes += 1;
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() == data.n && check(&data.oracle, keys, &got);
            }
            Err(Error::BuildFailed { unplaced, .. }) => {
                // Nothing lost: the returned pairs are the oracle's and absent, every other key is stored.
                let out: HashMap<u32, u32> = unplaced
                    .iter()
                    .map(|&(k, v)| (k as u32, v as u32))
                    .collect();
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() + out.len() == data.n
                    && out.iter().all(|(k, v)| data.oracle.get(k) == Some(v))
                    && keys.iter().zip(&got).all(|(k, g)| {
                        if out.contains_key(k) {
                            g.is_none()
                        } else {
                            data.oracle.get(k).copied() == *g
                        }
                    });
            }
            Err(Error::StashOverflow {
                untracked,
                unplaced,
            }) => {
                // GPU only, far past the achievable load: some pairs are gone by design; check what is stored.
                let out: HashSet<u32> = unplaced.iter().map(|&(k, _)| k as u32).collect();
                let got = t.find(keys).map_err(|e| e.to_string())?;
                checked &= t.len() + out.len() + untracked == data.n
                    && keys
                        .iter()
                        .zip(&got)
                        .all(|(k, g)| g.is_none() || data.oracle.get(k).copied() == *g);
            }
            Err(e) => return Err(e.to_string()),
        }
        ctx.bar.inc(1);
    }
    Ok(SuccessPoint {
        scheme: S::NAME,
        bucket,
        load,
        successes,
        seeds: ctx.plan.seeds,
        checked,
    })
}
