//! The device-data rows of `hashtile-bench sharded` (a leaf under the mode): every GPU holds its own slice of
//! the batch, as a multi-GPU program does, and `ShardedTable::insert_device` / `find_device` run on 1, 2, 4,
//! ... GPUs against one GPU's `GpuTable` device-resident `insert_device` / `find_device` of one slice. Each
//! sharded call also reports its exchange's rate (`last_device_phases`) beside the transport's own all-to-all
//! of the same bytes (`exchange_ceiling`). Every answer is read back and checked.

use crate::common::median;
use hashtile::cubecl::prelude::*;
use hashtile::gpu::transfer::HostTransfer;
use hashtile::gpu::{GpuOptions, GpuTable};
use hashtile::{
    Backend, BackendChoice, DevicePhases, HashFamily, SchemeInfo, ShardedConfig, ShardedTable,
    TableConfig, Transport, default_bucket_size_of,
};
use std::time::Instant;

/// One measured device-data call (`shards` 0: one GPU's `GpuTable`).
pub struct DeviceRow {
    pub shards: usize,
    pub call: &'static str,
    /// M keys/s over all slices.
    pub rate: f64,
    pub correct: bool,
    pub transport: &'static str,
    /// The exchange's GB/s in the call and the transport's all-to-all of the same bytes.
    pub exchange: Option<(f64, f64)>,
    /// Keys of each slice per exchange step (0: one GPU's table).
    pub step: usize,
    /// Where the last timed call's time went.
    pub phases: Option<DevicePhases>,
}

/// The rows for `shards` counts (those past `devices` skipped) and exchange `steps` at `per` keys per slice:
/// `keys` holds at least `per * max(shards)` distinct keys.
#[allow(clippy::too_many_arguments)]
pub fn rows<S: SchemeInfo>(
    backend: Backend,
    devices: usize,
    shards: &[usize],
    steps: &[usize],
    per: usize,
    load: f64,
    runs: usize,
    keys: &[u32],
) -> Result<Vec<DeviceRow>, String> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => on::<S, hashtile::cubecl::cuda::CudaRuntime>(
            backend, devices, shards, steps, per, load, runs, keys,
        ),
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => on::<S, hashtile::cubecl::wgpu::WgpuRuntime>(
            backend, devices, shards, steps, per, load, runs, keys,
        ),
        b => return Err(format!("{b}: no device-data calls")),
    }
    .map_err(|e| e.to_string())
}

/// GB/s of `bytes` in `secs` (NaN when nothing was timed: one shard moves nothing).
fn gb_s(bytes: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / secs / 1e9
    } else {
        f64::NAN
    }
}

/// The value every sharded row stores with key `k` (so that answers are checked without a table of them).
pub fn value_of(k: u32) -> u32 {
    k.rotate_left(7) ^ 0x5a5a
}

