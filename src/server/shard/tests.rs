//! The shard on a real engine (simulated devices): what reads see, what a
//! reply waits for, and that nothing of a turn is kept after it is done.

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::device::AnyDevice;
use crate::engine::Engine;
use crate::server::metrics::testing;

/// A notify that tells no one: the shard's tests poll.
#[derive(Debug)]
struct Quiet;

impl Notify for Quiet {
    fn notify(&self) {}
}

pub(crate) fn notify() -> Arc<dyn Notify> {
    Arc::new(Quiet)
}

/// Retires until `deps` is ready (or 10 s pass).
fn settle(shard: &Shard<'_>, deps: &Deps<'_>) {
    let until = Instant::now() + Duration::from_secs(10);
    while !deps.ready() {
        assert!(Instant::now() < until, "the writes were never acknowledged");
        std::thread::sleep(Duration::from_millis(1));
    }
    shard.retire();
}

/// Retires until no key is dirty (or 10 s pass).
fn drain(shard: &Shard<'_>) {
    let until = Instant::now() + Duration::from_secs(10);
    while shard.pending().0 > 0 {
        assert!(Instant::now() < until, "keys stayed dirty");
        std::thread::sleep(Duration::from_millis(1));
        shard.retire();
    }
}

/// Submits the turn's writes and retires them once `deps` and every
/// other write of the turn are acknowledged.
fn acknowledge(shard: &Shard<'_>, deps: &Deps<'_>) {
    shard.submit(&notify());
    settle(shard, deps);
    drain(shard);
}

/// Keys `{prefix}00` up to `n`, each written to the engine with "v".
fn written(engine: &Engine<AnyDevice>, prefix: &str, n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}{i:02}")).collect();
    let writes: Vec<(&[u8], Option<&[u8]>)> = keys
        .iter()
        .map(|k| (k.as_bytes(), Some(&b"v"[..])))
        .collect();
    engine.write_batch(&writes, None).unwrap();
    keys
}

fn put(k: &str, v: &str) -> Write {
    (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
}

#[test]
fn a_read_of_a_dirty_key_waits_for_its_write_and_the_engine_has_it_after() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    let mut writer = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "1")], &mut writer);
    // Applied at once: a reader sees it, and depends on it.
    let mut reader = Deps::default();
    assert_eq!(shard.get(b"k", &mut reader).unwrap(), Some(b"1".to_vec()));
    assert!(!reader.is_empty() && !reader.ready());
    // Not in the engine until acknowledged.
    assert_eq!(engine.get(b"k").unwrap(), None);
    assert_eq!(shard.pending().0, 1);
    shard.submit(&notify());
    settle(&shard, &reader);
    assert!(writer.ready() && reader.failure().is_none());
    assert_eq!(shard.pending(), (0, 0));
    assert_eq!(engine.get(b"k").unwrap(), Some(b"1".to_vec()));
    // A clean key: nothing to wait for.
    let mut later = Deps::default();
    assert_eq!(shard.get(b"k", &mut later).unwrap(), Some(b"1".to_vec()));
    assert!(later.is_empty());
}

