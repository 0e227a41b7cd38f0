//! Round trips against a model, read counts, corruption and fuzzing of the
//! block file format.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

mod corrupt;

type Model = BTreeMap<Vec<u8>, Entry>;

fn put(model: &mut Model, key: Vec<u8>, lsn: u64, kind: EntryKind, value: Vec<u8>) {
    let e = Entry {
        key: key.clone(),
        lsn,
        kind,
        value,
    };
    model.insert(key, e);
}

/// A random key: shared prefixes (to exercise prefix compression), a small
/// alphabet (so neighbours share bytes), lengths 0 to ~20.
fn random_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    const PREFIXES: [&[u8]; 4] = [b"", b"user/", b"user/profile/", b"\x00\xff"];
    let mut key = PREFIXES[rng.random_range(0..PREFIXES.len())].to_vec();
    for _ in 0..rng.random_range(0..8) {
        key.push(rng.random_range(b'a'..=b'f'));
    }
    key
}

/// `n` random entries (10% tombstones, values 0..300 bytes) plus a few
/// 16 KiB keys and one 3 MiB value if `big`.
fn random_model(rng: &mut ChaCha8Rng, n: usize, big: bool) -> Model {
    let mut model = Model::new();
    while model.len() < n {
        let key = random_key(rng);
        let lsn = rng.random_range(1..1_000_000);
        if rng.random_bool(0.1) {
            put(&mut model, key, lsn, EntryKind::Delete, Vec::new());
        } else {
            let mut value = vec![0u8; rng.random_range(0..300)];
            rng.fill(&mut value[..]);
            put(&mut model, key, lsn, EntryKind::Put, value);
        }
    }
    if big {
        for i in 0..3u8 {
            let mut key = vec![b'k' + i; 16 * 1024];
            key[100] = i;
            put(&mut model, key, 7, EntryKind::Put, vec![i; 10]);
        }
        put(
            &mut model,
            vec![b'k'; 16 * 1024],
            8,
            EntryKind::Delete,
            Vec::new(),
        );
        let mut huge = vec![0u8; 3 << 20];
        rng.fill(&mut huge[..]);
        put(&mut model, b"user/huge".to_vec(), 9, EntryKind::Put, huge);
    }
    model
}

/// Builds a file of `model`, taking random multiples of the device block
/// with `fill_ready` along the way, and returns the concatenation.
fn build(model: &Model, opts: &TableOptions, rng: &mut ChaCha8Rng) -> (Vec<u8>, TableMeta) {
    let bs = opts.device_block as usize;
    let mut b = TableBuilder::new(opts.clone());
    let mut file = Vec::new();
    for e in model.values() {
        b.add(&e.key, e.lsn, e.kind, &e.value).unwrap();
        if rng.random_bool(0.2) {
            let mut chunk = vec![0u8; bs * rng.random_range(1..=4)];
            while b.fill_ready(&mut chunk) {
                file.extend_from_slice(&chunk);
                assert!(b.len() >= file.len() as u64);
            }
        }
    }
    let (tail, meta) = b.finish().unwrap();
    file.extend_from_slice(&tail);
    assert_eq!(file.len() % bs, 0, "not a whole number of device blocks");
    assert_eq!(meta.file_bytes, file.len() as u64);
    (file, meta)
}

fn expected_meta(model: &Model, file_bytes: u64, data_blocks: u32) -> TableMeta {
    let lsns = model.values().map(|e| e.lsn);
    TableMeta {
        entries: model.len() as u64,
        tombstones: model
            .values()
            .filter(|e| e.kind == EntryKind::Delete)
            .count() as u64,
        data_blocks,
        file_bytes,
        min_key: model.keys().next().cloned().unwrap_or_default(),
        max_key: model.keys().next_back().cloned().unwrap_or_default(),
        min_lsn: lsns.clone().min().unwrap_or(0),
        max_lsn: lsns.max().unwrap_or(0),
    }
}

fn range_model(model: &Model, from: &[u8], to: Option<&[u8]>) -> Vec<Entry> {
    if to.is_some_and(|to| to <= from) {
        return Vec::new();
    }
    let hi = to.map_or(Bound::Unbounded, |t| Bound::Excluded(t.to_vec()));
    model
        .range((Bound::Included(from.to_vec()), hi))
        .map(|(_, e)| e.clone())
        .collect()
}

