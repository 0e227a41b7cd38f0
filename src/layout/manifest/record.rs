//! Manifest records: the header, and the payloads of checkpoints (a whole
//! [`ManifestState`]) and edits (an [`Edit`]). See the module above for the
//! byte tables. Decoding never panics, whatever the bytes.

use std::collections::BTreeMap;

use super::state::{Edit, FileRecord, ManifestState};

/// Identifies a manifest record header.
pub const RECORD_MAGIC: [u8; 8] = *b"STRIAMFR";
/// The manifest format version this build writes. It reads this one,
/// version 2, which has no marks of WAL devices that may lack batches, and
/// version 1, whose file records have no second copies either.
pub const MANIFEST_FORMAT_VERSION: u32 = 3;
/// Bytes of the record header, checksum included.
pub const RECORD_HEADER_BYTES: usize = 56;

const HEADER_CRC_AT: usize = RECORD_HEADER_BYTES - 4;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole state; the first record of a half.
    Checkpoint = 1,
    /// An edit to the state before it.
    Edit = 2,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Checkpoint => "checkpoint",
            Kind::Edit => "edit",
        }
    }
}

/// A record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// The record's format version (1 or 2).
    pub version: u32,
    /// Drawn at random when the manifest is created; every record of the
    /// manifest carries it, so records of an earlier manifest in the same
    /// area are never taken for this one's.
    pub manifest_id: u64,
    pub generation: u64,
    /// 0 for a checkpoint; 1, 2, ... for the edits after it.
    pub seq: u64,
    pub payload_len: u64,
    pub payload_crc: u32,
}

/// What the bytes at a record position are.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// No magic: never written, or zeroed.
    Blank,
    /// Magic, but the header fails its checksum or is cut off.
    BadHeader,
    /// A header with a valid checksum but a format version or kind this
    /// build does not know.
    Unknown { version: u32, kind: u32 },
    /// A valid header whose payload is cut off or fails its checksum.
    BadPayload(Header),
    /// A whole record: its payload, and its length padded to whole units.
    Valid {
        header: Header,
        payload: &'a [u8],
        padded: u64,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The length of a record with `payload_len` bytes of payload, padded to
/// whole `unit`s.
pub fn padded_len(payload_len: u64, unit: u64) -> u64 {
    (RECORD_HEADER_BYTES as u64 + payload_len).next_multiple_of(unit)
}

/// Encodes a record, zero padded to whole `unit`s.
pub fn encode(
    kind: Kind,
    manifest_id: u64,
    generation: u64,
    seq: u64,
    payload: &[u8],
    unit: u64,
) -> Vec<u8> {
    let mut out = vec![0; padded_len(payload.len() as u64, unit) as usize];
    out[0..8].copy_from_slice(&RECORD_MAGIC);
    out[8..12].copy_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(kind as u32).to_le_bytes());
    out[16..24].copy_from_slice(&manifest_id.to_le_bytes());
    out[24..32].copy_from_slice(&generation.to_le_bytes());
    out[32..40].copy_from_slice(&seq.to_le_bytes());
    out[40..48].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    out[48..52].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let crc = crc32c::crc32c(&out[..HEADER_CRC_AT]);
    out[HEADER_CRC_AT..RECORD_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    out
}

/// Parses the record at the start of `bytes` (which runs to the end of its
/// half: a record never crosses it).
pub fn parse(bytes: &[u8], unit: u64) -> Parsed<'_> {
    if bytes.len() < 8 || bytes[0..8] != RECORD_MAGIC {
        return Parsed::Blank;
    }
    if bytes.len() < RECORD_HEADER_BYTES {
        return Parsed::BadHeader;
    }
    let h = &bytes[..RECORD_HEADER_BYTES];
    if u32_at(h, HEADER_CRC_AT) != crc32c::crc32c(&h[..HEADER_CRC_AT]) {
        return Parsed::BadHeader;
    }
    let version = u32_at(h, 8);
    let kind = match (version, u32_at(h, 12)) {
        (1..=MANIFEST_FORMAT_VERSION, 1) => Kind::Checkpoint,
        (1..=MANIFEST_FORMAT_VERSION, 2) => Kind::Edit,
        (version, kind) => return Parsed::Unknown { version, kind },
    };
    let header = Header {
        kind,
        version,
        manifest_id: u64_at(h, 16),
        generation: u64_at(h, 24),
        seq: u64_at(h, 32),
        payload_len: u64_at(h, 40),
        payload_crc: u32_at(h, 48),
    };
    let room = (bytes.len() - RECORD_HEADER_BYTES) as u64;
    if header.payload_len > room {
        return Parsed::BadPayload(header);
    }
    let payload = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + header.payload_len as usize];
    if crc32c::crc32c(payload) != header.payload_crc {
        return Parsed::BadPayload(header);
    }
    Parsed::Valid {
        header,
        payload,
        padded: padded_len(header.payload_len, unit),
    }
}

/// Appends little-endian fields.
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("fewer than 2^32 items"));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.count(b.len());
        self.0.extend_from_slice(b);
    }
    fn file(&mut self, f: &FileRecord) {
        self.u64(f.id);
        self.u32(f.region);
        self.u32(f.device);
        self.u64(f.offset);
        self.u64(f.len);
        self.u64(f.max_lsn);
        self.u64(f.entries);
        self.bytes(&f.min_key);
        self.bytes(&f.max_key);
        self.count(f.copies.len());
        for &(device, offset) in &f.copies {
            self.u32(device);
            self.u64(offset);
        }
    }
}

