//! Repairing a block file's copy from its others: the device blocks that
//! cover a bad range are rebuilt from another copy's bytes (each block
//! checked there and resealed for the bad copy's place) and written back,
//! then the range is read again and checked.

use super::store::TableHandle;
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
        if let Err(e) = t.table.recopy(&mut bytes, start, place(good), place(bad)) {
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
