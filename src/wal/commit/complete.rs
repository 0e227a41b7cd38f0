//! What the devices report back: completed writes and flushes move the
//! copies of batches on; an error fails the WAL or, where the batches can
//! go on without it, loses the device.

use super::WalWork;
use crate::config::DeviceLoss;
use crate::device::{Completion, IoKind, Queue};
use crate::wal::inflight::State;
use crate::wal::stripe::Dev;
use crate::wal::Lsn;

/// Why [`WalWork::rejoin`] did not take a device back.
#[derive(Debug)]
pub(crate) enum Rejoin {
    /// Requests to the lost device are still in flight: try again.
    Busy,
    Refused(String),
}

impl<Q: Queue> WalWork<Q> {
    /// Fails the WAL: every waiter now and every append later.
    pub(super) fn fail(&mut self, why: String) {
        if self.failed.is_some() {
            return;
        }
        tracing::error!("WAL failed: {why}");
        for (_, t) in self
            .write_waiters
            .drain(..)
            .chain(self.sync_waiters.drain(..))
        {
            t.fail(&why);
        }
        self.failed = Some(why);
    }

    /// Device `d` failed a request (an I/O error, a failed flush, a refused
    /// submission, or it vanished). What it holds is no longer known, so
    /// the WAL either fails, or goes on without it when every batch in
    /// flight has a copy elsewhere and the policy allows
    /// ([`DeviceLoss`]).
    pub(super) fn device_failed(&mut self, d: usize, why: String) {
        if self.failed.is_some() || self.devs[d].lost.is_some() {
            return;
        }
        let name = self.devs[d].name.clone();
        let left = self.live() - 1;
        let refuse = self.on_device_loss == DeviceLoss::RefuseWrites && left < self.copies;
        // Devices taken back while running hold the log whole once it is
        // released below where they joined; until then they lack batches
        // a start may need, as a lost device does.
        let released = self.released;
        self.catching_up
            .retain(|&(c, from)| c != d && released.saturating_add(1) < from);
        let behind = self.catching_up.len();
        // Once as many devices are lost as each batch has copies, a batch
        // acknowledged earlier (and not yet released) may have had every
        // copy on them.
        let lost = self.devs.len() - left + behind;
        if self.copies == 1 || left == 0 || refuse || lost >= self.copies {
            let policy = if refuse {
                " (on-device-loss: refuse-writes)"
            } else if lost >= self.copies && self.copies > 1 && behind > 0 {
                " (a WAL device replaced while running does not hold the log whole yet)"
            } else if lost >= self.copies && self.copies > 1 {
                " (as many WAL devices lost as each batch has copies)"
            } else {
                ""
            };
            self.fail(format!("WAL device {name}: {why}{policy}"));
            return;
        }
        // Every batch not yet acknowledged at every level must keep a copy
        // on a device that works; one whose only copy is here fails the WAL.
        if let Some(b) = self
            .batches
            .iter()
            .find(|b| b.copies.iter().all(|&(c, _)| c == d))
        {
            let last = b.last;
            self.fail(format!(
                "WAL device {name}: {why}; the batch ending at LSN {last} has no other copy"
            ));
            return;
        }
        // The loss is recorded before any batch is acknowledged without
        // this device's copy: a later start must not take the log from it.
        if let Some(hook) = &self.on_loss {
            let index = self.devs[d].index;
            if let Err(e) = (hook.0)(index, &why) {
                self.fail(format!(
                    "WAL device {name}: {why}; its loss could not be recorded ({e})"
                ));
                return;
            }
        }
        for b in &mut self.batches {
            b.drop_copy(d);
        }
        let dev = &mut self.devs[d];
        dev.unflushed.clear();
        dev.flushing = None;
        dev.lost = Some(why.clone());
        self.stats.device_lost[d].add(1);
        let want = self.want();
        tracing::error!(
            "WAL device {name} lost: {why}; going on DEGRADED with {left} of {} devices and {want} of {} copies of each batch until it is replaced",
            self.devs.len(),
            self.copies
        );
    }

