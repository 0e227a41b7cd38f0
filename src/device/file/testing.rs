//! Test support for the kernel-path backends: backing files on a filesystem
//! that takes O_DIRECT, and checks of the device contract that every file
//! backend must pass, written once against the traits.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::{BackendConfig, DeviceConfig, Role};
use crate::device::{
    wait, Completion, Device, DeviceError, IoBuf, IoKind, Queue, Request, WaitHint,
};

/// Block size of every test device.
pub const BLOCK: usize = 4096;

/// A temporary folder removed on drop, on a filesystem that accepts O_DIRECT.
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    pub fn new() -> TestDir {
        TestDir(
            tempfile::Builder::new()
                .prefix("stria-file-")
                .tempdir_in(base_dir())
                .expect("create a test folder"),
        )
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// The system temporary folder, or `target/` of this crate when the former
/// refuses O_DIRECT (tmpfs before Linux 6.6).
fn base_dir() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let tmp = std::env::temp_dir();
        if takes_direct_io(&tmp) {
            tmp
        } else {
            let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
            std::fs::create_dir_all(&target).expect("create target/");
            target
        }
    })
}

fn takes_direct_io(dir: &Path) -> bool {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let Ok(probe) = tempfile::NamedTempFile::new_in(dir) else {
        return false;
    };
    if probe.as_file().set_len(BLOCK as u64).is_err() {
        return false;
    }
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(probe.path());
    let mut buf = IoBuf::new(BLOCK);
    direct.is_ok_and(|f| f.read_exact_at(&mut buf, 0).is_ok())
}

/// A device called `test-dev` of `size` bytes in 4 KiB blocks, queue depth 8.
pub fn config(backend: BackendConfig, size: u64) -> DeviceConfig {
    DeviceConfig {
        name: "test-dev".into(),
        role: Role::Wal,
        size,
        block_size: BLOCK as u32,
        queue_depth: 8,
        backend,
    }
}

/// A uring device config on `path`.
pub fn file_config(path: &Path, size: u64, direct: bool) -> DeviceConfig {
    config(
        BackendConfig::Uring {
            path: path.to_path_buf(),
            direct,
        },
        size,
    )
}

/// Polls `queue` until `n` completions came back, sleeping on what
/// `wait_hint` offers in between instead of spinning.
pub fn wait<Q: Queue>(queue: &mut Q, n: usize) -> Vec<Completion> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < n {
        if queue.poll(&mut out) > 0 {
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "timed out with {} of {n} completions",
            out.len()
        );
        let hint = queue.wait_hint();
        assert_ne!(
            hint,
            WaitHint::Idle,
            "queue idle with {} of {n} completions",
            out.len()
        );
        wait::wait(hint, Duration::from_millis(100));
    }
    out
}

/// Submits `req` and returns its completion, asserting it succeeded.
pub fn run<Q: Queue>(queue: &mut Q, req: Request) -> Completion {
    queue.submit(req).expect("request accepted");
    let mut done = wait(queue, 1);
    let c = done.pop().unwrap();
    if let Err(e) = &c.result {
        panic!("{} failed: {e}", c.kind);
    }
    c
}

fn filled<D: Device>(dev: &D, blocks: usize, byte: u8) -> IoBuf {
    let mut buf = dev.alloc_buf(blocks * BLOCK);
    buf.fill(byte);
    buf
}

/// Reads `blocks` blocks at `lba` into one buffer.
pub fn read_back<Q: Queue, D: Device>(dev: &D, queue: &mut Q, lba: u64, blocks: usize) -> IoBuf {
    let c = run(
        queue,
        Request::read(0, lba, vec![dev.alloc_buf(blocks * BLOCK)]),
    );
    c.bufs.into_iter().next().unwrap()
}

/// A write then a read of the same blocks give the data back, and the
/// completions carry tag, kind, LBA and buffers.
pub fn round_trip<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let c = run(&mut q, Request::write(7, 3, vec![filled(dev, 2, 0xa5)]));
    assert_eq!(
        (c.tag, c.kind, c.lba, c.bufs.len()),
        (7, IoKind::Write, 3, 1)
    );
    let back = read_back(dev, &mut q, 3, 2);
    assert!(back.iter().all(|&b| b == 0xa5));
    let around = read_back(dev, &mut q, 2, 4);
    assert!(around[..BLOCK].iter().all(|&b| b == 0));
    assert!(around[3 * BLOCK..].iter().all(|&b| b == 0));
    assert_eq!(q.in_flight(), 0);
    assert_eq!(q.wait_hint(), WaitHint::Idle);
}

/// Several buffers of one request land back to back, and a read scatters
/// into several buffers in the same order.
pub fn multi_buffer<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    let bufs = vec![filled(dev, 1, 1), filled(dev, 2, 2), filled(dev, 1, 3)];
    run(&mut q, Request::write(1, 10, bufs));
    let c = run(
        &mut q,
        Request::read(2, 10, vec![dev.alloc_buf(3 * BLOCK), dev.alloc_buf(BLOCK)]),
    );
    assert!(c.bufs[0][..BLOCK].iter().all(|&b| b == 1));
    assert!(c.bufs[0][BLOCK..].iter().all(|&b| b == 2));
    assert!(c.bufs[1].iter().all(|&b| b == 3));
}

