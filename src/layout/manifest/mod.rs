//! The manifest: which block files exist, and how far the WAL is flushed.
//!
//! A log of [`Edit`]s with periodic checkpoints, kept in a fixed area
//! `(first_byte, bytes)` of each manifest device (one, or two mirrored:
//! every write goes to both, and open takes the best of what each holds).
//!
//! # Area
//!
//! The area is split into two halves of `half = bytes / 2` (rounded down to
//! whole units), A at `first_byte` and B at `first_byte + half`. The unit is
//! the largest block size among the manifest devices; `first_byte` must be
//! a multiple of it. A half holds one *generation*: generation `g` lives in
//! half A when `g` is odd and in half B when it is even. It starts with a
//! checkpoint record (the whole [`ManifestState`]) and continues with edit
//! records, seq 1, 2, 3, ..., back to back, each starting on a unit
//! boundary.
//!
//! # Record
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `STRIAMFR` |
//! | 8 | 4 | format version (3; versions 1 and 2 are read too) |
//! | 12 | 4 | kind: 1 checkpoint, 2 edit |
//! | 16 | 8 | manifest id: random, drawn by `create`, in every record |
//! | 24 | 8 | generation |
//! | 32 | 8 | seq: 0 for a checkpoint, 1, 2, ... for the edits after it |
//! | 40 | 8 | payload length `n` |
//! | 48 | 4 | CRC32C of the payload |
//! | 52 | 4 | CRC32C of bytes 0..52 |
//! | 56 | n | payload |
//!
//! then zeros to the next unit boundary. Payloads are little-endian;
//! `bytes` is a u32 length then the bytes; counts are u32 but the file
//! count of a checkpoint, which is u64.
//!
//! | payload | fields |
//! |---|---|
//! | checkpoint | count, split keys (`bytes` each); count, flushed LSNs (u64 each); replay_from u64; next_file_id u64; file count u64, files; version 3: count, stale WAL devices (u32 each) |
//! | edit | count, added files; count, removed ids (u64 each); count, (region u32, LSN u64) pairs; u8 0, or u8 1 and replay_from u64; version 3: count, WAL devices whole again (u32 each); count, WAL devices lost (u32 each) |
//! | file | id u64, region u32, device u32, offset u64, len u64, max_lsn u64, entries u64, min_key `bytes`, max_key `bytes` (bounds of the file's keys, see [`FileRecord`]); version 2: count, then (device u32, offset u64) of each other copy |
//!
//! # Writing
//!
//! Every write is durable before the call returns: a FUA write on a device
//! with a volatile write cache, a plain one otherwise, submitted to every
//! manifest device at once. An edit is appended to the current half; when
//! it does not fit, the state *with the edit applied* is written as a
//! checkpoint of generation `g + 1` at the start of the other half instead.
//! Until that write is durable the old half is intact, so a crash leaves
//! the state before the edit or after it. An edit is refused
//! ([`ManifestError::TooBig`]) if the state it leads to could not be
//! checkpointed into a half, so a manifest that opens can always be
//! checkpointed again. After a failed write the manifest refuses every
//! further edit ([`ManifestError::Poisoned`]): the devices may hold the
//! edit or not, and only a reopen can tell.
//!
//! `create` zeroes the first unit of half B, then writes the checkpoint of
//! generation 1, with a new manifest id, into half A. A crash during
//! `create` may leave the area unreadable or holding the manifest that was
//! there before; `create` is part of formatting, which is then redone.
//!
//! # Opening
//!
//! Open reads the whole area of every device. The valid checkpoint with the
//! highest generation `G` wins (all valid checkpoints must carry the same
//! manifest id). Then the edits of generation `G` with seq 1, 2, 3, ... are
//! applied, at the positions that follow each other, a record counting when
//! it is valid on any device, until the first that is valid on none: the
//! torn tail of an edit that never completed. Finally the recovered state is
//! written as checkpoint `G + 1` into the other half of every device, which
//! makes the mirrors agree again and means the stale bytes of a torn edit
//! are never read as part of a later generation.
//!
//! What a crash cannot explain is reported as [`ManifestError::Corrupt`]:
//! a valid record header of this manifest that proves a later write was
//! complete after a record that is missing, namely an edit of generation
//! `G` with a seq past the first missing one, an edit of a generation above
//! `G`, or a checkpoint of a generation above `G + 1`; a valid record that
//! does not decode or apply; two devices that hold different valid records
//! at the same place; and record debris with no valid checkpoint anywhere.
//! An area with no record magic at the start of either half on any device
//! is blank (`Ok(None)`).

