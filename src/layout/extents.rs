//! The extent allocator: which bytes of each data device hold no block file.
//!
//! Pure bookkeeping in memory; nothing here is written to a device. At open
//! the engine builds an [`Extents`] from each data device's data area, marks
//! the extent of every live block file used ([`Extents::mark_used`], which
//! refuses overlaps, so a manifest that gives two files the same bytes is
//! caught), then allocates for new files and frees the extents of files it
//! deleted.
//!
//! Every extent is a whole number of allocation units (`unit` bytes, a power
//! of two no smaller than a device block) starting at a multiple of `unit`:
//! lengths are rounded up to the unit by [`Extents::alloc`],
//! [`Extents::mark_used`], [`Extents::free`] and [`Extents::shrink`] alike,
//! so the caller may pass a file's exact length everywhere.
//!
//! Free space is kept per device as disjoint, coalesced ranges, indexed by
//! start (for coalescing) and by length (for best fit), so every operation
//! is O(log n) in the number of free ranges.

use std::collections::{BTreeMap, BTreeSet};

/// Why an extent operation was refused. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExtentError {
    /// The device index is not one of the data devices.
    #[error("data device {dev} does not exist ({devices} data devices)")]
    UnknownDevice { dev: u32, devices: usize },

    /// The offset is not a multiple of the allocation unit.
    #[error("data device {dev}: offset {offset} is not a multiple of the allocation unit ({unit} bytes)")]
    Misaligned { dev: u32, offset: u64, unit: u64 },

    /// The extent reaches outside the device's data area.
    #[error("data device {dev}: {len} bytes at offset {offset} reach outside its data area [{start}, {end})")]
    OutsideArea {
        dev: u32,
        offset: u64,
        len: u64,
        start: u64,
        end: u64,
    },

    /// `mark_used`: some of the extent is already in use.
    #[error("data device {dev}: {len} bytes at offset {offset} overlap an extent already in use")]
    InUse { dev: u32, offset: u64, len: u64 },

    /// `free` or `shrink`: some of the extent is free already.
    #[error("data device {dev}: {len} bytes at offset {offset} are not all allocated: {free_len} bytes from offset {free_offset} are free")]
    NotAllocated {
        dev: u32,
        offset: u64,
        len: u64,
        free_offset: u64,
        free_len: u64,
    },

    /// `shrink`: asked to keep more than the extent holds.
    #[error(
        "data device {dev}: cannot keep {keep} bytes of the {len}-byte extent at offset {offset}"
    )]
    BadShrink {
        dev: u32,
        offset: u64,
        len: u64,
        keep: u64,
    },
}

/// Free space of every data device.
#[derive(Clone, Debug)]
pub struct Extents {
    unit: u64,
    areas: Vec<Area>,
}

/// One device's data area and its free ranges.
#[derive(Clone, Debug)]
struct Area {
    start: u64,
    end: u64,
    /// Free ranges, start -> end; disjoint and never adjacent.
    free: BTreeMap<u64, u64>,
    /// The same ranges as (length, start), for best fit.
    by_len: BTreeSet<(u64, u64)>,
    free_bytes: u64,
}

impl Area {
    fn insert(&mut self, start: u64, end: u64) {
        self.free.insert(start, end);
        self.by_len.insert((end - start, start));
        self.free_bytes += end - start;
    }

    fn remove(&mut self, start: u64) -> u64 {
        let end = self.free.remove(&start).expect("a free range starts here");
        self.by_len.remove(&(end - start, start));
        self.free_bytes -= end - start;
        end
    }

    /// The free range holding all of [start, end), if one does.
    fn holding(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self.free.range(..=start).next_back()?;
        (e >= end).then_some((s, e))
    }

    /// The first free range overlapping [start, end), clipped to it.
    fn first_free_in(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let before = self
            .free
            .range(..=start)
            .next_back()
            .filter(|&(_, &e)| e > start);
        let first = before.or_else(|| self.free.range(start..end).next())?;
        Some(((*first.0).max(start), (*first.1).min(end)))
    }

    /// Carves [start, end) out of the free range `(s, e)` that holds it.
    fn take(&mut self, (s, e): (u64, u64), start: u64, end: u64) {
        self.remove(s);
        if s < start {
            self.insert(s, start);
        }
        if end < e {
            self.insert(end, e);
        }
    }

    /// Makes [start, end), known not to overlap a free range, free, merging
    /// it with the ranges just before and after it.
    fn release(&mut self, mut start: u64, mut end: u64) {
        if let Some((&s, &e)) = self.free.range(..start).next_back() {
            if e == start {
                self.remove(s);
                start = s;
            }
        }
        if self.free.contains_key(&end) {
            end = self.remove(end);
        }
        self.insert(start, end);
    }
}

