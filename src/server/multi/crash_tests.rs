//! Transactions through a crash, on simulated devices: a model client
//! moves amounts between 200 accounts with MULTI ... EXEC or with a Lua
//! script (EVAL), some
//! transactions touching all of them (so one turn's writes pass a WAL
//! group of whole commands, and only the transaction's own group keeps it
//! whole), each also counting itself in `done`. The power is cut (or the
//! process dies) at a random moment. After recovery the accounts still
//! sum to what they started with (no transaction is there in part), and
//! `done` is at least the number of EXECs whose replies were sent.
//!
//! 100 seeds of each crash; `STRIA_SEED=n` replays one.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;
use crate::server::cmd::tests::{conn_on, run_command, shared_on};
use crate::server::metrics::testing;
use crate::server::resp::Reply;
use crate::server::shard::crash_tests::{crashed, each_seed, Crash};
use crate::server::shard::Deps;
use crate::server::Shared;
use crate::wal::Notify;

const ACCOUNTS: usize = 200;
const START: i64 = 1000;

fn words(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A string reply's number; `None` for nil.
fn number(r: Reply) -> Result<Option<i64>, String> {
    let bytes = match r {
        Reply::Nil => return Ok(None),
        Reply::Bulk(v) => v,
        Reply::BulkFrom(v, at) => v[at..].to_vec(),
        other => return Err(format!("{other:?}")),
    };
    Ok(Some(String::from_utf8(bytes).unwrap().parse().unwrap()))
}

fn run(seed: u64, crash: Crash) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let devs = testing::sim_devices(&testing::model(seed));
    let notify: Arc<dyn Notify> = crate::server::shard::tests::notify();
    let ctx = format!("{crash:?} seed {seed}");
    let mut acked = 0i64;
    let devs2: EngineDevices<SimDevice>;
    {
        let shared = shared_on(&devs)?;
        let (shard, mut conn) = conn_on(&shared, 1);
        // The accounts, durable before anything moves.
        let mut mset = words(&["MSET"]);
        for a in 0..ACCOUNTS {
            mset.push(format!("acct{a}"));
            mset.push(START.to_string());
        }
        let (_, deps) = run_command(&mut conn, &mset);
        shard.submit(&notify);
        while !deps.ready() {
            std::thread::yield_now();
        }
        shard.retire();
        drop(deps);
        let mut waiting: Vec<Deps<'_>> = Vec::new();
        let mut sent = 0;
        for _ in 0..rng.random_range(1..120) {
            let touched = if rng.random_range(0..4) == 0 {
                ACCOUNTS
            } else {
                rng.random_range(2..8)
            };
            // Amounts that sum to zero over the accounts touched.
            let mut total = 0;
            let mut moves = Vec::new();
            for i in 0..touched {
                let a = if touched == ACCOUNTS {
                    i
                } else {
                    rng.random_range(0..ACCOUNTS)
                };
                let by = if i + 1 == touched {
                    -total
                } else {
                    rng.random_range(-50..50)
                };
                total += by;
                moves.push((format!("acct{a}"), by));
            }
            let deps = if rng.random_range(0..2) == 0 {
                run_command(&mut conn, &words(&["MULTI"]));
                for (a, by) in &moves {
                    let (r, _) = run_command(
                        &mut conn,
                        &["INCRBY".to_string(), a.clone(), by.to_string()],
                    );
                    if r != Reply::Status("QUEUED") {
                        return Err(format!("{ctx}: INCRBY in MULTI: {r:?}"));
                    }
                }
                run_command(&mut conn, &words(&["INCR", "done"]));
                let (r, deps) = run_command(&mut conn, &words(&["EXEC"]));
                match r {
                    Reply::Array(a) if a.len() == touched + 1 && !a.iter().any(Reply::is_error) => {
                    }
                    other => return Err(format!("{ctx}: EXEC: {other:?}")),
                }
                deps
            } else {
                let mut args = vec![
                    "EVAL".to_string(),
                    "for i = 1, #KEYS do redis.call('INCRBY', KEYS[i], ARGV[i]) end \
                     return redis.call('INCR', 'done')"
                        .to_string(),
                    moves.len().to_string(),
                ];
                args.extend(moves.iter().map(|(a, _)| a.clone()));
                args.extend(moves.iter().map(|(_, by)| by.to_string()));
                let (r, deps) = run_command(&mut conn, &args);
                if !matches!(r, Reply::Int(_)) {
                    return Err(format!("{ctx}: EVAL: {r:?}"));
                }
                deps
            };
            sent += 1;
            waiting.push(deps);
            if rng.random_range(0..8) == 0 {
                shard.submit(&notify);
                if rng.random_range(0..4) == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..300)));
                }
            }
            while waiting.first().is_some_and(|d| d.ready()) {
                if waiting.remove(0).failure().is_none() {
                    acked += 1;
                }
            }
            shard.retire();
        }
        shard.submit(&notify);
        devs2 = crashed(&devs, crash, seed);
        if acked > sent {
            return Err(format!("{ctx}: {acked} acknowledged of {sent} sent"));
        }
        drop(waiting);
        std::mem::forget(conn);
        std::mem::forget(shard);
        let Shared { engine, .. } = shared;
        engine.abandon();
    }
    let shared = shared_on(&devs2).map_err(|e| format!("{ctx}: reopening: {e}"))?;
    let (_, mut conn) = conn_on(&shared, 2);
    let mut sum = 0;
    for a in 0..ACCOUNTS {
        match number(run_command(&mut conn, &["GET".to_string(), format!("acct{a}")]).0) {
            Ok(Some(n)) => sum += n,
            other => return Err(format!("{ctx}: acct{a} is {other:?}")),
        }
    }
    if sum != START * ACCOUNTS as i64 {
        return Err(format!(
            "{ctx}: the accounts sum to {sum}, not {}: a transaction is there in part",
            START * ACCOUNTS as i64
        ));
    }
    let done = number(run_command(&mut conn, &words(&["GET", "done"])).0)
        .map_err(|e| format!("{ctx}: done is {e}"))?
        .unwrap_or(0);
    if done < acked {
        return Err(format!(
            "{ctx}: {done} transactions recovered, {acked} acknowledged"
        ));
    }
    Ok(())
}

#[test]
fn a_transaction_survives_a_power_cut_whole_or_not_at_all() {
    each_seed(|seed| run(seed, Crash::PowerCut));
}

#[test]
fn a_transaction_survives_a_process_crash_whole_or_not_at_all() {
    each_seed(|seed| run(seed, Crash::Process));
}
