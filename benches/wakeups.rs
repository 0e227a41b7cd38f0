//! The ceiling the machine puts on writers that block one append at a time:
//! N threads each hand a request to one server thread and park until it
//! answers, with no work at all on either side (no WAL, no device). The
//! server drains every request that arrived, answers them all, and starts
//! over, as the WAL reactor's group commit does; each answer is one
//! `unpark` (a futex wake) and each request one `park` (a futex wait).
//!
//! ```text
//! cargo bench --bench wakeups -- --threads 100 --seconds 3
//! ```
//!
//! `stria bench wal-pe --threads N` cannot acknowledge more appends per
//! second than this prints for the same N.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use clap::Parser;
use crossbeam::queue::SegQueue;

#[derive(Parser, Debug)]
struct Args {
    /// Client threads, each with one request outstanding.
    #[arg(long, default_value = "1,8,100")]
    threads: String,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// cargo bench passes this; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

struct Req {
    done: Arc<AtomicBool>,
    client: Thread,
}

/// Round trips per second and answers per drain for `n` clients.
fn run(n: usize, seconds: f64) -> (f64, f64) {
    let queue = Arc::new(SegQueue::<Req>::new());
    let stop = Arc::new(AtomicBool::new(false));
    let trips = Arc::new(AtomicU64::new(0));
    let server = {
        let (queue, stop) = (queue.clone(), stop.clone());
        thread::spawn(move || {
            let mut drained = Vec::new();
            let mut drains = 0u64;
            while !stop.load(Ordering::Relaxed) {
                while let Some(r) = queue.pop() {
                    drained.push(r);
                }
                if drained.is_empty() {
                    thread::yield_now();
                    continue;
                }
                drains += 1;
                for r in drained.drain(..) {
                    r.done.store(true, Ordering::SeqCst);
                    r.client.unpark();
                }
            }
            drains
        })
    };
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let (queue, stop, trips) = (queue.clone(), stop.clone(), trips.clone());
            thread::spawn(move || {
                let me = thread::current();
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let done = Arc::new(AtomicBool::new(false));
                    queue.push(Req {
                        done: done.clone(),
                        client: me.clone(),
                    });
                    while !done.load(Ordering::SeqCst) && !stop.load(Ordering::Relaxed) {
                        thread::park_timeout(Duration::from_millis(10));
                    }
                    k += 1;
                }
                trips.fetch_add(k, Ordering::Relaxed);
            })
        })
        .collect();
    let start = Instant::now();
    thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("client");
    }
    let drains = server.join().expect("server");
    let elapsed = start.elapsed().as_secs_f64();
    let trips = trips.load(Ordering::Relaxed) as f64;
    (trips / elapsed, trips / drains.max(1) as f64)
}

fn main() {
    let args = Args::parse();
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "park/unpark round trips through one thread, no work, {:.1}s per run, {cores} cores",
        args.seconds
    );
    println!(
        "{:>8} {:>14} {:>16}",
        "threads", "round trips/s", "answers/drain"
    );
    for n in args.threads.split(',') {
        let n: usize = match n.trim().parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("--threads: {n:?} is not a positive number");
                std::process::exit(2);
            }
        };
        let (rate, per_drain) = run(n, args.seconds);
        println!("{n:>8} {rate:>14.0} {per_drain:>16.1}");
    }
}
