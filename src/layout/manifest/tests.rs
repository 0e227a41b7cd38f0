use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::record::{self, Kind, Parsed};
use super::*;
use crate::config::{SimConfig, SimFaults};
use crate::device::sim::{SimDevice, SimQueue};
use crate::device::{wait, Request};

const BS: u64 = 4096;
/// 256 KiB after block 0: two halves of 32 blocks.
const AREA: (u64, u64) = (BS, 256 << 10);
/// 128 KiB: two halves of 16 blocks, for frequent checkpoint switches.
const SMALL: (u64, u64) = (BS, 128 << 10);
const CAPACITY: u64 = 80;

fn sim(name: &str, seed: u64, volatile_cache: bool, faults: SimFaults) -> SimDevice {
    let model = SimConfig {
        volatile_cache,
        write_us: 0,
        flush_us: 0,
        read_us: 0,
        bandwidth: 0,
        seed,
        faults,
        ..SimConfig::default()
    };
    SimDevice::new(name, BS as u32, CAPACITY, 64, model)
}

fn devices(n: usize) -> Vec<SimDevice> {
    (0..n)
        .map(|i| sim(&format!("m{i}"), i as u64, true, SimFaults::default()))
        .collect()
}

fn queues(devs: &[SimDevice]) -> Vec<SimQueue> {
    devs.iter().map(|d| d.open_queue().unwrap()).collect()
}

fn initial() -> ManifestState {
    ManifestState::new(vec![b"g".to_vec(), b"p".to_vec()])
}

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = rng.random_range(0..48);
    (0..n).map(|_| rng.random_range(b'a'..=b'z')).collect()
}

fn file(rng: &mut ChaCha8Rng, id: u64, regions: usize) -> FileRecord {
    let (a, b) = (key(rng), key(rng));
    FileRecord {
        id,
        region: rng.random_range(0..regions as u32),
        device: rng.random_range(0..4),
        offset: rng.random::<u32>() as u64 * BS,
        len: rng.random_range(1..1 << 30),
        min_key: a.clone().min(b.clone()),
        max_key: a.max(b),
        max_lsn: rng.random(),
        entries: rng.random_range(0..1_000_000),
        copies: match rng.random_range(0..3) {
            0 => vec![(4, rng.random::<u32>() as u64 * BS)],
            _ => Vec::new(),
        },
    }
}

/// A random edit that applies to `s`, keeping the file count bounded.
fn random_edit(rng: &mut ChaCha8Rng, s: &ManifestState) -> Edit {
    let mut e = Edit::default();
    let ids: Vec<u64> = s.files.keys().copied().collect();
    let removes = if ids.len() > 20 {
        rng.random_range(2..5)
    } else {
        rng.random_range(0..2)
    };
    for _ in 0..removes.min(ids.len()) {
        let id = ids[rng.random_range(0..ids.len())];
        if !e.remove.contains(&id) {
            e.remove.push(id);
        }
    }
    for i in 0..rng.random_range(0..4) {
        e.add.push(file(rng, s.next_file_id + i, s.regions()));
    }
    for _ in 0..rng.random_range(0..3) {
        e.flushed.push((
            rng.random_range(0..s.regions() as u32),
            rng.random_range(0..1000),
        ));
    }
    if rng.random_bool(0.3) {
        e.replay_from = Some(rng.random_range(0..1000));
    }
    if rng.random_bool(0.1) {
        e.wal_back.push(rng.random_range(0..4));
    }
    if rng.random_bool(0.15) {
        e.wal_lost.push(rng.random_range(0..4));
    }
    e
}

fn open(
    devs: &[SimDevice],
    area: (u64, u64),
) -> Result<Option<(Manifest<SimDevice>, ManifestState)>, ManifestError> {
    let mut qs = queues(devs);
    Manifest::open(devs.to_vec(), area, &mut qs)
}

fn open_state(devs: &[SimDevice], area: (u64, u64)) -> ManifestState {
    open(devs, area).unwrap().expect("a manifest").1
}

fn write_raw(dev: &SimDevice, offset: u64, data: &[u8]) {
    let mut q = dev.open_queue().unwrap();
    let mut buf = dev.alloc_buf(data.len());
    buf.copy_from_slice(data);
    let c = wait::run(&mut q, Request::write_fua(1, offset / BS, vec![buf])).unwrap();
    c.result.unwrap();
}

