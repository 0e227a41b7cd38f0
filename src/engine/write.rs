//! Writes: admission under the global limit, the WAL append under the
//! region lock, the insert once acknowledged, and freezing full memstores.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use super::error::{EngineError, Result};
use super::{Engine, Inner};
use crate::config::Durability;
use crate::device::Device;
use crate::memstore::{entry_bytes, Admission, Inserter, Memstore};
use crate::record::Record;
use crate::table::EntryKind;
use crate::wal::format::RecordOp;
use crate::wal::Ticket;

/// A write admitted to a memstore, waiting for its WAL acknowledgement
/// (its ticket is in its group's [`Admission`]).
struct Admitted {
    record: Record,
    kind: EntryKind,
    bytes: u64,
    /// A `none` write's version: the highest LSN acknowledged when it was
    /// admitted, below the LSN of every write admitted after it (which the
    /// WAL numbers later). Taken when it was inserted instead, a write
    /// whose insert came after a later write's acknowledgement took that
    /// write's LSN, and replaced it.
    unlogged: u64,
}

/// Writes admitted to one memstore in one turn under its region's lock
/// (one reference to the memstore for all of them), not inserted yet. The
/// admission, which the memstore tracks too, holds their tickets and
/// counts how many are inserted.
struct Group {
    ms: Arc<Memstore>,
    admission: Arc<Admission>,
    writes: std::vec::IntoIter<Admitted>,
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
    pub fn write_batch(
        &self,
        writes: &[(&[u8], Option<&[u8]>)],
        durability: Option<Durability>,
    ) -> Result<()> {
        let level = durability.unwrap_or(self.inner.opts.durability);
        let flight = self.inner.start(writes, level)?;
        flight.wait_and_insert()
    }

    /// Starts a batch of puts and deletes and returns without waiting for
    /// the acknowledgement: the way a client keeps many writes in flight.
    /// The writes become visible when they are acknowledged and either
    /// [`Pending::wait`] returns or a flush of their memstore inserts them
    /// (so a thread may hold many `Pending`s while it submits more). Dropping
    /// a `Pending` waits for it. Waits only while the memstores are over the
    /// global limit or the WAL's ring is full.
    pub fn submit(
        &self,
        writes: &[(&[u8], Option<&[u8]>)],
        durability: Option<Durability>,
    ) -> Result<Pending<'_, D>> {
        let level = durability.unwrap_or(self.inner.opts.durability);
        let flight = Arc::new(self.inner.start(writes, level)?);
        flight.register(&flight);
        Ok(Pending {
            flight,
            _engine: std::marker::PhantomData,
        })
    }
}

/// True when `writes` fit one WAL group of at most `max` bytes.
fn group_fits(writes: &[(&[u8], Option<&[u8]>)], max: usize) -> bool {
    let mut len = 0usize;
    writes.iter().all(|(k, v)| {
        len += crate::wal::format::record_len(k.len(), v.map_or(0, <[u8]>::len));
        len <= max
    })
}

/// The group of the writes appended to `ms` in one turn under its region's
/// lock (none if nothing was appended), its admission tracked by `ms`;
/// `last` becomes its last ticket.
fn group(
    ms: Arc<Memstore>,
    tickets: Vec<Ticket>,
    admitted: Vec<Admitted>,
    last: &mut Option<Ticket>,
) -> Option<Group> {
    let t = tickets.last()?;
    *last = Some(t.clone());
    let admission = Admission::new(tickets);
    ms.track(admission.clone());
    Some(Group {
        ms,
        admission,
        writes: admitted.into_iter(),
    })
}

/// Writes appended to the WAL whose inserts are still to do.
struct InFlight<D: Device<Queue: Send> + Clone> {
    inner: Arc<Inner<D>>,
    level: Durability,
    /// The last append: acknowledged last (acks go in LSN order).
    last: Option<Ticket>,
    admitted: Mutex<Vec<Group>>,
    failed: Mutex<Option<String>>,
}

impl<D: Device<Queue: Send> + Clone> InFlight<D> {
    /// Lets the memstores the writes went to insert them once acknowledged.
    fn register(&self, me: &Arc<InFlight<D>>) {
        let groups = self.admitted.lock().expect("in-flight lock");
        let mut seen: Vec<&Arc<Memstore>> = Vec::new();
        for g in groups.iter() {
            if !seen.iter().any(|m| Arc::ptr_eq(m, &g.ms)) {
                seen.push(&g.ms);
                let weak: Weak<dyn Inserter> = Arc::downgrade(me) as Weak<dyn Inserter>;
                g.ms.register(weak);
            }
        }
    }

