//! Sleeping and waking a `park` reactor.
//!
//! The wake protocol is Dekker's: each side writes its own flag, then reads
//! the other's, with a SeqCst fence in between, so at least one of the two
//! sees the other and no wake-up is lost.
//!
//! ```text
//! sender                              reactor (going to sleep)
//! push message onto the ring          sleeping = true
//! fence(SeqCst)                       fence(SeqCst)
//! if sleeping.swap(false):            if ring not empty or stop requested:
//!     write 1 to the eventfd              sleeping = false; don't sleep
//!                                     ppoll([eventfd, hint fds], deadline)
//!                                     sleeping = false; drain the eventfd
//! ```
//!
//! Either the reactor sees the message before sleeping, or the sender sees
//! `sleeping` and writes the eventfd, which stays readable until drained, so
//! a write that lands before `ppoll` starts still wakes it. The swap makes
//! only the first of many senders pay for the write; a sender that never
//! finds the reactor asleep (the `poll` policy, or a busy reactor) makes no
//! system call at all. A late write can leave the eventfd readable after the
//! reactor woke for something else; that costs one spurious wake-up, never a
//! lost one.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{fence, AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

use super::counters::Counters;
use crate::device::WaitHint;

/// A parked reactor's eventfd and the flag saying it may be asleep on it.
#[derive(Debug)]
pub(super) struct Doorbell {
    fd: OwnedFd,
    sleeping: AtomicBool,
}

impl Doorbell {
    pub(super) fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; it returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Doorbell {
            // SAFETY: `fd` was just returned by eventfd, is open, and nothing
            // else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            sleeping: AtomicBool::new(false),
        })
    }

    /// The sender's half: call after publishing a message. Wakes the reactor
    /// if it may be asleep.
    pub(super) fn wake_if_sleeping(&self) {
        fence(SeqCst);
        // The plain load first keeps the common case (reactor awake) free of
        // a read-modify-write on a line the reactor also writes.
        if self.sleeping.load(SeqCst) && self.sleeping.swap(false, SeqCst) {
            self.ring();
        }
    }

    /// Makes the eventfd readable, waking the reactor now or at its next park.
    pub(super) fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own. The
        // only possible failure is EAGAIN when the counter is about to
        // overflow, and then the fd is readable already, which is all a ring
        // has to achieve.
        unsafe {
            libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }

    /// Resets the eventfd to not readable.
    fn drain(&self) {
        let mut value: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd
        // we own; EAGAIN (already drained) is fine.
        unsafe {
            libc::read(self.fd.as_raw_fd(), (&raw mut value).cast(), 8);
        }
    }
}

/// How a call to [`Parker::park`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wake {
    /// It did not sleep: work was ready, a deadline had passed, or a message
    /// or stop request came in while it was deciding.
    NotSlept,
    /// The doorbell rang: a message or a stop request.
    Doorbell,
    /// A hint fd became readable or the earliest deadline passed.
    Device,
    /// A signal interrupted the sleep.
    Interrupted,
}

/// The reactor's half, with buffers reused from one sleep to the next so
/// that parking allocates nothing.
#[derive(Debug, Default)]
pub(super) struct Parker {
    fds: Vec<libc::pollfd>,
}

