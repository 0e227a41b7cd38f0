//! The engine on simulated devices: reads and writes, flushes to block
//! files, restart, limits, compaction, bad input, corruption.

#[path = "../common/engine_env.rs"]
mod engine_env;

mod copies;
mod file_copies;
mod purge;
mod ranges;
mod scrubber;

use std::collections::BTreeMap;
use std::sync::Arc;

use engine_env::{key, model, open, options, value, Devices};
use stria::config::{Durability, SimConfig};
use stria::device::{wait, Device, Request};
use stria::engine::EngineError;

#[test]
fn puts_deletes_and_scans_see_the_newest_version() {
    let devs = Devices::new(2, 1, 64, &model(1));
    let (e, report) = open(&devs, &options());
    assert!(report.created, "{report}");
    e.put(b"apple", b"1", None).unwrap();
    e.put(b"hat", b"2", Some(Durability::Write)).unwrap();
    e.put(b"queue", b"3", Some(Durability::Async)).unwrap();
    e.put(b"apple", b"4", Some(Durability::None)).unwrap();
    e.delete(b"hat", None).unwrap();
    assert_eq!(e.get(b"apple").unwrap(), Some(b"4".to_vec()));
    assert_eq!(e.get(b"hat").unwrap(), None);
    assert_eq!(e.get(b"nothing").unwrap(), None);
    e.put_batch(&[(b"b", b"5"), (b"zz", b"6"), (b"h", b"7")], None)
        .unwrap();
    let all = e.scan(b"", None, 100).unwrap();
    let keys: Vec<&[u8]> = all.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, vec![&b"apple"[..], b"b", b"h", b"queue", b"zz"]);
    assert_eq!(e.scan(b"b", Some(b"r"), 100).unwrap().len(), 3);
    assert_eq!(e.scan(b"", None, 2).unwrap().len(), 2);
    e.close().unwrap();
}

/// A `none` write inserted after a later write of its key was
/// acknowledged and inserted: the later write stays the newest. The `none`
/// write's version is taken when it is admitted; taken at its insert, it
/// was the later write's LSN, and replaced it.
#[test]
fn a_late_insert_of_a_none_write_never_replaces_a_later_write() {
    let devs = Devices::new(1, 1, 64, &model(1));
    let (e, _) = open(&devs, &options());
    e.put(b"k", b"before", Some(Durability::Sync)).unwrap();
    let none = e
        .submit(
            &[(b"k".as_slice(), Some(b"A".as_slice()))],
            Some(Durability::None),
        )
        .unwrap();
    let later = e
        .submit(
            &[(b"k".as_slice(), Some(b"B".as_slice()))],
            Some(Durability::Async),
        )
        .unwrap();
    later.wait().unwrap();
    none.wait().unwrap();
    assert_eq!(e.get(b"k").unwrap(), Some(b"B".to_vec()));
    e.close().unwrap();
}

/// A run never gives a file an id that a run before it may have given:
/// a file written and never recorded (a crash before its manifest edit)
/// may lie where the next run writes one, and a block of it left under a
/// lost write would pass the checks of a new file with its id and place.
#[test]
fn file_ids_never_repeat_across_runs() {
    let devs = Devices::new(1, 1, 64, &model(3));
    let mut ids = Vec::new();
    let mut devs = devs;
    for run in 0..3u64 {
        let (e, _) = open(&devs, &options());
        e.put(&key(run), &value(run, 0, 100), Some(Durability::Sync))
            .unwrap();
        e.flush_all().unwrap();
        let newest = e.files().iter().map(|f| f.id).max().unwrap();
        if let Some(&before) = ids.last() {
            // Far above: the ids the crashed run might have used unrecorded.
            assert!(
                newest > before + (1 << 20),
                "run {run}: id {newest} after {before}"
            );
        }
        ids.push(newest);
        devs.cut_power();
        e.abandon();
        devs = devs.reboot(run);
    }
}

/// Writes `n` keys (three versions of each, some deleted) and returns the model.
fn fill(
    e: &stria::engine::Engine<stria::device::sim::SimDevice>,
    n: u64,
    len: usize,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for version in 0..3 {
        for i in 0..n {
            if version == 2 && i % 7 == 0 {
                e.delete(&key(i), Some(Durability::Write)).unwrap();
                model.remove(&key(i));
            } else {
                let v = value(i, version, len);
                e.put(&key(i), &v, Some(Durability::Write)).unwrap();
                model.insert(key(i), v);
            }
        }
    }
    model
}

fn check(
    e: &stria::engine::Engine<stria::device::sim::SimDevice>,
    n: u64,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    for i in 0..n {
        assert_eq!(
            e.get(&key(i)).unwrap().as_ref(),
            model.get(&key(i)),
            "key {i}"
        );
    }
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> =
        e.scan(b"", None, usize::MAX).unwrap().into_iter().collect();
    assert_eq!(&scanned, model);
}