    fn is_acknowledged(&self) -> bool {
        self.last.as_ref().is_none_or(Ticket::is_done)
    }

    /// Inserts the writes not inserted yet, in LSN order: all of them,
    /// waiting for each acknowledgement, or (`wait` false) those
    /// acknowledged, up to the first that is not.
    fn insert(&self, wait: bool) -> Result<()> {
        // The lock is held until every write is in, so whoever comes second
        // (the writer or a flush) returns only once they are visible. A
        // flush does not wait for it: whoever holds it inserts in order.
        let mut guard = if wait {
            self.admitted.lock().expect("in-flight lock")
        } else {
            match self.admitted.try_lock() {
                Ok(g) => g,
                Err(_) => return Ok(()),
            }
        };
        let mut high = 0;
        let logged = self.level != Durability::None;
        let durable = self.level == Durability::Sync;
        let mut run: Vec<(Record, u64, EntryKind)> = Vec::new();
        'groups: for g in guard.iter_mut() {
            // Runs of writes in LSN order: the next one (waited for when
            // `wait`) and every one after it already acknowledged, inserted
            // together under one lock of the memstore.
            loop {
                let tickets = &g.admission.tickets()[g.admission.inserted()..];
                // Room for the run at once: a group of hundreds of writes
                // grown a doubling at a time is copied a dozen times.
                run.reserve(tickets.len());
                let mut n = 0;
                for t in tickets {
                    if !t.is_done() && (n > 0 || !wait) {
                        break;
                    }
                    let a = g.writes.next().expect("a write per ticket");
                    match self
                        .inner
                        .acknowledged(&g.ms, t, a.bytes, self.level, a.unlogged)
                    {
                        Ok(version) => {
                            high = high.max(version);
                            run.push((a.record, version, a.kind));
                        }
                        Err(e) => {
                            self.failed
                                .lock()
                                .expect("in-flight lock")
                                .get_or_insert(e.to_string());
                        }
                    }
                    n += 1;
                }
                if n == 0 {
                    if tickets.is_empty() {
                        break;
                    }
                    break 'groups;
                }
                let freed = g.ms.insert_records(&mut run, logged, durable);
                if freed > 0 {
                    // Older versions the durable writes shadow are gone.
                    g.ms.cancel(0, freed);
                    self.inner.memory.release(freed);
                }
                g.admission.advance_by(n);
                // The run's writes end their pending state at once.
                g.ms.inserted(n as u64);
            }
        }
        guard.retain(|g| !g.writes.as_slice().is_empty());
        if self.level != Durability::None && high > 0 {
            self.inner.high_lsn.fetch_max(high, Ordering::SeqCst);
        }
        drop(guard);
        match self.failed.lock().expect("in-flight lock").as_ref() {
            Some(why) => Err(EngineError::Failed(why.clone())),
            None => Ok(()),
        }
    }

    /// Once acknowledged, whether the writes succeeded, without inserting
    /// them when they did (`None` before): a thread that answers on the
    /// acknowledgement can insert later. A failure is found out by
    /// inserting, which records it as [`InFlight::insert`] does.
    fn outcome(&self) -> Option<Result<()>> {
        if !self.is_acknowledged() {
            return None;
        }
        // Acknowledgements go in LSN order: with the last one in, every
        // ticket has its result. Held by a flush inserting them: asked
        // again by inserting.
        let clean = match self.admitted.try_lock() {
            Ok(groups) => {
                self.failed.lock().expect("in-flight lock").is_none()
                    && (self.level == Durability::None
                        || groups.iter().all(|g| {
                            g.admission.tickets()[g.admission.inserted()..]
                                .iter()
                                .all(|t| matches!(t.poll(), Some(Ok(_))))
                        }))
            }
            Err(_) => false,
        };
        Some(if clean { Ok(()) } else { self.insert(true) })
    }

    /// Inserts every write as its acknowledgement comes, in LSN order: a
    /// flush may wait for the first ones while the last wait for log space
    /// that only that flush frees.
    fn wait_and_insert(&self) -> Result<()> {
        self.insert(true)
    }
}

impl<D: Device<Queue: Send> + Clone> Inserter for InFlight<D> {
    fn insert_acknowledged(&self) {
        let _ = self.insert(false);
    }
}

