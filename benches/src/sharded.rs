//! `hashtile-bench sharded`: a [`ShardedTable`] over 1, 2, 4, ... devices against one device's [`HashTable`],
//! measured in the same run (issue 31's scaling figures). Weak scaling: every shard holds `2^log2-keys` keys at
//! `--load`, so `g` shards hold `g` times the keys of the one-device table. Calls are timed as users make
//! them, on host data: `insert` from `Vec`s (into a cleared table each run), `find_into` into a reused `Vec`,
//! and `find` into fresh `Option`s. Each rate's speedup is against the same call on the one-device table. Every
//! answer is checked against the stored values (and absent keys against nothing). On GPUs also the
//! device-data calls (`--device`, on by default there): every device holds its own slice of `2^log2-keys`
//! keys, `insert_device` and `find_device` against one device's `GpuTable` device-resident `insert_device` /
//! `find_device`, with the exchange's share of each call against the transport's own all-to-all of the same
//! bytes measured in the same run (`exchange_ceiling`). `--family chained`: the chained multimap instead, a
//! [`ShardedChainedTable`] against one device's [`ChainedTable`] (host data: `--load` is its keys per base-slab
//! slot). `--family csr`: a [`ShardedCsrTable`] against one device's [`CsrTable`] (host data: `build`, `count`
//! and `find_all`; `--load` is the keys per vertex). CSV, and an SVG plot of speedup against devices with the
//! ideal line.

use crate::checks::{
    available_backend, check_csv_path, check_log2_keys, check_repeats, with_scheme,
};
use crate::common::{distinct_keys, time};
use crate::plot::{Figure, Panel, Series, XAxis, write_svg};
use hashtile::{
    Backend, BackendChoice, ChainedConfig, ChainedTable, CsrConfig, CsrTable, FindAll, HashTable,
    SchemeInfo, ShardConfig, ShardedChainedTable, ShardedConfig, ShardedCsrTable, ShardedTable,
    TableConfig,
};
use std::path::PathBuf;

/// Options of the `sharded` mode.
#[derive(clap::Args, Debug, Clone)]
pub struct ShardedArgs {
    /// Backend: auto, cuda, vulkan or cpu (the CPU backend runs `--shards` shards side by side).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// Probing scheme (as `rates --scheme`).
    #[arg(long, default_value = "bcht")]
    pub scheme: String,
    /// Family: `static` (a `ShardedTable` of `--scheme`), `chained` (a `ShardedChainedTable`) or `csr` (a
    /// `ShardedCsrTable`); the last two take host data only.
    #[arg(long, default_value = "static")]
    pub family: String,
    /// Keys per shard, as a power of two.
    #[arg(long, default_value_t = 26)]
    pub log2_keys: u32,
    /// Load factor of every shard.
    #[arg(long, default_value_t = 0.8)]
    pub load: f64,
    /// Shard counts to measure, comma-separated (GPUs: one shard per device, devices 0..g; counts past the
    /// devices present are skipped with a note).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub shards: Vec<usize>,
    /// Timed runs per call (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// CSV output file.
    #[arg(long, default_value = "hashtile-bench-sharded.csv")]
    pub csv: String,
    /// SVG plot of speedup against shards (none if not given).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Exchange steps of the device-data rows, keys of each slice per step as powers of two, comma-separated
    /// (default: the library's, `ShardedConfig::exchange_step`); the plot shows the first.
    #[arg(long, value_delimiter = ',')]
    pub log2_exchange_steps: Vec<u32>,
    /// Skip the device-data rows (GPUs).
    #[arg(long)]
    pub no_device: bool,
    /// Skip the host-data rows.
    #[arg(long)]
    pub no_host: bool,
    /// Also one process per GPU (CUDA): for each shard count of 2 or more, this program runs again once per GPU
    /// as a rank of a table over ranks, and each call's rate comes from its slowest rank (transport
    /// `nccl-ranks` in the CSV).
    #[arg(long)]
    pub ranks: bool,
    /// Internal: run as one rank (`RANK,WORLD,ADDR`) of the `--ranks` rows and print its timings.
    #[arg(long, hide = true)]
    pub rank_of: Option<String>,
}

