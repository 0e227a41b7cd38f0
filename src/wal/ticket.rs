//! Tickets: how a writer learns that its append was acknowledged.
//!
//! The WAL reactor completes a ticket once its write reached the durability
//! it asked for; the writer either blocks on it ([`Ticket::wait`]) or checks
//! it ([`Ticket::poll`]) while it keeps other appends in flight.
//!
//! Waking without a lost wake-up: the waiter publishes its thread handle
//! (or a [`Notify`]) before it checks the state, and the reactor publishes
//! the state before it looks for a waiter (both sequentially consistent),
//! so at least one of them sees the other; `park` tolerates spurious
//! returns.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

use super::{Lsn, WalError};

/// Told when a ticket is acknowledged or failed, by the thread that does
/// it: an event loop that does not block on its tickets wakes through one.
/// It must be quick and must not block.
pub trait Notify: Send + Sync + std::fmt::Debug {
    fn notify(&self);
}

const PENDING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;

/// Shared between a writer and the WAL reactor.
#[derive(Debug, Default)]
pub(crate) struct TicketState {
    state: AtomicU8,
    lsn: AtomicU64,
    /// The LSN the WAL gave the append (0: none yet), set before it is
    /// acknowledged.
    given: AtomicU64,
    waiter: OnceLock<Thread>,
    notify: OnceLock<Arc<dyn Notify>>,
    error: OnceLock<String>,
}

impl TicketState {
    pub(crate) fn new() -> Arc<TicketState> {
        Arc::new(TicketState::default())
    }

    /// Records the LSN the WAL gave the append, before it is acknowledged.
    /// Whoever reads a written or durable watermark at or above `lsn`
    /// (published after this, with `SeqCst`) sees it.
    pub(crate) fn give(&self, lsn: Lsn) {
        self.given.store(lsn, Ordering::Release);
    }

    /// Acknowledges the append with its LSN (0 for a `none` write).
    pub(crate) fn complete(&self, lsn: Lsn) {
        self.lsn.store(lsn, Ordering::Relaxed);
        self.state.store(DONE, Ordering::SeqCst);
        self.wake();
    }

    /// Fails the append: it may or may not be in the log.
    pub(crate) fn fail(&self, why: &str) {
        let _ = self.error.set(why.to_string());
        self.state.store(FAILED, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if let Some(t) = self.waiter.get() {
            t.unpark();
        }
        if let Some(n) = self.notify.get() {
            n.notify();
        }
    }
}

/// An append in flight. Dropping it does not cancel the append.
///
/// The records of a group share one state, which the WAL gives the
/// group's last LSN: a record's ticket knows how far before the last it
/// is (`back`), so a group of any size costs one state.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub(crate) state: Arc<TicketState>,
    back: u64,
}

impl Ticket {
    pub(crate) fn new(state: Arc<TicketState>) -> Ticket {
        Ticket::before_last(state, 0)
    }

    /// The ticket of a group's record `back` records before its last,
    /// whose state is `state`.
    pub(crate) fn before_last(state: Arc<TicketState>, back: u64) -> Ticket {
        Ticket { state, back }
    }

    /// The record's LSN, of the state's (the last record's); 0 stays 0
    /// (a `none` write).
    fn own(&self, lsn: Lsn) -> Lsn {
        if lsn == 0 {
            0
        } else {
            lsn - self.back
        }
    }

    /// A ticket that is already acknowledged (`none` writes are not logged).
    pub(crate) fn done(lsn: Lsn) -> Ticket {
        let state = TicketState::new();
        state.complete(lsn);
        Ticket::new(state)
    }

    /// A ticket not acknowledged yet, given `lsn` (none when 0). For tests.
    #[cfg(test)]
    pub(crate) fn given(lsn: Lsn) -> Ticket {
        let state = TicketState::new();
        if lsn > 0 {
            state.give(lsn);
        }
        Ticket::new(state)
    }

    /// The outcome, if there is one yet: the LSN the write was logged at
    /// (0 for a `none` write), or why it failed.
    pub fn poll(&self) -> Option<Result<Lsn, WalError>> {
        match self.state.state.load(Ordering::SeqCst) {
            PENDING => None,
            DONE => Some(Ok(self.own(self.state.lsn.load(Ordering::Relaxed)))),
            _ => Some(Err(WalError::Failed(
                self.state.error.get().cloned().unwrap_or_default(),
            ))),
        }
    }