/// Checks every lookup and many scans of `file` against `model`.
fn check_against_model(file: &[u8], model: &Model, meta: &TableMeta, rng: &mut ChaCha8Rng) {
    let t = Table::open(&file, file.len() as u64).unwrap();
    assert_eq!(t.meta(), meta);
    for e in model.values() {
        let before = t.block_reads();
        assert_eq!(t.get(&file, &e.key).unwrap().as_ref(), Some(e));
        assert_eq!(t.block_reads() - before, 1);
    }
    for _ in 0..500 {
        let key = random_key(rng);
        let before = t.block_reads();
        assert_eq!(t.get(&file, &key).unwrap().as_ref(), model.get(&key));
        assert!(t.block_reads() - before <= 1);
    }
    let all: Vec<Entry> = t.iter(&file, b"", None).map(Result::unwrap).collect();
    assert_eq!(all, model.values().cloned().collect::<Vec<_>>());
    for _ in 0..100 {
        let from = random_key(rng);
        let to = rng.random_bool(0.5).then(|| random_key(rng));
        let got: Vec<Entry> = t
            .iter(&file, &from, to.as_deref())
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            got,
            range_model(model, &from, to.as_deref()),
            "{from:?}..{to:?}"
        );
    }
}

#[test]
fn round_trip_against_a_model() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let configs = [
        (TableOptions::default(), 3000, true),
        (
            TableOptions {
                block_bytes: 256,
                bloom_bits_per_key: 10,
                device_block: 512,
            },
            2000,
            true,
        ),
        (
            TableOptions {
                block_bytes: 0,
                bloom_bits_per_key: 0,
                device_block: 1,
            },
            300,
            false,
        ),
        (TableOptions::default(), 1, false),
    ];
    for (opts, n, big) in configs {
        let model = random_model(&mut rng, n, big);
        let (file, meta) = build(&model, &opts, &mut rng);
        assert_eq!(
            meta,
            expected_meta(&model, file.len() as u64, meta.data_blocks)
        );
        if opts.block_bytes == 0 {
            assert_eq!(meta.data_blocks as usize, model.len());
        }
        if big {
            assert!(meta.data_blocks > 3);
        }
        check_against_model(&file, &model, &meta, &mut rng);

        // The owning iterator, over a shared source, can outlive this scope.
        let t = Arc::new(Table::open(&file, file.len() as u64).unwrap());
        let src = Arc::new(file);
        let from = random_key(&mut rng);
        let it: Box<dyn Iterator<Item = Result<Entry>> + 'static> =
            Box::new(t.iter_owned(Arc::clone(&src), from.clone(), None));
        let got: Vec<Entry> = it.map(Result::unwrap).collect();
        assert_eq!(got, range_model(&model, &from, None));
    }
}

#[test]
fn empty_table_is_valid() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let (file, meta) = build(&Model::new(), &TableOptions::default(), &mut rng);
    assert_eq!(file.len(), 4096);
    assert_eq!(meta, expected_meta(&Model::new(), 4096, 0));
    let t = Table::open(&file, 4096).unwrap();
    assert_eq!(t.meta(), &meta);
    assert!(!t.may_contain(b""));
    assert_eq!(t.get(&file, b"").unwrap(), None);
    assert_eq!(t.get(&file, b"x").unwrap(), None);
    assert_eq!(t.iter(&file, b"", None).count(), 0);
    assert_eq!(t.block_reads(), 0);
}

#[test]
fn a_get_reads_at_most_one_block_and_the_bloom_filter_works() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut model = Model::new();
    for i in 0..10_000u32 {
        let key = format!("key-{:08}", i * 2).into_bytes();
        put(&mut model, key, u64::from(i), EntryKind::Put, vec![1; 100]);
    }
    let (file, _) = build(&model, &TableOptions::default(), &mut rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    for e in model.values() {
        let before = t.block_reads();
        assert_eq!(t.get(&file, &e.key).unwrap().as_ref(), Some(e));
        assert_eq!(t.block_reads() - before, 1);
    }
    // Odd numbers within the key range: absent, and only the bloom filter
    // can tell.
    let (mut positives, mut reads) = (0, 0);
    for i in 0..10_000u32 {
        let key = format!("key-{:08}", i * 2 + 1).into_bytes();
        positives += u32::from(t.may_contain(&key));
        let before = t.block_reads();
        assert_eq!(t.get(&file, &key).unwrap(), None);
        let delta = t.block_reads() - before;
        assert!(delta <= 1);
        reads += delta;
    }
    assert!(positives < 200, "{positives} false positives in 10000");
    assert_eq!(reads, u64::from(positives));
}

