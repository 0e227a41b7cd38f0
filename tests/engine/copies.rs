//! The engine with `wal.copies: 2`: a WAL device lost while writing costs
//! no acknowledged write; the next open starts without it (degraded) when
//! the devices left hold every batch, and refuses when one of them may
//! not (the manifest's marks); a new device in its place makes the log
//! whole again.

use stria::config::{Durability, SimFaults, RESERVED_BYTES};
use stria::device::sim::SimDevice;
use stria::engine::Engine;

use stria::engine::EngineOptions;

use crate::engine_env::{key, model, open, options, value, Devices};

/// Two WAL devices at `wal.copies: 2` and one data device.
fn two_copies(seed: u64) -> (Devices, EngineOptions) {
    let mut opts = options();
    opts.wal.copies = 2;
    (Devices::new(2, 1, 64, &model(seed)), opts)
}

/// Keys `range` written at `sync`.
fn put(e: &Engine<SimDevice>, range: std::ops::Range<u64>) {
    for i in range {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
            .unwrap();
    }
}

/// Keys `0..n` each hold what [`put`] wrote.
fn check(e: &Engine<SimDevice>, n: u64) {
    for i in 0..n {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 200)), "key {i}");
    }
}

#[test]
fn a_lost_wal_device_costs_no_acknowledged_write_with_two_copies() {
    let (devs, opts) = two_copies(5);
    let (e, _) = open(&devs, &opts);
    put(&e, 0..300);
    devs.wal[1].vanish();
    put(&e, 300..600);
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    // A power cut: only what a flush made durable is kept.
    devs.cut_power();
    drop(e);
    let devs = devs.reboot(9);
    // wal1 is still gone. wal0 served the whole time, so it holds every
    // batch: the engine starts without wal1, degraded.
    let (e, report) = open(&devs, &opts);
    assert!(report.wal.contains("wal1"), "{report}");
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    check(&e, 600);
    put(&e, 600..700);
    devs.cut_power();
    drop(e);
    let mut devs = devs.reboot(10);
    // A new, empty device in its place (what `stria device replace` does).
    devs.wal[1] = SimDevice::new("wal1", 4096, 4096, 64, model(7));
    let (e, _) = open(&devs, &opts);
    assert_eq!(e.stats().wal.device_lost, [0, 0]);
    check(&e, 700);
    // It goes on writing, on both copies again: wal0 may go now.
    e.put(b"after", b"1", Some(Durability::Sync)).unwrap();
    devs.cut_power();
    drop(e);
    let devs = devs.reboot(11);
    devs.wal[0].vanish();
    let (e, _) = open(&devs, &opts);
    assert_eq!(e.stats().wal.device_lost, [1, 0]);
    check(&e, 700);
    assert_eq!(e.get(b"after").unwrap(), Some(b"1".to_vec()));
    e.close().unwrap();
}

/// A WAL device lost while running and readable again at a start lacks
/// the batches written without it. Were the other device to be missing at
/// that start, recovering the log from it alone would silently drop them:
/// the manifest's mark makes the start refuse instead, naming it.
#[test]
fn a_start_never_takes_the_log_from_a_device_that_missed_batches() {
    let (devs, opts) = two_copies(15);
    let (e, _) = open(&devs, &opts);
    put(&e, 0..100);
    // wal1 fails its writes: lost, and what follows is on wal0 alone.
    devs.wal[1].set_faults(SimFaults {
        write_error_rate: 1.0,
        ..SimFaults::default()
    });
    put(&e, 100..200);
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    devs.cut_power();
    drop(e);
    // wal1 reads again, wal0 is gone.
    let refused = devs.reboot(16);
    refused.wal[1].set_faults(SimFaults::default());
    refused.wal[0].vanish();
    let err = Engine::open(refused.engine_devices(), opts.clone())
        .err()
        .expect("refused: wal1 lacks batches")
        .to_string();
    assert!(
        err.contains("wal0") && err.contains("wal1 may lack batches"),
        "{err}"
    );
    // The same crash with both back: every write is there, the memstores
    // are flushed and the mark goes, so wal0 may be lost after.
    let back = devs.reboot(17);
    back.wal[1].set_faults(SimFaults::default());
    let (e, _) = open(&back, &opts);
    assert_eq!(e.stats().wal.device_lost, [0, 0]);
    e.close().unwrap();
    let after = back.reboot(18);
    after.wal[0].vanish();
    let (e, _) = open(&after, &opts);
    check(&e, 200);
    e.close().unwrap();
}

#[test]
fn with_one_copy_a_lost_wal_device_fails_writes_with_its_name() {
    let devs = Devices::new(2, 1, 64, &model(6));
    let (e, _) = open(&devs, &options());
    e.put(b"a", b"1", Some(Durability::Sync)).unwrap();
    devs.wal[0].vanish();
    let mut err = None;
    for i in 0..20 {
        if let Err(x) = e.put(&key(i), b"v", Some(Durability::Sync)) {
            err = Some(x.to_string());
            break;
        }
    }
    let err = err.expect("writes fail once a device of the only copy is gone");
    assert!(err.contains("wal0"), "{err}");
}

