//! A write's key and value, in memory that the WAL's append and the
//! memstore entry share.
//!
//! The writes a writer hands one region in one call are copied once, side
//! by side, into one reference-counted buffer; each write is a [`Record`]
//! of it. The WAL reactor copies a record into its batch and lets go of
//! it; the memstore keeps it until the memstore is dropped. So a write
//! costs one copy and (per group of writes) one allocation on the
//! writer's side instead of two copies and four allocations, and the
//! flush that drops the memstore frees one buffer per group instead of a
//! key and a value per entry.
//!
//! A buffer lives as long as any of its records: writes of one group that
//! went to two memstores of the region (a freeze between them) keep it
//! until both are dropped. A group is at most one call's writes to one
//! region, so that is bounded by what writers hand in at a time.

use std::fmt;
use std::sync::Arc;

/// One write's key and value in a shared buffer. Cloning shares it.
#[derive(Clone)]
pub struct Record {
    buf: Arc<[u8]>,
    /// The key is `buf[start..start + key_len]`, the value follows it.
    start: usize,
    key_len: u32,
    value_len: u32,
}

impl Record {
    /// A record of its own buffer (one copy of `key` and `value`).
    ///
    /// # Panics
    /// If the key or the value is 4 GiB or more.
    pub fn new(key: &[u8], value: &[u8]) -> Record {
        Record::group([(key, value)].into_iter())
            .pop()
            .expect("one record")
    }

    /// Records of `pairs` (key, value), copied side by side into one
    /// buffer, in order.
    ///
    /// # Panics
    /// If a key or a value is 4 GiB or more.
    pub fn group<'a, I>(pairs: I) -> Vec<Record>
    where
        I: Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
    {
        let total: usize = pairs.clone().map(|(k, v)| k.len() + v.len()).sum();
        // Allocated at its final size and filled in place: the iterator
        // has a trusted length, so `collect` makes one allocation.
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, total).collect();
        let bytes = Arc::get_mut(&mut buf).expect("a buffer nobody else holds yet");
        let mut spans = Vec::with_capacity(pairs.size_hint().0);
        let mut at = 0;
        for (k, v) in pairs {
            let key_len = u32::try_from(k.len()).expect("a key below 4 GiB");
            let value_len = u32::try_from(v.len()).expect("a value below 4 GiB");
            bytes[at..at + k.len()].copy_from_slice(k);
            bytes[at + k.len()..at + k.len() + v.len()].copy_from_slice(v);
            spans.push((at, key_len, value_len));
            at += k.len() + v.len();
        }
        spans
            .into_iter()
            .map(|(start, key_len, value_len)| Record {
                buf: buf.clone(),
                start,
                key_len,
                value_len,
            })
            .collect()
    }

    pub fn key(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.key_len as usize]
    }

    pub fn value(&self) -> &[u8] {
        let at = self.start + self.key_len as usize;
        &self.buf[at..at + self.value_len as usize]
    }

    pub fn key_len(&self) -> usize {
        self.key_len as usize
    }

    pub fn value_len(&self) -> usize {
        self.value_len as usize
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("key_len", &self.key_len)
            .field("value_len", &self.value_len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_shares_one_buffer_and_keeps_each_write_apart() {
        let pairs: [(&[u8], &[u8]); 4] = [
            (b"k1", b"value one"),
            (b"", b""),
            (b"key3", b""),
            (b"k", b"v"),
        ];
        let recs = Record::group(pairs.iter().copied());
        assert_eq!(recs.len(), 4);
        for (r, (k, v)) in recs.iter().zip(pairs) {
            assert_eq!((r.key(), r.value()), (k, v));
            assert_eq!((r.key_len(), r.value_len()), (k.len(), v.len()));
        }
        assert!(recs.iter().all(|r| Arc::ptr_eq(&r.buf, &recs[0].buf)));
        // The buffer lives as long as any record of it.
        let last = recs[3].clone();
        drop(recs);
        assert_eq!((last.key(), last.value()), (&b"k"[..], &b"v"[..]));
        assert_eq!(Arc::strong_count(&last.buf), 1);
        let one = Record::new(b"a", b"bc");
        assert_eq!((one.key(), one.value()), (&b"a"[..], &b"bc"[..]));
        assert!(Record::group(std::iter::empty()).is_empty());
    }
}