mod record;
mod state;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use record::{MANIFEST_FORMAT_VERSION, RECORD_HEADER_BYTES, RECORD_MAGIC};
pub use state::{Edit, FileRecord, ManifestState};

use self::record::{Kind, Parsed};
use crate::device::{wait, Device, DeviceError, IoBuf, Queue, Request};

/// What can go wrong with the manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A device refused or failed a request.
    #[error("manifest I/O: {0}")]
    Device(#[from] DeviceError),

    /// The area holds damage that a crash cannot explain.
    #[error("manifest on device {device}, byte {offset}: {what}")]
    Corrupt {
        device: String,
        offset: u64,
        what: String,
    },

    /// A checkpoint of the state would not fit in half the area.
    #[error("a manifest checkpoint of {bytes} bytes does not fit a half of the manifest area ({half} bytes)")]
    TooBig { bytes: u64, half: u64 },

    /// The edit does not apply to the state.
    #[error("manifest edit refused: {0}")]
    BadEdit(String),

    /// The state given to `create` is not self-consistent.
    #[error("manifest state refused: {0}")]
    BadState(String),

    /// The area, the devices or the queues do not fit together.
    #[error("manifest area: {0}")]
    Geometry(String),

    /// An earlier write failed; the manifest must be reopened.
    #[error("the manifest is unusable since a write failed ({0}); reopen it")]
    Poisoned(String),
}

/// Counters since `create` or `open`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManifestStats {
    /// Edit records written (edits that went into a checkpoint not counted).
    pub edits: u64,
    /// Checkpoints written, including those of `create` and `open`.
    pub checkpoints: u64,
    /// Bytes written, summed over the manifest devices.
    pub bytes_written: u64,
    /// Write requests sent to each manifest device (every record goes to
    /// all of them).
    pub writes: u64,
}

/// Where the two halves are.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    first: u64,
    half: u64,
    unit: u64,
}

impl Geometry {
    fn new<D: Device>(
        devices: &[D],
        area: (u64, u64),
        queues: usize,
    ) -> Result<Geometry, ManifestError> {
        let bad = |what: String| Err(ManifestError::Geometry(what));
        if devices.is_empty() {
            return bad("no manifest device".into());
        }
        if queues != devices.len() {
            return bad(format!("{queues} queues for {} devices", devices.len()));
        }
        let unit = devices
            .iter()
            .map(|d| u64::from(d.info().block_size))
            .max()
            .unwrap_or(1);
        let (first, bytes) = area;
        let half = bytes / 2 / unit * unit;
        if first % unit != 0 {
            return bad(format!("starts at byte {first}, not a multiple of {unit}"));
        }
        if half < 2 * unit {
            return bad(format!(
                "{bytes} bytes is too small for two halves of at least two {unit}-byte blocks"
            ));
        }
        for d in devices {
            let info = d.info();
            let cap = info.capacity_bytes();
            if first.checked_add(2 * half).is_none_or(|end| end > cap) {
                return bad(format!(
                    "{} bytes at byte {first} reach past the end of device {} ({cap} bytes)",
                    2 * half,
                    info.name
                ));
            }
        }
        Ok(Geometry { first, half, unit })
    }

    /// The half generation `g` lives in (0 = A, 1 = B).
    fn half_of(generation: u64) -> u64 {
        (generation + 1) % 2
    }

    /// The device byte offset of `pos` in the half of `generation`.
    fn at(&self, generation: u64, pos: u64) -> u64 {
        self.first + Geometry::half_of(generation) * self.half + pos
    }

    fn check_fits(&self, payload_len: usize) -> Result<u64, ManifestError> {
        let bytes = record::padded_len(payload_len as u64, self.unit);
        if bytes > self.half {
            return Err(ManifestError::TooBig {
                bytes,
                half: self.half,
            });
        }
        Ok(bytes)
    }
}