/// Batches that reach the next start on one device alone (written while
/// the other was lost, or torn on it by a power cut) are flushed to block
/// files by that start, so a later fault of the device holding them
/// loses nothing. Left in the log, the only copy went with the device,
/// though later batches, on both devices, said they were durable.
#[test]
fn batches_found_on_one_device_alone_are_flushed_at_the_start() {
    let (devs, opts) = two_copies(8);
    let (e, _) = open(&devs, &opts);
    put(&e, 0..100);
    // wal1 goes; what follows has its one copy on wal0.
    devs.wal[1].vanish();
    put(&e, 100..200);
    devs.cut_power();
    drop(e);
    let mut devs = devs.reboot(11);
    devs.wal[1] = SimDevice::new("wal1", 4096, 4096, 64, model(12));
    let (e, report) = open(&devs, &opts);
    assert!(report.wal.contains("found on one device alone"), "{report}");
    e.put(b"after", b"1", Some(Durability::Sync)).unwrap();
    devs.cut_power();
    drop(e);
    // Now wal0, which alone held the batches before the start, goes.
    let mut devs = devs.reboot(13);
    devs.wal[0] = SimDevice::new("wal0", 4096, 4096, 64, model(14));
    let (e, _) = open(&devs, &opts);
    check(&e, 200);
    assert_eq!(e.get(b"after").unwrap(), Some(b"1".to_vec()));
    e.close().unwrap();
}

/// The start that flushes batches found on one device alone records a
/// replay point past them, however its flushes interleave. Flushes of two
/// regions that finish together each count the other's memstore in the
/// point they record, so neither moved it past the batches: the next
/// start replayed them again, and had the device holding their one copy
/// failed by then, it would have refused, since later batches say they
/// were durable. With `--features failpoints` every flush waits between
/// choosing its point and recording it, so the two always overlap.
#[test]
fn the_start_that_flushes_single_copy_batches_records_a_replay_point_past_them() {
    #[cfg(feature = "failpoints")]
    fail::cfg("flush-replay-point-chosen", "sleep(20)").unwrap();
    for seed in 0..10 {
        let (devs, opts) = two_copies(100 + seed);
        let (e, _) = open(&devs, &opts);
        // Keys of two regions, so the start flushes two memstores.
        for i in (0..60).filter(|i| i % 3 != 2) {
            e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
                .unwrap();
        }
        devs.cut_power();
        drop(e);
        let devs = devs.reboot(200 + seed);
        // wal1's log now ends after its 20th batch (each a block, from the
        // block after segment 0's header), as if a blank block had been
        // written there by mistake: the rest are on wal0 alone.
        let segment0 = RESERVED_BYTES / 4096;
        devs.wal[1].misdirect_at_rest(4000, segment0 + 21);
        let (e, report) = open(&devs, &opts);
        assert!(report.wal.contains("found on one device alone"), "{report}");
        let point = e.stats().replay_point;
        devs.cut_power();
        drop(e);
        let devs = devs.reboot(300 + seed);
        let (e, report) = open(&devs, &opts);
        assert_eq!(report.replay_from, point, "seed {seed}: {report}");
        for i in (0..60).filter(|i| i % 3 != 2) {
            assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 200)), "key {i}");
        }
        e.close().unwrap();
    }
    #[cfg(feature = "failpoints")]
    fail::remove("flush-replay-point-chosen");
}

/// A WAL device lost while the engine runs is replaced without a stop:
/// the new device takes every batch again at once, and once the flushes
/// move the replay point past where it joined, its mark goes, so the
/// other device may then be lost and the log comes whole from it.
#[test]
fn a_lost_wal_device_is_replaced_while_the_engine_runs() {
    let (mut devs, opts) = two_copies(21);
    let (e, _) = open(&devs, &opts);
    put(&e, 0..100);
    // A sound device is not taken out.
    let spare = SimDevice::new("wal1", 4096, 4096, 64, model(22));
    let err = e.replace_wal_device(1, spare.clone()).unwrap_err();
    assert!(err.to_string().contains("in service"), "{err}");
    devs.wal[1].vanish();
    put(&e, 100..200);
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    devs.wal[1] = spare.clone();
    let from = e.replace_wal_device(1, spare).unwrap();
    assert!(from > 200, "{from}");
    assert_eq!(e.stats().wal.device_lost, [0, 0]);
    put(&e, 200..300);
    e.wait_idle().unwrap();
    assert_eq!(e.stats().wal_catching_up, 0);
    assert!(e.stats().wal.device_batches[1] > 0);
    devs.cut_power();
    drop(e);
    let devs = devs.reboot(23);
    devs.wal[0].vanish();
    let (e, report) = open(&devs, &opts);
    assert!(report.wal.contains("wal0"), "{report}");
    check(&e, 300);
    e.close().unwrap();
}

/// A device replaced while running lacks the log below where it joined
/// until the flushes move the replay point past it: the other device lost
/// before then fails the WAL, as a second lost device would, instead of
/// acknowledging writes a start could not recover (with `--features
/// failpoints`, which holds the flushes back).
#[cfg(feature = "failpoints")]
#[test]
fn a_replaced_wal_device_counts_as_lost_until_it_holds_the_log() {
    let (mut devs, opts) = two_copies(31);
    let (e, _) = open(&devs, &opts);
    put(&e, 0..100);
    devs.wal[1].vanish();
    put(&e, 100..150);
    fail::cfg("flush-before-manifest", "pause").unwrap();
    let spare = SimDevice::new("wal1", 4096, 4096, 64, model(32));
    devs.wal[1] = spare.clone();
    e.replace_wal_device(1, spare).unwrap();
    assert_eq!(e.stats().wal_catching_up, 1);
    devs.wal[0].vanish();
    let put = e.put(b"after", b"1", Some(Durability::Sync));
    fail::remove("flush-before-manifest");
    let err = put
        .expect_err("acknowledged on a device that lacks the log")
        .to_string();
    assert!(err.contains("does not hold the log whole yet"), "{err}");
    devs.cut_power();
    drop(e);
}
