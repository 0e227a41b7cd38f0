//! Power cuts, process crashes and what a reboot finds.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stria::config::{SimConfig, SimFaults};
use stria::device::sim::{SimDevice, SimQueue};
use stria::device::{DeviceError, IoBuf, IoKind, Queue, Request};

use super::*;

#[test]
fn flushed_writes_survive_and_the_rebooted_device_starts_afresh() {
    let dev = device(instant());
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 2));
    flush(&mut q);
    write(&mut q, 5, filled(2, 1));
    for seed in 0..20 {
        let new = dev.reboot(seed);
        assert!(new.is_powered());
        assert_eq!(new.stats().writes, 0);
        assert!(new.durable_read(0, 2).iter().all(|&b| b == 1));
        assert_eq!(
            new.visible_read(0, 8),
            new.durable_read(0, 8),
            "nothing cached after a reboot"
        );
    }
    assert!(!dev.is_powered(), "reboot cuts the power first");
}

/// How a write of distinct sectors over zeroes came back: (sectors kept,
/// sectors dropped).
fn sectors_kept(image: &[u8], written: &[u8], sector: usize) -> (usize, usize) {
    let mut kept = (0, 0);
    for (got, new) in image.chunks(sector).zip(written.chunks(sector)) {
        if got == new {
            kept.0 += 1;
        } else {
            assert!(
                got.iter().all(|&b| b == 0),
                "a sector is old or new, never a mix"
            );
            kept.1 += 1;
        }
    }
    kept
}

/// Two blocks whose 512-byte sectors are all different and non-zero.
fn distinct_sectors() -> IoBuf {
    let mut buf = IoBuf::new(2 * BS);
    for (i, sector) in buf.chunks_mut(512).enumerate() {
        sector.fill(i as u8 + 1);
    }
    buf
}

#[test]
fn an_unflushed_write_is_kept_dropped_or_torn_at_sector_boundaries() {
    let dev = device(instant());
    let mut q = queue(&dev);
    let data = distinct_sectors();
    write(&mut q, 3, data.clone());
    let (mut whole, mut none, mut torn) = (0, 0, 0);
    for seed in 0..60 {
        match sectors_kept(&dev.reboot(seed).durable_read(3, 2), &data, 512) {
            (_, 0) => whole += 1,
            (0, _) => none += 1,
            _ => torn += 1,
        }
    }
    assert!(
        whole > 0 && none > 0 && torn > 0,
        "kept {whole}, dropped {none}, torn {torn}"
    );
}

#[test]
fn writes_in_flight_at_the_cut_are_at_risk_too() {
    let model = SimConfig {
        write_us: 10_000_000,
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    let data = distinct_sectors();
    q.submit(Request::write(0, 0, vec![data.clone()])).unwrap();
    dev.cut_power();
    let c = wait_one(&mut q);
    assert!(matches!(
        c.result,
        Err(DeviceError::Offline {
            kind: IoKind::Write,
            ..
        })
    ));
    let outcomes: Vec<_> = (0..30)
        .map(|seed| sectors_kept(&dev.reboot(seed).durable_read(0, 2), &data, 512))
        .collect();
    assert!(outcomes.iter().any(|&(_, lost)| lost == 0));
    assert!(outcomes.iter().any(|&(kept, _)| kept == 0));
}

#[test]
fn reboot_is_reproducible_and_leaves_the_old_device_alone() {
    let dev = device(instant());
    let mut q = queue(&dev);
    for lba in 0..16 {
        write(&mut q, lba, filled(lba as u8 + 1, 1));
    }
    let visible = dev.visible_read(0, 16);
    dev.cut_power();
    let a = dev.reboot(7).durable_read(0, 16);
    assert_eq!(a, dev.reboot(7).durable_read(0, 16));
    assert_ne!(a, dev.reboot(8).durable_read(0, 16));
    assert_eq!(dev.visible_read(0, 16), visible);
    assert!(dev.durable_read(0, 16).iter().all(|&b| b == 0));
}

#[test]
fn a_rebooted_device_forgets_numbered_faults_but_keeps_rates() {
    let model = SimConfig {
        faults: SimFaults {
            fail_ops: vec![0],
            power_cut_at_op: Some(1),
            read_error_rate: 1.0,
            ..SimFaults::default()
        },
        ..instant()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    assert!(run(&mut q, Request::flush(0)).result.is_err());
    assert!(q.submit(Request::flush(1)).is_err());
    let new = dev.reboot(1);
    let mut q = queue(&new);
    flush(&mut q);
    flush(&mut q);
    let c = run(&mut q, Request::read(2, 0, vec![IoBuf::new(BS)]));
    assert!(matches!(c.result, Err(DeviceError::Io { .. })));
}

#[test]
fn a_process_crash_keeps_completed_writes_still_volatile() {
    let dev = device(instant());
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1));
    let new = dev.reboot_after_process_crash(0);
    assert!(!dev.is_powered(), "the dead process's queues are gone");
    assert!(new.visible_read(0, 1).iter().all(|&b| b == 1));
    assert!(
        new.durable_read(0, 1).iter().all(|&b| b == 0),
        "still only cached"
    );
    assert_eq!(new.stats().cached_bytes, BS as u64);
    let kept = (0..20)
        .filter(|&s| new.reboot(s).durable_read(0, 1)[0] == 1)
        .count();
    assert!(
        0 < kept && kept < 20,
        "a later power cut may still lose it ({kept}/20 kept)"
    );
}