#[test]
fn builder_refuses_misuse_and_stays_usable() {
    let mut b = TableBuilder::new(TableOptions::default());
    b.add(b"a", 1, EntryKind::Put, b"1").unwrap();
    b.add(b"c", 2, EntryKind::Put, b"3").unwrap();
    let len = b.len();
    for key in [&b"b"[..], b"c", b"", b"a"] {
        assert!(matches!(
            b.add(key, 9, EntryKind::Put, b"x"),
            Err(TableError::OutOfOrder { index: 2, .. })
        ));
    }
    assert!(matches!(
        b.add(b"d", 9, EntryKind::Delete, b"x"),
        Err(TableError::InvalidEntry { index: 2, .. })
    ));
    assert_eq!(b.len(), len);
    b.add(b"cc", 3, EntryKind::Delete, b"").unwrap();
    b.add(b"d", 4, EntryKind::Put, b"").unwrap();
    let (file, meta) = b.finish().unwrap();
    assert_eq!((meta.entries, meta.tombstones), (4, 1));
    let t = Table::open(&file, file.len() as u64).unwrap();
    let keys: Vec<Vec<u8>> = t.iter(&file, b"", None).map(|e| e.unwrap().key).collect();
    assert_eq!(keys, [&b"a"[..], b"c", b"cc", b"d"]);
}

#[test]
fn fill_ready_hands_out_only_sealed_bytes_in_order() {
    let opts = TableOptions {
        block_bytes: 4096,
        bloom_bits_per_key: 10,
        device_block: 4096,
    };
    let mut b = TableBuilder::new(opts);
    let mut chunk = vec![0u8; 8192];
    assert!(!b.fill_ready(&mut chunk));
    assert!(!b.fill_ready(&mut []));
    b.add(b"a", 1, EntryKind::Put, &[7; 5000]).unwrap();
    // One sealed block of ~5 KiB: not enough for 8 KiB.
    assert!(!b.fill_ready(&mut chunk));
    b.add(b"b", 1, EntryKind::Put, &[8; 5000]).unwrap();
    assert!(b.fill_ready(&mut chunk));
    assert_eq!(chunk[0], 0); // shared
    assert!(chunk[20..5000].iter().all(|&x| x == 7));
    assert!(!b.fill_ready(&mut chunk));
    let (tail, meta) = b.finish().unwrap();
    assert_eq!(tail.len() as u64 + 8192, meta.file_bytes);
}

#[test]
fn max_file_bytes_is_an_upper_bound() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let option_sets = [
        TableOptions::default(),
        TableOptions {
            block_bytes: 0,
            bloom_bits_per_key: 0,
            device_block: 1,
        },
        TableOptions {
            block_bytes: 100,
            bloom_bits_per_key: 16,
            device_block: 512,
        },
    ];
    let mut cases: Vec<Model> = vec![Model::new()];
    // Many tiny entries: 1- and 2-byte keys, empty values.
    let mut tiny = Model::new();
    for i in 0..=255u8 {
        put(&mut tiny, vec![i], u64::MAX, EntryKind::Delete, Vec::new());
        for j in 0..=255u8 {
            put(
                &mut tiny,
                vec![i, j],
                u64::MAX - 1,
                EntryKind::Put,
                Vec::new(),
            );
        }
    }
    cases.push(tiny);
    // One huge value, one huge key.
    let mut huge = Model::new();
    put(
        &mut huge,
        vec![9; 16 * 1024],
        u64::MAX,
        EntryKind::Put,
        vec![1; 3 << 20],
    );
    cases.push(huge);
    for n in [1, 10, 1000] {
        cases.push(random_model(&mut rng, n, false));
    }
    for opts in &option_sets {
        for model in &cases {
            let keys: u64 = model.keys().map(|k| k.len() as u64).sum();
            let values: u64 = model.values().map(|e| e.value.len() as u64).sum();
            let bound = TableBuilder::max_file_bytes(opts, model.len() as u64, keys, values);
            let (file, _) = build(model, opts, &mut rng);
            assert!(
                file.len() as u64 <= bound,
                "{} entries: {} bytes built, bound {bound}",
                model.len(),
                file.len()
            );
        }
    }
}

