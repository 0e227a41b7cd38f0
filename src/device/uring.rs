//! io_uring with O_DIRECT: the kernel path that does not block its reactor.
//!
//! Every [`UringQueue`] owns its own ring, so the I/O path takes no lock and
//! shares nothing with other reactors but the open file.
//!
//! - **Batching.** [`Queue::submit`] only writes an SQE into the ring;
//!   [`Queue::poll`] hands every pending SQE to the kernel with one
//!   `io_uring_enter` before reaping. A reactor that submits a burst pays
//!   one system call for it, and a poll with nothing pending makes none at
//!   all. No request is stranded: while SQEs are pending, [`Queue::wait_hint`]
//!   says `Ready`, so a reactor polls (and thereby submits) before sleeping.
//! - **Stable addresses.** An in-flight request lives in a slot of a slab
//!   together with its `iovec` array, boxed so neither moves; the slot index
//!   is the SQE's `user_data`. The slot is freed only when its CQE is
//!   reaped (or when a broken ring fails it unsent, see below), and dropping
//!   a queue waits for every request the kernel holds.
//! - **Short transfers** (fewer bytes than asked) fail the request with an
//!   I/O error rather than being resubmitted: within the checked range of a
//!   file or block device they only happen when it shrank behind our back
//!   or filled up, and a retry would meet the same condition.
//! - **Waking.** An eventfd registered with the ring becomes readable when
//!   a completion is posted. `wait_hint` resets it just before offering it
//!   and then looks at the completion queue, so a completion is either seen
//!   there (`Ready`) or signals the eventfd afterwards: no lost wake-up, and
//!   `poll` stays free of system calls.
//! - **A broken ring.** When `io_uring_enter` fails with anything but
//!   EINTR, EAGAIN or EBUSY (which the next poll retries), the ring is
//!   taken to be unusable: the requests the kernel did not take complete
//!   at once with an I/O error carrying the errno, and so does every
//!   request submitted to the queue afterwards. Their SQEs stay in the ring
//!   but are never handed to the kernel (dropping the queue then only waits
//!   for the requests the kernel took), since their buffers went back to
//!   the caller.
//! - **Failed flushes stay failed** for every queue of the device, and with
//!   `direct: false` so do failed writes (see `file::FlushLatch`).

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use io_uring::{opcode, squeue, types, IoUring};

use super::{
    check_request, file, BackendKind, Completion, Device, DeviceError, DeviceInfo, IoKind, Op,
    Queue, Rejected, Request, Result, WaitHint,
};
use crate::config::{BackendConfig, DeviceConfig};

/// Most buffers one readv/writev may carry; the kernel fails a request
/// with more, so it is refused at submission instead.
const MAX_BUFS: usize = libc::UIO_MAXIOV as usize;

/// `IORING_ENTER_GETEVENTS` of `linux/io_uring.h`: wait for completions.
const IORING_ENTER_GETEVENTS: u32 = 1;

/// Checks once per process whether the kernel lets us create an io_uring,
/// and says why not when it does not (no io_uring in the kernel, disabled
/// by sysctl, seccomp or a container policy).
pub fn uring_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| IoUring::new(2).map(drop).map_err(|e| setup_failure(&e, 2)))
        .clone()
}

/// Why `io_uring_setup` failed, in words an operator can act on.
fn setup_failure(e: &io::Error, entries: u32) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => format!("the kernel has no io_uring ({e}); use the psync backend"),
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "io_uring is forbidden here ({e}): check the kernel.io_uring_disabled sysctl \
             and any seccomp or container policy, or use the psync backend"
        ),
        _ => format!("cannot create an io_uring of {entries} entries: {e}"),
    }
}

/// A file-backed device driven through io_uring. Clones share the open file
/// and its flush state; each queue has its own ring.
#[derive(Clone, Debug)]
pub struct UringDevice {
    file: Arc<File>,
    latch: Arc<file::FlushLatch>,
    info: DeviceInfo,
}

impl UringDevice {
    /// Opens the backing file of `cfg` with O_DIRECT unless the config says
    /// `direct: false`; it must exist and hold `cfg.size` bytes (see
    /// `stria format`). Fails with `Unavailable` at once when the kernel
    /// refuses io_uring, rather than when the first reactor starts.
    pub fn open(cfg: &DeviceConfig) -> Result<UringDevice> {
        uring_available().map_err(|why| DeviceError::Unavailable {
            device: cfg.name.clone(),
            backend: BackendKind::Uring.as_str(),
            why,
        })?;
        let direct = !matches!(cfg.backend, BackendConfig::Uring { direct: false, .. });
        Ok(UringDevice {
            file: Arc::new(file::open(cfg, direct)?),
            latch: Arc::new(file::FlushLatch::new(!direct)),
            info: file::info(cfg, BackendKind::Uring, direct),
        })
    }
}

