//! A log driven by the thread that appends to it.
//!
//! # Design
//!
//! The WAL's state ([`WalWork`]: the open batch, the device queues, the
//! watermarks) sits behind a lock that two threads may take: the WAL
//! reactor, and one *host*, an event loop that both appends and watches
//! the devices (the server's shard). While a host is registered
//! ([`Wal::host`](super::Wal::host)):
//!
//! - the host's appends go straight into the open batch under the lock,
//!   with no message through the reactor's ring and no doorbell;
//! - the host submits the batches on the device queues and reaps their
//!   completions itself ([`WalHost::drive`]), after each turn and whenever
//!   one of the queues' event descriptors, which its poll watches, becomes
//!   readable; so an acknowledgement completes its tickets on the thread
//!   that waits for them, and a durable write crosses none of Stria's
//!   other threads from socket to FLUSH and back;
//! - one group commit at a time: while a batch is on its way, the open
//!   batch stays open (unless it grew to its share of the stripe and was
//!   sealed), so the writes of the turns that run meanwhile go together
//!   in the next batch, as Redis's writes of one event-loop turn share one
//!   fsync. Sealing each turn's writes as soon as a slot was free made 1.7
//!   times the batches at 50 clients (7 records a batch against the
//!   reactor's 13) and cost more CPU per write than the handoff saved;
//! - the reactor still takes other threads' messages from its ring (the
//!   flush reactors' barriers, tools), but does not sleep on the devices:
//!   the host reaps their completions too. So that nothing waits on a host
//!   that is busy elsewhere, the reactor wakes every [`FALLBACK`] while
//!   requests are in flight and polls the queues itself.
//!
//! On the host's thread a blocking wait for a ticket ([`Ticket::wait`])
//! drives the log instead of sleeping, since no other thread may be
//! watching the devices. Order is kept: the host's appends take LSNs in the
//! order it makes them, as through the ring; appends of other threads
//! interleave with them as they always did.
//!
//! [`Ticket::wait`]: super::Ticket::wait

use std::any::Any;
use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::commit::{Msg, Rejoin, WalWork};
use super::stripe::Dev;
use super::Lsn;
use crate::device::{wait, Queue, WaitHint};
use crate::reactor::{Progress, Sender, Work};

/// How often a reactor whose WAL has a host polls queues with requests in
/// flight, in case the host is held up.
const FALLBACK: Duration = Duration::from_millis(10);

/// Polls of one [`WalHost::drive`] at most: each may submit what the one
/// before made ready (a sealed batch, a flush after a write).
const DRIVE_ROUNDS: usize = 8;

/// The WAL's state, shared by its reactor and its host.
pub(crate) struct Shared<Q: Queue> {
    work: Mutex<WalWork<Q>>,
    /// A host watches the devices.
    hosted: AtomicBool,
}

