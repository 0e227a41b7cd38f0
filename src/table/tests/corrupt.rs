//! Flipped bytes, garbage with valid checksums, truncated and random files.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{build, random_model, Model};
use crate::table::*;

/// A table and the regions of its file, for corruption tests.
fn small_table(rng: &mut ChaCha8Rng) -> (Model, Vec<u8>, u64) {
    let opts = TableOptions {
        block_bytes: 512,
        bloom_bits_per_key: 10,
        device_block: 512,
    };
    let model = random_model(rng, 150, false);
    let (file, _) = build(&model, &opts, rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    // The data blocks end where the index starts.
    let data_end = t.index.last().map_or(0, |h| h.offset + h.len);
    (model, file, data_end)
}

/// Everything a reader can ask of `file`: true if some answer was an
/// error. Panics on a wrong answer.
fn read_everything(file: &[u8], model: &Model) -> bool {
    let t = match Table::open(&file, file.len() as u64) {
        Ok(t) => t,
        Err(_) => return true,
    };
    let mut failed = false;
    for e in model.values() {
        match t.get(&file, &e.key) {
            Ok(got) => assert_eq!(got.as_ref(), Some(e), "wrong answer"),
            Err(_) => failed = true,
        }
    }
    let mut expect = model.values();
    for got in t.iter(&file, b"", None) {
        match got {
            Ok(got) => assert_eq!(Some(&got), expect.next(), "wrong scan"),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    failed
}

#[test]
fn a_flipped_byte_is_an_error_never_a_wrong_answer() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (model, file, data_end) = small_table(&mut rng);
    assert!(!read_everything(&file, &model));
    let t = Table::open(&file, file.len() as u64).unwrap();
    let meta_end = {
        let f = &file[file.len() - FOOTER_BYTES..];
        let off = u64::from_le_bytes(f[32..40].try_into().unwrap());
        let len = u32::from_le_bytes(f[48..52].try_into().unwrap());
        (off + u64::from(len)) as usize
    };
    assert!(t.meta().data_blocks > 10 && meta_end > data_end as usize);
    let padding = meta_end..file.len() - FOOTER_BYTES;
    // Every byte after the data blocks, every third byte of them.
    let positions = (0..data_end as usize)
        .step_by(3)
        .chain(data_end as usize..file.len());
    for pos in positions {
        let mut bad = file.clone();
        bad[pos] ^= 1 << rng.random_range(0..8);
        let failed = read_everything(&bad, &model);
        assert!(
            failed || padding.contains(&pos),
            "byte {pos} of {} flipped went unnoticed",
            file.len()
        );
    }
}

#[test]
fn corrupt_data_block_error_names_it() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (model, mut file, _) = small_table(&mut rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    let h = t.index[3].clone();
    file[(h.offset + 2) as usize] ^= 0x40;
    let err = t.get(&file, &h.last_key).unwrap_err();
    assert_eq!(
        err,
        TableError::Corrupt {
            what: "data block 3: checksum mismatch (damaged, or a block written for another \
                   place: a misdirected or stale write)"
                .into(),
            offset: h.offset
        }
    );
    // The scan stops at the error.
    let results: Vec<_> = t.iter(&file, b"", None).collect();
    assert!(results.last().unwrap().is_err());
    assert!(results[..results.len() - 1].iter().all(Result::is_ok));
    assert!(results.len() < model.len());
}

/// Recomputes the CRC at the end of `file[range]`: plain for the footer,
/// bound to the file's place (the default one) for a block.
fn reseal(file: &mut [u8], start: usize, end: usize) {
    let seed = if end == file.len() {
        0
    } else {
        Place::at(0, 0).seed(start as u64)
    };
    let crc = crc32c::crc32c_append(seed, &file[start..end - 4]);
    file[end - 4..end].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn garbage_with_valid_checksums_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let (model, file, _) = small_table(&mut rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    let f = &file[file.len() - FOOTER_BYTES..];
    let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(f[at..at + 4].try_into().unwrap()) as usize;
    let mut regions: Vec<(usize, usize)> = vec![
        (u64_at(16), u64_at(16) + u32_at(40)),
        (u64_at(24), u64_at(24) + u32_at(44)),
        (u64_at(32), u64_at(32) + u32_at(48)),
    ];
    for h in &t.index {
        regions.push((h.offset as usize, (h.offset + h.len) as usize));
    }
    for _ in 0..3000 {
        let (start, end) = regions[rng.random_range(0..regions.len())];
        let mut bad = file.clone();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(start..end - 4);
            bad[at] = if rng.random_bool(0.5) {
                rng.random()
            } else {
                0xff
            };
        }
        reseal(&mut bad, start, end);
        // Whatever it answers, it must not panic.
        if let Ok(t) = Table::open(&bad, bad.len() as u64) {
            for e in model.values().step_by(7) {
                let _ = t.get(&bad, &e.key);
            }
            let _ = t.iter(&bad, b"", None).count();
        }
    }
    // Footers with random fields and a valid checksum.
    for _ in 0..3000 {
        let mut bad = file.clone();
        let n = bad.len();
        let at = rng.random_range(n - FOOTER_BYTES + 12..n - 4);
        bad[at] = rng.random();
        if rng.random_bool(0.3) {
            let at = rng.random_range(n - FOOTER_BYTES + 12..n - 4);
            bad[at] = rng.random();
        }
        reseal(&mut bad, n - FOOTER_BYTES, n);
        if let Ok(t) = Table::open(&bad, n as u64) {
            let _ = t.iter(&bad, b"", None).count();
        }
    }
}

#[test]
fn truncated_and_random_files_never_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (_, file, _) = small_table(&mut rng);
    for len in (0..file.len()).step_by(61) {
        assert!(Table::open(&&file[..len], len as u64).is_err());
        // A length that disagrees with the source.
        assert!(Table::open(&&file[..len], file.len() as u64).is_err());
    }
    assert!(Table::open(&file, file.len() as u64 + 512).is_err());
    for _ in 0..2000 {
        let mut junk = vec![0u8; rng.random_range(0..2048)];
        rng.fill(&mut junk[..]);
        let n = junk.len();
        if n >= FOOTER_BYTES && rng.random_bool(0.5) {
            junk[n - FOOTER_BYTES..n - FOOTER_BYTES + 8].copy_from_slice(&MAGIC);
            junk[n - FOOTER_BYTES + 8..n - FOOTER_BYTES + 12]
                .copy_from_slice(&FORMAT_VERSION.to_le_bytes());
            if rng.random_bool(0.5) {
                reseal(&mut junk, n - FOOTER_BYTES, n);
            }
        }
        assert!(Table::open(&junk, n as u64).is_err());
    }
}

#[test]
fn unknown_magic_and_version_are_refused() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let (_, file, _) = small_table(&mut rng);
    let n = file.len();
    let mut bad = file.clone();
    bad[n - FOOTER_BYTES + 7] = b'X';
    assert!(matches!(
        Table::open(&bad, n as u64),
        Err(TableError::BadMagic { .. })
    ));
    let mut bad = file.clone();
    bad[n - FOOTER_BYTES + 8..n - FOOTER_BYTES + 12].copy_from_slice(&4u32.to_le_bytes());
    reseal(&mut bad, n - FOOTER_BYTES, n);
    assert_eq!(
        Table::open(&bad, n as u64).unwrap_err(),
        TableError::UnsupportedVersion(4)
    );
}

