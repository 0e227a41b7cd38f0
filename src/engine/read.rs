//! Reads: `get` stops at the newest memstore or block file that has the
//! key; `scan` merges them all in key order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{EngineError, Result};
use super::Engine;
use crate::device::Device;
use crate::table::{key_hash, Entry, EntryKind};

use super::merge::{MemSource, Merge, Source};
use super::region::View;

/// Live pairs a scan found, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Where [`Engine::get_memstores`] found a key.
pub enum PointRead<D: Device<Queue: Send>> {
    /// In a memstore: its value, `None` for a delete.
    Memstore(Option<Vec<u8>>),
    /// In none of them: the block files decide ([`Engine::get_below`]).
    Below(Below<D>),
}

/// A view of a region whose memstores do not have a key; held for a
/// moment (a read).
pub struct Below<D: Device<Queue: Send>> {
    view: arc_swap::Guard<Arc<View<D>>>,
    region: usize,
}

/// What [`Engine::scan_below`] found: the entries of a range in key
/// order (`None` for a delete), and the key before which that list is
/// whole.
pub struct BelowRange {
    pub entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub upto: Vec<u8>,
}

impl<D: Device<Queue: Send>> Below<D> {
    /// The view's number: two reads below views of one number read the
    /// same block files.
    pub fn epoch(&self) -> u64 {
        self.view.epoch
    }
}