impl Device for UringDevice {
    type Queue = UringQueue;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open_queue(&self) -> Result<UringQueue> {
        let info = &self.info;
        let unavailable = |why| DeviceError::Unavailable {
            device: info.name.clone(),
            backend: BackendKind::Uring.as_str(),
            why,
        };
        // The SQ holds every request the queue may have in flight, and the
        // CQ (twice the SQ by default) every completion, so neither a push
        // nor a completion can ever find its ring full.
        let entries = info.queue_depth.max(1).next_power_of_two();
        let ring = IoUring::new(entries).map_err(|e| unavailable(setup_failure(&e, entries)))?;
        // SAFETY: eventfd takes no pointers; it returns a new descriptor or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(unavailable(format!("cannot create an eventfd: {e}")));
        }
        // SAFETY: raw is a descriptor eventfd just returned, owned by nobody
        // else, so OwnedFd may take it and close it once.
        let eventfd = unsafe { OwnedFd::from_raw_fd(raw) };
        ring.submitter()
            .register_eventfd(eventfd.as_raw_fd())
            .map_err(|e| unavailable(format!("cannot register an eventfd with io_uring: {e}")))?;
        let depth = info.queue_depth as usize;
        Ok(UringQueue {
            ring,
            eventfd,
            file: Arc::clone(&self.file),
            latch: Arc::clone(&self.latch),
            info: info.clone(),
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            in_flight: 0,
            unsent: VecDeque::with_capacity(depth),
            failed: Vec::new(),
            broken: None,
            #[cfg(test)]
            submit_error: None,
        })
    }
}

/// An in-flight request and the `iovec`s the kernel reads its buffers
/// through.
struct Slot {
    req: Request,
    iovecs: IoVecs,
    /// Bytes the kernel must report for the request to have completed whole.
    expected: usize,
}

/// The `iovec`s of one request. They point into the buffers of the request
/// in the same slot; the box keeps their own address fixed for the kernel.
struct IoVecs(Box<[libc::iovec]>);

// SAFETY: the pointers only refer to the IoBufs of the request held in the
// same Slot, which moves between threads together with them; IoBuf is Send.
// IoVecs is deliberately not Sync (UringQueue relies on that, see wait_hint).
unsafe impl Send for IoVecs {}

/// One reactor's queue on a [`UringDevice`]: its own io_uring.
///
/// Send (a reactor may open it and move it into its thread) but not Sync:
/// one thread at a time uses it, which `wait_hint` relies on.
pub struct UringQueue {
    /// Declared first so it is closed first, after `Drop` has waited for
    /// every request; the slots it pointed into are freed after it.
    ring: IoUring,
    eventfd: OwnedFd,
    /// Keeps the descriptor the SQEs name open while requests are in flight.
    file: Arc<File>,
    latch: Arc<file::FlushLatch>,
    info: DeviceInfo,
    /// `slots[i]` holds the request whose SQE has `user_data == i`.
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Requests submitted and not yet returned by `poll`: the occupied
    /// slots plus `failed`.
    in_flight: usize,
    /// Slots whose SQEs are in the ring but not yet given to the kernel, in
    /// the order they were written (the order the kernel takes them).
    unsent: VecDeque<usize>,
    /// Completions of requests that never reached the kernel, for the next
    /// `poll`.
    failed: Vec<Completion>,
    /// Why `io_uring_enter` cannot submit any more, once it failed for good.
    broken: Option<io::Error>,
    /// Makes every submitting `io_uring_enter` fail with this errno.
    #[cfg(test)]
    submit_error: Option<i32>,
}

impl UringQueue {
    /// Gives pending SQEs to the kernel. On a transient failure they stay
    /// in the ring and the next poll tries again; on any other the ring is
    /// broken (see [`UringQueue::break_ring`]).
    fn submit_pending(&mut self) {
        if self.unsent.is_empty() {
            return;
        }
        match self.enter_submit() {
            Ok(n) => {
                self.unsent.drain(..n.min(self.unsent.len()));
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) => self.break_ring(e),
        }
    }

