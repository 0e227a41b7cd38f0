//! The raw device benchmark behind `stria devbench`: one [`Job`] keeps a
//! fixed number of requests in flight on one queue for a fixed time and
//! records each request's latency.
//!
//! A job is a state machine polled by whoever owns the queue (a reactor in
//! `stria devbench`), so it measures the same submit/poll path the WAL uses.

use std::ops::Range;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::latency::Latency;
use crate::device::{Completion, IoBuf, IoKind, Queue, Request, WaitHint};

/// What a job does with each slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Sequential writes, wrapping at the end of the region.
    SeqWrite,
    /// A sequential write, then a flush once it completed; the latency of
    /// the pair is what a `sync` log append costs.
    WriteFlush,
    /// Reads at uniformly random block-aligned offsets in the region.
    RandRead,
}

/// One benchmark case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub pattern: Pattern,
    /// Bytes per request.
    pub block: usize,
    /// Requests (or write+flush pairs) kept in flight.
    pub qd: u32,
}

impl Case {
    /// "seq-write 4KiB" and the like.
    pub fn name(&self) -> String {
        let what = match self.pattern {
            Pattern::SeqWrite => "seq-write",
            Pattern::WriteFlush => "write+flush",
            Pattern::RandRead => "rand-read",
        };
        format!("{what} {}", human(self.block as u64))
    }
}

/// `4KiB`, `64KiB`, `1MiB`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// The cases `stria devbench` runs, in order: writes first, so the region
/// the random reads cover has been written.
pub fn standard_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (pattern, block) in [
        (Pattern::SeqWrite, 4096),
        (Pattern::SeqWrite, 65536),
        (Pattern::WriteFlush, 4096),
        (Pattern::RandRead, 4096),
    ] {
        for qd in [1, 32] {
            cases.push(Case { pattern, block, qd });
        }
    }
    cases
}

/// What a job measured.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub case: Case,
    /// The queue depth actually used (the case's, capped by the device's).
    pub qd: u32,
    pub ops: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub latency: Latency,
    pub errors: u64,
    pub first_error: Option<String>,
    /// The most requests that were in flight at once.
    pub peak_in_flight: usize,
}

impl CaseResult {
    pub fn iops(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A slot: one request (or write+flush pair) in flight.
struct Slot {
    started: Instant,
    buf: Option<IoBuf>,
}

/// Keeps `qd` requests in flight on `queue` until the time is up.
pub struct Job<Q: Queue> {
    queue: Q,
    case: Case,
    qd: u32,
    blocks_per_op: u64,
    region: Range<u64>,
    next_lba: u64,
    rng: ChaCha8Rng,
    slots: Vec<Slot>,
    duration: Duration,
    start: Option<Instant>,
    stop_at: Option<Instant>,
    ended: Option<Instant>,
    result_latency: Latency,
    ops: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    completions: Vec<Completion>,
    in_flight: usize,
    /// Requests issued so far, and the most it may issue.
    issued: u64,
    issue_limit: u64,
    /// The settling flush: submitted, and completed.
    settle_sent: bool,
    settled: bool,
    /// A request was refused: issue nothing more.
    halted: bool,
    peak_in_flight: usize,
}

/// The tag of the flush a job sends before it starts the clock.
const SETTLE_TAG: u64 = u64::MAX;

impl<Q: Queue> Job<Q> {
    /// A job of `case` over the LBAs in `region`, running for `duration`
    /// from its first poll. `alloc` makes the buffers (the device's own).
    pub fn new(
        queue: Q,
        case: Case,
        region: Range<u64>,
        duration: Duration,
        seed: u64,
        alloc: impl Fn(usize) -> IoBuf,
    ) -> Job<Q> {
        let info = queue.info().clone();
        let blocks_per_op = (case.block as u64 / u64::from(info.block_size)).max(1);
        assert!(
            region.end - region.start >= blocks_per_op,
            "bench region smaller than one request"
        );
        let qd = case.qd.min(info.queue_depth).max(1);
        let slots = (0..qd)
            .map(|_| Slot {
                started: Instant::now(),
                buf: Some(alloc(case.block)),
            })
            .collect();
        Job {
            queue,
            case,
            qd,
            blocks_per_op,
            next_lba: region.start,
            region,
            rng: ChaCha8Rng::seed_from_u64(seed),
            slots,
            duration,
            start: None,
            stop_at: None,
            ended: None,
            result_latency: Latency::new(),
            ops: 0,
            bytes: 0,
            errors: 0,
            first_error: None,
            completions: Vec::with_capacity(qd as usize),
            in_flight: 0,
            issued: 0,
            issue_limit: u64::MAX,
            settle_sent: false,
            settled: false,
            halted: false,
            peak_in_flight: 0,
        }
    }

    /// Stops issuing after `n` requests (or pairs), even if time is left.
    pub fn limit_ops(&mut self, n: u64) {
        self.issue_limit = n;
    }

    fn may_issue(&self, now: Instant) -> bool {
        !self.halted && self.issued < self.issue_limit && self.stop_at.is_none_or(|stop| now < stop)
    }

    /// True once the time is up and every request has come back.
    pub fn is_done(&self) -> bool {
        self.ended.is_some()
    }

    /// How the owner can sleep until this job has something to do.
    pub fn wait_hint(&self) -> WaitHint {
        if self.is_done() {
            WaitHint::Idle
        } else if !self.settle_sent
            || (self.settled && self.start.is_none())
            || (self.start.is_some() && self.in_flight == 0)
        {
            // Nothing in flight means nothing will wake the owner: the next
            // poll issues more or ends the job.
            WaitHint::Ready
        } else {
            self.queue.wait_hint()
        }
    }

    fn lba_for_next(&mut self) -> u64 {
        let span = self.region.end - self.region.start;
        let slots_in_region = span / self.blocks_per_op;
        match self.case.pattern {
            Pattern::RandRead => {
                self.region.start + self.rng.random_range(0..slots_in_region) * self.blocks_per_op
            }
            Pattern::SeqWrite | Pattern::WriteFlush => {
                if self.next_lba + self.blocks_per_op > self.region.end {
                    self.next_lba = self.region.start;
                }
                let lba = self.next_lba;
                self.next_lba += self.blocks_per_op;
                lba
            }
        }
    }

    fn issue_data(&mut self, slot: usize, now: Instant) {
        let lba = self.lba_for_next();
        let buf = self.slots[slot].buf.take().expect("slot buffer is home");
        let req = match self.case.pattern {
            Pattern::RandRead => Request::read(slot as u64, lba, vec![buf]),
            Pattern::SeqWrite | Pattern::WriteFlush => Request::write(slot as u64, lba, vec![buf]),
        };
        self.slots[slot].started = now;
        self.submit(slot, req);
    }

    /// Submits; a refused request halts the job (a bench whose requests
    /// the device refuses measures nothing), with the reason kept.
    fn submit(&mut self, slot: usize, req: Request) {
        let data = req.kind() != IoKind::Flush;
        match self.queue.submit(req) {
            Ok(()) => {
                self.in_flight += 1;
                self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
                self.issued += u64::from(data);
            }
            Err(rejected) => {
                self.halted = true;
                self.note_error(rejected.error.to_string());
                let mut bufs = rejected.request.into_bufs();
                if let Some(buf) = bufs.pop() {
                    self.slots[slot].buf = Some(buf);
                }
            }
        }
    }

    fn note_error(&mut self, msg: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg);
        }
    }