impl Parker {
    /// Sleeps until the doorbell rings, a hint fires, or returns at once if
    /// `pending()` (ring not empty, stop requested) turns true after the
    /// sleeping flag is raised. With only `Idle` hints it sleeps until the
    /// doorbell rings. Counts the sleep in `counters` before it starts, so
    /// that other threads can see the reactor is parked, and what woke it.
    pub(super) fn park(
        &mut self,
        doorbell: &Doorbell,
        hints: &[WaitHint],
        pending: impl Fn() -> bool,
        counters: &Counters,
    ) -> io::Result<Wake> {
        self.fds.clear();
        self.fds.push(pollfd(doorbell.fd.as_raw_fd()));
        let mut deadline: Option<Instant> = None;
        for hint in hints {
            match *hint {
                WaitHint::Idle => {}
                WaitHint::Ready => return Ok(Wake::NotSlept),
                WaitHint::Deadline(t) => deadline = Some(deadline.map_or(t, |d| d.min(t))),
                WaitHint::Fd(fd) => self.fds.push(pollfd(fd)),
            }
        }

        doorbell.sleeping.store(true, SeqCst);
        fence(SeqCst);
        if pending() {
            doorbell.sleeping.store(false, SeqCst);
            return Ok(Wake::NotSlept);
        }
        let timeout = match deadline {
            None => None,
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    doorbell.sleeping.store(false, SeqCst);
                    return Ok(Wake::NotSlept);
                }
                Some(timespec(left))
            }
        };
        let timeout_ptr = timeout.as_ref().map_or(ptr::null(), ptr::from_ref);
        counters.parks.add(1);
        // SAFETY: `fds` is a live, initialised array of `fds.len()` pollfds
        // that the kernel writes `revents` into; the timeout is null or points
        // to a timespec that lives until the call returns; a null sigmask
        // keeps the thread's signal mask.
        let rc = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                timeout_ptr,
                ptr::null(),
            )
        };
        doorbell.sleeping.store(false, SeqCst);

        if rc < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::Interrupted => Ok(Wake::Interrupted),
                _ => Err(err),
            };
        }
        if let Some(bad) = self.fds[1..]
            .iter()
            .find(|p| p.revents & libc::POLLNVAL != 0)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("wait hint fd {} is not an open file descriptor", bad.fd),
            ));
        }
        if self.fds[0].revents & libc::POLLIN != 0 {
            doorbell.drain();
            counters.woken_by_message.add(1);
            return Ok(Wake::Doorbell);
        }
        counters.woken_by_device.add(1);
        Ok(Wake::Device)
    }
}

fn pollfd(fd: libc::c_int) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Asks the kernel to end the calling thread's timed sleeps on time.
///
/// Linux lets a timed sleep overrun by the thread's timer slack, 50 µs by
/// default, to batch wake-ups. A parked reactor sleeping until a simulated
/// device's next completion (latencies of 15 µs and up) would see every such
/// completion late by up to that much. Failure only costs that precision.
pub(super) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes its value as an integer argument and
    // touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if rc != 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "cannot tighten timer slack");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn park(bell: &Doorbell, hints: &[WaitHint], pending: bool) -> io::Result<Wake> {
        Parker::default().park(bell, hints, || pending, &Counters::default())
    }

    #[test]
    fn a_ring_before_the_sleep_is_not_lost() {
        let bell = Doorbell::new().unwrap();
        bell.ring();
        let start = Instant::now();
        assert_eq!(
            park(&bell, &[WaitHint::Idle], false).unwrap(),
            Wake::Doorbell
        );
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_sender_does_not_ring_an_awake_reactor() {
        let bell = Doorbell::new().unwrap();
        bell.wake_if_sleeping();
        let soon = Instant::now() + Duration::from_millis(2);
        assert_eq!(
            park(&bell, &[WaitHint::Deadline(soon)], false).unwrap(),
            Wake::Device
        );
    }

    #[test]
    fn ready_hints_pending_work_and_past_deadlines_skip_the_sleep() {
        let bell = Doorbell::new().unwrap();
        let ready = [WaitHint::Idle, WaitHint::Ready];
        assert_eq!(park(&bell, &ready, false).unwrap(), Wake::NotSlept);
        assert_eq!(park(&bell, &[], true).unwrap(), Wake::NotSlept);
        let past = [WaitHint::Deadline(Instant::now())];
        assert_eq!(park(&bell, &past, false).unwrap(), Wake::NotSlept);
        assert!(!bell.sleeping.load(SeqCst));
    }

    #[test]
    fn a_closed_hint_fd_is_an_error() {
        let bell = Doorbell::new().unwrap();
        // Far above any descriptor a test process opens, so never open.
        let err = park(&bell, &[WaitHint::Fd(1 << 20)], false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