/// Most entries a scan makes room for before it reads: a limit of
/// `usize::MAX` (read to the end) must not reserve it.
const SCAN_RESERVE: usize = 1024;

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// The value of `key`, or `None` if it was never written or is deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.get_memstores(key) {
            PointRead::Memstore(value) => Ok(value),
            PointRead::Below(below) => self.get_below(&below, key),
        }
    }

    /// The first half of [`Engine::get`]: what the memstores of `key`'s
    /// region hold of it, or the view to read its block files in.
    pub fn get_memstores(&self, key: &[u8]) -> PointRead<D> {
        let inner = &*self.inner;
        inner.counters.gets.fetch_add(1, Ordering::Relaxed);
        let region = inner.regions.of(key);
        let view = inner.region[region].glance();
        for ms in &view.mems {
            if let Some((kind, value)) = ms.get_value(key) {
                return PointRead::Memstore((kind == EntryKind::Put).then_some(value));
            }
        }
        PointRead::Below(Below { view, region })
    }

    /// The second half of [`Engine::get`]: what the block files of
    /// `below` hold of `key`, whose memstores in that view had none of
    /// it. The block files of a view never change, so the answer holds
    /// for every read that [`Engine::get_memstores`] sends below a view
    /// of the same [`Below::epoch`]: a cache of it needs no other
    /// invalidation. (RocksDB's row cache sits at the same level, keyed
    /// by block file.)
    pub fn get_below(&self, below: &Below<D>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let h = key_hash(key);
        for t in &below.view.tables {
            if !t.table.may_contain_hashed(key, h) {
                continue;
            }
            let found = t
                .table
                .get_filtered(&t.source(), key)
                .map_err(|e| t.error(e))?;
            if let Some(e) = found {
                return Ok(live(e));
            }
            self.inner
                .counters
                .bloom_false
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// What the block files of `below` hold from `from` (inclusive) to
    /// `to` (exclusive), within `below`'s region: at most `limit` entries,
    /// and no more once their values pass `max_bytes`. Like
    /// [`Engine::get_below`], the answer holds for every read below a
    /// view of the same epoch: a reader that will read a run of keys
    /// (pops from a list in the block files) reads them at once, one
    /// seek per block file instead of a bloom probe per file and a block
    /// search per key.
    pub fn scan_below(
        &self,
        below: &Below<D>,
        from: &[u8],
        to: &[u8],
        limit: usize,
        max_bytes: usize,
    ) -> Result<BelowRange> {
        let regions = &self.inner.regions;
        let from = from.max(regions.start(below.region));
        let to = regions.end(below.region).map_or(to, |e| e.min(to));
        let mut sources: Vec<Source<D>> = Vec::new();
        if from < to {
            for t in &below.view.tables {
                let meta = t.table.meta();
                if meta.entries == 0
                    || meta.max_key.as_slice() < from
                    || meta.min_key.as_slice() >= to
                {
                    continue;
                }
                let it = t
                    .table
                    .iter_owned(t.source(), from.to_vec(), Some(to.to_vec()));
                sources.push(Source::Table(it, t.clone()));
            }
        }
        let mut merge = Merge::new(sources)?;
        let mut entries = Vec::new();
        let mut bytes = 0;
        while entries.len() < limit && bytes < max_bytes {
            let Some(e) = merge.next()? else {
                return Ok(BelowRange {
                    entries,
                    upto: to.max(from).to_vec(),
                });
            };
            bytes += e.value.len();
            let value = (e.kind == EntryKind::Put).then_some(e.value);
            entries.push((e.key, value));
        }
        // Cut short: whole up to the last key, inclusive.
        let mut upto = entries.last().map_or(from.to_vec(), |(k, _)| k.clone());
        upto.push(0);
        Ok(BelowRange { entries, upto })
    }

    /// Up to `limit` live pairs with `start <= key < end` (no end: to the
    /// last key), in key order.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self.scan_counting(start, end, limit)?.0)
    }

    /// [`Engine::scan`], and how many deleted keys it passed before its
    /// first live one (all it passed, when it found none): what a caller
    /// that remembers empty ranges weighs (a queue popped from its front
    /// leaves its deletes there until compaction).
    pub fn scan_counting(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Pairs, usize)> {
        if end.is_some_and(|e| e <= start) {
            return Err(EngineError::BadRange(format!(
                "the end of a scan must be after its start ({:?} is not after {:?})",
                String::from_utf8_lossy(end.unwrap_or_default()),
                String::from_utf8_lossy(start)
            )));
        }
        let inner = &*self.inner;
        inner.counters.scans.fetch_add(1, Ordering::Relaxed);
        // Most scans return what they ask for (a range, a page of SCAN):
        // made once, not grown by doubling.
        let mut out = Vec::with_capacity(limit.min(SCAN_RESERVE));
        let mut deleted = 0;
        let mut r = inner.regions.of(start);
        while out.len() < limit && r < inner.regions.count() {
            let from = if r == inner.regions.of(start) {
                start
            } else {
                inner.regions.start(r)
            };
            let to = match (inner.regions.end(r), end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.scan_region(r, from, to, limit - out.len(), &mut out, &mut deleted)?;
            if inner
                .regions
                .end(r)
                .is_none_or(|e| end.is_some_and(|end| end <= e))
            {
                break;
            }
            r += 1;
        }
        Ok((out, deleted))
    }

    fn scan_region(
        &self,
        r: usize,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
        deleted: &mut usize,
    ) -> Result<()> {
        let view = self.inner.region[r].view();
        // Sources newest first: on equal keys the first one wins.
        let mut tables: Vec<Source<D>> = Vec::new();
        for t in &view.tables {
            if t.table.meta().entries == 0
                || t.table.meta().max_key.as_slice() < from
                || to.is_some_and(|to| t.table.meta().min_key.as_slice() >= to)
            {
                continue;
            }
            let it = t
                .table
                .iter_owned(t.source(), from.to_vec(), to.map(<[u8]>::to_vec));
            // The handle rides along so the file's space is not reused
            // while the scan reads it.
            tables.push(Source::Table(it, t.clone()));
        }
        // A memstore's chunks (see `MemSource`): of a range spread over
        // five sources (a large sorted set's score order), it holds about
        // a fifth, or nothing the scan reaches.
        let count = view.mems.len() + tables.len();
        let share = limit.div_ceil(count.max(1));
        let first = if count > 1 { 1 } else { share };
        let mut sources: Vec<Source<D>> = Vec::with_capacity(count);
        for ms in &view.mems {
            sources.push(Source::Mem(MemSource::new(
                ms.clone(),
                from,
                to,
                (first, share),
            )));
        }
        sources.append(&mut tables);
        let mut merge = Merge::new(sources)?;
        let added = out.len();
        let mut passed = 0;
        while out.len() - added < limit {
            let Some(e) = merge.next()? else { break };
            match e.kind {
                EntryKind::Put => out.push((e.key, e.value)),
                EntryKind::Delete => {
                    passed += 1;
                    if out.is_empty() {
                        *deleted += 1;
                    }
                }
            }
        }
        let found = (out.len() - added) as u64;
        if self.inner.region[r].passed.record(passed, found) {
            self.inner.purge(r);
        }
        Ok(())
    }
}

/// The value a found entry stands for.
fn live(e: Entry) -> Option<Vec<u8>> {
    match e.kind {
        EntryKind::Put => Some(e.value),
        EntryKind::Delete => None,
    }
}
