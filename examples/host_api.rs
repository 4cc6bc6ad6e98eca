//! The host API on the default backend (CUDA, else Vulkan, else CPU): insert, find, contains, errors.

use hashtile::{Bcht, Error, HashTable, TableConfig};

fn main() -> Result<(), Error> {
    let n = 100_000u32;
    let mut table: HashTable<Bcht, u32, u32> =
        HashTable::new(TableConfig::for_keys(n as usize, 0.9))?;
    println!(
        "backend: {}, capacity {}",
        table.backend(),
        table.capacity()
    );
    let keys: Vec<u32> = (0..n)
        .map(hashtile::hash::fmix32)
        .filter(|&k| k != u32::MAX)
        .collect();
    let values: Vec<u32> = keys.iter().map(|k| k / 2).collect();
    table.insert(&keys, &values)?;
    println!("len {} load factor {:.3}", table.len(), table.load_factor());
    let found = table.find(&keys[..3])?;
    println!("first three: {found:?}");
    println!(
        "contains 0xdead_beef? {:?}",
        table.contains(&[0xdead_beef])?
    );
    match table.insert(&[u32::MAX], &[0]) {
        Err(e) => println!("rejected as expected: {e}"),
        Ok(()) => unreachable!(),
    }
    Ok(())
}