#[test]
fn flushed_block_files_serve_reads_and_survive_a_restart() {
    let devs = Devices::new(2, 2, 64, &model(2));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 600, 200);
    e.flush_all().unwrap();
    let s = e.stats();
    assert!(s.flushes >= 3, "{s:?}");
    assert!(s.region_files.iter().all(|&f| f >= 1), "{s:?}");
    assert!(
        s.device_written.iter().all(|&b| b > 0),
        "flushes use both data devices: {s:?}"
    );
    assert_eq!(s.region_bytes.iter().sum::<u64>(), 0, "{s:?}");
    check(&e, 600, &model);
    e.close().unwrap();
    let (e, report) = open(&devs, &opts);
    assert!(!report.created);
    assert_eq!(report.replayed, 0, "everything was flushed: {report}");
    assert!(report.files >= 3, "{report}");
    check(&e, 600, &model);
    // More writes after the restart, left in the memstores, replayed at the next.
    e.put(&key(1), b"after", None).unwrap();
    e.close().unwrap();
    let (e, report) = open(&devs, &opts);
    assert_eq!(report.replayed, 1, "{report}");
    assert_eq!(e.get(&key(1)).unwrap(), Some(b"after".to_vec()));
    e.close().unwrap();
}

#[test]
fn a_get_reads_at_most_one_data_block() {
    let devs = Devices::new(1, 1, 64, &model(3));
    // Without a block cache: each absent key below falls in the block the
    // get before it cached, and the bloom filters would go untested.
    let mut opts = options();
    opts.block_cache = 0;
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 900, 100);
    e.flush_all().unwrap();
    let reads =
        |e: &stria::engine::Engine<_>| -> u64 { e.stats().device_reads.iter().map(|r| r.0).sum() };
    let mut absent_reads = 0;
    for i in 0..900 {
        let before = reads(&e);
        let got = e.get(&key(i)).unwrap();
        assert_eq!(got.as_ref(), model.get(&key(i)));
        let n = reads(&e) - before;
        assert!(n <= 1, "key {i} took {n} block reads");
        let before = reads(&e);
        assert_eq!(
            e.get(format!("{}x", String::from_utf8_lossy(&key(i))).as_bytes())
                .unwrap(),
            None
        );
        absent_reads += reads(&e) - before;
    }
    // Bloom filters keep most lookups of absent keys off the device.
    assert!(
        absent_reads < 90,
        "{absent_reads} block reads for 900 absent keys"
    );
    e.close().unwrap();
}

#[test]
fn the_block_cache_keeps_what_gets_read_and_scans_cache_only_their_first_blocks() {
    let devs = Devices::new(1, 1, 64, &model(4));
    let (e, _) = open(&devs, &options());
    let want = fill(&e, 900, 100);
    e.flush_all().unwrap();
    let reads =
        |e: &stria::engine::Engine<_>| -> u64 { e.stats().device_reads.iter().map(|r| r.0).sum() };
    // A scan of everything reads blocks and caches only the first four
    // it reads of each block file (where a short scan would read again).
    let before = reads(&e);
    assert_eq!(e.scan(b"", None, 10_000).unwrap().len(), want.len());
    let read = reads(&e) - before;
    let cached = e.stats().block_cache.blocks;
    let files: u64 = e.stats().region_files.iter().map(|&f| f as u64).sum();
    assert!(
        cached > 0 && cached <= 4 * files && cached < read,
        "{cached} of {read} blocks cached, {files} files"
    );
    // The second get of a key reads nothing, and answers the same.
    for i in (0..900).step_by(7) {
        let first = e.get(&key(i)).unwrap();
        let before = reads(&e);
        assert_eq!(e.get(&key(i)).unwrap(), first);
        assert_eq!(first.as_ref(), want.get(&key(i)));
        assert_eq!(reads(&e), before, "key {i} was read again");
    }
    let c = e.stats().block_cache;
    assert!(
        c.hits >= 129 && c.blocks > 0 && c.bytes <= c.capacity,
        "{c:?}"
    );
    e.close().unwrap();

    // Without a cache every get reads.
    let devs = Devices::new(1, 1, 64, &model(5));
    let mut opts = options();
    opts.block_cache = 0;
    let (e, _) = open(&devs, &opts);
    fill(&e, 900, 100);
    e.flush_all().unwrap();
    let before = reads(&e);
    for _ in 0..3 {
        e.get(&key(3)).unwrap();
    }
    assert_eq!(reads(&e) - before, 3);
    assert_eq!(e.stats().block_cache, Default::default());
    e.close().unwrap();
}