#[allow(clippy::too_many_arguments)]
fn on<S: SchemeInfo, R: HostTransfer>(
    backend: Backend,
    devices: usize,
    shards: &[usize],
    steps: &[usize],
    per: usize,
    load: f64,
    runs: usize,
    keys: &[u32],
) -> hashtile::Result<Vec<DeviceRow>> {
    let mut out = Vec::new();
    // One GPU's table: the reference.
    {
        let cfg = TableConfig::for_keys(per, load);
        let b = default_bucket_size_of::<S>(backend);
        let family = HashFamily::new(cfg.seed);
        let opts = GpuOptions {
            use_cas: true,
            plain_reads: backend == Backend::Cuda,
        };
        let nb = cfg.capacity.div_ceil(b as usize) as u32;
        let mut t = GpuTable::<R, S>::new(
            &Default::default(),
            nb,
            b,
            family,
            S::default_params(b),
            opts,
        )?;
        let k = &keys[..per];
        let v: Vec<u32> = k.iter().map(|&k| value_of(k)).collect();
        let kh = t.upload(k);
        let vh = t.upload(&v);
        let mut rates = Vec::new();
        let mut ok = true;
        for run in 0..=runs {
            t.reset(family)?;
            t.sync()?;
            let t0 = Instant::now();
            let lost = t.insert_device(&kh, &vh, per)?;
            let dt = t0.elapsed().as_secs_f64();
            ok &= lost.pairs.is_empty() && t.len() == per;
            if run > 0 {
                rates.push(per as f64 / dt / 1e6);
            }
        }
        out.push(DeviceRow {
            shards: 0,
            call: "insert_device",
            rate: median(&mut rates),
            correct: ok,
            transport: "none",
            exchange: None,
            step: 0,
            phases: None,
        });
        let found = t.alloc_u32(per);
        let answers = t.alloc_u32(per);
        let mut rates = Vec::new();
        for run in 0..=runs {
            let t0 = Instant::now();
            t.find_device(&kh, &answers, Some(&found), per);
            t.sync()?;
            if run > 0 {
                rates.push(per as f64 / t0.elapsed().as_secs_f64() / 1e6);
            }
        }
        let ok = t.read_u32(answers) == v && t.read_u32(found).iter().all(|&f| f == 1);
        out.push(DeviceRow {
            shards: 0,
            call: "find_device",
            rate: median(&mut rates),
            correct: ok,
            transport: "none",
            exchange: None,
            step: 0,
            phases: None,
        });
        eprintln!(
            "sharded: one GPU: device insert {:.0}, find {:.0} M keys/s",
            out[0].rate, out[1].rate
        );
    }
    for (&g, &step) in shards
        .iter()
        .flat_map(|g| steps.iter().map(move |s| (g, s)))
    {
        if g > devices {
            continue;
        }
        let n = per * g;
        let table = TableConfig::for_keys(n, load).backend(BackendChoice::Exactly(backend));
        let config = ShardedConfig::new(table)
            .devices((0..g).collect::<Vec<_>>())
            .exchange_step(step);
        let mut t: ShardedTable<S, u32, u32> = ShardedTable::new(config)?;
        let transport = match t.transport() {
            Transport::Nccl => "nccl",
            Transport::Host => "host",
            Transport::Local => "none",
        };
        let clients: Vec<ComputeClient<R>> = (0..g)
            .map(|i| t.client::<R>(i))
            .collect::<hashtile::Result<_>>()?;
        let slices: Vec<&[u32]> = (0..g).map(|i| &keys[i * per..(i + 1) * per]).collect();
        let kh: Vec<_> = slices
            .iter()
            .zip(&clients)
            .map(|(s, c)| c.create_from_slice(u32::as_bytes(s)))
            .collect();
        let vh: Vec<_> = slices
            .iter()
            .zip(&clients)
            .map(|(s, c)| {
                c.create_from_slice(u32::as_bytes(
                    &s.iter().map(|&k| value_of(k)).collect::<Vec<_>>(),
                ))
            })
            .collect();
        let lens = vec![per; g];
        let mut rates = Vec::new();
        let mut exchange = Vec::new();
        let mut phases = DevicePhases::default();
        for run in 0..=runs {
            t.clear()?;
            let t0 = Instant::now();
            t.insert_device::<R>(&kh, &vh, &lens)?;
            let dt = t0.elapsed().as_secs_f64();
            let p = t.last_device_phases();
            if run > 0 {
                rates.push(n as f64 / dt / 1e6);
                exchange.push(gb_s(p.exchange_bytes, p.exchange_ms * 1e-3));
                phases = p;
            }
        }
        // The insert's exchange moves keys and values: two all-to-alls of 4 bytes per key each.
        let (secs, bytes) = t.exchange_ceiling::<R>(per, runs)?;
        let ceiling = gb_s(bytes, secs);
        let ok = t.len() == n;
        out.push(DeviceRow {
            shards: g,
            call: "insert_device",
            rate: median(&mut rates),
            correct: ok,
            transport,
            exchange: Some((median(&mut exchange), ceiling)),
            step,
            phases: Some(phases),
        });
        let answers: Vec<_> = clients.iter().map(|c| c.empty(per * 4)).collect();
        let found: Vec<_> = clients.iter().map(|c| c.empty(per * 4)).collect();
        let mut rates = Vec::new();
        let mut exchange = Vec::new();
        for run in 0..=runs {
            let t0 = Instant::now();
            t.find_device::<R>(&kh, &lens, &answers, &found)?;
            let dt = t0.elapsed().as_secs_f64();
            let p = t.last_device_phases();
            if run > 0 {
                rates.push(n as f64 / dt / 1e6);
                exchange.push(gb_s(p.exchange_bytes, p.exchange_ms * 1e-3));
                phases = p;
            }
        }
        let mut ok = true;
        for i in 0..g {
            let got = u32::from_bytes(
                &clients[i]
                    .read_one(answers[i].clone())
                    .map_err(|e| hashtile::Error::Device(format!("{e:?}")))?,
            )
            .to_vec();
            let has = u32::from_bytes(
                &clients[i]
                    .read_one(found[i].clone())
                    .map_err(|e| hashtile::Error::Device(format!("{e:?}")))?,
            )
            .to_vec();
            ok &= has.iter().all(|&f| f == 1)
                && got.iter().zip(slices[i]).all(|(&v, &k)| v == value_of(k));
        }
        out.push(DeviceRow {
            shards: g,
            call: "find_device",
            rate: median(&mut rates),
            correct: ok,
            transport,
            exchange: Some((median(&mut exchange), ceiling)),
            step,
            phases: Some(phases),
        });
        let (ins, fnd) = (&out[out.len() - 2], &out[out.len() - 1]);
        let ms = |r: &DeviceRow| {
            let p = r.phases.unwrap_or_default();
            format!(
                "route {:.2} + steps {:.2} ms ({} steps, exchange {:.2} ms)",
                p.route_ms, p.steps_ms, p.steps, p.exchange_ms
            )
        };
        eprintln!(
            "sharded: {g} GPU(s) over {transport}, steps of {step} keys: device insert {:.0} M keys/s [{}], find {:.0} [{}]; exchange ceiling {ceiling:.0} GB/s",
            ins.rate,
            ms(ins),
            fnd.rate,
            ms(fnd)
        );
    }
    Ok(out)
}
