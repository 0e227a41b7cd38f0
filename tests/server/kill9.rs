//! SIGKILL while clients write at `sync`: every write a client was told
//! `OK` about is there after the restart, with its value, and nothing that
//! was never sent appears; no expired key comes back, and every
//! collection's count agrees with its elements (both orders of a sorted
//! set), and a member a set's SPOP handed out is gone, once.
//!
//! Five rounds on one folder: each starts the server on what the rounds
//! before left (checking all of it), runs four writers, and kills the
//! server after a seeded random 100-800 ms. `STRIA_SEED=n` replays a run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::Connection;

use crate::harness::{stria, tempdir, Map, Server};

const ROUNDS: u32 = 5;
const WRITERS: u32 = 4;
/// A writer stops by itself after this many writes.
const MAX_WRITES: usize = 20_000;
/// Keys a pipelining writer sends at once.
const PIPE: usize = 16;

/// The value written to `key`: derived from it, of a length it decides.
fn value_of(key: &str) -> String {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let len = 8 + (h % 700) as usize;
    let unit = format!("{key}/{h:016x};");
    unit.repeat(len / unit.len() + 1)[..len].to_string()
}

fn key(round: u32, writer: u32, i: usize) -> String {
    format!("r{round}:t{writer}:{i:06}")
}

/// What one writer did.
#[derive(Debug, Default, Clone)]
struct Log {
    /// Keys `0..acked` were acknowledged (each writer goes in order).
    acked: usize,
    /// Keys `0..attempted` were sent; those from `acked` on may or may not
    /// be there.
    attempted: usize,
    /// Overwritten keys: for each, the last value acknowledged and the
    /// last one sent.
    overwrites: BTreeMap<String, (Option<i64>, i64)>,
    /// How long the first acknowledgement took.
    first_ack: Option<Duration>,
    /// The members a SetPop writer's acknowledged pops returned.
    popped: Vec<String>,
}

/// What a writer does in a round.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// SET of new keys, one at a time.
    Plain,
    /// SET of new keys, PIPE per pipeline.
    Pipelined,
    /// HSET of new fields of one hash.
    HashFields,
    /// INCR of one counter: the value read back is between the last
    /// acknowledged and the number sent.
    Counter,
    /// SET of ten keys over and over with increasing numbers.
    Overwrite,
    /// RPUSH of numbered elements onto one list.
    ListPush,
    /// SADD of new members to one set.
    SetAdd,
    /// ZADD of new members (score: their number) to one sorted set.
    ZAdd,
    /// SET of new keys, every other one with PX 50 (gone once the server
    /// is back), the rest with EX 100000.
    Expiring,
    /// SPOP, one member at a time, from a set of [`POP_SET`] members
    /// (large enough that pops read members ahead).
    SetPop,
}

/// Members of a SetPop writer's set before it pops.
const POP_SET: usize = 5000;

fn kinds(round: u32) -> [Kind; WRITERS as usize] {
    match round % 3 {
        0 => [
            Kind::Plain,
            Kind::Pipelined,
            Kind::Overwrite,
            Kind::ListPush,
        ],
        1 => [Kind::Counter, Kind::HashFields, Kind::SetAdd, Kind::ZAdd],
        _ => [Kind::Plain, Kind::Expiring, Kind::ListPush, Kind::SetPop],
    }
}

/// The collection a ListPush, SetAdd or ZAdd writer writes.
fn collection(round: u32, writer: u32) -> String {
    format!("c:r{round}:t{writer}")
}

fn hash_key(round: u32, writer: u32) -> String {
    format!("h:r{round}:t{writer}")
}

fn field(i: usize) -> String {
    format!("f{i:06}")
}

