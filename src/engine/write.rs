//! Writes: admission under the global limit, the WAL append under the
//! region lock, the insert once acknowledged, and freezing full memstores.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{EngineError, Result};
use super::{Engine, Inner};
use crate::config::Durability;
use crate::device::Device;
use crate::memstore::{entry_bytes, Memstore};
use crate::table::EntryKind;
use crate::wal::format::RecordOp;
use crate::wal::Ticket;

/// A write admitted to a memstore, waiting for its WAL acknowledgement.
struct Admitted {
    ms: Arc<Memstore>,
    ticket: Ticket,
    key: Vec<u8>,
    value: Vec<u8>,
    kind: EntryKind,
    bytes: u64,
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Stores `value` under `key` at `durability` (the configured default
    /// when `None`). Returns once the write is acknowledged at that level;
    /// from then on every reader sees it.
    pub fn put(&self, key: &[u8], value: &[u8], durability: Option<Durability>) -> Result<()> {
        self.write_batch(&[(key, Some(value))], durability)
    }

    /// Deletes `key` (writes a tombstone) at `durability`.
    pub fn delete(&self, key: &[u8], durability: Option<Durability>) -> Result<()> {
        self.write_batch(&[(key, None)], durability)
    }

    /// Puts every pair at `durability`; acknowledged as a whole once every
    /// record is. A bad pair refuses the whole batch before anything is
    /// written.
    pub fn put_batch(
        &self,
        pairs: &[(&[u8], &[u8])],
        durability: Option<Durability>,
    ) -> Result<()> {
        let writes: Vec<(&[u8], Option<&[u8]>)> =
            pairs.iter().map(|(k, v)| (*k, Some(*v))).collect();
        self.write_batch(&writes, durability)
    }

    /// Puts (`Some(value)`) and deletes (`None`) at `durability`.
    pub fn write_batch(&self, writes: &[(&[u8], Option<&[u8]>)], durability: Option<Durability>) -> Result<()> {
        self.submit(writes, durability)?.wait()
    }

    /// Starts a batch of puts and deletes and returns without waiting for
    /// the acknowledgement: the way a client keeps many writes in flight.
    /// The writes become visible when [`Pending::wait`] returns (or the
    /// `Pending` is dropped, which waits too). Waits only while the
    /// memstores are over the global limit or the WAL's ring is full.
    pub fn submit(&self, writes: &[(&[u8], Option<&[u8]>)], durability: Option<Durability>) -> Result<Pending<'_, D>> {
        let inner = &*self.inner;
        let level = durability.unwrap_or(inner.opts.durability);
        for (key, value) in writes {
            inner.check(key, value.map_or(0, <[u8]>::len))?;
        }
        if let Some(e) = inner.failure() {
            return Err(e);
        }
        let bytes: u64 = writes
            .iter()
            .map(|(k, v)| entry_bytes(k.len(), v.map_or(0, <[u8]>::len)))
            .sum();
        inner.admit(bytes)?;
        let mut admitted: Vec<Admitted> = Vec::with_capacity(writes.len());
        let mut failure = None;
        for (key, value) in writes {
            match inner.append(key, *value, level) {
                Ok(a) => admitted.push(a),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        inner.counters.writes.fetch_add(admitted.len() as u64, Ordering::Relaxed);
        let pending = Pending {
            inner,
            level,
            admitted,
        };
        match failure {
            Some(e) => {
                drop(pending);
                Err(e)
            }
            None => Ok(pending),
        }
    }
}

/// Writes on their way: see [`Engine::submit`].
#[must_use = "a submitted batch is acknowledged by waiting for it"]
pub struct Pending<'e, D: Device<Queue: Send> + Clone> {
    inner: &'e Inner<D>,
    level: Durability,
    admitted: Vec<Admitted>,
}

impl<D: Device<Queue: Send> + Clone> Pending<'_, D> {
    /// Waits until every write of the batch is acknowledged at its level
    /// and visible.
    pub fn wait(mut self) -> Result<()> {
        self.complete()
    }

    /// True once [`Pending::wait`] would not wait.
    pub fn is_done(&self) -> bool {
        self.level == Durability::None || self.admitted.iter().all(|a| a.ticket.is_done())
    }

