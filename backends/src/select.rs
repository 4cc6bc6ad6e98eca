//! Backend choice: explicit, or `Auto` = CUDA if a GPU is there, else Vulkan if a hardware adapter is there,
//! else CPU. Software Vulkan adapters (lavapipe) are skipped by `Auto`: they run on the CPU, slower than the CPU
//! backend. Ask for `Backend::Vulkan` explicitly to use one.

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
        Backend::Cuda => crate::gpu::cuda_available(),
        Backend::Vulkan => crate::gpu::vulkan_available(),
    }
}

/// Resolves a choice to a backend (`Auto`: CUDA, then Vulkan, then CPU).
pub fn resolve(choice: BackendChoice) -> Backend {
    match choice {
        BackendChoice::Exactly(b) => b,
        BackendChoice::Auto => {
            if is_available(Backend::Cuda) {
                Backend::Cuda
            } else if crate::gpu::vulkan_hardware_available() {
                Backend::Vulkan
            } else {
                Backend::Cpu
            }
        }
    }
}
