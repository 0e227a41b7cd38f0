//! The WAL crash checker's process-crash variant on a local SPDK NVMe/TCP
//! target: the real WAL on `SpdkDevice` namespaces (the AIO one, where a
//! flush is an `fsync` of the file behind it, the Malloc one, or both
//! striped), writers with a random mix of durability levels, then the
//! process "crashes": the WAL reactor stops without closing the log
//! (`Wal::abandon`). The target keeps everything the host wrote, as a drive
//! keeps its cache when the host process dies, so recovery on fresh device
//! handles of the same namespaces must find every append acknowledged at
//! `write` or `sync`, with the checks of tests/wal_crash.rs (a) to (c).
//!
//! Needs `--features spdk` and `nvmf_tgt`; without them the test prints
//! `NOT RUN <name>: <why>` and passes, unless STRIA_REQUIRE_SPDK=1.
//! `STRIA_SEED=n` replays one seed.

/// Without the feature nothing of SPDK is built: say so, by name.
#[cfg(not(feature = "spdk"))]
#[test]
fn spdk_wal_tests_did_not_run() {
    let name = "spdk_wal::process_crash_on_the_target";
    if std::env::var("STRIA_REQUIRE_SPDK").is_ok_and(|v| v == "1") {
        panic!("{name}: SPDK required (STRIA_REQUIRE_SPDK=1) but built without --features spdk");
    }
    println!("NOT RUN {name}: built without --features spdk");
}

#[cfg(feature = "spdk")]
#[path = "common/spdk_target.rs"]
mod spdk_target;

#[cfg(feature = "spdk")]
#[path = "common/wal_check.rs"]
mod wal_check;

#[cfg(feature = "spdk")]
mod with_spdk {
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use stria::config::DeviceLoss;
    use stria::device::spdk::SpdkDevice;
    use stria::device::{wait, Device, Request};
    use stria::reactor::ReactorConfig;
    use stria::wal::recovery::{recover, Recovered, RecoveryOptions, WalDevice};
    use stria::wal::{Wal, WalOptions};

    use super::spdk_target::{device, host_env, with_target, Target, AIO_NSID, MALLOC_NSID};
    use super::wal_check::{check, run_seeds, writer, Ack, Crash, Seen};

    const SEGMENT: u64 = 256 << 10;
    const MAX_BATCH: u64 = 32 << 10;
    /// The part of each namespace the WAL uses: 1 MiB reserved and 60
    /// segments, more than the writers can fill (at most 1,600 appends of
    /// one block each), so the log never fills (nothing releases it).
    const WAL_BYTES: u64 = 16 << 20;
    const SEEDS: u64 = 10;

    fn opts() -> WalOptions {
        WalOptions {
            appliance_id: 0x5eed,
            segment_size: SEGMENT,
            max_batch: MAX_BATCH,
            in_flight_per_device: 2,
            fua: true,
            ring_capacity: 256,
            replay_from: Some(1),
            truncate_corrupt: false,
            copies: 1,
            lose_unreadable: 0,
            stale: Vec::new(),
            on_loss: None,
            on_device_loss: DeviceLoss::Degrade,
        }
    }

    fn recovery_opts() -> RecoveryOptions {
        let o = opts();
        RecoveryOptions {
            replay_from: o.replay_from,
            truncate_corrupt: o.truncate_corrupt,
            segment_size: o.segment_size,
            max_batch: o.max_batch,
            appliance_id: o.appliance_id,
            lose_unreadable: o.lose_unreadable,
            stale: o.stale.clone(),
        }
    }

