//! The device conformance suite: the same cases against every backend.
//!
//! Each case is a generic function over [`Device`]; the `suite!` macro below
//! instantiates all of them for `sim`, `psync` and `uring`. When the kernel
//! refuses io_uring, the uring cases print `SKIPPED <name>: <why>` and pass
//! (set STRIA_REQUIRE_URING=1 to make that a failure instead); they never
//! pass without saying so.
//!
//! With `--features spdk` they also run against `spdk`: namespace 1 (a
//! Malloc bdev) of a local `nvmf_tgt` reached over NVMe/TCP, which the
//! tests start themselves (see tests/common/spdk_target.rs). Without
//! `nvmf_tgt` those cases print `NOT RUN <name>: <why>` and pass, unless
//! STRIA_REQUIRE_SPDK=1.

use std::path::Path;
use std::thread;
use std::time::Duration;

use stria::config::{BackendConfig, DeviceConfig, Role, SimConfig};
use stria::device::psync::PsyncDevice;
use stria::device::sim::SimDevice;
use stria::device::uring::{uring_available, UringDevice};
use stria::device::{wait, Completion, Device, DeviceError, IoBuf, IoKind, Queue, Request};

const BS: usize = 4096;
const BLOCKS: u64 = 4096; // 16 MiB
const QD: u32 = 16;

/// A buffer of `blocks` blocks filled with a pattern derived from `seed`.
fn pattern(dev: &impl Device, blocks: usize, seed: u64) -> IoBuf {
    let mut buf = dev.alloc_buf(blocks * BS);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed.wrapping_mul(31).wrapping_add(i as u64 / 7) % 251) as u8;
    }
    buf
}

/// Submits every request (respecting the queue depth) and returns all the
/// completions, sleeping on the queue's wait hint rather than spinning.
fn run_all<Q: Queue>(q: &mut Q, reqs: Vec<Request>) -> Vec<Completion> {
    let total = reqs.len();
    let mut pending = reqs.into_iter().peekable();
    let mut done = Vec::with_capacity(total);
    while done.len() < total {
        while pending.peek().is_some() && q.in_flight() < q.info().queue_depth as usize {
            let req = pending.next().expect("peeked");
            if let Err(rejected) = q.submit(req) {
                panic!("request refused: {}", rejected.error);
            }
        }
        if q.poll(&mut done) == 0 {
            wait::wait(q.wait_hint(), Duration::from_millis(5));
        }
    }
    done
}

fn one<Q: Queue>(q: &mut Q, req: Request) -> Completion {
    let c = wait::run(q, req).unwrap_or_else(|r| panic!("refused: {}", r.error));
    c.result.as_ref().unwrap_or_else(|e| panic!("failed: {e}"));
    c
}

fn read<D: Device>(dev: &D, q: &mut D::Queue, lba: u64, blocks: usize) -> IoBuf {
    let mut c = one(q, Request::read(9, lba, vec![dev.alloc_buf(blocks * BS)]));
    c.bufs.pop().expect("buffer back")
}

fn round_trip<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let data = pattern(dev, 1, 1);
    let c = one(&mut q, Request::write(7, 5, vec![data.clone()]));
    assert_eq!((c.tag, c.kind, c.lba), (7, IoKind::Write, 5));
    assert_eq!(
        &c.bufs[0][..],
        &data[..],
        "write gives its buffer back intact"
    );
    assert_eq!(&read(dev, &mut q, 5, 1)[..], &data[..]);
    // The last block is addressable too.
    let last = BLOCKS - 1;
    one(&mut q, Request::write(8, last, vec![pattern(dev, 1, 2)]));
    assert_eq!(&read(dev, &mut q, last, 1)[..], &pattern(dev, 1, 2)[..]);
}

fn multi_buffer<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let parts = [pattern(dev, 1, 3), pattern(dev, 2, 4), pattern(dev, 1, 5)];
    let whole: Vec<u8> = parts.iter().flat_map(|b| b.iter().copied()).collect();
    one(&mut q, Request::write(1, 10, parts.to_vec()));
    let c = one(
        &mut q,
        Request::read(2, 10, vec![dev.alloc_buf(3 * BS), dev.alloc_buf(BS)]),
    );
    let back: Vec<u8> = c.bufs.iter().flat_map(|b| b.iter().copied()).collect();
    assert_eq!(back, whole);
}

