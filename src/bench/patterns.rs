//! `stria bench patterns`: what job queues, rate limiters and event logs
//! do with transactions, scripts, blocking pops, pub/sub and streams, run
//! against Stria and against Redis with `appendfsync always`, alternating.
//!
//! Each pattern is a closed loop of clients for a fixed time; a server's
//! CPU time and context switches (from `/proc`) are taken around it. Every
//! hand-over is checked: each element pushed is popped once, each message
//! reaches every subscriber, each stream entry is acknowledged once. A
//! pattern that loses or duplicates one fails the bench.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::pinning::CoreSplit;
use super::process::{Serve, ServerProcess, STOP_TIMEOUT};
use super::procstat::{self, ProcSample};
use super::redis_compare::{redis_folder, start_redis};
use super::resp_client::{Reply, RespClient, RespError};
use super::table::Table;
use crate::config::Config;

/// The rate limiter's script: count a call, start the window on the first.
pub const RATE_LIMITER: &str = "local n = redis.call('INCR', KEYS[1]) \
     if n == 1 then redis.call('EXPIRE', KEYS[1], 60) end return n";

/// Keys the rate limiters spread over.
const LIMITER_KEYS: u64 = 1000;

/// How long a consumer's blocking read waits before it looks whether the
/// producers are done.
const BLOCK_SECS: &str = "1";

/// The application patterns, each a closed loop of clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// 50 clients: `MULTI; INCR k; EXPIRE k 60; EXEC` sent as one write,
    /// as a client library's transactional pipeline does.
    Multi,
    /// 50 clients: `EVALSHA` of [`RATE_LIMITER`] on one of 1,000 keys.
    Evalsha,
    /// 10 producers `LPUSH` tagged jobs, 10 consumers `BRPOP` them.
    Queue,
    /// 50 publishers `PUBLISH` to one channel 10 subscribers read.
    Publish,
    /// 50 clients `XADD` to one stream.
    Xadd,
    /// 10 producers `XADD`, 10 consumers of one group `XREADGROUP` and
    /// `XACK` what they read.
    Group,
}

impl Pattern {
    pub const ALL: [Pattern; 6] = [
        Pattern::Multi,
        Pattern::Evalsha,
        Pattern::Queue,
        Pattern::Publish,
        Pattern::Xadd,
        Pattern::Group,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Multi => "multi",
            Pattern::Evalsha => "evalsha",
            Pattern::Queue => "queue",
            Pattern::Publish => "publish",
            Pattern::Xadd => "xadd",
            Pattern::Group => "group",
        }
    }

    /// What one operation of the pattern is, for the report.
    pub fn op(self) -> &'static str {
        match self {
            Pattern::Multi => "transactions",
            Pattern::Evalsha => "script calls",
            Pattern::Queue => "jobs pushed and popped",
            Pattern::Publish => "publishes (x10 messages)",
            Pattern::Xadd => "entries added",
            Pattern::Group => "entries added and acknowledged",
        }
    }

    pub fn parse(s: &str) -> Result<Pattern, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Pattern::ALL.iter().map(|p| p.name()).collect();
                format!("unknown pattern {s:?}: choose from {}", names.join(", "))
            })
    }
}

/// A server to run a pattern against.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    pub addr: SocketAddr,
    pub password: Option<String>,
    pub pid: u32,
}

/// What one run of a pattern did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub ops: u64,
    pub secs: f64,
    /// The server's CPU time and context switches over the run.
    pub server: ProcSample,
}

impl Outcome {
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }

    pub fn cpu_us(&self) -> f64 {
        self.server.cpu_secs * 1e6 / self.ops.max(1) as f64
    }

    pub fn switches(&self) -> f64 {
        self.server.switches as f64 / self.ops.max(1) as f64
    }
}

fn err(what: &str, e: RespError) -> String {
    format!("{what}: {e}")
}

fn connect(t: &Target) -> Result<RespClient, String> {
    let mut c = RespClient::connect_retry(t.addr, Duration::from_secs(5))
        .map_err(|e| format!("{}: cannot connect to {}: {e}", t.name, t.addr))?;
    if let Some(p) = &t.password {
        c.command(&["AUTH", p]).map_err(|e| err("AUTH", e))?;
    }
    Ok(c)
}

