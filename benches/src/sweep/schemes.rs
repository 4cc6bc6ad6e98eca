//! The sweep's schemes: their names (from [`for_each_scheme!`]) and the bucket size each runs with.

use hashtile::SchemeInfo;

/// The bucket size scheme `S` runs with: `--bucket`, unless the scheme has a single size (1CHT: 1).
pub(super) fn bucket_of<S: SchemeInfo>(asked: u32) -> Result<u32, String> {
    match S::BUCKET_SIZES {
        [only] => Ok(*only),
        sizes if sizes.contains(&asked) => Ok(asked),
        sizes => Err(format!(
            "{} does not support bucket size {asked} (supported: {sizes:?})",
            S::NAME
        )),
    }
}

/// Names of every scheme of [`for_each_scheme!`], in order.
pub(super) fn scheme_names() -> Vec<&'static str> {
    let mut v = Vec::new();
    for_each_scheme!(|S| {
        v.push(S::NAME);
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_sizes() {
        assert_eq!(bucket_of::<hashtile::Cht1>(16), Ok(1));
        assert_eq!(bucket_of::<hashtile::Bcht>(8), Ok(8));
        assert!(bucket_of::<hashtile::Bcht>(64).is_err());
        assert!(scheme_names().contains(&"bcht"));
    }
}
