//! The silent and slow fault classes: misdirected and lost writes, latent
//! sector errors, corrupted reads and corruption at rest, gray failure and
//! fail-stop. Each is seeded or numbered, so a run reproduces exactly.

use std::time::{Duration, Instant};

use stria::config::{SimConfig, SimFaults};
use stria::device::{Device, DeviceError, Request};

use super::*;

fn with(faults: SimFaults) -> SimConfig {
    SimConfig {
        faults,
        ..instant()
    }
}

#[test]
fn a_misdirected_write_reports_success_and_lands_elsewhere() {
    let dev = device(with(SimFaults {
        misdirect_rate: 1.0,
        ..SimFaults::default()
    }));
    let mut q = queue(&dev);
    write(&mut q, 5, filled(0x11, 1));
    assert!(
        dev.visible_read(5, 1).iter().all(|&b| b == 0),
        "the intended block keeps what it held"
    );
    let image = dev.visible_read(0, 64);
    let landed: Vec<usize> = (0..64)
        .filter(|&b| image[b * BS..(b + 1) * BS].iter().all(|&x| x == 0x11))
        .collect();
    assert_eq!(landed.len(), 1, "the data is somewhere else, once");
    assert_ne!(landed[0], 5);
    assert_eq!(dev.stats().silent_faults, 1);
    // The same seed sends it to the same place.
    let again = device(with(SimFaults {
        misdirect_rate: 1.0,
        ..SimFaults::default()
    }));
    let mut q2 = queue(&again);
    write(&mut q2, 5, filled(0x11, 1));
    assert_eq!(again.visible_read(0, 64), image);
}

#[test]
fn a_lost_write_reports_success_and_writes_nothing() {
    let dev = device(with(SimFaults {
        lost_write_rate: 1.0,
        ..SimFaults::default()
    }));
    let mut q = queue(&dev);
    write(&mut q, 3, filled(0x22, 2));
    flush(&mut q);
    assert!(dev.visible_read(0, 64).iter().all(|&b| b == 0));
    assert!(dev.durable_read(0, 64).iter().all(|&b| b == 0));
    assert_eq!(dev.stats().silent_faults, 1);
}

#[test]
fn latent_sector_errors_fail_reads_until_rewritten_and_survive_a_reboot() {
    let dev = device(with(SimFaults {
        latent_errors: vec![10],
        ..SimFaults::default()
    }));
    dev.add_latent_errors(20, 2);
    let mut q = queue(&dev);
    for (lba, blocks) in [(10, 1), (8, 4), (21, 1)] {
        let c = run(
            &mut q,
            Request::read(0, lba, vec![dev.alloc_buf(blocks * BS)]),
        );
        match c.result {
            Err(DeviceError::Io { source, .. }) => {
                assert!(
                    source.to_string().contains("latent sector error"),
                    "{source}"
                )
            }
            other => panic!("read of {lba}+{blocks}: {other:?}"),
        }
    }
    read(&mut q, 11, 9); // the blocks between are fine
    write(&mut q, 10, filled(0x33, 1));
    assert!(read(&mut q, 10, 1).iter().all(|&b| b == 0x33), "rewritten");
    flush(&mut q);
    drop(q);
    let back = dev.reboot(7);
    let mut q = queue(&back);
    read(&mut q, 10, 1);
    let c = run(&mut q, Request::read(0, 20, vec![back.alloc_buf(BS)]));
    assert!(
        c.result.is_err(),
        "a defect of the media stays after a reboot"
    );
}

#[test]
fn a_corrupted_read_flips_one_bit_of_what_it_returns_only() {
    let dev = device(with(SimFaults {
        corrupt_read_rate: 1.0,
        ..SimFaults::default()
    }));
    let mut q = queue(&dev);
    write(&mut q, 4, filled(0x44, 2));
    let got = read(&mut q, 4, 2);
    let flipped: u32 = got.iter().map(|&b| (b ^ 0x44).count_ones()).sum();
    assert_eq!(flipped, 1, "one bit differs");
    assert!(
        dev.visible_read(4, 2).iter().all(|&b| b == 0x44),
        "the stored data is right"
    );
    assert_eq!(dev.stats().silent_faults, 1);
}