    /// Polls the queue, handles completions, keeps the slots busy. Returns
    /// how many completions it handled plus requests it issued.
    pub fn poll(&mut self) -> usize {
        if self.is_done() {
            return 0;
        }
        if !self.settled {
            return self.settle();
        }
        let now = Instant::now();
        let mut progress = 0;
        if self.start.is_none() {
            self.start = Some(now);
            self.stop_at = now.checked_add(self.duration);
            for slot in 0..self.qd as usize {
                if self.may_issue(now) {
                    self.issue_data(slot, now);
                    progress += 1;
                }
            }
        }
        self.completions.clear();
        let mut done = std::mem::take(&mut self.completions);
        self.queue.poll(&mut done);
        let now = Instant::now();
        for c in done.drain(..) {
            progress += 1;
            self.in_flight -= 1;
            let slot = c.tag as usize;
            if let Err(e) = &c.result {
                self.note_error(e.to_string());
            }
            let mut bufs = c.bufs;
            if let Some(buf) = bufs.pop() {
                self.slots[slot].buf = Some(buf);
            }
            if c.kind == IoKind::Write
                && self.case.pattern == Pattern::WriteFlush
                && c.result.is_ok()
            {
                // The pair is complete only when its flush is.
                self.submit(slot, Request::flush(slot as u64));
                continue;
            }
            if c.result.is_ok() {
                self.ops += 1;
                self.bytes += self.case.block as u64;
                self.result_latency.record(now - self.slots[slot].started);
            }
            if self.may_issue(now) && self.slots[slot].buf.is_some() {
                self.issue_data(slot, now);
            }
        }
        self.completions = done;
        if !self.may_issue(now) && self.in_flight == 0 {
            self.ended = Some(now);
        }
        progress
    }

    /// Before the clock starts, one flush makes durable whatever earlier
    /// cases left in the device's (or the kernel's) cache, so that a case
    /// does not pay for its predecessor's writeback.
    fn settle(&mut self) -> usize {
        if !self.settle_sent {
            if let Err(rejected) = self.queue.submit(Request::flush(SETTLE_TAG)) {
                self.note_error(rejected.error.to_string());
                self.settled = true;
            }
            self.settle_sent = true;
            return 1;
        }
        let mut done = std::mem::take(&mut self.completions);
        done.clear();
        self.queue.poll(&mut done);
        for c in done.drain(..) {
            if c.tag == SETTLE_TAG {
                if let Err(e) = c.result {
                    self.note_error(format!("settling flush: {e}"));
                }
                self.settled = true;
            }
        }
        self.completions = done;
        usize::from(self.settled)
    }