#[test]
fn files_of_the_longest_keys_fit_a_small_manifest() {
    // 16 KiB keys: with whole keys in the manifest a file's record took
    // 32 KiB, and this 128 KiB half held four files; the flush of a fifth
    // failed and the engine refused writes.
    let devs = Devices::new(1, 1, 64, &model(14));
    let mut opts = options();
    opts.max_key = 16 << 10;
    let big = |region: u8, i: u32| -> Vec<u8> {
        let mut k = vec![region; 16 << 10];
        k[(16 << 10) - 4..].copy_from_slice(&i.to_be_bytes());
        k
    };
    let (e, _) = open(&devs, &opts);
    let mut i = 0u32;
    for _round in 0..8 {
        for region in [b'a', b'h', b'q'] {
            for _ in 0..2 {
                e.put(&big(region, i), &i.to_le_bytes(), None).unwrap();
                i += 1;
            }
        }
        e.flush_all().unwrap();
    }
    let s = e.stats();
    assert!(s.failed.is_none() && s.flushes >= 24, "{s:?}");
    assert!(s.region_files.iter().sum::<usize>() >= 6, "{s:?}");
    e.close().unwrap();
    let (e, report) = open(&devs, &opts);
    assert_eq!(report.replayed, 0, "{report}");
    let mut i = 0u32;
    for _round in 0..8 {
        for region in [b'a', b'h', b'q'] {
            for _ in 0..2 {
                assert_eq!(
                    e.get(&big(region, i)).unwrap(),
                    Some(i.to_le_bytes().to_vec())
                );
                i += 1;
            }
        }
    }
    e.close().unwrap();
}

#[test]
fn memory_stays_bounded_however_fast_writers_write() {
    // A slow data device: flushes are the bottleneck, writers must wait.
    let mut m = model(4);
    let devs = Devices::new(2, 1, 128, &m);
    m.bandwidth = 20_000_000;
    m.write_us = 100;
    let devs = Devices {
        data: vec![stria::device::sim::SimDevice::new(
            "data0",
            4096,
            128 * 256,
            64,
            m,
        )],
        ..devs
    };
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let e = Arc::new(e);
    let threads = 8;
    let len = 4000;
    std::thread::scope(|s| {
        for t in 0..threads {
            let e = e.clone();
            s.spawn(move || {
                for i in 0..1500u64 {
                    let k = key(t * 100_000 + i);
                    e.put(&k, &value(i, 0, len), Some(Durability::Async))
                        .unwrap();
                }
            });
        }
    });
    let s = e.stats();
    // The limit, plus what writers admitted at the same instant carry.
    let margin = threads * stria::memstore::entry_bytes(20, len);
    assert!(
        s.memory.peak <= opts.global_limit + margin,
        "peak {} over limit {} + {margin}",
        s.memory.peak,
        opts.global_limit
    );
    assert!(s.memory.blocks > 0, "writers never waited: {s:?}");
    assert!(s.flushes > 10, "{s:?}");
    let e = Arc::into_inner(e).unwrap();
    e.close().unwrap();
}

#[test]
fn compaction_bounds_the_files_of_a_region_and_frees_their_space() {
    let devs = Devices::new(1, 1, 64, &model(5));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let mut model = BTreeMap::new();
    for round in 0..12u64 {
        for i in 0..200u64 {
            let k = key(i);
            if (i + round) % 5 == 0 {
                e.delete(&k, Some(Durability::Write)).unwrap();
                model.remove(&k);
            } else {
                let v = value(i, round, 300);
                e.put(&k, &v, Some(Durability::Write)).unwrap();
                model.insert(k, v);
            }
        }
        e.flush_all().unwrap();
    }
    let s = e.stats();
    assert!(s.compactions >= 2, "{s:?}");
    assert!(
        s.region_files.iter().all(|&f| f <= opts.compact_at + 1),
        "{s:?}"
    );
    check(&e, 200, &model);
    e.close().unwrap();
    let (e, _) = open(&devs, &opts);
    check(&e, 200, &model);
    let used: u64 = e.files().iter().map(|f| f.len).sum();
    assert!(used < 4 << 20, "compaction left {used} bytes of files");
    e.close().unwrap();
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let devs = Devices::new(1, 1, 64, &model(6));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let big_key = vec![b'k'; opts.max_key + 1];
    let err = e.put(&big_key, b"v", None).unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("a key of 1025 bytes is over the limit of 1024 bytes (memstore.max-key)")
    );
    let err = e.put(b"k", &vec![0; opts.max_value + 1], None).unwrap_err();
    assert!(err.to_string().contains("memstore.max-value"), "{err}");
    assert!(matches!(
        e.put(b"", b"v", None),
        Err(EngineError::BadRange(_))
    ));
    // A batch with one bad pair writes none of it.
    let err = e
        .put_batch(&[(b"ok", b"1"), (&big_key, b"2")], None)
        .unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }));
    assert_eq!(e.get(b"ok").unwrap(), None);
    assert!(matches!(
        e.scan(b"m", Some(b"a"), 10),
        Err(EngineError::BadRange(_))
    ));
    assert_eq!(e.stats().writes, 0);
    e.close().unwrap();
}

