//! One reactor's queue on an [`super::SpdkDevice`]: its own I/O queue pair.
//!
//! - **Submission** checks the request ([`check_request`], then the memory
//!   rule of the transport) and issues the command at once. When SPDK is
//!   out of request objects (-ENOMEM: a large request split into many
//!   commands) the request waits in a FIFO that `poll` retries after
//!   completions free some; later requests queue behind it.
//! - **Polling** is `spdk_nvme_qpair_process_completions(qpair, 0)`: every
//!   finished command's callback records (slot, status) in the shim, and
//!   each becomes a [`Completion`].
//! - **Waking.** A polled queue pair has no file descriptor to sleep on, so
//!   [`Queue::wait_hint`] says `Ready` whenever anything is in flight: a
//!   parked reactor keeps spinning while SPDK I/O is outstanding and sleeps
//!   only once it is idle. That is the poll-mode model SPDK is built for.
//! - **Not Send.** The queue pair may only be used by the thread that
//!   allocated it, so the queue stays on the reactor that opened it.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::qpair::{QPair, Status};
use super::Shared;
use crate::device::{
    check_request, BackendKind, Completion, DeviceError, DeviceInfo, IoKind, Op, Queue, Rejected,
    Request, Result, WaitHint,
};

/// How long dropping a queue waits for its requests before aborting them.
const DRAIN_ON_DROP: Duration = Duration::from_secs(5);

/// One reactor's queue pair on an SPDK namespace.
pub struct SpdkQueue {
    qpair: QPair,
    shared: Arc<Shared>,
    /// Requests waiting for SPDK request objects, oldest first.
    deferred: VecDeque<Request>,
    /// Completions decided without the controller, for the next `poll`.
    done: Vec<Completion>,
    /// Why the queue pair is unusable, once it failed.
    broken: Option<String>,
    in_flight: usize,
}

impl SpdkQueue {
    pub(super) fn open(shared: Arc<Shared>) -> Result<SpdkQueue> {
        let info = &shared.info;
        let qpair = QPair::alloc(
            &shared.ctrl,
            shared.nsid,
            info.block_size,
            info.queue_depth,
            shared.requests,
        )
        .map_err(|e| DeviceError::Unavailable {
            device: info.name.clone(),
            backend: BackendKind::Spdk.as_str(),
            why: format!(
                "cannot allocate an I/O queue pair on {:?}: {e}",
                shared.ctrl.trid()
            ),
        })?;
        Ok(SpdkQueue {
            qpair,
            deferred: VecDeque::new(),
            done: Vec::with_capacity(info.queue_depth as usize),
            broken: None,
            in_flight: 0,
            shared,
        })
    }

    fn info_ref(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// Completes `req` now, with `result` (through the flush latch).
    fn finish_now(&mut self, req: Request, result: Result<()>) {
        let result = self.shared.latch.finish(&self.shared.info, &req, result);
        self.done.push(Completion::of(req, result));
    }

    fn offline(&self, req: &Request, why: &str) -> DeviceError {
        DeviceError::Offline {
            device: self.shared.info.name.clone(),
            kind: req.kind(),
            lba: req.lba(),
            why: why.to_string(),
        }
    }

    /// Issues `req`, deferring it when SPDK is out of request objects.
    fn issue(&mut self, req: Request) {
        match self.qpair.submit(req) {
            Ok(()) => {}
            Err((req, rc)) if rc == -libc::ENOMEM && self.qpair.in_flight() > 0 => {
                self.deferred.push_back(req);
            }
            Err((req, rc)) if rc == -libc::ENXIO => {
                self.break_queue(format!("queue pair disconnected (errno {})", -rc));
                let why = self.broken.clone().unwrap_or_default();
                let e = self.offline(&req, &why);
                self.finish_now(req, Err(e));
            }
            Err((req, rc)) => {
                let e = self.io_error(&req, io::Error::from_raw_os_error(-rc));
                self.finish_now(req, Err(e));
            }
        }
    }

    fn io_error(&self, req: &Request, source: io::Error) -> DeviceError {
        DeviceError::Io {
            device: self.shared.info.name.clone(),
            kind: req.kind(),
            lba: req.lba(),
            source,
        }
    }

    /// Retries deferred requests, oldest first, while SPDK takes them.
    fn retry_deferred(&mut self) {
        while let Some(req) = self.deferred.pop_front() {
            if self.broken.is_some() {
                self.deferred.push_front(req);
                return;
            }
            match self.qpair.submit(req) {
                Ok(()) => {}
                Err((req, rc)) if rc == -libc::ENOMEM && self.qpair.in_flight() > 0 => {
                    self.deferred.push_front(req);
                    return;
                }
                Err((req, rc)) => {
                    let e = self.io_error(&req, io::Error::from_raw_os_error(-rc));
                    self.finish_now(req, Err(e));
                }
            }
        }
    }

    /// The queue pair (or its controller) failed: every request it holds or
    /// that waits for it fails, and so will every later one.
    fn break_queue(&mut self, why: String) {
        if self.broken.is_some() {
            return;
        }
        let why = format!(
            "{why}; SPDK failure reason {}{}",
            self.qpair.failure_reason(),
            if self.shared.ctrl.is_failed() {
                ", controller failed"
            } else {
                ""
            }
        );
        tracing::error!(device = %self.shared.info.name, "SPDK queue pair failed, failing its requests: {why}");
        self.broken = Some(why.clone());
        let mut left = self.qpair.abort_all();
        left.extend(self.deferred.drain(..));
        for req in left {
            let e = self.offline(&req, &why);
            self.finish_now(req, Err(e));
        }
    }
}

/// What an NVMe status means for `req`.
fn status_result(info: &DeviceInfo, req: &Request, status: Status) -> Result<()> {
    if status.is_ok() {
        return Ok(());
    }
    Err(DeviceError::Io {
        device: info.name.clone(),
        kind: req.kind(),
        lba: req.lba(),
        source: io::Error::other(status.describe()),
    })
}

impl Queue for SpdkQueue {
    fn info(&self) -> &DeviceInfo {
        self.info_ref()
    }

