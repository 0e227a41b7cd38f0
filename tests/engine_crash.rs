//! The engine crash checker: the real engine on simulated devices, writers
//! putting and deleting at random durability levels while flushes,
//! compactions, manifest checkpoints and reads run, a power cut or a
//! process crash at a random instant, then a reopen from what the devices
//! kept.
//!
//! Every key belongs to one writer, so its writes have an order. Checked
//! for every key after the reopen: the value read is the one of a write
//! at or after the last write acknowledged at a level that must survive
//! the crash (`sync` for a power cut, `write` or `sync` for a process
//! crash), and at or before the last write attempted: acknowledged data
//! is there (or newer data), nothing that was never written appears, and
//! a deleted key stays deleted unless written again. A scan agrees with
//! the gets.
//!
//! Each crash runs with a roomy log (16 MiB a device, never full in a run)
//! and with a small one (four 32 KiB segments a device) that fills within
//! milliseconds, memstores frozen for it only once it is full: flushes
//! then pass over writes that wait for log space. A third of the seeds
//! with two WAL devices write every batch to both (`wal.copies: 2`). In
//! every fifth seed the writers keep to a few keys each, so a memstore
//! holds many versions of a key and `sync` writes drop the older ones.
//!
//! `cargo test --test engine_crash` runs 150 seeds of each; the soak,
//! `cargo test --release --test engine_crash -- --ignored`, runs
//! `STRIA_SOAK_SEEDS` (default 2,000) of each. A failing seed is printed;
//! `STRIA_SEED=n` replays one.

