//! The mutable state of one simulated device, shared by its queues.
//!
//! Every queue operation first advances the device to the present: requests
//! whose due time has passed complete, device-wide, in due-time order (ties
//! in submission order), whichever queue they came from. Their effects land
//! on the media in that order and their completions wait in their queue's
//! list until that queue polls. So a write completes, and becomes visible to
//! reads from every queue, at its due time, not when its owner happens to
//! poll.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::time::Instant;

use super::faults::{Fate, Faults};
use super::media::Media;
use super::timing::Timing;
use super::SimStats;
use crate::config::SimConfig;
use crate::device::{
    check_request, Completion, DeviceError, DeviceInfo, IoKind, Op, Rejected, Request,
};

/// Requests are ordered by when they complete, then by operation number.
type Key = (Instant, u64);

/// An accepted request that has not completed yet.
struct InFlight {
    queue: u64,
    req: Request,
    /// What fault injection picked for it.
    fate: Fate,
    /// For a flush: the media's write watermark when it was submitted.
    covers: u64,
}

/// What one queue is waiting for.
#[derive(Default)]
struct QueueState {
    /// Completions not yet returned by `poll`.
    done: Vec<Completion>,
    /// Its requests still in flight.
    pending: BTreeSet<Key>,
}

/// A write that was in flight when the device lost power.
pub(super) struct LostWrite {
    pub lba: u64,
    pub data: Box<[u8]>,
    /// Sent with forced unit access: if it took effect, it is durable.
    pub fua: bool,
}

pub(super) struct State {
    pub info: DeviceInfo,
    pub model: SimConfig,
    pub media: Media,
    /// `Some(why)` once the device is offline.
    pub offline: Option<String>,
    /// The device lost power (as opposed to only the process that used it
    /// dying): what was in its volatile cache is at risk.
    pub power_lost: bool,
    /// Once a flush failed, every later flush fails too (fault model,
    /// item 7).
    pub sticky_flush_errors: bool,
    /// Why the first failed flush failed.
    flush_failed: Option<String>,
    /// Writes in flight when the device went offline, in submission order.
    pub lost: Vec<LostWrite>,
    pub stats: SimStats,
    /// Blocks whose reads fail until a write covers them (latent sector
    /// errors): a defect of the media, kept across reboots.
    pub latent: BTreeSet<u64>,
    /// It vanished (fail-stop): it stays gone across reboots.
    pub vanished: bool,
    timing: Timing,
    faults: Faults,
    next_op: u64,
    in_flight: BTreeMap<Key, InFlight>,
    queues: HashMap<u64, QueueState>,
    next_queue: u64,
}

impl State {
    pub(super) fn new(info: DeviceInfo, model: SimConfig, media: Media) -> State {
        State {
            timing: Timing::new(&model),
            faults: Faults::new(&model.faults, model.seed),
            latent: model.faults.latent_errors.iter().copied().collect(),
            vanished: false,
            info,
            model,
            media,
            offline: None,
            power_lost: false,
            sticky_flush_errors: true,
            flush_failed: None,
            lost: Vec::new(),
            stats: SimStats::default(),
            next_op: 0,
            in_flight: BTreeMap::new(),
            queues: HashMap::new(),
            next_queue: 0,
        }
    }

    pub(super) fn set_faults(&mut self, faults: crate::config::SimFaults) {
        self.faults = Faults::new(&faults, self.model.seed ^ self.next_op.rotate_left(32));
        self.latent.extend(faults.latent_errors.iter().copied());
        self.model.faults = faults;
    }

    pub(super) fn open_queue(&mut self) -> u64 {
        let id = self.next_queue;
        self.next_queue += 1;
        self.queues.insert(id, QueueState::default());
        id
    }

    /// Forgets a queue. Its requests still in flight complete on the device
    /// all the same; their completions are discarded.
    pub(super) fn close_queue(&mut self, queue: u64) {
        self.queues.remove(&queue);
    }