/// A small xorshift for picking keys.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `clients` threads each running `op` until `deadline`; the operations
/// done.
fn closed_loop<F>(t: &Target, clients: usize, deadline: Instant, op: F) -> Result<u64, String>
where
    F: Fn(&mut RespClient, &mut u64) -> Result<(), String> + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|i| {
                let op = &op;
                s.spawn(move || -> Result<u64, String> {
                    let mut c = connect(t)?;
                    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1);
                    let mut done = 0;
                    while Instant::now() < deadline {
                        op(&mut c, &mut rng)?;
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a client panicked".to_string())?)
            .sum()
    })
}

fn integer(r: &Reply, what: &str) -> Result<i64, String> {
    match r {
        Reply::Integer(n) => Ok(*n),
        other => Err(format!("{what}: expected an integer, got {other:?}")),
    }
}

fn bulk(r: &Reply, what: &str) -> Result<Vec<u8>, String> {
    match r {
        Reply::Bulk(Some(b)) => Ok(b.clone()),
        other => Err(format!("{what}: expected a bulk string, got {other:?}")),
    }
}

fn array<'a>(r: &'a Reply, what: &str) -> Result<&'a [Reply], String> {
    match r {
        Reply::Array(Some(v)) => Ok(v),
        other => Err(format!("{what}: expected an array, got {other:?}")),
    }
}

/// Runs `pattern` against `t` for `run`; `tag` keeps its keys apart from
/// other runs' on the same server.
pub fn run_pattern(
    pattern: Pattern,
    t: &Target,
    run: Duration,
    tag: &str,
) -> Result<Outcome, String> {
    let mut setup = connect(t)?;
    let sha = match pattern {
        Pattern::Evalsha => Some(bulk(
            &setup
                .command(&["SCRIPT", "LOAD", RATE_LIMITER])
                .map_err(|e| err("SCRIPT LOAD", e))?,
            "SCRIPT LOAD",
        )?),
        Pattern::Group => {
            setup
                .command(&[
                    "XGROUP",
                    "CREATE",
                    &format!("{tag}:s"),
                    "g",
                    "$",
                    "MKSTREAM",
                ])
                .map_err(|e| err("XGROUP CREATE", e))?;
            None
        }
        _ => None,
    };
    let before = sample(t)?;
    let start = Instant::now();
    let deadline = start + run;
    let (ops, end) = match pattern {
        Pattern::Multi => (multi(t, deadline, tag)?, Instant::now()),
        Pattern::Evalsha => (
            evalsha(t, deadline, tag, sha.as_deref().unwrap_or_default())?,
            Instant::now(),
        ),
        Pattern::Queue => queue(t, deadline, tag)?,
        Pattern::Publish => publish(t, deadline, tag)?,
        Pattern::Xadd => (xadd(t, deadline, tag)?, Instant::now()),
        Pattern::Group => group(t, deadline, tag, &mut setup)?,
    };
    let after = sample(t)?;
    Ok(Outcome {
        ops,
        secs: end.duration_since(start).as_secs_f64(),
        server: after.since(&before),
    })
}

fn sample(t: &Target) -> Result<ProcSample, String> {
    procstat::sample(t.pid).ok_or_else(|| format!("{}: cannot read /proc/{}", t.name, t.pid))
}

fn limiter_key(tag: &str, rng: &mut u64) -> String {
    format!("{tag}:rl:{}", next(rng) % LIMITER_KEYS)
}

fn multi(t: &Target, deadline: Instant, tag: &str) -> Result<u64, String> {
    closed_loop(t, 50, deadline, |c, rng| {
        let key = limiter_key(tag, rng);
        let key = key.as_bytes();
        let replies = c
            .pipeline(&[
                &[&b"MULTI"[..]][..],
                &[b"INCR", key],
                &[b"EXPIRE", key, b"60"],
                &[b"EXEC"],
            ])
            .map_err(|e| err("MULTI ... EXEC", e))?;
        let exec = array(&replies[3], "EXEC")?;
        if exec.len() != 2 || integer(&exec[0], "INCR")? < 1 || integer(&exec[1], "EXPIRE")? != 1 {
            return Err(format!("EXEC answered {exec:?}"));
        }
        Ok(())
    })
}