/// A file's bytes as read from `place`.
struct At<'a>(&'a [u8], Place);

impl BlockSource for At<'_> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.0.read_at(offset, len)
    }

    fn place(&self) -> Place {
        self.1
    }
}

/// A small table of a random model (from `seed`) built for `place`.
fn built_for(seed: u64, place: Place) -> (Model, Vec<u8>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let model = random_model(&mut rng, 150, false);
    let opts = TableOptions {
        block_bytes: 512,
        bloom_bits_per_key: 10,
        device_block: 512,
    };
    let mut b = TableBuilder::new(opts).at(place);
    for e in model.values() {
        b.add(&e.key, e.lsn, e.kind, &e.value).unwrap();
    }
    (model, b.finish().unwrap().0)
}

#[test]
fn a_file_reads_back_only_from_the_place_it_was_built_for() {
    let (model, file) = built_for(9, Place::at(1, 1 << 20));
    let n = file.len() as u64;
    let t = Table::open(&At(&file, Place::at(1, 1 << 20)), n).unwrap();
    let e = model.values().next().unwrap();
    let src = At(&file, Place::at(1, 1 << 20));
    assert!(t.get(&src, &e.key).unwrap().is_some());
    // Another device, another offset: the intact bytes fail their checks
    // (the engine test of a misdirected block covers a block copied over
    // the blocks of an open file).
    for other in [Place::at(0, 1 << 20), Place::at(1, 2 << 20)] {
        let err = Table::open(&At(&file, other), n).unwrap_err();
        assert!(
            err.to_string().contains("a misdirected or stale write"),
            "{err}"
        );
    }
}