impl Extents {
    /// One free area `[start, end)` in bytes per data device (index =
    /// position), allocated in units of `unit` bytes. Each area is shrunk
    /// inwards to whole units (start rounded up, end rounded down); an area
    /// with no whole unit is empty.
    ///
    /// # Panics
    /// If `unit` is not a power of two.
    pub fn new(areas: &[(u64, u64)], unit: u64) -> Extents {
        assert!(
            unit.is_power_of_two(),
            "extent allocation unit {unit} is not a power of two"
        );
        let areas = areas
            .iter()
            .map(|&(start, end)| {
                let start = start.checked_next_multiple_of(unit).unwrap_or(u64::MAX);
                let end = (end / unit * unit).max(start);
                let mut area = Area {
                    start,
                    end,
                    free: BTreeMap::new(),
                    by_len: BTreeSet::new(),
                    free_bytes: 0,
                };
                if start < end {
                    area.insert(start, end);
                }
                area
            })
            .collect();
        Extents { unit, areas }
    }

    /// The allocation unit in bytes.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// Marks a live file's extent (`len` rounded up to the unit) used, at
    /// open. Refused if it is misaligned, reaches outside the area, or
    /// overlaps anything already used.
    pub fn mark_used(&mut self, dev: u32, offset: u64, len: u64) -> Result<(), ExtentError> {
        let (start, end) = self.check(dev, offset, len)?;
        if start == end {
            return Ok(());
        }
        let area = &mut self.areas[dev as usize];
        let Some(range) = area.holding(start, end) else {
            return Err(ExtentError::InUse { dev, offset, len });
        };
        area.take(range, start, end);
        Ok(())
    }

    /// Allocates `len` bytes (rounded up to the unit) on `dev`, from the
    /// smallest free range that holds them (the lowest such on ties), and
    /// returns the offset. `None` when no free range is big enough, `len` is
    /// 0, or `dev` is not a data device.
    pub fn alloc(&mut self, dev: u32, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        let need = len.checked_next_multiple_of(self.unit)?;
        let area = self.areas.get_mut(dev as usize)?;
        let &(_, start) = area.by_len.range((need, 0)..).next()?;
        let end = area.free[&start];
        area.take((start, end), start, start + need);
        Some(start)
    }

    /// Returns an extent (`len` rounded up to the unit, as `alloc` rounded
    /// it) and merges it with free neighbours. Refused, changing nothing, if
    /// any of it is free already or it is not in the area.
    pub fn free(&mut self, dev: u32, offset: u64, len: u64) -> Result<(), ExtentError> {
        let (start, end) = self.check(dev, offset, len)?;
        if start == end {
            return Ok(());
        }
        let area = &mut self.areas[dev as usize];
        if let Some((free_offset, free_end)) = area.first_free_in(start, end) {
            return Err(ExtentError::NotAllocated {
                dev,
                offset,
                len,
                free_offset,
                free_len: free_end - free_offset,
            });
        }
        area.release(start, end);
        Ok(())
    }

    /// Gives back the tail of the extent `[offset, offset + len)`: keeps its
    /// first `keep` bytes (rounded up to the unit) and frees the rest.
    pub fn shrink(
        &mut self,
        dev: u32,
        offset: u64,
        len: u64,
        keep: u64,
    ) -> Result<(), ExtentError> {
        let (start, end) = self.check(dev, offset, len)?;
        if keep > len {
            return Err(ExtentError::BadShrink {
                dev,
                offset,
                len,
                keep,
            });
        }
        // keep <= len, so the rounded keep is at most the rounded length.
        let kept = keep.next_multiple_of(self.unit);
        if start + kept == end {
            return Ok(());
        }
        self.free(dev, start + kept, end - start - kept)
    }

    /// Free bytes on `dev` (0 for an unknown device).
    pub fn free_bytes(&self, dev: u32) -> u64 {
        self.areas.get(dev as usize).map_or(0, |a| a.free_bytes)
    }

    /// The longest free range on `dev`, in bytes: the most one `alloc` can
    /// get there (0 for an unknown device).
    pub fn largest_free(&self, dev: u32) -> u64 {
        self.areas
            .get(dev as usize)
            .and_then(|a| a.by_len.last())
            .map_or(0, |&(len, _)| len)
    }

    /// The number of data devices.
    pub fn devices(&self) -> usize {
        self.areas.len()
    }