/// Checks the `sharded` mode's options.
pub fn check(a: ShardedArgs) -> Result<ShardedArgs, String> {
    check_log2_keys("--log2-keys", a.log2_keys)?;
    check_repeats("--runs", a.runs)?;
    check_csv_path(&a.csv)?;
    crate::checks::scheme_name("--scheme", &a.scheme)?;
    if !["static", "chained", "csr"].contains(&a.family.as_str()) {
        return Err(format!("--family {}: static, chained or csr", a.family));
    }
    if !(a.load > 0.0 && a.load <= 1.0) {
        return Err(format!("--load {}: must be in (0, 1]", a.load));
    }
    if let Some(&s) = a
        .log2_exchange_steps
        .iter()
        .find(|&&s| !(11..=40).contains(&s))
    {
        return Err(format!("--log2-exchange-steps {s}: must be in 11..=40"));
    }
    if a.shards.is_empty()
        || a.shards
            .iter()
            .any(|&g| g == 0 || g > hashtile::sharded::MAX_SHARDS)
    {
        return Err(format!(
            "--shards {:?}: each count must be in 1..={}",
            a.shards,
            hashtile::sharded::MAX_SHARDS
        ));
    }
    Ok(a)
}

const HEADER: &str = "backend,scheme,shards,keys_per_shard,keys,load,input,call,mkeys_per_s,one_device_mkeys_per_s,speedup,transport,exchange_gb_s,exchange_ceiling_gb_s,exchange_of_ceiling,exchange_step,route_ms,steps_ms,exchange_ms,correct";

/// One measured call of one table.
#[derive(Default)]
struct Row {
    shards: usize,
    input: &'static str,
    call: &'static str,
    rate: f64,
    correct: bool,
    transport: &'static str,
    /// The exchange's own rate in the call, and the transport's all-to-all of the same bytes (GB/s).
    exchange: Option<(f64, f64)>,
    /// Device rows: keys per exchange step, and where the last timed call's time went.
    step: usize,
    phases: Option<hashtile::DevicePhases>,
}

/// Runs the mode; returns the exit status (2 when an answer was wrong).
pub fn run(a: &ShardedArgs) -> Result<i32, String> {
    let backend = available_backend(a.backend)?;
    let name = crate::checks::scheme_name("--scheme", &a.scheme)?;
    let devices = hashtile::device_count(backend);
    let per = 1usize << a.log2_keys;
    let most = a.shards.iter().copied().max().unwrap_or(1);
    eprintln!("sharded: {backend}, {devices} device(s), {per} keys per shard, up to {most} shards");
    // Keys for the largest table, and as many absent ones; the smaller tables take prefixes.
    let all = distinct_keys(per * most, 31);
    let (keys, absent) = all.split_at(per * most);
    let values: Vec<u32> = keys
        .iter()
        .map(|&k| crate::sharded_device::value_of(k))
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    if a.family == "chained" {
        chained_rows(a, backend, devices, per, keys, &values, absent, &mut rows)?;
        return write(a, backend, "chained", per, &rows);
    }
    if a.family == "csr" {
        csr_rows(a, backend, devices, per, keys, &values, &mut rows)?;
        return write(a, backend, "csr", per, &rows);
    }
    with_scheme!(
        name,
        |S| {
            if let Some(spec) = &a.rank_of {
                crate::sharded_ranks::rank::<S>(spec, per, a.load, a.runs, keys)?;
                return Ok(0);
            }
            if a.ranks && backend == Backend::Cuda {
                for &g in a.shards.iter().filter(|&&g| g >= 2 && g <= devices) {
                    let ranked = crate::sharded_ranks::rows(g, per)?;
                    for (input, call, rate, correct) in ranked {
                        eprintln!(
                            "sharded: {g} ranks over NCCL: {input} {call} {rate:.0} M keys/s, correct {correct}"
                        );
                        rows.push(Row {
                            shards: g,
                            input,
                            call,
                            rate,
                            correct,
                            transport: "nccl-ranks",
                            step: hashtile::sharded::config::DEFAULT_EXCHANGE_STEP,
                            ..Row::default()
                        });
                    }
                }
            }
            if !a.no_device && backend != Backend::Cpu {
                let steps: Vec<usize> = if a.log2_exchange_steps.is_empty() {
                    vec![hashtile::sharded::config::DEFAULT_EXCHANGE_STEP]
                } else {
                    a.log2_exchange_steps.iter().map(|&s| 1usize << s).collect()
                };
                let device = crate::sharded_device::rows::<S>(
                    backend, devices, &a.shards, &steps, per, a.load, a.runs, keys,
                )?;
                rows.extend(device.into_iter().map(|d| Row {
                    shards: d.shards,
                    input: "device",
                    call: d.call,
                    rate: d.rate,
                    correct: d.correct,
                    transport: d.transport,
                    exchange: d.exchange,
                    step: d.step,
                    phases: d.phases,
                }));
            }
            if a.no_host {
                return write(a, backend, <S as SchemeInfo>::NAME, per, &rows);
            }
            // One device's table, the reference of every speedup.
            let config =
                TableConfig::for_keys(per, a.load).backend(BackendChoice::Exactly(backend));
            let mut t: HashTable<S, u32, u32> =
                HashTable::new(config).map_err(|e| e.to_string())?;
            t.warm_up().map_err(|e| e.to_string())?;
            measure(
                a,
                0,
                &keys[..per],
                &values[..per],
                &absent[..per],
                &mut rows,
                &mut Plain(&mut t),
            )?;
            drop(t);
            for g in shard_counts(a, backend, devices) {
                let n = per * g;
                let table =
                    TableConfig::for_keys(n, a.load).backend(BackendChoice::Exactly(backend));
                let config = spread(table, backend, g);
                let mut t: ShardedTable<S, u32, u32> =
                    ShardedTable::new(config).map_err(|e| e.to_string())?;
                t.warm_up().map_err(|e| e.to_string())?;
                measure(
                    a,
                    g,
                    &keys[..n],
                    &values[..n],
                    &absent[..n],
                    &mut rows,
                    &mut Sharded(&mut t),
                )?;
            }
            write(a, backend, <S as SchemeInfo>::NAME, per, &rows)
        },
        |other| Err(format!("--scheme {other}: unknown"))
    )
}