/// The manifest of a running engine: the state in memory, and where the
/// next record goes on the devices. Holds no queues: each call is given the
/// caller's, one per device.
pub struct Manifest<D: Device> {
    devices: Vec<D>,
    geo: Geometry,
    manifest_id: u64,
    generation: u64,
    /// Byte position of the next edit in the current half.
    pos: u64,
    /// Seq of the next edit.
    seq: u64,
    state: ManifestState,
    /// `record::state_len(&state)`, kept up to date by edits.
    state_len: usize,
    stats: ManifestStats,
    poisoned: Option<String>,
    /// Devices a write failed on while another took it: the manifest goes
    /// on without them (every record is whole on the others).
    lost: Vec<bool>,
    /// Told of each device left out, before the write that left it out
    /// returns.
    watch: Option<MirrorHook>,
}

/// What a manifest calls when a write leaves a device out (it failed there
/// while another device took it): the device's index. It returns once
/// that is recorded durably somewhere a later start reads before it
/// trusts the manifest copy on that device alone (the engine keeps it on
/// the WAL devices' superblocks). An error poisons the manifest.
#[derive(Clone)]
pub struct MirrorHook(pub std::sync::Arc<LeftOut>);

/// The function inside a [`MirrorHook`].
pub type LeftOut = dyn Fn(usize) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for MirrorHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MirrorHook")
    }
}

impl<D: Device> Manifest<D> {
    /// Writes a fresh manifest holding `initial` to every device, durably,
    /// replacing whatever the area held. `queues[i]` is the caller's queue
    /// on `devices[i]`, with nothing else in flight.
    pub fn create(
        devices: Vec<D>,
        area: (u64, u64),
        initial: ManifestState,
        queues: &mut [D::Queue],
    ) -> Result<Manifest<D>, ManifestError> {
        let geo = Geometry::new(&devices, area, queues.len())?;
        initial.validate().map_err(ManifestError::BadState)?;
        let state_len = record::state_len(&initial);
        geo.check_fits(state_len)?;
        let mut m = Manifest {
            devices,
            geo,
            manifest_id: rand::random(),
            generation: 0,
            pos: 0,
            seq: 1,
            state: initial,
            state_len,
            stats: ManifestStats::default(),
            poisoned: None,
            lost: Vec::new(),
            watch: None,
        };
        // Kill any checkpoint of an earlier manifest in half B first, so
        // it cannot outrank the new one.
        let zero = vec![0; geo.unit as usize];
        m.write(queues, geo.at(2, 0), &zero)?;
        m.write_checkpoint(queues, 1, None)?;
        Ok(m)
    }

    /// Reads the manifest back. `Ok(None)` when the area of no device
    /// holds any manifest record (blank); `Err` when it holds damage that
    /// is not a torn tail. On success a new checkpoint of the recovered
    /// state has been written durably to every device.
    pub fn open(
        devices: Vec<D>,
        area: (u64, u64),
        queues: &mut [D::Queue],
    ) -> Result<Option<(Manifest<D>, ManifestState)>, ManifestError> {
        Manifest::open_watched(devices, area, queues, None, &[])
    }

    /// [`Manifest::open`], telling `watch` of every device a write leaves
    /// out from the open's own checkpoint on, without reading the devices
    /// at the positions `absent` (known missing: every unit is read from
    /// the others, and the open's checkpoint leaves them out).
    pub fn open_watched(
        devices: Vec<D>,
        area: (u64, u64),
        queues: &mut [D::Queue],
        watch: Option<MirrorHook>,
        absent: &[usize],
    ) -> Result<Option<(Manifest<D>, ManifestState)>, ManifestError> {
        let geo = Geometry::new(&devices, area, queues.len())?;
        let images = read_images(&devices, queues, &geo, absent)?;
        let Some(found) = recover(&devices, &geo, &images)? else {
            return Ok(None);
        };
        let mut m = Manifest {
            devices,
            geo,
            manifest_id: found.manifest_id,
            generation: found.generation,
            pos: 0,
            seq: 1,
            state_len: record::state_len(&found.state),
            state: found.state,
            stats: ManifestStats::default(),
            poisoned: None,
            lost: Vec::new(),
            watch,
        };
        let next = m.generation + 1;
        m.write_checkpoint(queues, next, None)?;
        let state = m.state.clone();
        Ok(Some((m, state)))
    }

