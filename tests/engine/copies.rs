//! The engine with `wal.copies: 2`: a WAL device lost while writing, and
//! at the next open, costs no acknowledged write.

use stria::config::Durability;

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
    let devs = devs.reboot(9);
    let (e, report) = open(&devs, &opts);
    assert!(
        report.wal.contains("DEGRADED: device wal1"),
        "the vanished device is still gone: {report}"
    );
    assert_eq!(e.stats().wal.device_lost, [0, 1]);
    for i in 0..600 {
        assert_eq!(e.get(&key(i)).unwrap(), Some(value(i, 0, 200)), "key {i}");
    }
    // And it goes on writing, degraded.
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
