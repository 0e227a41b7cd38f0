//! `wal.copies`: every batch on several devices, a damaged copy repaired
//! from another, and a lost device survived (degraded mode).

use stria::config::{DeviceLoss, Durability, SimConfig};
use stria::device::sim::SimDevice;
use stria::reactor::ReactorConfig;
use stria::wal::recovery::{Recovered, WalDevice};
use stria::wal::{Wal, WalError, WalOptions};

/// The first batch of a fresh log: after the 1 MiB reserved area (256
/// blocks of 4 KiB) and segment 0's header block.
const FIRST_BATCH_LBA: u64 = 257;

fn sim(name: &str) -> SimDevice {
    let model = SimConfig {
        write_us: 20,
        read_us: 0,
        flush_us: 40,
        bandwidth: 0,
        volatile_cache: true,
        ..SimConfig::default()
    };
    SimDevice::new(name, 4096, 2048, 64, model)
}

fn opts(copies: usize, on_device_loss: DeviceLoss) -> WalOptions {
    WalOptions {
        appliance_id: 3,
        segment_size: 64 << 10,
        max_batch: 16 << 10,
        in_flight_per_device: 2,
        fua: false,
        ring_capacity: 64,
        replay_from: Some(1),
        truncate_corrupt: false,
        copies,
        on_device_loss,
        // These tests reopen without a device knowing the others are
        // complete; the engine never does (see `lose_unreadable`).
        lose_unreadable: copies - 1,
        stale: Vec::new(),
        on_loss: None,
    }
}

fn open(devs: &[SimDevice], o: &WalOptions) -> Result<(Wal, Recovered), WalError> {
    Wal::open(WalDevice::stripe(devs), o, ReactorConfig::unpinned("wal"))
}

/// `n` puts at `sync`, one at a time, keys `{prefix}{i}`.
fn puts(wal: &Wal, prefix: &str, n: usize) -> Result<(), WalError> {
    for i in 0..n {
        let key = format!("{prefix}{i}").into_bytes();
        wal.put(0, key, vec![b'v'; 300], Durability::Sync)?.wait()?;
    }
    Ok(())
}

fn keys(rec: &Recovered) -> Vec<String> {
    rec.records
        .iter()
        .map(|r| String::from_utf8(r.key.clone()).unwrap())
        .collect()
}