#[test]
fn a_corrupt_block_is_an_error_naming_device_and_block_never_data() {
    let devs = Devices::new(1, 1, 64, &model(7));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    let files = e.files();
    let f = files
        .iter()
        .find(|f| f.entries > 50)
        .expect("a file with entries");
    // Scribble over the file's first block.
    let dev = &e.data_devices()[f.device as usize];
    let mut q = dev.open_queue().unwrap();
    let mut buf = dev.alloc_buf(4096);
    buf.fill(0xa5);
    let lba = f.offset / 4096;
    wait::run(&mut q, Request::write(0, lba, vec![buf]))
        .unwrap()
        .result
        .unwrap();
    let mut errors = 0;
    for i in 0..300 {
        match e.get(&key(i)) {
            Ok(v) => assert_eq!(v.as_ref(), model.get(&key(i)), "key {i}: wrong data"),
            Err(EngineError::Corrupt {
                device, lba: at, ..
            }) => {
                assert_eq!(device, "data0");
                assert_eq!(at, lba);
                errors += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(errors > 0);
    assert!(matches!(
        e.scan(b"", None, usize::MAX),
        Err(EngineError::Corrupt { .. })
    ));
    e.close().unwrap();
}

#[test]
fn a_misdirected_block_is_caught_not_returned_as_an_older_version() {
    let devs = Devices::new(1, 1, 64, &model(17));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    // Two rounds of the same keys with values of the same length: in each
    // region the two files have the same layout, block for block.
    for version in 0..2 {
        for i in 0..40 {
            e.put(&key(i), &value(i, version, 200), Some(Durability::Write))
                .unwrap();
        }
        e.flush_all().unwrap();
    }
    let files = e.files();
    let dev = &e.data_devices()[0];
    let mut q = dev.open_queue().unwrap();
    let mut copied = 0;
    for region in 0..3 {
        let mut in_region: Vec<_> = files.iter().filter(|f| f.region == region).collect();
        in_region.sort_by_key(|f| f.max_lsn);
        let [old, new] = in_region[..] else {
            panic!("region {region}: {in_region:?}")
        };
        assert_eq!(old.len, new.len, "same layout");
        // The old file's blocks land where the new file's are, as writes
        // sent to the wrong LBA would leave them.
        let len = old.len.div_ceil(4096) * 4096;
        let read = Request::read(0, old.offset / 4096, vec![dev.alloc_buf(len as usize)]);
        let done = wait::run(&mut q, read).unwrap();
        done.result.unwrap();
        let write = Request::write(0, new.offset / 4096, done.bufs);
        wait::run(&mut q, write).unwrap().result.unwrap();
        copied += 1;
    }
    assert_eq!(copied, 3);
    let mut errors = 0;
    for i in 0..40 {
        match e.get(&key(i)) {
            Ok(v) => assert_eq!(v, Some(value(i, 1, 200)), "key {i}: an older version"),
            Err(EngineError::Corrupt { device, .. }) => {
                assert_eq!(device, "data0");
                errors += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(errors, 40, "every key's newest block is misplaced");
    e.close().unwrap();
}

#[test]
fn silent_read_faults_and_bad_sectors_give_errors_never_wrong_values() {
    let devs = Devices::new(1, 1, 64, &model(18));
    let mut opts = options();
    opts.block_cache = 0; // every get reads the device
    opts.compact_at = 1000;
    let (e, _) = open(&devs, &opts);
    let model = fill(&e, 300, 200);
    e.flush_all().unwrap();
    // From now on a fifth of the data device's reads come back with a bit
    // flipped, and the first block of every file cannot be read.
    devs.data[0].set_faults(stria::config::SimFaults {
        corrupt_read_rate: 0.2,
        ..Default::default()
    });
    for f in e.files() {
        devs.data[0].add_latent_errors(f.offset / 4096, 1);
    }
    let (mut right, mut errors) = (0, 0);
    for round in 0..5 {
        for i in 0..300 {
            match e.get(&key(i)) {
                Ok(v) => {
                    assert_eq!(v.as_ref(), model.get(&key(i)), "round {round}, key {i}");
                    right += 1;
                }
                Err(EngineError::Corrupt { device, .. }) => {
                    assert_eq!(device, "data0");
                    errors += 1;
                }
                Err(EngineError::Device(d)) => {
                    assert!(d.to_string().contains("latent sector error"), "{d}");
                    errors += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
        if let Ok(all) = e.scan(b"", None, usize::MAX) {
            let all: BTreeMap<Vec<u8>, Vec<u8>> = all.into_iter().collect();
            assert_eq!(all, model, "a scan that succeeds is right");
        }
    }
    assert!(right > 0 && errors > 0, "{right} right, {errors} errors");
    assert!(devs.data[0].stats().silent_faults > 0);
    e.close().unwrap();
}

#[test]
fn a_gray_wal_device_slows_writes_and_loses_nothing() {
    let mut m = model(19);
    m.write_us = 20;
    m.flush_us = 20;
    let devs = Devices::new(2, 1, 64, &m);
    let (e, _) = open(&devs, &options());
    // 40 requests of wal1, from its 20th on, take 200 times as long.
    devs.wal[1].set_faults(stria::config::SimFaults {
        slow_from_op: Some(devs.wal[1].stats().writes + 20),
        slow_ops: 40,
        slow_factor: 200,
        ..Default::default()
    });
    let started = std::time::Instant::now();
    for i in 0..300 {
        e.put(&key(i), &value(i, 0, 100), Some(Durability::Sync))
            .unwrap();
    }
    let slow = started.elapsed();
    for i in 0..300 {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 100)), "key {i}");
    }
    e.close().unwrap();
    let (e, _) = open(&devs.after_process_crash(5), &options());
    for i in 0..300 {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 100)), "key {i}");
    }
    e.close().unwrap();
    assert!(slow >= std::time::Duration::from_millis(100), "{slow:?}");
}

#[test]
fn a_vanished_data_device_is_a_clear_error_now_and_at_the_next_open() {
    let devs = Devices::new(1, 1, 64, &model(20));
    let (e, _) = open(&devs, &options());
    for i in 0..100 {
        e.put(&key(i), &value(i, 0, 100), Some(Durability::Sync))
            .unwrap();
    }
    devs.data[0].vanish();
    let err = e.flush_all().unwrap_err();
    assert!(err.to_string().contains("vanished"), "{err}");
    drop(e);
    // The drive stays gone: the next open says which and why.
    let back = devs.reboot(6);
    let err = stria::engine::Engine::open(back.engine_devices(), options())
        .err()
        .expect("no data device");
    assert!(err.to_string().contains("data0"), "{err}");
    assert!(err.to_string().contains("vanished"), "{err}");
}

#[test]
fn a_scrub_reads_every_block_and_names_each_bad_one_with_its_keys() {
    let devs = Devices::new(1, 1, 64, &model(21));
    let mut opts = options();
    opts.compact_at = 1000;
    let (e, _) = open(&devs, &opts);
    fill(&e, 300, 200);
    e.flush_all().unwrap();
    let clean = e.scrub();
    assert!(clean.files >= 3 && clean.blocks > clean.files, "{clean}");
    assert!(clean.bad.is_empty(), "{clean}");
    // One bit flipped at rest inside the second block of one file, and
    // the first block of another unreadable.
    let files = e.files();
    let (a, b) = (&files[0], &files[1]);
    let lba = (a.offset + 4096 + 100) / 4096;
    devs.data[0].corrupt_at_rest(lba, 100, 2);
    devs.data[0].add_latent_errors(b.offset / 4096, 1);
    let report = e.scrub();
    assert_eq!(report.files, clean.files);
    // The flipped bit spoils one block; the unreadable device block holds
    // the start of the next block too (blocks are not aligned to it).
    let of = |id| report.bad.iter().filter(|f| f.file == id).count();
    assert_eq!(of(a.id), 1, "{report}");
    assert!((1..=2).contains(&of(b.id)), "{report}");
    assert_eq!(report.bad.len(), of(a.id) + of(b.id), "{report}");
    let flipped = report.bad.iter().find(|f| f.file == a.id).expect("file a");
    assert_eq!(
        (flipped.device.as_str(), flipped.region),
        ("data0", a.region)
    );
    assert!(flipped.lba <= lba && lba < flipped.lba + 2, "{report}");
    assert!(flipped.what.contains("checksum mismatch"), "{report}");
    assert!(flipped.keys.starts_with("after "), "{report}");
    let unreadable = report.bad.iter().find(|f| f.file == b.id).expect("file b");
    assert!(unreadable.what.contains("latent sector error"), "{report}");
    assert!(report.to_string().contains("BAD: block file"), "{report}");
    e.close().unwrap();
}

#[test]
fn the_regions_of_the_devices_are_kept() {
    let devs = Devices::new(1, 1, 64, &model(8));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    e.put(b"a", b"1", None).unwrap();
    e.close().unwrap();
    let mut other = opts.clone();
    other.split_keys = vec![b"m".to_vec()];
    let err = stria::engine::Engine::open(devs.engine_devices(), other)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("3 regions"), "{err}");
    let (e, _) = open(&devs, &opts);
    assert_eq!(e.get(b"a").unwrap(), Some(b"1".to_vec()));
    e.close().unwrap();
}

#[test]
fn flushes_let_the_wal_reclaim_its_segments() {
    let devs = Devices::new(1, 1, 64, &model(9));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    // Several times the WAL (16 MiB) and the global limit.
    for i in 0..12_000u64 {
        e.put(&key(i % 2000), &value(i, 0, 3000), Some(Durability::Async))
            .unwrap();
    }
    e.flush_all().unwrap();
    let s = e.stats();
    assert!(s.replay_point > 12_000, "{s:?}");
    e.close().unwrap();
    let (e, report) = open(&devs, &opts);
    assert_eq!(report.replayed, 0, "{report}");
    for i in 10_000..12_000u64 {
        assert_eq!(e.get(&key(i % 2000)).unwrap(), Some(value(i, 0, 3000)));
    }
    e.close().unwrap();
}

#[test]
fn a_write_is_invisible_until_acknowledged_at_its_level() {
    // A WAL device whose writes take 300 ms: the put is in flight that long.
    let mut slow = model(10);
    slow.write_us = 300_000;
    slow.flush_us = 300_000;
    let devs = Devices::new(1, 1, 64, &model(10));
    let devs = Devices {
        wal: vec![stria::device::sim::SimDevice::new(
            "wal0", 4096, 4096, 64, slow,
        )],
        ..devs
    };
    let (e, _) = open(&devs, &options());
    let e = Arc::new(e);
    for level in [Durability::Write, Durability::Sync] {
        let k = format!("key-{level:?}").into_bytes();
        let writer = {
            let (e, k) = (e.clone(), k.clone());
            std::thread::spawn(move || e.put(&k, b"v", Some(level)).unwrap())
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!writer.is_finished());
        assert_eq!(
            e.get(&k).unwrap(),
            None,
            "{level:?}: visible before its ack"
        );
        let scanned = e.scan(b"", None, 10).unwrap();
        assert!(
            scanned.iter().all(|(sk, _)| *sk != k),
            "{level:?}: a scan saw it before its ack"
        );
        writer.join().unwrap();
        assert_eq!(e.get(&k).unwrap(), Some(b"v".to_vec()), "{level:?}");
    }
    Arc::into_inner(e).unwrap().close().unwrap();
}

#[test]
fn submitted_batches_are_acknowledged_when_waited_for() {
    let devs = Devices::new(2, 1, 64, &model(11));
    let (e, _) = open(&devs, &options());
    let keys: Vec<Vec<u8>> = (0..500).map(key).collect();
    let vals: Vec<Vec<u8>> = (0..500).map(|i| value(i, 0, 100)).collect();
    let mut pending = Vec::new();
    for chunk in 0..10 {
        let writes: Vec<(&[u8], Option<&[u8]>)> = (chunk * 50..chunk * 50 + 50)
            .map(|i| (keys[i].as_slice(), Some(vals[i].as_slice())))
            .collect();
        pending.push(e.submit(&writes, Some(Durability::Sync)).unwrap());
    }
    for p in pending {
        p.wait().unwrap();
    }
    for (k, v) in keys.iter().zip(&vals) {
        assert_eq!(e.get(k).unwrap().as_ref(), Some(v));
    }
    // A dropped batch is still completed: its memstore can be flushed.
    drop(e.submit(&[(b"dropped", Some(b"x"))], None).unwrap());
    e.flush_all().unwrap();
    assert_eq!(e.get(b"dropped").unwrap(), Some(b"x".to_vec()));
    e.close().unwrap();
}

/// A batch's outcome is known once it is acknowledged, without making its
/// writes visible: a server answers first and inserts after.
#[test]
fn an_outcome_is_known_before_the_writes_are_visible() {
    let devs = Devices::new(2, 1, 64, &model(13));
    let (e, _) = open(&devs, &options());
    let p = e
        .submit(&[(b"k", Some(b"v")), (b"j", None)], Some(Durability::Sync))
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let outcome = loop {
        match p.outcome() {
            Some(o) => break o,
            None => {
                assert!(std::time::Instant::now() < until, "never acknowledged");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    };
    outcome.unwrap();
    assert!(p.is_done());
    // Asked again: the same, and still not inserted.
    assert!(matches!(p.outcome(), Some(Ok(()))));
    assert_eq!(e.get(b"k").unwrap(), None);
    p.wait().unwrap();
    assert_eq!(e.get(b"k").unwrap(), Some(b"v".to_vec()));
    e.close().unwrap();
}

#[test]
fn a_writer_holding_unwaited_batches_does_not_hold_up_flushes() {
    // One thread submits several times the global limit without waiting for
    // any batch: flushes must insert its acknowledged writes themselves, or
    // the thread would wait for memory that only its own batches hold.
    // Devices of 6 MB/s: the log and the flushes cannot keep up, so the
    // writer does reach the limit however slowly the test runs (at 32 MB/s
    // a debug build beside other tests submitted slower than both).
    let slow = SimConfig {
        bandwidth: 6_000_000,
        ..model(12)
    };
    let devs = Devices::new(1, 1, 64, &slow);
    let (e, _) = open(&devs, &options());
    let e = Arc::new(e);
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            let v = value(0, 0, 2000);
            let mut pending = Vec::new();
            for i in 0..3000u64 {
                pending.push(
                    e.submit(&[(&key(i), Some(&v))], Some(Durability::Write))
                        .unwrap(),
                );
            }
            for p in pending {
                p.wait().unwrap();
            }
            tx.send(()).unwrap();
        })
    };
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the writer is stuck behind its own batches");
    writer.join().unwrap();
    let s = e.stats();
    assert!(s.flushes >= 5 && s.memory.blocks > 0, "{s:?}");
    assert_eq!(e.get(&key(2999)).unwrap(), Some(value(0, 0, 2000)));
    Arc::into_inner(e).unwrap().close().unwrap();
}

#[test]
fn a_full_log_makes_the_memstores_that_pin_it_flush() {
    // Memstore limits far above what the 16 MiB log holds: only log
    // pressure can start the flushes that let it reclaim.
    let devs = Devices::new(1, 1, 128, &model(13));
    let mut opts = options();
    opts.flush_size = 256 << 20;
    opts.global_limit = 512 << 20;
    let (e, _) = open(&devs, &opts);
    let e = Arc::new(e);
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            let v = value(0, 0, 8000);
            for i in 0..6000u64 {
                if let Err(err) = e.put(&key(i), &v, Some(Durability::Write)) {
                    panic!("{err}: {:?}", e.stats());
                }
            }
            tx.send(()).unwrap();
        })
    };
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("writers wait forever for log space");
    writer.join().unwrap();
    let s = e.stats();
    assert!(s.flushes >= 2, "{s:?}");
    assert!(s.wal.segments_reclaimed > 0, "{s:?}");
    Arc::into_inner(e).unwrap().close().unwrap();
}

