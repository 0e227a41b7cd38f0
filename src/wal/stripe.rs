//! The devices of the WAL's stripe as its reactor sees them, and which of
//! them the next batch goes to.
//!
//! A batch goes to `wal.copies` devices (one unless configured): those with
//! a free batch slot and room in their segment ring that have the fewest
//! bytes in flight (so the soonest free transfer links), round-robin among
//! equals. A device the WAL lost (an I/O error or a failed flush in degraded
//! mode) takes no more batches.

use super::segments::Segments;
use crate::device::{Completion, IoBuf, Queue};

/// One device of the stripe.
pub(crate) struct Dev<Q> {
    pub queue: Q,
    /// Its index in the stripe, as its segment headers say, and its name.
    pub index: u32,
    pub name: String,
    pub segments: Segments,
    pub volatile: bool,
    pub header: Option<IoBuf>,
    pub in_flight: usize,
    /// Bytes of the batches in flight.
    pub in_flight_bytes: usize,
    /// Batches whose write completed and that no flush covers yet.
    pub unflushed: Vec<u64>,
    /// The batches the flush in flight covers.
    pub flushing: Option<Vec<u64>>,
    pub done: Vec<Completion>,
    /// Why the WAL stopped using the device, once it did.
    pub lost: Option<String>,
}

impl<Q: Queue> Dev<Q> {
    pub fn new(queue: Q, index: u32, name: String, segments: Segments, header: IoBuf) -> Dev<Q> {
        let volatile = queue.info().volatile_cache;
        Dev {
            queue,
            index,
            name,
            segments,
            volatile,
            header: Some(header),
            in_flight: 0,
            in_flight_bytes: 0,
            unflushed: Vec::new(),
            flushing: None,
            done: Vec::new(),
            lost: None,
        }
    }
}

/// Where the next batch can go now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Choice {
    /// To these devices (stripe positions), the first the least busy.
    To(Vec<usize>),
    /// Not enough devices have a free slot: wait for a write to complete.
    Busy,
    /// Enough devices have a free slot, but too few of them have room in
    /// their segment ring: the log is full until segments are released.
    Full,
}

/// Chooses `want` devices for a batch of `blocks` blocks, starting the
/// round-robin at `rr`.
pub(super) fn choose<Q>(
    devs: &[Dev<Q>],
    want: usize,
    rr: usize,
    max_in_flight: usize,
    blocks: u64,
) -> Choice {
    let count = devs.len();
    let free: Vec<usize> = (0..count)
        .map(|k| (rr + k) % count)
        .filter(|&d| devs[d].lost.is_none() && devs[d].in_flight < max_in_flight)
        .collect();
    if free.len() < want.max(1) {
        return Choice::Busy;
    }
    let mut fitting: Vec<usize> = free
        .into_iter()
        .filter(|&d| devs[d].segments.fits(blocks))
        .collect();
    if fitting.len() < want.max(1) {
        return Choice::Full;
    }
    // Stable: equals keep their round-robin order.
    fitting.sort_by_key(|&d| devs[d].in_flight_bytes);
    fitting.truncate(want.max(1));
    Choice::To(fitting)
}
