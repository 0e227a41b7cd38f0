//! Ranges over several block files and memstores: what a scan reads, and
//! that it returns the newest version of each key.

use std::collections::BTreeMap;

use super::engine_env::{model, open, options, value, Devices};
use stria::config::Durability;
use stria::device::sim::SimDevice;
use stria::engine::Engine;

/// Keys of one region (all below the first split key, "g"), in order.
fn k(i: u64) -> Vec<u8> {
    format!("a{i:06}").into_bytes()
}

fn reads(e: &Engine<SimDevice>) -> u64 {
    e.stats().device_reads.iter().map(|r| r.0).sum()
}

#[test]
fn a_scan_reads_no_block_file_its_range_ends_before() {
    let devs = Devices::new(1, 1, 64, &model(11));
    let mut opts = options();
    opts.block_cache = 0; // every block a scan reads is a device read
    let (e, _) = open(&devs, &opts);
    // Three block files, each a stretch of the region's keys: keys written
    // in order (a sorted set's scores, a list's positions, a stream's IDs).
    for file in 0..3u64 {
        for i in file * 300..(file + 1) * 300 {
            e.put(&k(i), &value(i, 0, 20), Some(Durability::Write))
                .unwrap();
        }
        e.flush_all().unwrap();
    }
    assert_eq!(e.stats().region_files[0], 3);
    let keys = |got: Vec<(Vec<u8>, Vec<u8>)>| got.into_iter().map(|(k, _)| k).collect::<Vec<_>>();

    // Ten keys of the first file: one block of it, none of the others,
    // though their keys are in the scan's range (it has no end).
    let before = reads(&e);
    let got = e.scan(&k(10), None, 10).unwrap();
    assert_eq!(keys(got), (10..20).map(k).collect::<Vec<_>>());
    assert_eq!(reads(&e) - before, 1);

    // Across the first two: a block of each.
    let before = reads(&e);
    let got = e.scan(&k(295), None, 10).unwrap();
    assert_eq!(keys(got), (295..305).map(k).collect::<Vec<_>>());
    assert_eq!(reads(&e) - before, 2);

    // In the last: the others end before its start, and are not read.
    let before = reads(&e);
    let got = e.scan(&k(700), Some(&k(705)), 100).unwrap();
    assert_eq!(keys(got), (700..705).map(k).collect::<Vec<_>>());
    assert_eq!(reads(&e) - before, 1);
    e.close().unwrap();
}

#[test]
fn ranges_over_files_and_memstores_return_the_newest_versions() {
    let devs = Devices::new(1, 1, 64, &model(12));
    let (e, _) = open(&devs, &options());
    let mut seed = 3u64;
    let mut rnd = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut want = BTreeMap::new();
    // Four rounds, three of them flushed: each writes a stretch of new
    // keys in order, then rewrites and deletes older ones at random.
    for round in 0..4u64 {
        for i in round * 100..(round + 1) * 100 {
            let v = value(i, round, 30);
            e.put(&k(i), &v, Some(Durability::Write)).unwrap();
            want.insert(k(i), v);
        }
        for _ in 0..60 {
            let i = rnd((round + 1) * 100);
            if rnd(3) == 0 {
                e.delete(&k(i), Some(Durability::Write)).unwrap();
                want.remove(&k(i));
            } else {
                let v = value(i, round + 10, 30);
                e.put(&k(i), &v, Some(Durability::Write)).unwrap();
                want.insert(k(i), v);
            }
        }
        if round < 3 {
            e.flush_all().unwrap();
        }
    }
    assert_eq!(e.stats().region_files[0], 3);
    for _ in 0..400 {
        let from = k(rnd(420));
        let to = (rnd(2) == 0).then(|| k(rnd(420)));
        let limit = 1 + rnd(60) as usize;
        if to.as_ref().is_some_and(|to| *to <= from) {
            continue;
        }
        let got = e.scan(&from, to.as_deref(), limit).unwrap();
        let expect: Vec<(Vec<u8>, Vec<u8>)> = want
            .range(from.clone()..)
            .take_while(|(key, _)| to.as_ref().is_none_or(|to| *key < to))
            .take(limit)
            .map(|(key, v)| (key.clone(), v.clone()))
            .collect();
        assert_eq!(got, expect, "from {from:?} to {to:?} limit {limit}");
    }
    e.close().unwrap();
}

#[test]
fn a_short_range_over_several_blocks_is_read_from_the_cache_again() {
    let devs = Devices::new(1, 1, 64, &model(13));
    let (e, _) = open(&devs, &options());
    for i in 0..1000 {
        e.put(&k(i), &value(i, 0, 20), Some(Durability::Write))
            .unwrap();
    }
    e.flush_all().unwrap();
    // 250 keys of about 40 bytes: three blocks of 4 KiB or so, all of
    // them cached by the first read.
    let first = reads(&e);
    assert_eq!(e.scan(&k(500), None, 250).unwrap().len(), 250);
    let blocks = reads(&e) - first;
    assert!((2..=4).contains(&blocks), "{blocks} blocks read");
    let again = reads(&e);
    assert_eq!(e.scan(&k(500), None, 250).unwrap().len(), 250);
    assert_eq!(reads(&e), again, "the second read found every block cached");
    e.close().unwrap();
}