fn bad_requests_change_nothing<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let before = pattern(dev, 2, 6);
    one(&mut q, Request::write(1, 20, vec![before.clone()]));
    let mut bad = vec![
        (
            "partial block",
            Request::write(3, 20, vec![IoBuf::new(BS / 2)]),
        ),
        (
            "past the end",
            Request::write(4, BLOCKS - 1, vec![pattern(dev, 2, 7)]),
        ),
        (
            "LBA overflow",
            Request::write(5, u64::MAX, vec![pattern(dev, 1, 7)]),
        ),
        ("no buffers", Request::write(6, 20, vec![])),
        (
            "read past the end",
            Request::read(7, BLOCKS, vec![dev.alloc_buf(BS)]),
        ),
    ];
    // Buffered psync takes any address; the others need aligned memory.
    let align = dev.info().mem_align;
    if align > 1 {
        let odd = IoBuf::with_offset(BS, 4096, align / 2);
        bad.push(("misaligned address", Request::write(2, 20, vec![odd])));
        let odd = IoBuf::with_offset(BS, 4096, align / 2);
        bad.push(("misaligned read", Request::read(8, 20, vec![odd])));
    }
    for (what, req) in bad {
        let nbufs = match &req.op {
            stria::device::Op::Write { bufs, .. } | stria::device::Op::Read { bufs, .. } => {
                bufs.len()
            }
            stria::device::Op::Flush => 0,
        };
        let rejected = q.submit(req).expect_err(what);
        assert!(
            matches!(
                rejected.error,
                DeviceError::Misaligned { .. } | DeviceError::OutOfRange { .. }
            ),
            "{what}: {}",
            rejected.error
        );
        assert_eq!(
            rejected.request.into_bufs().len(),
            nbufs,
            "{what}: buffers come back"
        );
        assert_eq!(q.in_flight(), 0, "{what}: nothing in flight");
    }
    assert_eq!(
        &read(dev, &mut q, 20, 2)[..],
        &before[..],
        "nothing changed"
    );
}

fn flush_completes<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    one(&mut q, Request::write(1, 30, vec![pattern(dev, 4, 8)]));
    let c = one(&mut q, Request::flush(2));
    assert_eq!((c.tag, c.kind), (2, IoKind::Flush));
    assert!(c.bufs.is_empty());
}

fn fua_write_round_trip<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let data = pattern(dev, 2, 12);
    let c = one(&mut q, Request::write_fua(3, 40, vec![data.clone()]));
    assert_eq!((c.tag, c.kind, c.lba), (3, IoKind::Write, 40));
    assert_eq!(&read(dev, &mut q, 40, 2)[..], &data[..]);
}

fn queue_depth_limit_holds<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let depth = q.info().queue_depth as usize;
    for i in 0..depth {
        q.submit(Request::write(
            i as u64,
            100 + i as u64,
            vec![pattern(dev, 1, i as u64)],
        ))
        .unwrap_or_else(|r| panic!("request {i} of {depth} refused: {}", r.error));
    }
    assert_eq!(q.in_flight(), depth);
    let over = q
        .submit(Request::flush(999))
        .expect_err("one more than the depth");
    assert!(over.error.is_queue_full(), "{}", over.error);
    let mut done = Vec::new();
    while done.len() < depth {
        if q.poll(&mut done) == 0 {
            wait::wait(q.wait_hint(), Duration::from_millis(5));
        }
    }
    assert!(done.iter().all(|c| c.result.is_ok()));
    assert_eq!(q.in_flight(), 0);
    for i in 0..depth {
        assert_eq!(
            &read(dev, &mut q, 100 + i as u64, 1)[..],
            &pattern(dev, 1, i as u64)[..]
        );
    }
}

fn many_in_flight<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let reqs: Vec<Request> = (0..256u64)
        .map(|i| Request::write(i, 512 + i * 2, vec![pattern(dev, 2, i)]))
        .collect();
    let done = run_all(&mut q, reqs);
    let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    assert_eq!(
        tags,
        (0..256).collect::<Vec<_>>(),
        "every tag completes once"
    );
    assert!(done.iter().all(|c| c.result.is_ok()));
    for i in (0..256u64).step_by(17) {
        assert_eq!(
            &read(dev, &mut q, 512 + i * 2, 2)[..],
            &pattern(dev, 2, i)[..]
        );
    }
}