#[test]
fn corruption_and_misdirection_at_rest_are_what_reads_and_crashes_find() {
    let dev = device(instant());
    let mut q = queue(&dev);
    write(&mut q, 1, filled(0x55, 1));
    write(&mut q, 2, filled(0x66, 1));
    flush(&mut q);
    dev.corrupt_at_rest(1, 100, 3);
    dev.misdirect_at_rest(2, 9);
    let one = read(&mut q, 1, 1);
    assert_eq!(one[100], 0x55 ^ (1 << 3));
    assert!(read(&mut q, 9, 1).iter().all(|&b| b == 0x66));
    drop(q);
    let back = dev.reboot(1);
    assert_eq!(back.visible_read(1, 1)[100], 0x55 ^ (1 << 3));
    assert!(back.visible_read(9, 1).iter().all(|&b| b == 0x66));
}

#[test]
fn a_gray_failure_slows_a_window_of_requests_and_then_ends() {
    let model = SimConfig {
        write_us: 200,
        read_us: 0,
        flush_us: 0,
        bandwidth: 0,
        faults: SimFaults {
            slow_from_op: Some(1),
            slow_ops: 1,
            slow_factor: 100,
            ..SimFaults::default()
        },
        ..SimConfig::default()
    };
    let dev = device(model);
    let mut q = queue(&dev);
    // Each write: how long it took (a lower bound on its latency), and how
    // far its deadline lay past the end of its submission (an upper bound:
    // it was due 200 us after some instant before then). An upper bound on
    // the time taken would fail whenever this thread is descheduled.
    let timed = |q: &mut SimQueue| {
        let at = Instant::now();
        q.submit(Request::write(0, 0, vec![filled(1, 1)])).unwrap();
        let submitted = Instant::now();
        let due_in = match q.wait_hint() {
            WaitHint::Deadline(due) => due.saturating_duration_since(submitted),
            _ => Duration::ZERO, // already due
        };
        wait_one(q).result.expect("write succeeds");
        (at.elapsed(), due_in)
    };
    let (_, before) = timed(&mut q); // op 0
    let (slow, _) = timed(&mut q); // op 1: 100 x 200 us
    let (_, after) = timed(&mut q); // op 2
    assert!(slow >= Duration::from_millis(20), "{slow:?}");
    assert!(before <= Duration::from_micros(200), "{before:?}");
    assert!(after <= Duration::from_micros(200), "{after:?}");
}

#[test]
fn a_vanished_device_refuses_everything_and_stays_gone() {
    let dev = device(with(SimFaults {
        vanish_at_op: Some(2),
        ..SimFaults::default()
    }));
    let mut q = queue(&dev);
    write(&mut q, 0, filled(1, 1));
    flush(&mut q);
    let refused = q
        .submit(Request::write(0, 1, vec![filled(2, 1)]))
        .unwrap_err();
    match refused.error {
        DeviceError::Offline { why, .. } => assert!(why.contains("vanished"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!dev.is_powered());
    drop(q);
    let back = dev.reboot(3);
    let mut q = queue(&back);
    assert!(
        q.submit(Request::read(0, 0, vec![back.alloc_buf(BS)]))
            .is_err(),
        "a pulled drive does not come back with a reboot"
    );
    // vanish() does the same at once, on a device that had no such plan.
    let other = device(instant());
    other.vanish();
    let mut q = queue(&other);
    assert!(q.submit(Request::flush(0)).is_err());
}

#[test]
fn silent_fault_rates_are_checked_like_error_rates() {
    let model = with(SimFaults {
        corrupt_read_rate: 1.5,
        ..SimFaults::default()
    });
    let err = SimDevice::open(&stria::config::DeviceConfig {
        name: "d0".into(),
        role: stria::config::Role::Data,
        size: 64 * BS as u64,
        block_size: BS as u32,
        queue_depth: 8,
        backend: stria::config::BackendConfig::Sim(model),
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("corrupt-read-rate 1.5 is not a probability"),
        "{err}"
    );
}
