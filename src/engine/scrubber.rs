//! The background scrub: a thread that reads every live block file back
//! from its device, as `stria scrub` does offline, pass after pass and at
//! a set rate, so a block that went bad at rest (a flipped bit, a latent
//! sector error, a lost or misdirected write) is found while the
//! appliance runs rather than when a client first reads it.
//!
//! A pass starts `every` after the previous one started (the first one
//! [`FIRST_PASS`] after the engine opens, or `every` if that is sooner).
//! It lists the files live at its start and checks each in turn, holding
//! only that file's handle (a file compacted away meanwhile is skipped;
//! one flushed meanwhile waits for the next pass). Reads are paced per
//! data block to `rate` bytes a second, so a pass over a large store
//! spreads out instead of competing with flushes and reads in a burst.
//! Each bad block is logged with its file, device, LBA and the keys it
//! covers, and counted, and rewritten from another copy of its file where
//! one is good there (`flush.copies` above 1).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::scrub::{check, ScrubFinding};
use super::Inner;
use crate::device::Device;

/// How long after the engine opens the first pass starts, at most: not
/// at once, where recovery and the first flushes have the devices.
pub const FIRST_PASS: Duration = Duration::from_secs(60);

/// The newest findings kept for INFO (all are logged).
const KEEP_FINDINGS: usize = 16;

/// How the background scrub runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubOptions {
    /// Bytes read a second; 0: no background scrub.
    pub rate: u64,
    /// A pass starts at most this often.
    pub every: Duration,
}

impl ScrubOptions {
    /// No background scrub.
    pub fn off() -> ScrubOptions {
        ScrubOptions {
            rate: 0,
            every: Duration::from_secs(24 * 3600),
        }
    }
}

/// What the background scrub has done, for INFO and `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubProgress {
    /// Bytes a second it reads at (0: off).
    pub rate: u64,
    /// A pass is under way.
    pub running: bool,
    /// Passes finished.
    pub passes: u64,
    /// Of the pass under way (or the last one): block files and their
    /// bytes to check, and how far it is.
    pub pass_files: u64,
    pub pass_bytes: u64,
    pub files_done: u64,
    pub bytes_done: u64,
    /// Data blocks and bytes read and checked, over all passes.
    pub blocks: u64,
    pub bytes: u64,
    /// Bad blocks found, over all passes (one found again in a later pass
    /// counts again).
    pub bad_blocks: u64,
    /// Of those, the ones rewritten from another copy of their file.
    pub repaired_blocks: u64,
    /// How long the last finished pass took.
    pub last_pass: Option<Duration>,
    /// The newest findings.
    pub findings: Vec<ScrubFinding>,
}

/// What the scrub thread and the engine share.
#[derive(Default)]
pub(super) struct ScrubState {
    stop: Mutex<bool>,
    wake: Condvar,
    progress: Mutex<ScrubProgress>,
}

impl ScrubState {
    pub(super) fn progress(&self) -> ScrubProgress {
        self.progress.lock().expect("scrub progress").clone()
    }

    fn update(&self, f: impl FnOnce(&mut ScrubProgress)) {
        f(&mut self.progress.lock().expect("scrub progress"));
    }

    /// Sleeps until `until`; false once the engine stops.
    fn sleep_until(&self, until: Instant) -> bool {
        let mut stop = self.stop.lock().expect("scrub stop");
        loop {
            if *stop {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            stop = self
                .wake
                .wait_timeout(stop, until - now)
                .expect("scrub stop")
                .0;
        }
    }

    /// Stops the thread at its next block or sleep.
    pub(super) fn stop(&self) {
        *self.stop.lock().expect("scrub stop") = true;
        self.wake.notify_all();
    }
}

/// Starts the scrub thread, unless `opts.rate` is 0.
pub(super) fn spawn<D: Device<Queue: Send> + Clone>(
    inner: &Arc<Inner<D>>,
    opts: ScrubOptions,
) -> std::io::Result<Option<JoinHandle<()>>> {
    if opts.rate == 0 {
        return Ok(None);
    }
    inner.scrub.update(|p| p.rate = opts.rate);
    let inner = inner.clone();
    std::thread::Builder::new()
        .name("scrub".into())
        .spawn(move || run(&inner, opts))
        .map(Some)
}

fn run<D: Device<Queue: Send> + Clone>(inner: &Inner<D>, opts: ScrubOptions) {
    let mut next = Instant::now() + opts.every.min(FIRST_PASS);
    while inner.scrub.sleep_until(next) {
        let started = Instant::now();
        next = started + opts.every;
        if !pass(inner, opts.rate) {
            return;
        }
        inner.scrub.update(|p| {
            p.running = false;
            p.passes += 1;
            p.last_pass = Some(started.elapsed());
        });
    }
}

/// Whether file `id` is still one of region `r`'s.
fn live<D: Device<Queue: Send> + Clone>(inner: &Inner<D>, r: usize, id: u64) -> bool {
    inner.region[r]
        .view()
        .tables
        .iter()
        .any(|t| t.file.id == id)
}

/// One pass over the files live now; false once the engine stops.
fn pass<D: Device<Queue: Send> + Clone>(inner: &Inner<D>, rate: u64) -> bool {
    let files: Vec<(usize, u64, u64)> = inner
        .region
        .iter()
        .enumerate()
        .flat_map(|(r, region)| {
            region
                .view()
                .tables
                .iter()
                .map(|t| (r, t.file.id, t.file.len))
                .collect::<Vec<_>>()
        })
        .collect();
    inner.scrub.update(|p| {
        p.running = true;
        p.pass_files = files.len() as u64;
        p.pass_bytes = files.iter().map(|f| f.2).sum();
        p.files_done = 0;
        p.bytes_done = 0;
    });
    let state = &inner.scrub;
    let mut due = Instant::now();
    let mut stopped = false;
    for (r, id, len) in files {
        let table = inner.region[r]
            .view()
            .tables
            .iter()
            .find(|t| t.file.id == id)
            .cloned();
        let Some(t) = table else {
            // Compacted away since the pass began: nothing to check.
            state.update(|p| {
                p.pass_files -= 1;
                p.pass_bytes -= len;
            });
            continue;
        };
        let mut blocks = 0u64;
        let checked = check(&t, &mut |n| {
            // A token bucket that runs no debt: after a slow stretch the
            // scrub goes on at its rate rather than catching up in a burst.
            due = due.max(Instant::now()) + Duration::from_secs_f64(n as f64 / rate as f64);
            stopped = !state.sleep_until(due);
            blocks += 1;
            // A file compacted away meanwhile is let go at once, so its
            // space is not held for the rest of a slow read of it.
            !stopped && (blocks % 64 != 0 || live(inner, r, id))
        });
        drop(t);
        if stopped {
            return false;
        }
        for f in &checked.bad {
            match f.repaired {
                Some(_) => tracing::warn!("scrub: {f}"),
                None => tracing::error!("scrub: BAD {f}"),
            }
        }
        state.update(|p| {
            p.blocks += checked.blocks;
            p.bytes += checked.bytes;
            p.bad_blocks += checked.bad.len() as u64;
            p.repaired_blocks += checked.bad.iter().filter(|f| f.repaired.is_some()).count() as u64;
            p.findings.extend(checked.bad);
            let extra = p.findings.len().saturating_sub(KEEP_FINDINGS);
            p.findings.drain(..extra);
            p.files_done += 1;
            p.bytes_done += len;
        });
    }
    true
}
