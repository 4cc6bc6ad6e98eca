//! Memory estimates: the bytes a run needs at its peak ([`Footprint`]) against what the machine offers
//! ([`Capacity`]), checked before anything large is allocated, so that a size the machine cannot hold is refused
//! with one line instead of failing part-way.

use hashtile::Backend;
use std::path::Path;

/// Bytes a run needs at its peak: a lower bound of what the benchmark and its tables allocate (allocator
/// slack, the runtime's pools and the library's temporary maps are not counted), enough to refuse sizes the
/// machine cannot hold before allocating any of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Host bytes.
    pub host: u64,
    /// Device bytes (GPU backends).
    pub device: u64,
    /// The largest single device buffer.
    pub device_buffer: u64,
}

impl Footprint {
    /// What two phases need at once.
    pub fn plus(self, o: Self) -> Self {
        Self {
            host: self.host.saturating_add(o.host),
            device: self.device.saturating_add(o.device),
            device_buffer: self.device_buffer.max(o.device_buffer),
        }
    }
    /// The peak of two phases that run one after the other.
    pub fn max(self, o: Self) -> Self {
        Self {
            host: self.host.max(o.host),
            device: self.device.max(o.device),
            device_buffer: self.device_buffer.max(o.device_buffer),
        }
    }
    /// Host bytes only.
    pub fn host(host: u64) -> Self {
        Self {
            host,
            ..Self::default()
        }
    }
}

/// Bytes of a `HashMap` of `n` entries of `entry` bytes (hashbrown: a power-of-two number of buckets at most
/// 7/8 full, each the entry and one control byte).
pub fn hashmap_bytes(n: u64, entry: u64) -> u64 {
    let buckets = if n < 8 {
        8
    } else {
        (n.saturating_mul(8) / 7).next_power_of_two()
    };
    buckets.saturating_mul(entry + 1)
}

/// The key set of `n` keys shared by every measurement: `2n` keys, `n` values and the `HashMap` oracle.
pub fn keyset_footprint(n: usize) -> Footprint {
    let n = n as u64;
    Footprint::host(12 * n + hashmap_bytes(n, 8))
}

/// One `rates`-mode measurement (the `measure` / `measure_wide` functions) of `n` keys in `slots` slots.
pub fn measure_footprint(backend: Backend, wide: bool, n: usize, slots: u64) -> Footprint {
    let n = n as u64;
    match (backend, wide) {
        // Two tables alive between timed runs (16 bytes a slot), the insert's pair copy, the answers and the
        // queries of one find mix.
        (Backend::Cpu, false) => Footprint::host(32 * slots + 36 * n),
        // Plus the widened keys and values; wide answers and queries.
        (Backend::Cpu, true) => Footprint::host(32 * slots + 80 * n),
        // Host: queries and read-backs. Device: packed 8-byte slots, the stash (1/16 of the slots), keys,
        // values, answers, one find mix's queries and answers.
        (_, false) => Footprint {
            host: 12 * n,
            device: 8 * slots + slots / 2 + 20 * n,
            device_buffer: 8 * slots,
        },
        // Keys and values in parallel 8-byte arrays; the insert's failure buffer holds 2n words.
        (_, true) => Footprint {
            host: 76 * n,
            device: 16 * slots + 52 * n,
            device_buffer: (8 * slots).max(16 * n),
        },
    }
}

/// One `HashTable<_, u32, u32>` of `n` keys in `slots` slots with one find of all keys (the sweep's probe and
/// success-rate builds).
pub fn host_api_footprint(backend: Backend, n: usize, slots: u64) -> Footprint {
    let n = n as u64;
    match backend {
        Backend::Cpu => Footprint::host(16 * slots + 28 * n),
        _ => Footprint {
            host: 28 * n,
            device: 8 * slots + slots / 2 + 16 * n,
            device_buffer: 8 * slots,
        },
    }
}

/// What the machine offers: host bytes available, and for a GPU backend the largest buffer the runtime
/// allocates and (where known) the device's total memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Host bytes available (`None`: unknown, not checked).
    pub host: Option<u64>,
    /// Largest device buffer (`None`: unknown or not a GPU run).
    pub device_buffer: Option<u64>,
    /// Total device memory (`None`: unknown or not a GPU run).
    pub device: Option<u64>,
}