/// The shard counts measured: `--shards`, less those past the GPUs present (each said).
fn shard_counts(a: &ShardedArgs, backend: Backend, devices: usize) -> Vec<usize> {
    let (ok, past): (Vec<usize>, Vec<usize>) = a
        .shards
        .iter()
        .partition(|&&g| backend == Backend::Cpu || g <= devices);
    for g in past {
        eprintln!("sharded: {g} shards skipped ({devices} device(s) here)");
    }
    ok
}

/// `table` spread over `g` shards: side by side on the CPU backend, one per GPU `0..g` elsewhere.
fn spread<C: ShardConfig>(table: C, backend: Backend, g: usize) -> ShardedConfig<C> {
    if backend == Backend::Cpu {
        ShardedConfig::new(table).shards(g)
    } else {
        ShardedConfig::new(table).devices((0..g).collect::<Vec<_>>())
    }
}

/// The calls the mode times, on either kind of table.
trait Table {
    fn clear(&mut self) -> hashtile::Result<()>;
    fn insert(&mut self, k: &[u32], v: &[u32]) -> hashtile::Result<()>;
    fn find_into(&self, k: &[u32], out: &mut [u32]) -> hashtile::Result<()>;
    fn find(&self, k: &[u32]) -> hashtile::Result<Vec<Option<u32>>>;
}

/// The calls every table wrapper forwards to the table it holds (`.0`) as they are.
macro_rules! table_calls {
    () => {
        fn insert(&mut self, k: &[u32], v: &[u32]) -> hashtile::Result<()> {
            self.0.insert(k, v)
        }
        fn find_into(&self, k: &[u32], out: &mut [u32]) -> hashtile::Result<()> {
            self.0.find_into(k, out)
        }
        fn find(&self, k: &[u32]) -> hashtile::Result<Vec<Option<u32>>> {
            self.0.find(k)
        }
    };
}

struct Plain<'a, S: SchemeInfo>(&'a mut HashTable<S, u32, u32>);
struct Sharded<'a, S: SchemeInfo>(&'a mut ShardedTable<S, u32, u32>);

impl<S: SchemeInfo> Table for Plain<'_, S> {
    fn clear(&mut self) -> hashtile::Result<()> {
        self.0.clear()
    }
    table_calls!();
}

impl<S: SchemeInfo> Table for Sharded<'_, S> {
    fn clear(&mut self) -> hashtile::Result<()> {
        self.0.clear()
    }
    table_calls!();
}