fn evalsha(t: &Target, deadline: Instant, tag: &str, sha: &[u8]) -> Result<u64, String> {
    closed_loop(t, 50, deadline, |c, rng| {
        let key = limiter_key(tag, rng);
        let r = c
            .command(&[&b"EVALSHA"[..], sha, b"1", key.as_bytes()])
            .map_err(|e| err("EVALSHA", e))?;
        if integer(&r, "EVALSHA")? < 1 {
            return Err(format!("EVALSHA answered {r:?}"));
        }
        Ok(())
    })
}

fn xadd(t: &Target, deadline: Instant, tag: &str) -> Result<u64, String> {
    let stream = format!("{tag}:x");
    closed_loop(t, 50, deadline, |c, _| {
        let r = c
            .command(&["XADD", &stream, "*", "f", "v"])
            .map_err(|e| err("XADD", e))?;
        bulk(&r, "XADD").map(drop)
    })
}

/// Producers run until `deadline`, each sending `send(client, producer,
/// n)` for n = 0, 1, ...; consumers run `take(client, consumer)` until it
/// returns `None` after the producers are done. Checks that every
/// `(producer, n)` sent was taken exactly once; returns how many, and when
/// the last was taken.
fn hand_over<S, T>(
    t: &Target,
    pairs: usize,
    deadline: Instant,
    send: S,
    take: T,
) -> Result<(u64, Instant), String>
where
    S: Fn(&mut RespClient, usize, u64) -> Result<(), String> + Sync,
    T: Fn(&mut RespClient, usize) -> Result<Option<Vec<Vec<u8>>>, String> + Sync,
{
    let producing = AtomicBool::new(true);
    let last = Mutex::new(Instant::now());
    let (sent, taken) = std::thread::scope(|s| -> Result<_, String> {
        let consumers: Vec<_> = (0..pairs)
            .map(|i| {
                let (take, producing, last) = (&take, &producing, &last);
                s.spawn(move || -> Result<Vec<Vec<u8>>, String> {
                    let mut c = connect(t)?;
                    let mut got = Vec::new();
                    loop {
                        // Read before the wait: an item sent during an
                        // empty wait is still taken by the next one.
                        let done = !producing.load(Ordering::SeqCst);
                        match take(&mut c, i)? {
                            Some(items) => {
                                got.extend(items);
                                *last.lock().unwrap() = Instant::now();
                            }
                            None if done => return Ok(got),
                            None => {}
                        }
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..pairs)
            .map(|p| {
                let send = &send;
                s.spawn(move || -> Result<u64, String> {
                    let mut c = connect(t)?;
                    let mut n = 0;
                    while Instant::now() < deadline {
                        send(&mut c, p, n)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        let sent: Vec<Result<u64, String>> = producers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a producer panicked".into()))
            })
            .collect();
        // Even when a producer failed: the consumers stop once idle.
        producing.store(false, Ordering::SeqCst);
        let mut taken = Vec::new();
        for h in consumers {
            taken.extend(h.join().map_err(|_| "a consumer panicked".to_string())??);
        }
        let sent = sent.into_iter().collect::<Result<Vec<u64>, String>>()?;
        Ok((sent, taken))
    })?;
    let total: u64 = sent.iter().sum();
    let mut seen = HashSet::with_capacity(taken.len());
    for item in &taken {
        let text = String::from_utf8_lossy(item);
        let (p, n) = text
            .split_once(':')
            .and_then(|(p, n)| Some((p.parse::<usize>().ok()?, n.parse::<u64>().ok()?)))
            .ok_or_else(|| format!("a consumer got {text:?}, which no producer sent"))?;
        if sent.get(p).is_none_or(|&s| n >= s) {
            return Err(format!("a consumer got {text:?}, which no producer sent"));
        }
        if !seen.insert((p, n)) {
            return Err(format!("{text:?} was handed over twice"));
        }
    }
    if seen.len() as u64 != total {
        return Err(format!(
            "{} of {total} items sent were never taken",
            total - seen.len() as u64
        ));
    }
    let end = *last.lock().unwrap();
    Ok((total, end))
}

fn queue(t: &Target, deadline: Instant, tag: &str) -> Result<(u64, Instant), String> {
    let list = format!("{tag}:q");
    hand_over(
        t,
        10,
        deadline,
        |c, p, n| {
            let r = c
                .command(&["LPUSH", &list, &format!("{p}:{n}")])
                .map_err(|e| err("LPUSH", e))?;
            integer(&r, "LPUSH").map(drop)
        },
        |c, _| match c
            .command(&["BRPOP", &list, BLOCK_SECS])
            .map_err(|e| err("BRPOP", e))?
        {
            Reply::Array(None) => Ok(None),
            r => {
                let kv = array(&r, "BRPOP")?;
                Ok(Some(vec![bulk(kv.get(1).unwrap_or(&r), "BRPOP")?]))
            }
        },
    )
}

fn group(
    t: &Target,
    deadline: Instant,
    tag: &str,
    setup: &mut RespClient,
) -> Result<(u64, Instant), String> {
    let stream = format!("{tag}:s");
    let done = hand_over(
        t,
        10,
        deadline,
        |c, p, n| {
            let r = c
                .command(&["XADD", &stream, "*", "job", &format!("{p}:{n}")])
                .map_err(|e| err("XADD", e))?;
            bulk(&r, "XADD").map(drop)
        },
        |c, i| {
            let r = c
                .command(&[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    &format!("c{i}"),
                    "COUNT",
                    "10",
                    "BLOCK",
                    &format!("{BLOCK_SECS}000"),
                    "STREAMS",
                    &stream,
                    ">",
                ])
                .map_err(|e| err("XREADGROUP", e))?;
            if r == Reply::Array(None) {
                return Ok(None);
            }
            let streams = array(&r, "XREADGROUP")?;
            let entries = array(
                &array(streams.first().unwrap_or(&r), "XREADGROUP")?[1],
                "XREADGROUP",
            )?;
            let mut ids = Vec::with_capacity(entries.len());
            let mut jobs = Vec::with_capacity(entries.len());
            for e in entries {
                let e = array(e, "an entry")?;
                ids.push(bulk(&e[0], "an entry's ID")?);
                jobs.push(bulk(&array(&e[1], "an entry's fields")?[1], "a job")?);
            }
            let mut ack: Vec<&[u8]> = vec![b"XACK", stream.as_bytes(), b"g"];
            ack.extend(ids.iter().map(|id| &id[..]));
            let acked = integer(&c.command(&ack).map_err(|e| err("XACK", e))?, "XACK")?;
            if acked != ids.len() as i64 {
                return Err(format!(
                    "XACK of {} entries acknowledged {acked}",
                    ids.len()
                ));
            }
            Ok(Some(jobs))
        },
    )?;
    let pending = setup
        .command(&["XPENDING", &stream, "g"])
        .map_err(|e| err("XPENDING", e))?;
    let count = integer(&array(&pending, "XPENDING")?[0], "XPENDING")?;
    if count != 0 {
        return Err(format!(
            "{count} entries are still pending after every consumer stopped"
        ));
    }
    Ok(done)
}

fn publish(t: &Target, deadline: Instant, tag: &str) -> Result<(u64, Instant), String> {
    const SUBSCRIBERS: usize = 10;
    /// How long a subscriber waits for the next message.
    const QUIET: Duration = Duration::from_secs(10);
    let channel = format!("{tag}:ch");
    let mut subs = Vec::with_capacity(SUBSCRIBERS);
    for _ in 0..SUBSCRIBERS {
        let mut c = connect(t)?;
        c.command(&["SUBSCRIBE", &channel])
            .map_err(|e| err("SUBSCRIBE", e))?;
        c.set_read_timeout(Some(QUIET))
            .map_err(|e| format!("a subscriber's socket: {e}"))?;
        subs.push(c);
    }
    // Each message is numbered, so a subscriber's set of numbers shows a
    // loss or a duplicate.
    let numbers = AtomicU64::new(0);
    let (published, end, received) = std::thread::scope(|s| -> Result<_, String> {
        let readers: Vec<_> = subs
            .into_iter()
            .map(|mut c| {
                s.spawn(move || -> Result<Vec<u64>, String> {
                    let mut got = Vec::new();
                    loop {
                        let m = c.next_reply().map_err(|e| err("a subscriber's read", e))?;
                        let m = array(&m, "a message")?;
                        let body = bulk(m.get(2).unwrap_or(&Reply::Bulk(None)), "a message")?;
                        if body == b"end" {
                            return Ok(got);
                        }
                        let n = std::str::from_utf8(&body)
                            .ok()
                            .and_then(|n| n.parse().ok())
                            .ok_or_else(|| format!("a subscriber got {body:?}"))?;
                        got.push(n);
                    }
                })
            })
            .collect();
        let published = closed_loop(t, 50, deadline, |c, _| {
            let n = numbers.fetch_add(1, Ordering::SeqCst).to_string();
            let r = c
                .command(&["PUBLISH", &channel, &n])
                .map_err(|e| err("PUBLISH", e))?;
            match integer(&r, "PUBLISH")? {
                n if n == SUBSCRIBERS as i64 => Ok(()),
                n => Err(format!("PUBLISH reached {n} of {SUBSCRIBERS} subscribers")),
            }
        });
        let end = Instant::now();
        // Even after a failed publish: the subscribers stop at it.
        let ended = connect(t).and_then(|mut c| {
            c.command(&["PUBLISH", &channel, "end"])
                .map_err(|e| err("PUBLISH", e))
        });
        let mut received = Vec::new();
        for h in readers {
            received.push(
                h.join()
                    .map_err(|_| "a subscriber panicked".to_string())??,
            );
        }
        let published = published?;
        if ended? != Reply::Integer(SUBSCRIBERS as i64) {
            return Err("the last message did not reach every subscriber".into());
        }
        Ok((published, end, received))
    })?;
    for mut got in received {
        got.sort_unstable();
        let whole =
            got.len() as u64 == published && got.iter().enumerate().all(|(i, &n)| n == i as u64);
        if !whole {
            return Err(format!(
                "a subscriber got {} messages, not each of the {published} published once",
                got.len()
            ));
        }
    }
    Ok((published, end))
}

/// How `stria bench patterns` was asked to run.
#[derive(clap::Args, Debug, Clone)]
pub struct PatternsArgs {
    /// The YAML device map (default: the embedded conf/local.yaml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Seconds each pattern runs against each server per round.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Rounds; servers alternate (Stria first in odd rounds, Redis first
    /// in even ones).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// The patterns to run, comma-separated: multi, evalsha, queue,
    /// publish, xadd, group.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "multi,evalsha,queue,publish,xadd,group"
    )]
    pub patterns: Vec<String>,
    /// The redis-server to compare with (default: redis-server on PATH;
    /// without one, Stria alone).
    #[arg(long, value_name = "PATH")]
    pub redis_server: Option<PathBuf>,
    /// The stria executable whose `serve` is measured (default: this
    /// one), to compare two builds against the same Redis.
    #[arg(long, value_name = "PATH")]
    pub stria: Option<PathBuf>,
    #[command(flatten)]
    pub cores: CoreSplit,
}

/// One pattern's runs in one round.
#[derive(Clone, Debug)]
pub struct Row {
    pub pattern: Pattern,
    pub round: usize,
    pub stria: Outcome,
    pub redis: Option<Outcome>,
}

/// What `stria bench patterns` measured.
#[derive(Clone, Debug)]
pub struct PatternsReport {
    pub source: String,
    pub seconds: f64,
    pub redis: Result<PathBuf, String>,
    /// The servers' and the load's cores, when split.
    pub cores: Option<String>,
    pub rows: Vec<Row>,
}

/// Starts the servers and runs every pattern, `rounds` times.
pub fn run(
    serve: &Serve,
    cfg: &Config,
    args: &PatternsArgs,
    mut progress: impl FnMut(&str),
) -> Result<PatternsReport, String> {
    let patterns = args
        .patterns
        .iter()
        .map(|p| Pattern::parse(p))
        .collect::<Result<Vec<_>, _>>()?;
    if !(args.seconds > 0.0 && args.seconds <= 3600.0) || args.rounds == 0 {
        return Err("--seconds must be in (0, 3600] and --rounds at least 1".into());
    }
    args.cores.check()?;
    let run = Duration::from_secs_f64(args.seconds);
    let (redis_bin, folder, redis_dir) =
        redis_folder(cfg, args.redis_server.as_ref(), "stria-patterns")?;
    let stria = serve.start(cfg)?;
    let redis = match &redis_dir {
        Ok(dir) => Some(start_redis(&redis_bin, dir)?),
        Err(_) => None,
    };
    let target = |p: &ServerProcess, password: Option<String>| Target {
        name: p.name().to_string(),
        addr: p.addr,
        password,
        pid: p.pid(),
    };
    let pids: Vec<u32> = [Some(&stria), redis.as_ref()]
        .into_iter()
        .flatten()
        .map(ServerProcess::pid)
        .collect();
    let confined = args.cores.apply(&pids)?;
    let stria_t = target(&stria, cfg.server.password.clone());
    let redis_t = redis.as_ref().map(|r| target(r, None));
    let stamp = std::process::id();
    let mut rows = Vec::new();
    let result = (|| -> Result<(), String> {
        for round in 1..=args.rounds {
            for &p in &patterns {
                let tag = format!("bp{stamp}:{round}:{}", p.name());
                let mut one = |t: &Target| -> Result<Outcome, String> {
                    let o = run_pattern(p, t, run, &tag)
                        .map_err(|e| format!("{} against {}: {e}", p.name(), t.name))?;
                    progress(&format!(
                        "round {round} {} {}: {:.0}/s, {:.1} us CPU, {:.3} cs per op",
                        p.name(),
                        t.name,
                        o.rate(),
                        o.cpu_us(),
                        o.switches()
                    ));
                    Ok(o)
                };
                let (s, r) = match &redis_t {
                    Some(rt) if round % 2 == 0 => {
                        let r = one(rt)?;
                        (one(&stria_t)?, Some(r))
                    }
                    Some(rt) => {
                        let s = one(&stria_t)?;
                        (s, Some(one(rt)?))
                    }
                    None => (one(&stria_t)?, None),
                };
                rows.push(Row {
                    pattern: p,
                    round,
                    stria: s,
                    redis: r,
                });
            }
        }
        Ok(())
    })();
    drop(confined);
    for server in [Some(stria), redis].into_iter().flatten() {
        let name = server.name().to_string();
        server
            .stop(STOP_TIMEOUT)
            .map_err(|e| format!("stopping {name}: {e}"))?;
    }
    drop(folder);
    result?;
    Ok(PatternsReport {
        source: cfg.source.clone(),
        seconds: args.seconds,
        redis: redis_dir,
        cores: args.cores.describe(),
        rows,
    })
}

impl fmt::Display for PatternsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "stria bench patterns: {} s per pattern and server per round; Stria on {}",
            self.seconds, self.source
        )?;
        match &self.redis {
            Ok(dir) => writeln!(
                f,
                "Redis: appendonly yes, appendfsync always, in {}",
                dir.display()
            )?,
            Err(why) => writeln!(f, "Redis: {why}")?,
        }
        if let Some(cores) = &self.cores {
            writeln!(f, "Cores: {cores}")?;
        }
        let mut t = Table::new([
            "pattern",
            "round",
            "Stria ops/s",
            "Redis ops/s",
            "Stria/Redis",
            "Stria CPU us/op",
            "Redis CPU us/op",
            "Stria cs/op",
            "Redis cs/op",
        ]);
        for r in &self.rows {
            let redis = |f: &dyn Fn(&Outcome) -> String| r.redis.as_ref().map_or("-".into(), f);
            t.row([
                r.pattern.name().to_string(),
                r.round.to_string(),
                format!("{:.0}", r.stria.rate()),
                redis(&|o| format!("{:.0}", o.rate())),
                redis(&|o| format!("{:.2}x", r.stria.rate() / o.rate().max(1e-9))),
                format!("{:.1}", r.stria.cpu_us()),
                redis(&|o| format!("{:.1}", o.cpu_us())),
                format!("{:.3}", r.stria.switches()),
                redis(&|o| format!("{:.3}", o.switches())),
            ]);
        }
        write!(f, "{}", t.markdown())?;
        writeln!(f, "operations:")?;
        let mut seen = Vec::new();
        for r in &self.rows {
            if !seen.contains(&r.pattern) {
                seen.push(r.pattern);
                writeln!(f, "  {}: {}", r.pattern.name(), r.pattern.op())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_by_name_and_unknown_ones_are_named() {
        for p in Pattern::ALL {
            assert_eq!(Pattern::parse(p.name()), Ok(p));
        }
        let e = Pattern::parse("multii").unwrap_err();
        assert!(e.contains("multii") && e.contains("evalsha"), "{e}");
    }
}
