//! Where on a WAL device the next batch goes: a ring of fixed-size segments.
//!
//! Each device's log is a ring of segments after the reserved area. The
//! writer fills the current segment batch by batch; a batch that does not
//! fit starts the next segment, which must be free: a segment is live from
//! the moment it is started until every LSN in it has been released (the
//! memstores flushed past it). When the next segment is still live the log
//! is full and the batch waits: writers feel it as back-pressure, never as
//! an overwritten segment.

use super::format::Geometry;
use super::recovery::DeviceLog;
use super::Lsn;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// Holds batches up to `last_lsn`; not reusable until that is released.
    Live {
        last_lsn: Lsn,
    },
}

/// Where a batch goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The batch's first block.
    pub lba: u64,
    /// Set when the batch starts a segment: its index and sequence number,
    /// and the header block goes right before the batch.
    pub new_segment: Option<(u64, u64)>,
    /// The sequence number of the segment the batch is in.
    pub seq: u64,
}

/// The segment ring of one device.
#[derive(Debug)]
pub(crate) struct Segments {
    geo: Geometry,
    state: Vec<State>,
    /// The segment being filled: index, seq, blocks used (header included).
    current: Option<(u64, u64, u64)>,
    /// Where the next segment starts when there is no current one.
    next_index: u64,
    next_seq: u64,
}

impl Segments {
    /// The ring as recovery left it: segments holding the recovered prefix
    /// stay live; writing resumes in a fresh segment after the newest one.
    pub(crate) fn resume(geo: Geometry, log: &DeviceLog) -> Segments {
        let mut state = vec![State::Free; geo.segments as usize];
        for live in &log.live {
            if let Some(s) = state.get_mut(live.segment as usize) {
                *s = State::Live {
                    last_lsn: live.last_lsn,
                };
            }
        }
        Segments {
            next_index: log.next_segment % geo.segments.max(1),
            next_seq: log.next_seq.max(1),
            geo,
            state,
            current: None,
        }
    }

    /// Whether [`Segments::place`] would find room for `blocks` now.
    pub(crate) fn fits(&self, blocks: u64) -> bool {
        if let Some((_, _, used)) = self.current {
            if used + blocks <= self.geo.seg_blocks {
                return true;
            }
        }
        let index = match self.current {
            Some((index, _, _)) => (index + 1) % self.geo.segments,
            None => self.next_index,
        };
        self.state[index as usize] == State::Free && blocks < self.geo.seg_blocks
    }

    /// Places a batch of `blocks` blocks whose last LSN is `last_lsn`, or
    /// returns `None` when the log is full.
    pub(crate) fn place(&mut self, blocks: u64, last_lsn: Lsn) -> Option<Placement> {
        if let Some((index, seq, used)) = self.current {
            if used + blocks <= self.geo.seg_blocks {
                self.current = Some((index, seq, used + blocks));
                self.state[index as usize] = State::Live { last_lsn };
                return Some(Placement {
                    lba: self.geo.segment_lba(index) + used,
                    new_segment: None,
                    seq,
                });
            }
        }
        let index = match self.current {
            Some((index, _, _)) => (index + 1) % self.geo.segments,
            None => self.next_index,
        };
        if self.state[index as usize] != State::Free || 1 + blocks > self.geo.seg_blocks {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.current = Some((index, seq, 1 + blocks));
        self.state[index as usize] = State::Live { last_lsn };
        Some(Placement {
            lba: self.geo.segment_lba(index) + 1,
            new_segment: Some((index, seq)),
            seq,
        })
    }

    /// Segments holding log that is not released, and segments in all.
    pub(crate) fn usage(&self) -> (u64, u64) {
        let live = self.state.iter().filter(|s| **s != State::Free).count() as u64;
        (live, self.state.len() as u64)
    }

    /// Frees every segment but the current one whose LSNs are all at or
    /// below `released`. Returns how many it freed.
    pub(crate) fn reclaim(&mut self, released: Lsn) -> u64 {
        let current = self.current.map(|(i, _, _)| i);
        let mut freed = 0;
        for (i, s) in self.state.iter_mut().enumerate() {
            if let State::Live { last_lsn } = *s {
                if last_lsn <= released && Some(i as u64) != current {
                    *s = State::Free;
                    freed += 1;
                }
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(segments: u64) -> Segments {
        let geo = Geometry {
            block_size: 4096,
            first_block: 256,
            seg_blocks: 8,
            segments,
        };
        Segments::resume(
            geo,
            &DeviceLog {
                index: 0,
                next_seq: 1,
                next_segment: 0,
                live: Vec::new(),
                lost: None,
            },
        )
    }

    #[test]
    fn fills_a_segment_then_starts_the_next() {
        let mut r = ring(3);
        assert!(r.fits(7));
        let a = r.place(3, 10).unwrap();
        assert_eq!(a.new_segment, Some((0, 1)));
        assert_eq!(a.lba, 257);
        let b = r.place(4, 20).unwrap();
        assert_eq!((b.lba, b.new_segment, b.seq), (260, None, 1));
        // 1 + 3 + 4 = 8 blocks used: the next batch starts segment 1.
        let c = r.place(1, 30).unwrap();
        assert_eq!((c.lba, c.new_segment), (265, Some((1, 2))));
    }

    #[test]
    fn a_full_log_waits_for_release() {
        let mut r = ring(2);
        r.place(7, 10).unwrap();
        r.place(7, 20).unwrap();
        assert!(!r.fits(7));
        assert_eq!(r.place(7, 30), None, "segment 0 still holds LSN 10");
        assert_eq!(r.reclaim(9), 0);
        assert_eq!(r.reclaim(10), 1);
        assert!(r.fits(7));
        let p = r.place(7, 30).unwrap();
        assert_eq!(p.new_segment, Some((0, 3)));
    }

    #[test]
    fn a_batch_larger_than_a_segment_is_never_placed() {
        let mut r = ring(4);
        assert!(!r.fits(8));
        assert_eq!(r.place(8, 1), None);
        assert!(r.fits(7));
    }
}
