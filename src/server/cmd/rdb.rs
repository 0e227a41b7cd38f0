//! Reading Redis's DUMP form (its RDB encoding of one value), for
//! RESTORE of payloads a Redis server made: the footer (RDB version and
//! CRC-64), RDB lengths and strings (integer-encoded and LZF-compressed
//! ones too), and listpacks. Only reading: Stria's DUMP writes its own
//! form (see `dump.rs`).

/// The newest RDB version this reader knows (Redis 7.2's).
pub const RDB_VERSION: u16 = 11;

/// Why an RDB payload cannot be read: it ends early or does not agree
/// with itself.
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

pub type Rdb<T> = Result<T, Corrupt>;

/// CRC-64/Jones as Redis computes it (reflected, initial value 0).
pub fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    data.iter().fold(0u64, |crc, &b| {
        table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// The body of a Redis DUMP payload (type byte and value), if its
/// footer is Redis's: an RDB version this reader knows and a CRC-64
/// that matches.
pub fn redis_body(payload: &[u8]) -> Option<&[u8]> {
    let n = payload.len();
    if n < 11 {
        return None;
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    let crc = u64::from_le_bytes(payload[n - 8..].try_into().ok()?);
    (version <= RDB_VERSION && crc64(&payload[..n - 8]) == crc).then(|| &payload[..n - 10])
}

/// A cursor over RDB-encoded input.
pub struct Reader<'b> {
    input: &'b [u8],
}

impl<'b> Reader<'b> {
    pub fn new(input: &'b [u8]) -> Reader<'b> {
        Reader { input }
    }

    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> Rdb<&'b [u8]> {
        if self.input.len() < n {
            return Err(Corrupt);
        }
        let (b, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(b)
    }

    pub fn byte(&mut self) -> Rdb<u8> {
        Ok(self.bytes(1)?[0])
    }

    /// An RDB length, or the special encoding of a string (`Err` of its
    /// kind: 0 int8, 1 int16, 2 int32, 3 LZF).
    fn length_or_special(&mut self) -> Rdb<Result<u64, u8>> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Ok((b & 0x3f) as u64),
            1 => Ok((((b & 0x3f) as u64) << 8) | self.byte()? as u64),
            2 if b == 0x80 => Ok(u32::from_be_bytes(self.bytes(4)?.try_into().expect("4")) as u64),
            2 if b == 0x81 => Ok(u64::from_be_bytes(self.bytes(8)?.try_into().expect("8"))),
            2 => return Err(Corrupt),
            _ => Err(b & 0x3f),
        })
    }

    pub fn length(&mut self) -> Rdb<u64> {
        self.length_or_special()?.map_err(|_| Corrupt)
    }

    /// A length used as a count of things that follow (each at least a
    /// byte), so a corrupt one cannot make a huge allocation.
    pub fn count(&mut self) -> Rdb<usize> {
        let n = self.length()?;
        if n > self.input.len() as u64 {
            return Err(Corrupt);
        }
        Ok(n as usize)
    }

    /// A millisecond time: 8 bytes, little-endian.
    pub fn millis(&mut self) -> Rdb<u64> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8")))
    }

    /// An RDB string.
    pub fn string(&mut self) -> Rdb<Vec<u8>> {
        match self.length_or_special()? {
            Ok(n) => Ok(self
                .bytes(usize::try_from(n).map_err(|_| Corrupt)?)?
                .to_vec()),
            Err(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Ok(i16::from_le_bytes(self.bytes(2)?.try_into().expect("2"))
                .to_string()
                .into_bytes()),
            Err(2) => Ok(i32::from_le_bytes(self.bytes(4)?.try_into().expect("4"))
                .to_string()
                .into_bytes()),
            Err(3) => {
                let compressed = self.length()?;
                let len = self.length()?;
                let c = self.bytes(usize::try_from(compressed).map_err(|_| Corrupt)?)?;
                lzf_decompress(c, usize::try_from(len).map_err(|_| Corrupt)?)
            }
            Err(_) => Err(Corrupt),
        }
    }
}

/// LZF decompression (Redis's `lzf_decompress`) of `input` into exactly
/// `len` bytes.
fn lzf_decompress(input: &[u8], len: usize) -> Rdb<Vec<u8>> {
    // A byte of input yields at most 264 bytes of output.
    if len > input.len().saturating_mul(264) {
        return Err(Corrupt);
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = input.get(i..i + ctrl + 1).ok_or(Corrupt)?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i).ok_or(Corrupt)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i).ok_or(Corrupt)? as usize + 1;
            i += 1;
            let from = out.len().checked_sub(back).ok_or(Corrupt)?;
            for k in 0..n + 2 {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return Err(Corrupt);
        }
    }
    if out.len() != len {
        return Err(Corrupt);
    }
    Ok(out)
}