#[test]
fn a_replay_that_fills_memstores_loses_nothing_at_the_next_restart() {
    // Everything stays in the memstores (and the log) at the first close;
    // the second open replays it into memstores that fill and flush while
    // the replay goes on; the third open must still find every key.
    let devs = Devices::new(1, 1, 128, &model(14));
    let mut big = options();
    big.flush_size = 256 << 20;
    big.global_limit = 512 << 20;
    let (e, _) = open(&devs, &big);
    // In batches of 100: few WAL batches, so the log stays far from half
    // full and nothing is flushed before the close.
    let keys: Vec<Vec<u8>> = (0..2000).map(key).collect();
    let vals: Vec<Vec<u8>> = (0..2000).map(|i| value(i, 0, 1000)).collect();
    for c in 0..20 {
        let pairs: Vec<(&[u8], &[u8])> = (c * 100..c * 100 + 100)
            .map(|i| (keys[i].as_slice(), vals[i].as_slice()))
            .collect();
        e.put_batch(&pairs, Some(Durability::Write)).unwrap();
    }
    assert_eq!(e.stats().flushes, 0);
    e.close().unwrap();
    let small = options();
    let (e, report) = open(&devs, &small);
    assert_eq!(report.replayed, 2000, "{report}");
    e.wait_idle().unwrap();
    assert!(e.stats().flushes > 0);
    e.close().unwrap();
    let (e, report) = open(&devs, &small);
    for i in 0..2000u64 {
        assert_eq!(
            e.get(&key(i)).unwrap(),
            Some(value(i, 0, 1000)),
            "key {i} ({report})"
        );
    }
    e.close().unwrap();
}