impl Capacity {
    /// This machine, for a run on `backend` (which must be available).
    pub fn of_machine(backend: Backend) -> Self {
        let (device_buffer, device) = device_limits(backend);
        Self {
            host: host_available(),
            device_buffer,
            device,
        }
    }
}

/// `bytes` in GiB (or MiB below 1 GiB), for messages.
fn human(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (MIB * 1024.0))
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

/// An error if `need` does not fit `have`; `what` names the run in the message.
pub fn check_footprint(what: &str, need: Footprint, have: Capacity) -> Result<(), String> {
    let hint = "use fewer keys or higher load factors";
    if let Some(h) = have.host.filter(|&h| need.host > h) {
        return Err(format!(
            "{what} needs at least {} of host memory, but only {} is available; {hint}",
            human(need.host),
            human(h)
        ));
    }
    if let Some(b) = have.device_buffer.filter(|&b| need.device_buffer > b) {
        return Err(format!(
            "{what} needs a device buffer of {}, but the device allocates at most {} at once; {hint}",
            human(need.device_buffer),
            human(b)
        ));
    }
    if let Some(d) = have.device.filter(|&d| need.device > d) {
        return Err(format!(
            "{what} needs at least {} of device memory, but the device has {}; {hint}",
            human(need.device),
            human(d)
        ));
    }
    Ok(())
}

/// Host bytes available to this process: `MemAvailable` of `/proc/meminfo`, capped by a cgroup (v2) memory
/// limit; `None` where neither can be read (not Linux).
pub fn host_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_available(&s));
    let cgroup = cgroup_headroom(Path::new("/sys/fs/cgroup"));
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb.saturating_mul(1024))
    })
}

/// `memory.max - memory.current` of the cgroup v2 mounted at `root`; `None` without a limit.
fn cgroup_headroom(root: &Path) -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(root.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?;
    let current: u64 = read("memory.current")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// The largest buffer the backend's runtime allocates and the device's total memory, where known. CubeCL
/// refuses a buffer larger than its `max_page_size`; its CUDA runtime sets that to a quarter of the device's
/// memory (`cuDeviceTotalMem`), so the total is known there; on Vulkan only the buffer limit is.
fn device_limits(backend: Backend) -> (Option<u64>, Option<u64>) {
    fn page<R: hashtile::cubecl::Runtime>() -> u64 {
        R::client(&Default::default())
            .properties()
            .memory
            .max_page_size
    }
    match backend {
        Backend::Cpu => (None, None),
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            let p = page::<hashtile::cubecl::cuda::CudaRuntime>();
            (Some(p), Some(p.saturating_mul(4)))
        }
        #[cfg(feature = "vulkan")]
        Backend::Vulkan => (Some(page::<hashtile::cubecl::wgpu::WgpuRuntime>()), None),
        #[allow(unreachable_patterns)]
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::table_slots;

    #[test]
    fn footprints_and_limits() {
        assert_eq!(
            mem_available("MemTotal: 10 kB\nMemAvailable:   2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(mem_available("MemTotal: 10 kB\n"), None);
        let n = 1 << 20;
        let slots = table_slots("t", n, 0.8, 16).unwrap();
        assert_eq!(slots, 1_310_720);
        let need = keyset_footprint(n).plus(measure_footprint(Backend::Cpu, false, n, slots));
        assert!(need.host > 32 * slots && need.device == 0);
        let small = Capacity {
            host: Some(need.host - 1),
            ..Capacity::default()
        };
        assert!(
            check_footprint("t", need, small)
                .unwrap_err()
                .contains("host memory")
        );
        let big = Capacity {
            host: Some(need.host),
            ..Capacity::default()
        };
        assert_eq!(check_footprint("t", need, big), Ok(()));
        let gpu = measure_footprint(Backend::Cuda, false, n, slots);
        let tight = Capacity {
            host: None,
            device_buffer: Some(gpu.device_buffer - 1),
            device: None,
        };
        assert!(
            check_footprint("t", gpu, tight)
                .unwrap_err()
                .contains("device buffer")
        );
        // 2^30 keys cannot fit in 2^32 slots below load 0.25.
        assert!(table_slots("t", 1 << 30, 0.2, 16).is_err());
        assert!(table_slots("t", 1 << 30, 0.5, 16).is_ok());
    }
}