    /// Tells `watch` of every device a write leaves out from now on.
    pub fn set_watch(&mut self, watch: Option<MirrorHook>) {
        self.watch = watch;
    }

    /// Reads the state the manifest holds, as [`Manifest::open`] would
    /// recover it, but writes nothing. `Ok(None)` when the area is blank.
    pub fn peek(
        devices: &[D],
        area: (u64, u64),
        queues: &mut [D::Queue],
    ) -> Result<Option<ManifestState>, ManifestError> {
        let geo = Geometry::new(devices, area, queues.len())?;
        let images = read_images(devices, queues, &geo, &[])?;
        Ok(recover(devices, &geo, &images)?.map(|found| found.state))
    }

    /// Applies `edit` atomically and durably, on every manifest device,
    /// before returning. On `Err` the state in memory is unchanged; after a
    /// device error every later call fails with [`ManifestError::Poisoned`]
    /// (the devices may or may not hold the edit: reopen to find out).
    pub fn apply(&mut self, edit: &Edit, queues: &mut [D::Queue]) -> Result<(), ManifestError> {
        if let Some(why) = &self.poisoned {
            return Err(ManifestError::Poisoned(why.clone()));
        }
        if queues.len() != self.devices.len() {
            return Err(ManifestError::Geometry(format!(
                "{} queues for {} devices",
                queues.len(),
                self.devices.len()
            )));
        }
        self.state.check(edit)?;
        let removed: usize = edit
            .remove
            .iter()
            .map(|id| record::file_len(&self.state.files[id]))
            .sum();
        let added: usize = edit.add.iter().map(record::file_len).sum();
        let stale = 4 * self.state.wal_stale.len();
        let next_len =
            self.state_len + added - removed + 4 * self.state.wal_stale_after(edit) - stale;
        self.geo.check_fits(next_len)?;

        let payload = record::encode_edit(edit);
        let rec = record::encode(
            Kind::Edit,
            self.manifest_id,
            self.generation,
            self.seq,
            &payload,
            self.geo.unit,
        );
        if self.pos + rec.len() as u64 <= self.geo.half {
            self.write(queues, self.geo.at(self.generation, self.pos), &rec)?;
            self.state.apply(edit)?;
            self.state_len = next_len;
            self.pos += rec.len() as u64;
            self.seq += 1;
            self.stats.edits += 1;
        } else {
            let mut next = self.state.clone();
            next.apply(edit)?;
            self.write_checkpoint(queues, self.generation + 1, Some(next))?;
            self.state_len = next_len;
        }
        Ok(())
    }

    /// The current generation: each open writes a new one before anything
    /// else, so it tells this run from every run before it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The current state.
    pub fn state(&self) -> &ManifestState {
        &self.state
    }

    /// Counters since `create` or `open`.
    pub fn stats(&self) -> ManifestStats {
        self.stats
    }

    /// The manifest devices.
    pub fn devices(&self) -> &[D] {
        &self.devices
    }

    /// Writes a checkpoint of generation `generation` of `next` (or of the
    /// current state) at the start of its half; on success it becomes the
    /// current generation and state.
    fn write_checkpoint(
        &mut self,
        queues: &mut [D::Queue],
        generation: u64,
        next: Option<ManifestState>,
    ) -> Result<(), ManifestError> {
        let payload = record::encode_state(next.as_ref().unwrap_or(&self.state));
        self.geo.check_fits(payload.len())?;
        let rec = record::encode(
            Kind::Checkpoint,
            self.manifest_id,
            generation,
            0,
            &payload,
            self.geo.unit,
        );
        self.write(queues, self.geo.at(generation, 0), &rec)?;
        if let Some(next) = next {
            self.state = next;
        }
        self.generation = generation;
        self.pos = rec.len() as u64;
        self.seq = 1;
        self.stats.checkpoints += 1;
        Ok(())
    }