fn several_reactors_at_once<D: Device + Clone>(dev: &D) {
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let dev = dev.clone();
            thread::spawn(move || {
                let mut q = dev.open_queue().unwrap();
                let base = 1024 + t * 256;
                let reqs = (0..128u64)
                    .map(|i| Request::write(i, base + i, vec![pattern(&dev, 1, t * 1000 + i)]))
                    .collect();
                let done = run_all(&mut q, reqs);
                assert!(done.iter().all(|c| c.result.is_ok()));
                one(&mut q, Request::flush(9999));
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let mut q = dev.open_queue().unwrap();
    for t in 0..4u64 {
        for i in (0..128u64).step_by(9) {
            let got = read(dev, &mut q, 1024 + t * 256 + i, 1);
            assert_eq!(
                &got[..],
                &pattern(dev, 1, t * 1000 + i)[..],
                "thread {t} block {i}"
            );
        }
    }
}

// --- backends ---------------------------------------------------------------

fn sim() -> SimDevice {
    let model = SimConfig {
        write_us: 5,
        read_us: 5,
        flush_us: 10,
        bandwidth: 0,
        ..SimConfig::default()
    };
    SimDevice::new("sim0", BS as u32, BLOCKS, QD, model)
}

fn file_cfg(dir: &Path, backend: &str) -> DeviceConfig {
    let path = dir.join(format!("{backend}.img"));
    let (backend, queue_depth) = match backend {
        "psync" => (BackendConfig::Psync { path }, QD),
        "uring" => (BackendConfig::Uring { path, direct: true }, QD),
        // Through the page cache, with a depth that is not a power of two
        // (the ring is rounded up; the queue must still stop at 5).
        _ => (
            BackendConfig::Uring {
                path,
                direct: false,
            },
            5,
        ),
    };
    let cfg = DeviceConfig {
        name: "dev0".into(),
        role: Role::Wal,
        size: BLOCKS * BS as u64,
        block_size: BS as u32,
        queue_depth,
        backend,
    };
    stria::device::AnyDevice::create(&cfg).expect("create the backing file");
    cfg
}

fn tempdir() -> tempfile::TempDir {
    // Under target/: a real filesystem, where O_DIRECT works (tmpfs refuses it).
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

fn with_psync(case: impl FnOnce(&PsyncDevice)) {
    let dir = tempdir();
    case(&PsyncDevice::open(&file_cfg(dir.path(), "psync")).expect("open psync"));
}

fn with_uring(name: &str, variant: &str, case: impl FnOnce(&UringDevice)) {
    if let Err(why) = uring_available() {
        if std::env::var_os("STRIA_REQUIRE_URING").is_some() {
            panic!("{name}: io_uring is required but unavailable: {why}");
        }
        println!("SKIPPED {name}: io_uring unavailable: {why}");
        eprintln!("SKIPPED {name}: io_uring unavailable: {why}");
        return;
    }
    let dir = tempdir();
    case(&UringDevice::open(&file_cfg(dir.path(), variant)).expect("open uring"));
}

#[cfg(feature = "spdk")]
#[path = "common/spdk_target.rs"]
mod spdk_target;

#[cfg(feature = "spdk")]
fn with_spdk(name: &str, case: impl FnOnce(&stria::device::spdk::SpdkDevice)) {
    spdk_target::with_target(name, |target| {
        let size = BLOCKS * BS as u64;
        let cfg = spdk_target::device(target, "spdk0", spdk_target::MALLOC_NSID, size, QD);
        let dev = stria::device::spdk::SpdkDevice::open(&cfg, &spdk_target::host_env())
            .unwrap_or_else(|e| panic!("{name}: open spdk: {e}"));
        case(&dev);
    });
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sim_backend {
            $( #[test] fn $case() { super::$case(&super::sim()); } )*
        }
        mod psync_backend {
            $( #[test] fn $case() { super::with_psync(|d| super::$case(d)); } )*
        }
        mod uring_backend {
            $( #[test] fn $case() {
                super::with_uring(concat!("uring_backend::", stringify!($case)), "uring", |d| super::$case(d));
            } )*
        }
        mod uring_buffered_backend {
            $( #[test] fn $case() {
                super::with_uring(concat!("uring_buffered_backend::", stringify!($case)), "uring-buffered", |d| super::$case(d));
            } )*
        }
        #[cfg(feature = "spdk")]
        mod spdk_backend {
            $( #[test] fn $case() {
                super::with_spdk(concat!("spdk_backend::", stringify!($case)), |d| super::$case(d));
            } )*
        }
    };
}

suite!(
    round_trip,
    multi_buffer,
    bad_requests_change_nothing,
    flush_completes,
    fua_write_round_trip,
    queue_depth_limit_holds,
    many_in_flight,
    several_reactors_at_once,
);

/// Devices are cheap handles that reactors on other threads share.
#[test]
fn devices_are_shareable_handles() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<SimDevice>();
    shareable::<PsyncDevice>();
    shareable::<UringDevice>();
    #[cfg(feature = "spdk")]
    shareable::<stria::device::spdk::SpdkDevice>();
}
