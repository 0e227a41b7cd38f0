//! Running a request to completion from a plain thread.
//!
//! Reactors never wait for a device; tools do: `format`, `inspect`, tests.
//! [`run`] submits one request and sleeps on the queue's [`WaitHint`] until
//! its completion comes back, so even a tool does not burn a core.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::{Completion, Queue, Rejected, Request, WaitHint};

/// Submits `req` and waits for its completion. Completions of other requests
/// that arrive meanwhile are dropped, so use this on a queue with nothing
/// else in flight.
pub fn run<Q: Queue + ?Sized>(queue: &mut Q, req: Request) -> Result<Completion, Rejected> {
    let tag = req.tag;
    queue.submit(req)?;
    let mut out = Vec::with_capacity(1);
    loop {
        queue.poll(&mut out);
        if let Some(i) = out.iter().position(|c| c.tag == tag) {
            return Ok(out.swap_remove(i));
        }
        out.clear();
        wait(queue.wait_hint(), Duration::from_millis(10));
    }
}

/// Sleeps until `hint` says a completion may be ready, or `limit` passes.
pub fn wait(hint: WaitHint, limit: Duration) {
    match hint {
        WaitHint::Ready => {}
        WaitHint::Idle => std::thread::sleep(limit.min(Duration::from_micros(50))),
        WaitHint::Deadline(at) => {
            let now = Instant::now();
            if at > now {
                std::thread::sleep((at - now).min(limit));
            }
        }
        WaitHint::Fd(fd) => wait_any(&[fd], limit),
    }
}

/// Sleeps until one of `fds` is readable, or `limit` passes (at least a
/// millisecond, poll's unit).
pub fn wait_any(fds: &[RawFd], limit: Duration) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = limit.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: pfds holds pfds.len() valid pollfds for the duration of the
    // call; poll only writes their revents. An error (EINTR) simply
    // returns early, which the caller's loop tolerates.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
}
