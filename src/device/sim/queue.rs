//! One reactor's queue on a simulated device.

use std::fmt;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::state::State;
use super::Shared;
use crate::device::{Completion, DeviceInfo, Queue, Rejected, Request, WaitHint};

/// A queue on a [`super::SimDevice`]. Any number may be open on one device,
/// each used by its own thread; they share the device's state behind a lock.
pub struct SimQueue {
    shared: Arc<Shared>,
    id: u64,
    /// Requests submitted and not yet returned by `poll`.
    outstanding: usize,
}

impl SimQueue {
    pub(super) fn new(shared: Arc<Shared>) -> SimQueue {
        let id = shared.lock().open_queue();
        SimQueue {
            shared,
            id,
            outstanding: 0,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Queue for SimQueue {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn submit(&mut self, req: Request) -> Result<(), Rejected> {
        let outstanding = self.outstanding;
        self.state().submit(self.id, req, outstanding)?;
        self.outstanding += 1;
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        if self.outstanding == 0 {
            return 0;
        }
        let n = self.state().poll(self.id, out);
        self.outstanding -= n;
        n
    }

    fn in_flight(&self) -> usize {
        self.outstanding
    }

    fn wait_hint(&self) -> WaitHint {
        if self.outstanding == 0 {
            return WaitHint::Idle;
        }
        match self.state().next_due(self.id) {
            Some(due) if due > Instant::now() => WaitHint::Deadline(due),
            _ => WaitHint::Ready,
        }
    }
}

impl fmt::Debug for SimQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimQueue")
            .field("device", &self.shared.info.name)
            .field("id", &self.id)
            .field("outstanding", &self.outstanding)
            .finish()
    }
}

impl Drop for SimQueue {
    fn drop(&mut self) {
        // A poisoned lock means another thread panicked mid-update; the
        // device is unusable then and there is nothing to tidy.
        if let Ok(mut state) = self.shared.state.lock() {
            state.close_queue(self.id);
        }
    }
}
