//! A region: its active memstore, the frozen ones waiting for a flush, and
//! its block files, with the view readers take without a lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::purge::Passed;
use super::store::TableHandle;
use crate::device::Device;
use crate::memstore::Memstore;

/// What a reader sees of a region: memstores and block files, newest first.
pub struct View<D: Device<Queue: Send>> {
    pub mems: Vec<Arc<Memstore>>,
    pub tables: Vec<Arc<TableHandle<D>>>,
    /// This view's number, never given to another view of any region of
    /// any engine in the process. Its block files are fixed, so what
    /// they hold for a key, read once, holds for every read of this view
    /// (see [`crate::engine::Engine::get_below`]).
    pub epoch: u64,
}

/// The last number given to a view.
static EPOCHS: AtomicU64 = AtomicU64::new(0);

/// A region's state, changed under its lock.
pub struct RegionState<D: Device<Queue: Send>> {
    pub active: Arc<Memstore>,
    /// Oldest first; only the oldest may be flushing.
    pub frozen: VecDeque<Arc<Memstore>>,
    /// Newest first.
    pub tables: Vec<Arc<TableHandle<D>>>,
}

pub struct Region<D: Device<Queue: Send>> {
    state: Mutex<RegionState<D>>,
    view: ArcSwap<View<D>>,
    /// What its scans passed, and whether a purge is asked for.
    pub passed: Passed,
}

impl<D: Device<Queue: Send>> Region<D> {
    pub fn new(active: Arc<Memstore>, tables: Vec<Arc<TableHandle<D>>>) -> Region<D> {
        let state = RegionState {
            active,
            frozen: VecDeque::new(),
            tables,
        };
        let view = ArcSwap::from_pointee(state.view());
        Region {
            state: Mutex::new(state),
            view,
            passed: Passed::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, RegionState<D>> {
        self.state.lock().expect("region lock")
    }

    /// Publishes the state's view to readers; call with the lock held,
    /// after every change of the memstore or file lists.
    pub fn publish(&self, state: &RegionState<D>) {
        self.view.store(Arc::new(state.view()));
    }

    /// What readers see now.
    pub fn view(&self) -> Arc<View<D>> {
        self.view.load_full()
    }

    /// What readers see now, for a moment: no count of the view's
    /// readers is touched (the shards of a region would share it).
    pub fn glance(&self) -> arc_swap::Guard<Arc<View<D>>> {
        self.view.load()
    }
}

impl<D: Device<Queue: Send>> RegionState<D> {
    fn view(&self) -> View<D> {
        let mut mems = Vec::with_capacity(1 + self.frozen.len());
        mems.push(self.active.clone());
        mems.extend(self.frozen.iter().rev().cloned());
        View {
            mems,
            tables: self.tables.clone(),
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }
}