/// The device byte offsets of the valid records of the generation-1 half
/// (A), in order, with their headers.
fn records_in_a(dev: &SimDevice) -> Vec<(u64, record::Header)> {
    let half = AREA.1 / 2;
    let image = dev.visible_read(AREA.0 / BS, half / BS);
    let mut out = Vec::new();
    let mut pos = 0;
    while let Parsed::Valid { header, padded, .. } = record::parse(&image[pos as usize..], BS) {
        out.push((AREA.0 + pos, header));
        pos += padded;
    }
    out
}

/// Applies `n` random edits to a new manifest and to a model.
fn build(
    devs: &[SimDevice],
    area: (u64, u64),
    n: usize,
    seed: u64,
) -> (Manifest<SimDevice>, ManifestState) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut qs = queues(devs);
    let mut m = Manifest::create(devs.to_vec(), area, initial(), &mut qs).unwrap();
    let mut model = initial();
    for _ in 0..n {
        let e = random_edit(&mut rng, &model);
        model.apply(&e).unwrap();
        m.apply(&e, &mut qs).unwrap();
        assert_eq!(m.state(), &model);
    }
    (m, model)
}

#[test]
fn round_trip_with_checkpoint_switches() {
    for ndev in [1, 2] {
        let devs = devices(ndev);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut qs = queues(&devs);
        let mut m = Manifest::create(devs.clone(), SMALL, initial(), &mut qs).unwrap();
        assert_eq!(open_state(&devs, SMALL), initial());
        let mut model = initial();
        for i in 1..=300 {
            let e = random_edit(&mut rng, &model);
            model.apply(&e).unwrap();
            m.apply(&e, &mut qs).unwrap();
            if i % 50 == 0 && i < 300 {
                // Reopening writes a checkpoint; carry on from the reopened one.
                let checkpoints = m.stats().checkpoints;
                assert!(checkpoints >= 1);
                drop(qs);
                qs = queues(&devs);
                let (again, state) = Manifest::open(devs.clone(), SMALL, &mut qs)
                    .unwrap()
                    .unwrap();
                assert_eq!(state, model, "{ndev} devices, after {i} edits");
                assert_eq!(again.state(), &model);
                assert_eq!(again.stats().checkpoints, 1);
                m = again;
            }
        }
        let s = m.stats();
        assert!(s.checkpoints >= 2, "{s:?}");
        assert!(s.edits > 0);
        assert!(s.bytes_written >= (s.edits + s.checkpoints) * BS * ndev as u64);
        // Each device on its own holds the whole state too.
        for d in &devs {
            assert_eq!(open_state(std::slice::from_ref(d), SMALL), model);
        }
    }
}

#[test]
fn many_switches_count_checkpoints() {
    let devs = devices(1);
    let (m, model) = build(&devs, SMALL, 400, 3);
    // Half of 16 blocks, an edit takes one: a switch every dozen edits or so.
    assert!(m.stats().checkpoints > 400 / 20, "{:?}", m.stats());
    assert_eq!(open_state(&devs, SMALL), model);
}

#[test]
fn blank_area_is_none_and_debris_is_corrupt() {
    let devs = devices(2);
    assert!(open(&devs, AREA).unwrap().is_none());
    // Bytes without the magic are no manifest either.
    write_raw(&devs[0], AREA.0, &vec![0x5a; BS as usize]);
    assert!(open(&devs, AREA).unwrap().is_none());
    // The magic, damaged, with no valid checkpoint anywhere: damage.
    let mut block = vec![0; BS as usize];
    block[..8].copy_from_slice(&RECORD_MAGIC);
    write_raw(&devs[1], AREA.0 + AREA.1 / 2, &block);
    match open(&devs, AREA) {
        Err(ManifestError::Corrupt { device, offset, .. }) => {
            assert_eq!(device, "m1");
            assert_eq!(offset, AREA.0 + AREA.1 / 2);
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|o| o.map(|x| x.1))),
    }
}