/// A reply goes once its batch is acknowledged, before `retire` puts the
/// batch into the engine; until then reads find the write in the shard.
#[test]
fn a_reply_is_ready_before_its_write_is_in_the_engine() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    let mut writer = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "1")], &mut writer);
    shard.submit(&notify());
    let until = Instant::now() + Duration::from_secs(10);
    while !writer.ready() {
        assert!(Instant::now() < until, "the write was never acknowledged");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(writer.failure().is_none());
    assert!(writer.failure().is_none(), "asked twice");
    assert_eq!(engine.get(b"k").unwrap(), None);
    let mut reader = Deps::default();
    assert_eq!(shard.get(b"k", &mut reader).unwrap(), Some(b"1".to_vec()));
    assert!(reader.ready() && reader.failure().is_none());
    shard.retire();
    assert_eq!(shard.pending(), (0, 0));
    assert_eq!(engine.get(b"k").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn what_a_write_read_is_what_its_readers_wait_for() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    // A `sync` counter; an INCR at `none` reads it and writes it: its
    // readers wait for the `sync` write, not for the `none` one.
    let mut a = Deps::default();
    shard.write(Durability::Sync, vec![put("c", "1")], &mut a);
    let mut b = Deps::default();
    shard.get(b"c", &mut b).unwrap();
    shard.write(Durability::None, vec![put("c", "2")], &mut b);
    let mut reader = Deps::default();
    assert_eq!(shard.get(b"c", &mut reader).unwrap(), Some(b"2".to_vec()));
    let synced = reader.synced.clone().expect("waits for the sync write");
    assert!(Rc::ptr_eq(&synced, a.synced.as_ref().unwrap()));
    assert!(reader.written.is_none());
    // A `none` write read by nobody else: nothing to wait for.
    let mut alone = Deps::default();
    shard.write(Durability::None, vec![put("n", "x")], &mut alone);
    assert!(alone.is_empty());
    acknowledge(&shard, &reader);
    assert_eq!(engine.get(b"c").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_scan_sees_dirty_puts_and_deletes_in_order_and_whole() {
    let engine = testing::any_engine();
    let writes: Vec<(&[u8], Option<&[u8]>)> = [b"a", b"b", b"c", b"d"]
        .iter()
        .map(|k| (&k[..], Some(&b"old"[..])))
        .collect();
    engine.write_batch(&writes, None).unwrap();
    let shard = Shard::new(&engine, 1 << 20);
    let mut w = Deps::default();
    shard.write(
        Durability::Write,
        vec![
            (b"b".to_vec(), None),
            put("bb", "new"),
            put("d", "new"),
            put("e", "new"),
        ],
        &mut w,
    );
    let keys = |limit| {
        let mut deps = Deps::default();
        let got = shard.scan(b"a", None, limit, &mut deps).unwrap();
        got.into_iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8(k).unwrap(),
                    String::from_utf8(v).unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(100), ["a=old", "bb=new", "c=old", "d=new", "e=new"]);
    // Cut where the engine's answer is cut: a dirty delete does not end it.
    assert_eq!(keys(2), ["a=old", "bb=new"]);
    assert_eq!(keys(3), ["a=old", "bb=new", "c=old"]);
    let mut deps = Deps::default();
    let got = shard.scan(b"b", Some(b"c"), 10, &mut deps).unwrap();
    assert_eq!(got, vec![(b"bb".to_vec(), b"new".to_vec())]);
    assert!(!deps.is_empty());
    shard.submit(&notify());
    settle(&shard, &w);
    assert_eq!(keys(100), ["a=old", "bb=new", "c=old", "d=new", "e=new"]);
}

/// A turn whose batches at two levels read each other's keys, and whose
/// last batch reads its own: the `sync` batch writes s1, the `write`
/// batch reads it and writes w1, the next `sync` batch reads w1, writes
/// s2, then reads s2 and writes s1 again (a batch that depends on
/// itself until it is retired). The replies' dependencies, and weak
/// references to every batch.
fn a_turn_that_reads_its_own_writes<'a>(
    shard: &Shard<'a>,
) -> ([Deps<'a>; 3], Vec<Weak<Batch<'a>>>) {
    let mut one = Deps::default();
    shard.write(Durability::Sync, vec![put("s1", "1")], &mut one);
    let mut two = Deps::default();
    shard.get(b"s1", &mut two).unwrap();
    shard.write(Durability::Write, vec![put("w1", "1")], &mut two);
    let mut three = Deps::default();
    shard.get(b"w1", &mut three).unwrap();
    shard.write(Durability::Sync, vec![put("s2", "1")], &mut three);
    shard.get(b"s2", &mut three).unwrap();
    shard.write(Durability::Sync, vec![put("s1", "2")], &mut three);
    let weak = [&one, &two, &three]
        .iter()
        .flat_map(|d| d.written.iter().chain(&d.synced))
        .map(Rc::downgrade)
        .collect();
    ([one, two, three], weak)
}

#[test]
fn nothing_of_a_turn_is_kept_once_it_is_acknowledged() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    let ([one, two, three], mut weak) = a_turn_that_reads_its_own_writes(&shard);
    let mut barrier = Deps::default();
    shard.barrier(&mut barrier);
    weak.extend(
        barrier
            .written
            .iter()
            .chain(&barrier.synced)
            .map(Rc::downgrade),
    );
    shard.submit(&notify());
    settle(&shard, &barrier);
    settle(&shard, &three);
    drop((one, two, three, barrier));
    assert_eq!(shard.pending(), (0, 0));
    for w in weak {
        assert!(w.upgrade().is_none(), "a batch outlived its turn");
    }
}

#[test]
fn a_none_write_over_a_write_on_its_way_stays_the_newest() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    let mut a = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "a")], &mut a);
    let mut b = Deps::default();
    shard.write(Durability::None, vec![put("k", "b")], &mut b);
    assert!(b.is_empty(), "a none write's reply waits for nothing");
    shard.submit(&notify());
    // The later write may be inserted before the earlier one settles.
    shard.retire();
    settle(&shard, &a);
    drain(&shard);
    assert_eq!(engine.get(b"k").unwrap(), Some(b"b".to_vec()));
}

