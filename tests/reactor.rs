//! Reactor threads: delivery, back-pressure, pinning, parking and waking,
//! panics and counters. Every reactor here parks (the machines running the
//! suite may have two cores); the one `poll` test runs for a few ms.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use stria::config::IdlePolicy;
use stria::device::WaitHint;
use stria::reactor::{
    self, allowed_cores, current_core, thread_affinity, Progress, ReactorConfig, ReactorError, Work,
};

const PROMPT: Duration = Duration::from_millis(50);
const PATIENCE: Duration = Duration::from_secs(2);
/// How many wake-ups a latency test times. A loaded machine (CI has two
/// vCPUs) now and then schedules a woken thread late, past [`PROMPT`]; a
/// reactor that is slow to wake is slow every time, so the quickest of a
/// few must be prompt.
const TRIES: usize = 5;

/// A reactor that parks as soon as it finds nothing to do.
fn parks_at_once(name: &str) -> ReactorConfig {
    ReactorConfig {
        spin: Duration::ZERO,
        ..ReactorConfig::unpinned(name)
    }
}

/// The quickest of [`TRIES`] runs of `once`, which wakes the reactor (whose
/// park counter is `parks`) and returns how long that took; each run starts
/// once the reactor has parked since the one before.
fn quickest(parks: &reactor::Counter, mut once: impl FnMut() -> Duration) -> Duration {
    let mut best = Duration::MAX;
    let mut seen = 0;
    for _ in 0..TRIES {
        wait_until("the reactor parks", || parks.get() > seen);
        seen = parks.get();
        best = best.min(once());
    }
    best
}

/// Waits, sleeping, until `cond` holds; fails the test after [`PATIENCE`].
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Keeps every message and hands them over when the reactor finishes.
struct Recorder<M> {
    seen: Vec<M>,
    done: mpsc::Sender<Vec<M>>,
}

impl<M: Send + 'static> Work for Recorder<M> {
    type Msg = M;
    fn handle(&mut self, msg: M) {
        self.seen.push(msg);
    }
    fn poll(&mut self) -> Progress {
        Progress::IDLE
    }
    fn wait_hints(&self, _out: &mut Vec<WaitHint>) {}
    fn finish(&mut self) {
        self.done.send(std::mem::take(&mut self.seen)).unwrap();
    }
}

fn recorder<M: Send + 'static>() -> (impl FnOnce() -> Recorder<M> + Send, mpsc::Receiver<Vec<M>>) {
    let (done, rx) = mpsc::channel();
    (
        move || Recorder {
            seen: Vec::new(),
            done,
        },
        rx,
    )
}

/// Answers every number on the channel that came with it.
struct Echo;

impl Work for Echo {
    type Msg = (u64, mpsc::Sender<u64>);
    fn handle(&mut self, (n, reply): Self::Msg) {
        // The test may have given up waiting; nothing to do then.
        let _ = reply.send(n);
    }
    fn poll(&mut self) -> Progress {
        Progress::IDLE
    }
    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        out.push(WaitHint::Idle);
    }
}

#[test]
fn messages_from_one_sender_arrive_in_order() {
    let (make, done) = recorder::<u64>();
    let cfg = ReactorConfig {
        ring_capacity: 8,
        ..parks_at_once("order1")
    };
    let r = reactor::spawn(cfg, make).unwrap();
    let tx = r.sender();
    for i in 0..5_000 {
        tx.send(i).unwrap();
    }
    let counters = r.stop().unwrap();
    assert_eq!(done.recv().unwrap(), (0..5_000).collect::<Vec<_>>());
    assert_eq!(counters.messages, 5_000);
}

