//! Sparse byte storage for the simulated media.
//!
//! A simulated device may be configured with gigabytes of capacity, and most
//! of it is never written in a test, so storage is allocated in 64 KiB chunks
//! on first write and unwritten bytes read as zeroes. Chunks sit behind an
//! `Arc` so that cloning a whole image (as a reboot does, to keep the old
//! device readable) shares every chunk and copies one only when either side
//! writes to it.

use std::collections::HashMap;
use std::sync::Arc;

/// Bytes per allocation unit.
const CHUNK: u64 = 64 << 10;

/// A sparse, copy-on-write byte image.
#[derive(Clone, Default)]
pub(super) struct Store {
    chunks: HashMap<u64, Arc<Vec<u8>>>,
}

impl Store {
    /// Copies the bytes at `offset..offset + out.len()` into `out`.
    pub(super) fn read(&self, offset: u64, out: &mut [u8]) {
        let mut done = 0;
        for (index, within, len) in pieces(offset, out.len()) {
            let dst = &mut out[done..done + len];
            match self.chunks.get(&index) {
                Some(chunk) => dst.copy_from_slice(&chunk[within..within + len]),
                None => dst.fill(0),
            }
            done += len;
        }
    }

    /// Stores `data` at `offset`.
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0;
        for (index, within, len) in pieces(offset, data.len()) {
            let src = &data[done..done + len];
            done += len;
            let chunk = match self.chunks.get_mut(&index) {
                Some(chunk) => chunk,
                // Zeroes over an unallocated chunk change nothing a read can
                // see; skipping them keeps a zero-filled device sparse.
                None if src.iter().all(|&b| b == 0) => continue,
                None => self
                    .chunks
                    .entry(index)
                    .or_insert_with(|| Arc::new(vec![0; CHUNK as usize])),
            };
            Arc::make_mut(chunk)[within..within + len].copy_from_slice(src);
        }
    }

    /// Bytes of memory the image holds (shared chunks counted in full).
    pub(super) fn allocated_bytes(&self) -> u64 {
        self.chunks.len() as u64 * CHUNK
    }
}

/// Splits `offset..offset + len` at chunk boundaries into
/// `(chunk index, offset within the chunk, length)`.
fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize)> {
    let end = offset + len as u64;
    let mut pos = offset;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let index = pos / CHUNK;
        let within = pos % CHUNK;
        let piece = (CHUNK - within).min(end - pos);
        pos += piece;
        Some((index, within as usize, piece as usize))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_bytes_read_as_zeroes_and_allocate_nothing() {
        let store = Store::default();
        let mut out = vec![1; 4096];
        store.read(1 << 40, &mut out);
        assert!(out.iter().all(|&b| b == 0));
        assert_eq!(store.allocated_bytes(), 0);
    }

    #[test]
    fn writes_spanning_chunks_read_back() {
        let mut store = Store::default();
        let data: Vec<u8> = (0..3 * CHUNK as usize)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        store.write(CHUNK - 100, &data);
        let mut out = vec![0; data.len() + 200];
        store.read(CHUNK - 200, &mut out);
        assert!(out[..100].iter().all(|&b| b == 0));
        assert_eq!(&out[100..100 + data.len()], &data[..]);
        assert!(out[100 + data.len()..].iter().all(|&b| b == 0));
        assert_eq!(store.allocated_bytes(), 4 * CHUNK);
    }

    #[test]
    fn zeroes_do_not_allocate_but_do_overwrite() {
        let mut store = Store::default();
        store.write(0, &[0; 8192]);
        assert_eq!(store.allocated_bytes(), 0);
        store.write(0, &[7; 8]);
        store.write(4, &[0; 2]);
        let mut out = [9; 8];
        store.read(0, &mut out);
        assert_eq!(out, [7, 7, 7, 7, 0, 0, 7, 7]);
    }

    #[test]
    fn clones_share_until_written() {
        let mut a = Store::default();
        a.write(0, &[1; 16]);
        let mut b = a.clone();
        b.write(0, &[2; 16]);
        let (mut x, mut y) = ([0; 16], [0; 16]);
        a.read(0, &mut x);
        b.read(0, &mut y);
        assert_eq!((x, y), ([1; 16], [2; 16]));
    }
}