#[test]
fn the_row_cache_answers_what_the_block_files_hold_until_a_flush() {
    let engine = testing::any_engine();
    engine
        .write_batch(&[(&b"a"[..], Some(&b"old"[..]))], None)
        .unwrap();
    engine.flush_all().unwrap();
    let shard = Shard::new(&engine, 1 << 20);
    let read = |k: &[u8]| {
        let mut deps = Deps::default();
        let v = shard.get(k, &mut deps).unwrap();
        (v, deps.is_empty())
    };
    let rows = || (shard.row_stats().hits, shard.row_stats().misses);
    // Misses fill it, a value at once, an absence at the end of the
    // turn (no write of it came); then it answers.
    assert_eq!(read(b"a"), (Some(b"old".to_vec()), true));
    assert_eq!(read(b"none"), (None, true));
    shard.retire();
    assert_eq!(read(b"a"), (Some(b"old".to_vec()), true));
    assert_eq!(read(b"none"), (None, true));
    assert_eq!(rows(), (2, 2));
    // A write: the dirty table answers, and the reader waits for it.
    let mut w = Deps::default();
    shard.write(
        Durability::Sync,
        vec![put("a", "new"), put("none", "now")],
        &mut w,
    );
    assert_eq!(read(b"a"), (Some(b"new".to_vec()), false));
    shard.submit(&notify());
    drain(&shard);
    // Clean again: the memstore has the writes, above the cached rows,
    // which the cache did not have to be told about.
    assert_eq!(read(b"a"), (Some(b"new".to_vec()), true));
    assert_eq!(read(b"none"), (Some(b"now".to_vec()), true));
    assert_eq!(rows(), (2, 2));
    // Flushed: the memstore is gone, and the rows of the view before
    // answer nothing; the new block file does.
    engine.flush_all().unwrap();
    assert_eq!(read(b"a"), (Some(b"new".to_vec()), true));
    assert_eq!(read(b"none"), (Some(b"now".to_vec()), true));
    assert_eq!(rows(), (2, 4));
    assert_eq!(read(b"a"), (Some(b"new".to_vec()), true));
    assert_eq!(rows(), (3, 4));
    // A delete, flushed: an absence.
    let mut d = Deps::default();
    shard.write(Durability::Write, vec![(b"a".to_vec(), None)], &mut d);
    shard.submit(&notify());
    drain(&shard);
    assert_eq!(read(b"a"), (None, true));
    engine.flush_all().unwrap();
    assert_eq!(read(b"a"), (None, true));
    shard.retire();
    assert_eq!(read(b"a"), (None, true));
    assert_eq!(rows(), (4, 5));
    assert_eq!(engine.get(b"a").unwrap(), None);
}

