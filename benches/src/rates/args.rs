//! The `rates` mode's options ([`Args`]) and their checks ([`check`], giving [`Rates`]).

use crate::checks::{
    available_backend, check_bucket, check_csv_path, check_loads, check_log2_keys, check_repeats,
    scheme_name, table_slots, with_scheme,
};
use crate::footprint::{Capacity, Footprint, check_footprint, keyset_footprint, measure_footprint};
use hashtile::{Backend, BackendChoice, Cht1, SchemeInfo};

/// Options of the `rates` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Backend: auto, cpu, cuda or vulkan.
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Number of keys, as a power of two (1..=30).
    #[arg(long, default_value_t = 20)]
    pub log2_keys: u32,
    /// Load factors to run (comma separated), each in (0, 1].
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.8,0.9",
        allow_negative_numbers = true
    )]
    pub load: Vec<f64>,
    /// Probing scheme: bcht, iht, p2bht, 1cht (needs --bucket 1), linear or double.
    #[arg(long, value_delimiter = ',', default_value = "bcht")]
    pub scheme: Vec<String>,
    /// Bucket size (slots per bucket): powers of two in 1..=32.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    pub bucket: Vec<u32>,
    /// Timed runs per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// GPUs: before each timed row, repeat its operation (untimed) for this many milliseconds. A GPU's clock
    /// follows sustained work: NVIDIA's Vulkan driver lowers the SM clock within seconds of idling (the host's
    /// checks between rows) and raises it again only under work, so without this a row's short runs are timed at
    /// whatever clock the idle left (0.2-0.3x of the rates at the boost clock; the clock takes up to ~0.8 s of
    /// work to climb back). 0: none.
    #[arg(long, default_value_t = 1000)]
    pub warm_ms: u64,
    /// Start from the schemes' paper parameters instead of their defaults (`SchemeInfo::paper_params`; IHT: the
    /// paper's two secondaries); `--num-hashes` and the other knobs apply on top.
    #[arg(long)]
    pub paper_params: bool,
    /// Seed of the key generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u32,
    /// GPU claim path: `cas` (the default) or `exchange` (claim by exchange and re-insert what was displaced).
    #[arg(long, value_parser = ["cas", "exchange"])]
    pub claim: Option<String>,
    /// GPU insert bucket reads: `plain` (default on CUDA) or `atomic` (the Vulkan path: wgpu cannot bind the
    /// table twice in one launch).
    #[arg(long, value_parser = ["plain", "atomic"])]
    pub reads: Option<String>,
    /// GPU builds of device batches into an empty table: `off` (the library's default: every key probes the
    /// table at random) or a slice size in KiB (the binned build, `hashtile::gpu::Binning`, with bins of that
    /// size; 128 is the size measured).
    #[arg(long, default_value = "off", value_parser = parse_binning)]
    pub binning: hashtile::gpu::Binning,
    /// GPU device inserts and erases in table order (`hashtile::gpu::RangeOrder`): `auto` (the library's
    /// default: large batches into large tables), `off` (the callers' order) or the number of table ranges as a
    /// power of two: the batch is partitioned by the range its keys' first buckets lie in before the kernel
    /// runs. A list measures each (rows of an order other than `auto` name their scheme `scheme+off` or
    /// `scheme+rBITS`).
    #[arg(long, value_delimiter = ',', default_value = "auto", value_parser = parse_range_order)]
    pub range_order: Vec<hashtile::gpu::RangeOrder>,
    /// The range order being measured (set per iteration, not a flag).
    #[arg(skip)]
    pub cur_range_order: hashtile::gpu::RangeOrder,
    /// Lanes per tile of GPU find launches (`GpuTable::set_find_tile_width`) (default: the library's, a quarter of
    /// the bucket's slots).
    #[arg(long)]
    pub find_lanes: Option<u32>,
    /// Lanes per tile of GPU insert launches (`GpuTable::set_insert_tile_width`) (default: the library's, half the
    /// bucket's slots where it holds at least 8).
    #[arg(long)]
    pub insert_lanes: Option<u32>,
    /// Skip the duplicate check on insert (the caller promises new, distinct keys: the paper's bulk build).
    #[arg(long)]
    pub no_upsert: bool,
    /// Longest cuckoo eviction chain (BCHT, 1CHT) [default: the scheme's, 100].
    #[arg(long)]
    pub max_chain: Option<u32>,
    /// Number of hash functions [default: the scheme's: BCHT 3, IHT 3, P2BHT 2, 1CHT 4].
    #[arg(long)]
    pub num_hashes: Option<u32>,
    /// 64-bit keys with 64-bit values (GPUs: keys and values in parallel arrays, stable schemes IHT / P2BHT
    /// only; the CPU backend runs every scheme).
    #[arg(long)]
    pub wide: bool,
    /// Also measure a counting table on GPUs (`count16`): `insert_or_apply::<Add>` of 2^log2-keys device keys,
    /// each of 2^log2-keys / 16 distinct keys about 16 times, into a table sized for the distinct keys
    /// (cuCollections' `count_16` in `peers`).
    #[arg(long)]
    pub count: bool,
    /// Copies of each distinct key in the counting row (`--count`), on average (keys are drawn with
    /// replacement): 16 is cuCollections' `count_16`; 1 draws the batch from as many keys (about 63% of them
    /// drawn: a table out of the L2 cache, at about 0.63 of the load). One of 1, 4, 16, 64.
    #[arg(long, default_value_t = 16, value_parser = parse_count_repeats)]
    pub count_repeats: usize,
    /// Also measure erases on GPUs (stable schemes): 2^log2-keys pairs inserted, the first half erased
    /// (`erase`), then every key looked up (`find after erase`), as cuCollections' `erase` and
    /// `find_after_erase` in `peers`.
    #[arg(long)]
    pub erase: bool,
    /// Also measure a set on GPUs (`HashSet`'s 4-byte slots, device-resident): 2^log2-keys keys inserted, then
    /// contains of them and of as many absent keys, as cuCollections' `static_set` rows in `peers`.
    #[arg(long)]
    pub set: bool,
    /// Also measure growth through `HashTable` with host data (any backend): 2^log2-keys pairs built in one
    /// call, and in 64 batches into a table that starts sized for one batch and grows at the load.
    #[arg(long)]
    pub growth: bool,
    /// Also measure aging through `HashTable` with host data (any backend): 2^log2-keys pairs at the load, then
    /// 20 rounds of erasing a random half and inserting as many new keys, with the finds of rounds 1 and 20.
    #[arg(long)]
    pub aging: bool,
    /// Also measure a mixed batch through `HashTable::apply` with host data (any backend): 2^log2-keys pairs at
    /// the load, then one batch of 2^log2-keys operations on distinct keys (half finds, a quarter replaces of
    /// stored and new keys, a quarter erases), against a find of as many stored keys in the same run.
    #[arg(long)]
    pub mixed: bool,
    /// The operations beyond insert and find, as one list (comma separated): `count`, `erase`, `set`, `growth`,
    /// `aging`, `mixed` (the same as their flags).
    #[arg(long, value_delimiter = ',')]
    pub ops: Vec<String>,
    /// Only the rows of the operations above (`--count`, `--erase`, `--set`, `--growth`, `--aging`, `--mixed`),
    /// without the insert and find rows: a shorter run when only those are wanted.
    #[arg(long)]
    pub ops_only: bool,
    /// The rows through `HashTable` with host data (`--growth`, `--aging`, `--mixed`) copy each batch in at
    /// least this many chunks (`TableConfig::copy_chunks`; 1, the default: chunks of 2^22 keys).
    #[arg(long, default_value_t = 1)]
    pub copy_chunks: usize,
    /// The scheme being measured (set per iteration, not a flag).
    #[arg(skip)]
    pub cur_scheme: String,
    /// The bucket size being measured (set per iteration, not a flag).
    #[arg(skip)]
    pub cur_bucket: u32,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench.csv")]
    pub csv: String,
}

