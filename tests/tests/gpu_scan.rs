//! The device exclusive scan (`hashtile::gpu::scan`) against a host prefix sum: sizes around every block and
//! level boundary (one block is 256 words; a second level starts past 256 blocks), zero and one included; and
//! its 64-bit sums (`total_u64`, `squared_steps_u64`) against host sums.

use hashtile::Backend;
use hashtile::cubecl::prelude::*;
use hashtile::gpu::scan::{exclusive_scan, squared_steps_u64, total_u64};
use hashtile_tests::backends::present;
use rand::{Rng, SeedableRng, rngs::StdRng};

fn scan_matches_host<R: Runtime>(backend: Backend, client: ComputeClient<R>) {
    if !present(backend) {
        return;
    }
    let mut rng = StdRng::seed_from_u64(17);
    for n in [
        0usize,
        1,
        2,
        255,
        256,
        257,
        256 * 256 - 1,
        256 * 256,
        256 * 256 + 1,
        256 * 256 * 3 + 77,
    ] {
        let input: Vec<u32> = (0..n).map(|_| rng.random_range(0..100)).collect();
        let h = client.create_from_slice(u32::as_bytes(if n == 0 { &[0] } else { &input }));
        let out = exclusive_scan(&client, &h, n);
        let got = u32::from_bytes(&client.read_one_unchecked(out)).to_vec();
        let mut want = Vec::with_capacity(n + 1);
        let mut sum = 0u32;
        for &x in &input {
            want.push(sum);
            sum += x;
        }
        want.push(sum);
        assert_eq!(&got[..n + 1], &want[..], "{backend}: n = {n}");
        // The 64-bit sums over the same words: the total, and the squared steps of the scan (its ranges).
        let total: u64 = input.iter().map(|&x| x as u64).sum();
        assert_eq!(
            total_u64(&client, &h, n),
            total,
            "{backend}: total, n = {n}"
        );
        let squares: u64 = input.iter().map(|&x| (x as u64) * (x as u64)).sum();
        let scanned = client.create_from_slice(u32::as_bytes(&want));
        assert_eq!(
            squared_steps_u64(&client, &scanned, n),
            squares,
            "{backend}: squared steps, n = {n}"
        );
    }
    // Totals past 32 bits do not wrap.
    let big = vec![u32::MAX; 5000];
    let h = client.create_from_slice(u32::as_bytes(&big));
    assert_eq!(total_u64(&client, &h, big.len()), 5000 * u32::MAX as u64);
}

#[test]
fn vulkan_scan_matches_host() {
    if present(Backend::Vulkan) {
        let client = hashtile::cubecl::wgpu::WgpuRuntime::client(&Default::default());
        scan_matches_host(Backend::Vulkan, client);
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_scan_matches_host() {
    if present(Backend::Cuda) {
        let client = hashtile::cubecl::cuda::CudaRuntime::client(&Default::default());
        scan_matches_host(Backend::Cuda, client);
    }
}
