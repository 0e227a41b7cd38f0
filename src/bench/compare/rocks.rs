//! RocksDB as a peer of `bench compare` (cargo feature `peers`), through
//! the `rocksdb` crate: a fresh database per run in the peers' folder, on
//! the disk of Stria's log, with a 64 MiB write buffer; durable writes are
//! `WriteOptions::set_sync(true)`, the `write` level (hflush) is
//! `set_sync(false)`. The keys, values and threads are Stria's of the same
//! case. Built without compression: Stria's block files are not compressed
//! either, and it keeps RocksDB's CPU per write at its lowest.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rocksdb::{Options, WriteBatch, WriteOptions, DB};

use super::sample::{Percentiles, Sample};
use super::workloads::{self, IngestCase, WalPeCase};
use crate::bench::ingest;
use crate::bench::latency::Latency;
use crate::bench::procstat;
use crate::bench::walpe;
use crate::config::Durability;

/// RocksDB's version, for the report.
pub fn version() -> String {
    "rocksdb crate 0.24 (RocksDB 10.4), no compression, 64 MiB write buffer".into()
}

/// A fresh database in `dir`, destroyed when dropped.
struct Fresh {
    db: Option<DB>,
    path: std::path::PathBuf,
}

impl Fresh {
    fn open(dir: &Path) -> Result<Fresh, String> {
        let path = dir.join(format!("stria-compare-rocksdb-{}", std::process::id()));
        let _ = DB::destroy(&Options::default(), &path);
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_write_buffer_size(64 << 20);
        let db = DB::open(&o, &path).map_err(|e| format!("RocksDB at {}: {e}", path.display()))?;
        Ok(Fresh { db: Some(db), path })
    }

    fn db(&self) -> &DB {
        self.db.as_ref().expect("open until dropped")
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        drop(self.db.take());
        let _ = DB::destroy(&Options::default(), &self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn write_options(durability: Durability) -> WriteOptions {
    let mut w = WriteOptions::default();
    match durability {
        Durability::Sync => w.set_sync(true),
        Durability::Write => w.set_sync(false),
        // Written to RocksDB's memtable only: no log record at all.
        Durability::Async | Durability::None => w.disable_wal(true),
    }
    w
}

/// wal-pe: `case.threads` threads each putting one key at a time.
pub fn wal_pe(dir: &Path, case: &WalPeCase, duration: Duration) -> Result<Sample, String> {
    let fresh = Fresh::open(dir)?;
    let db = fresh.db();
    let w = write_options(case.durability);
    let value = vec![0x5au8; case.value_size];
    let key_len = walpe::key_len(super::stria::WAL_PE_KEY);
    let latency = Mutex::new(Latency::new());
    let ops = AtomicU64::new(0);
    let failure = Mutex::new(None);
    let before = procstat::own();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..case.threads {
            let (w, value, latency, ops, failure) = (&w, &value, &latency, &ops, &failure);
            s.spawn(move || {
                let mut mine = Latency::new();
                let mut key = Vec::with_capacity(key_len);
                let mut i = 0;
                while start.elapsed() < duration {
                    key.clear();
                    walpe::push_key(&mut key, t, i, key_len);
                    let at = Instant::now();
                    if let Err(e) = db.put_opt(&key, value, w) {
                        failure.lock().expect("lock").get_or_insert(e.to_string());
                        break;
                    }
                    mine.record(at.elapsed());
                    i += 1;
                }
                ops.fetch_add(i, Ordering::Relaxed);
                latency.lock().expect("lock").add(&mine);
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let usage = procstat::own().since(&before);
    if let Some(e) = failure.into_inner().expect("lock") {
        return Err(format!("RocksDB put: {e}"));
    }
    let ops = ops.into_inner();
    Ok(Sample::new(
        ops,
        ops * (case.value_size + key_len) as u64,
        secs,
        usage,
        Percentiles::of(&latency.into_inner().expect("lock")),
    ))
}

/// ingest: the same clients, records and batches as Stria's, each batch
/// one `WriteBatch` (RocksDB's writes block, so a client has one batch in
/// flight; RocksDB groups the clients' concurrent batches in one log write).
pub fn ingest(dir: &Path, case: &IngestCase) -> Result<Sample, String> {
    let fresh = Fresh::open(dir)?;
    let db = fresh.db();
    let w = write_options(case.durability);
    let cap = ingest::batch_size(ingest::DEFAULT_WINDOW) as usize;
    let latency = Mutex::new(Latency::new());
    let bytes = AtomicU64::new(0);
    let failure = Mutex::new(None);
    let before = procstat::own();
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..case.clients as u64 {
            let (w, latency, bytes, failure) = (&w, &latency, &bytes, &failure);
            s.spawn(move || {
                let mut mine = Latency::new();
                let (mut key, mut value) = (Vec::new(), Vec::new());
                let mut i = 0;
                while i < case.records {
                    let mut batch = WriteBatch::default();
                    let mut size = 0;
                    while i < case.records && (batch.is_empty() || size < cap) {
                        key.clear();
                        value.clear();
                        ingest::push_key(&mut key, c, i);
                        ingest::push_value(&mut value, c, i, case.value_size);
                        batch.put(&key, &value);
                        size += key.len() + value.len();
                        i += 1;
                    }
                    let at = Instant::now();
                    if let Err(e) = db.write_opt(batch, w) {
                        failure.lock().expect("lock").get_or_insert(e.to_string());
                        return;
                    }
                    mine.record(at.elapsed());
                    bytes.fetch_add(size as u64, Ordering::Relaxed);
                }
                latency.lock().expect("lock").add(&mine);
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let usage = procstat::own().since(&before);
    if let Some(e) = failure.into_inner().expect("lock") {
        return Err(format!("RocksDB write: {e}"));
    }
    Ok(Sample::new(
        case.clients as u64 * case.records,
        bytes.into_inner(),
        secs,
        usage,
        Percentiles::of(&latency.into_inner().expect("lock")),
    ))
}

/// latency: one client, one put at a time.
pub fn latency(
    dir: &Path,
    value_size: usize,
    durability: Durability,
    duration: Duration,
) -> Result<Sample, String> {
    let fresh = Fresh::open(dir)?;
    let db = fresh.db();
    let w = write_options(durability);
    workloads::timed_puts(value_size, duration, |key, value| {
        db.put_opt(key, value, &w)
            .map_err(|e| format!("RocksDB put: {e}"))
    })
}
