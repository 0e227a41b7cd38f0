//! The `spdk` backend against a local NVMe/TCP target: what the conformance
//! suite cannot see (flushes reaching the controller, namespace checks,
//! DMA buffers). Needs `--features spdk` and `nvmf_tgt`; without the target
//! each test prints `NOT RUN <name>: <why>` and passes, unless
//! STRIA_REQUIRE_SPDK=1.

/// Without the feature nothing of SPDK is built: say so, by name.
#[cfg(not(feature = "spdk"))]
#[test]
fn spdk_tests_did_not_run() {
    for name in [
        "spdk_device::flush_reaches_the_controller",
        "spdk_device::namespace_is_checked_against_the_map",
        "spdk_device::buffers_are_dma_memory",
        "spdk_device::unreachable_controller_is_reported",
        "conformance::spdk_backend::*",
    ] {
        println!("NOT RUN {name}: built without --features spdk");
    }
}

#[cfg(feature = "spdk")]
#[path = "common/spdk_target.rs"]
mod spdk_target;

#[cfg(feature = "spdk")]
mod with_spdk {
    use super::spdk_target;

    use stria::device::spdk::SpdkDevice;
    use stria::device::{wait, Device, DeviceError, IoBuf, Queue, Request};

    use spdk_target::{device, histogram_count, host_env, rpc_call, with_target, AIO_NSID};

    /// Every flush is an NVMe Flush the target hands to its bdev: the AIO
    /// bdev's flush histogram counts exactly the flushes sent.
    #[test]
    fn flush_reaches_the_controller() {
        with_target("flush_reaches_the_controller", |t| {
            let params = serde_json::json!({ "name": "AIO0", "enable": true, "opc": "flush" });
            rpc_call(&t.rpc, "bdev_enable_histogram", params).expect("enable the flush histogram");
            let before = histogram_count(&t.rpc, "AIO0").expect("histogram");

            let dev = SpdkDevice::open(&device(t, "aio", AIO_NSID, 0, 8), &host_env()).unwrap();
            assert!(
                dev.info().volatile_cache,
                "NVMe-oF reports a volatile cache"
            );
            let mut q = dev.open_queue().unwrap();
            const FLUSHES: u64 = 5;
            for i in 0..FLUSHES {
                let mut buf = dev.alloc_buf(4096);
                buf.fill(i as u8 + 1);
                let w = wait::run(&mut q, Request::write(i, i, vec![buf])).unwrap();
                w.result.unwrap();
                let f = wait::run(&mut q, Request::flush(100 + i)).unwrap();
                f.result.unwrap();
            }
            let after = histogram_count(&t.rpc, "AIO0").expect("histogram");
            assert_eq!(after - before, FLUSHES, "flushes counted by the AIO bdev");
            let off = serde_json::json!({ "name": "AIO0", "enable": false });
            rpc_call(&t.rpc, "bdev_enable_histogram", off).expect("disable the histogram");
        });
    }

    /// The namespace decides block size and capacity; the map may only shrink it.
    #[test]
    fn namespace_is_checked_against_the_map() {
        with_target("namespace_is_checked_against_the_map", |t| {
            let env = host_env();
            let whole = SpdkDevice::open(&device(t, "whole", AIO_NSID, 0, 4), &env).unwrap();
            assert_eq!(whole.info().block_size, 4096);
            assert_eq!(whole.info().capacity_blocks, (64 << 20) / 4096);
            assert_eq!(whole.info().mem_align, 4096);

            let part = SpdkDevice::open(&device(t, "part", AIO_NSID, 16 << 20, 4), &env).unwrap();
            assert_eq!(part.info().capacity_blocks, (16 << 20) / 4096);

            let too_big = SpdkDevice::open(&device(t, "big", AIO_NSID, 1 << 30, 4), &env);
            let err = too_big.expect_err("larger than the namespace").to_string();
            assert!(err.contains("holds 67108864 bytes"), "{err}");

            let mut small = device(t, "small", AIO_NSID, 0, 4);
            small.block_size = 512;
            let err = SpdkDevice::open(&small, &env).expect_err("sector size differs");
            assert!(matches!(err, DeviceError::Mismatch { .. }), "{err}");
            assert!(err.to_string().contains("4096-byte sectors"), "{err}");

            let err = SpdkDevice::open(&device(t, "none", 9, 0, 4), &env).expect_err("no ns 9");
            assert!(err.to_string().contains("no active namespace 9"), "{err}");
        });
    }

