//! Reactors: poll-mode OS threads pinned to cores, each owning its device
//! queues.
//!
//! # Design
//!
//! A reactor is one thread on one core running one [`Work`]: the engine's
//! state for that core, holding the reactor's own queue on each device it
//! uses. Nothing else touches those queues, so submitting and reaping need no
//! locks. Each turn of the loop calls [`Work::poll`] (reap completions, run
//! ready work) and then hands the work the messages waiting in the reactor's
//! inbound ring, a bounded lock-free queue that other threads fill through
//! [`Sender`]s and that pushes back when full.
//!
//! When a turn finds nothing to do, the idle policy decides:
//! - `poll` goes straight round again: lowest latency, a whole core burnt,
//!   for bare metal with cores to spare.
//! - `park` keeps polling for `spin`, then sleeps until a message arrives,
//!   a device can have a completion (the work's [`WaitHint`]s: an fd becomes
//!   readable, a deadline passes) or a stop is requested. The protocol that
//!   makes sure no wake-up is lost is described in `park.rs`.
//!
//! [`spawn`] pins the new thread before it builds the work, so everything
//! the work allocates is first touched on its core, and reports a pin
//! failure or a panic while building as an error to its caller. A reactor
//! that cannot have its core does not start elsewhere.
//!
//! Files: `work.rs` (what a reactor runs), `channel.rs` (the inbound ring),
//! `park.rs` (sleeping and waking), `run.rs` (the loop), `affinity.rs`
//! (cores), `counters.rs`, `error.rs`.

mod affinity;
mod channel;
mod counters;
mod error;
mod park;
mod run;
mod work;

use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use affinity::{
    allowed_cores, confine_process, confine_thread, core_list, current_core, pin_to_core,
    thread_affinity,
};
pub use channel::Sender;
pub use counters::{Counter, Counters, CountersSnapshot};
pub use error::{ReactorError, Result};
pub use work::{Progress, Work};

pub use crate::config::IdlePolicy;
pub use crate::device::WaitHint;

use crate::config::ReactorsConfig;
use channel::Inbound;
use error::panic_message;
use park::Doorbell;

/// How one reactor runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReactorConfig {
    /// Names the thread and appears in every error and report.
    pub name: String,
    /// The core to pin to; `None` leaves the thread unpinned, for tests and
    /// tools only (the appliance always pins).
    pub core: Option<usize>,
    pub idle: IdlePolicy,
    /// With `park`: how long to keep polling with nothing to do before
    /// sleeping.
    pub spin: Duration,
    /// Messages the inbound ring holds before senders feel back-pressure.
    pub ring_capacity: usize,
}

impl ReactorConfig {
    /// Ring capacity when nothing else is asked for.
    pub const DEFAULT_RING_CAPACITY: usize = 1024;

    /// Spin time of [`ReactorConfig::unpinned`].
    pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

    /// A reactor pinned to `core`, with the idle policy of the configuration.
    pub fn pinned(
        name: impl Into<String>,
        core: usize,
        reactors: &ReactorsConfig,
    ) -> ReactorConfig {
        ReactorConfig {
            name: name.into(),
            core: Some(core),
            idle: reactors.idle,
            spin: Duration::from_micros(reactors.spin_us),
            ring_capacity: Self::DEFAULT_RING_CAPACITY,
        }
    }

    /// An unpinned reactor that parks, for tests and tools.
    pub fn unpinned(name: impl Into<String>) -> ReactorConfig {
        ReactorConfig {
            name: name.into(),
            core: None,
            idle: IdlePolicy::Park,
            spin: Self::DEFAULT_SPIN,
            ring_capacity: Self::DEFAULT_RING_CAPACITY,
        }
    }
}