/// `--count-repeats`: 1, 4, 16 or 64 (the counting row's name says which: `count1` ... `count64`).
fn parse_count_repeats(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(r @ (1 | 4 | 16 | 64)) => Ok(r),
        _ => Err(format!("--count-repeats {s}: expected 1, 4, 16 or 64")),
    }
}

/// `--binning`: `off` or a slice size in KiB.
fn parse_binning(s: &str) -> Result<hashtile::gpu::Binning, String> {
    use hashtile::gpu::Binning;
    match s {
        "off" => Ok(Binning::Off),
        kib => match kib.parse::<usize>() {
            Ok(k) if (1..=1 << 20).contains(&k) => Ok(Binning::Slices(k << 10)),
            _ => Err(format!(
                "--binning {kib}: expected off or a slice size in KiB (1..=1048576)"
            )),
        },
    }
}

/// `--range-order`: `auto`, `off` or log2 of the number of ranges (1..=8).
fn parse_range_order(s: &str) -> Result<hashtile::gpu::RangeOrder, String> {
    use hashtile::gpu::RangeOrder;
    match s {
        "auto" => Ok(RangeOrder::Auto),
        "off" => Ok(RangeOrder::Off),
        bits => match bits.parse::<u32>() {
            Ok(b) if (1..=8).contains(&b) => Ok(RangeOrder::Ranges(b)),
            _ => Err(format!(
                "--range-order {bits}: expected auto, off or log2 of the ranges (1..=8)"
            )),
        },
    }
}

