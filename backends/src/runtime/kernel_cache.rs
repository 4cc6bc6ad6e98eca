//! Where compiled kernels persist between processes ([`KernelCache`]).
//!
//! CubeCL compiles a kernel at its first launch in every process (on CUDA: the kernel's IR to CUDA C++, then
//! NVRTC to PTX; on Vulkan: to SPIR-V), which makes a fresh process's first insert cost about 0.4 s.
//! CubeCL 0.10 can keep what it compiled in files (its runtime configuration's `compilation.cache`), keyed by
//! the kernel's type name and compile-time arguments, which is all a key can say: **not** the kernel's code.
//! A cache shared by two builds of a program would hand the second one the first one's kernels, so every
//! directory this module gives CubeCL is one build's: a subdirectory named by the running executable (its
//! path, size and modification time) and this library's version. Entries of other builds are never read;
//! subdirectories unused for [`STALE_AFTER`] are removed.
//!
//! The configuration is CubeCL's global one, fixed at the first client of any runtime: [`set_kernel_cache`]
//! must come before the first GPU table. Without a call, the first client installs [`KernelCache::Default`]
//! unless the program keeps a CubeCL configuration file (`cubecl.toml`, `CubeCL.toml`, or `burn.toml` with a
//! `cubecl` section, in the working directory or above it), which then rules as CubeCL documents.
//! Processes may share a directory: CubeCL locks each cache file while it reads or appends to it.

use cubecl::config::cache::CacheConfig;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
use cubecl::prelude::*;
use hashtile_core::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Where the kernels a process compiles are kept for the next process (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KernelCache {
    /// The user's cache directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux): `hashtile/kernels/<build>`.
    /// Where there is none, no cache.
    #[default]
    Default,
    /// `<dir>/<build>`: a directory of the program's own (created if missing).
    Dir(PathBuf),
    /// No cache: every process compiles each kernel at its first launch.
    Off,
}

/// A build's subdirectory that no process has opened for this long is removed by the next process that
/// configures a cache under the same root.
pub const STALE_AFTER: Duration = Duration::from_secs(14 * 24 * 3600);

/// The file whose modification time says when a build's subdirectory was last opened.
const LAST_USED: &str = "last-used";

/// Sets where compiled kernels are kept, for the whole process. Call it before the first GPU table (or any
/// CubeCL client) is made: CubeCL fixes its configuration then. Returns `InvalidConfig` when the configuration
/// is already fixed (by an earlier call, a table, or the program's own CubeCL use), leaving it as it is.
pub fn set_kernel_cache(cache: KernelCache) -> Result<()> {
    let mut state = CubeClRuntimeConfig::storage().lock();
    if state.is_some() {
        return Err(Error::InvalidConfig(
            "set_kernel_cache: CubeCL's configuration is already fixed (call it before the first GPU table)"
                .into(),
        ));
    }
    *state = Some(Arc::new(config_for(&cache)));
    Ok(())
}

/// The directory a cache setting gives this build's kernels (`None`: no cache). Useful to clear it or to
/// report it.
pub fn kernel_cache_dir(cache: &KernelCache) -> Option<PathBuf> {
    let root = match cache {
        KernelCache::Default => dirs::cache_dir()?.join("hashtile").join("kernels"),
        KernelCache::Dir(d) => d.clone(),
        KernelCache::Off => return None,
    };
    Some(root.join(build_name()))
}

/// The client of runtime `R` on `device`, made after the kernel cache is configured: every client the library
/// makes comes from here.
pub(crate) fn client<R: Runtime>(device: &R::Device) -> ComputeClient<R> {
    configure_default();
    R::client(device)
}

/// Installs [`KernelCache::Default`] unless CubeCL's configuration is fixed already or the program keeps a
/// CubeCL configuration file.
fn configure_default() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if has_cubecl_file() {
            return;
        }
        let mut state = CubeClRuntimeConfig::storage().lock();
        if state.is_none() {
            *state = Some(Arc::new(config_for(&KernelCache::Default)));
        }
    });
}

