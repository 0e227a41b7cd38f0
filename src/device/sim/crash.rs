//! What a crash leaves of the writes that were not yet durable.
//!
//! A write is at risk when it sits in the volatile cache or was in flight
//! when the crash came. Each at-risk write, in order (cached writes oldest
//! first, then in-flight writes in submission order), is independently, by
//! a seeded draw:
//! - kept whole,
//! - dropped whole, or
//! - torn: each `sector_size` piece of it (pieces split at multiples of
//!   `sector_size` from the start of the device) kept or dropped on its own.
//!
//! A device cannot tear inside its atomic write unit, so a sector holds
//! either the old or the new bytes, never a mix.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::store::Store;

/// The fate of one at-risk write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Kept,
    Dropped,
    Torn,
}

/// Draws a fate for each of `writes` (`(lba, data)`) and applies what
/// survives onto `image`.
pub(super) fn settle<'a>(
    image: &mut Store,
    writes: impl IntoIterator<Item = (u64, &'a [u8])>,
    block_size: u32,
    sector_size: u32,
    rng: &mut ChaCha8Rng,
) {
    let (bs, sector) = (u64::from(block_size), u64::from(sector_size));
    for (lba, data) in writes {
        let start = lba * bs;
        match draw(rng) {
            Fate::Kept => image.write(start, data),
            Fate::Dropped => {}
            Fate::Torn => {
                for (offset, piece) in sectors(start, data, sector) {
                    if rng.random_bool(0.5) {
                        image.write(offset, piece);
                    }
                }
            }
        }
    }
}

/// Kept or dropped, one chance in two, for a write in flight when its
/// process died: the device kept power and executed or refused the whole
/// command.
pub(super) fn survives_process_crash(rng: &mut ChaCha8Rng) -> bool {
    rng.random_bool(0.5)
}

fn draw(rng: &mut ChaCha8Rng) -> Fate {
    match rng.random_range(0..3) {
        0 => Fate::Kept,
        1 => Fate::Dropped,
        _ => Fate::Torn,
    }
}

/// Splits `data`, which lives at device offset `start`, at multiples of
/// `sector` into `(offset, piece)`.
fn sectors(start: u64, data: &[u8], sector: u64) -> impl Iterator<Item = (u64, &[u8])> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= data.len() {
            return None;
        }
        let offset = start + done as u64;
        let len = (sector - offset % sector).min((data.len() - done) as u64) as usize;
        let piece = (offset, &data[done..done + len]);
        done += len;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_split_at_device_multiples() {
        let data = [0u8; 1024];
        let pieces: Vec<_> = sectors(512, &data, 4096)
            .map(|(o, p)| (o, p.len()))
            .collect();
        assert_eq!(pieces, [(512, 1024)]);
        let pieces: Vec<_> = sectors(3584, &data, 1024)
            .map(|(o, p)| (o, p.len()))
            .collect();
        assert_eq!(pieces, [(3584, 512), (4096, 512)]);
        let pieces: Vec<_> = sectors(0, &data, 512).map(|(o, p)| (o, p.len())).collect();
        assert_eq!(pieces, [(0, 512), (512, 512)]);
    }
}