#[test]
fn a_failed_write_leaves_the_row_cache_to_the_engine() {
    let devices = testing::sim_devices(&testing::model(0));
    let engine = testing::open_any(&devices);
    engine
        .write_batch(&[(&b"k"[..], Some(&b"old"[..]))], None)
        .unwrap();
    let shard = Shard::new(&engine, 1 << 20);
    let mut r = Deps::default();
    assert_eq!(shard.get(b"k", &mut r).unwrap(), Some(b"old".to_vec()));
    // Every WAL device gone: the write fails.
    for d in &devices.wal {
        d.vanish();
    }
    let mut w = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "lost")], &mut w);
    shard.submit(&notify());
    let until = Instant::now() + Duration::from_secs(10);
    while shard.pending().0 > 0 {
        assert!(Instant::now() < until, "the write never ended");
        std::thread::sleep(Duration::from_millis(1));
        shard.retire();
    }
    assert!(w.failure().is_some(), "the write failed");
    let mut r = Deps::default();
    assert_eq!(
        shard.get(b"k", &mut r).unwrap(),
        Some(b"old".to_vec()),
        "the engine's value, not the failed write's"
    );
}

#[test]
fn a_failed_batch_keeps_its_keys_until_an_earlier_write_of_them_is_in() {
    // `sync` acknowledgements take 300 ms; `write` ones come at once. No
    // FUA: a `sync` batch the WAL happened to write alone (the test's
    // other batches not yet appended) was durable at once with it.
    let mut m = testing::model(0);
    m.flush_us = 300_000;
    let devices = testing::sim_devices(&m);
    let mut opts = testing::options();
    opts.wal.fua = false;
    let engine = testing::open_any_with(&devices, opts);
    let shard = Shard::new(&engine, 1 << 20);
    // One turn: k = v1 at `sync`, then k = v2 at `write` in a batch that
    // fails (another write of it has a key over the engine's limit).
    let mut a = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "v1")], &mut a);
    let mut b = Deps::default();
    shard.write(Durability::Write, vec![put("k", "v2")], &mut b);
    let mut c = Deps::default();
    shard.write(
        Durability::Write,
        vec![(vec![b'x'; 4000], Some(b"y".to_vec()))],
        &mut c,
    );
    shard.submit(&notify());
    shard.retire();
    assert!(!a.ready(), "the sync batch is still on its way");
    assert!(b.ready() && b.failure().is_some(), "the write batch failed");
    // Not the engine's old value (none): the failed write, and its error.
    let mut r = Deps::default();
    assert_eq!(shard.get(b"k", &mut r).unwrap(), Some(b"v2".to_vec()));
    assert!(r.failure().is_some());
    settle(&shard, &a);
    drain(&shard);
    assert!(a.failure().is_none());
    assert_eq!(engine.get(b"k").unwrap(), Some(b"v1".to_vec()));
    let mut r = Deps::default();
    assert_eq!(
        shard.get(b"k", &mut r).unwrap(),
        Some(b"v1".to_vec()),
        "the row cache agrees with the engine"
    );
}