#[test]
fn a_process_crash_after_a_power_cut_is_a_power_loss() {
    let dev = device(instant());
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1));
    flush(&mut q);
    write(&mut q, 5, filled(2, 1));
    dev.cut_power();
    let mut dropped = 0;
    for seed in 0..20 {
        let after = dev.reboot_after_process_crash(seed);
        let rebooted = dev.reboot(seed);
        assert_eq!(after.visible_read(0, 8), rebooted.visible_read(0, 8));
        assert_eq!(after.durable_read(0, 8), rebooted.durable_read(0, 8));
        assert_eq!(after.stats().cached_bytes, 0, "nothing cached after a cut");
        assert!(after.visible_read(0, 1).iter().all(|&b| b == 1));
        if after.visible_read(5, 1).iter().all(|&b| b == 0) {
            dropped += 1;
        }
    }
    assert!(dropped > 0, "the unflushed write at LBA 5 was never lost");
}

/// One write of the property test.
struct Written {
    id: u32,
    lba: u64,
    blocks: u64,
    /// Its successful completion was seen.
    completed: bool,
}

/// A flush and the writes whose completion was seen before it was submitted.
struct Flush {
    tag: u64,
    covers: Vec<usize>,
}

const P_BS: usize = 1024;
const P_SECTOR: usize = 256;
const P_BLOCKS: u64 = 8;

/// Sectors of a block filled with the writer's id, so that every sector
/// names the write it came from (0: never written).
fn stamped(id: u32, blocks: u64) -> IoBuf {
    let mut buf = IoBuf::new(blocks as usize * P_BS);
    for word in buf.chunks_mut(4) {
        word.copy_from_slice(&id.to_le_bytes());
    }
    buf
}

fn poll_all(
    queues: &mut [SimQueue],
    writes: &mut [Written],
    flushes: &[Flush],
    durable: &mut [bool],
) {
    let mut out = Vec::new();
    for q in queues.iter_mut() {
        q.poll(&mut out);
    }
    for c in out.into_iter().filter(|c| c.result.is_ok()) {
        match c.kind {
            IoKind::Write => writes[c.tag as usize].completed = true,
            IoKind::Flush => {
                let f = flushes.iter().find(|f| f.tag == c.tag).unwrap();
                f.covers.iter().for_each(|&w| durable[w] = true);
            }
            IoKind::Read => {}
        }
    }
}

