//! Step 1 of recovery: find every segment and batch on one device.
//!
//! Segment headers are read first (one block each, eight in flight), then
//! the body of every valid segment in 1 MiB reads. A segment's batches are
//! followed from the block after its header: each valid header gives the
//! length of its batch and so the place of the next one. The scan of a
//! segment ends at the first block that is not a batch of this segment:
//! blank, garbage, a damaged header, or a stale batch from the segment's
//! previous use (another seq). A batch whose header checks out but whose
//! payload does not is kept as bad, and the scan goes on after it, since its
//! header says how long it is.

use super::read::{chunks, read_ranges};
use super::{RecoveryError, RecoveryOptions, WalDevice};
use crate::device::{Device, DeviceError};
use crate::wal::format::{
    decode_batch_header, decode_records, FormatError, Geometry, Record, SegmentHeader,
    BATCH_HEADER_BYTES,
};
use crate::wal::Lsn;

/// A batch found on a device.
pub(super) struct Found {
    /// Position of its device in the list given to `recover`.
    pub dev: usize,
    pub segment: u64,
    pub seq: u64,
    /// Byte offset of the batch on the device, and its padded length.
    pub offset: u64,
    pub len: u64,
    pub first_lsn: Lsn,
    pub count: u32,
    pub epoch: u64,
    pub durable_lsn: Lsn,
    /// Records (empty for batches wholly before the replay point), or why
    /// the payload is bad.
    pub state: Result<Vec<Record>, String>,
}

impl Found {
    pub fn last_lsn(&self) -> Lsn {
        self.first_lsn + u64::from(self.count) - 1
    }

    pub fn is_good(&self) -> bool {
        self.state.is_ok()
    }
}

/// A valid segment of this appliance.
pub(super) struct Segment {
    pub index: u64,
    pub header: SegmentHeader,
    /// Last LSN of the last batch found in it.
    pub last_lsn: Option<Lsn>,
    /// Where its scan stopped on a block that has the batch magic but is not
    /// a valid batch (byte offset on the device, why): a torn header.
    pub torn: Option<(u64, String)>,
    /// Where its scan stopped, and what it found there (blank, garbage, a
    /// stale batch, a torn header); `None` when it ran to the segment's end.
    pub end: Option<(u64, String)>,
}

/// Everything found on one device.
pub(super) struct DeviceScan {
    pub geometry: Geometry,
    pub segments: Vec<Segment>,
    pub batches: Vec<Found>,
    pub bytes_read: u64,
}

impl DeviceScan {
    /// The scan of a device that could not be read: nothing found.
    pub(super) fn empty<D: Device>(wd: &WalDevice<D>, opts: &RecoveryOptions) -> DeviceScan {
        DeviceScan {
            geometry: Geometry::new(wd.device.info(), opts.segment_size),
            segments: Vec::new(),
            batches: Vec::new(),
            bytes_read: 0,
        }
    }
}

/// Scans the device at position `dev` of the list.
pub(super) fn scan_device<D: Device>(
    dev: usize,
    wd: &WalDevice<D>,
    opts: &RecoveryOptions,
) -> Result<DeviceScan, RecoveryError> {
    let geometry = Geometry::new(wd.device.info(), opts.segment_size);
    let mut queue = wd.device.open_queue()?;
    // Block 0 first: a device that answers nothing (one that stands in
    // for a missing device, whatever its geometry) fails here, as a
    // device; a block it cannot read is left to the superblock's copies.
    if let Err(e @ DeviceError::Offline { .. }) =
        read_ranges(&wd.device, &wd.name, &mut queue, &[(0, 1)], |_, _| true)
    {
        return Err(e.into());
    }
    let heads: Vec<(u64, u64)> = (0..geometry.segments)
        .map(|i| (geometry.segment_lba(i), 1))
        .collect();
    let mut segments = Vec::new();
    let mut foreign = None;
    let (mut bytes_read, _) = read_ranges(&wd.device, &wd.name, &mut queue, &heads, |i, block| {
        match check_segment(wd, opts, i as u64, block) {
            Ok(Some(header)) => segments.push(Segment {
                index: i as u64,
                header,
                last_lsn: None,
                torn: None,
                end: None,
            }),
            Ok(None) => {}
            Err(e) => foreign = Some(e),
        }
        foreign.is_none()
    })?;
    if let Some(e) = foreign {
        return Err(e);
    }
    let bs = geometry.block_size as usize;
    let mut batches = Vec::new();
    for seg in &mut segments {
        let mut scanner = Scanner {
            dev,
            geometry: &geometry,
            seg,
            opts,
            pending: Vec::new(),
            pos: 0,
            base: bs as u64,
            found: &mut batches,
        };
        let body = chunks(
            geometry.segment_lba(scanner.seg.index) + 1,
            geometry.seg_blocks - 1,
            geometry.block_size,
        );
        bytes_read += read_ranges(&wd.device, &wd.name, &mut queue, &body, |_, bytes| {
            scanner.feed(bytes)
        })?
        .0;
    }
    Ok(DeviceScan {
        geometry,
        segments,
        batches,
        bytes_read,
    })
}