#[test]
fn messages_from_many_senders_arrive_in_each_senders_order() {
    const SENDERS: u64 = 4;
    const EACH: u64 = 2_000;
    let (make, done) = recorder::<(u64, u64)>();
    let cfg = ReactorConfig {
        ring_capacity: 16,
        ..parks_at_once("orderN")
    };
    let r = reactor::spawn(cfg, make).unwrap();
    let producers: Vec<_> = (0..SENDERS)
        .map(|id| {
            let tx = r.sender();
            thread::spawn(move || {
                for seq in 0..EACH {
                    tx.send((id, seq)).unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let counters = r.stop().unwrap();
    let seen = done.recv().unwrap();
    assert_eq!(seen.len() as u64, SENDERS * EACH);
    for id in 0..SENDERS {
        let mine: Vec<u64> = seen.iter().filter(|m| m.0 == id).map(|m| m.1).collect();
        assert_eq!(mine, (0..EACH).collect::<Vec<_>>(), "sender {id}");
    }
    assert_eq!(counters.messages, SENDERS * EACH);
}

/// Blocks in its first message until the test opens the gate, so the ring
/// fills up behind it.
struct Gated {
    entered: mpsc::Sender<()>,
    gate: mpsc::Receiver<()>,
    inner: Recorder<u32>,
}

impl Work for Gated {
    type Msg = u32;
    fn handle(&mut self, msg: u32) {
        if self.inner.seen.is_empty() {
            self.entered.send(()).unwrap();
            self.gate.recv().unwrap();
        }
        self.inner.handle(msg);
    }
    fn poll(&mut self) -> Progress {
        Progress::IDLE
    }
    fn wait_hints(&self, _out: &mut Vec<WaitHint>) {}
    fn finish(&mut self) {
        self.inner.finish();
    }
}

#[test]
fn a_full_ring_gives_the_message_back() {
    let (entered_tx, entered) = mpsc::channel();
    let (open, gate) = mpsc::channel();
    let (make_inner, done) = recorder::<u32>();
    let cfg = ReactorConfig {
        ring_capacity: 4,
        ..parks_at_once("backpressure")
    };
    let r = reactor::spawn(cfg, move || Gated {
        entered: entered_tx,
        gate,
        inner: make_inner(),
    })
    .unwrap();
    let tx = r.sender();
    tx.try_send(0).unwrap();
    entered.recv_timeout(PATIENCE).unwrap();
    for i in 1..=4 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(tx.try_send(5), Err(5));
    assert_eq!(tx.len(), 4);
    assert!(!tx.is_closed());
    open.send(()).unwrap();
    tx.send(5).unwrap();
    r.stop().unwrap();
    assert_eq!(done.recv().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_reactor_runs_on_its_core_from_the_start() {
    for core in allowed_cores() {
        let (seen_tx, seen) = mpsc::channel();
        let cfg = ReactorConfig {
            core: Some(core),
            ..parks_at_once(&format!("pin{core}"))
        };
        let r = reactor::spawn(cfg, move || {
            seen_tx
                .send((current_core().unwrap(), thread_affinity().unwrap()))
                .unwrap();
            Echo
        })
        .unwrap();
        assert_eq!(seen.recv().unwrap(), (core, vec![core]));
        assert_eq!(r.core(), Some(core));
        r.stop().unwrap();
    }
}

#[test]
fn a_core_outside_the_allowed_set_is_an_error() {
    let core = allowed_cores().into_iter().max().unwrap() + 1;
    let cfg = ReactorConfig {
        core: Some(core),
        ..parks_at_once("nocore")
    };
    let err = reactor::spawn(cfg, || Echo).unwrap_err();
    assert!(
        matches!(err, ReactorError::CoreNotAllowed { core: c, .. } if c == core),
        "{err}"
    );
    assert!(err.to_string().contains(&format!("core {core}")), "{err}");
}

#[test]
fn a_panic_while_building_the_work_fails_spawn() {
    let err =
        reactor::spawn(parks_at_once("badmake"), || -> Echo { panic!("no device") }).unwrap_err();
    assert!(
        matches!(&err, ReactorError::StartPanicked { message, .. } if message == "no device"),
        "{err}"
    );
}

/// Waits until the reactor is asleep, then checks that a message wakes it.
#[test]
fn a_parked_reactor_wakes_promptly_for_a_message() {
    let r = reactor::spawn(parks_at_once("wake-msg"), || Echo).unwrap();
    let counters = r.counters();
    wait_until("the reactor parks", || counters.parks.get() >= 1);
    let iterations = counters.iterations.get();
    thread::sleep(Duration::from_millis(20));
    assert_eq!(
        counters.iterations.get(),
        iterations,
        "a parked reactor does not loop"
    );

    let (reply, answers) = mpsc::channel();
    let tx = r.sender();
    let woke = quickest(&counters.parks, || {
        let sent = Instant::now();
        tx.send((7, reply.clone())).unwrap();
        assert_eq!(answers.recv_timeout(PATIENCE).unwrap(), 7);
        sent.elapsed()
    });
    assert!(woke < PROMPT, "woke after {woke:?} at best");
    let c = r.stop().unwrap();
    assert!(c.woken_by_message >= TRIES as u64, "{c}");
}

/// Completes whenever its socket has bytes, as an io_uring queue completes
/// when its eventfd is readable.
struct FdWork {
    sock: UnixStream,
    fired: mpsc::Sender<Instant>,
}

impl Work for FdWork {
    type Msg = ();
    fn handle(&mut self, _msg: ()) {}
    fn poll(&mut self) -> Progress {
        let mut buf = [0u8; 16];
        match self.sock.read(&mut buf) {
            Ok(n) if n > 0 => {
                self.fired.send(Instant::now()).unwrap();
                Progress {
                    completions: n,
                    work: 0,
                }
            }
            Err(e) if e.kind() != ErrorKind::WouldBlock => panic!("{e}"),
            _ => Progress::IDLE,
        }
    }
    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        out.push(WaitHint::Fd(self.sock.as_raw_fd()));
    }
}

#[test]
fn a_parked_reactor_wakes_when_a_hint_fd_becomes_readable() {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    theirs.set_nonblocking(true).unwrap();
    let (fired_tx, fired) = mpsc::channel();
    let r = reactor::spawn(parks_at_once("wake-fd"), move || FdWork {
        sock: theirs,
        fired: fired_tx,
    })
    .unwrap();
    let counters = r.counters();
    let woke = quickest(&counters.parks, || {
        let written = Instant::now();
        ours.write_all(b"x").unwrap();
        fired.recv_timeout(PATIENCE).unwrap() - written
    });
    assert!(woke < PROMPT, "woke after {woke:?} at best");
    let c = r.stop().unwrap();
    assert!(c.woken_by_device >= TRIES as u64, "{c}");
    assert_eq!(c.completions, TRIES as u64);
}

/// A simulated device: a message starts an operation due after the given
/// time; it completes when polled past its deadline.
struct DeadlineWork {
    due: Option<Instant>,
    fired: mpsc::Sender<Instant>,
}

impl Work for DeadlineWork {
    type Msg = Duration;
    fn handle(&mut self, latency: Duration) {
        self.due = Some(Instant::now() + latency);
    }
    fn poll(&mut self) -> Progress {
        match self.due {
            Some(due) if Instant::now() >= due => {
                self.due = None;
                self.fired.send(Instant::now()).unwrap();
                Progress {
                    completions: 1,
                    work: 0,
                }
            }
            _ => Progress::IDLE,
        }
    }
    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        out.push(self.due.map_or(WaitHint::Idle, WaitHint::Deadline));
    }
}

#[test]
fn a_parked_reactor_wakes_at_a_hint_deadline_without_spinning() {
    let (fired_tx, fired) = mpsc::channel();
    let r = reactor::spawn(parks_at_once("wake-deadline"), move || DeadlineWork {
        due: None,
        fired: fired_tx,
    })
    .unwrap();
    let counters = r.counters();
    let latency = Duration::from_millis(20);
    let tx = r.sender();
    let fired_after = quickest(&counters.parks, || {
        let sent = Instant::now();
        tx.send(latency).unwrap();
        let after = fired.recv_timeout(PATIENCE).unwrap() - sent;
        assert!(after >= latency, "fired early, after {after:?}");
        after
    });
    assert!(
        fired_after < latency + PROMPT,
        "fired late, after {fired_after:?} at best"
    );
    let c = r.stop().unwrap();
    assert!(c.woken_by_device >= TRIES as u64, "{c}");
    assert!(
        c.iterations < 100 * TRIES as u64,
        "the reactor spun while waiting: {c}"
    );
}

/// Each round trip sends just as the reactor goes back to sleep, which is
/// where a lost wake-up would hang.
#[test]
fn no_wakeup_is_lost_in_send_and_sleep_races() {
    let r = reactor::spawn(parks_at_once("race"), || Echo).unwrap();
    let tx = r.sender();
    let (reply, answers) = mpsc::channel();
    for i in 0..10_000 {
        tx.send((i, reply.clone())).unwrap();
        assert_eq!(answers.recv_timeout(PATIENCE), Ok(i), "round trip {i}");
    }
    let c = r.stop().unwrap();
    assert_eq!(c.messages, 10_000);
    assert!(c.parks > 0, "{c}");
}

#[test]
fn no_wakeup_is_lost_with_two_senders_racing() {
    let r = reactor::spawn(parks_at_once("race2"), || Echo).unwrap();
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let tx = r.sender();
            thread::spawn(move || {
                let (reply, answers) = mpsc::channel();
                for i in 0..2_000 {
                    tx.send((i, reply.clone())).unwrap();
                    assert_eq!(answers.recv_timeout(PATIENCE), Ok(i), "round trip {i}");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(r.stop().unwrap().messages, 4_000);
}

/// Panics in `poll` once it has been handed a message.
struct Bomb {
    armed: bool,
}

impl Work for Bomb {
    type Msg = ();
    fn handle(&mut self, _msg: ()) {
        self.armed = true;
    }
    fn poll(&mut self) -> Progress {
        assert!(!self.armed, "boom in poll");
        Progress::IDLE
    }
    fn wait_hints(&self, _out: &mut Vec<WaitHint>) {}
}

#[test]
fn a_panic_in_poll_surfaces_from_stop() {
    let r = reactor::spawn(parks_at_once("bomb"), || Bomb { armed: false }).unwrap();
    let tx = r.sender();
    tx.send(()).unwrap();
    // The thread ends only after the panic hook has printed the message,
    // and with RUST_BACKTRACE=1 (as in CI) a symbolised backtrace of this
    // debug build: over 100 ms on an idle machine, seconds on a loaded one.
    // The limit only guards against a reactor that never dies.
    let start = Instant::now();
    while r.is_running() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting until the reactor dies"
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert!(tx.is_closed());
    assert_eq!(tx.send(()), Err(()));
    let err = r.stop().unwrap_err();
    assert!(
        matches!(&err, ReactorError::Panicked { name, message } if name == "bomb" && message == "boom in poll"),
        "{err}"
    );
}

/// Reports one completion for every unit a message announces.
struct Counting {
    owed: usize,
}

impl Work for Counting {
    type Msg = usize;
    fn handle(&mut self, n: usize) {
        self.owed += n;
    }
    fn poll(&mut self) -> Progress {
        let n = self.owed.min(3);
        self.owed -= n;
        Progress {
            completions: n,
            work: usize::from(n > 0),
        }
    }
    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        out.push(if self.owed > 0 {
            WaitHint::Ready
        } else {
            WaitHint::Idle
        });
    }
}

#[test]
fn counters_add_up() {
    let r = reactor::spawn(parks_at_once("count"), || Counting { owed: 0 }).unwrap();
    let live = r.counters();
    let tx = r.sender();
    let mut owed = 0;
    for n in 1..=200 {
        tx.send(n).unwrap();
        owed += n as u64;
    }
    wait_until("all completions are reported", || {
        live.completions.get() == owed
    });
    let c = r.stop().unwrap();
    assert_eq!(c.messages, 200);
    assert_eq!(c.completions, owed);
    assert!(c.work >= owed / 3);
    assert!(c.iterations >= c.work);
    assert!(c.busy_ns > 0 && c.idle_ns >= c.parked_ns);
    assert!(c.parks >= c.woken_by_message + c.woken_by_device);
    let line = c.to_string();
    assert!(
        line.starts_with("reactor count: ") && !line.contains('\n'),
        "{line}"
    );
    assert!(line.contains(&format!("{owed} completions")), "{line}");
}

#[test]
fn the_poll_policy_never_parks() {
    let cfg = ReactorConfig {
        idle: IdlePolicy::Poll,
        ..ReactorConfig::unpinned("poll")
    };
    let r = reactor::spawn(cfg, || Echo).unwrap();
    let tx = r.sender();
    let (reply, answers) = mpsc::channel();
    for i in 0..100 {
        tx.send((i, reply.clone())).unwrap();
        assert_eq!(answers.recv_timeout(PATIENCE), Ok(i));
    }
    let c = r.stop().unwrap();
    assert_eq!((c.messages, c.parks), (100, 0), "{c}");
}

#[test]
fn stopping_handles_queued_messages_then_finishes() {
    let (make, done) = recorder::<u32>();
    let r = reactor::spawn(parks_at_once("drain"), make).unwrap();
    let tx = r.sender();
    for i in 0..100 {
        tx.send(i).unwrap();
    }
    drop(r);
    assert_eq!(
        done.recv_timeout(PATIENCE).unwrap(),
        (0..100).collect::<Vec<_>>()
    );
    assert!(tx.is_closed());
    assert_eq!(tx.try_send(100), Err(100));
}

#[test]
fn a_zero_capacity_ring_is_refused() {
    let cfg = ReactorConfig {
        ring_capacity: 0,
        ..parks_at_once("empty")
    };
    let err = reactor::spawn(cfg, || Echo).unwrap_err();
    assert!(matches!(err, ReactorError::ZeroCapacity { .. }), "{err}");
}
