//! The WAL crash checker: the real WAL on simulated devices, writers with a
//! random mix of durability levels, a power cut or a process crash at a
//! random instant, then recovery from what the devices kept.
//!
//! Checked for every seed:
//! (a) every append acknowledged at `sync` (after a power cut), or at
//!     `write` or `sync` (after a process crash), is recovered at the LSN it
//!     was acknowledged with;
//! (b) what is recovered is a gap-free run of LSNs from 1, and for every
//!     writer a prefix of what it appended, in order: nothing missing
//!     below the end, nothing invented;
//! (c) every record is byte-identical to what its writer appended.
//!
//! In half the seeds the first writer hosts the log (`Wal::host`: it puts
//! its appends into the batches itself and drives the devices while it
//! waits), as the server's shard does.
//!
//! Half the seeds with several devices write each batch to two of them
//! (`copies: 2`), and half of those lose a device at a random request (it
//! vanishes, as a pulled drive, and stays gone after the crash): the WAL
//! goes on degraded, and recovery reads the copies on the devices left, so
//! (a) to (c) hold all the same.
//!
//! `cargo test --test wal_crash` runs 300 seeds of each; the soak,
//! `cargo test --release --test wal_crash -- --ignored`, runs 5,000. A
//! failing seed is printed; `STRIA_SEED=n` replays one.

#[path = "common/wal_check.rs"]
mod wal_check;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stria::config::{DeviceLoss, SimConfig};
use stria::device::sim::SimDevice;
use stria::reactor::ReactorConfig;
use stria::wal::recovery::{recover, RecoveryOptions, WalDevice};
use stria::wal::{Wal, WalOptions};

use wal_check::{check, run_seeds, writer, Ack, Crash, Seen};

const SEGMENT: u64 = 256 << 10;
const MAX_BATCH: u64 = 32 << 10;

/// `n` devices; `vanish`: the one that vanishes, at which request.
fn devices(rng: &mut ChaCha8Rng, n: usize, vanish: Option<(usize, u64)>) -> Vec<SimDevice> {
    (0..n)
        .map(|i| {
            let mut model = SimConfig {
                write_us: rng.random_range(0..30),
                read_us: 0,
                flush_us: rng.random_range(0..60),
                bandwidth: 0,
                volatile_cache: true,
                seed: rng.random(),
                ..SimConfig::default()
            };
            if let Some((_, at)) = vanish.filter(|&(d, _)| d == i) {
                model.faults.vanish_at_op = Some(at);
            }
            // 1 MiB reserved + 92 segments of 256 KiB: more than the most
            // the writers can append (1,600 batches of at most 2 blocks),
            // so the log never fills (nothing releases it here).
            SimDevice::new(&format!("wal{i}"), 4096, 6144, 64, model)
        })
        .collect()
}

/// Odd seeds write `sync` batches with forced unit access, even ones with
/// a write and then a flush.
fn opts(seed: u64) -> WalOptions {
    WalOptions {
        appliance_id: 7,
        segment_size: SEGMENT,
        max_batch: MAX_BATCH,
        in_flight_per_device: 2,
        fua: seed % 2 == 1,
        ring_capacity: 256,
        replay_from: Some(1),
        truncate_corrupt: false,
        copies: 1,
        lose_unreadable: 0,
        stale: Vec::new(),
        on_loss: None,
        on_device_loss: DeviceLoss::Degrade,
    }
}