#[path = "common/engine_env.rs"]
mod engine_env;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_env::{options, Devices};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stria::config::{Durability, SimConfig};
use stria::device::sim::SimDevice;
use stria::engine::Engine;
use stria::reactor::ReactorConfig;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Crash {
    PowerCut,
    Process,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum WalSize {
    Roomy,
    Small,
}

/// Each writer's keys and their writes, in order.
type Log = Arc<Mutex<BTreeMap<Vec<u8>, Vec<Write>>>>;

/// One write of a key: its value (`None`: a delete) and the level it was
/// acknowledged at (`None`: not acknowledged).
#[derive(Clone, Debug)]
struct Write {
    value: Option<Vec<u8>>,
    acked: Option<Durability>,
}

const WRITERS: u64 = 3;
const KEYS_PER_WRITER: u64 = 120;
/// Every fifth seed's writers write only this many keys each: each key
/// then has many versions in one memstore, and `sync` writes drop the
/// older ones (they do once a memstore holds 8 of a key).
const HOT_KEYS_PER_WRITER: u64 = 2;

fn key(writer: u64, i: u64) -> Vec<u8> {
    // Spread over the regions (split at "g" and "p").
    let lead = [b'c', b'j', b's'][(i % 3) as usize] as char;
    format!("{lead}{writer}-{i:04}").into_bytes()
}

#[derive(Default, Debug)]
struct Seen {
    keys: u64,
    acked: u64,
    crashed_in_job: u64,
    flushes: u64,
    partial_flushes: u64,
}

fn run_seed(seed: u64, crash: Crash, wal: WalSize) -> Result<Seen, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let model = SimConfig {
        write_us: rng.random_range(0..30),
        read_us: rng.random_range(0..20),
        flush_us: rng.random_range(0..60),
        bandwidth: 0,
        volatile_cache: true,
        seed: rng.random(),
        ..SimConfig::default()
    };
    let mut devs = Devices::new(rng.random_range(1..=2), rng.random_range(1..=2), 32, &model);
    let mut opts = options();
    if wal == WalSize::Small {
        // 1 MiB reserved, then four segments of 32 KiB.
        for (i, d) in devs.wal.iter_mut().enumerate() {
            *d = SimDevice::new(&format!("wal{i}"), 4096, 256 + 4 * 8, 64, model.clone());
        }
        opts.wal.segment_size = 32 << 10;
        opts.log_freeze_at = 1.0;
    }
    opts.flush_size = rng.random_range(8..48) << 10;
    opts.global_limit = 256 << 10;
    opts.compact_at = 3;
    opts.manifest_bytes = 256 << 10;
    opts.flush_reactors = (0..rng.random_range(1..=2))
        .map(|i| ReactorConfig::unpinned(format!("flush{i}")))
        .collect();
    opts.wal.fua = seed % 2 == 1;
    // A third of the seeds with two WAL devices write every batch to both.
    if devs.wal.len() == 2 && seed % 3 == 0 {
        opts.wal.copies = 2;
    }
    let (e, _) = Engine::open(devs.engine_devices(), opts.clone())
        .map_err(|e| format!("first open: {e}"))?;
    let e = Arc::new(e);
    let stop = Arc::new(AtomicBool::new(false));
    let logs: Vec<Log> = (0..WRITERS).map(|_| Arc::default()).collect();
    let mut threads = Vec::new();
    let keys_per_writer = if seed % 5 == 4 {
        HOT_KEYS_PER_WRITER
    } else {
        KEYS_PER_WRITER
    };
    for w in 0..WRITERS {
        let (e, stop, log) = (e.clone(), stop.clone(), logs[w as usize].clone());
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((w + 1) * 0x9e37_79b9));
        threads.push(std::thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                let k = key(w, rng.random_range(0..keys_per_writer));
                // Every fourth seed writes no `sync` at all: the log then
                // stays volatile while flushes record their marks.
                let top = if seed % 4 == 2 { 11 } else { 20 };
                let level = match rng.random_range(0..top) {
                    0 => Durability::None,
                    1..=3 => Durability::Async,
                    4..=10 => Durability::Write,
                    _ => Durability::Sync,
                };
                let value = (rng.random_range(0..8) != 0).then(|| {
                    let mut v = format!("w{w}-{seq}-").into_bytes();
                    v.resize(rng.random_range(v.len()..600), b'.');
                    v
                });
                let at = {
                    let mut l = log.lock().unwrap();
                    let writes = l.entry(k.clone()).or_default();
                    writes.push(Write {
                        value: value.clone(),
                        acked: None,
                    });
                    writes.len() - 1
                };
                let done = match &value {
                    Some(v) => e.put(&k, v, Some(level)),
                    None => e.delete(&k, Some(level)),
                };
                if done.is_err() {
                    break;
                }
                log.lock().unwrap().get_mut(&k).unwrap()[at].acked = Some(level);
            }
        }));
    }
    let reads = Arc::new(AtomicU64::new(0));
    {
        let (e, stop, reads) = (e.clone(), stop.clone(), reads.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xdead);
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let k = key(
                    rng.random_range(0..WRITERS),
                    rng.random_range(0..keys_per_writer),
                );
                let _ = e.get(&k);
                if rng.random_range(0..20) == 0 {
                    let _ = e.scan(&k, None, 50);
                }
                reads.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        }));
    }
    std::thread::sleep(Duration::from_micros(rng.random_range(2_000..40_000)));
    let stats = e.stats();
    let in_job = stats.running_jobs > 0;
    let after = match crash {
        Crash::PowerCut => {
            devs.cut_power();
            None
        }
        Crash::Process => Some(devs.after_process_crash(seed)),
    };
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().map_err(|_| "a thread panicked".to_string())?;
    }
    Arc::into_inner(e).expect("threads are done").abandon();
    let devs2 = after.unwrap_or_else(|| devs.reboot(seed));

    let (e, report) =
        Engine::open(devs2.engine_devices(), opts.clone()).map_err(|e| format!("reopen: {e}"))?;
    let mut seen = Seen {
        crashed_in_job: u64::from(in_job),
        flushes: stats.flushes,
        partial_flushes: stats.partial_flushes,
        ..Seen::default()
    };
    let mut expected_scan = BTreeMap::new();
    for log in &logs {
        for (k, writes) in log.lock().unwrap().iter() {
            let must = writes
                .iter()
                .rposition(|w| {
                    matches!(
                        (w.acked, crash),
                        (Some(Durability::Sync), _) | (Some(Durability::Write), Crash::Process)
                    )
                })
                .map_or(0, |j| j + 1);
            let got = e
                .get(k)
                .map_err(|err| format!("get {}: {err}", String::from_utf8_lossy(k)))?;
            // Candidates: write j (1-based) for j in must..=len; j = 0 is "never written".
            let ok = (must..=writes.len()).any(|j| {
                let v = if j == 0 {
                    None
                } else {
                    writes[j - 1].value.clone()
                };
                v == got
            });
            if !ok {
                return Err(format!(
                    "key {}: read {:?}, but the last write that had to survive is #{must} of {:?} ({report})",
                    String::from_utf8_lossy(k),
                    got.as_ref().map(|v| String::from_utf8_lossy(v).into_owned()),
                    writes
                        .iter()
                        .map(|w| (w.value.as_ref().map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()), w.acked))
                        .collect::<Vec<_>>()
                ));
            }
            if let Some(v) = got {
                expected_scan.insert(k.clone(), v);
            }
            seen.keys += 1;
            seen.acked += u64::from(must > 0);
        }
    }
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = e
        .scan(b"", None, usize::MAX)
        .map_err(|err| format!("scan: {err}"))?
        .into_iter()
        .collect();
    if scanned != expected_scan {
        return Err(format!(
            "the scan ({} keys) disagrees with the gets ({} keys)",
            scanned.len(),
            expected_scan.len()
        ));
    }
    // The engine goes on from what it recovered: new writes get LSNs no
    // block file claims (a region's flush mark above the recovered log
    // would make the next open skip them), and they survive a restart.
    let mut after: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for w in 0..WRITERS {
        for i in (0..KEYS_PER_WRITER).step_by(7) {
            let k = key(w, i);
            let v = format!("after-{seed}-{w}-{i}").into_bytes();
            e.put(&k, &v, Some(Durability::Sync))
                .map_err(|err| format!("put after reopen: {err}"))?;
            after.push((k, v));
        }
    }
    e.flush_all()
        .map_err(|e| format!("flush after reopen: {e}"))?;
    e.put(&after[0].0, b"last", Some(Durability::Sync))
        .map_err(|err| format!("put after reopen: {err}"))?;
    after[0].1 = b"last".to_vec();
    e.close().map_err(|e| format!("close: {e}"))?;
    let (e, report) = Engine::open(devs2.engine_devices(), opts.clone())
        .map_err(|e| format!("second reopen: {e}"))?;
    for (k, v) in &after {
        let got = e
            .get(k)
            .map_err(|err| format!("get after restart: {err}"))?;
        if got.as_ref() != Some(v) {
            return Err(format!(
                "key {} written after the crash reads {:?} after a restart ({report})",
                String::from_utf8_lossy(k),
                got.map(|g| String::from_utf8_lossy(&g).into_owned())
            ));
        }
    }
    e.close().map_err(|e| format!("close: {e}"))?;
    Ok(seen)
}

