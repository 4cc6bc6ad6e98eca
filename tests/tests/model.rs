//! Model-based property tests (issue 30): random sequences of batches (insert with repeats, insert-or-apply
//! (a counting add) with repeats, erase with repeats and absent keys, find, mixed batches (`HashTable::apply`:
//! inserts, replaces, erases and finds racing on the same keys), clear, compact) run on a table and on
//! a `HashMap` model side by side; every answer, every erase count and `len` must agree after every batch. Keys
//! come from a small universe so that batches collide, repeat and erase-then-reinsert. Half the sequences start
//! from a tiny table with growth on (`TableConfig::growth`), so that inserts and applies grow it several times
//! mid-sequence, erased slots and all. On failure proptest shrinks the sequence to a short one.
//!
//! Each scheme runs on the CPU backend and on every GPU present (CI: lavapipe).

use hashtile::reduce::Add;
use hashtile::{Backend, BackendChoice, HashTable, Op, Outcome, SchemeInfo, TableConfig};
use hashtile_tests::backends::present;
use proptest::prelude::*;
use std::collections::HashMap;

/// Distinct keys in play: batches draw from these, so a third of the table's slots at most.
const UNIVERSE: u16 = 1500;

/// One batch of the sequence; keys are indices into the universe.
#[derive(Debug, Clone)]
enum Batch {
    Insert(Vec<(u16, u32)>),
    Apply(Vec<(u16, u32)>),
    Erase(Vec<u16>),
    Find(Vec<u16>),
    /// A mixed batch: (operation 0..4 = insert, replace, erase, find; key; value).
    Mixed(Vec<(u8, u16, u32)>),
    Clear,
    Compact,
}

/// A universe index as a key: spread by a bijective mix, never the sentinel.
fn key(i: u16) -> u32 {
    hashtile::hash::fmix32(i as u32 ^ 0x6d0d)
}

fn batch() -> impl Strategy<Value = Batch> {
    let idx = 0..UNIVERSE;
    prop_oneof![
        4 => prop::collection::vec((idx.clone(), any::<u32>()), 0..400).prop_map(Batch::Insert),
        2 => prop::collection::vec((idx.clone(), 0..1000u32), 0..400).prop_map(Batch::Apply),
        3 => prop::collection::vec(idx.clone(), 0..400).prop_map(Batch::Erase),
        3 => prop::collection::vec(idx.clone(), 0..200).prop_map(Batch::Find),
        3 => prop::collection::vec((0..4u8, idx, any::<u32>()), 0..400).prop_map(Batch::Mixed),
        1 => Just(Batch::Clear),
        1 => Just(Batch::Compact),
    ]
}

/// Growth's maximum load in the growing sequences.
const MAX_LOAD: f64 = 0.85;

