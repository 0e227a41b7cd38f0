//! Typed keys through a crash, on simulated devices: a model client runs
//! commands (RPUSH, SADD and ZADD of numbered elements, SET with a short
//! or a long expiry, SPOP of a large set) on a shard over the real
//! engine, each reply "sent" only once what it depends on is
//! acknowledged; the power is cut (or the process dies) at a random
//! moment and the engine reopens on what the devices kept. Then every
//! collection holds a prefix of what was sent, at least every element a
//! sent reply acknowledged, its count agrees with its elements (both
//! orders of a sorted set), no key with a short expiry is back, every
//! acknowledged long-lived key is, and the large set lacks exactly the
//! members of a prefix of its pops, every sent one included.
//!
//! 100 seeds of each crash; `STRIA_SEED=n` replays one.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{conn_on, run_command, shared_on};
use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;
use crate::server::metrics::testing;
use crate::server::resp::Reply;
use crate::server::shard::crash_tests::{crashed, each_seed, Crash};
use crate::server::shard::Deps;
use crate::server::Shared;
use crate::wal::Notify;

/// What a sent reply acknowledged.
enum Op {
    /// Element `i` of collection `c` (0: list, 1: set, 2: sorted set).
    Push(usize, usize),
    /// Long-lived key `i`.
    Long(usize),
    /// Pop `i` of the large set.
    Pop(usize),
    /// Anything else (short-lived keys).
    Other,
}

const NAMES: [&str; 3] = ["list", "set", "zset"];

/// The large set the model pops from, and its members before the pops:
/// more than SPOP reads whole, so its pops read runs of members ahead.
const POOL: &str = "pool";
const POOL_SIZE: usize = 1500;

fn elem(i: usize) -> String {
    format!("e{i:05}")
}

fn strings(r: Reply) -> Vec<String> {
    match r {
        Reply::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(n) => n,
        other => panic!("{other:?}"),
    }
}

