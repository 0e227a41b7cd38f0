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
/// round-robin at `rr`. The log is full only when too few devices would
/// have room even once their writes in flight complete: a device with
/// room whose slots are all taken is worth waiting for (a busy device and
/// a full one are not a full log).
pub(super) fn choose<Q>(
    devs: &[Dev<Q>],
    want: usize,
    rr: usize,
    max_in_flight: usize,
    blocks: u64,
) -> Choice {
    let want = want.max(1);
    let count = devs.len();
    let order = (0..count).map(|k| (rr + k) % count);
    let alive = |d: usize| devs[d].lost.is_none();
    let slot = |d: usize| devs[d].in_flight < max_in_flight;
    let room = |d: usize| devs[d].segments.fits(blocks);
    let mut ready: Vec<usize> = order
        .clone()
        .filter(|&d| alive(d) && slot(d) && room(d))
        .collect();
    if ready.len() >= want {
        // Stable: equals keep their round-robin order.
        ready.sort_by_key(|&d| devs[d].in_flight_bytes);
        ready.truncate(want);
        return Choice::To(ready);
    }
    let with_room = order.clone().filter(|&d| alive(d) && room(d)).count();
    let with_slot = order.filter(|&d| alive(d) && slot(d)).count();
    if with_room >= want || with_slot < want {
        Choice::Busy
    } else {
        Choice::Full
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::format::Geometry;
    use crate::wal::recovery::DeviceLog;

    /// A device with one segment of 8 blocks, `used` of them taken by a
    /// batch not yet released, and `in_flight` writes.
    fn dev(used: u64, in_flight: usize) -> Dev<()> {
        let geo = Geometry {
            block_size: 4096,
            first_block: 256,
            seg_blocks: 8,
            segments: 1,
        };
        let log = DeviceLog {
            index: 0,
            next_seq: 1,
            next_segment: 0,
            live: Vec::new(),
            lost: None,
        };
        let mut segments = Segments::resume(geo, &log);
        if used > 0 {
            segments.place(used - 1, 1).expect("room");
        }
        Dev {
            queue: (),
            index: 0,
            name: "d".into(),
            segments,
            volatile: false,
            header: None,
            in_flight,
            in_flight_bytes: in_flight * 4096,
            unflushed: Vec::new(),
            flushing: None,
            done: Vec::new(),
            lost: None,
        }
    }

    #[test]
    fn a_batch_goes_to_the_least_busy_devices_with_room() {
        let devs = [dev(0, 1), dev(0, 0), dev(8, 0)];
        assert_eq!(choose(&devs, 1, 0, 2, 2), Choice::To(vec![1]));
        assert_eq!(choose(&devs, 2, 0, 2, 2), Choice::To(vec![1, 0]));
        // Only two have room: three copies wait for a release.
        assert_eq!(choose(&devs, 3, 0, 2, 2), Choice::Full);
    }

    #[test]
    fn a_busy_device_with_room_beside_a_full_one_is_not_a_full_log() {
        // Device 0 has room but no free slot; device 1 a slot and no room.
        let devs = [dev(0, 2), dev(8, 0)];
        assert_eq!(choose(&devs, 1, 0, 2, 2), Choice::Busy);
        // Both full: the log is full whatever completes.
        let devs = [dev(8, 0), dev(8, 1)];
        assert_eq!(choose(&devs, 1, 0, 2, 2), Choice::Full);
    }

    #[test]
    fn a_lost_device_takes_no_batch() {
        let mut devs = [dev(0, 0), dev(0, 0)];
        devs[0].lost = Some("gone".into());
        assert_eq!(choose(&devs, 1, 0, 2, 2), Choice::To(vec![1]));
        assert_eq!(choose(&devs, 2, 0, 2, 2), Choice::Busy);
    }
}