/// One run: random writes, flushes and polls on two queues, a power cut,
/// a reboot; then checks every sector against what the run allows.
/// Returns (sectors that lost their last write, sectors of unflushed
/// writes that survived).
fn power_cut_run(seed: u64) -> (usize, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let volatile = seed % 4 != 0;
    let model = SimConfig {
        sector_size: P_SECTOR as u32,
        volatile_cache: volatile,
        seed,
        ..instant()
    };
    let dev = SimDevice::new("p", P_BS as u32, P_BLOCKS, 16, model);
    let mut queues = [queue(&dev), queue(&dev)];
    let (mut writes, mut flushes, mut durable) =
        (Vec::<Written>::new(), Vec::<Flush>::new(), Vec::new());
    for step in 0..40u64 {
        let qi = rng.random_range(0..2);
        let action = rng.random_range(0..10);
        if queues[qi].in_flight() == 16 || action >= 7 {
            poll_all(&mut queues, &mut writes, &flushes, &mut durable);
        } else if action < 5 {
            let lba = rng.random_range(0..P_BLOCKS);
            let blocks = rng.random_range(1..=3.min(P_BLOCKS - lba));
            let id = writes.len() as u32 + 1;
            let tag = writes.len() as u64;
            queues[qi]
                .submit(Request::write(tag, lba, vec![stamped(id, blocks)]))
                .unwrap();
            writes.push(Written {
                id,
                lba,
                blocks,
                completed: false,
            });
            durable.push(false);
        } else {
            let covers = (0..writes.len()).filter(|&w| writes[w].completed).collect();
            let tag = 1_000_000 + step;
            queues[qi].submit(Request::flush(tag)).unwrap();
            flushes.push(Flush { tag, covers });
        }
    }
    if rng.random_bool(0.5) {
        poll_all(&mut queues, &mut writes, &flushes, &mut durable);
    }
    dev.cut_power();
    poll_all(&mut queues, &mut writes, &flushes, &mut durable);
    if !volatile {
        // With power-loss protection a completed write is durable.
        writes
            .iter()
            .enumerate()
            .for_each(|(i, w)| durable[i] |= w.completed);
    }

    let image = dev.reboot(seed ^ 0x5eed).durable_read(0, P_BLOCKS);
    let sectors_per_block = (P_BS / P_SECTOR) as u64;
    let (mut lost, mut survived) = (0, 0);
    for (s, got) in image.chunks(P_SECTOR).enumerate() {
        let s = s as u64;
        let id = u32::from_le_bytes(got[..4].try_into().unwrap());
        let stamp = id.to_le_bytes();
        assert!(
            got.chunks(4).all(|w| w == stamp),
            "seed {seed}: sector {s} mixes writes"
        );
        // Writes covering this sector, in submission (= completion) order.
        let covering: Vec<usize> = (0..writes.len())
            .filter(|&w| {
                let first = writes[w].lba * sectors_per_block;
                (first..first + writes[w].blocks * sectors_per_block).contains(&s)
            })
            .collect();
        // The last durable one (or the blank device), then anything later.
        let base = covering.iter().rposition(|&w| durable[w]);
        let mut allowed: Vec<u32> = match base {
            Some(i) => covering[i..].iter().map(|&w| writes[w].id).collect(),
            None => std::iter::once(0)
                .chain(covering.iter().map(|&w| writes[w].id))
                .collect(),
        };
        allowed.sort_unstable();
        assert!(
            allowed.binary_search(&id).is_ok(),
            "seed {seed}: sector {s} holds write {id}, allowed {allowed:?}"
        );
        if let Some(&last) = covering.last() {
            if base.is_some_and(|i| covering[i] == last) {
                assert_eq!(
                    id, writes[last].id,
                    "seed {seed}: sector {s} lost a flushed write"
                );
            } else if id == writes[last].id {
                survived += 1;
            } else {
                lost += 1;
            }
        }
    }
    (lost, survived)
}

#[test]
fn power_cut_property_over_200_seeds() {
    let (mut lost, mut survived) = (0, 0);
    for seed in 0..200 {
        let (l, s) = power_cut_run(seed);
        lost += l;
        survived += s;
    }
    assert!(
        lost > 0 && survived > 0,
        "lost {lost}, survived {survived}: the crash model chose nothing"
    );
}