#[test]
fn mirror_survives_a_wiped_or_corrupted_device() {
    for damage in ["wipe0", "wipe1", "garbage0", "garbage1"] {
        let devs = devices(2);
        let (m, model) = build(&devs, AREA, 45, 11);
        drop(m);
        let victim = if damage.ends_with('0') { 0 } else { 1 };
        let bytes = if damage.starts_with("wipe") {
            vec![0; AREA.1 as usize]
        } else {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            (0..AREA.1).map(|_| rng.random()).collect()
        };
        write_raw(&devs[victim], AREA.0, &bytes);
        assert_eq!(open_state(&devs, AREA), model, "{damage}");
        // Open repaired the damaged mirror: it now holds the state alone.
        assert_eq!(
            open_state(&devs[victim..victim + 1], AREA),
            model,
            "{damage}"
        );
    }
}

/// A unit of the area one device cannot read (a latent sector error) is
/// read from the other; one that no device reads fails the open, named.
#[test]
fn an_unreadable_unit_is_read_from_the_other_device_never_skipped() {
    for units in [vec![0u64], vec![3, 4], vec![17]] {
        let devs = devices(2);
        let (m, model) = build(&devs, AREA, 45, 13);
        drop(m);
        for &u in &units {
            devs[1].add_latent_errors(AREA.0 / BS + u, 1);
        }
        assert_eq!(open_state(&devs, AREA), model, "units {units:?}");
    }
    // Alone, or on both devices: an error naming the device and the byte.
    let devs = devices(2);
    let (m, _) = build(&devs, AREA, 45, 13);
    drop(m);
    devs[0].add_latent_errors(AREA.0 / BS + 2, 1);
    let err = open(&devs[..1], AREA).err().expect("refused").to_string();
    assert!(
        err.contains("m0") && err.contains(&format!("byte {}", AREA.0 + 2 * BS)),
        "{err}"
    );
    devs[1].add_latent_errors(AREA.0 / BS + 2, 1);
    let err = open(&devs, AREA).err().expect("refused").to_string();
    assert!(err.contains("no other manifest device reads it"), "{err}");
}

#[test]
fn both_devices_damaged_is_an_error_not_blank() {
    let devs = devices(2);
    let (m, _) = build(&devs, AREA, 5, 1);
    drop(m);
    // Damage the checkpoint header of generation 1 on both devices (and
    // there is no other: nothing was reopened).
    for d in &devs {
        let mut block = d.visible_read(AREA.0 / BS, 1);
        block[20] ^= 1;
        write_raw(d, AREA.0, &block);
    }
    assert!(matches!(
        open(&devs, AREA),
        Err(ManifestError::Corrupt { .. })
    ));
}