/// Writes on their way: see [`Engine::submit`].
#[must_use = "a submitted batch is acknowledged by waiting for it"]
pub struct Pending<'e, D: Device<Queue: Send> + Clone> {
    flight: Arc<InFlight<D>>,
    _engine: std::marker::PhantomData<&'e Engine<D>>,
}

impl<D: Device<Queue: Send> + Clone> Pending<'_, D> {
    /// Waits until every write of the batch is acknowledged at its level
    /// and visible.
    pub fn wait(self) -> Result<()> {
        self.flight.wait_and_insert()
    }

    /// True once [`Pending::wait`] would not wait.
    pub fn is_done(&self) -> bool {
        self.flight.is_acknowledged()
    }

    /// Once acknowledged, whether every write succeeded, without making
    /// them visible when they did (`None` before): [`Pending::wait`] or a
    /// flush inserts them later.
    pub fn outcome(&self) -> Option<Result<()>> {
        self.flight.outcome()
    }

    /// Has `n` told once the batch is acknowledged (or failed), so a
    /// thread serving many clients need not block on it. When that has
    /// already happened `n` may not be told: check [`Pending::is_done`]
    /// after this.
    pub fn notify(&self, n: Arc<dyn crate::wal::Notify>) {
        if let Some(t) = &self.flight.last {
            t.notify(n);
        }
    }
}