    /// Validates an extent and returns it as [start, end) in whole units.
    fn check(&self, dev: u32, offset: u64, len: u64) -> Result<(u64, u64), ExtentError> {
        let area = self
            .areas
            .get(dev as usize)
            .ok_or(ExtentError::UnknownDevice {
                dev,
                devices: self.areas.len(),
            })?;
        if offset % self.unit != 0 {
            return Err(ExtentError::Misaligned {
                dev,
                offset,
                unit: self.unit,
            });
        }
        let end = len
            .checked_next_multiple_of(self.unit)
            .and_then(|l| offset.checked_add(l));
        match end {
            Some(end) if offset >= area.start && end <= area.end => Ok((offset, end)),
            Some(end) if len == 0 && end == offset => Ok((offset, offset)),
            _ => Err(ExtentError::OutsideArea {
                dev,
                offset,
                len,
                start: area.start,
                end: area.end,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const UNIT: u64 = 4096;

    /// Checks the free ranges against a bitmap of free units.
    fn check_against(ext: &Extents, model: &[Vec<bool>], bases: &[u64]) {
        for (d, area) in ext.areas.iter().enumerate() {
            let mut expect = Vec::new();
            let mut i = 0;
            while i < model[d].len() {
                if model[d][i] {
                    let s = i;
                    while i < model[d].len() && model[d][i] {
                        i += 1;
                    }
                    expect.push((bases[d] + s as u64 * UNIT, bases[d] + i as u64 * UNIT));
                } else {
                    i += 1;
                }
            }
            let got: Vec<(u64, u64)> = area.free.iter().map(|(&s, &e)| (s, e)).collect();
            assert_eq!(got, expect, "free ranges of device {d}");
            let by_len: BTreeSet<(u64, u64)> = got.iter().map(|&(s, e)| (e - s, s)).collect();
            assert_eq!(area.by_len, by_len);
            let free = model[d].iter().filter(|&&f| f).count() as u64 * UNIT;
            assert_eq!(ext.free_bytes(d as u32), free);
            let largest = expect.iter().map(|&(s, e)| e - s).max().unwrap_or(0);
            assert_eq!(ext.largest_free(d as u32), largest);
        }
    }

    fn longest_run(bits: &[bool]) -> usize {
        let (mut best, mut run) = (0, 0);
        for &b in bits {
            run = if b { run + 1 } else { 0 };
            best = best.max(run);
        }
        best
    }

    #[test]
    fn random_sequences_match_a_bitmap() {
        for seed in 0..40u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // Unaligned area bounds: shrunk inwards to whole units.
            let areas = [(1000, 1000 + 200 * UNIT), (8 * UNIT, 8 * UNIT + 77 * UNIT)];
            let bases = [UNIT, 8 * UNIT];
            let mut ext = Extents::new(&areas, UNIT);
            let mut model = vec![vec![true; 199], vec![true; 77]];
            let mut live: Vec<(u32, u64, u64)> = Vec::new();
            check_against(&ext, &model, &bases);
            for _ in 0..600 {
                match rng.random_range(0..10) {
                    0..=4 => {
                        let dev = rng.random_range(0..2u32);
                        let len = rng.random_range(1..20 * UNIT);
                        let units = len.div_ceil(UNIT) as usize;
                        let fits = longest_run(&model[dev as usize]) >= units;
                        match ext.alloc(dev, len) {
                            Some(off) => {
                                assert!(fits);
                                let first = ((off - bases[dev as usize]) / UNIT) as usize;
                                for u in &mut model[dev as usize][first..first + units] {
                                    assert!(*u, "allocated a used unit");
                                    *u = false;
                                }
                                live.push((dev, off, len));
                            }
                            None => assert!(!fits, "alloc failed with {units} units free in a run"),
                        }
                    }
                    5..=7 if !live.is_empty() => {
                        let (dev, off, len) = live.swap_remove(rng.random_range(0..live.len()));
                        ext.free(dev, off, len).unwrap();
                        let first = ((off - bases[dev as usize]) / UNIT) as usize;
                        for u in
                            &mut model[dev as usize][first..first + len.div_ceil(UNIT) as usize]
                        {
                            *u = true;
                        }
                        // Freeing it again is refused and changes nothing.
                        assert!(matches!(
                            ext.free(dev, off, len),
                            Err(ExtentError::NotAllocated { .. })
                        ));
                    }
                    8 if !live.is_empty() => {
                        let i = rng.random_range(0..live.len());
                        let (dev, off, len) = live[i];
                        let keep = rng.random_range(0..=len);
                        ext.shrink(dev, off, len, keep).unwrap();
                        let first = ((off - bases[dev as usize]) / UNIT) as usize;
                        let from = first + keep.div_ceil(UNIT) as usize;
                        for u in &mut model[dev as usize][from..first + len.div_ceil(UNIT) as usize]
                        {
                            *u = true;
                        }
                        if keep == 0 {
                            live.swap_remove(i);
                        } else {
                            live[i].2 = keep;
                        }
                    }
                    _ => {
                        // Rebuild from the live extents, as open does.
                        let mut again = Extents::new(&areas, UNIT);
                        for &(dev, off, len) in &live {
                            again.mark_used(dev, off, len).unwrap();
                        }
                        if let Some(&(dev, off, len)) = live.first() {
                            assert!(matches!(
                                again.mark_used(dev, off, len),
                                Err(ExtentError::InUse { .. })
                            ));
                        }
                        check_against(&again, &model, &bases);
                        ext = again;
                    }
                }
                check_against(&ext, &model, &bases);
            }
            for (dev, off, len) in live.drain(..) {
                ext.free(dev, off, len).unwrap();
            }
            assert_eq!(ext.areas[0].free.len(), 1);
            assert_eq!(ext.areas[1].free.len(), 1);
            assert_eq!(ext.free_bytes(0), 199 * UNIT);
            assert_eq!(ext.largest_free(1), 77 * UNIT);
        }
    }

    #[test]
    fn best_fit_picks_the_smallest_range_that_holds() {
        let mut ext = Extents::new(&[(0, 100 * UNIT)], UNIT);
        let a = ext.alloc(0, 10 * UNIT).unwrap();
        let _b = ext.alloc(0, UNIT).unwrap();
        let c = ext.alloc(0, 3 * UNIT).unwrap();
        let _d = ext.alloc(0, UNIT).unwrap();
        ext.free(0, a, 10 * UNIT).unwrap();
        ext.free(0, c, 3 * UNIT).unwrap();
        // The 3-unit hole fits 2 units better than the 10-unit one.
        assert_eq!(ext.alloc(0, 2 * UNIT), Some(c));
        assert_eq!(ext.alloc(0, 1), Some(c + 2 * UNIT));
        assert_eq!(ext.alloc(0, 5 * UNIT), Some(a));
        assert_eq!(ext.alloc(0, 1000 * UNIT), None);
        assert_eq!(ext.alloc(0, 0), None);
        assert_eq!(ext.alloc(7, UNIT), None);
    }

    #[test]
    fn refusals_name_what_and_change_nothing() {
        let mut ext = Extents::new(&[(0, 16 * UNIT), (0, 0)], UNIT);
        assert_eq!(ext.largest_free(1), 0);
        assert_eq!(ext.alloc(1, 1), None);
        ext.mark_used(0, 4 * UNIT, 2 * UNIT).unwrap();
        let err = ext.mark_used(0, 5 * UNIT, 1).unwrap_err();
        assert_eq!(
            err,
            ExtentError::InUse {
                dev: 0,
                offset: 5 * UNIT,
                len: 1
            }
        );
        assert!(err.to_string().contains("data device 0"));
        assert!(matches!(
            ext.mark_used(0, 15 * UNIT, 2 * UNIT),
            Err(ExtentError::OutsideArea { .. })
        ));
        assert!(matches!(
            ext.mark_used(0, u64::MAX - UNIT + 1, 2 * UNIT),
            Err(ExtentError::OutsideArea { .. })
        ));
        assert!(matches!(
            ext.mark_used(0, 3, 1),
            Err(ExtentError::Misaligned { .. })
        ));
        assert!(matches!(
            ext.mark_used(2, 0, 1),
            Err(ExtentError::UnknownDevice { dev: 2, devices: 2 })
        ));
        // [3, 5) units: unit 3 is free.
        assert_eq!(
            ext.free(0, 3 * UNIT, 2 * UNIT),
            Err(ExtentError::NotAllocated {
                dev: 0,
                offset: 3 * UNIT,
                len: 2 * UNIT,
                free_offset: 3 * UNIT,
                free_len: UNIT
            })
        );
        assert!(matches!(
            ext.shrink(0, 4 * UNIT, UNIT, 2 * UNIT),
            Err(ExtentError::BadShrink { .. })
        ));
        assert_eq!(ext.free_bytes(0), 14 * UNIT);
        ext.shrink(0, 4 * UNIT, 2 * UNIT - 5, UNIT + 1).unwrap();
        assert_eq!(ext.free_bytes(0), 14 * UNIT);
        ext.shrink(0, 4 * UNIT, 2 * UNIT, 1).unwrap();
        assert_eq!(ext.free_bytes(0), 15 * UNIT);
        ext.free(0, 4 * UNIT, 1).unwrap();
        assert_eq!(ext.largest_free(0), 16 * UNIT);
    }
}