/// Writes until the server is gone (or MAX_WRITES); every acknowledgement
/// is recorded before the next write is sent.
fn write(c: &mut Connection, round: u32, w: u32, kind: Kind, acks: &AtomicUsize) -> Log {
    let mut log = Log::default();
    let started = Instant::now();
    if redis::cmd("STRIA.DURABILITY")
        .arg("sync")
        .query::<()>(c)
        .is_err()
    {
        return log;
    }
    while log.attempted < MAX_WRITES {
        let ok = match kind {
            Kind::Plain => {
                let k = key(round, w, log.attempted);
                log.attempted += 1;
                redis::cmd("SET")
                    .arg(&k)
                    .arg(value_of(&k))
                    .query::<()>(c)
                    .is_ok()
            }
            Kind::Pipelined => {
                let mut p = redis::pipe();
                for i in log.attempted..log.attempted + PIPE {
                    let k = key(round, w, i);
                    p.cmd("SET").arg(&k).arg(value_of(&k)).ignore();
                }
                log.attempted += PIPE;
                p.query::<()>(c).is_ok()
            }
            Kind::HashFields => {
                let f = field(log.attempted);
                log.attempted += 1;
                redis::cmd("HSET")
                    .arg(hash_key(round, w))
                    .arg(&f)
                    .arg(value_of(&f))
                    .query::<i64>(c)
                    .map(|added| assert_eq!(added, 1, "HSET of a new field"))
                    .is_ok()
            }
            Kind::Counter => {
                log.attempted += 1;
                match redis::cmd("INCR").arg(key(round, w, 0)).query::<i64>(c) {
                    Ok(v) => {
                        assert_eq!(
                            v as usize, log.attempted,
                            "INCR of a counter only this writer writes"
                        );
                        true
                    }
                    Err(_) => false,
                }
            }
            Kind::ListPush | Kind::SetAdd | Kind::ZAdd => {
                let i = log.attempted;
                log.attempted += 1;
                let mut cmd = match kind {
                    Kind::ListPush => redis::cmd("RPUSH"),
                    Kind::SetAdd => redis::cmd("SADD"),
                    _ => {
                        let mut z = redis::cmd("ZADD");
                        z.arg(collection(round, w)).arg(i);
                        z
                    }
                };
                if kind != Kind::ZAdd {
                    cmd.arg(collection(round, w));
                }
                cmd.arg(field(i)).query::<i64>(c).is_ok()
            }
            Kind::SetPop => {
                log.attempted += 1;
                match redis::cmd("SPOP")
                    .arg(collection(round, w))
                    .query::<Option<String>>(c)
                {
                    Ok(Some(m)) => {
                        assert!(!log.popped.contains(&m), "{m} popped twice");
                        log.popped.push(m);
                        true
                    }
                    // Popped empty: nothing more to do.
                    Ok(None) => {
                        log.attempted -= 1;
                        break;
                    }
                    Err(_) => false,
                }
            }
            Kind::Expiring => {
                let k = key(round, w, log.attempted);
                let (unit, ttl) = if log.attempted % 2 == 0 {
                    ("PX", 50)
                } else {
                    ("EX", 100_000)
                };
                log.attempted += 1;
                redis::cmd("SET")
                    .arg(&k)
                    .arg(value_of(&k))
                    .arg(unit)
                    .arg(ttl)
                    .query::<()>(c)
                    .is_ok()
            }
            Kind::Overwrite => {
                let n = log.attempted as i64;
                let k = key(round, w, log.attempted % 10);
                log.attempted += 1;
                let entry = log.overwrites.entry(k.clone()).or_insert((None, n));
                entry.1 = n;
                let ok = redis::cmd("SET").arg(&k).arg(n).query::<()>(c).is_ok();
                if ok {
                    log.overwrites.get_mut(&k).unwrap().0 = Some(n);
                }
                ok
            }
        };
        if !ok {
            break;
        }
        log.first_ack.get_or_insert_with(|| started.elapsed());
        log.acked = log.attempted;
        acks.fetch_add(1, Ordering::Relaxed);
    }
    log
}

