//! Lookups of a memstore agree with its order: the newest version of the
//! key asked for, never one of a key that shares its first bytes.

use super::Memstore;
use crate::table::EntryKind;

#[test]
fn a_lookup_finds_the_newest_version_of_exactly_its_key() {
    let ms = Memstore::new(1, 0);
    // Keys that share 16 bytes and more (the inline prefix), keys that are
    // prefixes of others, and the empty-suffix edge at 16 bytes.
    let keys: Vec<Vec<u8>> = vec![
        b"key:000000000001".to_vec(),
        b"key:0000000000010".to_vec(),
        b"key:000000000001\x00".to_vec(),
        b"key:00000000000".to_vec(),
        b"k".to_vec(),
        b"key:000000000002-long-tail-of-bytes".to_vec(),
    ];
    for (i, k) in keys.iter().enumerate() {
        for version in 1..=3u64 {
            let v = format!("{i}@{version}");
            ms.insert(
                k.clone(),
                10 * version + i as u64,
                true,
                EntryKind::Put,
                v.into_bytes(),
            );
        }
    }
    // A tombstone newest of one key.
    ms.insert(keys[4].clone(), 99, true, EntryKind::Delete, Vec::new());
    for (i, k) in keys.iter().enumerate() {
        let e = ms.get(k).expect("present");
        let (kind, value) = ms.get_value(k).expect("present");
        assert_eq!((e.kind, &e.value, &e.key), (kind, &value, k), "{i}");
        if i == 4 {
            assert_eq!((kind, e.lsn), (EntryKind::Delete, 99));
        } else {
            assert_eq!(value, format!("{i}@3").into_bytes(), "key {i}");
            assert_eq!(e.lsn, 30 + i as u64);
        }
    }
    for absent in [
        &b"key:0000000000011"[..],
        b"key:000000000000",
        b"",
        b"kf",
        b"key:000000000002",
    ] {
        assert!(
            ms.get(absent).is_none() && ms.get_value(absent).is_none(),
            "{absent:?}"
        );
    }
    // An unlogged write replaces the version it shares.
    ms.insert(
        keys[0].clone(),
        30,
        false,
        EntryKind::Put,
        b"unlogged".to_vec(),
    );
    assert_eq!(ms.get_value(&keys[0]).unwrap().1, b"unlogged".to_vec());
}