/// Reads little-endian fields, checking every bound.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    /// The record's format version.
    version: u32,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!(
                "{what} at payload byte {} runs past the end ({} bytes)",
                self.at,
                self.b.len()
            ));
        }
        let out = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }
    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32_at(self.take(4, what)?, 0))
    }
    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64_at(self.take(8, what)?, 0))
    }
    fn bytes(&mut self, what: &str) -> Result<Vec<u8>, String> {
        let n = self.u32(what)? as usize;
        Ok(self.take(n, what)?.to_vec())
    }
    fn file(&mut self) -> Result<FileRecord, String> {
        let mut f = FileRecord {
            id: self.u64("file id")?,
            region: self.u32("file region")?,
            device: self.u32("file device")?,
            offset: self.u64("file offset")?,
            len: self.u64("file length")?,
            max_lsn: self.u64("file max LSN")?,
            entries: self.u64("file entries")?,
            min_key: self.bytes("file min key")?,
            max_key: self.bytes("file max key")?,
            copies: Vec::new(),
        };
        if self.version >= 2 {
            for _ in 0..self.u32("file copy count")? {
                f.copies
                    .push((self.u32("file copy device")?, self.u64("file copy offset")?));
            }
        }
        Ok(f)
    }
    fn end(&self) -> Result<(), String> {
        if self.at != self.b.len() {
            return Err(format!(
                "{} bytes left over after payload byte {}",
                self.b.len() - self.at,
                self.at
            ));
        }
        Ok(())
    }
}

/// Bytes a file takes in a payload.
pub fn file_len(f: &FileRecord) -> usize {
    8 + 4 + 4 + 8 * 4 + 4 + f.min_key.len() + 4 + f.max_key.len() + 4 + 12 * f.copies.len()
}

/// Bytes [`encode_state`] produces for `s`.
pub fn state_len(s: &ManifestState) -> usize {
    4 + s.split_keys.iter().map(|k| 4 + k.len()).sum::<usize>()
        + 4
        + 8 * s.flushed_lsn.len()
        + 8 * 3
        + s.files.values().map(file_len).sum::<usize>()
        + 4
        + 4 * s.wal_stale.len()
}

/// Encodes a whole state (a checkpoint's payload).
pub fn encode_state(s: &ManifestState) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(state_len(s)));
    w.count(s.split_keys.len());
    for k in &s.split_keys {
        w.bytes(k);
    }
    w.count(s.flushed_lsn.len());
    for &l in &s.flushed_lsn {
        w.u64(l);
    }
    w.u64(s.replay_from);
    w.u64(s.next_file_id);
    w.u64(s.files.len() as u64);
    for f in s.files.values() {
        w.file(f);
    }
    w.count(s.wal_stale.len());
    for &d in &s.wal_stale {
        w.u32(d);
    }
    w.0
}

/// Decodes a checkpoint's payload of format `version` and validates the
/// state.
pub fn decode_state(b: &[u8], version: u32) -> Result<ManifestState, String> {
    let mut r = Reader { b, at: 0, version };
    let mut s = ManifestState::default();
    for _ in 0..r.u32("split key count")? {
        s.split_keys.push(r.bytes("split key")?);
    }
    for _ in 0..r.u32("flushed LSN count")? {
        s.flushed_lsn.push(r.u64("flushed LSN")?);
    }
    s.replay_from = r.u64("replay point")?;
    s.next_file_id = r.u64("next file id")?;
    let mut files = BTreeMap::new();
    for _ in 0..r.u64("file count")? {
        let f = r.file()?;
        if let Some(old) = files.insert(f.id, f) {
            return Err(format!("file {} appears twice", old.id));
        }
    }
    s.files = files;
    if version >= 3 {
        for _ in 0..r.u32("stale WAL device count")? {
            s.wal_stale.insert(r.u32("stale WAL device")?);
        }
    }
    r.end()?;
    s.validate()?;
    Ok(s)
}

/// Encodes an edit (an edit record's payload).
pub fn encode_edit(e: &Edit) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.count(e.add.len());
    for f in &e.add {
        w.file(f);
    }
    w.count(e.remove.len());
    for &id in &e.remove {
        w.u64(id);
    }
    w.count(e.flushed.len());
    for &(region, lsn) in &e.flushed {
        w.u32(region);
        w.u64(lsn);
    }
    match e.replay_from {
        None => w.u8(0),
        Some(r) => {
            w.u8(1);
            w.u64(r);
        }
    }
    w.count(e.wal_back.len());
    for &d in &e.wal_back {
        w.u32(d);
    }
    w.count(e.wal_lost.len());
    for &d in &e.wal_lost {
        w.u32(d);
    }
    w.0
}

/// Decodes an edit record's payload of format `version` (whether it
/// applies is the state's business).
pub fn decode_edit(b: &[u8], version: u32) -> Result<Edit, String> {
    let mut r = Reader { b, at: 0, version };
    let mut e = Edit::default();
    for _ in 0..r.u32("added file count")? {
        e.add.push(r.file()?);
    }
    for _ in 0..r.u32("removed file count")? {
        e.remove.push(r.u64("removed file id")?);
    }
    for _ in 0..r.u32("flushed LSN count")? {
        e.flushed.push((r.u32("region")?, r.u64("flushed LSN")?));
    }
    e.replay_from = match r.u8("replay point flag")? {
        0 => None,
        1 => Some(r.u64("replay point")?),
        other => return Err(format!("replay point flag {other}")),
    };
    if version >= 3 {
        for _ in 0..r.u32("WAL devices back count")? {
            e.wal_back.push(r.u32("WAL device back")?);
        }
        for _ in 0..r.u32("lost WAL device count")? {
            e.wal_lost.push(r.u32("lost WAL device")?);
        }
    }
    r.end()?;
    Ok(e)
}