    fn complete(&mut self) -> Result<()> {
        let mut failure = None;
        for a in self.admitted.drain(..) {
            if let Err(e) = self.inner.complete(a, self.level) {
                failure.get_or_insert(e);
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<D: Device<Queue: Send> + Clone> Drop for Pending<'_, D> {
    fn drop(&mut self) {
        // A memstore waits for its admitted writes before it is flushed.
        let _ = self.complete();
    }
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    fn check(&self, key: &[u8], value_len: usize) -> Result<()> {
        if key.is_empty() {
            return Err(EngineError::BadRange("a key cannot be empty".into()));
        }
        if key.len() > self.opts.max_key {
            return Err(EngineError::TooLarge {
                what: "a key",
                field: "max-key",
                bytes: key.len(),
                limit: self.opts.max_key,
            });
        }
        if value_len > self.opts.max_value {
            return Err(EngineError::TooLarge {
                what: "a value",
                field: "max-value",
                bytes: value_len,
                limit: self.opts.max_value,
            });
        }
        Ok(())
    }

    /// Waits while the memstores are over the global limit, asking for
    /// the largest regions to be flushed.
    fn admit(&self, _bytes: u64) -> Result<()> {
        if !self.memory.is_over() {
            return Ok(());
        }
        self.memory
            .wait_below_low(|| self.relieve(), || self.failure())
    }

    /// Freezes the largest active memstores until what is frozen would
    /// bring the total below the low-water mark.
    pub(super) fn relieve(&self) {
        let total = self.memory.total();
        let low = self.memory.low();
        let mut frozen: u64 = 0;
        let mut sizes: Vec<(u64, usize)> = Vec::with_capacity(self.region.len());
        for (r, region) in self.region.iter().enumerate() {
            let st = region.lock();
            frozen += st.frozen.iter().map(|m| m.bytes()).sum::<u64>();
            sizes.push((st.active.bytes(), r));
        }
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        for (bytes, r) in sizes {
            if bytes == 0 || total.saturating_sub(frozen) < low {
                break;
            }
            self.freeze(r);
            frozen += bytes;
        }
    }

    /// Charges a write to its region's active memstore and appends it to
    /// the WAL, both under the region's lock (see the module comment).
    fn append(&self, key: &[u8], value: Option<&[u8]>, level: Durability) -> Result<Admitted> {
        let r = self.regions.of(key);
        let (op, kind, value) = match value {
            Some(v) => (RecordOp::Put, EntryKind::Put, v.to_vec()),
            None => (RecordOp::Delete, EntryKind::Delete, Vec::new()),
        };
        let bytes = entry_bytes(key.len(), value.len());
        let region = &self.region[r];
        let mut st = region.lock();
        let ms = st.active.clone();
        if ms.is_unused() {
            ms.set_floor(self.wal.written_lsn());
        }
        ms.admit(bytes);
        self.memory.charge(bytes);
        let ticket = match self
            .wal
            .append(op, r as u32, key.to_vec(), value.clone(), level)
        {
            Ok(t) => t,
            Err(e) => {
                ms.cancel(bytes);
                self.memory.release(bytes);
                drop(st);
                self.fail(format!("WAL append: {e}"));
                return Err(e.into());
            }
        };
        let full = ms.bytes() >= self.opts.flush_size;
        let frozen = full.then(|| self.freeze_locked(r, &mut st)).flatten();
        drop(st);
        if let Some(ms) = frozen {
            self.sched.push_flush(r as u32, ms);
        }
        Ok(Admitted {
            ms,
            ticket,
            key: key.to_vec(),
            value,
            kind,
            bytes,
        })
    }

    /// Waits for the acknowledgement and inserts the write.
    fn complete(&self, a: Admitted, level: Durability) -> Result<()> {
        let version = if level == Durability::None {
            self.high_lsn.load(Ordering::SeqCst)
        } else {
            match a.ticket.wait() {
                Ok(lsn) => lsn,
                Err(e) => {
                    a.ms.cancel(a.bytes);
                    self.memory.release(a.bytes);
                    self.fail(format!("WAL: {e}"));
                    return Err(e.into());
                }
            }
        };
        let logged = level != Durability::None;
        a.ms.insert_admitted(a.key, version, logged, a.kind, a.value);
        if logged {
            self.high_lsn.fetch_max(version, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Freezes region `r`'s active memstore (if it holds anything) and
    /// queues it for a flush.
    pub(super) fn freeze(&self, r: usize) {
        let mut st = self.region[r].lock();
        let frozen = self.freeze_locked(r, &mut st);
        drop(st);
        if let Some(ms) = frozen {
            self.sched.push_flush(r as u32, ms);
        }
    }

    fn freeze_locked(
        &self,
        r: usize,
        st: &mut super::region::RegionState<D>,
    ) -> Option<Arc<Memstore>> {
        if st.active.is_unused() {
            return None;
        }
        let fresh = self.new_memstore(self.wal.written_lsn());
        let old = std::mem::replace(&mut st.active, fresh);
        old.freeze();
        st.frozen.push_back(old.clone());
        self.region[r].publish(st);
        self.counters.freezes.fetch_add(1, Ordering::Relaxed);
        Some(old)
    }
}