impl<D: Device<Queue: Send> + Clone> Drop for Pending<'_, D> {
    fn drop(&mut self) {
        let _ = self.flight.wait_and_insert();
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
    /// the largest regions to be flushed. Above the low-water mark, with no
    /// flush reactor idle, asks for flushes without waiting, so the flush
    /// reactors start before writers have to stop.
    fn admit(&self, _bytes: u64) -> Result<()> {
        if self.memory.is_over() {
            return self
                .memory
                .wait_below_low(|| self.relieve(), || self.failure());
        }
        // At most once a millisecond: these take every region's lock. The
        // log check runs even while every flush reactor is busy: a memstore
        // frozen only once the log is full may hold writes that wait for
        // log space, and its flush waits for them.
        let now = self.started.elapsed().as_micros() as u64;
        let last = self.relieved_at.load(Ordering::Relaxed);
        if now >= last + 1000
            && self
                .relieved_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let reactors = self.opts.flush_reactors.len().max(1);
            if self.memory.total() >= self.memory.low() && self.sched.active() < reactors {
                self.relieve();
            }
            self.relieve_log();
        }
        Ok(())
    }

    /// Once over `log-freeze-at` (half) of the WAL's segments hold
    /// unreleased log, or the log is full, freezes the memstores that hold
    /// the older half of it back (the used active memstores whose floor is
    /// in that half): their flushes let the WAL reclaim, before writers
    /// have to wait for log space if they come in time. No memstore limit
    /// would ever relieve the log.
    pub(super) fn relieve_log(&self) {
        let (live, total) = self.wal.segment_usage();
        let due = total > 0 && live as f64 > self.opts.log_freeze_at * total as f64;
        if !due && !self.wal.is_full() {
            return;
        }
        let written = self.wal.written_lsn();
        let mut oldest = written;
        let mut actives: Vec<(u64, usize)> = Vec::new();
        for (r, region) in self.region.iter().enumerate() {
            let st = region.lock();
            for m in st.frozen.iter().filter(|m| !m.is_unused()) {
                oldest = oldest.min(m.floor());
            }
            if !st.active.is_unused() {
                oldest = oldest.min(st.active.floor());
                actives.push((st.active.floor(), r));
            }
        }
        let cutoff = oldest + (written - oldest) / 2;
        for (floor, r) in actives {
            if floor <= cutoff {
                self.freeze(r);
            }
        }
    }

    /// Freezes the largest active memstores until what is left unfrozen is
    /// below the low-water mark and every flush reactor has a memstore to
    /// flush (among those at least a quarter of `flush-size`: tiny files
    /// would only make work for compaction).
    pub(super) fn relieve(&self) {
        let total = self.memory.total();
        let low = self.memory.low();
        let reactors = self.opts.flush_reactors.len().max(1);
        let mut frozen: u64 = 0;
        let mut waiting = 0;
        let mut sizes: Vec<(u64, usize)> = Vec::with_capacity(self.region.len());
        for (r, region) in self.region.iter().enumerate() {
            let st = region.lock();
            frozen += st.frozen.iter().map(|m| m.bytes()).sum::<u64>();
            waiting += st.frozen.len();
            sizes.push((st.active.bytes(), r));
        }
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        for (bytes, r) in sizes {
            let under = total.saturating_sub(frozen) < low;
            if bytes == 0 || (under && (waiting >= reactors || bytes < self.opts.flush_size / 4)) {
                break;
            }
            self.freeze(r);
            frozen += bytes;
            waiting += 1;
        }
    }

    /// Checks and admits `writes`, then appends them region by region,
    /// each region's under its lock (see the module comment).
    fn start(
        self: &Arc<Self>,
        writes: &[(&[u8], Option<&[u8]>)],
        level: Durability,
    ) -> Result<InFlight<D>> {
        for (key, value) in writes {
            self.check(key, value.map_or(0, <[u8]>::len))?;
        }
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let bytes: u64 = writes
            .iter()
            .map(|(k, v)| entry_bytes(k.len(), v.map_or(0, <[u8]>::len)))
            .sum();
        self.admit(bytes)?;
        if level != Durability::None
            && writes.len() > 1
            && group_fits(writes, self.wal.max_group_bytes())
        {
            let mut admitted = Vec::new();
            let mut last = None;
            let result = self.append_group(writes, level, &mut admitted, &mut last);
            let count: usize = admitted.iter().map(|g| g.writes.len()).sum();
            self.counters
                .writes
                .fetch_add(count as u64, Ordering::Relaxed);
            result?;
            return Ok(InFlight {
                inner: self.clone(),
                level,
                last,
                admitted: Mutex::new(admitted),
                failed: Mutex::new(None),
            });
        }
        let mut order: Vec<(usize, usize)> = writes
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (self.regions.of(k), i))
            .collect();
        order.sort_unstable();
        let mut admitted: Vec<Group> = Vec::new();
        let mut last = None;
        let mut failure = None;
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            let r = group[0].0;
            let batch: Vec<(&[u8], Option<&[u8]>)> =
                group.iter().map(|&(_, i)| writes[i]).collect();
            if let Err(e) = self.append(r, &batch, level, &mut admitted, &mut last) {
                failure = Some(e);
                break;
            }
        }
        let count: usize = admitted.iter().map(|g| g.writes.len()).sum();
        self.counters
            .writes
            .fetch_add(count as u64, Ordering::Relaxed);
        let flight = InFlight {
            inner: self.clone(),
            level,
            last,
            admitted: Mutex::new(admitted),
            failed: Mutex::new(None),
        };
        match failure {
            Some(e) => {
                let _ = flight.wait_and_insert();
                Err(e)
            }
            None => Ok(flight),
        }
    }

    /// Charges writes of region `r` to its active memstore and appends them
    /// to the WAL, all under the region's lock. The lock is never held
    /// while waiting: when the WAL's ring is full, the writes not yet
    /// appended are taken off the memstore, the lock is let go, and after a
    /// short wait the rest goes to whatever memstore is active then (a
    /// writer blocked under the lock would hold up the flush that frees
    /// the log the ring waits for).
    fn append(
        &self,
        r: usize,
        writes: &[(&[u8], Option<&[u8]>)],
        level: Durability,
        out: &mut Vec<Group>,
        last: &mut Option<Ticket>,
    ) -> Result<()> {
        let region = &self.region[r];
        let sizes: Vec<u64> = writes
            .iter()
            .map(|(k, v)| entry_bytes(k.len(), v.map_or(0, <[u8]>::len)))
            .collect();
        self.memory.charge(sizes.iter().sum());
        // One copy of the keys and values, which the WAL appends and the
        // memstore keeps share.
        let records = Record::group(writes.iter().map(|&(k, v)| (k, v.unwrap_or_default())));
        let mut records = records.into_iter();
        let mut next = 0;
        // A write the ring handed back.
        let mut held: Option<Record> = None;
        let mut waited = false;
        // Waiting for ring space as the WAL's own blocking send does: spin
        // and yield a little, then sleep, longer each time.
        let backoff = crossbeam::utils::Backoff::new();
        let mut pause = std::time::Duration::from_micros(20);
        while next < writes.len() {
            if waited {
                if backoff.is_completed() {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(1));
                } else {
                    backoff.snooze();
                }
            }
            let mut st = region.lock();
            let ms = &st.active;
            if ms.is_unused() {
                ms.set_floor(self.wal.written_lsn());
            }
            let ms = ms.clone();
            let mut admitted = Vec::with_capacity(writes.len() - next);
            let mut tickets = Vec::with_capacity(writes.len() - next);
            // The whole rest is charged at once; what is not appended now
            // is taken off again.
            let rest_bytes: u64 = sizes[next..].iter().sum();
            ms.admit((writes.len() - next) as u64, rest_bytes);
            let mut full = false;
            while next < writes.len() {
                let (key, value) = writes[next];
                let (op, kind) = match value {
                    Some(_) => (RecordOp::Put, EntryKind::Put),
                    None => (RecordOp::Delete, EntryKind::Delete),
                };
                let record = held
                    .take()
                    .unwrap_or_else(|| records.next().expect("a record per write"));
                debug_assert!(record.key() == key && record.value() == value.unwrap_or_default());
                match self.wal.try_append(op, r as u32, record.clone(), level) {
                    Ok(Ok(t)) => {
                        tickets.push(t);
                        admitted.push(Admitted {
                            record,
                            kind,
                            bytes: sizes[next],
                            unlogged: self.high_lsn.load(Ordering::SeqCst),
                        });
                        next += 1;
                    }
                    Ok(Err(refused)) => {
                        drop(refused);
                        held = Some(record);
                        full = true;
                        break;
                    }
                    Err(e) => {
                        let rest: u64 = sizes[next..].iter().sum();
                        ms.cancel((writes.len() - next) as u64, rest);
                        self.memory.release(rest);
                        out.extend(group(ms, tickets, admitted, last));
                        drop(st);
                        self.fail(format!("WAL append: {e}"));
                        return Err(e.into());
                    }
                }
            }
            if full {
                ms.cancel((writes.len() - next) as u64, sizes[next..].iter().sum());
            }
            let frozen = ms.bytes() >= self.opts.flush_size;
            // Tracked before the memstore can be frozen: its flush must
            // see every write admitted to it.
            out.extend(group(ms, tickets, admitted, last));
            if frozen {
                self.freeze_locked(r, &mut st);
            }
            drop(st);
            waited = full;
        }
        Ok(())
    }

    /// Appends `writes` to the WAL as one group, in their order (see
    /// [`Wal::try_append_group`]): after any crash all of them are there
    /// or none, and a later write of one submission never without an
    /// earlier. Every region they touch is locked, in region order (so two
    /// groups never wait for each other's locks), while its memstore is
    /// charged and the group is sent: each region's LSNs still grow from
    /// one memstore to the next. The locks are never held while waiting:
    /// when the ring is full the charges are taken off, the locks let go,
    /// and the group tried again a little later.
    fn append_group(
        &self,
        writes: &[(&[u8], Option<&[u8]>)],
        level: Durability,
        out: &mut Vec<Group>,
        last: &mut Option<Ticket>,
    ) -> Result<()> {
        let regions: Vec<usize> = writes.iter().map(|(k, _)| self.regions.of(k)).collect();
        let mut involved = regions.clone();
        involved.sort_unstable();
        involved.dedup();
        let sizes: Vec<u64> = writes
            .iter()
            .map(|(k, v)| entry_bytes(k.len(), v.map_or(0, <[u8]>::len)))
            .collect();
        let total: u64 = sizes.iter().sum();
        self.memory.charge(total);
        // Per region touched: its writes and their bytes.
        let share: Vec<(u64, u64)> = involved
            .iter()
            .map(|&r| {
                regions
                    .iter()
                    .zip(&sizes)
                    .filter(|(&w, _)| w == r)
                    .fold((0, 0), |(n, b), (_, &s)| (n + 1, b + s))
            })
            .collect();
        let mut records: Vec<crate::wal::GroupRecord> =
            Record::group(writes.iter().map(|&(k, v)| (k, v.unwrap_or_default())))
                .into_iter()
                .zip(writes.iter().zip(&regions))
                .map(|(rec, ((_, v), &r))| {
                    let op = if v.is_some() {
                        RecordOp::Put
                    } else {
                        RecordOp::Delete
                    };
                    (op, r as u32, rec)
                })
                .collect();
        let backoff = crossbeam::utils::Backoff::new();
        let mut pause = std::time::Duration::from_micros(20);
        loop {
            let mut guards: Vec<_> = involved.iter().map(|&r| self.region[r].lock()).collect();
            let mss: Vec<Arc<Memstore>> = guards
                .iter()
                .zip(&share)
                .map(|(st, &(n, b))| {
                    if st.active.is_unused() {
                        st.active.set_floor(self.wal.written_lsn());
                    }
                    st.active.admit(n, b);
                    st.active.clone()
                })
                .collect();
            let kept: Vec<Record> = records.iter().map(|(_, _, r)| r.clone()).collect();
            let cancel = |mss: &[Arc<Memstore>]| {
                for (ms, &(n, b)) in mss.iter().zip(&share) {
                    ms.cancel(n, b);
                }
            };
            match self.wal.try_append_group(records, level) {
                Ok(Ok(tickets)) if involved.len() == 1 => {
                    // One region (most commands: a key and its elements):
                    // the tickets and records go to its group as they are.
                    let admitted: Vec<Admitted> = kept
                        .into_iter()
                        .zip(writes)
                        .zip(&sizes)
                        .map(|((record, (_, v)), &bytes)| Admitted {
                            record,
                            kind: if v.is_some() {
                                EntryKind::Put
                            } else {
                                EntryKind::Delete
                            },
                            bytes,
                            unlogged: 0,
                        })
                        .collect();
                    let ms = mss.into_iter().next().expect("one region");
                    let frozen = ms.bytes() >= self.opts.flush_size;
                    out.extend(group(ms, tickets, admitted, last));
                    if frozen {
                        self.freeze_locked(involved[0], &mut guards[0]);
                    }
                    return Ok(());
                }
                Ok(Ok(tickets)) => {
                    let mut kept = kept.into_iter();
                    let mut per: Vec<(Vec<Ticket>, Vec<Admitted>)> =
                        involved.iter().map(|_| (Vec::new(), Vec::new())).collect();
                    for (i, t) in tickets.iter().enumerate() {
                        let j = involved
                            .binary_search(&regions[i])
                            .expect("a region touched");
                        per[j].0.push(t.clone());
                        per[j].1.push(Admitted {
                            record: kept.next().expect("a record per write"),
                            kind: if writes[i].1.is_some() {
                                EntryKind::Put
                            } else {
                                EntryKind::Delete
                            },
                            bytes: sizes[i],
                            // Logged: a group is never at `none`.
                            unlogged: 0,
                        });
                    }
                    for ((j, (ts, adm)), ms) in per.into_iter().enumerate().zip(mss) {
                        let frozen = ms.bytes() >= self.opts.flush_size;
                        out.extend(group(ms, ts, adm, last));
                        if frozen {
                            self.freeze_locked(involved[j], &mut guards[j]);
                        }
                    }
                    // Acknowledged last: the highest LSN.
                    *last = tickets.last().cloned();
                    return Ok(());
                }
                Ok(Err(back)) => {
                    cancel(&mss);
                    drop(guards);
                    records = back;
                    if backoff.is_completed() {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(std::time::Duration::from_millis(1));
                    } else {
                        backoff.snooze();
                    }
                }
                Err(e) => {
                    cancel(&mss);
                    drop(guards);
                    self.memory.release(total);
                    self.fail(format!("WAL append: {e}"));
                    return Err(e.into());
                }
            }
        }
    }

    /// Waits for the acknowledgement of a write of `bytes` and returns its
    /// version; the caller inserts it and ends the pending state with
    /// [`Memstore::inserted`]. On a WAL error, gives its charge back.
    fn acknowledged(
        &self,
        ms: &Memstore,
        ticket: &Ticket,
        bytes: u64,
        level: Durability,
        unlogged: u64,
    ) -> Result<u64> {
        let version = if level == Durability::None {
            unlogged
        } else {
            match ticket.wait() {
                Ok(lsn) => lsn,
                Err(e) => {
                    ms.cancel(0, bytes);
                    self.memory.release(bytes);
                    self.fail(format!("WAL: {e}"));
                    return Err(e.into());
                }
            }
        };
        Ok(version)
    }

    /// Freezes region `r`'s active memstore (if it holds anything) and
    /// queues it for a flush.
    pub(super) fn freeze(&self, r: usize) {
        let mut st = self.region[r].lock();
        self.freeze_locked(r, &mut st);
    }

    /// Freezes the active memstore of region `r` (whose lock is held) and
    /// queues its flush, still under the lock: a region's memstores must
    /// reach the scheduler in the order they were frozen, since they are
    /// flushed oldest first.
    pub(super) fn freeze_locked(&self, r: usize, st: &mut super::region::RegionState<D>) {
        if st.active.is_unused() {
            return;
        }
        let fresh = self.new_memstore(self.wal.written_lsn());
        let old = std::mem::replace(&mut st.active, fresh);
        old.freeze();
        st.frozen.push_back(old.clone());
        self.region[r].publish(st);
        self.counters.freezes.fetch_add(1, Ordering::Relaxed);
        self.sched.push_flush(r as u32, old);
    }
}