/// Runs `batches` on a fresh table of scheme `S` on `backend` and on the model, comparing after each: a table of
/// 4096 slots, or with `grow` one of 64 slots that grows past [`MAX_LOAD`].
fn agrees<S: SchemeInfo>(
    backend: Backend,
    grow: bool,
    batches: &[Batch],
) -> Result<(), TestCaseError> {
    let cfg = if grow {
        TableConfig::with_capacity(64).growth(MAX_LOAD)
    } else {
        TableConfig::with_capacity(4096)
    };
    let cfg = cfg.bucket_size(16).backend(BackendChoice::Exactly(backend));
    let mut t: HashTable<S, u32, u32> = HashTable::new(cfg).unwrap();
    let mut model: HashMap<u32, u32> = HashMap::new();
    for (step, b) in batches.iter().enumerate() {
        let at = format!("{} on {backend}, batch {step} ({b:?})", S::NAME);
        match b {
            Batch::Insert(pairs) => {
                let keys: Vec<u32> = pairs.iter().map(|&(i, _)| key(i)).collect();
                let values: Vec<u32> = pairs.iter().map(|&(_, v)| v).collect();
                t.insert(&keys, &values).unwrap();
                // The last occurrence of a key in a batch wins.
                model.extend(keys.into_iter().zip(values));
            }
            Batch::Apply(pairs) => {
                let keys: Vec<u32> = pairs.iter().map(|&(i, _)| key(i)).collect();
                let values: Vec<u32> = pairs.iter().map(|&(_, v)| v).collect();
                t.insert_or_apply::<Add>(&keys, &values).unwrap();
                // Every occurrence adds: a stored key's value and a new key's first value alike.
                for (k, v) in keys.into_iter().zip(values) {
                    let e = model.entry(k).or_insert(0);
                    *e = e.wrapping_add(v);
                }
            }
            Batch::Erase(idx) => {
                let keys: Vec<u32> = idx.iter().map(|&i| key(i)).collect();
                let mut gone = 0;
                for k in &keys {
                    gone += model.remove(k).is_some() as usize;
                }
                prop_assert_eq!(t.erase(&keys).unwrap(), gone, "{}: erased", at);
            }
            Batch::Find(idx) => {
                let keys: Vec<u32> = idx.iter().map(|&i| key(i)).collect();
                let got = t.find(&keys).unwrap();
                for (k, g) in keys.iter().zip(got) {
                    prop_assert_eq!(model.get(k).copied(), g, "{}: key {}", at, k);
                }
            }
            Batch::Mixed(ops) => {
                let ops: Vec<Op<u32, u32>> = ops
                    .iter()
                    .map(|&(o, i, v)| match o {
                        0 => Op::Insert(key(i), v),
                        1 => Op::Replace(key(i), v),
                        2 => Op::Erase(key(i)),
                        _ => Op::Find(key(i)),
                    })
                    .collect();
                let got = t.apply(&ops).unwrap();
                // The model runs the batch in order.
                for (o, g) in ops.iter().zip(got) {
                    let want = match *o {
                        Op::Insert(k, v) | Op::Replace(k, v) => match model.insert(k, v) {
                            Some(_) => Outcome::Updated,
                            None => Outcome::Inserted,
                        },
                        Op::Erase(k) => match model.remove(&k) {
                            Some(_) => Outcome::Erased,
                            None => Outcome::NotFound,
                        },
                        Op::Find(k) => model
                            .get(&k)
                            .map_or(Outcome::NotFound, |&v| Outcome::Found(v)),
                    };
                    prop_assert_eq!(g, want, "{}: {:?}", at, o);
                }
            }
            Batch::Clear => {
                t.clear().unwrap();
                model.clear();
            }
            Batch::Compact => t.compact().unwrap(),
        }
        prop_assert_eq!(t.len(), model.len(), "{}: len", at);
        prop_assert!(t.len() + t.tombstones() <= t.capacity(), "{}: room", at);
        if grow {
            prop_assert!(
                t.load_factor() <= MAX_LOAD,
                "{}: grown to {}",
                at,
                t.capacity()
            );
        }
    }
    // Every key of the universe answers as the model says at the end.
    let all: Vec<u32> = (0..UNIVERSE).map(key).collect();
    for (k, g) in all.iter().zip(t.find(&all).unwrap()) {
        prop_assert_eq!(
            model.get(k).copied(),
            g,
            "{} on {}: key {} at the end",
            S::NAME,
            backend,
            k
        );
    }
    Ok(())
}

macro_rules! model_tests {
    ($($s:ident),*) => {
        paste::paste! {
            $(
                proptest! {
                    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
                    #[test]
                    fn [<$s:lower _cpu>](grow in any::<bool>(), batches in prop::collection::vec(batch(), 1..12)) {
                        agrees::<hashtile::$s>(Backend::Cpu, grow, &batches)?;
                    }
                }
                proptest! {
                    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
                    #[test]
                    fn [<$s:lower _vulkan>](grow in any::<bool>(), batches in prop::collection::vec(batch(), 1..12)) {
                        if present(Backend::Vulkan) {
                            agrees::<hashtile::$s>(Backend::Vulkan, grow, &batches)?;
                        }
                    }
                }
                proptest! {
                    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
                    #[test]
                    fn [<$s:lower _cuda>](grow in any::<bool>(), batches in prop::collection::vec(batch(), 1..12)) {
                        if present(Backend::Cuda) {
                            agrees::<hashtile::$s>(Backend::Cuda, grow, &batches)?;
                        }
                    }
                }
            )*
        }
    };
}

model_tests!(Bcht, Iht, P2bht, LinearProbing, DoubleHashing);
