//! Folding the active memstores' new keys into their B-trees while the
//! server idles, so a range read after a write-only stretch (a bulk load,
//! then reads) does not sort them first.
//!
//! A memstore no scan has read keeps its new keys out of its B-tree: the
//! tree's inserts would cost writes a tenth of their CPU, and a flush
//! sorts the keys aside anyway ([`crate::memstore::Memstore`]). The first
//! range read of such a memstore must fold them all in before it can
//! answer, holding the memstore's write lock: after a 1,000,000-member
//! sorted set was loaded, the first `ZRANGEBYSCORE` waited a tenth of a
//! second while 216,000 keys were sorted and put in the tree, and every
//! request behind it waited too. A shard's event loop that has had
//! nothing to do for a moment calls [`Engine::fold_ahead`] instead, a
//! bounded chunk at a time, and polls its sockets between chunks: time
//! no client was waiting for.

use std::sync::atomic::Ordering;

use super::Engine;
use crate::device::Device;

/// What a call of [`Engine::fold_ahead`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoldAhead {
    /// Keys it put into a B-tree.
    pub folded: usize,
    /// Whether a memstore still has enough keys outside its tree to fold
    /// ahead (or one was locked and could not be looked at).
    pub more: bool,
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Folds at most `most` keys of the first active memstore with at
    /// least a few thousand outside its B-tree
    /// ([`crate::memstore::Memstore::fold_ahead`]). Never waits for a
    /// lock.
    pub fn fold_ahead(&self, most: usize) -> FoldAhead {
        let mut out = FoldAhead::default();
        let counters = &self.inner.counters;
        for region in &self.inner.region {
            let view = region.glance();
            let Some(active) = view.mems.first() else {
                continue;
            };
            let (folded, more) = active.fold_ahead(most - out.folded);
            out.folded += folded;
            out.more |= more;
            if out.folded >= most {
                // The regions after this one are not looked at.
                out.more = true;
                break;
            }
        }
        counters
            .folded_ahead
            .fetch_add(out.folded as u64, Ordering::Relaxed);
        out
    }
}
