//! What the manifest describes: the block files, the regions, and how far
//! the WAL has been flushed into them; and the edits that change it.

use std::collections::{BTreeMap, BTreeSet};

use super::ManifestError;

/// One immutable sorted block file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// Unique, never reused (see [`ManifestState::next_file_id`]).
    pub id: u64,
    /// The region whose keys it holds.
    pub region: u32,
    /// Index into the data devices.
    pub device: u32,
    /// Byte offset of the file on its device.
    pub offset: u64,
    /// Length of the file in bytes.
    pub len: u64,
    /// A lower and an upper bound of the file's keys (`min_key <=
    /// max_key`): its smallest and largest key, cut to 64 bytes by the
    /// engine (the file's meta block holds them whole).
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
    /// Highest LSN of any record in the file.
    pub max_lsn: u64,
    /// Entries in the file.
    pub entries: u64,
    /// Its other copies, as (data device, byte offset), each as long and
    /// on a device of its own (`flush.copies`); empty for one copy.
    pub copies: Vec<(u32, u64)>,
}

impl FileRecord {
    /// Every copy, as (data device, byte offset): this one first.
    pub fn places(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        std::iter::once((self.device, self.offset)).chain(self.copies.iter().copied())
    }
}

/// The whole manifest: what a checkpoint holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ManifestState {
    /// Region boundaries, strictly increasing: region `i` holds the keys in
    /// `[split_keys[i-1], split_keys[i])`; there are `split_keys.len() + 1`
    /// regions.
    pub split_keys: Vec<Vec<u8>>,
    /// The live block files by id.
    pub files: BTreeMap<u64, FileRecord>,
    /// Per region (exactly one entry each): every record of the region at
    /// or below this LSN is in a file.
    pub flushed_lsn: Vec<u64>,
    /// Where WAL replay starts.
    pub replay_from: u64,
    /// Greater than every file id ever added.
    pub next_file_id: u64,
    /// WAL devices (by their place in the stripe) that may lack batches of
    /// the log: lost while the appliance ran, missing at a start, or
    /// replaced by a blank one. A start may recover the log without a WAL
    /// device only when none of the devices it recovers from is here; the
    /// marks go when a start with every WAL device has flushed the log.
    pub wal_stale: BTreeSet<u32>,
}

/// A change to the state, applied atomically.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Edit {
    /// Files to add; none may exist already.
    pub add: Vec<FileRecord>,
    /// Ids of files to remove; each must exist (and not be in `add`).
    pub remove: Vec<u64>,
    /// `(region, lsn)`: `flushed_lsn[region] = max(flushed_lsn[region], lsn)`.
    pub flushed: Vec<(u32, u64)>,
    /// `replay_from = max(replay_from, this)`.
    pub replay_from: Option<u64>,
    /// WAL devices whose marks (`wal_stale`) go, before `wal_lost` is
    /// applied: they hold every batch from the replay point again.
    pub wal_back: Vec<u32>,
    /// WAL devices to mark as lacking batches (`wal_stale`).
    pub wal_lost: Vec<u32>,
}

impl ManifestState {
    /// A state with no files and `split_keys.len() + 1` regions, each
    /// flushed to LSN 0. (`ManifestState::default()` has no `flushed_lsn`
    /// entry for its one region, so it is not a valid state.)
    pub fn new(split_keys: Vec<Vec<u8>>) -> ManifestState {
        let regions = split_keys.len() + 1;
        ManifestState {
            split_keys,
            flushed_lsn: vec![0; regions],
            ..ManifestState::default()
        }
    }

    /// The number of regions.
    pub fn regions(&self) -> usize {
        self.split_keys.len() + 1
    }

    /// The region that holds `key`.
    pub fn region_of(&self, key: &[u8]) -> u32 {
        self.split_keys.partition_point(|s| s.as_slice() <= key) as u32
    }