/// A file left at a place by an earlier file (its blocks under a lost
/// write of the file written there since) fails its checks: the blocks
/// name the file's id as well as its place. Bound to the place alone
/// (format 2), the earlier file's blocks passed.
#[test]
fn blocks_of_an_earlier_file_at_the_same_place_fail_their_checks() {
    let place = |id| Place::file(1, 1 << 20, id);
    let (model, earlier) = built_for(11, place(7));
    let n = earlier.len() as u64;
    let src = At(&earlier, place(7));
    let t = Table::open(&src, n).unwrap();
    let e = model.values().next().unwrap();
    assert!(t.get(&src, &e.key).unwrap().is_some());
    let err = Table::open(&At(&earlier, place(8)), n).unwrap_err();
    assert!(
        err.to_string().contains("a misdirected or stale write"),
        "{err}"
    );
}

#[test]
fn format_2_files_bound_to_their_place_alone_are_still_read() {
    let (model, mut file) = built_for(12, Place::at(2, 4 << 20));
    let n = file.len();
    file[n - FOOTER_BYTES + 8..n - FOOTER_BYTES + 12].copy_from_slice(&2u32.to_le_bytes());
    reseal(&mut file, n - FOOTER_BYTES, n);
    // The engine reads every file as its id and place; a format 2 file's
    // blocks are checked against its place alone.
    let src = At(&file, Place::file(2, 4 << 20, 99));
    let t = Table::open(&src, n as u64).unwrap();
    for e in model.values() {
        assert_eq!(t.get(&src, &e.key).unwrap().unwrap().value, e.value);
    }
    assert!(Table::open(&At(&file, Place::file(2, 8 << 20, 99)), n as u64).is_err());
}

#[test]
fn format_1_files_with_plain_checksums_are_still_read() {
    let (model, mut file) = built_for(10, Place::UNBOUND);
    let n = file.len();
    file[n - FOOTER_BYTES + 8..n - FOOTER_BYTES + 12].copy_from_slice(&1u32.to_le_bytes());
    reseal(&mut file, n - FOOTER_BYTES, n);
    // Wherever it is read from: format 1 blocks name no place.
    let src = At(&file, Place::at(3, 12345 * 512));
    let t = Table::open(&src, n as u64).unwrap();
    for e in model.values() {
        assert_eq!(t.get(&src, &e.key).unwrap().unwrap().value, e.value);
    }
}