#[test]
fn a_full_data_device_fails_writes_with_a_clear_error_and_keeps_acknowledged_data() {
    // 2 MiB: 1 MiB reserved, 256 KiB of manifest, room for a few files.
    let devs = Devices::new(1, 1, 2, &model(15));
    let opts = options();
    let (e, _) = open(&devs, &opts);
    let mut acked = Vec::new();
    let mut refusal = None;
    for i in 0..4000u64 {
        match e.put(&key(i), &value(i, 0, 1000), Some(Durability::Write)) {
            Ok(()) => acked.push(i),
            Err(err) => {
                refusal = Some(err.to_string());
                break;
            }
        }
    }
    let refusal = refusal.expect("a 2 MiB device fills up");
    assert!(
        refusal.contains("no data device has") && refusal.contains("free bytes in one piece"),
        "{refusal}"
    );
    assert!(
        acked.len() > 100,
        "{} writes before the refusal",
        acked.len()
    );
    for &i in &acked {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 1000)), "key {i}");
    }
    // Later writes are refused too, with the same reason.
    let again = e.put(b"later", b"x", None).unwrap_err().to_string();
    assert!(again.contains("no data device has"), "{again}");
    e.close().unwrap();
    let (e, report) = open(&devs, &opts);
    for &i in &acked {
        assert_eq!(
            e.get(&key(i)).unwrap(),
            Some(value(i, 0, 1000)),
            "key {i} after reopen ({report})"
        );
    }
    e.abandon();
}