    /// Checks that the state is self-consistent: split keys strictly
    /// increasing, one flushed LSN per region, and every file valid for
    /// the regions, filed under its id, with an id below `next_file_id`.
    pub fn validate(&self) -> Result<(), String> {
        if self.regions() > u32::MAX as usize {
            return Err(format!("{} regions", self.regions()));
        }
        if let Some(i) =
            (1..self.split_keys.len()).find(|&i| self.split_keys[i - 1] >= self.split_keys[i])
        {
            return Err(format!("split key {i} is not above split key {}", i - 1));
        }
        if self.flushed_lsn.len() != self.regions() {
            return Err(format!(
                "{} flushed LSNs for {} regions",
                self.flushed_lsn.len(),
                self.regions()
            ));
        }
        for (&id, file) in &self.files {
            if id != file.id {
                return Err(format!("file {} is filed under id {id}", file.id));
            }
            self.check_file(file)?;
            if id >= self.next_file_id {
                return Err(format!(
                    "file {id} is not below the next file id {}",
                    self.next_file_id
                ));
            }
        }
        Ok(())
    }

    fn check_file(&self, f: &FileRecord) -> Result<(), String> {
        if f.id == u64::MAX {
            return Err(format!("file id {} is reserved", f.id));
        }
        if f.region as usize >= self.regions() {
            return Err(format!(
                "file {} is in region {} of {}",
                f.id,
                f.region,
                self.regions()
            ));
        }
        if f.min_key > f.max_key {
            return Err(format!("file {}: min key above max key", f.id));
        }
        let mut devices = BTreeSet::new();
        if let Some((d, _)) = f.places().find(|&(d, _)| !devices.insert(d)) {
            return Err(format!("file {}: two copies on data device {d}", f.id));
        }
        Ok(())
    }

    /// Checks that `e` applies to this state, changing nothing.
    pub fn check(&self, e: &Edit) -> Result<(), ManifestError> {
        let bad = |what: String| Err(ManifestError::BadEdit(what));
        let mut added = BTreeSet::new();
        for f in &e.add {
            self.check_file(f).or_else(bad)?;
            if self.files.contains_key(&f.id) {
                return bad(format!("file {} exists already", f.id));
            }
            if !added.insert(f.id) {
                return bad(format!("file {} is added twice", f.id));
            }
        }
        let mut removed = BTreeSet::new();
        for &id in &e.remove {
            if !self.files.contains_key(&id) {
                return bad(format!("file {id} does not exist"));
            }
            if !removed.insert(id) {
                return bad(format!("file {id} is removed twice"));
            }
        }
        for &(region, _) in &e.flushed {
            if region as usize >= self.regions() {
                return bad(format!(
                    "flushed LSN for region {region} of {}",
                    self.regions()
                ));
            }
        }
        Ok(())
    }

    /// Applies `e`, or refuses it with [`ManifestError::BadEdit`] and
    /// changes nothing. Adding a file sets `next_file_id` to at least its
    /// id + 1.
    pub fn apply(&mut self, e: &Edit) -> Result<(), ManifestError> {
        self.check(e)?;
        for id in &e.remove {
            self.files.remove(id);
        }
        for f in &e.add {
            self.next_file_id = self.next_file_id.max(f.id + 1);
            self.files.insert(f.id, f.clone());
        }
        for &(region, lsn) in &e.flushed {
            let at = &mut self.flushed_lsn[region as usize];
            *at = (*at).max(lsn);
        }
        if let Some(r) = e.replay_from {
            self.replay_from = self.replay_from.max(r);
        }
        for d in &e.wal_back {
            self.wal_stale.remove(d);
        }
        self.wal_stale.extend(&e.wal_lost);
        Ok(())
    }

    /// How many WAL devices are marked once `e` is applied.
    pub fn wal_stale_after(&self, e: &Edit) -> usize {
        let mut marks = self.wal_stale.clone();
        for d in &e.wal_back {
            marks.remove(d);
        }
        marks.extend(&e.wal_lost);
        marks.len()
    }
}
