//! A compaction filter: what the layer above the engine says may go when
//! block files are merged, beyond the shadowed versions and tombstones
//! the engine drops itself (the server drops the elements of collections
//! that were deleted or replaced: its keys' versions).
//!
//! A compaction merges every block file of a region, and block files hold
//! only writes at or below the durable point, so a filter that judges an
//! entry by entries newer than it in the same merge judges by what no
//! crash can take back.

use std::sync::Arc;

use crate::table::Entry;

pub trait CompactionFilter: Send {
    /// Called for each entry of a merge in key order, the newest version
    /// of each key only (tombstones too, which go anyway): false drops it.
    fn keep(&mut self, entry: &Entry) -> bool;
}

/// Makes a filter for each compaction.
pub type FilterFactory = Arc<dyn Fn() -> Box<dyn CompactionFilter> + Send + Sync>;
