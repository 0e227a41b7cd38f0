//! The data devices as the engine reads them: a pool of queues per device
//! for readers, the extent allocator, and open block files.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::error::{EngineError, Result};
use crate::device::{wait, Device, Request};
use crate::layout::extents::Extents;
use crate::layout::manifest::FileRecord;
use crate::table::{BlockCache, BlockSource, Table, TableError};

/// The data devices, shared by readers and flush reactors.
pub struct Store<D: Device> {
    pub devices: Vec<D>,
    /// Queues readers borrow, one at a time each (a reader thread that
    /// finds none free opens another).
    pools: Vec<Mutex<Vec<D::Queue>>>,
    pub extents: Mutex<Extents>,
    /// Data blocks that point lookups read, by file id.
    pub cache: BlockCache,
    /// Block reads done by readers, per device.
    reads: Vec<AtomicU64>,
    read_bytes: Vec<AtomicU64>,
}

impl<D: Device<Queue: Send>> Store<D> {
    pub fn new(devices: Vec<D>, extents: Extents, cache: BlockCache) -> Store<D> {
        let n = devices.len();
        Store {
            cache,
            pools: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            reads: (0..n).map(|_| AtomicU64::new(0)).collect(),
            read_bytes: (0..n).map(|_| AtomicU64::new(0)).collect(),
            devices,
            extents: Mutex::new(extents),
        }
    }

    pub fn block_size(&self, dev: u32) -> u64 {
        u64::from(self.devices[dev as usize].info().block_size)
    }

    /// Reads `len` bytes at byte `offset` of device `dev` (any alignment:
    /// the covering blocks are read in one request).
    pub fn read(&self, dev: u32, offset: u64, len: usize) -> std::result::Result<Vec<u8>, String> {
        let device = &self.devices[dev as usize];
        let bs = u64::from(device.info().block_size);
        let first = offset / bs;
        let end = (offset + len as u64).div_ceil(bs);
        let span = ((end - first) * bs) as usize;
        let mut queue = match self.pools[dev as usize].lock().expect("pool").pop() {
            Some(q) => q,
            None => device.open_queue().map_err(|e| e.to_string())?,
        };
        let buf = device.alloc_buf(span);
        let done = wait::run(&mut queue, Request::read(0, first, vec![buf]));
        self.pools[dev as usize].lock().expect("pool").push(queue);
        let c = done.map_err(|r| r.error.to_string())?;
        c.result.map_err(|e| e.to_string())?;
        self.reads[dev as usize].fetch_add(1, Ordering::Relaxed);
        self.read_bytes[dev as usize].fetch_add(span as u64, Ordering::Relaxed);
        let bufs = c.bufs;
        let skip = (offset - first * bs) as usize;
        Ok(bufs[0][skip..skip + len].to_vec())
    }

    /// Reads done by readers on each device, and their bytes.
    pub fn read_counts(&self) -> Vec<(u64, u64)> {
        self.reads
            .iter()
            .zip(&self.read_bytes)
            .map(|(r, b)| (r.load(Ordering::Relaxed), b.load(Ordering::Relaxed)))
            .collect()
    }
}

/// An open block file. When a compaction has removed it from the manifest
/// (`obsolete`), its space goes back to the allocator as the last reader
/// lets go of it, never before.
pub struct TableHandle<D: Device<Queue: Send>> {
    pub file: FileRecord,
    pub table: Arc<Table>,
    store: Arc<Store<D>>,
    obsolete: AtomicBool,
}

impl<D: Device<Queue: Send>> TableHandle<D> {
    /// Opens the block file `file` (reads its index and bloom filter).
    pub fn open(store: Arc<Store<D>>, file: FileRecord) -> Result<TableHandle<D>> {
        let src = FileSource {
            store: store.clone(),
            file: file.id,
            device: file.device,
            offset: file.offset,
        };
        let table = Table::open(&src, file.len).map_err(|e| corrupt(&store, &file, e))?;
        Ok(TableHandle {
            file,
            table: Arc::new(table),
            store,
            obsolete: AtomicBool::new(false),
        })
    }

    /// Where this file's bytes are read from.
    pub fn source(&self) -> FileSource<D> {
        FileSource {
            store: self.store.clone(),
            file: self.file.id,
            device: self.file.device,
            offset: self.file.offset,
        }
    }

    /// The data device name and LBA of byte `offset` of this file.
    pub fn lba_of(&self, offset: u64) -> (String, u64) {
        let device = self.store.devices[self.file.device as usize]
            .info()
            .name
            .clone();
        (
            device,
            (self.file.offset + offset) / self.store.block_size(self.file.device),
        )
    }

    /// The engine error for a failure reading this file.
    pub fn error(&self, e: TableError) -> EngineError {
        corrupt(&self.store, &self.file, e)
    }

    /// Frees the file's space once nobody reads it any more.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::SeqCst);
        self.store
            .cache
            .forget(self.file.id, self.table.meta().data_blocks as usize);
    }
}

impl<D: Device<Queue: Send>> Drop for TableHandle<D> {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::SeqCst) {
            let mut ext = self.store.extents.lock().expect("extents");
            if let Err(e) = ext.free(self.file.device, self.file.offset, self.file.len) {
                tracing::error!("freeing block file {}: {e}", self.file.id);
            }
        }
    }
}

/// The error for `e` in block file `file`, naming its device and block.
fn corrupt<D: Device<Queue: Send>>(
    store: &Store<D>,
    file: &FileRecord,
    e: TableError,
) -> EngineError {
    let device = store.devices[file.device as usize].info().name.clone();
    let bs = store.block_size(file.device);
    let at = match &e {
        TableError::Corrupt { offset, .. } => *offset,
        _ => 0,
    };
    EngineError::Corrupt {
        file: file.id,
        device,
        lba: (file.offset + at) / bs,
        what: e.to_string(),
    }
}

/// A block file's bytes on its device.
pub struct FileSource<D: Device<Queue: Send>> {
    store: Arc<Store<D>>,
    /// The file's id, its name in the block cache.
    file: u64,
    device: u32,
    offset: u64,
}

impl<D: Device<Queue: Send>> Clone for FileSource<D> {
    fn clone(&self) -> Self {
        FileSource {
            store: self.store.clone(),
            file: self.file,
            device: self.device,
            offset: self.offset,
        }
    }
}

impl<D: Device<Queue: Send>> BlockSource for FileSource<D> {
    fn read_at(&self, offset: u64, len: usize) -> std::result::Result<Vec<u8>, TableError> {
        self.store
            .read(self.device, self.offset + offset, len)
            .map_err(TableError::Read)
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        let c = &self.store.cache;
        c.enabled().then_some((c, self.file))
    }

    fn place(&self) -> crate::table::Place {
        crate::table::Place::file(self.device, self.offset, self.file)
    }
}