/// A file in memory with a block cache, as the engine's device files have.
struct Cached<'a> {
    file: &'a [u8],
    cache: &'a BlockCache,
}

impl BlockSource for Cached<'_> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.file.read_at(offset, len)
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        Some((self.cache, 9))
    }
}

#[test]
fn gets_fill_the_block_cache_scans_only_their_first_blocks() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut model = Model::new();
    for i in 0..2_000u32 {
        let key = format!("key-{i:08}").into_bytes();
        put(&mut model, key, u64::from(i), EntryKind::Put, vec![7; 100]);
    }
    let (file, _) = build(&model, &TableOptions::default(), &mut rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    let blocks = t.index.len() as u64;
    assert!(blocks > 4);
    let cache = BlockCache::new(64 << 20, TableOptions::default().block_bytes);
    let src = Cached {
        file: &file,
        cache: &cache,
    };
    // A scan reads every block and caches its first four only.
    let all: Vec<Entry> = t.iter(&src, b"", None).map(|e| e.unwrap()).collect();
    assert_eq!(all.len(), model.len());
    assert_eq!((t.block_reads(), cache.stats().blocks), (blocks, 4));
    // Every get reads its block the first time only (the scan cached
    // four).
    for _ in 0..2 {
        for e in model.values() {
            assert_eq!(t.get(&src, &e.key).unwrap().as_ref(), Some(e));
        }
    }
    assert_eq!(t.block_reads(), 2 * blocks - 4);
    assert_eq!(cache.stats().blocks, blocks);
    // Now a scan reads nothing, and sees the same entries.
    let again: Vec<Entry> = t.iter(&src, b"", None).map(|e| e.unwrap()).collect();
    assert_eq!(again, all);
    assert_eq!(t.block_reads(), 2 * blocks - 4);
}

#[test]
fn a_corrupt_block_is_never_cached() {
    let mut model = Model::new();
    for i in 0..2_000u32 {
        let key = format!("key-{i:08}").into_bytes();
        put(&mut model, key, u64::from(i), EntryKind::Put, vec![7; 100]);
    }
    let (mut file, _) = build(
        &model,
        &TableOptions::default(),
        &mut ChaCha8Rng::seed_from_u64(12),
    );
    let t = Table::open(&file, file.len() as u64).unwrap();
    let h = t.index[2].clone();
    file[(h.offset + 5) as usize] ^= 0x01;
    let cache = BlockCache::new(64 << 20, 4096);
    let src = Cached {
        file: &file,
        cache: &cache,
    };
    for _ in 0..2 {
        assert!(matches!(
            t.get(&src, &h.last_key),
            Err(TableError::Corrupt { .. })
        ));
    }
    assert_eq!(t.block_reads(), 2, "the bad block is read again each time");
    assert_eq!(cache.stats().blocks, 0);
}

#[test]
fn lookups_in_cached_blocks_start_at_seek_points_and_find_what_a_full_scan_does() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let model = random_model(&mut rng, 3_000, false);
    let (file, _) = build(&model, &TableOptions::default(), &mut rng);
    let t = Table::open(&file, file.len() as u64).unwrap();
    let cache = BlockCache::new(64 << 20, TableOptions::default().block_bytes);
    let src = Cached {
        file: &file,
        cache: &cache,
    };
    // Fill the cache (blocks with seek points), then look up every key,
    // and keys just below and above each one, which may be absent.
    for e in model.values() {
        t.get(&src, &e.key).unwrap();
    }
    let reads = t.block_reads();
    for e in model.values() {
        assert_eq!(t.get(&src, &e.key).unwrap().as_ref(), Some(e));
        let mut above = e.key.clone();
        above.push(0);
        let mut below = e.key.clone();
        below.pop();
        for probe in [above, below] {
            let want = model.get(&probe);
            assert_eq!(t.get(&src, &probe).unwrap().as_ref(), want, "{probe:?}");
        }
    }
    assert_eq!(
        t.block_reads(),
        reads,
        "every lookup was served from the cache"
    );
    // The seek points count against the cache.
    assert!(cache.stats().bytes > t.index.iter().map(|h| h.len).sum::<u64>());
}