    /// The manifest devices a write failed on, which it goes on without.
    pub fn lost(&self) -> Vec<String> {
        (self.devices.iter().zip(&self.lost))
            .filter(|(_, &l)| l)
            .map(|(d, _)| d.info().name.clone())
            .collect()
    }

    /// Writes `data` at byte `offset` of every device, durably, all at
    /// once, and waits for every write. A device the write fails on while
    /// another takes it is left out from then on (the record is whole on
    /// the others, and every later one will be); a write no device takes
    /// poisons the manifest.
    fn write(
        &mut self,
        queues: &mut [D::Queue],
        offset: u64,
        data: &[u8],
    ) -> Result<(), ManifestError> {
        const TAG: u64 = 0x4d41_4e49_4645_5354; // "MANIFEST"
        let mut first_err: Option<DeviceError> = None;
        let mut failed = Vec::new();
        let mut pending = Vec::with_capacity(queues.len());
        self.lost.resize(self.devices.len(), false);
        for (i, (d, q)) in self.devices.iter().zip(queues.iter_mut()).enumerate() {
            if self.lost[i] {
                continue;
            }
            if i == 1 {
                // Between the two copies of a record.
                fail::fail_point!("manifest-between-copies");
            }
            let info = d.info();
            let mut buf = d.alloc_buf(data.len());
            buf.copy_from_slice(data);
            let lba = offset / u64::from(info.block_size);
            let tag = TAG.wrapping_add(i as u64);
            let req = if info.volatile_cache {
                Request::write_fua(tag, lba, vec![buf])
            } else {
                Request::write(tag, lba, vec![buf])
            };
            match q.submit(req) {
                Ok(()) => pending.push((i, tag)),
                Err(rejected) => {
                    failed.push(i);
                    first_err.get_or_insert(rejected.error);
                }
            }
        }
        let mut out = Vec::new();
        for (i, tag) in pending {
            let q = &mut queues[i];
            loop {
                out.clear();
                q.poll(&mut out);
                if let Some(c) = out.iter_mut().find(|c| c.tag == tag) {
                    if let Err(e) = std::mem::replace(&mut c.result, Ok(())) {
                        failed.push(i);
                        first_err.get_or_insert(e);
                    }
                    break;
                }
                wait::wait(q.wait_hint(), Duration::from_millis(10));
            }
        }
        if let Some(e) = first_err {
            let took = self.lost.iter().filter(|&&l| !l).count() - failed.len();
            if took == 0 {
                self.poisoned = Some(e.to_string());
                return Err(e.into());
            }
            for &i in &failed {
                self.lost[i] = true;
                tracing::error!(
                    "manifest: a write on device {} failed ({e}); DEGRADED: the manifest goes on on its other device",
                    self.devices[i].info().name
                );
            }
            if let Some(watch) = &self.watch {
                for &i in &failed {
                    if let Err(why) = (watch.0)(i) {
                        let why = format!(
                            "device {} was left out, and that could not be recorded ({why})",
                            self.devices[i].info().name
                        );
                        self.poisoned = Some(why.clone());
                        return Err(ManifestError::Poisoned(why));
                    }
                }
            }
        }
        let live = self.lost.iter().filter(|&&l| !l).count();
        self.stats.bytes_written += (data.len() * live) as u64;
        self.stats.writes += 1;
        Ok(())
    }
}

/// Byte offsets in the area of the units a device could not read, and why.
type Unreadable = Vec<(u64, DeviceError)>;

/// Reads `len` bytes at byte `offset` of a device; a `unit` that cannot
/// be read (a device that answers but not for it) is left blank and
/// listed.
fn read_area<D: Device>(
    d: &D,
    q: &mut D::Queue,
    offset: u64,
    len: u64,
    unit: u64,
) -> Result<(Vec<u8>, Unreadable), ManifestError> {
    const CHUNK: u64 = 4 << 20;
    let bs = u64::from(d.info().block_size);
    let mut read = |at: u64, n: u64| -> Result<Vec<u8>, DeviceError> {
        let buf: IoBuf = d.alloc_buf(n as usize);
        let req = Request::read(0x4d46_5244, (offset + at) / bs, vec![buf]);
        let mut c = wait::run(q, req).map_err(|r| r.error)?;
        c.result?;
        Ok(c.bufs.pop().expect("the read's buffer").to_vec())
    };
    let mut out = Vec::with_capacity(len as usize);
    let mut unreadable = Vec::new();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(CHUNK);
        match read(at, n) {
            Ok(b) => out.extend_from_slice(&b),
            Err(e @ DeviceError::Offline { .. }) => return Err(e.into()),
            Err(_) => {
                // Unit by unit: what cannot be read is left blank.
                for u in (at..at + n).step_by(unit as usize) {
                    match read(u, unit) {
                        Ok(b) => out.extend_from_slice(&b),
                        Err(e) => {
                            out.resize(out.len() + unit as usize, 0);
                            unreadable.push((u, e));
                        }
                    }
                }
            }
        }
        at += n;
    }
    Ok((out, unreadable))
}

