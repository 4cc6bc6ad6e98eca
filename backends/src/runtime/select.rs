//! Backend choice: explicit, or `Auto` = CUDA if a GPU is there, else Vulkan if a hardware adapter is there,
//! else CPU. Software Vulkan adapters (lavapipe) are skipped by `Auto`: they run on the CPU, slower than the CPU
//! backend. Ask for `Backend::Vulkan` explicitly to use one.

#[allow(unused_imports)] // unused when no GPU runtime is compiled in
use super::kernel_cache::client;
use hashtile_core::Error;
use std::fmt;

/// Which backend a table runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Multi-threaded plain Rust; always available.
    Cpu,
    /// NVIDIA GPUs through CubeCL's CUDA runtime (feature `cuda`).
    Cuda,
    /// Vulkan through CubeCL's wgpu runtime with the SPIR-V compiler (feature `vulkan`).
    Vulkan,
}

/// What the caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendChoice {
    /// The first available of CUDA, Vulkan, CPU.
    #[default]
    Auto,
    /// Exactly this backend (an error if it is unavailable).
    Exactly(Backend),
}

impl Backend {
    /// The backend's name, as the command lines and errors spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Vulkan => "vulkan",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Exactly(Backend::Cpu)),
            "cuda" => Ok(BackendChoice::Exactly(Backend::Cuda)),
            "vulkan" | "wgpu" => Ok(BackendChoice::Exactly(Backend::Vulkan)),
            other => Err(format!(
                "unknown backend '{other}' (expected auto, cpu, cuda or vulkan)"
            )),
        }
    }
}

/// `true` if the backend is compiled in and a device answers.
pub fn is_available(backend: Backend) -> bool {
    match backend {
        Backend::Cpu => true,
        Backend::Cuda => cuda_available(),
        Backend::Vulkan => vulkan_available(),
    }
}

/// How many devices of `backend` answer: the CUDA driver's GPUs; 1 for an available Vulkan adapter (wgpu's
/// preferred one; a table may still name another discrete GPU by its ordinal); 1 for the CPU; 0 for a backend
/// that is not there.
pub fn device_count(backend: Backend) -> usize {
    if !is_available(backend) {
        return 0;
    }
    match backend {
        Backend::Cpu => 1,
        Backend::Vulkan => 1,
        Backend::Cuda => cuda_device_count(),
    }
}

fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        use cudarc::driver::result as cu;
        // CubeCL's client (made by `cuda_available`) has initialised the driver.
        cu::device::get_count()
            .map(|n| n.max(0) as usize)
            .unwrap_or(1)
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

/// Resolves a choice to a backend (`Auto`: CUDA, then Vulkan, then CPU).
pub fn resolve(choice: BackendChoice) -> Backend {
    match choice {
        BackendChoice::Exactly(b) => b,
        BackendChoice::Auto => {
            if is_available(Backend::Cuda) {
                Backend::Cuda
            } else if vulkan_hardware_available() {
                Backend::Vulkan
            } else {
                Backend::Cpu
            }
        }
    }
}

/// The typed error for a backend that is not compiled in or has no device, with how to get it.
pub(crate) fn unavailable(backend: Backend) -> Error {
    let (reason, how) = match backend {
        Backend::Cuda if !cfg!(feature = "cuda") => (
            "not compiled in".to_string(),
            "Build with the `cuda` feature (on by default).",
        ),
        Backend::Cuda => (
            "no CUDA driver or device answered".to_string(),
            "Install the NVIDIA driver and CUDA runtime and set LD_LIBRARY_PATH=/usr/local/cuda/lib64.",
        ),
        Backend::Vulkan if !cfg!(feature = "vulkan") => (
            "not compiled in".to_string(),
            "Build with the `vulkan` feature (on by default).",
        ),
        Backend::Vulkan => (
            "no Vulkan adapter answered".to_string(),
            "Install a Vulkan driver; on a machine without a GPU: apt-get install mesa-vulkan-drivers (lavapipe).",
        ),
        Backend::Cpu => ("unreachable".to_string(), ""),
    };
    Error::BackendUnavailable {
        backend: backend.name(),
        reason,
        how,
    }
}

/// Runs `f`, turning a panic (CubeCL panics when a driver or adapter is missing) into `None`, quietly.
fn quietly<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> Option<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(f).ok();
    std::panic::set_hook(hook);
    r
}

/// `true` if `device` of runtime `R` answers: its client (made under the kernel cache) reports a plane, and
/// making it did not panic (CubeCL panics when a driver or adapter is missing).
#[cfg(any(feature = "cuda", feature = "vulkan"))]
fn answers<R: cubecl::Runtime>(device: R::Device) -> bool
where
    R::Device: std::panic::UnwindSafe,
{
    quietly(move || client::<R>(&device).properties().hardware.plane_size_max > 0).unwrap_or(false)
}

/// `true` if the `cuda` feature is on and a CUDA device answers.
pub fn cuda_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| answers::<cubecl::cuda::CudaRuntime>(Default::default()))
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// `true` if the `vulkan` feature is on and a hardware (discrete or integrated) Vulkan GPU answers; software
/// adapters such as lavapipe do not count (on those the CPU backend is the better choice).
pub fn vulkan_hardware_available() -> bool {
    #[cfg(feature = "vulkan")]
    {
        use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            [WgpuDevice::DiscreteGpu(0), WgpuDevice::IntegratedGpu(0)]
                .into_iter()
                .any(answers::<WgpuRuntime>)
        })
    }
    #[cfg(not(feature = "vulkan"))]
    {
        false
    }
}

/// `true` if the `vulkan` feature is on and a Vulkan adapter answers.
pub fn vulkan_available() -> bool {
    #[cfg(feature = "vulkan")]
    {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| answers::<cubecl::wgpu::WgpuRuntime>(Default::default()))
    }
    #[cfg(not(feature = "vulkan"))]
    {
        false
    }
}
