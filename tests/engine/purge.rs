//! Deletes that scans keep stepping over are compacted away.

use stria::config::Durability;
use stria::engine::PURGE_AFTER;

use crate::engine_env::{model, open, options, Devices};

#[test]
fn a_region_whose_scans_keep_passing_deletes_is_compacted_until_they_are_gone() {
    let devs = Devices::new(1, 1, 64, &model(1));
    // A memstore that holds every write: only the purge flushes it.
    let mut opts = options();
    opts.flush_size = 32 << 20;
    opts.global_limit = 64 << 20;
    let (e, _) = open(&devs, &opts);
    // A queue drained from its front, in the last region: 20,000 deletes
    // ahead of its one live key.
    let n = 20_000u64;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("r{i:06}").into_bytes()).collect();
    for chunk in keys.chunks(1000) {
        let puts: Vec<(&[u8], Option<&[u8]>)> = chunk
            .iter()
            .map(|k| (k.as_slice(), Some(&b"job"[..])))
            .collect();
        e.write_batch(&puts, Some(Durability::Write)).unwrap();
        let dels: Vec<(&[u8], Option<&[u8]>)> =
            chunk.iter().map(|k| (k.as_slice(), None)).collect();
        e.write_batch(&dels, Some(Durability::Write)).unwrap();
    }
    e.put(b"s-live", b"1", Some(Durability::Sync)).unwrap();
    let first = |e: &stria::engine::Engine<_>| {
        let (found, passed) = e.scan_counting(b"r", None, 1).unwrap();
        assert_eq!(found, vec![(b"s-live".to_vec(), b"1".to_vec())]);
        passed
    };
    assert_eq!(first(&e), n as usize);
    let before = e.stats();
    assert_eq!(before.purges, 0);
    // Each scan passes them all; past the bound the region is purged.
    for _ in 0..PURGE_AFTER / n + 1 {
        first(&e);
    }
    e.wait_idle().unwrap();
    let after = e.stats();
    assert_eq!(after.purges, 1, "{after:?}");
    assert!(after.compactions > before.compactions, "{after:?}");
    assert_eq!(first(&e), 0, "the deletes are gone");
    // Nothing live went with them, and it holds after a restart.
    e.close().unwrap();
    let (e, _) = open(&devs, &opts);
    assert_eq!(first(&e), 0);
    assert_eq!(e.get(b"s-live").unwrap(), Some(b"1".to_vec()));
    assert_eq!(e.get(b"r000007").unwrap(), None);
    e.close().unwrap();
}