/// The area of every manifest device. A unit one device cannot read is
/// taken as blank when another device reads it: every record is written
/// at the same place on each, and recovery takes each from any device
/// that holds it. A unit no device reads fails the open, naming it.
fn read_images<D: Device>(
    devices: &[D],
    queues: &mut [D::Queue],
    geo: &Geometry,
    absent: &[usize],
) -> Result<Vec<Vec<u8>>, ManifestError> {
    let mut images = Vec::with_capacity(devices.len());
    let mut unreadable = Vec::with_capacity(devices.len());
    for (i, (d, q)) in devices.iter().zip(queues.iter_mut()).enumerate() {
        let len = 2 * geo.half;
        if absent.contains(&i) {
            let why = |u: u64| DeviceError::Offline {
                device: d.info().name.clone(),
                kind: crate::device::IoKind::Read,
                lba: (geo.first + u) / u64::from(d.info().block_size),
                why: "the device is missing".into(),
            };
            images.push(vec![0; len as usize]);
            unreadable.push(
                (0..len)
                    .step_by(geo.unit as usize)
                    .map(|u| (u, why(u)))
                    .collect(),
            );
            continue;
        }
        let (image, bad) = read_area(d, q, geo.first, len, geo.unit)?;
        images.push(image);
        unreadable.push(bad);
    }
    let sets: Vec<std::collections::HashSet<u64>> = unreadable
        .iter()
        .map(|bad| bad.iter().map(|(u, _)| *u).collect())
        .collect();
    for (d, bad) in unreadable.iter().enumerate() {
        for (at, e) in bad {
            let elsewhere = (0..devices.len()).any(|o| o != d && !sets[o].contains(at));
            if !elsewhere {
                return Err(ManifestError::Corrupt {
                    device: devices[d].info().name.clone(),
                    offset: geo.first + at,
                    what: format!("cannot be read ({e}), and no other manifest device reads it"),
                });
            }
        }
        // One line a device: a missing one cannot read any unit.
        if let Some((at, e)) = bad.first() {
            tracing::warn!(
                "manifest: {} cannot read {} units of its area, the first at byte {} ({e}); its records there come from another device",
                devices[d].info().name,
                bad.len(),
                geo.first + at
            );
        }
    }
    Ok(images)
}

/// What open found.
struct Found {
    manifest_id: u64,
    generation: u64,
    state: ManifestState,
}