    fn submit(&mut self, req: Request) -> Result<(), Rejected> {
        if let Err(error) = check_request(&self.shared.info, &req, self.in_flight) {
            return Err(Rejected {
                error,
                request: req,
            });
        }
        if self.shared.dma_only {
            if let Op::Write { lba, bufs, .. } | Op::Read { lba, bufs } = &req.op {
                if let Some(buffer) = bufs.iter().position(|b| !b.is_dma()) {
                    let error = DeviceError::NotDma {
                        device: self.shared.info.name.clone(),
                        kind: req.kind(),
                        lba: *lba,
                        buffer,
                    };
                    return Err(Rejected {
                        error,
                        request: req,
                    });
                }
            }
        }
        self.in_flight += 1;
        if let Some(why) = self.broken.clone() {
            let e = self.offline(&req, &why);
            self.finish_now(req, Err(e));
            return Ok(());
        }
        if req.kind() == IoKind::Flush && !self.shared.info.volatile_cache {
            // No volatile cache: every completed write is durable already.
            self.finish_now(req, Ok(()));
            return Ok(());
        }
        if self.deferred.is_empty() {
            self.issue(req);
        } else {
            self.deferred.push_back(req);
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        if self.broken.is_none() && self.qpair.in_flight() > 0 {
            let (shared, done) = (&self.shared, &mut self.done);
            let polled = self.qpair.poll(|req, status| {
                let result = status_result(&shared.info, &req, status);
                let result = shared.latch.finish(&shared.info, &req, result);
                done.push(Completion::of(req, result));
            });
            if let Err(rc) = polled {
                self.break_queue(format!(
                    "processing completions failed: {}",
                    io::Error::from_raw_os_error(-rc)
                ));
            } else if self.qpair.lost() > 0 {
                self.break_queue(format!("{} completions were lost", self.qpair.lost()));
            } else if self.shared.ctrl.is_failed() && self.qpair.in_flight() > 0 {
                self.break_queue("the controller failed".into());
            }
            self.retry_deferred();
        }
        n += self.done.len();
        self.in_flight -= self.done.len();
        out.append(&mut self.done);
        n
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// `Ready` while anything is in flight (see the module comment): a
    /// polled queue pair has nothing to sleep on.
    fn wait_hint(&self) -> WaitHint {
        if self.in_flight == 0 {
            WaitHint::Idle
        } else {
            WaitHint::Ready
        }
    }
}

impl Drop for SpdkQueue {
    /// Lets in-flight requests finish (for a while), then frees the queue
    /// pair, which aborts whatever the controller still holds.
    fn drop(&mut self) {
        let start = Instant::now();
        let mut sink = Vec::new();
        while self.broken.is_none() && self.qpair.in_flight() > 0 && start.elapsed() < DRAIN_ON_DROP
        {
            self.poll(&mut sink);
            sink.clear();
        }
    }
}

impl std::fmt::Debug for SpdkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpdkQueue")
            .field("device", &self.shared.info.name)
            .field("in_flight", &self.in_flight)
            .field("deferred", &self.deferred.len())
            .field("broken", &self.broken)
            .finish()
    }
}