    /// Takes back device `d`, which the WAL lost, as `dev`: a new, empty
    /// device in its place (`stria device replace` of a running
    /// appliance). Every batch submitted from now on has its copy there
    /// again. Returns the first LSN sure to be among them: those below it
    /// may lack that copy. Refused while the WAL has failed, while `d` is
    /// in service, and while writes to the lost device are still in
    /// flight (try again: they fail soon).
    /// The old device is handed back, to be dropped outside the WAL's
    /// lock (a queue may wait for its requests when dropped).
    pub(crate) fn rejoin(&mut self, d: usize, dev: Dev<Q>) -> Result<(Lsn, Dev<Q>), Rejoin> {
        if let Some(why) = &self.failed {
            return Err(Rejoin::Refused(format!("the WAL has failed ({why})")));
        }
        let Some(old) = self.devs.get(d) else {
            return Err(Rejoin::Refused(format!(
                "the WAL has no device at position {d}"
            )));
        };
        if old.lost.is_none() {
            return Err(Rejoin::Refused(format!(
                "WAL device {} is in service: only a lost device is taken back",
                old.name
            )));
        }
        if old.in_flight > 0 || old.queue.in_flight() > 0 {
            return Err(Rejoin::Busy);
        }
        let name = dev.name.clone();
        let old = std::mem::replace(&mut self.devs[d], dev);
        self.stats.device_lost[d].set(0);
        // Records appended from now on are in batches not yet submitted,
        // which go to every device the WAL uses (up to `copies`).
        let from = self.next_lsn;
        // Until the log below `from` is released, the device lacks some of
        // what a start may need: it counts as lost when another goes.
        self.catching_up.retain(|&(c, _)| c != d);
        self.catching_up.push((d, from));
        tracing::warn!(
            "WAL device {name} is back in the stripe (a new device): every batch from LSN {from} on has its copy there; {} of {} devices in use",
            self.live(),
            self.devs.len()
        );
        Ok((from, old))
    }

    pub(super) fn reap(&mut self) -> usize {
        let mut n = 0;
        for d in 0..self.devs.len() {
            let mut done = std::mem::take(&mut self.devs[d].done);
            self.devs[d].queue.poll(&mut done);
            n += done.len();
            for c in done.drain(..) {
                self.completed(d, c);
            }
            self.devs[d].done = done;
        }
        n
    }

    fn completed(&mut self, d: usize, c: Completion) {
        if let Err(e) = &c.result {
            self.device_failed(d, e.to_string());
        }
        let ok = c.result.is_ok() && self.devs[d].lost.is_none();
        let dev = &mut self.devs[d];
        match c.kind {
            IoKind::Flush => {
                let covered = dev.flushing.take().unwrap_or_default();
                if ok {
                    for id in covered {
                        self.set_state(id, d, State::Durable);
                    }
                }
            }
            _ => {
                dev.in_flight -= 1;
                let mut bufs = c.bufs;
                let mut batch_buf = bufs.pop().expect("the batch buffer comes back");
                dev.in_flight_bytes -= batch_buf.len();
                if let Some(h) = bufs.pop() {
                    dev.header = Some(h);
                }
                batch_buf.restore_len();
                self.pool.push(batch_buf);
                if let Some(i) = self.batch_index(c.tag) {
                    let ns = self.batches[i].sent.elapsed().as_nanos();
                    self.stats
                        .batch_written(u64::try_from(ns).unwrap_or(u64::MAX));
                }
                if ok {
                    let fua = self.batch_index(c.tag).is_some_and(|i| self.batches[i].fua);
                    if self.devs[d].volatile && !fua {
                        self.devs[d].unflushed.push(c.tag);
                        self.set_state(c.tag, d, State::Written);
                    } else {
                        self.set_state(c.tag, d, State::Durable);
                    }
                }
            }
        }
    }

    /// Moves the copy of batch `id` on device `d` to `state`.
    fn set_state(&mut self, id: u64, d: usize, state: State) {
        if let Some(i) = self.batch_index(id) {
            debug_assert_eq!(self.batches[i].id, id);
            self.batches[i].set(d, state);
        }
    }
}
