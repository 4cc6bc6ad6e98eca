//! Signed keys and values and user newtypes (issue 30 item 9) against a `HashMap` oracle on every backend present
//! (CI: the CPU and lavapipe): insert, find, contains, erase, insert-or-apply (add, and min / max over negative
//! values, which must order as signed), pairs; the all-ones key (`-1`) is the sentinel, refused with the table
//! unchanged, while all-ones values are stored like any other.

use hashtile::reduce::{Add, Max, Min};
use hashtile::{
    Backend, BackendChoice, Bcht, DoubleHashing, Element, Error, HashTable, Iht, Key, SchemeInfo,
    TableConfig, Value,
};
use hashtile_tests::backends::present_backends;
use std::collections::HashMap;

hashtile::element_newtype!(
    /// A user's key type: an id.
    pub struct UserId(pub u32);
);
hashtile::element_newtype!(
    /// A user's signed value type.
    pub struct Score(pub i64);
);

/// `n` distinct spread keys as bits (never all ones for the key's width), with signed spread values.
fn draws<K: Key, V: Value>(n: u32, salt: u32) -> Vec<(K, V)> {
    (0..n)
        .map(|i| {
            let h = hashtile::hash::fmix32(i ^ salt);
            let k = if K::BITS == 32 {
                h as u64
            } else {
                (h as u64) << 32 | hashtile::hash::fmix32(h) as u64
            };
            // Values spread over the whole signed range, negatives included, and -1 now and then.
            let v = if i % 97 == 0 {
                u64::MAX
            } else {
                (h as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            };
            (K::narrow(k), V::narrow(v))
        })
        .filter(|(k, _)| !k.is_sentinel())
        .collect()
}

fn check<S: SchemeInfo, K: Key, V: Value>(backend: Backend) {
    let name = format!(
        "{} {}->{} on {backend}",
        S::NAME,
        std::any::type_name::<K>(),
        std::any::type_name::<V>()
    );
    let cfg = TableConfig::for_keys(6000, 0.7).backend(BackendChoice::Exactly(backend));
    let mut t: HashTable<S, K, V> = HashTable::new(cfg).unwrap();
    let mut oracle: HashMap<K, V> = HashMap::new();
    let pairs = draws::<K, V>(4000, 3);
    let (ks, vs): (Vec<K>, Vec<V>) = pairs.iter().copied().unzip();
    t.insert(&ks, &vs).unwrap();
    oracle.extend(pairs.iter().copied());
    // The sentinel key of the type (all ones: -1 for signed keys) is refused, nothing changes.
    let mut bad = ks[..10].to_vec();
    bad[4] = K::EMPTY;
    assert!(
        matches!(
            t.insert(&bad, &vs[..10]),
            Err(Error::SentinelKey { index: 4 })
        ),
        "{name}"
    );
    assert_eq!(t.len(), oracle.len(), "{name}");
    // Min, max (signed order for signed values) and add over stored keys, each key three times.
    let again: Vec<K> = ks[..900]
        .iter()
        .chain(&ks[..900])
        .chain(&ks[..900])
        .copied()
        .collect();
    let inc: Vec<V> = (0..again.len())
        .map(|i| V::narrow((i as u64).wrapping_mul(0xdead_beef_1234_5679)))
        .collect();
    let fold = |oracle: &mut HashMap<K, V>, f: &dyn Fn(V, V) -> V| {
        for (k, v) in again.iter().zip(&inc) {
            let e = oracle.get_mut(k).unwrap();
            *e = f(*e, *v);
        }
    };
    t.insert_or_apply::<Min>(&again, &inc).unwrap();
    fold(&mut oracle, &|a, b| a.min(b));
    t.insert_or_apply::<Max>(&again[..1800], &inc[..1800])
        .unwrap();
    for (k, v) in again[..1800].iter().zip(&inc) {
        let e = oracle.get_mut(k).unwrap();
        *e = (*e).max(*v);
    }
    t.insert_or_apply::<Add>(&again, &inc).unwrap();
    fold(&mut oracle, &|a, b| {
        V::narrow(a.widen().wrapping_add(b.widen()))
    });
    // Erase a third, with repeats and absent keys.
    let absent: Vec<K> = draws::<K, V>(300, 99).into_iter().map(|p| p.0).collect();
    let gone: Vec<K> = ks[1000..2300]
        .iter()
        .chain(&ks[1000..1100])
        .chain(&absent)
        .copied()
        .collect();
    let erased = t.erase(&gone).unwrap();
    let mut want_erased = 0;
    for k in &gone {
        want_erased += oracle.remove(k).is_some() as usize;
    }
    assert_eq!(erased, want_erased, "{name}: erased");
    assert_eq!(t.len(), oracle.len(), "{name}: len");
    let all: Vec<K> = ks.iter().chain(&absent).copied().collect();
    let got = t.find(&all).unwrap();
    for (k, g) in all.iter().zip(&got) {
        assert_eq!(*g, oracle.get(k).copied(), "{name}: key {k}");
    }
    let has = t.contains(&all).unwrap();
    assert!(
        all.iter()
            .zip(&has)
            .all(|(k, h)| *h == oracle.contains_key(k)),
        "{name}: contains"
    );
    let mut stored = t.pairs().unwrap();
    stored.sort_unstable();
    let mut want: Vec<(K, V)> = oracle.into_iter().collect();
    want.sort_unstable();
    assert_eq!(stored, want, "{name}: pairs");
}

#[test]
fn signed_and_newtype_elements_match_the_oracle() {
    for backend in present_backends() {
        check::<Bcht, i32, i32>(backend);
        check::<DoubleHashing, i32, u32>(backend);
        check::<Bcht, UserId, i32>(backend);
        // 64-bit pairs: a stable scheme on GPUs (wide layout).
        check::<Iht, i64, i64>(backend);
        check::<Iht, UserId, Score>(backend);
        check::<Iht, i32, Score>(backend);
    }
}

#[test]
fn newtypes_are_their_inner_bits() {
    assert_eq!(UserId(7).widen(), 7);
    assert!(UserId(u32::MAX).is_sentinel());
    assert_eq!(Score(-1).widen(), u64::MAX);
    assert_eq!(Score::narrow(u64::MAX), Score(-1));
    assert_eq!(
        (-1i32).widen(),
        u32::MAX as u64,
        "32-bit elements zero-extend"
    );
    assert!(Score(-5) < Score(3), "a newtype orders as its inner type");
    const { assert!(<i64 as Element>::SIGNED) };
    const { assert!(!<UserId as Element>::SIGNED) };
}