/// The header of segment `index` if it is a valid one of this appliance and
/// device; `None` if the block holds no valid header (never used, or its
/// header write was torn); an error if it belongs to someone else.
fn check_segment<D: Device>(
    wd: &WalDevice<D>,
    opts: &RecoveryOptions,
    index: u64,
    block: &[u8],
) -> Result<Option<SegmentHeader>, RecoveryError> {
    let foreign = |why: String| RecoveryError::Foreign {
        device: wd.name.clone(),
        segment: index,
        why,
    };
    match SegmentHeader::decode(block) {
        Ok(h) if h.appliance_id != opts.appliance_id => Err(foreign(format!(
            "its header belongs to appliance {:032x}, not {:032x}",
            h.appliance_id, opts.appliance_id
        ))),
        Ok(h) if h.device_index != wd.index => Err(foreign(format!(
            "its header was written by WAL device #{}, this is device #{}",
            h.device_index, wd.index
        ))),
        Ok(h) => Ok(Some(h)),
        Err(e @ FormatError::UnsupportedVersion(_)) => Err(foreign(e.to_string())),
        Err(_) => Ok(None),
    }
}

/// Follows the batches of one segment through its bytes as they arrive.
struct Scanner<'a> {
    dev: usize,
    geometry: &'a Geometry,
    seg: &'a mut Segment,
    opts: &'a RecoveryOptions,
    /// Bytes read and not yet scanned past, from `pos`.
    pending: Vec<u8>,
    pos: usize,
    /// Offset in the segment of `pending[0]`.
    base: u64,
    found: &'a mut Vec<Found>,
}

impl Scanner<'_> {
    /// Takes the next bytes of the segment; false once its log has ended.
    fn feed(&mut self, bytes: &[u8]) -> bool {
        self.pending.drain(..self.pos);
        self.base += self.pos as u64;
        self.pos = 0;
        self.pending.extend_from_slice(bytes);
        let bs = self.geometry.block_size as usize;
        let max_batch = usize::try_from(self.opts.max_batch).unwrap_or(usize::MAX);
        loop {
            let rest = &self.pending[self.pos..];
            if rest.len() < bs {
                return true;
            }
            let seg_offset = self.base + self.pos as u64;
            let offset = self.geometry.device_offset(self.seg.index, seg_offset);
            let header = match decode_batch_header(&rest[..bs], max_batch) {
                Ok(h) => h,
                Err(FormatError::NotABatch) => {
                    let what = if rest[..bs].iter().all(|&b| b == 0) {
                        "a blank block (or one that cannot be read)"
                    } else {
                        "a block that is not a batch"
                    };
                    self.seg.end = Some((offset, what.to_string()));
                    return false;
                }
                Err(e) => {
                    self.seg.torn = Some((offset, e.to_string()));
                    self.seg.end = Some((offset, format!("a damaged batch header ({e})")));
                    return false;
                }
            };
            if header.segment_seq != self.seg.header.seq {
                // Stale: left over from the segment's previous use, or
                // written here by mistake.
                self.seg.end = Some((
                    offset,
                    format!(
                        "a batch of segment use {}, not {} (stale or misdirected)",
                        header.segment_seq, self.seg.header.seq
                    ),
                ));
                return false;
            }
            let len = header.padded_len(self.geometry.block_size);
            if seg_offset + len as u64 > self.geometry.segment_bytes() {
                let why = format!("a {len}-byte batch would run past the end of the segment");
                self.seg.torn = Some((offset, why.clone()));
                self.seg.end = Some((offset, why));
                return false;
            }
            if rest.len() < len {
                return true;
            }
            let payload =
                &rest[BATCH_HEADER_BYTES..BATCH_HEADER_BYTES + header.payload_len as usize];
            let wanted = self
                .opts
                .replay_from
                .is_none_or(|from| header.last_lsn() >= from);
            let state = match decode_records(&header, payload) {
                Ok(records) if wanted => Ok(records),
                Ok(_) => Ok(Vec::new()),
                Err(e) => Err(e.to_string()),
            };
            self.found.push(Found {
                dev: self.dev,
                segment: self.seg.index,
                seq: header.segment_seq,
                offset,
                len: len as u64,
                first_lsn: header.first_lsn,
                count: header.count,
                epoch: header.epoch,
                durable_lsn: header.durable_lsn,
                state,
            });
            self.seg.last_lsn = Some(header.last_lsn());
            self.pos += len;
        }
    }
}