#[test]
fn a_log_that_fills_before_its_memstores_are_frozen_does_not_hang() {
    // The memstores are frozen for the log only once it is full, and no
    // memstore limit is ever reached: every memstore then holds writes
    // admitted to it that wait in the WAL's ring or buffers for log space
    // which only the flushes of those memstores can free. A flush must not
    // wait for them.
    let devs = Devices::new(1, 1, 512, &model(16));
    let mut opts = options();
    opts.flush_size = 256 << 20;
    opts.global_limit = 512 << 20;
    opts.log_freeze_at = 1.0;
    let (e, _) = open(&devs, &opts);
    let e = Arc::new(e);
    // Three writers, 48 MiB together: three times the 16 MiB log. One puts
    // one record at a time; one puts batches spread over the regions; one
    // submits batches and waits for them only 16 batches later.
    const EACH: u64 = 2000;
    let val = |t: u64, i: u64| value(t * EACH + i, t, 8000);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut writers = Vec::new();
    for t in 0..3u64 {
        let (e, tx) = (e.clone(), tx.clone());
        writers.push(std::thread::spawn(move || {
            let keys: Vec<Vec<u8>> = (0..EACH).map(|i| key(t * EACH + i)).collect();
            let vals: Vec<Vec<u8>> = (0..EACH).map(|i| val(t, i)).collect();
            let mut held = std::collections::VecDeque::new();
            for c in (0..EACH as usize).step_by(8) {
                let writes: Vec<(&[u8], Option<&[u8]>)> = (c..c + 8)
                    .map(|i| (keys[i].as_slice(), Some(vals[i].as_slice())))
                    .collect();
                let done = match t {
                    0 => writes
                        .iter()
                        .try_for_each(|(k, v)| e.put(k, v.unwrap(), Some(Durability::Write))),
                    1 => e.write_batch(&writes, Some(Durability::Sync)),
                    _ => e
                        .submit(&writes, Some(Durability::Write))
                        .map(|p| held.push_back(p))
                        .and_then(|()| match held.len() > 16 {
                            true => held.pop_front().unwrap().wait(),
                            false => Ok(()),
                        }),
                };
                if let Err(err) = done {
                    panic!("writer {t}: {err}: {:?}", e.stats());
                }
            }
            for p in held {
                p.wait().unwrap();
            }
            tx.send(t).unwrap();
        }));
    }
    for _ in 0..3 {
        if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            panic!(
                "writers still wait for log space after 60 s: {:?}",
                e.stats()
            );
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    let s = e.stats();
    assert!(s.wal.log_full > 0 && s.wal.segments_reclaimed > 0, "{s:?}");
    assert!(
        s.partial_flushes > 0,
        "no flush passed the writes waiting for log space: {s:?}"
    );
    // A pass writes only what no pass before it wrote: each of the 6,000
    // writes at most once, however often the log moves.
    assert!(
        s.partial_entries <= 3 * EACH,
        "passes of the full log wrote {} entries for {} writes: {s:?}",
        s.partial_entries,
        3 * EACH
    );
    for t in 0..3 {
        for i in 0..EACH {
            assert_eq!(e.get(&key(t * EACH + i)).unwrap(), Some(val(t, i)));
        }
    }
    Arc::into_inner(e).unwrap().close().unwrap();
    let (e, report) = open(&devs, &opts);
    for t in 0..3 {
        for i in 0..EACH {
            let got = e.get(&key(t * EACH + i)).unwrap();
            assert_eq!(
                got,
                Some(val(t, i)),
                "writer {t} key {i} after a restart ({report})"
            );
        }
    }
    e.close().unwrap();
}
