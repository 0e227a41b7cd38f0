//! Compaction: a region's block files merged into one on a flush
//! reactor, when it has more than `compact-at` or a purge asks (see
//! `purge`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{EngineError, Result};
use super::file_write::table_error;
use super::merge::{Merge, Source};
use super::store::TableHandle;
use super::Inner;
use crate::device::Device;
use crate::layout::manifest::Edit;
use crate::table::EntryKind;

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// Merges every block file of region `r` into one, dropping versions
    /// that newer ones shadow and tombstones (nothing older is left for
    /// them to hide).
    pub(super) fn compact(&self, queues: &mut [D::Queue], r: u32) -> Result<()> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let region = &self.region[r as usize];
        let inputs: Vec<Arc<TableHandle<D>>> = region.lock().tables.clone();
        // One file is rewritten too when it has fewer copies than it
        // should (written while a data device was lost) and the devices
        // for them are there.
        let sound = self.store.lost().iter().filter(|&&l| !l).count();
        let short = inputs
            .iter()
            .any(|t| t.file.places().count() < self.opts.file_copies.min(sound));
        // A purge (see `purge`) rewrites even one file, for its deletes.
        let purge = region.passed.take();
        if inputs.is_empty() || (inputs.len() < 2 && !short && !purge) {
            return Ok(());
        }
        // The merged file holds at most what its inputs hold; the extra
        // covers prefix compression that merging can break up. A file that
        // outgrows it anyway, or a device without room, leaves the files
        // as they are: a compaction that does not happen loses nothing.
        let input_bytes: u64 = inputs.iter().map(|t| t.file.len).sum();
        let bound = input_bytes + input_bytes / 8 + (64 << 10);
        let places = match self.allocate(bound) {
            Ok(at) => at,
            Err(e @ EngineError::NoSpace { .. }) => {
                tracing::warn!("compaction of region {r} skipped: {e}");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let sources = inputs
            .iter()
            .map(|t| Source::Table(t.table.iter_owned(t.source(), Vec::new(), None), t.clone()))
            .collect();
        let mut filter = self
            .filter
            .lock()
            .expect("filter lock")
            .clone()
            .map(|f| f());
        let mut filtered = 0u64;
        let id = self.next_file.fetch_add(1, Ordering::SeqCst);
        let (dev, offset) = places[0];
        let written = self.write_file(queues, id, &places, bound, |builder, w| {
            let mut merge = Merge::new(sources)?;
            while let Some(e) = merge.next()? {
                // Inside a compaction, its file half written.
                fail::fail_point!("compaction-half-way");
                let keep = filter.as_mut().is_none_or(|f| f.keep(&e));
                if e.kind == EntryKind::Delete {
                    continue;
                }
                if !keep {
                    filtered += 1;
                    continue;
                }
                builder
                    .add(&e.key, e.lsn, e.kind, &e.value)
                    .map_err(|e| table_error(dev, offset, e))?;
                w.drain(builder)?;
            }
            Ok(())
        });
        let meta = match written {
            Ok(Some(meta)) => meta,
            Ok(None) => {
                tracing::warn!("compaction of region {r}: the merged file outgrew its {bound}-byte extent; left as is");
                self.unallocate(&places, bound);
                return Ok(());
            }
            Err(e) => {
                self.unallocate(&places, bound);
                if self.lost_copy(&places) {
                    // A device was lost writing it (`allocate` gives none
                    // that was lost before): the files stay as they are,
                    // and a later compaction writes it elsewhere.
                    self.sched.push_compaction(r);
                    return Ok(());
                }
                return Err(e);
            }
        };
        let max_lsn = inputs.iter().map(|t| t.file.max_lsn).max().unwrap_or(0);
        let ids: Vec<u64> = inputs.iter().map(|t| t.file.id).collect();
        let (add, handle) = if meta.entries == 0 {
            self.unallocate(&places, bound);
            (Vec::new(), None)
        } else {
            let file = self.file_record(id, r, &places, &meta, max_lsn);
            self.shrink(&places, bound, meta.file_bytes);
            let handle = match TableHandle::open(self.store.clone(), file.clone()) {
                Ok(h) => Arc::new(h),
                Err(e) => {
                    self.free_unrecorded(&file);
                    return Err(e);
                }
            };
            (vec![file], Some(handle))
        };
        let edit = Edit {
            add,
            remove: ids.clone(),
            ..Edit::default()
        };
        self.apply(queues, &edit)?;
        {
            let mut st = region.lock();
            st.tables.retain(|t| !ids.contains(&t.file.id));
            // The inputs were the oldest files; newer ones stay in front.
            st.tables.extend(handle);
            region.publish(&st);
        }
        for t in &inputs {
            t.mark_obsolete();
        }
        let c = &self.counters.flush;
        c.compactions.fetch_add(1, Ordering::Relaxed);
        c.compaction_filtered.fetch_add(filtered, Ordering::Relaxed);
        c.compaction_bytes
            .fetch_add(meta.file_bytes, Ordering::Relaxed);
        Ok(())
    }
}