#[test]
fn a_scan_skips_the_deletes_an_earlier_scan_passed_and_waits_for_them_still() {
    let engine = testing::any_engine();
    let keys = written(&engine, "q", 20);
    let shard = Shard::new(&engine, 1 << 20);
    // A queue popped from its front: ten deletes, not yet acknowledged.
    let mut popper = Deps::default();
    let pops = keys[..10].iter().map(|k| (k.as_bytes().to_vec(), None));
    shard.write(Durability::Sync, pops.collect(), &mut popper);
    fn first<'a>(shard: &Shard<'a>, deps: &mut Deps<'a>) -> Option<String> {
        let got = shard.scan(b"q", Some(b"r"), 1, deps).unwrap();
        got.first()
            .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
    }
    let mut a = Deps::default();
    assert_eq!(first(&shard, &mut a).as_deref(), Some("q10"));
    assert!(!a.ready());
    assert_eq!(
        shard.gaps.borrow().len(),
        1,
        "the passed deletes are a range"
    );
    // The next scan starts past them, and still depends on them: it read
    // that they are gone.
    let mut b = Deps::default();
    assert_eq!(first(&shard, &mut b).as_deref(), Some("q10"));
    let synced = b.synced.clone().expect("waits for the deletes");
    assert!(Rc::ptr_eq(&synced, popper.synced.as_ref().unwrap()));
    // A live write inside the range is found.
    let mut w = Deps::default();
    shard.write(Durability::Sync, vec![put("q05", "back")], &mut w);
    assert_eq!(first(&shard, &mut Deps::default()).as_deref(), Some("q05"));
    acknowledge(&shard, &w);
    // Once the deletes are acknowledged, skipping them waits for nothing.
    let mut c = Deps::default();
    assert_eq!(first(&shard, &mut c).as_deref(), Some("q05"));
    assert!(c.is_empty());
    // Everything gone: the whole range is empty, then written again.
    let all = keys.iter().map(|k| (k.as_bytes().to_vec(), None));
    let mut d = Deps::default();
    shard.write(Durability::Sync, all.collect(), &mut d);
    shard.write(Durability::Sync, vec![(b"q05".to_vec(), None)], &mut d);
    assert_eq!(first(&shard, &mut Deps::default()), None);
    assert_eq!(first(&shard, &mut Deps::default()), None);
    shard.write(Durability::Sync, vec![put("q99", "new")], &mut d);
    assert_eq!(first(&shard, &mut Deps::default()).as_deref(), Some("q99"));
    // An unbounded scan neither uses nor learns ranges.
    let mut e = Deps::default();
    let got = shard.scan(b"q", None, 1, &mut e).unwrap();
    assert_eq!(got[0].0, b"q99");
    acknowledge(&shard, &d);
}