/// The chained family's rows (`--family chained`): one device's `ChainedTable`, then a `ShardedChainedTable`
/// of each shard count, host data (the chained family has no device-data path over shards).
#[allow(clippy::too_many_arguments)]
fn chained_rows(
    a: &ShardedArgs,
    backend: Backend,
    devices: usize,
    per: usize,
    keys: &[u32],
    values: &[u32],
    absent: &[u32],
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let err = |e: hashtile::Error| e.to_string();
    let one = ChainedConfig::for_keys(per, a.load).backend(BackendChoice::Exactly(backend));
    let mut t = OneChained(ChainedTable::new(one.clone()).map_err(err)?, one);
    let (k, v, x) = (&keys[..per], &values[..per], &absent[..per]);
    measure(a, 0, k, v, x, rows, &mut t)?;
    drop(t);
    for g in shard_counts(a, backend, devices) {
        let n = per * g;
        let table = ChainedConfig::for_keys(n, a.load).backend(BackendChoice::Exactly(backend));
        let config = spread(table, backend, g);
        let mut t = ShardChained(
            ShardedChainedTable::new(config.clone()).map_err(err)?,
            config,
        );
        measure(a, g, &keys[..n], &values[..n], &absent[..n], rows, &mut t)?;
    }
    Ok(())
}

/// One device's chained table and its config: a chained table has no `clear`, so it is made afresh.
struct OneChained(ChainedTable<u32, u32>, ChainedConfig);
/// A sharded chained table and its config, made afresh to clear it.
struct ShardChained(ShardedChainedTable<u32, u32>, ShardedConfig<ChainedConfig>);

/// The smallest chained table of `c`'s settings: made in a table's place to free its memory before the table is
/// made afresh (a chained table has no `clear`).
fn placeholder(c: &ChainedConfig) -> ChainedConfig {
    ChainedConfig {
        buckets: 1,
        pool_slabs: 32,
        ..c.clone()
    }
}

impl Table for OneChained {
    fn clear(&mut self) -> hashtile::Result<()> {
        self.0 = ChainedTable::new(placeholder(&self.1))?;
        self.0 = ChainedTable::new(self.1.clone())?;
        Ok(())
    }
    table_calls!();
}

impl Table for ShardChained {
    fn clear(&mut self) -> hashtile::Result<()> {
        self.0 = ShardedChainedTable::new(ShardedConfig {
            table: placeholder(&self.1.table),
            ..self.1.clone()
        })?;
        self.0 = ShardedChainedTable::new(self.1.clone())?;
        Ok(())
    }
    table_calls!();
}

/// The CSR family's rows (`--family csr`): one device's `CsrTable`, then a `ShardedCsrTable` of each shard count:
/// the build from `Vec`s, `count` and `find_all` of every stored key (host data).
fn csr_rows(
    a: &ShardedArgs,
    backend: Backend,
    devices: usize,
    per: usize,
    keys: &[u32],
    values: &[u32],
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let csr = CsrConfig::default()
        .range_factor(1.0 / a.load)
        .backend(BackendChoice::Exactly(backend));
    let mut one = OneCsr(None, csr.clone());
    measure_csr(a, 0, &keys[..per], &values[..per], rows, &mut one)?;
    drop(one);
    for g in shard_counts(a, backend, devices) {
        let n = per * g;
        let config = spread(csr.clone(), backend, g);
        let mut t = ShardCsr(None, config);
        measure_csr(a, g, &keys[..n], &values[..n], rows, &mut t)?;
    }
    Ok(())
}

/// The calls `--family csr` times, on either kind of CSR table (built by `build`, kept for the lookups).
trait CsrCalls {
    fn build(&mut self, k: &[u32], v: &[u32]) -> hashtile::Result<()>;
    fn count(&self, k: &[u32]) -> hashtile::Result<Vec<u32>>;
    fn find_all(&self, k: &[u32]) -> hashtile::Result<FindAll<u32>>;
}

/// One device's CSR table (once built) and its config.
struct OneCsr(Option<CsrTable<u32, u32>>, CsrConfig);
/// A sharded CSR table (once built) and its config.
struct ShardCsr(Option<ShardedCsrTable<u32, u32>>, ShardedConfig<CsrConfig>);

/// The table a lookup reads: built by a `build` before.
fn built<T>(t: &Option<T>) -> hashtile::Result<&T> {
    t.as_ref()
        .ok_or_else(|| hashtile::Error::InvalidConfig("looked up before the build".into()))
}

