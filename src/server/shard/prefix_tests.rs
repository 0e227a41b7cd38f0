//! The order of the shard's writes through a power cut, on simulated
//! devices: commands write the same sequence number to one to four keys
//! spread over every region (an MSET), turns end at random, and the power
//! is cut at a random moment. What the reopened engine holds must be the
//! state after some prefix of the commands, in the order the shard
//! applied them (no command half there, none there without every earlier
//! one), and that prefix must include every command whose reply went out.
//! 100 seeds; `STRIA_SEED=n` replays one.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::crash_tests::{crashed, each_seed, Crash};
use super::*;
use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;
use crate::server::metrics::testing;

/// Two keys in each of the three regions (split at "g" and "p").
const KEYS: [&[u8]; 6] = [b"a0", b"a1", b"h0", b"h1", b"q0", b"q1"];

/// A value naming command `seq`, padded so batches fill and seal often.
fn value(seq: u64) -> Vec<u8> {
    format!("{seq:>300}").into_bytes()
}

fn seq_of(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().trim().parse().unwrap()
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let devs = testing::sim_devices(&testing::model(seed));
    let notify = super::tests::notify();
    // Command `i` (from 1) wrote `history[i - 1]`.
    let mut history: Vec<Vec<usize>> = Vec::new();
    let mut told = 0u64;
    let devs2: EngineDevices<SimDevice>;
    {
        let engine = testing::open_any(&devs);
        let shard = Shard::new(&engine, 1 << 20);
        let mut waiting: Vec<(u64, Deps<'_>)> = Vec::new();
        for _ in 0..rng.random_range(1..1_500) {
            let seq = history.len() as u64 + 1;
            let mut keys: Vec<usize> = (0..KEYS.len()).collect();
            keys.shuffle(&mut rng);
            keys.truncate(rng.random_range(1..=4));
            let mut deps = Deps::default();
            let writes = keys
                .iter()
                .map(|&k| (KEYS[k].to_vec(), Some(value(seq))))
                .collect();
            shard.write(Durability::Sync, writes, &mut deps);
            history.push(keys);
            waiting.push((seq, deps));
            if rng.random_range(0..4) == 0 {
                shard.submit(&notify);
                if rng.random_range(0..4) == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..200)));
                }
            }
            waiting.retain(|(seq, d)| {
                if !d.ready() {
                    return true;
                }
                if d.failure().is_none() {
                    told = told.max(*seq);
                }
                false
            });
            shard.retire();
        }
        shard.submit(&notify);
        devs2 = crashed(&devs, Crash::PowerCut, seed);
        drop(waiting);
        std::mem::forget(shard);
        engine.abandon();
    }
    let engine = testing::open_any(&devs2);
    let mut got = Vec::new();
    for k in KEYS {
        got.push(
            engine
                .get(k)
                .map_err(|e| e.to_string())?
                .map(|v| seq_of(&v)),
        );
    }
    let prefix = got.iter().flatten().copied().max().unwrap_or(0);
    let mut want: Vec<Option<u64>> = vec![None; KEYS.len()];
    for (i, keys) in history.iter().take(prefix as usize).enumerate() {
        for &k in keys {
            want[k] = Some(i as u64 + 1);
        }
    }
    if got != want {
        return Err(format!(
            "seed {seed}: after the power cut the keys hold {got:?}, not the state after the first {prefix} commands, {want:?}"
        ));
    }
    if prefix < told {
        return Err(format!(
            "seed {seed}: command {told}'s reply went out, yet the log kept only the first {prefix}"
        ));
    }
    engine.close().map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn a_power_cut_keeps_a_prefix_of_the_shards_commands() {
    each_seed(run);
}