#[test]
fn a_failed_write_no_reply_waited_for_is_an_error_to_read_not_the_value_before() {
    let engine = testing::any_engine();
    engine
        .write_batch(&[(&b"k"[..], Some(&b"old"[..]))], None)
        .unwrap();
    let shard = Shard::new(&engine, 1 << 20);
    assert_eq!(
        shard.get(b"k", &mut Deps::default()).unwrap(),
        Some(b"old".to_vec())
    );
    for level in [Durability::None, Durability::Async] {
        // The batch fails (another write of it has a key over the
        // engine's limit), after its reply went out: nothing waits for it.
        let mut w = Deps::default();
        let writes = vec![put("k", "told"), (vec![b'x'; 4000], Some(b"y".to_vec()))];
        shard.write(level, writes, &mut w);
        assert!(w.ready());
        assert_eq!(
            shard.get(b"k", &mut Deps::default()).unwrap(),
            Some(b"told".to_vec())
        );
        shard.submit(&notify());
        drain(&shard);
        // Not "old", which the client was told is gone: an error.
        assert!(shard.get(b"k", &mut Deps::default()).is_err(), "{level:?}");
        assert!(shard
            .scan(b"k", Some(b"l"), 10, &mut Deps::default())
            .is_err());
        assert_eq!(
            shard
                .scan(b"l", Some(b"m"), 10, &mut Deps::default())
                .unwrap(),
            vec![]
        );
    }
    // A write of it that is in ends the loss.
    let mut w = Deps::default();
    shard.write(Durability::Sync, vec![put("k", "new")], &mut w);
    acknowledge(&shard, &w);
    assert_eq!(
        shard.get(b"k", &mut Deps::default()).unwrap(),
        Some(b"new".to_vec())
    );
    assert_eq!(
        shard
            .scan(b"k", Some(b"l"), 10, &mut Deps::default())
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn popping_what_a_scan_found_grows_its_range_and_a_scan_jumps_ranges_on_its_way() {
    let engine = testing::any_engine();
    let keys = written(&engine, "s", 40);
    let shard = Shard::new(&engine, 1 << 20);
    fn first<'a>(shard: &Shard<'a>, from: &str, deps: &mut Deps<'a>) -> Option<String> {
        let got = shard.scan(from.as_bytes(), Some(b"t"), 1, deps).unwrap();
        got.first()
            .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
    }
    fn pop<'a>(shard: &Shard<'a>, key: &str) -> Deps<'a> {
        let mut d = Deps::default();
        shard.write(
            Durability::Sync,
            vec![(key.as_bytes().to_vec(), None)],
            &mut d,
        );
        d
    }
    // Deletes s20..s29, passed by a scan from s20: one range, [s20, s30).
    for k in &keys[20..30] {
        pop(&shard, k);
    }
    assert_eq!(
        first(&shard, "s20", &mut Deps::default()).as_deref(),
        Some("s30")
    );
    assert_eq!(shard.gaps.borrow().len(), 1);
    // SPOP's pattern: a scan from inside the range finds its end, the key
    // found is deleted, and the range grows over it, so the next scan
    // passes no delete.
    for (i, want) in ["s30", "s31", "s32"].iter().enumerate() {
        let mut d = Deps::default();
        assert_eq!(first(&shard, "s25", &mut d).as_deref(), Some(*want));
        let popped = pop(&shard, want);
        let ranges = shard.gaps.borrow().len();
        assert_eq!(ranges, 1, "pop {i} grew the range, made no other");
        let end = shard.gaps.borrow_mut().skip(b"s25").map(|s| s.0);
        assert_eq!(end, Some(format!("{want}\0").into_bytes()));
        // The grown range depends on the pop: a scan that skips it waits.
        let mut after = Deps::default();
        first(&shard, "s25", &mut after);
        let synced = after.synced.clone().expect("waits for the pop");
        assert!(Rc::ptr_eq(&synced, popped.synced.as_ref().unwrap()));
    }
    // A scan from before the range that meets it on its way jumps it: the
    // deletes s05..s09 and the range [s20, s33) are passed without reading
    // the deletes inside the range, and the whole way becomes one range.
    for k in keys[5..20].iter() {
        pop(&shard, k);
    }
    assert_eq!(
        first(&shard, "s05", &mut Deps::default()).as_deref(),
        Some("s33")
    );
    assert_eq!(shard.gaps.borrow().len(), 1);
    assert_eq!(
        shard.gaps.borrow_mut().skip(b"s05").map(|s| s.0),
        Some(b"s33".to_vec())
    );
    // A live write inside is found again.
    shard.write(
        Durability::Sync,
        vec![put("s12", "back")],
        &mut Deps::default(),
    );
    let mut last = Deps::default();
    assert_eq!(first(&shard, "s05", &mut last).as_deref(), Some("s12"));
    acknowledge(&shard, &last);
}