    /// Accepts `req` from `queue`, which has `outstanding` requests not yet
    /// returned by `poll`, or refuses it with nothing changed.
    pub(super) fn submit(
        &mut self,
        queue: u64,
        req: Request,
        outstanding: usize,
    ) -> Result<(), Rejected> {
        let now = Instant::now();
        self.advance(now);
        if let Some(why) = &self.offline {
            let error = offline(&self.info.name, &req, why);
            return self.refuse(req, error);
        }
        if let Err(error) = check_request(&self.info, &req, outstanding) {
            return self.refuse(req, error);
        }
        let op = self.next_op;
        self.next_op += 1;
        if self.model.faults.power_cut_at_op == Some(op) {
            let why = format!("power cut at op {op}");
            let error = offline(&self.info.name, &req, &why);
            self.go_offline(why, true);
            return self.refuse(req, error);
        }
        if self.model.faults.vanish_at_op.is_some_and(|at| op >= at) {
            let why = format!("the device vanished at op {op} (fail-stop, as a pulled drive)");
            let error = offline(&self.info.name, &req, &why);
            self.vanished = true;
            self.go_offline(why, true);
            return self.refuse(req, error);
        }
        let kind = req.kind();
        match kind {
            IoKind::Write => self.stats.writes += 1,
            IoKind::Read => self.stats.reads += 1,
            IoKind::Flush => self.stats.flushes += 1,
        }
        let blocks = req.bytes() / u64::from(self.info.block_size);
        let fate = self
            .faults
            .fate(op, kind, blocks, self.info.capacity_blocks);
        let mut due = self.timing.due(now, kind, req.bytes());
        let f = &self.model.faults;
        if f.slow_from_op
            .is_some_and(|from| op >= from && op - from < f.slow_ops)
        {
            // Gray failure: the same request, `slow-factor` times slower.
            due = now + (due - now) * u32::try_from(f.slow_factor.max(1)).unwrap_or(u32::MAX);
        }
        let key = (due, op);
        let covers = self.media.watermark();
        if let Some(q) = self.queues.get_mut(&queue) {
            q.pending.insert(key);
        }
        let entry = InFlight {
            queue,
            req,
            fate,
            covers,
        };
        self.in_flight.insert(key, entry);
        Ok(())
    }

    fn refuse(&mut self, request: Request, error: DeviceError) -> Result<(), Rejected> {
        self.stats.refused += 1;
        Err(Rejected { error, request })
    }

    /// Advances to `now`, then moves `queue`'s completions into `out`.
    pub(super) fn poll(&mut self, queue: u64, out: &mut Vec<Completion>) -> usize {
        self.advance(Instant::now());
        let Some(q) = self.queues.get_mut(&queue) else {
            return 0;
        };
        let n = q.done.len();
        out.append(&mut q.done);
        n
    }

    /// When `queue` should next be polled, given it has requests outstanding.
    pub(super) fn next_due(&self, queue: u64) -> Option<Instant> {
        let q = self.queues.get(&queue)?;
        if !q.done.is_empty() {
            return Some(Instant::now());
        }
        q.pending.first().map(|&(due, _)| due)
    }