/// A file built for two places, taken in small chunks: the first copy's
/// bytes, and the second's with its checksums patched in. Each reads back
/// at its own place only, every key as the model has it; a range of one
/// copy rebuilt from the other (`recopy`) is that copy's bytes exactly.
#[test]
fn copies_differ_in_their_checksums_alone_and_rebuild_each_other() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let model = random_model(&mut rng, 300, false);
    let opts = TableOptions {
        block_bytes: 700,
        bloom_bits_per_key: 10,
        device_block: 512,
    };
    let (p0, p1) = (Place::file(0, 1 << 20, 77), Place::file(1, 3 << 20, 77));
    let mut b = TableBuilder::new(opts).at(p0).copies(vec![p1]);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let take = |b: &mut TableBuilder, first: &mut Vec<u8>, second: &mut Vec<u8>| {
        // Chunks of 100 bytes: checksums cut across chunk edges.
        let mut chunk = [0u8; 100];
        while b.fill_ready(&mut chunk) {
            let at = first.len() as u64;
            first.extend_from_slice(&chunk);
            let mut copy = chunk;
            b.copy_crcs().patch(1, at, &mut copy);
            second.extend_from_slice(&copy);
            b.copy_crcs().forget_before(at + 100);
        }
    };
    for e in model.values() {
        b.add(&e.key, e.lsn, e.kind, &e.value).unwrap();
        take(&mut b, &mut first, &mut second);
    }
    let (tail, _, crcs) = b.finish_copies().unwrap();
    let at = first.len() as u64;
    first.extend_from_slice(&tail);
    let mut copy = tail.clone();
    crcs.patch(1, at, &mut copy);
    second.extend_from_slice(&copy);
    assert_eq!(first.len(), second.len());
    assert_ne!(first, second);
    let n = first.len() as u64;
    for (bytes, place, other) in [(&first, p0, p1), (&second, p1, p0)] {
        let src = At(bytes, place);
        let t = Table::open(&src, n).unwrap();
        for e in model.values() {
            assert_eq!(t.get(&src, &e.key).unwrap().as_ref(), Some(e));
        }
        assert!(Table::verify(&src, n).unwrap().bad.is_empty());
        assert!(Table::open(&At(bytes, other), n).is_err());
    }
    // Rebuild the middle of the second copy, and its tail, from the first.
    let t = Table::open(&At(&first, p0), n).unwrap();
    for (from, to) in [(n / 3, n / 2), (n - 600, n)] {
        let (s, e) = t.span(from, to);
        assert!(s <= from && e >= to);
        let mut bytes = first[s as usize..e as usize].to_vec();
        t.recopy(&mut bytes, s, p0, p1).unwrap();
        assert_eq!(bytes, second[s as usize..e as usize]);
        // Bytes that fail their checks at the place they were read from
        // are refused.
        let mut bytes = second[s as usize..e as usize].to_vec();
        assert!(t.recopy(&mut bytes, s, p0, p1).is_err());
    }
    // The second copy bad in one block, the first bad in the block before
    // it, which shares a 512-byte device block with it: the device blocks
    // to rewrite take the neighbour from the second copy's own bytes.
    let pieces = t.pieces();
    let i = (1..pieces.len())
        .find(|&i| {
            let (at, _, sealed) = pieces[i];
            sealed && pieces[i - 1].2 && at % 512 != 0 && at > n / 3
        })
        .expect("a block that does not start on a device block");
    let (from, len, _) = pieces[i];
    let to = from + len;
    let (a, b) = (from / 512 * 512, to.div_ceil(512) * 512);
    let (s, e) = t.span(a, b);
    assert!(s < from, "the span takes the block before");
    let (mut good, mut bad) = (first.clone(), second.clone());
    good[pieces[i - 1].0 as usize + 5] ^= 0x10;
    bad[from as usize + 5] ^= 0x10;
    let mut bytes = good[s as usize..e as usize].to_vec();
    assert!(t.recopy(&mut bytes, s, p0, p1).is_err());
    let mut bytes = good[s as usize..e as usize].to_vec();
    let own = &bad[s as usize..e as usize];
    t.recopy_around(&mut bytes, Some(own), s, p0, p1, (from, to))
        .unwrap();
    assert_eq!(bytes, second[s as usize..e as usize]);
    // Without the bad copy's own bytes, the neighbour stops it.
    let mut bytes = good[s as usize..e as usize].to_vec();
    assert!(t
        .recopy_around(&mut bytes, None, s, p0, p1, (from, to))
        .is_err());
}
