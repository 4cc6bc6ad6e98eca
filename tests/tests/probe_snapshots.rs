//! Average probes per operation, counted exactly by the CPU backend's deterministic mode, for every scheme at
//! B in {8, 16, 32} and load factors 0.6..0.99 (where the scheme builds). Fixed seed and keys: the snapshots
//! never flake. A probe is one bucket read (BGHT paper). Build failures are recorded as such. Every scheme runs
//! its paper's parameters (`SchemeInfo::paper_params`); IHT's default (one secondary sequence) has its own.
//!
//! Insert probes are for the paper's bulk build (`upsert = 0`: new, distinct keys); `insert-upsert` adds the
//! duplicate check hashtile does by default.

use hashtile::{Backend, BackendChoice, Error, HashTable, SchemeInfo, TableConfig};
use std::fmt::Write;

const N: usize = 1 << 14;
const LOADS: [f64; 6] = [0.6, 0.7, 0.8, 0.9, 0.95, 0.99];

fn keys() -> Vec<u32> {
    (0u32..)
        .map(|i| hashtile::hash::fmix32(i ^ 0x5eed))
        .filter(|&k| k != u32::MAX)
        .take(2 * N)
        .collect()
}

fn probes_table<S: SchemeInfo>(b: u32) -> String {
    probes_table_with::<S>(b, S::paper_params(b), "")
}

/// [`probes_table`] with `params` in place of the paper's (`label` names the variant in the header).
fn probes_table_with<S: SchemeInfo>(b: u32, params: hashtile::SchemeParams, label: &str) -> String {
    let keys = keys();
    let (present, absent) = keys.split_at(N);
    let half: Vec<u32> = present[..N / 2]
        .iter()
        .chain(&absent[..N / 2])
        .copied()
        .collect();
    let mut out = format!(
        "{}{label} B={b} N={N}\nload  insert  insert-upsert  find100  find50  find0\n",
        S::NAME
    );
    for load in LOADS {
        let cfg = |upsert: u32| {
            let mut p = params;
            p.upsert = upsert;
            TableConfig::for_keys(N, load)
                .bucket_size(b)
                .params(p)
                .deterministic(true)
                .max_rebuilds(0)
                .backend(BackendChoice::Exactly(Backend::Cpu))
        };
        let mut t: HashTable<S, u32, u32> = HashTable::new(cfg(0)).unwrap();
        match t.insert(present, present) {
            Ok(()) => {}
            Err(Error::BuildFailed { unplaced, .. }) => {
                writeln!(
                    out,
                    "{load:.2}  build failed ({} pairs unplaced)",
                    unplaced.len()
                )
                .unwrap();
                continue;
            }
            Err(e) => panic!("{e}"),
        }
        let ins = t.last_insert_probes().average();
        let mut u: HashTable<S, u32, u32> = HashTable::new(cfg(1)).unwrap();
        let ins_upsert = match u.insert(present, present) {
            Ok(()) => format!("{:.4}", u.last_insert_probes().average()),
            Err(_) => "failed".to_string(),
        };
        let f = |q: &[u32]| {
            t.find(q).unwrap();
            t.last_find_probes().average()
        };
        let (f100, f50, f0) = (f(present), f(&half), f(absent));
        writeln!(
            out,
            "{load:.2}  {ins:.4}  {ins_upsert}  {f100:.4}  {f50:.4}  {f0:.4}"
        )
        .unwrap();
    }
    out
}

macro_rules! snapshot_test {
    ($s:ident, $b:literal) => {
        paste::paste! {
            #[test]
            fn [<probes_ $s:lower _b $b>]() {
                insta::assert_snapshot!(probes_table::<hashtile::$s>($b));
            }
        }
    };
}

snapshot_test!(Bcht, 8);
snapshot_test!(Bcht, 16);
snapshot_test!(Bcht, 32);
snapshot_test!(Iht, 8);
snapshot_test!(Iht, 16);
snapshot_test!(Iht, 32);
snapshot_test!(P2bht, 8);
snapshot_test!(P2bht, 16);
snapshot_test!(P2bht, 32);
snapshot_test!(Cht1, 1);

/// IHT's default, one secondary sequence (`num_hashes = 2`, BGHT's code): one secondary read in the common case,
/// and absent keys stop at a primary below the threshold.
#[test]
fn probes_iht_one_sequence_b16() {
    let p = <hashtile::Iht as SchemeInfo>::default_params(16);
    assert_eq!(p.num_hashes, 2);
    insta::assert_snapshot!(probes_table_with::<hashtile::Iht>(16, p, " h=2"));
}