    /// Buffers come from SPDK's DMA memory, clones too; over TCP heap buffers
    /// are accepted as well.
    #[test]
    fn buffers_are_dma_memory() {
        with_target("buffers_are_dma_memory", |t| {
            let dev = SpdkDevice::open(&device(t, "dma", AIO_NSID, 0, 4), &host_env()).unwrap();
            let mut buf = dev.alloc_buf(8192);
            assert!(buf.is_dma());
            assert_eq!(buf.as_ptr() as usize % 4096, 0);
            buf.fill(0x5a);
            let copy = buf.clone();
            assert!(copy.is_dma() && copy[..] == buf[..]);

            let mut q = dev.open_queue().unwrap();
            let heap = IoBuf::from_slice(&[0x77; 4096]);
            assert!(!heap.is_dma());
            let w = wait::run(&mut q, Request::write(1, 40, vec![heap])).unwrap();
            w.result.unwrap();
            let r = wait::run(&mut q, Request::read(2, 40, vec![dev.alloc_buf(4096)])).unwrap();
            assert!(r.bufs[0].iter().all(|&b| b == 0x77));
        });
    }

    /// A device that cannot be reached says so, naming the transport ID.
    #[test]
    fn unreachable_controller_is_reported() {
        with_target("unreachable_controller_is_reported", |t| {
            let mut cfg = device(t, "gone", 1, 0, 4);
            if let stria::config::BackendConfig::Spdk(stria::config::SpdkConfig::Tcp {
                port, ..
            }) = &mut cfg.backend
            {
                *port = t.port.wrapping_add(1).max(1);
            }
            let err = SpdkDevice::open(&cfg, &host_env()).expect_err("nothing listens there");
            assert!(matches!(err, DeviceError::Unavailable { .. }), "{err}");
            assert!(err.to_string().contains("trtype:TCP"), "{err}");
        });
    }

    /// A subsystem that disappears under in-flight writes fails them: no
    /// write completes successfully once the controller is gone, the queue
    /// drains instead of hanging, and later requests are refused or fail.
    #[test]
    fn a_controller_that_disappears_fails_its_writes() {
        with_target("a_controller_that_disappears_fails_its_writes", |t| {
            const DOOMED: &str = "nqn.2016-06.io.spdk:stria-doomed";
            let rpc = |m: &str, p: serde_json::Value| rpc_call(&t.rpc, m, p);
            rpc(
                "bdev_malloc_create",
                serde_json::json!({ "name": "Doomed0", "num_blocks": 4096, "block_size": 4096 }),
            )
            .expect("a malloc bdev");
            rpc(
                "nvmf_create_subsystem",
                serde_json::json!({ "nqn": DOOMED, "allow_any_host": true }),
            )
            .expect("a subsystem");
            rpc(
                "nvmf_subsystem_add_ns",
                serde_json::json!({ "nqn": DOOMED, "namespace": { "bdev_name": "Doomed0" } }),
            )
            .expect("its namespace");
            rpc("nvmf_subsystem_add_listener", serde_json::json!({ "nqn": DOOMED, "listen_address": { "trtype": "tcp", "adrfam": "ipv4", "traddr": "127.0.0.1", "trsvcid": t.port.to_string() } }))
                .expect("its listener");
            let mut cfg = device(t, "doomed", 1, 0, 32);
            if let stria::config::BackendConfig::Spdk(stria::config::SpdkConfig::Tcp {
                nqn, ..
            }) = &mut cfg.backend
            {
                *nqn = DOOMED.to_string();
            }
            let dev = SpdkDevice::open(&cfg, &host_env()).expect("attach the doomed subsystem");
            let mut q = dev.open_queue().unwrap();
            for i in 0..32u64 {
                let buf = dev.alloc_buf(65536);
                q.submit(Request::write(i, i * 16, vec![buf])).unwrap();
            }
            rpc(
                "nvmf_delete_subsystem",
                serde_json::json!({ "nqn": DOOMED }),
            )
            .expect("delete it");
            let deleted = std::time::Instant::now();
            let mut done = Vec::new();
            let mut failed = 0;
            // Keep writing after the deletion: none of these may succeed.
            let mut later = 0u64;
            while q.in_flight() > 0 || later < 64 {
                assert!(
                    deleted.elapsed() < std::time::Duration::from_secs(30),
                    "the queue hangs"
                );
                if later < 64 {
                    let req = Request::write(1000 + later, later, vec![dev.alloc_buf(4096)]);
                    later += 1;
                    if q.submit(req).is_err() {
                        failed += 1;
                    }
                }
                done.clear();
                q.poll(&mut done);
                for c in &done {
                    if c.tag >= 1000 {
                        assert!(
                            c.result.is_err(),
                            "a write submitted after the controller went away succeeded"
                        );
                        failed += 1;
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(failed, 64, "every later write failed or was refused");
            let _ = rpc(
                "bdev_malloc_delete",
                serde_json::json!({ "name": "Doomed0" }),
            );
        });
    }
}