/// Scheme `S` supports bucket size `bucket` with the command line's knobs, and (GPUs) the pair width.
fn check_scheme<S: SchemeInfo>(args: &Args, bucket: u32, backend: Backend) -> Result<(), String> {
    if !S::BUCKET_SIZES.contains(&bucket) {
        return Err(format!(
            "--bucket {bucket}: {} does not support it (supported: {:?})",
            S::NAME,
            S::BUCKET_SIZES
        ));
    }
    crate::common::scheme_params::<S>(
        bucket,
        args.paper_params,
        args.no_upsert,
        args.max_chain,
        args.num_hashes,
    )
    .map_err(|e| format!("{} with buckets of {bucket}: {e}", S::NAME))?;
    if args.wide && backend != Backend::Cpu && !S::STABLE {
        return Err(format!(
            "--wide: {} moves pairs (cuckoo eviction) and runs 64-bit pairs only on the CPU backend; use \
             --scheme iht or p2bht on {backend}, or --backend cpu",
            S::NAME
        ));
    }
    Ok(())
}

/// The `rates` mode's checked command line and the backend it runs on.
pub struct Rates {
    /// The options, scheme names normalised.
    pub args: Args,
    /// The resolved, available backend.
    pub backend: Backend,
    /// `(scheme, bucket size)` of every table to measure, in order (1CHT: bucket size 1).
    pub instances: Vec<(&'static str, u32)>,
}

/// Checks the `rates` mode's options (in the order `cli`'s module docs give).
pub fn check(mut args: Args) -> Result<Rates, String> {
    check_repeats("--runs", args.runs)?;
    let log2 = check_log2_keys("--log2-keys", args.log2_keys)?;
    check_loads("--load", &args.load)?;
    if args.bucket.is_empty() {
        return Err("--bucket: no bucket size given".into());
    }
    for &b in &args.bucket {
        check_bucket("--bucket", b)?;
    }
    if args.scheme.is_empty() {
        return Err("--scheme: no scheme given".into());
    }
    let schemes = args
        .scheme
        .iter()
        .map(|s| scheme_name("--scheme", s))
        .collect::<Result<Vec<_>, _>>()?;
    args.scheme = schemes.iter().map(|s| s.to_string()).collect();
    check_csv_path(&args.csv)?;
    if args.copy_chunks == 0 {
        return Err("--copy-chunks must be at least 1".into());
    }
    for op in std::mem::take(&mut args.ops) {
        match op.trim() {
            "count" => args.count = true,
            "erase" => args.erase = true,
            "growth" => args.growth = true,
            "aging" => args.aging = true,
            "mixed" => args.mixed = true,
            "set" => args.set = true,
            other => {
                return Err(format!(
                    "--ops: unknown operation '{other}' (expected count, erase, set, growth, aging or mixed)"
                ));
            }
        }
    }
    let any_op = args.count || args.erase || args.set || args.growth || args.aging || args.mixed;
    if args.ops_only && !any_op {
        return Err("--ops-only: name the operations to measure (--ops or their flags)".into());
    }
    if args.ops_only && args.wide {
        return Err("--ops-only: the operation rows measure 32-bit pairs: drop --wide".into());
    }
    if (args.growth || args.aging || args.mixed) && args.wide {
        return Err("--growth, --aging and --mixed measure 32-bit pairs: drop --wide".into());
    }
    if args.aging && log2 > 28 {
        return Err(format!(
            "--aging: 20 rounds draw 10 x 2^{log2} fresh keys beside the 2^{log2} + 1 stored: at most --log2-keys 28"
        ));
    }
    // Every (scheme, bucket size) pair asked for; 1CHT only has one-slot buckets.
    let mut instances = Vec::new();
    for &s in &schemes {
        if s == Cht1::NAME {
            instances.push((s, 1));
        } else {
            instances.extend(args.bucket.iter().map(|&b| (s, b)));
        }
    }
    let n = 1usize << log2;
    let mut slots = Vec::new();
    for &(s, b) in &instances {
        for &load in &args.load {
            slots.push(table_slots(&format!("{s} --log2-keys {log2}"), n, load, b)?);
        }
    }
    let backend = available_backend(args.backend)?;
    // The CPU backend has the lifecycle rows (through `HashTable`), not the device operations' rows.
    if args.ops_only && backend == Backend::Cpu && !(args.growth || args.aging || args.mixed) {
        return Err(
            "--ops-only: --count, --erase and --set measure device operations (a GPU backend); the CPU backend \
             measures --growth, --aging and --mixed"
                .into(),
        );
    }
    for &(s, b) in &instances {
        with_scheme!(s, |S| check_scheme::<S>(&args, b, backend), |other| Err(
            format!("unknown scheme '{other}'")
        ))?;
    }
    let peak = slots
        .iter()
        .map(|&sl| measure_footprint(backend, args.wide, n, sl))
        .fold(Footprint::default(), Footprint::max);
    check_footprint(
        &format!("2^{log2} keys on {backend}"),
        keyset_footprint(n).plus(peak),
        Capacity::of_machine(backend),
    )?;
    Ok(Rates {
        args,
        backend,
        instances,
    })
}
