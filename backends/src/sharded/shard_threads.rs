//! Work on every shard at once, one thread each, and the shards' results merged into one (errors naming a key
//! by its index in the caller's batch): shared by every sharded family.

use super::route::Partition;
use hashtile_core::{Error, Result};

/// Runs `work` on each shard on a thread of its own (inline for one shard), results in shard order. (A shard
/// runs its device work on its table's own stream, whichever thread calls.)
pub(super) fn run_each<X: Send, T: Send>(
    items: &mut [X],
    work: impl Fn(usize, &mut X) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    if items.len() == 1 {
        return vec![work(0, &mut items[0])];
    }
    let work = &work;
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .iter_mut()
            .enumerate()
            .map(|(i, x)| sc.spawn(move || work(i, x)))
            .collect();
        handles.into_iter().map(join_thread).collect()
    })
}

/// [`run_each`] for work that reads its shard only.
pub(super) fn run_each_ref<X: Sync, T: Send>(
    items: &[X],
    work: impl Fn(usize, &X) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    if items.len() == 1 {
        return vec![work(0, &items[0])];
    }
    let work = &work;
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .iter()
            .enumerate()
            .map(|(i, x)| sc.spawn(move || work(i, x)))
            .collect();
        handles.into_iter().map(join_thread).collect()
    })
}

/// A shard thread's result; a panic in it is resumed on the caller's thread.
pub(super) fn join_thread<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    match h.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The shards' results, or the first error with its key indices mapped to the batch's; build failures of
/// several shards are merged into one that returns every unplaced pair.
pub(super) fn merge_failures<T>(p: &Partition, results: Vec<Result<T>>) -> Result<Vec<T>> {
    let mut ok = Vec::with_capacity(results.len());
    let mut failed: Option<(u32, Vec<(u64, u64)>)> = None;
    let mut first: Option<Error> = None;
    for (s, r) in results.into_iter().enumerate() {
        match r {
            Ok(t) => ok.push(t),
            Err(Error::BuildFailed { attempts, unplaced }) => {
                let f = failed.get_or_insert((0, Vec::new()));
                f.0 = f.0.max(attempts);
                f.1.extend(unplaced);
            }
            Err(e) if first.is_none() => first = Some(batch_error(p, s, e)),
            Err(_) => {}
        }
    }
    if let Some(e) = first {
        return Err(e);
    }
    if let Some((attempts, unplaced)) = failed {
        return Err(Error::BuildFailed { attempts, unplaced });
    }
    Ok(ok)
}

/// Shard `s`'s error with key indices of its part turned into the batch's.
pub(super) fn batch_error(p: &Partition, s: usize, e: Error) -> Error {
    match e {
        Error::SentinelKey { index } => Error::SentinelKey {
            index: p.index_of(s, index),
        },
        Error::TombstoneKey { index } => Error::TombstoneKey {
            index: p.index_of(s, index),
        },
        e => e,
    }
}