/// `CsrCalls` of a wrapper whose `.0` is a table of type `$table` once built from its config `.1`.
macro_rules! csr_calls {
    ($wrapper:ty, $table:ident) => {
        impl CsrCalls for $wrapper {
            fn build(&mut self, k: &[u32], v: &[u32]) -> hashtile::Result<()> {
                // The old table goes first: its memory comes back before the new one's is taken.
                self.0 = None;
                self.0 = Some($table::build(&self.1, k, v)?);
                Ok(())
            }
            fn count(&self, k: &[u32]) -> hashtile::Result<Vec<u32>> {
                built(&self.0)?.count(k)
            }
            fn find_all(&self, k: &[u32]) -> hashtile::Result<FindAll<u32>> {
                built(&self.0)?.find_all(k)
            }
        }
    };
}

csr_calls!(OneCsr, CsrTable);
csr_calls!(ShardCsr, ShardedCsrTable);

/// Times the build, `count` and `find_all` of one CSR table (`shards` 0: the one-device table) and checks them
/// (the keys are distinct: one value each).
fn measure_csr(
    a: &ShardedArgs,
    shards: usize,
    keys: &[u32],
    values: &[u32],
    rows: &mut Vec<Row>,
    t: &mut dyn CsrCalls,
) -> Result<(), String> {
    let n = keys.len();
    let err = |e: hashtile::Error| format!("{shards} shard(s): {e}");
    let cell = std::cell::RefCell::new(&mut *t);
    let (rate, _) = time(
        a.runs,
        n,
        || Ok(()),
        || cell.borrow_mut().build(keys, values),
        |_| true,
    )
    .map_err(err)?;
    let t = cell.into_inner();
    let mut push = |call: &'static str, rate: f64, correct: bool| {
        eprintln!(
            "sharded: {shards} shard(s) (0: one device): csr {call} {rate:.0} M keys/s, correct {correct}"
        );
        rows.push(Row {
            shards,
            input: "host",
            call,
            rate,
            correct,
            ..Row::default()
        });
    };
    push("build", rate, true);
    let (rate, ok) = time(
        a.runs,
        n,
        || Ok(()),
        || t.count(keys),
        |c| c.iter().all(|&c| c == 1),
    )
    .map_err(err)?;
    push("count", rate, ok);
    let (rate, ok) = time(
        a.runs,
        n,
        || Ok(()),
        || t.find_all(keys),
        |f| f.values == values,
    )
    .map_err(err)?;
    push("find_all", rate, ok);
    Ok(())
}

/// Times `insert`, `find_into` and `find` of one table (`shards` 0: the one-device table) and checks them.
fn measure(
    a: &ShardedArgs,
    shards: usize,
    keys: &[u32],
    values: &[u32],
    absent: &[u32],
    rows: &mut Vec<Row>,
    t: &mut dyn Table,
) -> Result<(), String> {
    let n = keys.len();
    let what = if shards == 0 {
        "one device".to_string()
    } else {
        format!("{shards} shard(s)")
    };
    let err = |e: hashtile::Error| format!("{what}: {e}");
    // Insert into a cleared table each run; the last run leaves the table full for the finds.
    let cell = std::cell::RefCell::new(&mut *t);
    let (rate, _) = time(
        a.runs,
        n,
        || cell.borrow_mut().clear(),
        || cell.borrow_mut().insert(keys, values),
        |_| true,
    )
    .map_err(err)?;
    let t = cell.into_inner();
    rows.push(Row {
        shards,
        input: "host",
        call: "insert",
        rate,
        correct: true,
        ..Row::default()
    });
    eprintln!("sharded: {what}: insert {rate:.0} M keys/s");

    let mut out = vec![0u32; n];
    let mut ok = true;
    let (rate, _) = time(
        a.runs,
        n,
        || Ok(()),
        || t.find_into(keys, &mut out),
        |_| true,
    )
    .map_err(err)?;
    ok &= out == values;
    // The inserts of every run stored the same pairs: the last one's table answers the check.
    rows.push(Row {
        shards,
        input: "host",
        call: "find_into",
        rate,
        correct: ok,
        ..Row::default()
    });
    eprintln!("sharded: {what}: find_into {rate:.0} M keys/s, correct {ok}");

    let (rate, ok) = time(
        a.runs,
        n,
        || Ok(()),
        || t.find(keys),
        |got| got.iter().zip(values).all(|(g, v)| *g == Some(*v)),
    )
    .map_err(err)?;
    let probe = &absent[..absent.len().min(1 << 16)];
    let ok = ok && t.find(probe).map_err(err)?.iter().all(|g| g.is_none());
    rows.push(Row {
        shards,
        input: "host",
        call: "find",
        rate,
        correct: ok,
        ..Row::default()
    });
    eprintln!("sharded: {what}: find {rate:.0} M keys/s, correct {ok}");
    Ok(())
}

