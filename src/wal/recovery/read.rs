//! Reading many ranges of a device in order, several requests in flight.
//!
//! A range whose read fails is read again block by block once the queue is
//! idle, and blocks that still fail (latent sector errors) are handed over
//! as zeros, which the scan takes for the end of a segment's log: the
//! batches there are taken from another copy, or the log ends there (and an
//! acknowledged batch after it is reported missing, naming the device). A
//! device that reads nothing at all is an error, not a blank device.

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
/// are waited for, so the queue is idle on return. Returns the bytes read
/// and the blocks that could not be read (handed over as zeros); an error
/// when no block could be read at all.
pub(super) fn read_ranges<D: Device>(
    device: &D,
    name: &str,
    queue: &mut D::Queue,
    ranges: &[(u64, u64)],
    mut consume: impl FnMut(usize, &[u8]) -> bool,
) -> Result<(u64, u64), DeviceError> {
    let bs = device.info().block_size as usize;
    let depth = (device.info().queue_depth as usize).clamp(1, MAX_DEPTH);
    let mut free: Vec<IoBuf> = Vec::new();
    // A range read, or `None`: its read failed, to be salvaged.
    let mut done: BTreeMap<usize, Option<IoBuf>> = BTreeMap::new();
    let mut out: Vec<Completion> = Vec::new();
    let (mut next, mut deliver, mut bytes) = (0usize, 0usize, 0u64);
    let (mut unreadable, mut first_err) = (0u64, None);
    let mut stopped = false;
    loop {
        let salvaging = !stopped && done.get(&deliver).is_some_and(Option::is_none);
        while !stopped && !salvaging && next < ranges.len() && queue.in_flight() < depth {
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
        if salvaging && queue.in_flight() == 0 {
            let (lba, blocks) = ranges[deliver];
            let (buf, bad, err) = salvage(device, name, queue, lba, blocks)?;
            unreadable += bad;
            first_err = first_err.or(err);
            bytes += buf.len() as u64 - bad * bs as u64;
            done.insert(deliver, Some(buf));
        } else if queue.in_flight() == 0 && done.is_empty() {
            break;
        } else if queue.poll(&mut out) == 0 && !done.get(&deliver).is_some_and(Option::is_some) {
            wait::wait(queue.wait_hint(), Duration::from_millis(10));
            continue;
        }
        for c in out.drain(..) {
            let buf = c.bufs.into_iter().next().expect("a read has one buffer");
            match c.result {
                Ok(()) => {
                    bytes += buf.len() as u64;
                    done.insert(c.tag as usize, Some(buf));
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                    done.insert(c.tag as usize, None);
                }
            }
        }
        while let Some(Some(buf)) = done.get(&deliver) {
            if !stopped && !consume(deliver, buf) {
                stopped = true;
            }
            if let Some(Some(buf)) = done.remove(&deliver) {
                free.push(buf);
            }
            deliver += 1;
        }
        if stopped && queue.in_flight() == 0 {
            break;
        }
    }
    match first_err {
        Some(e) if bytes == 0 => Err(e),
        _ => Ok((bytes, unreadable)),
    }
}

/// Reads `blocks` blocks from `lba` one at a time (the queue is idle):
/// the bytes, with zeros where a block cannot be read, how many could not,
/// and the first error.
fn salvage<D: Device>(
    device: &D,
    name: &str,
    queue: &mut D::Queue,
    lba: u64,
    blocks: u64,
) -> Result<(IoBuf, u64, Option<DeviceError>), DeviceError> {
    let bs = device.info().block_size as usize;
    let mut all = device.alloc_buf(blocks as usize * bs);
    all.fill(0);
    let (mut bad, mut first_err) = (0u64, None);
    let mut out = Vec::new();
    for i in 0..blocks {
        queue
            .submit(Request::read(i, lba + i, vec![device.alloc_buf(bs)]))
            .map_err(|r| r.error)?;
        let c = loop {
            if queue.poll(&mut out) > 0 {
                break out.pop().expect("one completion");
            }
            wait::wait(queue.wait_hint(), Duration::from_millis(10));
        };
        let buf = c.bufs.into_iter().next().expect("a read has one buffer");
        match c.result {
            Ok(()) => all[i as usize * bs..(i as usize + 1) * bs].copy_from_slice(&buf),
            Err(e) => {
                tracing::warn!(
                    "WAL device {name}: block {} cannot be read ({e}); read as blank: its batches come from another copy, or the log ends there",
                    lba + i
                );
                bad += 1;
                first_err.get_or_insert(e);
            }
        }
    }
    Ok((all, bad, first_err))
}

/// `blocks` blocks from `lba` cut into requests of at most [`CHUNK_BYTES`].
pub(super) fn chunks(lba: u64, blocks: u64, block_size: u32) -> Vec<(u64, u64)> {
    let per = (CHUNK_BYTES / u64::from(block_size)).max(1);
    (0..blocks.div_ceil(per))
        .map(|i| (lba + i * per, per.min(blocks - i * per)))
        .collect()
}
