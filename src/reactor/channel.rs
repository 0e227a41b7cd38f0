//! The inbound ring of a reactor and the [`Sender`]s that feed it.
//!
//! A bounded lock-free ring (crossbeam's `ArrayQueue`, safe for many
//! producers) rather than an unbounded queue: a reactor that falls behind
//! pushes back on its senders instead of growing memory without limit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam::queue::ArrayQueue;
use crossbeam::utils::Backoff;

use super::park::Doorbell;

/// The longest a blocked [`Sender::send`] sleeps between two attempts.
const MAX_SEND_PAUSE: Duration = Duration::from_millis(1);

/// State shared by a reactor, its handle and its senders.
#[derive(Debug)]
pub(super) struct Inbound<M> {
    ring: ArrayQueue<M>,
    pub(super) doorbell: Doorbell,
    /// Set by the handle to ask the reactor to stop.
    stop: AtomicBool,
    /// Set by the reactor thread when it stops taking messages (stopped or
    /// panicked), so that senders stop waiting for room.
    closed: AtomicBool,
}

impl<M> Inbound<M> {
    pub(super) fn new(capacity: usize, doorbell: Doorbell) -> Inbound<M> {
        Inbound {
            ring: ArrayQueue::new(capacity),
            doorbell,
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    pub(super) fn pop(&self) -> Option<M> {
        self.ring.pop()
    }

    pub(super) fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// True when the reactor has something to do without sleeping: a message
    /// in the ring or a stop request.
    pub(super) fn pending(&self) -> bool {
        !self.ring.is_empty() || self.stop.load(Ordering::SeqCst)
    }

    pub(super) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Asks the reactor to stop and wakes it if it sleeps. The doorbell is
    /// rung unconditionally: stopping is rare and must not depend on the
    /// reactor's sleeping flag.
    pub(super) fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.doorbell.ring();
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// Sends messages to one reactor. Cheap to clone; usable from any thread.
///
/// A message accepted while the reactor runs is handled, in the order this
/// sender sent it (messages from different senders interleave). A message
/// accepted concurrently with the reactor stopping may be dropped unhandled:
/// stop the producers before the reactor.
#[derive(Debug)]
pub struct Sender<M> {
    inbound: Arc<Inbound<M>>,
}

impl<M> Clone for Sender<M> {
    fn clone(&self) -> Sender<M> {
        Sender {
            inbound: Arc::clone(&self.inbound),
        }
    }
}

impl<M: Send> Sender<M> {
    pub(super) fn new(inbound: Arc<Inbound<M>>) -> Sender<M> {
        Sender { inbound }
    }

    /// Queues `msg` without waiting. Gives it back when the ring is full
    /// (back-pressure: retry later or shed load) or the reactor has stopped
    /// (see [`Sender::is_closed`] to tell the two apart).
    pub fn try_send(&self, msg: M) -> Result<(), M> {
        if self.inbound.is_closed() {
            return Err(msg);
        }
        self.inbound.ring.push(msg)?;
        self.inbound.doorbell.wake_if_sleeping();
        Ok(())
    }

    /// Queues `msg`, waiting while the ring is full: a few spins and yields,
    /// then sleeps that grow to a millisecond, so a sender stuck behind
    /// a slow reactor does not take a core from it. Gives the message back
    /// if the reactor has stopped. Not for use on a reactor thread, which
    /// must never wait.
    pub fn send(&self, mut msg: M) -> Result<(), M> {
        let backoff = Backoff::new();
        let mut pause = Duration::from_micros(20);
        loop {
            match self.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(back) => msg = back,
            }
            if self.inbound.is_closed() {
                return Err(msg);
            }
            if backoff.is_completed() {
                thread::sleep(pause);
                pause = (pause * 2).min(MAX_SEND_PAUSE);
            } else {
                backoff.snooze();
            }
        }
    }

    /// True once the reactor no longer takes messages: it stopped or its
    /// thread panicked.
    pub fn is_closed(&self) -> bool {
        self.inbound.is_closed()
    }

    /// Messages waiting in the ring (a moment's view; others may change it).
    pub fn len(&self) -> usize {
        self.inbound.ring.len()
    }

    /// True when no message waits in the ring.
    pub fn is_empty(&self) -> bool {
        self.inbound.ring.is_empty()
    }

    /// The most messages the ring holds.
    pub fn capacity(&self) -> usize {
        self.inbound.ring.capacity()
    }
}