fn run_seed(seed: u64, crash: Crash) -> Result<Seen, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let count = rng.random_range(1..=3);
    let copies = if count > 1 && rng.random_bool(0.5) {
        2
    } else {
        1
    };
    let vanish = (copies == 2 && rng.random_bool(0.5))
        .then(|| (rng.random_range(0..count), rng.random_range(0..300u64)));
    let devs = devices(&mut rng, count, vanish);
    // Recovery may read the log without the vanished device: the others
    // served the whole run, so they hold every batch.
    let o = WalOptions {
        copies,
        lose_unreadable: copies - 1,
        ..opts(seed)
    };
    let (wal, recovered) =
        match Wal::open(WalDevice::stripe(&devs), &o, ReactorConfig::unpinned("wal")) {
            Ok(opened) => opened,
            // The device vanished while recovery read and flushed the
            // (empty) log, before any append: refusing to open is right
            // (the engine names `stria device replace`), and the seed
            // has no run to check.
            Err(e) if vanish.is_some() && e.to_string().contains("vanished") => {
                return Ok(Seen {
                    recovered: 0,
                    kept: 0,
                    lost: 0,
                })
            }
            Err(e) => return Err(format!("open: {e}")),
        };
    assert!(recovered.records.is_empty());
    let wal = Arc::new(wal);
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let writers = rng.random_range(1..=4u32);
    let per_writer = rng.random_range(50..400u32);
    let crash_after = Duration::from_micros(rng.random_range(0..12_000));
    let mut handles = Vec::new();
    // In half the seeds the first writer hosts the log: its appends go
    // into the batches at once and it drives the devices while it waits.
    let hosted = rng.random_bool(0.5);
    for t in 0..writers {
        let (wal, acks) = (wal.clone(), acks.clone());
        let rng_seed = rng.random();
        handles.push(thread::spawn(move || {
            let host = (hosted && t == 0).then(|| wal.host().expect("no other host"));
            writer(seed, t, per_writer, rng_seed, &acks, || Some(wal.clone()));
            drop(host);
        }));
    }
    thread::sleep(crash_after);
    // Snapshot the acknowledgements at the instant of the crash: anything
    // acknowledged later could have been acknowledged after the devices died.
    let rebooted: Vec<SimDevice>;
    let acked: Vec<Ack>;
    match crash {
        Crash::PowerCut => {
            {
                let a = acks.lock().unwrap();
                for d in &devs {
                    d.cut_power();
                }
                acked = a.clone();
            }
            rebooted = devs.iter().map(|d| d.reboot(rng.random())).collect();
        }
        Crash::Process => {
            let a = acks.lock().unwrap();
            rebooted = devs
                .iter()
                .map(|d| d.reboot_after_process_crash(rng.random()))
                .collect();
            acked = a.clone();
        }
    }
    for h in handles {
        h.join().map_err(|_| "writer panicked".to_string())?;
    }
    drop(wal);

    let got = recover(
        &WalDevice::stripe(&rebooted),
        &stria::wal::recovery::RecoveryOptions {
            replay_from: Some(1),
            truncate_corrupt: false,
            segment_size: o.segment_size,
            max_batch: o.max_batch,
            appliance_id: o.appliance_id,
            lose_unreadable: o.lose_unreadable,
            stale: o.stale.clone(),
        },
    )
    .map_err(|e| format!("recovery refused: {e}"))?;
    let kept = check(seed, crash, &acked, &got.records)?;
    let appended = (writers * per_writer) as usize;
    // Recovery made the prefix durable: a power cut now loses nothing.
    let again: Vec<SimDevice> = rebooted
        .iter()
        .map(|d| {
            d.cut_power();
            d.reboot(seed)
        })
        .collect();
    let twice = recover(
        &WalDevice::stripe(&again),
        &RecoveryOptions {
            replay_from: Some(1),
            truncate_corrupt: false,
            segment_size: o.segment_size,
            max_batch: o.max_batch,
            appliance_id: o.appliance_id,
            lose_unreadable: o.lose_unreadable,
            stale: o.stale.clone(),
        },
    )
    .map_err(|e| format!("second recovery refused: {e}"))?;
    if twice.records != got.records {
        return Err(format!(
            "a second recovery after another power cut found {} records, the first {}",
            twice.records.len(),
            got.records.len()
        ));
    }
    Ok(Seen {
        recovered: got.records.len(),
        kept,
        lost: appended - got.records.len(),
    })
}

fn seeds(n: u64, crash: Crash) {
    run_seeds(&format!("{crash:?}"), n, move |seed| run_seed(seed, crash));
}

#[test]
fn power_cut_at_a_random_instant() {
    seeds(300, Crash::PowerCut);
}

#[test]
fn process_crash_at_a_random_instant() {
    seeds(300, Crash::Process);
}

#[test]
#[ignore = "soak: thousands of seeds; run with --release -- --ignored"]
fn soak_power_cut() {
    seeds(soak_seeds(), Crash::PowerCut);
}

#[test]
#[ignore = "soak: thousands of seeds; run with --release -- --ignored"]
fn soak_process_crash() {
    seeds(soak_seeds(), Crash::Process);
}

/// Seeds per soak test: STRIA_SOAK_SEEDS, or 5,000.
fn soak_seeds() -> u64 {
    std::env::var("STRIA_SOAK_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000)
}