/// `n` writes submitted before any is polled all complete, each with its
/// own data, and can be read back `n` at a time as well.
pub fn many_in_flight<D: Device>(dev: &D, n: usize) {
    assert!(dev.info().queue_depth as usize >= n);
    let mut q = dev.open_queue().unwrap();
    for i in 0..n {
        q.submit(Request::write(
            i as u64,
            i as u64,
            vec![filled(dev, 1, i as u8 + 1)],
        ))
        .unwrap();
    }
    assert_eq!(q.in_flight(), n);
    let done = wait(&mut q, n);
    assert!(done.iter().all(|c| c.result.is_ok()));
    for i in 0..n {
        q.submit(Request::read(
            i as u64,
            i as u64,
            vec![dev.alloc_buf(BLOCK)],
        ))
        .unwrap();
    }
    let mut done = wait(&mut q, n);
    done.sort_by_key(|c| c.tag);
    for (i, c) in done.iter().enumerate() {
        assert_eq!(c.tag, i as u64);
        assert!(c.bufs[0].iter().all(|&b| b == i as u8 + 1), "block {i}");
    }
}

/// The request past the queue depth is refused and handed back; once
/// completions are polled there is room again.
pub fn depth_limit<D: Device>(dev: &D) {
    let depth = dev.info().queue_depth as usize;
    let mut q = dev.open_queue().unwrap();
    for i in 0..depth {
        q.submit(Request::flush(i as u64)).unwrap();
    }
    let refused = q
        .submit(Request::write(99, 0, vec![filled(dev, 1, 9)]))
        .unwrap_err();
    assert!(refused.error.is_queue_full(), "{}", refused.error);
    assert_eq!(refused.request.tag, 99);
    assert_eq!(q.in_flight(), depth);
    let done = wait(&mut q, depth);
    assert!(done
        .iter()
        .all(|c| c.result.is_ok() && c.kind == IoKind::Flush));
    q.submit(refused.request).unwrap();
    wait(&mut q, 1);
}

/// A flush after a write completes, and the data is still there.
pub fn flush<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    run(&mut q, Request::write(1, 0, vec![filled(dev, 1, 0x42)]));
    let c = run(&mut q, Request::flush(2));
    assert_eq!((c.tag, c.kind, c.bufs.len()), (2, IoKind::Flush, 0));
    assert!(read_back(dev, &mut q, 0, 1).iter().all(|&b| b == 0x42));
}

/// Bad requests are refused at submission with their buffers handed back,
/// and the device is left as it was.
pub fn refusals_change_nothing<D: Device>(dev: &D) {
    let mut q = dev.open_queue().unwrap();
    run(&mut q, Request::write(1, 0, vec![filled(dev, 1, 0x11)]));
    let cap = dev.info().capacity_blocks;
    let mut partial = dev.alloc_buf(BLOCK + 512);
    partial.fill(0xee);
    let bad = [
        (Request::write(2, 0, vec![partial]), "partial block"),
        (
            Request::write(3, cap - 1, vec![filled(dev, 2, 0xee)]),
            "past the end",
        ),
        (
            Request::write(4, u64::MAX, vec![filled(dev, 1, 0xee)]),
            "overflowing LBA",
        ),
        (Request::write(5, 0, vec![]), "no buffers"),
    ];
    for (req, what) in bad {
        let tag = req.tag;
        let refused = q.submit(req).unwrap_err();
        assert!(
            matches!(
                refused.error,
                DeviceError::Misaligned { .. } | DeviceError::OutOfRange { .. }
            ),
            "{what}: {}",
            refused.error
        );
        assert_eq!(refused.request.tag, tag, "{what}");
    }
    if dev.info().mem_align > 1 {
        let mut odd = IoBuf::with_offset(BLOCK, 4096, 8);
        odd.fill(0xee);
        let refused = q.submit(Request::write(6, 0, vec![odd])).unwrap_err();
        assert!(
            matches!(refused.error, DeviceError::Misaligned { .. }),
            "{}",
            refused.error
        );
    }
    assert_eq!(q.in_flight(), 0);
    assert!(read_back(dev, &mut q, 0, 1).iter().all(|&b| b == 0x11));
    assert!(read_back(dev, &mut q, cap - 1, 1).iter().all(|&b| b == 0));
}

/// Two threads, each with its own queue on one shared device, write and
/// read back their own halves.
pub fn two_queues_on_two_threads<D: Device + Clone>(dev: &D) {
    let half = dev.info().capacity_blocks / 2;
    let threads: Vec<_> = (0..2u8)
        .map(|t| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                let mut q = dev.open_queue().unwrap();
                let base = u64::from(t) * half;
                for i in 0..16u64 {
                    run(
                        &mut q,
                        Request::write(i, base + i, vec![filled(&dev, 1, t * 16 + i as u8)]),
                    );
                }
                for i in 0..16u64 {
                    let back = read_back(&dev, &mut q, base + i, 1);
                    assert!(back.iter().all(|&b| b == t * 16 + i as u8));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