fn run_seeds(count: u64, crash: Crash, wal: WalSize) {
    let seeds: Vec<u64> = match std::env::var("STRIA_SEED") {
        Ok(s) => vec![s.parse().expect("STRIA_SEED is a number")],
        Err(_) => (0..count).collect(),
    };
    let mut total = Seen::default();
    let mut slowest = (Duration::ZERO, 0u64);
    for &seed in &seeds {
        let started = std::time::Instant::now();
        let result = run_seed(seed, crash, wal);
        slowest = slowest.max((started.elapsed(), seed));
        if std::env::var_os("STRIA_SEED_TIMES").is_some() {
            eprintln!(
                "{crash:?} {wal:?} seed {seed}: {:?} {:?}",
                started.elapsed(),
                result.as_ref().map(|s| s.partial_flushes)
            );
        }
        match result {
            Ok(s) => {
                total.keys += s.keys;
                total.acked += s.acked;
                total.crashed_in_job += s.crashed_in_job;
                total.flushes += s.flushes;
                total.partial_flushes += s.partial_flushes;
            }
            Err(why) => panic!("{crash:?} {wal:?} log seed {seed}: {why}"),
        }
    }
    eprintln!(
        "{crash:?}, {wal:?} log: {} seeds, {} keys checked ({} with a write that had to survive), {} flushes and {} passes of a full log before the crashes, {} crashes during a flush or compaction; the slowest seed, {}, took {:.1?}",
        seeds.len(),
        total.keys,
        total.acked,
        total.flushes,
        total.partial_flushes,
        total.crashed_in_job,
        slowest.1,
        slowest.0
    );
    if wal == WalSize::Small && seeds.len() >= 50 {
        assert!(
            total.partial_flushes > 0,
            "no flush passed over writes waiting for log space"
        );
    }
}

fn soak_seeds() -> u64 {
    std::env::var("STRIA_SOAK_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

#[test]
fn power_cut_at_a_random_instant() {
    run_seeds(150, Crash::PowerCut, WalSize::Roomy);
}

#[test]
fn process_crash_at_a_random_instant() {
    run_seeds(150, Crash::Process, WalSize::Roomy);
}

#[test]
fn power_cut_while_the_log_fills() {
    run_seeds(150, Crash::PowerCut, WalSize::Small);
}

#[test]
fn process_crash_while_the_log_fills() {
    run_seeds(150, Crash::Process, WalSize::Small);
}

#[test]
#[ignore = "soak: thousands of seeds"]
fn soak_power_cut() {
    run_seeds(soak_seeds(), Crash::PowerCut, WalSize::Roomy);
    run_seeds(soak_seeds(), Crash::PowerCut, WalSize::Small);
}

#[test]
#[ignore = "soak: thousands of seeds"]
fn soak_process_crash() {
    run_seeds(soak_seeds(), Crash::Process, WalSize::Roomy);
    run_seeds(soak_seeds(), Crash::Process, WalSize::Small);
}
