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
