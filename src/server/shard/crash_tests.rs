//! The shard's promise through a crash, on simulated devices: a model
//! client INCRs and reads counters on a shard over the real engine, each
//! reply "sent" only once its deps are acknowledged; at a random moment
//! the power is cut (or the process dies); the engine reopens on what the
//! devices kept. Every counter must be at least the highest value a sent
//! reply revealed, and at most the highest value ever written.
//!
//! INCRs are at `sync` (power cut) or at `sync` and `write` (process
//! crash), the levels that survive each; reads go on at any level, and
//! wait for what they read. 100 seeds of each; `STRIA_SEED=n` replays one.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;
use crate::server::metrics::testing;

const COUNTERS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Crash {
    PowerCut,
    Process,
}

fn key(c: usize) -> Vec<u8> {
    format!("counter:{c}").into_bytes()
}

fn number(v: Option<Vec<u8>>) -> i64 {
    v.map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

fn run(seed: u64, crash: Crash) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let devs = testing::sim_devices(&testing::model(seed));
    let notify = super::tests::notify();
    let mut told = [0i64; COUNTERS];
    let mut written = [0i64; COUNTERS];
    let devs2: EngineDevices<SimDevice>;
    {
        let engine = testing::open_any(&devs);
        let shard = Shard::new(&engine, 1 << 20);
        let mut waiting: Vec<(usize, i64, Deps<'_>)> = Vec::new();
        let ops = rng.random_range(1..2_000);
        for _ in 0..ops {
            let c = rng.random_range(0..COUNTERS);
            let mut deps = Deps::default();
            let now = number(shard.get(&key(c), &mut deps).map_err(|e| e.to_string())?);
            if rng.random_range(0..3) > 0 {
                let level = match (crash, rng.random_range(0..2)) {
                    (Crash::Process, 0) => Durability::Write,
                    _ => Durability::Sync,
                };
                let next = now + 1;
                shard.write(
                    level,
                    vec![(key(c), Some(next.to_string().into_bytes()))],
                    &mut deps,
                );
                written[c] = written[c].max(next);
                waiting.push((c, next, deps));
            } else {
                waiting.push((c, now, deps));
            }
            // The end of a turn, now and then.
            if rng.random_range(0..6) == 0 {
                shard.submit(&notify);
                if rng.random_range(0..4) == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..300)));
                }
            }
            // Replies whose writes are acknowledged go out.
            waiting.retain(|(c, v, d)| {
                if !d.ready() {
                    return true;
                }
                if d.failure().is_none() {
                    told[*c] = told[*c].max(*v);
                }
                false
            });
            shard.retire();
        }
        shard.submit(&notify);
        // The crash: what the devices keep is taken now, while the engine
        // still runs (as the next process would find them).
        devs2 = crashed(&devs, crash, seed);
        // Replies not yet out are never sent; the engine goes as a
        // crashing process would.
        drop(waiting);
        std::mem::forget(shard);
        engine.abandon();
    }
    let engine = testing::open_any(&devs2);
    for c in 0..COUNTERS {
        let got = number(engine.get(&key(c)).map_err(|e| e.to_string())?);
        if got < told[c] || got > written[c] {
            return Err(format!(
                "{crash:?} seed {seed}: counter {c} is {got} after the crash; a reply told {} and {} was the last written",
                told[c], written[c]
            ));
        }
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// What the devices keep after `crash`, as the next process finds them.
pub(crate) fn crashed(
    devs: &EngineDevices<SimDevice>,
    crash: Crash,
    seed: u64,
) -> EngineDevices<SimDevice> {
    let after = |d: &SimDevice, i: u64| match crash {
        Crash::PowerCut => {
            d.cut_power();
            d.reboot(seed + i)
        }
        Crash::Process => d.reboot_after_process_crash(seed + i),
    };
    EngineDevices {
        wal: devs.wal.iter().zip(0..).map(|(d, i)| after(d, i)).collect(),
        data: devs
            .data
            .iter()
            .zip(100..)
            .map(|(d, i)| after(d, i))
            .collect(),
    }
}

/// Runs `run` on seeds 0..100, or on `STRIA_SEED` alone; panics with the
/// first failure.
pub(crate) fn each_seed(run: impl Fn(u64) -> Result<(), String>) {
    let seeds: Vec<u64> = match std::env::var("STRIA_SEED") {
        Ok(s) => vec![s.parse().expect("STRIA_SEED is a number")],
        Err(_) => (0..100).collect(),
    };
    for seed in seeds {
        if let Err(why) = run(seed) {
            panic!("{why}");
        }
    }
}

#[test]
fn what_replies_revealed_survives_a_power_cut() {
    each_seed(|seed| run(seed, Crash::PowerCut));
}

#[test]
fn what_replies_revealed_survives_a_process_crash() {
    each_seed(|seed| run(seed, Crash::Process));
}