/// A listpack element: an integer or a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Element {
    Int(i64),
    Str(Vec<u8>),
}

impl Element {
    pub fn int(&self) -> Rdb<i64> {
        match self {
            Element::Int(i) => Ok(*i),
            Element::Str(s) => std::str::from_utf8(s)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(Corrupt),
        }
    }

    pub fn bytes(self) -> Vec<u8> {
        match self {
            Element::Int(i) => i.to_string().into_bytes(),
            Element::Str(s) => s,
        }
    }
}

/// The elements of listpack `lp`: a 4-byte total length, a 2-byte
/// count, the elements (each followed by its back-length), 0xFF.
pub fn listpack(lp: &[u8]) -> Rdb<Vec<Element>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[..4].try_into().expect("4")) as usize != lp.len() {
        return Err(Corrupt);
    }
    let mut r = Reader::new(&lp[6..]);
    let mut out = Vec::new();
    loop {
        let b = r.byte()?;
        let (el, size) = match b {
            0x00..=0x7f => (Element::Int(b as i64), 1),
            0x80..=0xbf => {
                let n = (b & 0x3f) as usize;
                (Element::Str(r.bytes(n)?.to_vec()), 1 + n)
            }
            0xc0..=0xdf => {
                let u = (((b & 0x1f) as i64) << 8) | r.byte()? as i64;
                let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
                (Element::Int(v), 2)
            }
            0xe0..=0xef => {
                let n = (((b & 0x0f) as usize) << 8) | r.byte()? as usize;
                (Element::Str(r.bytes(n)?.to_vec()), 2 + n)
            }
            0xf0 => {
                let n = u32::from_le_bytes(r.bytes(4)?.try_into().expect("4")) as usize;
                (Element::Str(r.bytes(n)?.to_vec()), 5 + n)
            }
            0xf1 => {
                let v = i16::from_le_bytes(r.bytes(2)?.try_into().expect("2"));
                (Element::Int(v as i64), 3)
            }
            0xf2 => {
                let b3 = r.bytes(3)?;
                let v = i32::from_le_bytes([0, b3[0], b3[1], b3[2]]) >> 8;
                (Element::Int(v as i64), 4)
            }
            0xf3 => {
                let v = i32::from_le_bytes(r.bytes(4)?.try_into().expect("4"));
                (Element::Int(v as i64), 5)
            }
            0xf4 => {
                let v = i64::from_le_bytes(r.bytes(8)?.try_into().expect("8"));
                (Element::Int(v), 9)
            }
            0xff => break,
            _ => return Err(Corrupt),
        };
        // The back-length: the element's size in 7-bit groups.
        let back = match size {
            0..=127 => 1,
            128..=16383 => 2,
            16384..=2097151 => 3,
            2097152..=268435455 => 4,
            _ => 5,
        };
        r.bytes(back)?;
        out.push(el);
    }
    if !r.is_empty() {
        return Err(Corrupt);
    }
    let count = u16::from_le_bytes(lp[4..6].try_into().expect("2"));
    if count != u16::MAX && count as usize != out.len() {
        return Err(Corrupt);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_lengths_strings_and_listpacks_read_as_redis_writes_them() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let mut r = Reader::new(&[0x05, 0x41, 0x02, 0x80, 0, 1, 0, 0, 0xc0, 0xfb]);
        assert_eq!(r.length(), Ok(5));
        assert_eq!(r.length(), Ok(0x102));
        assert_eq!(r.length(), Ok(0x10000));
        assert_eq!(r.string(), Ok(b"-5".to_vec()));
        assert!(r.is_empty());
        // LZF: a literal run of 3, then a back reference of 3 bytes.
        assert_eq!(
            lzf_decompress(&[2, b'a', b'b', b'c', 0x20, 2], 6),
            Ok(b"abcabc".to_vec())
        );
        assert_eq!(lzf_decompress(&[2, b'a', b'b', b'c'], 4), Err(Corrupt));
        // A listpack of 7, "ab" and -1 (13-bit), each with its back-length.
        let mut lp = vec![
            0, 0, 0, 0, 3, 0, 7, 1, 0x82, b'a', b'b', 3, 0xdf, 0xff, 2, 0xff,
        ];
        lp[0] = lp.len() as u8;
        assert_eq!(
            listpack(&lp),
            Ok(vec![
                Element::Int(7),
                Element::Str(b"ab".to_vec()),
                Element::Int(-1)
            ])
        );
    }
}
