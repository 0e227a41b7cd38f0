//! The engine with `wal.copies: 2`: a WAL device lost while writing costs
//! no acknowledged write; the next open refuses to start without it until
//! a new device takes its place.

use stria::config::Durability;
use stria::device::sim::SimDevice;
use stria::engine::Engine;

use crate::engine_env::{key, model, open, options, value, Devices};

#[test]
fn a_lost_wal_device_costs_no_acknowledged_write_with_two_copies() {
    let devs = Devices::new(2, 1, 64, &model(5));
    let mut opts = options();
    opts.wal.copies = 2;
    let (e, _) = open(&devs, &opts);
    for i in 0..300 {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
            .unwrap();
    }
    devs.wal[1].vanish();
    for i in 300..600 {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
            .unwrap();
    }
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    // A power cut: only what a flush made durable is kept.
    devs.cut_power();
    drop(e);
    let mut devs = devs.reboot(9);
    // The vanished device stops the open: nothing can tell that wal0 holds
    // every batch, so the engine does not start without it.
    let err = Engine::open(devs.engine_devices(), opts.clone())
        .err()
        .expect("refused without wal1")
        .to_string();
    assert!(err.contains("wal1") && err.contains("vanished"), "{err}");
    // A new, empty device in its place (what `stria device replace` does).
    devs.wal[1] = SimDevice::new("wal1", 4096, 4096, 64, model(7));
    let (e, _) = open(&devs, &opts);
    assert_eq!(e.stats().wal.device_lost, [0, 0]);
    for i in 0..600 {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 200)), "key {i}");
    }
    // And it goes on writing, on both copies again.
    e.put(b"after", b"1", Some(Durability::Sync)).unwrap();
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
    let devs = Devices::new(2, 1, 64, &model(8));
    let mut opts = options();
    opts.wal.copies = 2;
    let (e, _) = open(&devs, &opts);
    for i in 0..100 {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
            .unwrap();
    }
    // wal1 goes; what follows has its one copy on wal0.
    devs.wal[1].vanish();
    for i in 100..200 {
        e.put(&key(i), &value(i, 0, 200), Some(Durability::Sync))
            .unwrap();
    }
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
    for i in 0..200 {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 200)), "key {i}");
    }
    assert_eq!(e.get(b"after").unwrap(), Some(b"1".to_vec()));
    e.close().unwrap();
}