/// Starts a reactor thread that runs the [`Work`] built by `make`.
///
/// On the new thread, in order: pin to `cfg.core`, build the work with
/// `make`, tell the caller, then loop. Returns once the work is built, with
/// an error if the core is not one the calling thread may run on (see
/// [`allowed_cores`]; spawn reactors from an unpinned thread), pinning
/// fails, or `make` panics.
pub fn spawn<W, F>(cfg: ReactorConfig, make: F) -> Result<Reactor<W::Msg>>
where
    W: Work,
    F: FnOnce() -> W + Send + 'static,
{
    let name = cfg.name.clone();
    if cfg.ring_capacity == 0 {
        return Err(ReactorError::ZeroCapacity { name });
    }
    if let Some(core) = cfg.core {
        // The kernel would let a thread widen its mask to any core of its
        // cpuset, past what `taskset` gave the process; refuse that here.
        let allowed = allowed_cores();
        if !allowed.contains(&core) {
            return Err(ReactorError::CoreNotAllowed {
                name,
                core,
                allowed,
            });
        }
    }
    let doorbell = Doorbell::new().map_err(|source| ReactorError::Doorbell {
        name: name.clone(),
        source,
    })?;
    let inbound = Arc::new(Inbound::new(cfg.ring_capacity, doorbell));
    let counters = Arc::new(Counters::new(&name));
    let (started_tx, started_rx) = mpsc::sync_channel(1);

    let thread = thread::Builder::new()
        .name(name.clone())
        .spawn({
            let (cfg, inbound, counters) =
                (cfg.clone(), Arc::clone(&inbound), Arc::clone(&counters));
            move || reactor_main(cfg, make, &inbound, &counters, started_tx)
        })
        .map_err(|source| ReactorError::Thread {
            name: name.clone(),
            source,
        })?;

    match started_rx.recv() {
        Ok(Ok(())) => Ok(Reactor {
            cfg,
            inbound,
            counters,
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            // The thread has returned or is about to; nothing is left to run.
            let _ = thread.join();
            Err(e)
        }
        // The thread ended without reporting; only a panic does that.
        Err(mpsc::RecvError) => Err(match thread.join() {
            Err(payload) => ReactorError::StartPanicked {
                name,
                message: panic_message(&*payload),
            },
            Ok(_) => ReactorError::StartPanicked {
                name,
                message: "the thread ended before building its work".to_owned(),
            },
        }),
    }
}

/// The body of a reactor thread.
fn reactor_main<W, F>(
    cfg: ReactorConfig,
    make: F,
    inbound: &Inbound<W::Msg>,
    counters: &Counters,
    started: mpsc::SyncSender<Result<()>>,
) -> Result<()>
where
    W: Work,
    F: FnOnce() -> W,
{
    /// Closes the ring however the thread ends, panics included, so that
    /// senders waiting for room give up instead of waiting forever.
    struct CloseOnExit<'a, M>(&'a Inbound<M>);
    impl<M> Drop for CloseOnExit<'_, M> {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let _close = CloseOnExit(inbound);

    // Send errors below mean spawn's caller is gone, which cannot happen
    // while spawn waits for this message; there is no one else to tell.
    if let Some(core) = cfg.core {
        if let Err(source) = pin_to_core(core) {
            let _ = started.send(Err(ReactorError::Pin {
                name: cfg.name,
                core,
                source,
            }));
            return Ok(());
        }
    }
    if cfg.idle == IdlePolicy::Park {
        park::tighten_timer_slack();
    }
    let mut work = match panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(work) => work,
        Err(payload) => {
            let _ = started.send(Err(ReactorError::StartPanicked {
                name: cfg.name,
                message: panic_message(&*payload),
            }));
            return Ok(());
        }
    };
    let _ = started.send(Ok(()));
    drop(started);
    tracing::debug!(reactor = %cfg.name, core = ?cfg.core, idle = ?cfg.idle, "reactor started");

    run::run(&mut work, inbound, counters, cfg.idle, cfg.spin).map_err(|source| {
        ReactorError::Park {
            name: cfg.name,
            source,
        }
    })
}

/// A running reactor. Dropping it stops the reactor and waits for it, as
/// [`Reactor::stop`] does, logging any error.
#[derive(Debug)]
pub struct Reactor<M> {
    cfg: ReactorConfig,
    inbound: Arc<Inbound<M>>,
    counters: Arc<Counters>,
    /// Present until the reactor is stopped.
    thread: Option<JoinHandle<Result<()>>>,
}

impl<M: Send + 'static> Reactor<M> {
    /// The reactor's name.
    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// The core it is pinned to, if any.
    pub fn core(&self) -> Option<usize> {
        self.cfg.core
    }

    /// A new sender to this reactor.
    pub fn sender(&self) -> Sender<M> {
        Sender::new(Arc::clone(&self.inbound))
    }

    /// Its counters, live.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// False once the thread has ended, which before `stop` means it
    /// panicked or failed to park.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the reactor: it handles the messages already in its ring, calls
    /// [`Work::finish`] and ends. Waits for that and returns the final
    /// counters, or the error or panic that ended the thread.
    pub fn stop(mut self) -> Result<CountersSnapshot> {
        self.shut_down()?;
        Ok(self.counters.snapshot())
    }
}

impl<M> Reactor<M> {
    fn shut_down(&mut self) -> Result<()> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.inbound.request_stop();
        match thread.join() {
            Ok(outcome) => outcome,
            Err(payload) => Err(ReactorError::Panicked {
                name: self.cfg.name.clone(),
                message: panic_message(&*payload),
            }),
        }
    }
}

impl<M> Drop for Reactor<M> {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            tracing::error!("{e}");
        }
    }
}