/// Every key of `round` under the prefix, by SCAN.
fn scan(c: &mut Connection, pattern: &str) -> Vec<String> {
    let mut cursor = 0u64;
    let mut out = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(c)
            .unwrap();
        out.extend(keys);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// Checks what the rounds so far left against their logs.
fn check(c: &mut Connection, logs: &[(u32, Vec<(Kind, Log)>)], seed: u64) {
    for (round, writers) in logs {
        let round = *round;
        let ctx = |w: u32| format!("seed {seed}, round {round}, writer {w}");
        // Keys of this round that exist: each written by a known writer
        // at an index it sent.
        let mut found: HashMap<u32, Vec<usize>> = HashMap::new();
        for k in scan(c, &format!("r{round}:*")) {
            let mut parts = k.split(':');
            let (_, t, i) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
            let w: u32 = t[1..].parse().unwrap();
            let i: usize = i.parse().unwrap();
            found.entry(w).or_default().push(i);
        }
        for (w, (kind, log)) in writers.iter().enumerate() {
            let w = w as u32;
            let mut have = found.remove(&w).unwrap_or_default();
            have.sort_unstable();
            match kind {
                Kind::Plain | Kind::Pipelined => {
                    if let Some(&i) = have.iter().find(|&&i| i >= log.attempted) {
                        panic!(
                            "{}: key {i} exists but only {} were sent",
                            ctx(w),
                            log.attempted
                        );
                    }
                    for i in 0..log.acked {
                        assert!(
                            have.binary_search(&i).is_ok(),
                            "{}: key {i} was acknowledged (of {}) and is gone",
                            ctx(w),
                            log.acked
                        );
                    }
                    for chunk in have.chunks(500) {
                        let keys: Vec<String> = chunk.iter().map(|&i| key(round, w, i)).collect();
                        let vals: Vec<Option<String>> =
                            redis::cmd("MGET").arg(&keys).query(c).unwrap();
                        for (k, v) in keys.iter().zip(vals) {
                            assert_eq!(v.as_deref(), Some(value_of(k).as_str()), "{}: {k}", ctx(w));
                        }
                    }
                }
                Kind::Expiring => {
                    if let Some(&i) = have.iter().find(|&&i| i >= log.attempted || i % 2 == 0) {
                        panic!(
                            "{}: key {i} exists, but it expired or was never sent (of {})",
                            ctx(w),
                            log.attempted
                        );
                    }
                    for i in (1..log.acked).step_by(2) {
                        let k = key(round, w, i);
                        let ttl: i64 = redis::cmd("TTL").arg(&k).query(c).unwrap();
                        assert!(ttl > 90_000, "{}: {k} acknowledged, TTL {ttl}", ctx(w));
                    }
                }
                Kind::ListPush | Kind::SetAdd | Kind::ZAdd => {
                    let name = collection(round, w);
                    let (count, mut members): (usize, Vec<String>) = match kind {
                        Kind::ListPush => (
                            redis::cmd("LLEN").arg(&name).query(c).unwrap(),
                            redis::cmd("LRANGE")
                                .arg(&name)
                                .arg(0)
                                .arg(-1)
                                .query(c)
                                .unwrap(),
                        ),
                        Kind::SetAdd => (
                            redis::cmd("SCARD").arg(&name).query(c).unwrap(),
                            redis::cmd("SMEMBERS").arg(&name).query(c).unwrap(),
                        ),
                        _ => {
                            let scored: Vec<(String, f64)> = redis::cmd("ZRANGE")
                                .arg(&name)
                                .arg(0)
                                .arg(-1)
                                .arg("WITHSCORES")
                                .query(c)
                                .unwrap();
                            for (m, s) in &scored {
                                assert_eq!(
                                    *s as usize,
                                    m[1..].parse::<usize>().unwrap(),
                                    "{}",
                                    ctx(w)
                                );
                            }
                            let by_lex: Vec<String> = redis::cmd("ZRANGEBYLEX")
                                .arg(&name)
                                .arg("-")
                                .arg("+")
                                .query(c)
                                .unwrap();
                            assert_eq!(by_lex.len(), scored.len(), "{}: the two orders", ctx(w));
                            (
                                redis::cmd("ZCARD").arg(&name).query(c).unwrap(),
                                scored.into_iter().map(|(m, _)| m).collect(),
                            )
                        }
                    };
                    assert_eq!(
                        count,
                        members.len(),
                        "{}: {kind:?} count and elements",
                        ctx(w)
                    );
                    if *kind != Kind::ListPush {
                        members.sort();
                    }
                    // Always a prefix of what was sent, in order.
                    let want: Vec<String> = (0..members.len()).map(field).collect();
                    assert_eq!(members, want, "{}: {kind:?}", ctx(w));
                    assert!(
                        members.len() >= log.acked && members.len() <= log.attempted,
                        "{}: {kind:?} holds {}, acknowledged {}, sent {}",
                        ctx(w),
                        members.len(),
                        log.acked,
                        log.attempted
                    );
                }
                Kind::SetPop => {
                    let name = collection(round, w);
                    let count: usize = redis::cmd("SCARD").arg(&name).query(c).unwrap();
                    let members: Vec<String> = redis::cmd("SMEMBERS").arg(&name).query(c).unwrap();
                    assert_eq!(count, members.len(), "{}: SCARD and SMEMBERS", ctx(w));
                    let mut left: BTreeSet<String> = (0..POP_SET).map(field).collect();
                    for m in &members {
                        assert!(left.remove(m), "{}: {m} is back or was never added", ctx(w));
                    }
                    for m in &log.popped {
                        assert!(
                            left.remove(m),
                            "{}: {m} acknowledged popped, still there",
                            ctx(w)
                        );
                    }
                    // What neither holds: the pop on its way at the kill.
                    assert!(
                        left.len() <= log.attempted - log.acked,
                        "{}: {} members lost ({} pops acknowledged, {} sent)",
                        ctx(w),
                        left.len(),
                        log.acked,
                        log.attempted
                    );
                }
                Kind::Counter => {
                    let v: Option<usize> =
                        redis::cmd("GET").arg(key(round, w, 0)).query(c).unwrap();
                    let v = v.unwrap_or(0);
                    assert!(
                        v >= log.acked && v <= log.attempted,
                        "{}: counter {v}, acknowledged {}, sent {}",
                        ctx(w),
                        log.acked,
                        log.attempted
                    );
                }
                Kind::Overwrite => {
                    for (k, (acked, sent)) in &log.overwrites {
                        let v: Option<i64> = redis::cmd("GET").arg(k).query(c).unwrap();
                        match (v, acked) {
                            (None, None) => {}
                            (None, Some(a)) => panic!("{}: {k} acknowledged {a}, gone", ctx(w)),
                            (Some(v), _) => assert!(
                                acked.is_none_or(|a| v >= a)
                                    && v <= *sent
                                    && v as usize % 10
                                        == k[k.len() - 1..].parse::<usize>().unwrap(),
                                "{}: {k} = {v}, acknowledged {acked:?}, last sent {sent}",
                                ctx(w)
                            ),
                        }
                    }
                    assert!(have.iter().all(|&i| i < 10), "{}: {have:?}", ctx(w));
                }
                Kind::HashFields => {
                    let all: HashMap<String, String> = redis::cmd("HGETALL")
                        .arg(hash_key(round, w))
                        .query(c)
                        .unwrap();
                    for i in 0..log.acked {
                        let f = field(i);
                        assert_eq!(
                            all.get(&f).map(String::as_str),
                            Some(value_of(&f).as_str()),
                            "{}: field {f} (acknowledged {})",
                            ctx(w),
                            log.acked
                        );
                    }
                    for (f, v) in &all {
                        let i: usize = f[1..].parse().unwrap();
                        assert!(i < log.attempted, "{}: field {f} never sent", ctx(w));
                        assert_eq!(*v, value_of(f), "{}: field {f}", ctx(w));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "seed {seed}, round {round}: keys of unknown writers {found:?}"
        );
    }
}

/// Runs the round's writers on `s` and kills it (SIGKILL) a random
/// 100-800 ms after the first acknowledgement; returns what each writer
/// did.
fn write_then_kill(s: Server, round: u32, rng: &mut ChaCha8Rng) -> Vec<(Kind, Log)> {
    let (tx, rx) = mpsc::channel();
    let acks = Arc::new(AtomicUsize::new(0));
    let writing = Instant::now();
    for (w, kind) in kinds(round).into_iter().enumerate() {
        let (tx, acks) = (tx.clone(), acks.clone());
        let mut c = s.client();
        if kind == Kind::SetPop {
            // The set to pop from, durable before the clock starts.
            let added: usize = redis::cmd("SADD")
                .arg(collection(round, w as u32))
                .arg((0..POP_SET).map(field).collect::<Vec<_>>())
                .query(&mut c)
                .unwrap();
            assert_eq!(added, POP_SET);
        }
        std::thread::spawn(move || {
            let log = write(&mut c, round, w as u32, kind, &acks);
            let _ = tx.send((w, kind, log));
        });
    }
    drop(tx);
    // The delay runs from the first acknowledgement, so a slow start
    // on a busy machine still leaves writes to check.
    while acks.load(Ordering::Relaxed) == 0 {
        assert!(
            writing.elapsed() < Duration::from_secs(30),
            "round {round}: no write acknowledged within 30 s\n{}",
            s.printed.all()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let delay = Duration::from_millis(rng.random_range(100..=800));
    std::thread::sleep(delay);
    let printed = s.kill9();
    let mut writers: Vec<(usize, Kind, Log)> = Vec::new();
    for _ in 0..WRITERS {
        writers.push(
            rx.recv_timeout(Duration::from_secs(60))
                .expect("a writer did not stop after the kill"),
        );
    }
    writers.sort_by_key(|w| w.0);
    let total: usize = writers.iter().map(|w| w.2.acked).sum();
    println!(
        "round {round}: killed {delay:?} after the first acknowledgement ({:?} after the writers started), {total} writes acknowledged: {:?}",
        writing.elapsed() - delay,
        writers
            .iter()
            .map(|(_, k, l)| format!(
                "{k:?} {}/{} (first after {:?})",
                l.acked, l.attempted, l.first_ack
            ))
            .collect::<Vec<_>>()
    );
    assert!(
        total > 0,
        "round {round}: nothing was acknowledged in {delay:?}\n{}",
        printed.all()
    );
    writers.into_iter().map(|(_, k, l)| (k, l)).collect()
}

#[test]
fn acknowledged_sync_writes_survive_sigkill() {
    let seed = seed_or(9);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempdir();
    // Room for what five rounds write at full speed (a release build
    // writes several times what a debug build does).
    let map = Map {
        backend: "uring",
        data_size: "128MiB",
        ..Map::default()
    };
    let started = Instant::now();
    let mut logs: Vec<(u32, Vec<(Kind, Log)>)> = Vec::new();
    for round in 0..ROUNDS {
        let s = Server::start(dir.path(), &map);
        let mut c = s.client();
        check(&mut c, &logs, seed);
        drop(c);

        logs.push((round, write_then_kill(s, round, &mut rng)));
    }
    // The last kill's writes, then a clean stop and a start that replays
    // nothing: the recovered state was flushed like any other.
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    check(&mut c, &logs, seed);
    s.stop();
    let s = Server::start_after_clean_stop(dir.path(), &map);
    let mut c = s.client();
    check(&mut c, &logs, seed);
    s.stop();
    println!("{ROUNDS} rounds in {:.1?}", started.elapsed());
}

/// `STRIA_SEED`, or `default`.
fn seed_or(default: u64) -> u64 {
    std::env::var("STRIA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// What happens to `wal1` while the server is down.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Cut to half its size.
    Truncated,
    /// Random bytes over all of it, superblock included.
    Garbage,
    /// Deleted.
    Removed,
}

impl Damage {
    fn apply(self, path: &std::path::Path, rng: &mut ChaCha8Rng) {
        match self {
            Damage::Truncated => {
                let len = std::fs::metadata(path).unwrap().len();
                let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
                f.set_len(len / 2).unwrap();
            }
            Damage::Garbage => {
                let len = std::fs::metadata(path).unwrap().len() as usize;
                let mut bytes = vec![0u8; len];
                rng.fill(&mut bytes[..]);
                std::fs::write(path, bytes).unwrap();
            }
            Damage::Removed => std::fs::remove_file(path).unwrap(),
        }
    }
}

/// With `wal.copies: 2` on two WAL devices: SIGKILL under load, then one
/// WAL device file truncated, overwritten with garbage or removed. The
/// server comes back on its own, degraded (wal0 served the whole time, so
/// it holds every batch; the manifest says so), with every acknowledged
/// write; a second kill while degraded costs nothing either. Then `stria
/// device replace` puts a new wal1 in, the server writes both copies
/// again, and a third kill costs nothing.
#[test]
fn with_two_copies_sigkill_and_a_lost_wal_device_lose_no_acknowledged_write() {
    let map = Map {
        backend: "uring",
        data_size: "64MiB",
        wal_copies: Some(2),
        ..Map::default()
    };
    lose_a_device_under_sigkill(&map, "wal1", ("WAL", "wal_degraded:1", "wal_degraded:0"));
}

/// The same with `flush.copies: 2` on two data devices, `data1` damaged:
/// every block file has a copy on data0, and the manifest's copy there
/// is whole (the WAL device's superblock would say otherwise).
#[test]
fn with_two_copies_sigkill_and_a_lost_data_device_lose_no_acknowledged_write() {
    let map = Map {
        backend: "uring",
        data_size: "64MiB",
        file_copies: Some(2),
        ..Map::default()
    };
    let info = ("scrub", "data_devices_lost:1", "data_devices_lost:0");
    lose_a_device_under_sigkill(&map, "data1", info);
}

/// SIGKILL under load, `device`'s file damaged each way in its own
/// folder; the server must come back on its own, degraded (INFO section
/// `info.0` says `info.1`), with every acknowledged write, twice; then
/// the device is replaced and the server is whole again (`info.2`).
fn lose_a_device_under_sigkill(map: &Map, device: &str, info: (&str, &str, &str)) {
    let seed = seed_or(11);
    for (i, damage) in [Damage::Truncated, Damage::Garbage, Damage::Removed]
        .into_iter()
        .enumerate()
    {
        let mut rng = ChaCha8Rng::seed_from_u64(seed + i as u64);
        let dir = tempdir();
        let s = Server::start(dir.path(), map);
        let mut logs = vec![(0, write_then_kill(s, 0, &mut rng))];
        damage.apply(&dir.path().join(format!("data/{device}.img")), &mut rng);
        let section = |s: &Server| -> String {
            let mut c = s.client();
            redis::cmd("INFO").arg(info.0).query(&mut c).unwrap()
        };
        let s = Server::start(dir.path(), map);
        check(&mut s.client(), &logs, seed);
        let text = section(&s);
        assert!(text.contains(info.1), "{damage:?}: {text}");
        logs.push((1, write_then_kill(s, 1, &mut rng)));
        let s = Server::start(dir.path(), map);
        check(&mut s.client(), &logs, seed);
        s.stop();
        let args = [
            "device",
            "replace",
            "--config",
            "stria.yaml",
            "--device",
            device,
            "--force",
        ];
        let (ok, text) = stria(dir.path(), &args);
        assert!(ok, "{damage:?}: {text}");
        let s = Server::start(dir.path(), map);
        check(&mut s.client(), &logs, seed);
        let text = section(&s);
        assert!(text.contains(info.2), "{damage:?}: {text}");
        logs.push((2, write_then_kill(s, 2, &mut rng)));
        let s = Server::start(dir.path(), map);
        check(&mut s.client(), &logs, seed);
        s.stop();
    }
}