    /// `io_uring_enter` submitting every SQE in the ring.
    fn enter_submit(&mut self) -> io::Result<usize> {
        #[cfg(test)]
        if let Some(errno) = self.submit_error {
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.ring.submit()
    }

    /// Gives up on submitting after `io_uring_enter` failed with `e`, which
    /// a retry would meet again: every request the kernel did not take
    /// fails with `e`, for the next `poll` to return, instead of waiting
    /// for ever while the reactor polls in vain.
    fn break_ring(&mut self, e: io::Error) {
        // A failed io_uring_enter takes no SQE; the ring's own count of
        // those left says so for certain, and those taken complete as usual.
        let left = self.ring.submission().len().min(self.unsent.len());
        self.unsent.drain(..self.unsent.len() - left);
        tracing::error!(
            device = %self.info.name,
            failed = left,
            "io_uring submission failed, failing this queue's unsent and future requests: {e}"
        );
        while let Some(index) = self.unsent.pop_front() {
            let slot = self.slots[index]
                .take()
                .expect("an unsent request holds its slot");
            self.free.push(index);
            // The SQE still points at the iovecs and buffers freed or given
            // back here; it is safe only because the kernel is never asked
            // to submit again (see `wait_for_kernel`).
            self.fail(slot.req, &e);
        }
        self.broken = Some(e);
    }

    /// Completes `req`, which never reached the kernel, with `e`.
    fn fail(&mut self, req: Request, e: &io::Error) {
        let source = match e.raw_os_error() {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        let result = Err(file::io_error(&self.info, &req, source));
        let result = self.latch.finish(&self.info, &req, result);
        self.failed.push(Completion::of(req, result));
    }

    /// Requests the kernel holds or that wait in the ring to be sent.
    fn in_ring(&self) -> usize {
        self.in_flight - self.failed.len()
    }

    /// Waits for at least one completion of a request the kernel holds,
    /// first sending it any unsent SQE unless the ring is broken.
    fn wait_for_kernel(&mut self) -> io::Result<()> {
        if self.broken.is_none() {
            self.ring.submit_and_wait(1)?;
            self.unsent.clear();
            return Ok(());
        }
        // SAFETY: to_submit is 0, so the kernel reads no SQE (this ring has
        // no SQPOLL thread), in particular none of those whose requests were
        // failed by break_ring; min_complete and the flag only make it wait,
        // and no argument is passed.
        unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(0, 1, IORING_ENTER_GETEVENTS, None)
        }
        .map(drop)
    }

    /// Takes every posted completion off the ring and frees its slot.
    fn reap(&mut self, mut each: impl FnMut(Completion)) -> usize {
        let mut n = 0;
        for cqe in self.ring.completion() {
            let Some(slot) = usize::try_from(cqe.user_data())
                .ok()
                .and_then(|i| self.slots.get_mut(i))
                .and_then(|s| s.take())
            else {
                tracing::error!(device = %self.info.name, "io_uring completion for no request: {cqe:?}");
                continue;
            };
            self.free.push(cqe.user_data() as usize);
            self.in_flight -= 1;
            n += 1;
            let result = completion_result(cqe.result(), &slot, &self.info);
            let result = self.latch.finish(&self.info, &slot.req, result);
            each(Completion::of(slot.req, result));
        }
        n
    }
}

/// The SQE of the request in `slot`, on the file `fd` of `info`, tagged
/// with the slot's index.
fn entry(fd: types::Fd, info: &DeviceInfo, slot: &Slot, index: usize) -> squeue::Entry {
    let iovecs = &slot.iovecs.0;
    let offset = slot.req.lba() * u64::from(info.block_size);
    let len = iovecs.len() as u32;
    let entry = match slot.req.op {
        Op::Write { .. } => opcode::Writev::new(fd, iovecs.as_ptr(), len)
            .offset(offset)
            .rw_flags(if slot.req.is_fua() {
                libc::RWF_DSYNC
            } else {
                0
            })
            .build(),
        Op::Read { .. } => opcode::Readv::new(fd, iovecs.as_ptr(), len)
            .offset(offset)
            .build(),
        Op::Flush => opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
    };
    entry.user_data(index as u64)
}

/// What a CQE result means for the request in `slot`.
fn completion_result(res: i32, slot: &Slot, info: &DeviceInfo) -> Result<()> {
    if res < 0 {
        return Err(file::io_error(
            info,
            &slot.req,
            io::Error::from_raw_os_error(-res),
        ));
    }
    let done = res as usize;
    if slot.req.kind() == IoKind::Flush || done == slot.expected {
        return Ok(());
    }
    let kind = match slot.req.kind() {
        IoKind::Read => io::ErrorKind::UnexpectedEof,
        _ => io::ErrorKind::WriteZero,
    };
    let why = format!(
        "short {}: {done} of {} bytes",
        slot.req.kind(),
        slot.expected
    );
    Err(file::io_error(info, &slot.req, io::Error::new(kind, why)))
}

impl Queue for UringQueue {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn submit(&mut self, mut req: Request) -> Result<(), Rejected> {
        if let Err(error) = check_request(&self.info, &req, self.in_flight) {
            return Err(Rejected {
                error,
                request: req,
            });
        }
        let iovecs = req.iovecs();
        if iovecs.len() > MAX_BUFS {
            let error = DeviceError::Misaligned {
                device: self.info.name.clone(),
                what: format!(
                    "the {} at LBA {} has {} buffers, more than the {MAX_BUFS} one request may carry",
                    req.kind(),
                    req.lba(),
                    iovecs.len()
                ),
            };
            return Err(Rejected {
                error,
                request: req,
            });
        }
        if let Some(e) = self.broken.take() {
            self.fail(req, &e);
            self.broken = Some(e);
            self.in_flight += 1;
            return Ok(());
        }
        // check_request admitted fewer than queue_depth requests, so a slot
        // is free and the SQ (at least queue_depth entries) has room.
        let index = self.free.pop().expect("a free slot below the queue depth");
        let expected = req.bytes() as usize;
        let slot = self.slots[index].insert(Slot {
            req,
            iovecs: IoVecs(iovecs),
            expected,
        });
        let entry = entry(types::Fd(self.file.as_raw_fd()), &self.info, slot, index);
        // SAFETY: the entry points at the iovecs and, through them, the
        // buffers of the request now held in slots[index]. Both are heap
        // allocations that do not move with the slot and are freed only when
        // this SQE's completion is reaped (or in Drop after waiting for it),
        // or when break_ring fails it unsent, after which the kernel is
        // never asked to submit from this ring again.
        // The file descriptor is kept open by self.file for as long.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // Unreachable by the sizing above; refuse rather than lose it.
            let slot = self.slots[index].take().expect("just filled");
            self.free.push(index);
            return Err(Rejected {
                error: DeviceError::QueueFull {
                    device: self.info.name.clone(),
                    depth: self.info.queue_depth,
                },
                request: slot.req,
            });
        }
        self.in_flight += 1;
        self.unsent.push_back(index);
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        self.submit_pending();
        let failed = self.failed.len();
        self.in_flight -= failed;
        out.append(&mut self.failed);
        failed + self.reap(|c| out.push(c))
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn wait_hint(&self) -> WaitHint {
        if self.in_flight == 0 {
            return WaitHint::Idle;
        }
        if !self.unsent.is_empty() || !self.failed.is_empty() {
            return WaitHint::Ready;
        }
        // Reset the eventfd before looking at the CQ: a completion posted
        // after this read signals it again, one posted before is seen below.
        let mut count = 0u64;
        // SAFETY: count is 8 writable bytes for the duration of the call, the
        // size an eventfd read needs; the descriptor is owned by self.
        unsafe {
            libc::read(
                self.eventfd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        // SAFETY: UringQueue is not Sync and no CompletionQueue outlives a
        // method of it, so no other CompletionQueue of this ring exists now.
        let ready = unsafe { !self.ring.completion_shared().is_empty() };
        if ready {
            WaitHint::Ready
        } else {
            WaitHint::Fd(self.eventfd.as_raw_fd())
        }
    }

    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.eventfd.as_raw_fd())
    }
}

impl Drop for UringQueue {
    /// Waits for every request the kernel holds: it may still write into
    /// their buffers, which are freed with the slots.
    fn drop(&mut self) {
        while self.in_ring() > 0 {
            self.reap(drop);
            if self.in_ring() == 0 {
                break;
            }
            match self.wait_for_kernel() {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    tracing::error!(
                        device = %self.info.name,
                        in_flight = self.in_ring(),
                        "cannot wait for io_uring requests, leaking their buffers: {e}"
                    );
                    std::mem::forget(std::mem::take(&mut self.slots));
                    break;
                }
            }
        }
    }
}

impl std::fmt::Debug for UringQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringQueue")
            .field("device", &self.info.name)
            .field("in_flight", &self.in_flight)
            .field("unsent", &self.unsent.len())
            .field("broken", &self.broken)
            .finish()
    }
}

#[cfg(test)]
mod tests;