    /// The LSN the WAL gave the append, known before it is acknowledged
    /// (0 for a `none` write); `None` while the append waits in the WAL's
    /// ring or its buffers for an LSN, or when it failed before getting one.
    pub fn lsn(&self) -> Option<Lsn> {
        match self.state.state.load(Ordering::SeqCst) {
            DONE => Some(self.own(self.state.lsn.load(Ordering::Relaxed))),
            _ => match self.state.given.load(Ordering::Acquire) {
                0 => None,
                lsn => Some(self.own(lsn)),
            },
        }
    }

    /// Blocks the calling thread until the append is acknowledged.
    ///
    /// Only one thread may wait on a ticket (the first one to call `wait`
    /// is the one woken).
    pub fn wait(&self) -> Result<Lsn, WalError> {
        if let Some(r) = self.poll() {
            return r;
        }
        let _ = self.state.waiter.set(thread::current());
        loop {
            if let Some(r) = self.poll() {
                return r;
            }
            // A host thread is the one that reaps its log's completions.
            if super::host::drive_while_waiting() {
                continue;
            }
            // The timeout only bounds the damage of a waiter that is not the
            // registered one; the registered waiter is always unparked.
            thread::park_timeout(Duration::from_millis(100));
        }
    }

    /// Has `n` told once the append is acknowledged or failed (only the
    /// first call on a ticket counts). When that has already happened, `n`
    /// may not be told: check [`Ticket::is_done`] after this.
    pub fn notify(&self, n: Arc<dyn Notify>) {
        let _ = self.state.notify.set(n);
    }

    /// True once acknowledged or failed.
    pub fn is_done(&self) -> bool {
        self.state.state.load(Ordering::SeqCst) != PENDING
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_is_woken_by_completion_from_another_thread() {
        for _ in 0..2000 {
            let state = TicketState::new();
            let ticket = Ticket::new(state.clone());
            let t = thread::spawn(move || state.complete(42));
            assert_eq!(ticket.wait().unwrap(), 42);
            t.join().unwrap();
        }
    }

    #[test]
    fn the_lsn_is_known_once_given_before_the_acknowledgement() {
        let state = TicketState::new();
        let ticket = Ticket::new(state.clone());
        assert_eq!(ticket.lsn(), None);
        state.give(17);
        assert_eq!(ticket.lsn(), Some(17));
        assert!(!ticket.is_done());
        state.complete(17);
        assert_eq!(ticket.lsn(), Some(17));
        assert_eq!(Ticket::done(0).lsn(), Some(0));
    }

    #[test]
    fn the_records_of_a_group_share_a_state_and_have_their_own_lsns() {
        let state = TicketState::new();
        let group: Vec<Ticket> = (0..3)
            .map(|i| Ticket::before_last(state.clone(), 2 - i))
            .collect();
        assert!(group.iter().all(|t| t.lsn().is_none()));
        state.give(12);
        let given: Vec<_> = group.iter().map(|t| t.lsn().unwrap()).collect();
        assert_eq!(given, [10, 11, 12]);
        assert!(group.iter().all(|t| !t.is_done()));
        state.complete(12);
        let done: Vec<_> = group.iter().map(|t| t.wait().unwrap()).collect();
        assert_eq!(done, [10, 11, 12]);
    }

    #[test]
    fn a_notify_is_told_of_the_acknowledgement_from_another_thread() {
        use std::sync::atomic::AtomicUsize;
        #[derive(Debug)]
        struct Count(AtomicUsize);
        impl Notify for Count {
            fn notify(&self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        for i in 0..500 {
            let state = TicketState::new();
            let ticket = Ticket::new(state.clone());
            ticket.notify(count.clone());
            assert_eq!(count.0.load(Ordering::SeqCst), i);
            let t = thread::spawn(move || state.complete(1));
            t.join().unwrap();
            assert_eq!(count.0.load(Ordering::SeqCst), i + 1);
        }
        let state = TicketState::new();
        let ticket = Ticket::new(state.clone());
        ticket.notify(count.clone());
        state.fail("device gone");
        assert_eq!(count.0.load(Ordering::SeqCst), 501);
    }

    #[test]
    fn failure_carries_the_reason() {
        let state = TicketState::new();
        let ticket = Ticket::new(state.clone());
        assert!(ticket.poll().is_none());
        state.fail("device wal0: write at LBA 256 failed");
        let err = ticket.wait().unwrap_err().to_string();
        assert!(err.contains("LBA 256"), "{err}");
    }
}