impl<Q: Queue> Shared<Q> {
    pub(crate) fn new(work: WalWork<Q>) -> Arc<Shared<Q>> {
        Arc::new(Shared {
            work: Mutex::new(work),
            hosted: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, WalWork<Q>> {
        // A panic on the reactor under the lock ends the reactor, which
        // fails the WAL's later appends; the state itself stays usable.
        self.work.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The host's side of [`Shared`], whatever the queues.
pub(crate) trait Drive: Send + Sync {
    /// Takes an append or barrier at once; gives it back when the WAL has
    /// no room for it now (the caller retries, as with a full ring).
    fn offer(&self, msg: Msg) -> Result<(), Msg>;

    /// Polls until nothing more is ready to submit or reap.
    fn drive(&self) -> Progress;

    /// Drives, then says how soon to drive again at the latest: `Some(0)`
    /// at once, `None` only when a watched descriptor says so.
    fn next_drive(&self) -> Option<Duration>;

    /// The descriptors to watch.
    fn event_fds(&self) -> Vec<RawFd>;

    /// Registers or ends the host; false when another host has it.
    fn set_hosted(&self, on: bool) -> bool;

    /// Takes back the lost device at position `d` as `dev`, a
    /// [`Dev`](super::stripe::Dev) of this log's queue type (see
    /// `WalWork::rejoin`).
    fn rejoin(&self, d: usize, dev: Box<dyn Any + Send>) -> Result<Lsn, Rejoin>;
}

impl<Q: Queue + Send + 'static> Drive for Shared<Q> {
    fn offer(&self, msg: Msg) -> Result<(), Msg> {
        let mut w = self.lock();
        let msg = match w.accepting() {
            true => match w.take(msg) {
                Ok(()) => return Ok(()),
                Err(msg) => msg,
            },
            false => msg,
        };
        // No buffer, or the reactor holds a message that found none:
        // completions may free one.
        w.poll();
        if !w.accepting() {
            return Err(msg);
        }
        w.take(msg)
    }

    fn drive(&self) -> Progress {
        let mut w = self.lock();
        let mut total = Progress::IDLE;
        for _ in 0..DRIVE_ROUNDS {
            let p = w.poll();
            total.completions += p.completions;
            total.work += p.work;
            if p.is_idle() {
                break;
            }
        }
        total
    }

    fn next_drive(&self) -> Option<Duration> {
        let mut hints = Vec::new();
        for _ in 0..DRIVE_ROUNDS {
            self.drive();
            hints.clear();
            self.lock().host_hints(&mut hints);
            if !hints.contains(&WaitHint::Ready) {
                break;
            }
        }
        let now = Instant::now();
        hints.iter().fold(None, |soonest, h| {
            let d = match *h {
                WaitHint::Ready => Duration::ZERO,
                WaitHint::Deadline(at) => at.saturating_duration_since(now),
                WaitHint::Idle | WaitHint::Fd(_) => return soonest,
            };
            Some(soonest.map_or(d, |s: Duration| s.min(d)))
        })
    }

    fn event_fds(&self) -> Vec<RawFd> {
        self.lock().event_fds()
    }

    fn rejoin(&self, d: usize, dev: Box<dyn Any + Send>) -> Result<Lsn, Rejoin> {
        let dev = dev.downcast::<Dev<Q>>().map_err(|_| {
            Rejoin::Refused("the new device is of another kind than the log's".into())
        })?;
        let (from, old) = self.lock().rejoin(d, *dev)?;
        drop(old);
        Ok(from)
    }

    fn set_hosted(&self, on: bool) -> bool {
        let mut w = self.lock();
        let changed = self
            .hosted
            .compare_exchange(!on, on, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if changed {
            w.one_at_a_time = on;
        }
        changed
    }
}

/// What the WAL reactor runs: the shared state, leaving the devices to a
/// host while there is one.
pub(crate) struct Reactor<Q: Queue>(pub Arc<Shared<Q>>);

impl<Q: Queue + Send + 'static> Work for Reactor<Q> {
    type Msg = Msg;

    fn handle(&mut self, msg: Msg) {
        self.0.lock().handle(msg);
    }

    fn poll(&mut self) -> Progress {
        self.0.lock().poll()
    }

    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        let w = self.0.lock();
        if !self.0.hosted.load(Ordering::SeqCst) {
            w.wait_hints(out);
            return;
        }
        w.timer_hints(out);
        if w.in_flight() {
            out.push(WaitHint::Deadline(Instant::now() + FALLBACK));
        }
    }

    fn accepting(&self) -> bool {
        self.0.lock().accepting()
    }

    fn finish(&mut self) {
        self.0.lock().finish();
    }
}

/// The log a thread hosts, and its devices' descriptors.
struct Hosted {
    drive: Arc<dyn Drive>,
    fds: Vec<RawFd>,
}

thread_local! {
    /// The log this thread hosts, if any.
    static HOSTED: RefCell<Option<Hosted>> = const { RefCell::new(None) };
}

/// True when the calling thread hosts `drive`.
pub(crate) fn hosts(drive: &Arc<dyn Drive>) -> bool {
    HOSTED.with(|h| {
        h.borrow()
            .as_ref()
            .is_some_and(|d| std::ptr::addr_eq(Arc::as_ptr(&d.drive), Arc::as_ptr(drive)))
    })
}

/// On a host thread: drives its log once and sleeps until one of its
/// devices may have completed something (a millisecond at most). False on
/// any other thread, which does nothing.
pub(crate) fn drive_while_waiting() -> bool {
    let Some((drive, fds)) = HOSTED.with(|h| {
        h.borrow()
            .as_ref()
            .map(|d| (d.drive.clone(), d.fds.clone()))
    }) else {
        return false;
    };
    match drive.next_drive() {
        Some(d) if d.is_zero() => {}
        next => {
            let limit = next.map_or(Duration::from_millis(1), |d| {
                d.min(Duration::from_millis(1))
            });
            if fds.is_empty() {
                std::thread::sleep(limit);
            } else {
                wait::wait_any(&fds, limit);
            }
        }
    }
    true
}

/// The host of a log: the thread that made it submits the log's batches
/// and reaps their completions, which it must then do for as long as it
/// holds this (see the module's documentation). Dropping it hands the
/// devices back to the WAL reactor.
pub struct WalHost {
    drive: Arc<dyn Drive>,
    /// Wakes the reactor when the host goes.
    sender: Sender<Msg>,
    /// Not `Send`: the host is the thread that registered.
    _thread: std::marker::PhantomData<*const ()>,
}

impl WalHost {
    pub(crate) fn new(drive: Arc<dyn Drive>, sender: Sender<Msg>) -> Option<WalHost> {
        if HOSTED.with(|h| h.borrow().is_some()) || !drive.set_hosted(true) {
            return None;
        }
        let fds = drive.event_fds();
        HOSTED.with(|h| {
            *h.borrow_mut() = Some(Hosted {
                drive: drive.clone(),
                fds,
            })
        });
        Some(WalHost {
            drive,
            sender,
            _thread: std::marker::PhantomData,
        })
    }

    /// The descriptors the host must watch: when one becomes readable
    /// (edge-triggered is enough: each completion signals it again), call
    /// [`WalHost::drive`].
    pub fn event_fds(&self) -> Vec<RawFd> {
        self.drive.event_fds()
    }

    /// The descriptors to watch now that a device joined the log (see
    /// [`crate::wal::Wal::rejoin`]): the host's waits watch them from now
    /// on, and the caller adds them to its own poll.
    pub fn rewatch(&self) -> Vec<RawFd> {
        let fds = self.drive.event_fds();
        HOSTED.with(|h| {
            if let Some(hosted) = h.borrow_mut().as_mut() {
                hosted.fds = fds.clone();
            }
        });
        fds
    }

    /// Submits what is ready, reaps completions and acknowledges the
    /// appends they make durable. Never waits.
    pub fn drive(&self) -> Progress {
        self.drive.drive()
    }

    /// Drives, then says how long the host may sleep at most before it
    /// drives again (`None`: until a watched descriptor is readable).
    /// Call it right before sleeping.
    pub fn next_drive(&self) -> Option<Duration> {
        self.drive.next_drive()
    }
}

impl Drop for WalHost {
    fn drop(&mut self) {
        HOSTED.with(|h| *h.borrow_mut() = None);
        self.drive.set_hosted(false);
        // A barrier through the ring wakes the reactor, which then sleeps
        // on the devices again; its ticket is of no interest.
        let _ = self
            .sender
            .try_send(Msg::Barrier(super::ticket::TicketState::new()));
    }
}