fn run(seed: u64, crash: Crash) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let devs = testing::sim_devices(&testing::model(seed));
    let notify: Arc<dyn Notify> = crate::server::shard::tests::notify();
    let mut sent = [0usize; 3];
    let mut acked = [0usize; 3];
    let mut long_acked = Vec::new();
    let mut longs = 0;
    let mut popped: Vec<String> = Vec::new();
    let mut pops_acked = 0;
    let devs2: EngineDevices<SimDevice>;
    {
        let shared = shared_on(&devs)?;
        let (shard, mut conn) = conn_on(&shared, 1);
        // The set to pop from, acknowledged before the crash can come.
        let mut fill = vec!["SADD".to_string(), POOL.to_string()];
        fill.extend((0..POOL_SIZE).map(elem));
        let (reply, deps) = run_command(&mut conn, &fill);
        if int(reply) != POOL_SIZE as i64 {
            return Err(format!("seed {seed}: the pool was not made"));
        }
        shard.submit(&notify);
        while !deps.ready() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(deps);
        shard.retire();
        let mut waiting: Vec<(Op, Deps<'_>)> = Vec::new();
        for _ in 0..rng.random_range(1..600) {
            let (args, op) = match rng.random_range(0..6) {
                5 => (vec!["SPOP".into(), POOL.into()], Op::Pop(popped.len())),
                c @ 0..=2 => {
                    let i = sent[c];
                    sent[c] += 1;
                    let args = match c {
                        0 => vec!["RPUSH".into(), NAMES[0].into(), elem(i)],
                        1 => vec!["SADD".into(), NAMES[1].into(), elem(i)],
                        _ => vec!["ZADD".into(), NAMES[2].into(), i.to_string(), elem(i)],
                    };
                    (args, Op::Push(c, i))
                }
                3 => {
                    longs += 1;
                    let k = format!("long{}", longs - 1);
                    (
                        vec!["SET".into(), k, "v".into(), "EX".into(), "100000".into()],
                        Op::Long(longs - 1),
                    )
                }
                _ => (
                    vec![
                        "SET".into(),
                        format!("short{}", rng.random_range(0..50)),
                        "v".into(),
                        "PX".into(),
                        "1".into(),
                    ],
                    Op::Other,
                ),
            };
            let (reply, deps) = run_command(&mut conn, &args);
            if reply.is_error() {
                return Err(format!("seed {seed}: {args:?} failed: {reply:?}"));
            }
            if let Op::Pop(_) = op {
                match reply {
                    Reply::Bulk(m) => popped.push(String::from_utf8(m).unwrap()),
                    other => return Err(format!("seed {seed}: SPOP answered {other:?}")),
                }
            }
            waiting.push((op, deps));
            if rng.random_range(0..5) == 0 {
                shard.submit(&notify);
                if rng.random_range(0..4) == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(rng.random_range(0..300)));
                }
            }
            // Replies in order: the first not ready holds the rest.
            while waiting.first().is_some_and(|(_, d)| d.ready()) {
                let (op, d) = waiting.remove(0);
                if d.failure().is_some() {
                    continue;
                }
                match op {
                    Op::Push(c, i) => acked[c] = acked[c].max(i + 1),
                    Op::Long(i) => long_acked.push(i),
                    Op::Pop(i) => pops_acked = pops_acked.max(i + 1),
                    Op::Other => {}
                }
            }
            shard.retire();
        }
        shard.submit(&notify);
        devs2 = crashed(&devs, crash, seed);
        drop(waiting);
        std::mem::forget(conn);
        std::mem::forget(shard);
        let Shared { engine, .. } = shared;
        engine.abandon();
    }
    // Short expiries have all passed.
    std::thread::sleep(std::time::Duration::from_millis(3));
    let shared = shared_on(&devs2).map_err(|e| format!("{crash:?} seed {seed}: reopening: {e}"))?;
    let (_, mut conn) = conn_on(&shared, 2);
    let mut q = |args: &[&str]| {
        run_command(
            &mut conn,
            &args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        )
        .0
    };
    let ctx = format!("{crash:?} seed {seed}");
    let lists = [
        (
            int(q(&["LLEN", NAMES[0]])),
            strings(q(&["LRANGE", NAMES[0], "0", "-1"])),
        ),
        (int(q(&["SCARD", NAMES[1]])), {
            // In no particular order.
            let mut m = strings(q(&["SMEMBERS", NAMES[1]]));
            m.sort();
            m
        }),
        (
            int(q(&["ZCARD", NAMES[2]])),
            strings(q(&["ZRANGE", NAMES[2], "0", "-1"])),
        ),
    ];
    let by_lex = strings(q(&["ZRANGEBYLEX", NAMES[2], "-", "+"]));
    if by_lex != lists[2].1 {
        return Err(format!(
            "{ctx}: the sorted set's orders differ: {:?} and {by_lex:?}",
            lists[2].1
        ));
    }
    for (c, (count, members)) in lists.iter().enumerate() {
        let want: Vec<String> = (0..members.len()).map(elem).collect();
        if *members != want || *count != members.len() as i64 {
            return Err(format!(
                "{ctx}: {} holds {members:?} and counts {count}: not a prefix of what was sent",
                NAMES[c]
            ));
        }
        if members.len() < acked[c] || members.len() > sent[c] {
            return Err(format!(
                "{ctx}: {} holds {} elements; {} were acknowledged, {} sent",
                NAMES[c],
                members.len(),
                acked[c],
                sent[c]
            ));
        }
    }
    // The pool lacks what a prefix of the pops took, every sent one
    // included, and nothing else; its count agrees.
    let pool = strings(q(&["SMEMBERS", POOL]));
    let count = int(q(&["SCARD", POOL]));
    let mut gone: Vec<String> = (0..POOL_SIZE).map(elem).collect();
    gone.retain(|m| !pool.contains(m));
    let mut took = popped[..gone.len().min(popped.len())].to_vec();
    took.sort();
    if count != pool.len() as i64
        || gone.len() < pops_acked
        || gone.len() > popped.len()
        || took != gone
    {
        return Err(format!(
            "{ctx}: the pool holds {} (counts {count}); {} of {} pops acknowledged, and it lacks {gone:?}, not the first pops {:?}",
            pool.len(),
            pops_acked,
            popped.len(),
            &popped[..gone.len().min(popped.len())]
        ));
    }
    let keys = strings(q(&["KEYS", "short*"]));
    if !keys.is_empty() {
        return Err(format!("{ctx}: expired keys came back: {keys:?}"));
    }
    for i in long_acked {
        let ttl = int(q(&["TTL", &format!("long{i}")]));
        if ttl < 99_000 {
            return Err(format!("{ctx}: long{i} was acknowledged and has TTL {ttl}"));
        }
    }
    Ok(())
}

#[test]
fn typed_keys_survive_a_power_cut() {
    each_seed(|seed| run(seed, Crash::PowerCut));
}

#[test]
fn typed_keys_survive_a_process_crash() {
    each_seed(|seed| run(seed, Crash::Process));
}
