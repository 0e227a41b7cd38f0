//! Reading many ranges of a device in order, several requests in flight.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::device::{wait, Completion, Device, DeviceError, IoBuf, Queue, Request};

/// Bytes per read request when a long range is read.
pub(super) const CHUNK_BYTES: u64 = 1 << 20;

/// Most reads one device has in flight during recovery.
const MAX_DEPTH: usize = 8;

/// Reads `ranges` (LBA, blocks) of `device` through `queue`, up to eight at
/// a time, and hands each range's bytes to `consume` in the order given,
/// whatever order the device completes them in. Once `consume` returns
/// false nothing more is submitted or handed over; reads already in flight
/// are waited for, so the queue is idle on return. Returns the bytes read.
pub(super) fn read_ranges<D: Device>(
    device: &D,
    queue: &mut D::Queue,
    ranges: &[(u64, u64)],
    mut consume: impl FnMut(usize, &[u8]) -> bool,
) -> Result<u64, DeviceError> {
    let bs = device.info().block_size as usize;
    let depth = (device.info().queue_depth as usize).clamp(1, MAX_DEPTH);
    let mut free: Vec<IoBuf> = Vec::new();
    let mut done: BTreeMap<usize, IoBuf> = BTreeMap::new();
    let mut out: Vec<Completion> = Vec::new();
    let (mut next, mut deliver, mut bytes) = (0usize, 0usize, 0u64);
    let mut stopped = false;
    loop {
        while !stopped && next < ranges.len() && queue.in_flight() < depth {
            let (lba, blocks) = ranges[next];
            let len = blocks as usize * bs;
            let buf = match free.iter().position(|b| b.capacity() >= len) {
                Some(i) => {
                    let mut b = free.swap_remove(i);
                    b.restore_len();
                    b.truncate(len);
                    b
                }
                None => device.alloc_buf(len),
            };
            queue
                .submit(Request::read(next as u64, lba, vec![buf]))
                .map_err(|r| r.error)?;
            next += 1;
        }
        if queue.in_flight() == 0 {
            return Ok(bytes);
        }
        if queue.poll(&mut out) == 0 {
            wait::wait(queue.wait_hint(), Duration::from_millis(10));
            continue;
        }
        for c in out.drain(..) {
            c.result?;
            let buf = c.bufs.into_iter().next().expect("a read has one buffer");
            bytes += buf.len() as u64;
            done.insert(c.tag as usize, buf);
        }
        while let Some(buf) = done.remove(&deliver) {
            if !stopped && !consume(deliver, &buf) {
                stopped = true;
            }
            deliver += 1;
            free.push(buf);
        }
    }
}

/// `blocks` blocks from `lba` cut into requests of at most [`CHUNK_BYTES`].
pub(super) fn chunks(lba: u64, blocks: u64, block_size: u32) -> Vec<(u64, u64)> {
    let per = (CHUNK_BYTES / u64::from(block_size)).max(1);
    (0..blocks.div_ceil(per))
        .map(|i| (lba + i * per, per.min(blocks - i * per)))
        .collect()
}