#[test]
fn corrupt_record_in_the_middle_is_an_error_a_torn_tail_is_not() {
    let devs = devices(1);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut qs = queues(&devs);
    let mut m = Manifest::create(devs.clone(), AREA, initial(), &mut qs).unwrap();
    let mut models = vec![initial()];
    for _ in 0..10 {
        let e = random_edit(&mut rng, models.last().unwrap());
        let mut next = models.last().unwrap().clone();
        next.apply(&e).unwrap();
        models.push(next);
        m.apply(&e, &mut qs).unwrap();
    }
    drop(m);
    let recs = records_in_a(&devs[0]);
    assert_eq!(recs.len(), 11);
    assert_eq!(recs[0].1.kind, Kind::Checkpoint);
    assert_eq!(recs[4].1.seq, 4);
    let pristine = devs[0].visible_read(AREA.0 / BS, AREA.1 / BS);

    // A flipped payload byte in edit 4, edit 5 valid after it: corruption.
    let mut block = devs[0].visible_read(recs[4].0 / BS, 1);
    block[RECORD_HEADER_BYTES + 1] ^= 0x10;
    write_raw(&devs[0], recs[4].0, &block);
    match open(&devs, AREA) {
        Err(ManifestError::Corrupt {
            device,
            offset,
            what,
        }) => {
            assert_eq!(device, "m0");
            assert_eq!(offset, recs[5].0, "{what}");
            assert!(what.contains(&format!("byte {}", recs[4].0)), "{what}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|o| o.map(|x| x.1))),
    }

    // The same damage to the last edit is a torn tail: it never happened.
    write_raw(&devs[0], AREA.0, &pristine);
    let mut block = devs[0].visible_read(recs[10].0 / BS, 1);
    block[RECORD_HEADER_BYTES + 1] ^= 0x10;
    write_raw(&devs[0], recs[10].0, &block);
    assert_eq!(open_state(&devs, AREA), models[9]);

    // A damaged checkpoint with edits of its generation after it: corruption.
    let devs = devices(1);
    let (m, model) = build(&devs, AREA, 3, 4);
    drop(m);
    let (m, state) = open(&devs, AREA).unwrap().unwrap();
    assert_eq!(state, model);
    // Generation 2 is in half B; add edits after it, then damage it.
    let mut qs = queues(&devs);
    let mut m = m;
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let e = random_edit(&mut rng, &model);
    m.apply(&e, &mut qs).unwrap();
    drop(m);
    let b = AREA.0 + AREA.1 / 2;
    let mut block = devs[0].visible_read(b / BS, 1);
    block[RECORD_HEADER_BYTES] ^= 1;
    write_raw(&devs[0], b, &block);
    assert!(matches!(
        open(&devs, AREA),
        Err(ManifestError::Corrupt { .. })
    ));
}

#[test]
fn torn_switch_falls_back_to_the_older_half() {
    let devs = devices(1);
    let (m, model) = build(&devs, AREA, 6, 8);
    drop(m);
    // Reopen: checkpoint of generation 2 in half B, with no edits after it.
    let (m, _) = open(&devs, AREA).unwrap().unwrap();
    drop(m);
    // Its payload torn: generation 1 and its edits are still the truth.
    let b = AREA.0 + AREA.1 / 2;
    let mut block = devs[0].visible_read(b / BS, 1);
    block[RECORD_HEADER_BYTES] ^= 1;
    write_raw(&devs[0], b, &block);
    assert_eq!(open_state(&devs, AREA), model);
}

#[test]
fn create_replaces_an_older_manifest() {
    let devs = devices(2);
    let (m, _) = build(&devs, AREA, 20, 12);
    drop(m);
    // The new checkpoint is the same size as the old one, so the old
    // manifest's generation-1 edits follow it, seq 1, 2, ...
    let fresh = ManifestState::new(vec![b"a".to_vec(), b"q".to_vec()]);
    let mut qs = queues(&devs);
    let m = Manifest::create(devs.clone(), AREA, fresh.clone(), &mut qs).unwrap();
    drop(m);
    assert_eq!(open_state(&devs, AREA), fresh);
}

#[test]
fn bad_edits_are_refused_and_change_nothing() {
    let devs = devices(2);
    let (mut m, mut model) = build(&devs, AREA, 5, 13);
    let mut qs = queues(&devs);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let existing = *model.files.keys().next().unwrap();
    let fresh = file(&mut rng, model.next_file_id, 3);
    let mut backwards = fresh.clone();
    backwards.min_key = b"z".to_vec();
    backwards.max_key = b"a".to_vec();
    let mut far = fresh.clone();
    far.region = 3;
    let mut max_id = fresh.clone();
    max_id.id = u64::MAX;
    let mut again = fresh.clone();
    again.id = existing;
    let bad = [
        Edit {
            remove: vec![u64::MAX - 1],
            ..Edit::default()
        },
        Edit {
            remove: vec![existing, existing],
            ..Edit::default()
        },
        Edit {
            add: vec![again],
            ..Edit::default()
        },
        Edit {
            add: vec![fresh.clone(), fresh.clone()],
            ..Edit::default()
        },
        Edit {
            add: vec![fresh.clone()],
            remove: vec![u64::MAX - 1],
            ..Edit::default()
        },
        Edit {
            add: vec![backwards],
            ..Edit::default()
        },
        Edit {
            add: vec![far],
            ..Edit::default()
        },
        Edit {
            add: vec![max_id],
            ..Edit::default()
        },
        Edit {
            flushed: vec![(0, 5), (3, 9)],
            ..Edit::default()
        },
    ];
    let stats = m.stats();
    for e in &bad {
        let err = m.apply(e, &mut qs).unwrap_err();
        assert!(matches!(err, ManifestError::BadEdit(_)), "{e:?}: {err}");
        assert_eq!(m.state(), &model);
        let mut copy = model.clone();
        assert!(copy.apply(e).is_err());
        assert_eq!(copy, model);
    }
    assert_eq!(m.stats(), stats, "nothing written for refused edits");
    let good = Edit {
        add: vec![fresh],
        remove: vec![existing],
        flushed: vec![(2, 77)],
        replay_from: Some(5),
        wal_lost: vec![1],
        ..Edit::default()
    };
    model.apply(&good).unwrap();
    m.apply(&good, &mut qs).unwrap();
    assert_eq!(m.state(), &model);
    drop(m);
    assert_eq!(open_state(&devs, AREA), model);
}

#[test]
fn states_that_cannot_be_checkpointed_are_refused() {
    let devs = devices(1);
    let mut qs = queues(&devs);
    let half = AREA.1 / 2;
    let mut big = initial();
    big.split_keys = vec![vec![b'k'; half as usize]];
    big.flushed_lsn = vec![0; 2];
    match Manifest::create(devs.clone(), AREA, big, &mut qs) {
        Err(ManifestError::TooBig { bytes, half: h }) => {
            assert_eq!(h, half);
            assert!(bytes > half);
        }
        other => panic!("expected TooBig, got {:?}", other.err()),
    }
    assert!(matches!(
        Manifest::create(devs.clone(), AREA, ManifestState::default(), &mut qs),
        Err(ManifestError::BadState(_))
    ));

    let (mut m, model) = build(&devs, AREA, 2, 14);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut f = file(&mut rng, 1000, 3);
    f.min_key = vec![b'a'; half as usize / 2];
    f.max_key = vec![b'b'; half as usize / 2];
    let e = Edit {
        add: vec![f],
        ..Edit::default()
    };
    assert!(matches!(
        m.apply(&e, &mut qs),
        Err(ManifestError::TooBig { .. })
    ));
    assert_eq!(m.state(), &model);
    // An edit of two thirds of a half still goes in, as an edit record.
    let big = |id: u64, rng: &mut ChaCha8Rng| {
        let mut f = file(rng, id, 3);
        f.min_key = vec![b'a'; half as usize / 3];
        f.max_key = vec![b'b'; half as usize / 3];
        f
    };
    let e = Edit {
        add: vec![big(1000, &mut rng)],
        ..Edit::default()
    };
    m.apply(&e, &mut qs).unwrap();
    assert_eq!(m.stats().checkpoints, 1);
    let mut model = model;
    model.apply(&e).unwrap();
    // The next one does not fit after it: it goes into a checkpoint.
    let e = Edit {
        add: vec![big(1001, &mut rng)],
        remove: vec![1000],
        ..Edit::default()
    };
    m.apply(&e, &mut qs).unwrap();
    assert_eq!(m.stats().checkpoints, 2);
    model.apply(&e).unwrap();
    drop(m);
    assert_eq!(open_state(&devs, AREA), model);
}

#[test]
fn geometry_is_checked() {
    let devs = devices(2);
    let mut qs = queues(&devs);
    let geo = |r: Result<Manifest<SimDevice>, ManifestError>| {
        matches!(r, Err(ManifestError::Geometry(_)))
    };
    assert!(geo(Manifest::create(
        devs.clone(),
        AREA,
        initial(),
        &mut qs[..1]
    )));
    assert!(geo(Manifest::create(
        devs.clone(),
        (100, AREA.1),
        initial(),
        &mut qs
    )));
    assert!(geo(Manifest::create(
        devs.clone(),
        (BS, 3 * BS),
        initial(),
        &mut qs
    )));
    assert!(geo(Manifest::create(
        devs.clone(),
        (BS, CAPACITY * BS),
        initial(),
        &mut qs
    )));
    assert!(geo(Manifest::create(Vec::new(), AREA, initial(), &mut [])));
}

/// The devices after a process crash (a failed FUA write latched the
/// device's flush error: this restarts it).
fn restarted(devs: &[SimDevice]) -> Vec<SimDevice> {
    devs.iter()
        .map(|d| d.reboot_after_process_crash(0))
        .collect()
}

/// A write one mirror fails while the other takes it: the manifest goes
/// on without that device (every later record is whole on the other), and
/// the next open finds every edit.
#[test]
fn a_write_failing_on_one_mirror_leaves_it_out_and_goes_on() {
    // Op 0 zeroes half B, op 1 writes the checkpoint, op 2 is the first edit.
    for fail in [2u64, 3] {
        let faults = SimFaults {
            fail_ops: vec![fail],
            ..SimFaults::default()
        };
        let devs = vec![
            sim("m0", 1, true, faults),
            sim("m1", 2, true, SimFaults::default()),
        ];
        let mut qs = queues(&devs);
        let mut m = Manifest::create(devs.clone(), AREA, initial(), &mut qs).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(fail);
        let mut model = initial();
        for _ in 0..40 {
            let e = random_edit(&mut rng, &model);
            m.apply(&e, &mut qs).unwrap();
            model.apply(&e).unwrap();
        }
        assert_eq!(m.lost(), ["m0"]);
        drop((m, qs));
        assert_eq!(open_state(&restarted(&devs), AREA), model);
    }
}

/// A write no manifest device takes fails, changes nothing in memory, and
/// every later call fails until the manifest is reopened.
#[test]
fn a_write_no_device_takes_poisons_until_reopened() {
    for fail in [2u64, 3] {
        let faults = SimFaults {
            fail_ops: vec![fail],
            ..SimFaults::default()
        };
        let devs = vec![sim("m0", 1, true, faults)];
        let mut qs = queues(&devs);
        let mut m = Manifest::create(devs.clone(), AREA, initial(), &mut qs).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(fail);
        let mut model = initial();
        let mut failed = false;
        for _ in 0..3 {
            let e = random_edit(&mut rng, &model);
            let before = m.state().clone();
            match m.apply(&e, &mut qs) {
                Ok(()) => model.apply(&e).unwrap(),
                Err(ManifestError::Device(_)) => {
                    assert_eq!(m.state(), &before);
                    failed = true;
                    break;
                }
                Err(other) => panic!("{other}"),
            }
        }
        assert!(failed);
        let e = random_edit(&mut rng, m.state());
        assert!(matches!(
            m.apply(&e, &mut qs),
            Err(ManifestError::Poisoned(_))
        ));
        drop((m, qs));
        assert_eq!(open_state(&restarted(&devs), AREA), model);
    }
}

#[test]
fn decoding_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut state = initial();
    for _ in 0..30 {
        let e = random_edit(&mut rng, &state);
        let bytes = record::encode_edit(&e);
        assert_eq!(record::decode_edit(&bytes, 3).unwrap(), e);
        // Version 2 had no WAL marks: the same edit without them.
        let v2 = Edit {
            wal_back: Vec::new(),
            wal_lost: Vec::new(),
            ..e.clone()
        };
        let old = &record::encode_edit(&v2)
            [..bytes.len() - 8 - 4 * (e.wal_lost.len() + e.wal_back.len())];
        assert_eq!(record::decode_edit(old, 2).unwrap(), v2);
        state.apply(&e).unwrap();
        let enc = record::encode_state(&state);
        assert_eq!(enc.len(), record::state_len(&state));
        assert_eq!(record::decode_state(&enc, 3).unwrap(), state);
        let marks = 4 + 4 * state.wal_stale.len();
        let old = ManifestState {
            wal_stale: Default::default(),
            ..state.clone()
        };
        assert_eq!(
            record::decode_state(&enc[..enc.len() - marks], 2).unwrap(),
            old
        );
        for buf in [&bytes, &enc] {
            for _ in 0..50 {
                let mut b = buf.clone();
                match rng.random_range(0..3) {
                    0 => b.truncate(rng.random_range(0..=b.len())),
                    1 if !b.is_empty() => {
                        let i = rng.random_range(0..b.len());
                        b[i] = rng.random();
                    }
                    _ => b.extend((0..rng.random_range(1..9)).map(|_| rng.random::<u8>())),
                }
                let _ = record::decode_edit(&b, 3);
                let _ = record::decode_state(&b, 3);
                let mut rec = record::encode(Kind::Edit, 1, 1, 1, &b, BS);
                let i = rng.random_range(0..rec.len());
                rec[i] ^= 1 << rng.random_range(0..8);
                let _ = record::parse(&rec, BS);
                let _ = record::parse(&rec[..rng.random_range(0..rec.len())], BS);
            }
        }
    }
    for _ in 0..2000 {
        let n = rng.random_range(0..200);
        let b: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        let _ = record::decode_edit(&b, 3);
        let _ = record::decode_state(&b, 3);
        let mut h = RECORD_MAGIC.to_vec();
        h.extend_from_slice(&b);
        let _ = record::parse(&h, BS);
    }
}

/// One crash run: edits until the power is cut at a random device
/// operation, reboot, open, check; then more edits on the reopened manifest,
/// a second cut between edits, and the same check. True when one mirror
/// lost its power first and the manifest went on without it.
fn crash_run(seed: u64) -> Result<bool, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ndev = 1 + (seed % 2) as usize;
    let volatile = seed % 5 != 4;
    let n = 30;
    // Ops 0 and 1 are create's; then one write per edit or switch.
    let cut = rng.random_range(2..2 + n as u64 + 4);
    let devs: Vec<SimDevice> = (0..ndev)
        .map(|i| {
            // The mirror loses its power at the same operation, or one
            // later: a record on it alone, its write to m0 failed.
            let faults = SimFaults {
                power_cut_at_op: Some(cut + (i as u64) * (seed / 2 % 2)),
                ..SimFaults::default()
            };
            sim(&format!("m{i}"), rng.random(), volatile, faults)
        })
        .collect();
    let mut qs = queues(&devs);
    let mut m =
        Manifest::create(devs.clone(), SMALL, initial(), &mut qs).map_err(|e| e.to_string())?;
    let mut states = vec![initial()];
    let mut ok = 0;
    for _ in 0..n {
        let e = random_edit(&mut rng, states.last().unwrap());
        let mut next = states.last().unwrap().clone();
        next.apply(&e).unwrap();
        states.push(next);
        match m.apply(&e, &mut qs) {
            Ok(()) => ok += 1,
            Err(ManifestError::Device(_)) => {
                if m.state() != &states[ok] {
                    return Err("a failed edit changed the state in memory".into());
                }
                break;
            }
            Err(other) => return Err(format!("edit {ok}: {other}")),
        }
    }
    let degraded = !m.lost().is_empty();
    drop((m, qs));
    for d in &devs {
        d.cut_power();
    }
    let devs: Vec<SimDevice> = devs.iter().map(|d| d.reboot(rng.random())).collect();
    let (m, got) = open(&devs, SMALL)
        .map_err(|e| format!("open after the cut: {e}"))?
        .ok_or("no manifest after the cut")?;
    if got != states[ok] && !(ok + 1 < states.len() && got == states[ok + 1]) {
        let i = states.iter().position(|s| s == &got);
        return Err(format!(
            "{ok} edits acknowledged, open found the state after {i:?}"
        ));
    }

    // Carry on from the recovered state, past a switch back into the half
    // that may hold the torn edit, then cut the power between edits.
    let mut model = got;
    let mut m = m;
    let mut qs = queues(&devs);
    for _ in 0..20 {
        let e = random_edit(&mut rng, &model);
        model.apply(&e).unwrap();
        m.apply(&e, &mut qs)
            .map_err(|e| format!("edit after reopen: {e}"))?;
    }
    drop((m, qs));
    let devs: Vec<SimDevice> = devs.iter().map(|d| d.reboot(rng.random())).collect();
    let again = open(&devs, SMALL)
        .map_err(|e| format!("second open: {e}"))?
        .ok_or("no manifest at the second open")?
        .1;
    if again != model {
        return Err("the second open lost acknowledged edits".into());
    }
    Ok(degraded)
}

#[test]
fn crash_at_any_operation_leaves_before_or_after() {
    let mut outcomes = [0u32; 2];
    for seed in 0..200 {
        match crash_run(seed) {
            Ok(degraded) => outcomes[degraded as usize] += 1,
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    // Both happen: a cut that ends the manifest, and a mirror that lost
    // its power first, which the manifest went on without.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
