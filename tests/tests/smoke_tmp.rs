use hashtile::*;
#[test]
fn smoke() {
    for (be, n, lf, b) in [
        (Backend::Cpu, 50_000u32, 0.9, 16),
        (Backend::Vulkan, 64, 0.5, 8),
        (Backend::Vulkan, 1000, 0.5, 16),
        (Backend::Vulkan, 50_000, 0.9, 16),
    ] {
        let cfg = TableConfig::for_keys(n as usize, lf)
            .bucket_size(b)
            .backend(BackendChoice::Exactly(be));
        let mut t: HashTable<Bcht, u32, u32> = HashTable::new(cfg).unwrap();
        let keys: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2654435761) >> 1).collect();
        let vals: Vec<u32> = keys.iter().map(|k| k ^ 0x55).collect();
        t.insert(&keys, &vals).unwrap();
        let pairs = t.pairs().unwrap();
        let f = t.find(&keys).unwrap();
        let good = f
            .iter()
            .zip(&vals)
            .filter(|(a, b)| **a == Some(**b))
            .count();
        let none = f.iter().filter(|a| a.is_none()).count();
        let stored_ok = pairs.iter().filter(|(k, v)| *v == (k ^ 0x55)).count();
        let place = t.placement().unwrap();
        let misplaced = place
            .iter()
            .filter(|(k, bk)| !t.candidate_buckets(*k).contains(bk))
            .count();
        println!(
            "{be} n={n} b={b}: len {} stored {} stored_ok {stored_ok} misplaced {misplaced} find_good {good} none {none}",
            t.len(),
            pairs.len()
        );
    }
}