/// Finds the state the images of the area hold (see the module doc).
fn recover<D: Device>(
    devices: &[D],
    geo: &Geometry,
    images: &[Vec<u8>],
) -> Result<Option<Found>, ManifestError> {
    let half = geo.half as usize;
    let corrupt = |d: usize, offset: u64, what: String| ManifestError::Corrupt {
        device: devices[d].info().name.clone(),
        offset,
        what,
    };
    // Checkpoints at the start of each half.
    let mut best: Option<(usize, record::Header, &[u8], u64)> = None;
    let mut debris = None;
    for (d, image) in images.iter().enumerate() {
        for h in 0..2u64 {
            let offset = geo.first + h * geo.half;
            let bytes = &image[h as usize * half..(h as usize + 1) * half];
            match record::parse(bytes, geo.unit) {
                Parsed::Blank => {}
                Parsed::Unknown { version, kind } => {
                    return Err(corrupt(
                        d,
                        offset,
                        format!("a record of format version {version}, kind {kind}, which this build does not read"),
                    ))
                }
                Parsed::Valid {
                    header,
                    payload,
                    padded,
                } if header.kind == Kind::Checkpoint => {
                    if Geometry::half_of(header.generation) != h {
                        return Err(corrupt(
                            d,
                            offset,
                            format!("checkpoint of generation {} in the wrong half", header.generation),
                        ));
                    }
                    if let Some((bd, bh, _, _)) = &best {
                        if bh.manifest_id != header.manifest_id {
                            return Err(corrupt(
                                d,
                                offset,
                                format!(
                                    "checkpoint of manifest {:#x}, but device {} holds manifest {:#x}",
                                    header.manifest_id,
                                    devices[*bd].info().name,
                                    bh.manifest_id
                                ),
                            ));
                        }
                    }
                    if best.as_ref().is_none_or(|b| header.generation > b.1.generation) {
                        best = Some((d, header, payload, padded));
                    }
                }
                _ => {
                    debris.get_or_insert((d, offset));
                }
            }
        }
    }
    let Some((bd, ckpt, payload, padded)) = best else {
        return match debris {
            None => Ok(None),
            Some((d, offset)) => Err(corrupt(
                d,
                offset,
                "a damaged manifest record and no valid checkpoint on any device".into(),
            )),
        };
    };
    let g = ckpt.generation;
    let id = ckpt.manifest_id;
    let mut state = record::decode_state(payload, ckpt.version).map_err(|e| {
        corrupt(
            bd,
            geo.at(g, 0),
            format!("checkpoint of generation {g}: {e}"),
        )
    })?;

    // The edits that follow it, while any device holds the next one.
    let h = Geometry::half_of(g) as usize * half;
    let mut pos = padded;
    let mut seq = 1;
    while pos < geo.half {
        let mut found: Option<(usize, &[u8], u64, u32)> = None;
        for (d, image) in images.iter().enumerate() {
            let Parsed::Valid {
                header,
                payload,
                padded,
            } = record::parse(&image[h + pos as usize..h + half], geo.unit)
            else {
                continue;
            };
            if header.kind != Kind::Edit
                || header.manifest_id != id
                || header.generation != g
                || header.seq != seq
            {
                continue;
            }
            match found {
                Some((fd, other, _, _)) if other != payload => {
                    return Err(corrupt(
                        d,
                        geo.at(g, pos),
                        format!(
                            "edit {seq} of generation {g} differs from the one on device {}",
                            devices[fd].info().name
                        ),
                    ))
                }
                Some(_) => {}
                None => found = Some((d, payload, padded, header.version)),
            }
        }
        let Some((d, payload, padded, version)) = found else {
            break;
        };
        let edit = record::decode_edit(payload, version).map_err(|e| {
            corrupt(
                d,
                geo.at(g, pos),
                format!("edit {seq} of generation {g}: {e}"),
            )
        })?;
        state.apply(&edit).map_err(|e| {
            corrupt(
                d,
                geo.at(g, pos),
                format!("edit {seq} of generation {g} does not apply: {e}"),
            )
        })?;
        pos += padded;
        seq += 1;
    }

    // Nothing of this manifest may prove that a later write completed.
    for (d, image) in images.iter().enumerate() {
        for at in (0..image.len()).step_by(geo.unit as usize) {
            let header = match record::parse(&image[at..(at / half + 1) * half], geo.unit) {
                Parsed::Valid { header, .. } | Parsed::BadPayload(header) => header,
                _ => continue,
            };
            if header.manifest_id != id {
                continue;
            }
            let later = match header.kind {
                Kind::Edit => header.generation > g || (header.generation == g && header.seq > seq),
                Kind::Checkpoint => header.generation > g + 1,
            };
            if later {
                return Err(corrupt(
                    d,
                    geo.first + at as u64,
                    format!(
                        "{} {} of generation {} is there, but the log of generation {g} ends before edit {seq}, \
                         which is missing or damaged at byte {}",
                        header.kind.name(),
                        header.seq,
                        header.generation,
                        geo.at(g, pos)
                    ),
                ));
            }
        }
    }
    Ok(Some(Found {
        manifest_id: id,
        generation: g,
        state,
    }))
}