    fn devs_names(nsids: &[u32]) -> Vec<&'static str> {
        nsids
            .iter()
            .map(|&n| if n == AIO_NSID { "aio" } else { "malloc" })
            .collect()
    }

    /// New handles (each its own NVMe/TCP controller) on the namespaces.
    fn stripe(t: &Target, nsids: &[u32]) -> Result<Vec<WalDevice<SpdkDevice>>, String> {
        nsids
            .iter()
            .enumerate()
            .map(|(i, &nsid)| {
                let name = devs_names(&[nsid])[0];
                let dev = SpdkDevice::open(&device(t, name, nsid, WAL_BYTES, 16), &host_env())
                    .map_err(|e| format!("open {name}: {e}"))?;
                Ok(WalDevice {
                    index: i as u32,
                    name: name.into(),
                    device: dev,
                })
            })
            .collect()
    }

    /// Zeroes the whole WAL area and flushes. Zeroing only the segment
    /// headers would not do: the next seed starts again at segment 0 with
    /// seq 1, so a batch the previous seed left right after the new log's
    /// end (same seq; batch headers carry no appliance id) would be taken
    /// as part of it.
    fn wipe(devs: &[WalDevice<SpdkDevice>]) -> Result<(), String> {
        const CHUNK: u64 = 1 << 20;
        for wd in devs {
            let d = &wd.device;
            let bs = u64::from(d.info().block_size);
            let mut q = d.open_queue().map_err(|e| e.to_string())?;
            let zero = d.alloc_buf(CHUNK as usize);
            for (n, off) in (0..WAL_BYTES).step_by(CHUNK as usize).enumerate() {
                let req = Request::write(n as u64, off / bs, vec![zero.clone()]);
                let c = wait::run(&mut q, req).map_err(|e| format!("wipe {}: {e:?}", wd.name))?;
                c.result.map_err(|e| format!("wipe {}: {e}", wd.name))?;
            }
            let c = wait::run(&mut q, Request::flush(u64::MAX))
                .map_err(|e| format!("flush {}: {e:?}", wd.name))?;
            c.result.map_err(|e| format!("flush {}: {e}", wd.name))?;
        }
        Ok(())
    }

    fn run_seed(t: &Target, seed: u64) -> Result<Seen, String> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nsids = match rng.random_range(0..4) {
            0 => vec![AIO_NSID],
            1 => vec![MALLOC_NSID],
            2 => vec![AIO_NSID, MALLOC_NSID],
            _ => vec![MALLOC_NSID, AIO_NSID],
        };
        let devs = stripe(t, &nsids)?;
        wipe(&devs)?;
        let (wal, recovered) = Wal::open(devs, &opts(), ReactorConfig::unpinned("wal"))
            .map_err(|e| format!("open: {e}"))?;
        if !recovered.records.is_empty() {
            return Err(format!(
                "the wiped log recovered {} records",
                recovered.records.len()
            ));
        }
        let wal = Arc::new(wal);
        let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
        let writers = rng.random_range(1..=4u32);
        let per_writer = rng.random_range(50..400u32);
        let crash_after = Duration::from_micros(rng.random_range(0..30_000));
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                // Writers hold only a weak handle, so the crash can take the
                // WAL from under them.
                let (weak, acks) = (Arc::downgrade(&wal), acks.clone());
                let rng_seed = rng.random();
                thread::spawn(move || {
                    writer(seed, w, per_writer, rng_seed, &acks, || weak.upgrade());
                })
            })
            .collect();
        thread::sleep(crash_after);

        // The crash: what was acknowledged by now must survive; then the
        // reactor stops where it is. Writers hold the WAL only inside an
        // append, which the running reactor soon takes.
        let acked: Vec<Ack> = acks.lock().unwrap().clone();
        let mut wal = wal;
        let deadline = Instant::now() + Duration::from_secs(10);
        let wal = loop {
            match Arc::try_unwrap(wal) {
                Ok(w) => break w,
                Err(w) if Instant::now() < deadline => {
                    wal = w;
                    thread::yield_now();
                }
                Err(_) => return Err("writers held on to the WAL for 10 s".into()),
            }
        };
        wal.abandon();
        for h in handles {
            h.join().map_err(|_| "writer panicked".to_string())?;
        }

        // Restart: fresh handles of the same namespaces.
        let devs = stripe(t, &nsids)?;
        let got = recover(&devs, &recovery_opts()).map_err(|e| format!("recovery refused: {e}"))?;
        let kept = check(seed, Crash::Process, &acked, &got.records)?;
        // Recovery truncated the tail on the target: a second one, on other
        // handles, finds the same prefix.
        drop(devs);
        let twice: Recovered = recover(&stripe(t, &nsids)?, &recovery_opts())
            .map_err(|e| format!("second recovery refused: {e}"))?;
        if twice.records != got.records {
            return Err(format!(
                "a second recovery found {} records, the first {}",
                twice.records.len(),
                got.records.len()
            ));
        }
        let names: Vec<&str> = devs_names(&nsids);
        println!(
            "seed {seed}: {names:?}, {writers} writers x {per_writer}, crash after {crash_after:?}: \
             {} recovered, {kept} acknowledgements kept",
            got.records.len()
        );
        Ok(Seen {
            recovered: got.records.len(),
            kept,
            lost: (writers * per_writer) as usize - got.records.len(),
        })
    }

    /// A process crash at a random instant, on the target's namespaces.
    #[test]
    fn process_crash_on_the_target() {
        with_target("spdk_wal::process_crash_on_the_target", |t| {
            run_seeds("process crash on SPDK", SEEDS, move |seed| {
                run_seed(t, seed)
            });
        });
    }
}
