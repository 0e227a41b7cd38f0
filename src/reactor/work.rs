//! What a reactor runs: the [`Work`] trait and the [`Progress`] it reports.

use crate::device::WaitHint;

/// The state and logic a reactor runs, owned by the reactor thread.
///
/// A `Work` is built on the reactor thread by the factory given to
/// [`spawn`](super::spawn), after the thread is pinned, so it may hold
/// thread-bound things (device queues, `Rc`, buffers first touched on the
/// right NUMA node) and need not be `Send`. The engine (WAL, flush) implements
/// it against the device traits; the reactor knows nothing of backends.
///
/// None of these methods may block: a reactor thread is the only thread that
/// serves its queues and its ring. Messages to other reactors go through
/// [`Sender::try_send`](super::Sender::try_send), never `send`.
pub trait Work: 'static {
    /// What other threads send to this reactor.
    type Msg: Send + 'static;

    /// Handles one inbound message.
    fn handle(&mut self, msg: Self::Msg);

    /// Polls the device queues and runs whatever work is ready, reporting
    /// what happened; an all-zero [`Progress`] marks the iteration idle,
    /// which is what lets a `park` reactor go to sleep.
    fn poll(&mut self) -> Progress;

    /// Appends how a sleeping reactor can learn of new completions, one hint
    /// per queue (or fewer: `Idle` hints may be left out). Called only after
    /// an idle iteration, right before the reactor decides to sleep.
    ///
    /// The reactor waits for an `Fd` hint to become readable but does not
    /// read it: `poll` must consume the readiness (read the eventfd), or the
    /// next sleep returns at once.
    fn wait_hints(&self, out: &mut Vec<WaitHint>);

    /// False while the work cannot take more messages (its buffers are
    /// full): the reactor then leaves them in the ring, whose senders feel
    /// the back-pressure, and does not wake for them. Checked before each
    /// drain.
    fn accepting(&self) -> bool {
        true
    }

    /// Called once when the reactor stops, on its thread, after the messages
    /// still in the ring were handled. Work still in flight on the devices is
    /// this method's to finish or abandon.
    fn finish(&mut self) {}
}

/// What one call to [`Work::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Device completions collected.
    pub completions: usize,
    /// Other units of work run (requests submitted, timers fired, ...).
    pub work: usize,
}

impl Progress {
    /// Nothing happened.
    pub const IDLE: Progress = Progress {
        completions: 0,
        work: 0,
    };

    /// True when nothing happened.
    pub fn is_idle(self) -> bool {
        self == Progress::IDLE
    }
}
