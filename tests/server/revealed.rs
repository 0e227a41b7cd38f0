//! What a reply reveals survives: clients INCR shared counters and read
//! them (INCR replies and GETs) while the server is killed -9 at a seeded
//! random moment; after the restart each counter is at least the highest
//! value any client was told. Incrementers run at `sync` and at `write`
//! (both survive a process crash); one reader runs at `none`, whose own
//! writes need not survive, but whose reads reveal others' writes and so
//! wait for them like anyone's. On `psync` devices, and on `io_uring`
//! with the shard reaping the log's completions (`wal.submit: shard`) and
//! with the WAL reactor submitting (`reactor`).
//!
//! And the shard keeps commands atomic and isolated: concurrent MSETs of
//! the same keys in different orders never leave a mix, and concurrent
//! INCRs of one key lose no increment. `STRIA_SEED=n` replays a run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::Connection;

use crate::harness::{tempdir, Map, Server};

const COUNTERS: usize = 3;
const ROUNDS: u64 = 3;

fn counter(i: usize) -> String {
    format!("counter:{i}")
}

/// The highest value of each counter a client was told.
type Told = [i64; COUNTERS];

/// INCRs (or, for a reader, GETs) until the server is gone; every value a
/// reply told is recorded before the next request.
fn client(mut c: Connection, level: &str, reads_only: bool, seed: u64, acks: &AtomicUsize) -> Told {
    let mut told = [0i64; COUNTERS];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    if redis::cmd("STRIA.DURABILITY")
        .arg(level)
        .query::<()>(&mut c)
        .is_err()
    {
        return told;
    }
    for _ in 0..200_000 {
        let i = rng.random_range(0..COUNTERS);
        let got: redis::RedisResult<Option<i64>> = if reads_only || rng.random_range(0..4) == 0 {
            redis::cmd("GET").arg(counter(i)).query(&mut c)
        } else {
            redis::cmd("INCR").arg(counter(i)).query(&mut c)
        };
        match got {
            Ok(v) => {
                told[i] = told[i].max(v.unwrap_or(0));
                acks.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => break,
        }
    }
    told
}

#[test]
fn every_value_a_reply_revealed_survives_sigkill() {
    revealed_values_survive_sigkill(&Map::default());
}

#[test]
fn every_value_revealed_survives_sigkill_with_the_shard_reaping_io_uring() {
    revealed_values_survive_sigkill(&Map {
        backend: "uring",
        ..Map::default()
    });
}

#[test]
fn every_value_revealed_survives_sigkill_with_the_wal_reactor_submitting() {
    revealed_values_survive_sigkill(&Map {
        backend: "uring",
        wal_submit: "reactor",
        ..Map::default()
    });
}

fn revealed_values_survive_sigkill(map: &Map) {
    let seed = std::env::var("STRIA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17u64);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempdir();
    let mut floor: Told = [0; COUNTERS];
    for round in 0..=ROUNDS {
        let s = Server::start(dir.path(), map);
        let mut c = s.client();
        for (i, f) in floor.iter_mut().enumerate() {
            let least = *f;
            let v: Option<i64> = redis::cmd("GET").arg(counter(i)).query(&mut c).unwrap();
            let v = v.unwrap_or(0);
            assert!(
                v >= least,
                "seed {seed}, round {round}: {} is {v} after the kill, but a client was told {least}",
                counter(i)
            );
            *f = v;
        }
        if round == ROUNDS {
            s.stop();
            break;
        }
        let acks = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let clients = [
            ("sync", false),
            ("write", false),
            ("sync", false),
            ("none", true),
        ];
        for (n, (level, reads_only)) in clients.into_iter().enumerate() {
            let (tx, acks, c) = (tx.clone(), acks.clone(), s.client());
            let client_seed = seed ^ (round << 8) ^ n as u64;
            std::thread::spawn(move || {
                let _ = tx.send(client(c, level, reads_only, client_seed, &acks));
            });
        }
        drop(tx);
        let started = Instant::now();
        while acks.load(Ordering::Relaxed) < 50 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "round {round}: no replies within 30 s\n{}",
                s.printed.all()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(50..=400)));
        s.kill9();
        for _ in 0..clients.len() {
            let told = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a client did not stop after the kill");
            for i in 0..COUNTERS {
                floor[i] = floor[i].max(told[i]);
            }
        }
        println!(
            "round {round}: {} replies before the kill; told at least {floor:?}",
            acks.load(Ordering::Relaxed)
        );
    }
}

#[test]
fn concurrent_msets_never_leave_a_mix_and_incrs_lose_nothing() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    const KEYS: usize = 5;
    const WRITERS: usize = 4;
    const ROUNDS: i64 = 300;
    let keys: Vec<String> = (0..KEYS).map(|k| format!("mix:{k}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (mut c, keys, stop) = (s.client(), keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
                assert!(
                    got.iter().all(|v| *v == got[0]),
                    "an MGET saw a mix of MSETs: {got:?}"
                );
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (mut c, keys) = (s.client(), keys.clone());
            std::thread::spawn(move || {
                for r in 0..ROUNDS {
                    // Each writer its own order of the keys.
                    let mut order: Vec<&String> = keys.iter().collect();
                    order.rotate_left(w % KEYS);
                    if w % 2 == 1 {
                        order.reverse();
                    }
                    let mut cmd = redis::cmd("MSET");
                    for k in order {
                        cmd.arg(k).arg(format!("w{w}-r{r}"));
                    }
                    cmd.query::<()>(&mut c).unwrap();
                    let _: i64 = redis::cmd("INCR").arg("mix:count").query(&mut c).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    let mut c = s.client();
    let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
    assert!(
        got[0].is_some() && got.iter().all(|v| *v == got[0]),
        "{got:?}"
    );
    let count: i64 = redis::cmd("GET").arg("mix:count").query(&mut c).unwrap();
    assert_eq!(count, WRITERS as i64 * ROUNDS, "INCRs were lost");
    assert!(reads > 0);
    s.stop();
}
