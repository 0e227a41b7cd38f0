//! Repairing a block file's copy from its others: the device blocks that
//! cover a bad range are rebuilt from another copy's bytes (each block
//! checked there and resealed for the bad copy's place) and written back,
//! then the range is read again and checked; and putting every file back
//! at its number of copies after a data device was replaced.

use std::time::{Duration, Instant};

use super::scrub::ScrubReport;
use super::store::TableHandle;
use super::Engine;
use crate::device::Device;
use crate::table::Place;

/// Rewrites bytes `[from, to)` of the copy of `t` at `bad` from another of
/// its copies. Returns the name of the device the bytes came from, or why
/// no copy could give them.
pub(super) fn repair<D: Device<Queue: Send>>(
    t: &TableHandle<D>,
    bad: (u32, u64),
    from: u64,
    to: u64,
) -> Result<String, String> {
    let store = t.store();
    let file = &t.file;
    let bs = store.block_size(bad.0);
    // Whole device blocks of the bad copy, and the whole pieces they cut.
    let (a, b) = (
        from / bs * bs,
        to.div_ceil(bs).saturating_mul(bs).min(file.len),
    );
    let (start, end) = t.table.span(a, b);
    if start > a || end < b {
        return Err(format!(
            "bytes {a}..{b} of block file {} are not covered by its pieces",
            file.id
        ));
    }
    // The bad copy's own bytes there: blocks of the covering span outside
    // the bad range are kept from them where they are good, so a block
    // bad in the other copy beside the range does not stop the repair.
    let own = store
        .read(bad.0, bad.1 + start, (end - start) as usize)
        .ok();
    let mut why = Vec::new();
    for good in file.places().filter(|&p| p != bad) {
        let name = store.devices[good.0 as usize].info().name.clone();
        let mut bytes = match store.read(good.0, good.1 + start, (end - start) as usize) {
            Ok(b) => b,
            Err(e) => {
                why.push(format!("{name}: {e}"));
                continue;
            }
        };
        let place = |(d, s): (u32, u64)| Place::file(d, s, file.id);
        let made = t.table.recopy_around(
            &mut bytes,
            own.as_deref(),
            start,
            place(good),
            place(bad),
            (from, to),
        );
        if let Err(e) = made {
            why.push(format!("{name}: {e}"));
            continue;
        }
        let cut = &bytes[(a - start) as usize..(b - start) as usize];
        store.write(bad.0, bad.1 + a, cut)?;
        // Read back what was written: a device that drops it is not
        // repaired.
        let back = store
            .read(bad.0, bad.1 + a, cut.len())
            .and_then(|w| match w == cut {
                true => Ok(()),
                false => Err("the blocks read back differ from those written".into()),
            });
        return match back {
            Ok(()) => Ok(name),
            Err(e) => Err(format!("written from {name}, but {e}")),
        };
    }
    Err(if why.is_empty() {
        "it has no other copy".into()
    } else {
        format!("no other copy is good there ({})", why.join("; "))
    })
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Puts every block file back at `flush.copies` copies after a data
    /// device was replaced by a blank one: a scrub rewrites the copies the
    /// device held from the others, and the files written with fewer
    /// copies while it was lost are compacted into files with all of them
    /// (their regions were queued at open). Returns the scrub's report
    /// once no file is short of a copy, or an error after `patience`.
    pub fn restore_copies(&self, patience: Duration) -> Result<ScrubReport, String> {
        let report = self.scrub();
        let want = self
            .inner
            .opts
            .file_copies
            .min(self.inner.store.lost().iter().filter(|&&l| !l).count());
        let until = Instant::now() + patience;
        loop {
            if let Some(e) = self.inner.failure() {
                return Err(e.to_string());
            }
            let short = self
                .files()
                .iter()
                .filter(|f| f.places().count() < want)
                .count();
            if short == 0 {
                return Ok(report);
            }
            if Instant::now() >= until {
                return Err(format!(
                    "{short} block files still have fewer than {want} copies after {patience:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