    /// Completes every request due by `now`, in due order.
    pub(super) fn advance(&mut self, now: Instant) {
        if self.offline.is_some() {
            return;
        }
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, inflight) = entry.remove_entry();
            self.complete(key, inflight);
        }
    }

    fn complete(&mut self, key: Key, inflight: InFlight) {
        let InFlight {
            queue,
            mut req,
            fate,
            covers,
        } = inflight;
        let failure = match &fate {
            Fate::Fail(why) => Some(why.clone()),
            _ => self.latent_error(&req),
        };
        // A FUA write syncs as a flush does, and fails as one.
        let kind = if req.makes_durable() {
            IoKind::Flush
        } else {
            req.kind()
        };
        let failure = match (failure, kind) {
            (Some(why), IoKind::Flush) => {
                self.flush_failed.get_or_insert_with(|| why.clone());
                Some(why)
            }
            (None, IoKind::Flush) if self.sticky_flush_errors => {
                self.flush_failed.as_ref().map(|first| {
                    format!(
                        "an earlier flush failed ({first}); data written since the last \
                         successful flush may be lost: the device must be rebooted"
                    )
                })
            }
            (failure, _) => failure,
        };
        let result = match failure {
            Some(why) => {
                self.stats.errors_injected += 1;
                Err(DeviceError::Io {
                    device: self.info.name.clone(),
                    kind: req.kind(),
                    lba: req.lba(),
                    source: io::Error::other(why),
                })
            }
            None => {
                self.apply(&mut req, covers, &fate);
                Ok(())
            }
        };
        if let Some(q) = self.queues.get_mut(&queue) {
            q.pending.remove(&key);
            q.done.push(Completion::of(req, result));
        }
    }

    /// Makes a successful request take effect on the media.
    /// A silent fault of `fate` (a misdirected or lost write, a corrupted
    /// read) reports success like a normal request.
    fn apply(&mut self, req: &mut Request, covers: u64, fate: &Fate) {
        let bs = self.info.block_size as usize;
        match &mut req.op {
            Op::Write { lba, bufs, fua } => {
                let parts: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
                let bytes = parts.iter().map(|p| p.len() as u64).sum::<u64>();
                self.stats.bytes_written += bytes;
                let at = match fate {
                    Fate::Lose => {
                        self.stats.silent_faults += 1;
                        return;
                    }
                    Fate::Misdirect(to) => {
                        self.stats.silent_faults += 1;
                        *to
                    }
                    _ => *lba,
                };
                let blocks = bytes / bs as u64;
                let cleared: Vec<u64> = self.latent.range(at..at + blocks).copied().collect();
                for b in cleared {
                    self.latent.remove(&b);
                }
                if *fua {
                    self.media.write_bufs_through(at, &parts);
                } else {
                    self.media.write_bufs(at, &parts);
                }
            }
            Op::Read { lba, bufs } => {
                let mut at = *lba;
                for buf in bufs.iter_mut() {
                    self.media.read(at, buf);
                    at += (buf.len() / bs) as u64;
                    self.stats.bytes_read += buf.len() as u64;
                }
                if let Fate::Corrupt { byte, bit } = fate {
                    self.stats.silent_faults += 1;
                    let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
                    let mut at = byte % total.max(1);
                    for buf in bufs.iter_mut() {
                        if at < buf.len() as u64 {
                            buf[at as usize] ^= 1 << bit;
                            break;
                        }
                        at -= buf.len() as u64;
                    }
                }
            }
            Op::Flush => self.media.flush(covers),
        }
    }

    /// Why a read of `req` fails on a latent sector error, if it does.
    fn latent_error(&self, req: &Request) -> Option<String> {
        let Op::Read { lba, .. } = &req.op else {
            return None;
        };
        let blocks = req.bytes() / u64::from(self.info.block_size);
        self.latent
            .range(*lba..*lba + blocks)
            .next()
            .map(|b| format!("latent sector error: block {b} cannot be read until it is rewritten"))
    }

    /// Takes the device offline for `why`, having lost power if
    /// `power_lost` (else only its process died): nothing completes any
    /// more, every request in flight or completed but not yet polled is
    /// reported offline, and the writes in flight are kept for the crash to
    /// decide. Once offline it stays so, and once it lost power it stays
    /// having lost it.
    pub(super) fn go_offline(&mut self, why: String, power_lost: bool) {
        self.power_lost |= power_lost;
        if self.offline.is_some() {
            return;
        }
        let mut in_flight: Vec<(Key, InFlight)> =
            std::mem::take(&mut self.in_flight).into_iter().collect();
        in_flight.sort_by_key(|((_, op), _)| *op);
        for (_, inflight) in in_flight {
            let InFlight { queue, req, .. } = inflight;
            if let Op::Write { lba, bufs, fua } = &req.op {
                self.lost.push(LostWrite {
                    lba: *lba,
                    data: gather(bufs),
                    fua: *fua,
                });
            }
            if let Some(q) = self.queues.get_mut(&queue) {
                let error = offline(&self.info.name, &req, &why);
                q.done.push(Completion::of(req, Err(error)));
            }
        }
        for q in self.queues.values_mut() {
            q.pending.clear();
            for c in &mut q.done {
                if c.result.is_ok() {
                    c.result = Err(DeviceError::Offline {
                        device: self.info.name.clone(),
                        kind: c.kind,
                        lba: c.lba,
                        why: why.clone(),
                    });
                }
            }
        }
        self.offline = Some(why);
    }
}

fn offline(device: &str, req: &Request, why: &str) -> DeviceError {
    DeviceError::Offline {
        device: device.to_string(),
        kind: req.kind(),
        lba: req.lba(),
        why: why.to_string(),
    }
}

/// The buffers' bytes, back to back.
fn gather(bufs: &[crate::device::IoBuf]) -> Box<[u8]> {
    let mut data = Vec::with_capacity(bufs.iter().map(|b| b.len()).sum());
    for buf in bufs {
        data.extend_from_slice(buf);
    }
    data.into_boxed_slice()
}