    /// The figures, once [`Job::is_done`].
    pub fn result(&self) -> CaseResult {
        let start = self.start.unwrap_or_else(Instant::now);
        let end = self.ended.unwrap_or_else(Instant::now);
        CaseResult {
            case: self.case,
            qd: self.qd,
            ops: self.ops,
            bytes: self.bytes,
            elapsed: end - start,
            latency: self.result_latency.clone(),
            errors: self.errors,
            first_error: self.first_error.clone(),
            peak_in_flight: self.peak_in_flight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;
    use crate::device::sim::SimDevice;
    use crate::device::{wait, Device};

    fn run<D: Device>(dev: &D, case: Case, duration: Duration) -> CaseResult {
        let info = dev.info().clone();
        let queue = dev.open_queue().unwrap();
        let mut job = Job::new(queue, case, 256..info.capacity_blocks, duration, 7, |len| {
            dev.alloc_buf(len)
        });
        while !job.is_done() {
            if job.poll() == 0 {
                wait::wait(job.wait_hint(), Duration::from_millis(2));
            }
        }
        job.result()
    }

    fn sim(write_us: u64, flush_us: u64) -> SimDevice {
        let model = SimConfig {
            write_us,
            read_us: write_us,
            flush_us,
            bandwidth: 0,
            ..SimConfig::default()
        };
        SimDevice::new("b0", 4096, 8192, 32, model)
    }

    #[test]
    fn latency_reflects_the_device_model() {
        let dev = sim(200, 300);
        let case = Case {
            pattern: Pattern::WriteFlush,
            block: 4096,
            qd: 1,
        };
        let r = run(&dev, case, Duration::from_millis(50));
        assert_eq!(r.errors, 0, "{:?}", r.first_error);
        assert!(r.ops > 0);
        let s = r.latency.summary();
        // A pair is a 200 us write then a 300 us flush, one after the other.
        assert!(s.p50_us >= 500.0, "{s}");
        assert_eq!(r.bytes, r.ops * 4096);
    }

    #[test]
    fn keeps_its_queue_depth_busy_and_stops_on_time() {
        let dev = sim(100, 0);
        let case = Case {
            pattern: Pattern::SeqWrite,
            block: 8192,
            qd: 16,
        };
        let r = run(&dev, case, Duration::from_millis(40));
        assert_eq!(r.qd, 16);
        assert_eq!(r.peak_in_flight, 16);
        // How many more come back in 40 ms depends on how often this thread
        // runs: one stalled past the end after the first 16 (a loaded
        // machine) reissues none. The reissuing is checked by count below.
        assert!(r.ops >= 16, "{} ops", r.ops);
        assert!(dev.stats().writes >= r.ops);

        // Slots are reissued: 64 requests through 16 slots, without a clock.
        let queue = dev.open_queue().unwrap();
        let mut job = Job::new(
            queue,
            case,
            256..8192,
            Duration::from_secs(3600),
            7,
            |len| dev.alloc_buf(len),
        );
        job.limit_ops(64);
        while !job.is_done() {
            if job.poll() == 0 {
                wait::wait(job.wait_hint(), Duration::from_millis(2));
            }
        }
        let r = job.result();
        assert_eq!((r.ops, r.peak_in_flight), (64, 16), "slots are reissued");
    }

    #[test]
    fn an_op_limit_ends_the_job_early() {
        let dev = sim(0, 0);
        let queue = dev.open_queue().unwrap();
        let case = Case {
            pattern: Pattern::SeqWrite,
            block: 4096,
            qd: 4,
        };
        let mut job = Job::new(
            queue,
            case,
            256..1024,
            Duration::from_secs(3600),
            1,
            |len| dev.alloc_buf(len),
        );
        job.limit_ops(10);
        while !job.is_done() {
            if job.poll() == 0 {
                wait::wait(job.wait_hint(), Duration::from_millis(2));
            }
        }
        assert_eq!(job.result().ops, 10);
    }

    #[test]
    fn refused_requests_end_the_job_with_the_reason() {
        // 8 KiB blocks: the 4 KiB requests of the case are refused.
        let dev = SimDevice::new("b2", 8192, 4096, 8, SimConfig::default());
        let case = Case {
            pattern: Pattern::SeqWrite,
            block: 4096,
            qd: 4,
        };
        let r = run(&dev, case, Duration::from_secs(3600));
        assert_eq!(r.ops, 0);
        assert!(r.errors >= 1);
        assert!(r.first_error.unwrap().contains("not a whole number"));
    }

    #[test]
    fn device_errors_are_counted_not_hidden() {
        let mut model = SimConfig {
            write_us: 0,
            read_us: 0,
            flush_us: 0,
            bandwidth: 0,
            ..SimConfig::default()
        };
        model.faults.fail_ops = vec![3, 5];
        let dev = SimDevice::new("b1", 4096, 4096, 8, model);
        let case = Case {
            pattern: Pattern::SeqWrite,
            block: 4096,
            qd: 2,
        };
        let r = run(&dev, case, Duration::from_millis(20));
        assert_eq!(r.errors, 2);
        assert!(r.first_error.unwrap().contains("injected"));
    }
}
