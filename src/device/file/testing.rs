//! Test support for the kernel-path backends: backing files on a filesystem
//! that takes O_DIRECT, and helpers to run requests to completion. The
//! device contract itself is checked once for every backend by
//! `tests/conformance.rs`; the unit tests here cover what is particular to
//! each backend.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::{BackendConfig, DeviceConfig, Role};
use crate::device::{wait, Completion, Device, IoBuf, Queue, Request, WaitHint};

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

/// Reads `blocks` blocks at `lba` into one buffer.
pub fn read_back<Q: Queue, D: Device>(dev: &D, queue: &mut Q, lba: u64, blocks: usize) -> IoBuf {
    let c = run(
        queue,
        Request::read(0, lba, vec![dev.alloc_buf(blocks * BLOCK)]),
    );
    c.bufs.into_iter().next().unwrap()
}

/// Asserts that `c` failed with an I/O error of kind `errno_kind` that
/// names its request (`kind` at `lba`, tag `tag`).
pub fn assert_io_error(
    c: &Completion,
    kind: crate::device::IoKind,
    lba: u64,
    tag: u64,
    errno_kind: std::io::ErrorKind,
) {
    let Err(crate::device::DeviceError::Io {
        kind: got_kind,
        lba: got_lba,
        source,
        ..
    }) = &c.result
    else {
        panic!("expected an I/O error, got {:?}", c.result);
    };
    assert_eq!((*got_kind, *got_lba, c.tag), (kind, lba, tag));
    assert_eq!(source.kind(), errno_kind);
}