fn expected(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn every_batch_goes_to_each_copy_and_either_copy_recovers_the_log() {
    let devs = [sim("a"), sim("b"), sim("c")];
    let o = opts(2, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 60).unwrap();
    let stats = wal.close().unwrap();
    let copies: u64 = stats.device_batches.iter().sum();
    assert_eq!(copies, 2 * stats.batches, "{stats}");
    // Each device alone is missing some batches; the other two have them.
    for lost in 0..devs.len() {
        let reopened: Vec<SimDevice> = devs
            .iter()
            .map(|d| {
                d.cut_power();
                d.reboot(lost as u64)
            })
            .collect();
        reopened[lost].vanish();
        let (wal, rec) = open(&reopened, &o).unwrap();
        assert_eq!(keys(&rec), expected("k", 60), "without device {lost}");
        assert!(rec.devices[lost].lost.is_some());
        assert_eq!(wal.stats().device_lost[lost], 1);
        wal.abandon();
    }
}

#[test]
fn a_damaged_copy_is_rewritten_from_the_other() {
    let devs = [sim("a"), sim("b")];
    let o = opts(2, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 20).unwrap();
    wal.close().unwrap();
    // A bit flipped in the first batch's payload on one device.
    devs[0].corrupt_at_rest(FIRST_BATCH_LBA, 100, 3);
    let (wal, rec) = open(&devs, &o).unwrap();
    assert_eq!(keys(&rec), expected("k", 20));
    assert_eq!(rec.report.repaired_batches, 1, "{}", rec.report);
    wal.close().unwrap();
    // Both copies are whole again: the other device alone recovers it all.
    devs[1].vanish();
    let (wal, rec) = open(&devs, &o).unwrap();
    assert_eq!(keys(&rec), expected("k", 20));
    assert_eq!(rec.report.repaired_batches, 0, "{}", rec.report);
    wal.abandon();
}

#[test]
fn with_one_copy_the_same_damage_is_an_error_naming_the_device() {
    let devs = [sim("a")];
    let o = opts(1, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 20).unwrap();
    wal.close().unwrap();
    devs[0].corrupt_at_rest(FIRST_BATCH_LBA, 100, 3);
    let err = open(&devs, &o)
        .err()
        .expect("a corrupt durable batch")
        .to_string();
    assert!(
        err.contains("WAL device a") && err.contains("corrupt"),
        "{err}"
    );
}

/// A latent sector error under one copy of the log: recovery reads the
/// rest of that device, takes the batches there from the other copy, and
/// loses nothing. It failed the whole open before: any read error of a
/// device's scan failed recovery.
#[test]
fn an_unreadable_range_of_one_copy_is_read_from_the_other() {
    let devs = [sim("a"), sim("b")];
    let o = opts(2, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 20).unwrap();
    wal.close().unwrap();
    devs[0].add_latent_errors(FIRST_BATCH_LBA, 2);
    let (wal, rec) = open(&devs, &o).unwrap();
    assert_eq!(keys(&rec), expected("k", 20));
    wal.close().unwrap();
    // With one copy the same range loses the batches there and after:
    // acknowledged, so an error naming the device and where its log ends.
    let devs = [sim("a")];
    let o = opts(1, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 20).unwrap();
    wal.close().unwrap();
    devs[0].add_latent_errors(FIRST_BATCH_LBA, 1);
    let err = open(&devs, &o)
        .err()
        .expect("a lost durable batch")
        .to_string();
    assert!(
        err.contains("device a") && err.contains("blank block (or one that cannot be read)"),
        "{err}"
    );
}

#[test]
fn a_device_lost_while_writing_degrades_and_keeps_every_acknowledged_write() {
    let devs = [sim("a"), sim("b")];
    let o = opts(2, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 20).unwrap();
    let (_, both) = wal.segment_usage();
    devs[1].vanish();
    // Acknowledged at `sync` from the one device left.
    puts(&wal, "m", 20).unwrap();
    assert_eq!(wal.stats().device_lost, [0, 1]);
    // The lost device's ring no longer counts as log.
    let (_, left) = wal.segment_usage();
    assert_eq!(left * 2, both, "{left} of {both} segments");
    wal.close().unwrap();
    let rebooted: Vec<SimDevice> = devs
        .iter()
        .map(|d| {
            d.cut_power();
            d.reboot(1)
        })
        .collect();
    let (wal, rec) = open(&rebooted, &o).unwrap();
    let mut want = expected("k", 20);
    want.extend(expected("m", 20));
    assert_eq!(keys(&rec), want);
    assert!(rec.devices[1].lost.as_deref().unwrap().contains("vanished"));
    puts(&wal, "n", 5).unwrap();
    wal.close().unwrap();
}

#[test]
fn refuse_writes_fails_the_wal_once_a_copy_cannot_be_kept() {
    let devs = [sim("a"), sim("b")];
    let o = opts(2, DeviceLoss::RefuseWrites);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 5).unwrap();
    devs[0].vanish();
    let err = puts(&wal, "m", 5).unwrap_err().to_string();
    assert!(
        err.contains("WAL device a") && err.contains("refuse-writes"),
        "{err}"
    );
    wal.abandon();
}

#[test]
fn with_one_copy_an_unreadable_device_refuses_the_open() {
    let devs = [sim("a"), sim("b")];
    let o = opts(1, DeviceLoss::Degrade);
    let (wal, _) = open(&devs, &o).unwrap();
    puts(&wal, "k", 5).unwrap();
    wal.close().unwrap();
    devs[1].vanish();
    let err = open(&devs, &o).err().expect("a lost device").to_string();
    assert!(err.contains("vanished"), "{err}");
}

#[test]
fn more_copies_than_devices_is_refused() {
    let devs = [sim("a")];
    let err = open(&devs, &opts(2, DeviceLoss::Degrade))
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("2 copies"), "{err}");
}