/// Writes the CSV (and the plot) and prints the rows; status 2 when an answer was wrong.
fn write(
    a: &ShardedArgs,
    backend: Backend,
    scheme: &str,
    per: usize,
    rows: &[Row],
) -> Result<i32, String> {
    let one = |input: &str, call: &str| {
        rows.iter()
            .find(|r| r.shards == 0 && r.input == input && r.call == call)
            .map_or(f64::NAN, |r| r.rate)
    };
    let mut lines = vec![HEADER.to_string()];
    for r in rows {
        let shards = r.shards.max(1);
        let label = if r.shards == 0 {
            "one-device".to_string()
        } else {
            r.shards.to_string()
        };
        let (ex, ceiling) = r.exchange.unwrap_or((f64::NAN, f64::NAN));
        let step = if r.step > 0 {
            r.step.to_string()
        } else {
            String::new()
        };
        let phases = r.phases.map_or(format!("{step},NaN,NaN,NaN"), |p| {
            format!(
                "{},{:.3},{:.3},{:.3}",
                r.step, p.route_ms, p.steps_ms, p.exchange_ms
            )
        });
        lines.push(format!(
            "{backend},{scheme},{label},{per},{},{},{},{},{:.1},{:.1},{:.3},{},{:.1},{:.1},{:.3},{phases},{}",
            per * shards,
            a.load,
            r.input,
            r.call,
            r.rate,
            one(r.input, r.call),
            r.rate / one(r.input, r.call),
            r.transport,
            ex,
            ceiling,
            ex / ceiling,
            r.correct
        ));
    }
    for l in &lines {
        println!("{l}");
    }
    std::fs::write(&a.csv, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", a.csv))?;
    if let Some(path) = &a.plot {
        let calls = [
            ("host", "build"),
            ("host", "count"),
            ("host", "find_all"),
            ("host", "insert"),
            ("host", "find_into"),
            ("host", "find"),
            ("device", "insert_device"),
            ("device", "find_device"),
        ];
        // Device rows of the first exchange step measured.
        let ranked = |r: &Row| r.transport == "nccl-ranks";
        let first_step = rows
            .iter()
            .find(|r| r.input == "device" && r.shards > 0 && !ranked(r))
            .map_or(0, |r| r.step);
        // One series per call and way of running (one process, or one process per GPU).
        let mut series: Vec<Series> = [false, true]
            .iter()
            .flat_map(|&over_ranks| calls.iter().map(move |&c| (over_ranks, c)))
            .filter(|&(over_ranks, (i, c))| {
                rows.iter()
                    .any(|r| r.input == i && r.call == c && ranked(r) == over_ranks)
            })
            .map(|(over_ranks, (i, c))| Series {
                name: if over_ranks {
                    format!("{c}, process per GPU")
                } else {
                    c.to_string()
                },
                points: rows
                    .iter()
                    .filter(|r| r.shards > 0 && r.input == i && r.call == c)
                    .filter(|r| ranked(r) == over_ranks)
                    .filter(|r| r.input == "host" || ranked(r) || r.step == first_step)
                    .map(|r| (r.shards as f64, Some(r.rate / one(i, c))))
                    .collect(),
            })
            .collect();
        series.push(Series {
            name: "ideal".into(),
            points: a
                .shards
                .iter()
                .map(|&g| (g as f64, Some(g as f64)))
                .collect(),
        });
        let fig = Figure {
            caption: format!(
                "sharded tables on {backend}: {scheme}, 2^{} keys per shard at load {}",
                a.log2_keys, a.load
            ),
            x_label: "shards (devices)".into(),
            y_label: "speedup over one device's table".into(),
            x_axis: XAxis::Linear,
            y_range: None,
            cols: 1,
            panels: vec![Panel {
                title: "host data (Vec in, answers out)".into(),
                series,
            }],
        };
        write_svg(path, &fig)?;
    }
    Ok(if rows.iter().all(|r| r.correct) { 0 } else { 2 })
}
