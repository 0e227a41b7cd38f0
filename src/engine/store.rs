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
    /// Data blocks read from a file's other copy because the first one
    /// read was bad.
    pub copy_reads: AtomicU64,
    /// Devices a block file write failed on while its other copies were
    /// written: no file goes there any more, and reads try them last.
    lost: Vec<AtomicBool>,
}

impl<D: Device<Queue: Send>> Store<D> {
    pub fn new(devices: Vec<D>, extents: Extents, cache: BlockCache) -> Store<D> {
        let n = devices.len();
        Store {
            cache,
            pools: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            reads: (0..n).map(|_| AtomicU64::new(0)).collect(),
            read_bytes: (0..n).map(|_| AtomicU64::new(0)).collect(),
            copy_reads: AtomicU64::new(0),
            lost: (0..n).map(|_| AtomicBool::new(false)).collect(),
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

    /// Writes `bytes` (whole device blocks) at byte `offset` of device
    /// `dev` and flushes the device: a repair of a block file's copy.
    pub fn write(&self, dev: u32, offset: u64, bytes: &[u8]) -> std::result::Result<(), String> {
        let device = &self.devices[dev as usize];
        let bs = u64::from(device.info().block_size);
        if offset % bs != 0 || bytes.len() as u64 % bs != 0 {
            return Err(format!(
                "a write of {} bytes at byte {offset} is not in whole {bs}-byte blocks",
                bytes.len()
            ));
        }
        let mut queue = match self.pools[dev as usize].lock().expect("pool").pop() {
            Some(q) => q,
            None => device.open_queue().map_err(|e| e.to_string())?,
        };
        let mut buf = device.alloc_buf(bytes.len());
        buf.copy_from_slice(bytes);
        let wrote = wait::run(&mut queue, Request::write(0, offset / bs, vec![buf]))
            .map_err(|r| r.error.to_string())
            .and_then(|c| c.result.map_err(|e| e.to_string()))
            .and_then(|_| {
                wait::run(&mut queue, Request::flush(u64::MAX)).map_err(|r| r.error.to_string())
            })
            .and_then(|c| c.result.map_err(|e| e.to_string()));
        self.pools[dev as usize].lock().expect("pool").push(queue);
        wrote
    }

    /// Leaves device `dev` out of new files from now on, saying so.
    pub fn lose(&self, dev: u32, why: &str) {
        if !self.lost[dev as usize].swap(true, Ordering::SeqCst) {
            tracing::error!(
                "data device {}: {why}; DEGRADED: new block files go to the other data devices, reads of the files it holds come from their other copies",
                self.devices[dev as usize].info().name
            );
        }
    }

    /// Whether device `dev` was lost (see [`Store::lose`]).
    pub fn is_lost(&self, dev: u32) -> bool {
        self.lost[dev as usize].load(Ordering::SeqCst)
    }

    /// Per data device, whether it was lost.
    pub fn lost(&self) -> Vec<bool> {
        self.lost.iter().map(|l| l.load(Ordering::SeqCst)).collect()
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
    /// Opens the block file `file` (reads its index and bloom filter),
    /// from the first of its copies that reads back whole.
    pub fn open(store: Arc<Store<D>>, file: FileRecord) -> Result<TableHandle<D>> {
        let mut first = None;
        for (i, place) in sound_first(&store, &read_order(&file))
            .into_iter()
            .enumerate()
        {
            let src = FileSource {
                store: store.clone(),
                file: file.id,
                places: vec![place],
            };
            match Table::open(&src, file.len) {
                Ok(table) => {
                    if let Some(e) = first {
                        tracing::warn!(
                            "block file {}: opened from its copy on {} ({e})",
                            file.id,
                            store.devices[place.0 as usize].info().name
                        );
                    }
                    return Ok(TableHandle {
                        file,
                        table: Arc::new(table),
                        store,
                        obsolete: AtomicBool::new(false),
                    });
                }
                Err(e) if i == 0 => first = Some(corrupt(&store, &file, place, e)),
                Err(_) => {}
            }
        }
        Err(first.expect("a file has a copy"))
    }

    /// Where this file's bytes are read from: every copy, the one the
    /// file's id picks first (reads of files with two copies spread over
    /// both devices).
    pub fn source(&self) -> FileSource<D> {
        FileSource {
            store: self.store.clone(),
            file: self.file.id,
            places: read_order(&self.file),
        }
    }

    /// The bytes of this file's copy at `place` alone.
    pub fn copy_source(&self, place: (u32, u64)) -> FileSource<D> {
        FileSource {
            store: self.store.clone(),
            file: self.file.id,
            places: vec![place],
        }
    }

    /// The data device name and LBA of byte `offset` of this file's copy
    /// at `place`.
    pub fn lba_in(&self, place: (u32, u64), offset: u64) -> (String, u64) {
        let (dev, start) = place;
        let device = self.store.devices[dev as usize].info().name.clone();
        (device, (start + offset) / self.store.block_size(dev))
    }

    /// The engine error for a failure reading this file (through
    /// [`TableHandle::source`]: its first copy read is named).
    pub fn error(&self, e: TableError) -> EngineError {
        corrupt(
            &self.store,
            &self.file,
            sound_first(&self.store, &read_order(&self.file))[0],
            e,
        )
    }

    /// The store the file lies in.
    pub fn store(&self) -> &Store<D> {
        &self.store
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
            for (dev, offset) in self.file.places() {
                if let Err(e) = ext.free(dev, offset, self.file.len) {
                    tracing::error!("freeing block file {}: {e}", self.file.id);
                }
            }
        }
    }
}

/// The copies of `file` in the order they are read: the file's id picks
/// the first, so that reads of files with two copies spread over both.
fn read_order(file: &FileRecord) -> Vec<(u32, u64)> {
    let mut places: Vec<(u32, u64)> = file.places().collect();
    let n = places.len();
    places.rotate_left((file.id % n as u64) as usize);
    places
}

/// `places` with the copies on lost devices last.
fn sound_first<D: Device<Queue: Send>>(store: &Store<D>, places: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut order = places.to_vec();
    order.sort_by_key(|&(d, _)| store.is_lost(d));
    order
}

/// The error for `e` in the copy at `place` of block file `file`, naming
/// its device and block.
fn corrupt<D: Device<Queue: Send>>(
    store: &Store<D>,
    file: &FileRecord,
    place: (u32, u64),
    e: TableError,
) -> EngineError {
    let (dev, start) = place;
    let device = store.devices[dev as usize].info().name.clone();
    let bs = store.block_size(dev);
    let at = match &e {
        TableError::Corrupt { offset, .. } => *offset,
        _ => 0,
    };
    EngineError::Corrupt {
        file: file.id,
        device,
        lba: (start + at) / bs,
        what: e.to_string(),
    }
}

/// A block file's bytes on its devices.
pub struct FileSource<D: Device<Queue: Send>> {
    store: Arc<Store<D>>,
    /// The file's id, its name in the block cache.
    file: u64,
    /// Its copies read, as (data device, byte offset), the first first:
    /// bytes are read from it, and blocks returned sealed for its place.
    places: Vec<(u32, u64)>,
}

impl<D: Device<Queue: Send>> Clone for FileSource<D> {
    fn clone(&self) -> Self {
        FileSource {
            store: self.store.clone(),
            file: self.file,
            places: self.places.clone(),
        }
    }
}

impl<D: Device<Queue: Send>> FileSource<D> {
    fn place_of(&self, (dev, start): (u32, u64)) -> crate::table::Place {
        crate::table::Place::file(dev, start, self.file)
    }

    fn read_copy(
        &self,
        (dev, start): (u32, u64),
        offset: u64,
        len: usize,
    ) -> std::result::Result<Vec<u8>, TableError> {
        self.store
            .read(dev, start + offset, len)
            .map_err(TableError::Read)
    }
}

impl<D: Device<Queue: Send>> BlockSource for FileSource<D> {
    /// Reads the first copy.
    fn read_at(&self, offset: u64, len: usize) -> std::result::Result<Vec<u8>, TableError> {
        self.read_copy(self.places[0], offset, len)
    }

    /// With more than one copy: the first copy's block if it reads and
    /// checks, else the first other copy's that does, its checksum
    /// resealed for the first copy's place. Files with copies are all of
    /// format 3 (checksums bound to place and id).
    fn read_block(&self, offset: u64, len: usize) -> std::result::Result<Vec<u8>, TableError> {
        if self.places.len() == 1 {
            return self.read_at(offset, len);
        }
        let mut first = None;
        for (i, place) in sound_first(&self.store, &self.places)
            .into_iter()
            .enumerate()
        {
            let checked = self.read_copy(place, offset, len).and_then(|b| {
                crate::table::check_crc(&b, "data block", offset, self.place_of(place))?;
                Ok(b)
            });
            match checked {
                Ok(mut b) => {
                    if place != self.places[0] {
                        self.place_of(self.places[0]).reseal(&mut b, offset);
                    }
                    if i > 0 {
                        self.store.copy_reads.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(b);
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.expect("a file has a copy"))
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        let c = &self.store.cache;
        c.enabled().then_some((c, self.file))
    }

    fn place(&self) -> crate::table::Place {
        self.place_of(self.places[0])
    }
}