/// CubeCL's configuration as it would load it with no file (its environment overrides applied), with the
/// compilation cache set from `cache`.
fn config_for(cache: &KernelCache) -> CubeClRuntimeConfig {
    let mut config = CubeClRuntimeConfig::default().override_from_env();
    config.compilation.cache = kernel_cache_dir(cache).and_then(|dir| {
        // A directory that cannot be made means no cache, not a failing table.
        std::fs::create_dir_all(&dir).ok()?;
        mark_used(&dir);
        if let Some(root) = dir.parent() {
            let (root, keep) = (root.to_path_buf(), dir.clone());
            // Off the caller's path: a directory listing and a few metadata reads.
            std::thread::spawn(move || prune(&root, &keep));
        }
        Some(CacheConfig::File(dir))
    });
    config
}

/// The running build's subdirectory name: this library's version and a hash of the executable's path, size
/// and modification time (a rebuilt program gets a new directory; running it again finds its own).
fn build_name() -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Ok(exe) = std::env::current_exe() {
        exe.hash(&mut h);
        if let Ok(meta) = std::fs::metadata(&exe) {
            meta.len().hash(&mut h);
            if let Ok(t) = meta.modified() {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .hash(&mut h);
            }
        }
    }
    format!("v{}-{:016x}", env!("CARGO_PKG_VERSION"), h.finish())
}

/// Records that `dir` was opened now.
fn mark_used(dir: &Path) {
    let _ = std::fs::write(dir.join(LAST_USED), b"");
}

/// Removes the subdirectories of `root` other than `keep` that have not been opened for [`STALE_AFTER`]
/// (only those with a [`LAST_USED`] file: nothing this module did not make).
fn prune(root: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let now = SystemTime::now();
    for e in entries.flatten() {
        let path = e.path();
        if path == keep {
            continue;
        }
        let used = std::fs::metadata(path.join(LAST_USED)).and_then(|m| m.modified());
        if let Ok(t) = used
            && now.duration_since(t).unwrap_or_default() > STALE_AFTER
        {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// `true` when the working directory or one above it holds a file CubeCL reads its configuration from.
fn has_cubecl_file() -> bool {
    let Ok(mut dir) = std::env::current_dir() else {
        return false;
    };
    loop {
        if ["cubecl.toml", "CubeCL.toml"]
            .iter()
            .any(|f| dir.join(f).is_file())
        {
            return true;
        }
        for f in ["burn.toml", "Burn.toml"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(f))
                && text.lines().any(|l| l.trim() == "[cubecl]")
            {
                return true;
            }
        }
        if !dir.pop() {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_gets_its_own_subdirectory() {
        let a = kernel_cache_dir(&KernelCache::Dir("/x".into())).unwrap();
        assert_eq!(a.parent(), Some(Path::new("/x")));
        assert_eq!(a, kernel_cache_dir(&KernelCache::Dir("/x".into())).unwrap());
        assert!(kernel_cache_dir(&KernelCache::Off).is_none());
    }

    #[test]
    fn pruning_removes_only_stale_marked_directories() {
        let root = std::env::temp_dir().join(format!("hashtile-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (stale, fresh, foreign, keep) = (
            root.join("stale"),
            root.join("fresh"),
            root.join("foreign"),
            root.join("keep"),
        );
        for d in [&stale, &fresh, &foreign, &keep] {
            std::fs::create_dir_all(d).unwrap();
        }
        mark_used(&fresh);
        mark_used(&keep);
        let old = SystemTime::now() - STALE_AFTER - Duration::from_secs(60);
        let f = std::fs::File::create(stale.join(LAST_USED)).unwrap();
        f.set_modified(old).unwrap();
        prune(&root, &keep);
        assert!(!stale.exists());
        assert!(fresh.exists() && foreign.exists() && keep.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
