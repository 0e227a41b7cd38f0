//! The engine with `flush.copies: 2`: every block file is written whole to
//! two data devices; a block bad in one copy is read from the other, and a
//! scrub rewrites it from there.

use std::collections::BTreeMap;

use stria::engine::Engine;
use stria::layout::manifest::FileRecord;

use stria::config::Durability;
use stria::device::sim::SimDevice;

use crate::engine_env::{key, model, open, options, value, Devices};
use crate::fill;

/// An engine on two data devices with two copies of each file and no
/// block cache (so every read goes to a device), holding `fill`'s keys in
/// several files.
fn two_copies(seed: u64) -> (Devices, stria::engine::EngineOptions) {
    let devs = Devices::new(1, 2, 64, &model(seed));
    let mut opts = options();
    opts.file_copies = 2;
    opts.block_cache = 0;
    opts.compact_at = 1000;
    (devs, opts)
}

fn check_all(e: &Engine<stria::device::sim::SimDevice>, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(e.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
    }
}

/// The copy of `f` on data device `dev`: its byte offset there.
fn copy_on(f: &FileRecord, dev: u32) -> u64 {
    f.places()
        .find(|&(d, _)| d == dev)
        .map(|(_, o)| o)
        .expect("a copy on each device")
}

#[test]
fn every_block_file_has_a_copy_on_each_data_device() {
    let (devs, opts) = two_copies(41);
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    let files = e.files();
    assert!(files.len() >= 3, "{files:?}");
    for f in &files {
        assert_eq!(f.copies.len(), 1, "{f:?}");
        assert_ne!(f.copies[0].0, f.device, "{f:?}");
    }
    // Both devices hold as much.
    let s = e.stats();
    assert_eq!(s.device_written[0], s.device_written[1], "{s:?}");
    e.close().unwrap();
    let (e, _) = open(&devs, &opts);
    assert_eq!(e.files(), files);
    check_all(&e, &model);
    assert_eq!(e.stats().copy_reads, 0);
    e.close().unwrap();
    // A compaction writes its file twice too, and frees both copies of its
    // inputs: what is free when it is done is what a fresh open finds free.
    let mut compacting = opts.clone();
    compacting.compact_at = 2;
    let (e, _) = open(&devs, &compacting);
    let model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while e.stats().compactions == 0 || e.stats().running_jobs > 0 {
        assert!(std::time::Instant::now() < deadline, "no compaction");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let free = e.stats().device_free;
    assert_eq!(free[0], free[1]);
    check_all(&e, &model);
    e.close().unwrap();
    let (e, _) = open(&devs, &compacting);
    assert!(e.files().iter().all(|f| f.copies.len() == 1));
    assert_eq!(e.stats().device_free, free);
    check_all(&e, &model);
    e.close().unwrap();
}

#[test]
fn a_block_bad_in_one_copy_is_read_from_the_other_and_a_scrub_rewrites_it() {
    let (devs, opts) = two_copies(42);
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    let files = e.files();
    // On device 0: a bit flipped at rest in one file's second device
    // block, another file's first device block unreadable, and a third
    // file's last device block (its footer) flipped. On device 1: a bit in
    // the first file's fourth device block, so each copy of that file is
    // bad somewhere, never both in the same place.
    let (a, b, c) = (&files[0], &files[1], &files[2]);
    devs.data[0].corrupt_at_rest(copy_on(a, 0) / 4096 + 1, 100, 2);
    devs.data[0].add_latent_errors(copy_on(b, 0) / 4096, 1);
    devs.data[0].corrupt_at_rest((copy_on(c, 0) + c.len) / 4096 - 1, 4090, 5);
    devs.data[1].corrupt_at_rest(copy_on(a, 1) / 4096 + 3, 7, 1);
    check_all(&e, &model);
    assert!(e.stats().copy_reads > 0);
    let report = e.scrub();
    assert!(report.bad.len() >= 4, "{report}");
    assert_eq!(report.unrepaired(), 0, "{report}");
    let text = report.to_string();
    assert!(text.contains("REPAIRED: block file"), "{report}");
    assert!(text.contains("repaired from the copy on data1"), "{report}");
    assert!(text.contains("repaired from the copy on data0"), "{report}");
    // The copies are whole again: a second scrub finds nothing, and a
    // restart opens and reads every file from either copy.
    let again = e.scrub();
    assert!(again.bad.is_empty(), "{again}");
    e.close().unwrap();
    devs.data[1].vanish();
    let err = Engine::open(devs.engine_devices(), opts.clone()).err();
    assert!(err.is_some(), "an open without data1");
}

#[test]
fn a_block_bad_in_both_copies_is_named_not_returned() {
    let (devs, opts) = two_copies(43);
    let (e, _) = open(&devs, &opts);
    fill(&e, 300, 200);
    e.flush_all().unwrap();
    let f = e.files()[0].clone();
    // The same data block bad in both copies.
    devs.data[0].corrupt_at_rest(copy_on(&f, 0) / 4096, 50, 3);
    devs.data[1].corrupt_at_rest(copy_on(&f, 1) / 4096, 50, 3);
    let report = e.scrub();
    assert_eq!(report.unrepaired(), 2, "{report}");
    assert!(
        report.to_string().contains("no other copy is good there"),
        "{report}"
    );
    // A read of its keys is an error naming a device, never a value.
    let min = e.files()[0].min_key.clone();
    let got = e.get(&min);
    assert!(got.is_err(), "{got:?}");
    e.close().unwrap();
}

#[test]
fn a_data_device_lost_under_writes_costs_nothing_and_a_new_one_restores_two_copies() {
    let (devs, opts) = two_copies(44);
    let (e, _) = open(&devs, &opts);
    let mut model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    let before = e.files();
    devs.data[1].vanish();
    check_all(&e, &model);
    // Writes go on: flushes write one copy, on data0, and say so.
    for i in 0..400u64 {
        let (k, v) = (key(1000 + i), value(i, 9, 300));
        e.put(&k, &v, Some(Durability::Write)).unwrap();
        model.insert(k, v);
    }
    e.flush_all().unwrap();
    assert_eq!(e.stats().data_lost, [false, true]);
    let after = e.files();
    let new: Vec<&FileRecord> = after.iter().filter(|f| !before.contains(f)).collect();
    assert!(!new.is_empty());
    assert!(
        new.iter().all(|f| f.device == 0 && f.copies.is_empty()),
        "{new:?}"
    );
    check_all(&e, &model);
    e.close().unwrap();
    // The lost device stops a start, named; a new blank one in its place
    // (what `stria device replace` leaves) starts, every key readable, and
    // a scrub and the compaction of files with one copy put two copies of
    // everything back.
    let mut devs = devs.reboot(3);
    let err = Engine::open(devs.engine_devices(), opts.clone())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("data1"), "{err}");
    devs.data[1] = SimDevice::new("data1", 4096, 64 * 256, 64, crate::engine_env::model(8));
    let (e, _) = open(&devs, &opts);
    check_all(&e, &model);
    // (The compactions at the start may have rewritten every file before
    // the scrub comes to it.)
    let report = e.scrub();
    assert_eq!(report.unrepaired(), 0, "{report}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while e.files().iter().any(|f| f.copies.len() != 1) || e.stats().running_jobs > 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", e.files());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(e.scrub().bad.is_empty());
    check_all(&e, &model);
    e.close().unwrap();
    // data0 can go now: everything is on data1 too.
    let devs = devs.reboot(4);
    let (e, _) = open(&devs, &opts);
    for f in e.files() {
        let (_, at) = f.places().find(|&(d, _)| d == 0).unwrap();
        devs.data[0].add_latent_errors(at / 4096, f.len / 4096);
    }
    check_all(&e, &model);
    e.close().unwrap();
}