#[test]
fn popping_a_run_scanned_ahead_in_order_leaves_one_range_that_waits_for_the_pops() {
    let engine = testing::any_engine();
    let keys = written(&engine, "s", 40);
    let shard = Shard::new(&engine, 1 << 20);
    // A delete before the run, not yet acknowledged: the run's range
    // depends on it as well.
    let mut early = Deps::default();
    shard.write(Durability::Sync, vec![(b"s10".to_vec(), None)], &mut early);
    let run = shard
        .scan_ahead(b"s10", b"t", 4, &mut Deps::default())
        .unwrap();
    let run: Vec<String> = run
        .into_iter()
        .map(|(k, _)| String::from_utf8(k).unwrap())
        .collect();
    assert_eq!(run, ["s11", "s12", "s13", "s14"]);
    // The pops in order, each with its set's metadata (a write out of the
    // run's span): nothing is learned until the run is used up.
    let mut pops = Vec::new();
    for k in &run {
        let mut d = Deps::default();
        shard.write(
            Durability::Sync,
            vec![(k.as_bytes().to_vec(), None), put("meta", k)],
            &mut d,
        );
        pops.push(d);
        let used_up = k == "s14";
        assert_eq!(shard.gaps.borrow().len(), usize::from(used_up), "after {k}");
    }
    let end = shard.gaps.borrow_mut().skip(b"s10").map(|s| s.0);
    assert_eq!(end, Some(b"s14\0".to_vec()));
    // A scan from inside the range starts past it, and waits for the
    // pops and the delete before them: it read that they are gone.
    let mut after = Deps::default();
    let got = shard.scan(b"s12", Some(b"t"), 1, &mut after).unwrap();
    assert_eq!(got[0].0, keys[15].as_bytes());
    let synced = after.synced.clone().expect("waits for the pops");
    for d in pops.iter().chain([&early]) {
        assert!(Rc::ptr_eq(&synced, d.synced.as_ref().unwrap()));
    }
    acknowledge(&shard, &after);
    // A live write into a run's span forgets the rest of it: the range
    // covers only what was popped.
    let run = shard
        .scan_ahead(b"s20", b"t", 3, &mut Deps::default())
        .unwrap();
    assert_eq!(run[0].0, b"s20");
    let mut d = Deps::default();
    shard.write(Durability::Sync, vec![(b"s20".to_vec(), None)], &mut d);
    shard.write(Durability::Sync, vec![put("s21x", "new")], &mut d);
    shard.write(Durability::Sync, vec![(b"s21".to_vec(), None)], &mut d);
    shard.write(Durability::Sync, vec![(b"s22".to_vec(), None)], &mut d);
    // Popping s20 emptied everything before s21, the next key found.
    assert_eq!(
        shard.gaps.borrow_mut().skip(b"s20").map(|s| s.0),
        Some(b"s21".to_vec())
    );
    let got = shard
        .scan(b"s20", Some(b"t"), 1, &mut Deps::default())
        .unwrap();
    assert_eq!(got[0].0, b"s21x");
    acknowledge(&shard, &d);
}

#[test]
fn a_key_that_commands_of_one_submission_rewrite_is_logged_once() {
    let engine = testing::any_engine();
    let shard = Shard::new(&engine, 1 << 20);
    let records = || engine.stats().wal.records;
    let before = records();
    // Three commands of one turn: the list's metadata is written by each,
    // an element once by each.
    let mut deps = Deps::default();
    for i in 0..3 {
        let writes = vec![put("meta", &i.to_string()), put(&format!("e{i}"), "x")];
        shard.write(Durability::Sync, writes, &mut deps);
    }
    acknowledge(&shard, &deps);
    // Four records: three elements and the last metadata.
    assert_eq!(records() - before, 4);
    assert_eq!(engine.get(b"meta").unwrap(), Some(b"2".to_vec()));
    for i in 0..3 {
        assert_eq!(
            engine.get(format!("e{i}").as_bytes()).unwrap(),
            Some(b"x".to_vec())
        );
    }

    // Commands split into two submissions (WAL groups) at a command's
    // end: each logs its own last write of the key, so a crash between
    // them leaves the first group's commands whole.
    let before = records();
    let mut deps = Deps::default();
    for i in 0..CHUNK + 1 {
        shard.write(
            Durability::Sync,
            vec![put("hot", &i.to_string())],
            &mut deps,
        );
    }
    acknowledge(&shard, &deps);
    assert_eq!(records() - before, 2);
    assert_eq!(
        engine.get(b"hot").unwrap(),
        Some(CHUNK.to_string().into_bytes())
    );
}

#[test]
fn a_shard_dropped_before_it_retired_batches_that_depend_on_themselves_lets_them_go() {
    let engine = testing::any_engine();
    let weak;
    {
        let shard = Shard::new(&engine, 1 << 20);
        let (replies, w) = a_turn_that_reads_its_own_writes(&shard);
        weak = w;
        shard.submit(&notify());
        drop(replies);
    }
    // Dropped without a `retire`: nothing of the turn is kept, and the
    // engine is the only owner of itself again.
    for w in weak {
        assert!(w.upgrade().is_none(), "a batch outlived its shard");
    }
    engine.close().unwrap();
}
