//! What the kernel-path backends (`psync`, `uring`) share: creating, opening
//! and describing a backing file or block device, naming I/O errors, and
//! keeping a failed flush failed ([`FlushLatch`]).
//!
//! A backing file is used from byte 0 to the configured size; a file or
//! block device that is larger is fine (the rest is never touched), one that
//! is smaller is refused at open so that no request can run off its end.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::OnceLock;
use std::time::SystemTime;

use super::{BackendKind, DeviceError, DeviceInfo, IoBuf, IoKind, Request, Result, DEFAULT_ALIGN};
use crate::config::{DeviceConfig, Role};

/// Writes zeroes over the first `size` bytes of a WAL file.
///
/// Space reserved with fallocate is "unwritten": the first write to each
/// extent must also convert it, so every log append followed by an
/// fdatasync pays a journal commit (a median 250 us sync append against
/// 171 us on written blocks, on ext4 here). The log is rewritten in place
/// forever, so writing it once at format time removes that cost for good.
///
/// Only for regular files holding a WAL (block devices have no extents to
/// convert); `stria format` calls it once every device has been checked and
/// opened, since it destroys what the file held.
pub fn write_through(cfg: &DeviceConfig) -> Result<()> {
    let path = backing_path(cfg)?;
    let open_err = |source: io::Error| DeviceError::Open {
        device: cfg.name.clone(),
        path: path.to_path_buf(),
        source,
    };
    if cfg.role != Role::Wal || !fs::metadata(path).map_err(open_err)?.file_type().is_file() {
        return Ok(());
    }
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(open_err)?;
    write_zeroes(&file, cfg.size).map_err(open_err)?;
    file.sync_all().map_err(open_err)
}

fn write_zeroes(file: &File, size: u64) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let zeroes = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(CHUNK as u64) as usize;
        file.write_all_at(&zeroes[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Creates the backing file of a kernel-path device for `stria format`: the
/// parent folder and the file if missing, with at least `cfg.size` bytes.
///
/// The space is reserved with `fallocate` (falling back to a sparse
/// `set_len` on filesystems that cannot) so that a running appliance never
/// meets ENOSPC in the middle of its log. A file already larger than
/// configured keeps its size and contents. A block device is never resized;
/// it only has to be large enough.
///
/// What it creates is durable when it returns: the file is fsynced after
/// being sized, and so is every directory that gained an entry (the file's
/// folder, the folders `create_dir_all` made, and the existing one above
/// them), from the bottom up, so that a power cut right after `stria
/// format` cannot take the new file away.
pub fn create(cfg: &DeviceConfig) -> Result<()> {
    let path = backing_path(cfg)?;
    let open_err = |source: io::Error| DeviceError::Open {
        device: cfg.name.clone(),
        path: path.to_path_buf(),
        source,
    };
    if let Ok(meta) = fs::metadata(path) {
        if meta.file_type().is_block_device() {
            let file = OpenOptions::new().read(true).open(path).map_err(open_err)?;
            let actual = byte_len(&file).map_err(open_err)?;
            if actual < cfg.size {
                return Err(open_err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the block device holds {actual} bytes, less than the configured {}; \
                         a block device cannot be grown, lower the device's `size`",
                        cfg.size
                    ),
                )));
            }
            return Ok(());
        }
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The folders about to be made, deepest first, then the existing one
    // that gets the first of them.
    let mut changed_dirs: Vec<&Path> = Vec::new();
    for dir in parent.ancestors() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        changed_dirs.push(dir);
        if dir.exists() {
            break;
        }
    }
    fs::create_dir_all(parent).map_err(open_err)?;
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    let (file, created) = match options.clone().create_new(true).open(path) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            (options.open(path).map_err(open_err)?, false)
        }
        Err(e) => return Err(open_err(e)),
    };
    let short = byte_len(&file).map_err(open_err)? < cfg.size;
    if short {
        reserve(&file, cfg.size).map_err(open_err)?;
    }
    if short || created {
        file.sync_all().map_err(open_err)?;
    }
    if created {
        for dir in changed_dirs {
            sync_dir(dir).map_err(open_err)?;
        }
    }
    Ok(())
}

/// Makes the entries of the directory `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(test)]
    tests::SYNCED_DIRS.with(|synced| synced.borrow_mut().push(dir.to_path_buf()));
    match File::open(dir).and_then(|d| d.sync_all()) {
        // Some filesystems cannot fsync a directory at all; their entries
        // are as durable as they will get.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        result => result,
    }
}

/// Grows `file` to `size` bytes, allocating the blocks when the filesystem
/// can and leaving a sparse tail when it cannot.
fn reserve(file: &File, size: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(size).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{size} bytes is too large for a file"),
        )
    })?;
    // SAFETY: fallocate only reads its integer arguments; the descriptor is
    // open for writing and stays open for the call, borrowed from `file`.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => file.set_len(size),
        _ => Err(err),
    }
}

/// Opens the backing file of a kernel-path device for reading and writing,
/// with `O_DIRECT` when `direct`, and checks that it holds `cfg.size` bytes.
///
/// With `direct`, one block is read at LBA 0 to prove that the filesystem
/// and the device accept direct I/O of the configured block size, so that a
/// mismatch shows here rather than on the first write of the log.
/// Opens `path` and takes an exclusive advisory lock (flock) on it without
/// waiting: `Ok(None)` when another open file holds it. The lock lasts as
/// long as the returned file is open, and ends with the process.
pub fn lock_exclusive(path: &Path) -> io::Result<Option<File>> {
    let file = File::open(path)?;
    // SAFETY: flock only reads the descriptor, which `file` keeps open for
    // the whole call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Some(file));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(err)
    }
}

pub fn open(cfg: &DeviceConfig, direct: bool) -> Result<File> {
    let path = backing_path(cfg)?;
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    let file = options
        .open(path)
        .map_err(|e| open_error(cfg, path, direct, e))?;
    let actual = byte_len(&file).map_err(|e| open_error(cfg, path, direct, e))?;
    if actual < cfg.size {
        return Err(DeviceError::TooSmall {
            device: cfg.name.clone(),
            path: path.to_path_buf(),
            actual,
            configured: cfg.size,
        });
    }
    if direct && cfg.size >= u64::from(cfg.block_size) {
        let mut probe = IoBuf::new(cfg.block_size as usize);
        file.read_exact_at(&mut probe, 0)
            .map_err(|e| open_error(cfg, path, direct, e))?;
    }
    Ok(file)
}

/// Turns a failure to open or probe `path` into an error that says what to
/// do about it.
fn open_error(cfg: &DeviceConfig, path: &Path, direct: bool, e: io::Error) -> DeviceError {
    let source = match e.raw_os_error() {
        Some(libc::ENOENT) => io::Error::new(
            e.kind(),
            format!("{e}; the device is missing or not formatted (run `stria format`)"),
        ),
        Some(libc::EINVAL) if direct => io::Error::new(
            e.kind(),
            format!(
                "{e}: the filesystem or device refuses O_DIRECT with {}-byte blocks \
                 (tmpfs and some network filesystems do); set `direct: false` for this \
                 device or use a block size the device supports",
                cfg.block_size
            ),
        ),
        _ => e,
    };
    DeviceError::Open {
        device: cfg.name.clone(),
        path: path.to_path_buf(),
        source,
    }
}

/// The byte length of a regular file or a block device (for which the
/// metadata length is 0, so it is measured by seeking to the end).
fn byte_len(file: &File) -> io::Result<u64> {
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

fn backing_path(cfg: &DeviceConfig) -> Result<&Path> {
    cfg.path().ok_or_else(|| DeviceError::Unavailable {
        device: cfg.name.clone(),
        backend: cfg.kind().as_str(),
        why: "not a file-backed device (only psync and uring have a path)".into(),
    })
}

/// What a file device is. Direct I/O needs page-aligned buffers (the
/// strictest any device's logical block size asks for); buffered I/O copies
/// through the page cache and takes any address. The page cache, and the
/// drive's own cache under it, hold completed writes until a flush.
pub fn info(cfg: &DeviceConfig, backend: BackendKind, direct: bool) -> DeviceInfo {
    DeviceInfo {
        name: cfg.name.clone(),
        backend,
        block_size: cfg.block_size,
        capacity_blocks: cfg.capacity_blocks(),
        queue_depth: cfg.queue_depth,
        mem_align: if direct { DEFAULT_ALIGN } else { 1 },
        volatile_cache: true,
    }
}

/// The error of a request that the kernel failed.
pub fn io_error(info: &DeviceInfo, req: &Request, source: io::Error) -> DeviceError {
    DeviceError::Io {
        device: info.name.clone(),
        kind: req.kind(),
        lba: req.lba(),
        source,
    }
}

/// Makes a failed flush stay failed, for every queue of a device.
///
/// All queues of a kernel-path device share one open file description, and
/// Linux reports a writeback error once per description: after one queue's
/// flush fails with EIO, another queue's flush, covering pages that were
/// lost just the same, can return success, and so can a retry of the failed
/// flush, because the kernel marked the pages clean when writeback failed.
/// A flush that succeeds after a failure therefore proves nothing.
///
/// So the first failure poisons the device: every flush that completes
/// afterwards, on any queue, fails with [`DeviceError::Io`] saying when and
/// how the first one failed, and that the device must be reopened after
/// recovery. Writes and reads go on as before. With buffered I/O (psync,
/// and uring with `direct: false`) a failed write poisons too, since the
/// page cache may have already lost earlier writes that only a later
/// writeback would have reported.
#[derive(Debug)]
pub struct FlushLatch {
    /// Writes go through the page cache.
    buffered: bool,
    /// What failed first, and when; set once.
    first: OnceLock<String>,
    /// Fails the next flush that completes, whatever the kernel said.
    #[cfg(test)]
    fail_next_flush: std::sync::atomic::AtomicBool,
}

impl FlushLatch {
    /// A healthy device's latch; `buffered` when writes go through the page
    /// cache.
    pub fn new(buffered: bool) -> FlushLatch {
        FlushLatch {
            buffered,
            first: OnceLock::new(),
            #[cfg(test)]
            fail_next_flush: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Makes the next flush that completes fail with EIO, as a failed
    /// writeback would.
    #[cfg(test)]
    pub fn fail_next_flush(&self) {
        self.fail_next_flush
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The final result of `req`, whose kernel call ended with `result`:
    /// records a failure that poisons the device, and fails a flush of a
    /// poisoned device.
    pub fn finish(&self, info: &DeviceInfo, req: &Request, result: Result<()>) -> Result<()> {
        let kind = req.kind();
        #[cfg(test)]
        let result = if kind == IoKind::Flush
            && self
                .fail_next_flush
                .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            Err(io_error(info, req, io::Error::from_raw_os_error(libc::EIO)))
        } else {
            result
        };
        // A FUA write syncs like a flush: its failure poisons the device,
        // and on a poisoned device it cannot claim durability.
        let kind = if req.makes_durable() {
            IoKind::Flush
        } else {
            kind
        };
        match (&result, kind) {
            (Err(e), IoKind::Flush) => self.poison(info, req, e),
            (Err(e), IoKind::Write) if self.buffered => self.poison(info, req, e),
            (Ok(()), IoKind::Flush) => {
                if let Some(first) = self.first.get() {
                    return Err(io_error(info, req, io::Error::other(sticky(first))));
                }
            }
            _ => {}
        }
        result
    }

    /// Records the failure `e` of `req` unless an earlier one is recorded.
    fn poison(&self, info: &DeviceInfo, req: &Request, e: &DeviceError) {
        let cause = match e {
            DeviceError::Io { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        let what = match req.kind() {
            IoKind::Flush => "flush".to_string(),
            kind => format!("{kind} at LBA {}", req.lba()),
        };
        let when = humantime::format_rfc3339_seconds(SystemTime::now());
        let first = format!("{what} failed at {when} ({cause})");
        if self.first.set(first).is_ok() {
            tracing::error!(
                device = %info.name,
                "{}; every later flush of the device will fail",
                sticky(self.first.get().expect("just set"))
            );
        }
    }
}

/// Why a flush after the failure `first` fails.
fn sticky(first: &str) -> String {
    format!(
        "an earlier {first}; data written since the last successful flush may be lost, \
         so no later flush can vouch for it: the device must be reopened (after recovery)"
    )
}

/// Backing files and a contract check shared by the psync and uring tests.
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::PathBuf;

    use super::testing::{file_config, TestDir};
    use super::*;

    thread_local! {
        /// The directories this thread fsynced, in order.
        pub(super) static SYNCED_DIRS: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
    }

    fn take_synced_dirs() -> Vec<PathBuf> {
        SYNCED_DIRS.with(|synced| synced.take())
    }

    #[test]
    fn create_syncs_every_directory_that_gained_an_entry() {
        let dir = TestDir::new();
        let top = dir.path();
        take_synced_dirs();
        let cfg = file_config(&top.join("a/b/dev.img"), 1 << 20, false);
        create(&cfg).unwrap();
        assert_eq!(
            take_synced_dirs(),
            [top.join("a/b"), top.join("a"), top.to_path_buf()]
        );
        // Formatting again creates nothing.
        create(&cfg).unwrap();
        assert!(take_synced_dirs().is_empty());
        // A new file in an existing folder: that folder only.
        create(&file_config(&top.join("a/other.img"), 1 << 20, false)).unwrap();
        assert_eq!(take_synced_dirs(), [top.join("a")]);
    }

    #[test]
    fn create_makes_folder_and_file_of_the_configured_size() {
        let dir = TestDir::new();
        let cfg = file_config(&dir.path().join("a/b/dev.img"), 1 << 20, false);
        create(&cfg).unwrap();
        assert_eq!(fs::metadata(cfg.path().unwrap()).unwrap().len(), 1 << 20);
        // Formatting again changes nothing.
        create(&cfg).unwrap();
        assert_eq!(fs::metadata(cfg.path().unwrap()).unwrap().len(), 1 << 20);
    }

    fn data_config(path: &Path, size: u64) -> DeviceConfig {
        let mut cfg = file_config(path, size, false);
        cfg.role = Role::Data;
        cfg
    }

    #[test]
    fn create_keeps_a_larger_data_file_and_its_contents() {
        let dir = TestDir::new();
        let path = dir.path().join("big.img");
        fs::write(&path, vec![7u8; 2 << 20]).unwrap();
        create(&data_config(&path, 1 << 20)).unwrap();
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 2 << 20);
        assert!(data.iter().all(|&b| b == 7));
    }

    #[test]
    fn write_through_writes_every_block_of_a_wal_file() {
        let dir = TestDir::new();
        let path = dir.path().join("wal.img");
        fs::write(&path, vec![7u8; 2 << 20]).unwrap();
        let cfg = file_config(&path, 1 << 20, false);
        create(&cfg).unwrap();
        assert!(
            fs::read(&path).unwrap().iter().all(|&b| b == 7),
            "create keeps contents"
        );
        write_through(&cfg).unwrap();
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 2 << 20);
        assert!(
            data[..1 << 20].iter().all(|&b| b == 0),
            "the log area is written"
        );
        assert!(
            data[1 << 20..].iter().all(|&b| b == 7),
            "past the size is not touched"
        );
    }

    #[test]
    fn create_grows_a_smaller_data_file_keeping_its_head() {
        let dir = TestDir::new();
        let path = dir.path().join("small.img");
        fs::write(&path, [9u8; 4096]).unwrap();
        create(&data_config(&path, 1 << 20)).unwrap();
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 1 << 20);
        assert!(data[..4096].iter().all(|&b| b == 9));
        assert!(data[4096..].iter().all(|&b| b == 0));
    }

    #[test]
    fn open_of_a_missing_file_says_to_format() {
        let dir = TestDir::new();
        let cfg = file_config(&dir.path().join("absent.img"), 1 << 20, false);
        for direct in [false, true] {
            let err = open(&cfg, direct).unwrap_err();
            let DeviceError::Open { source, .. } = &err else {
                panic!("expected Open, got {err:?}");
            };
            assert_eq!(source.kind(), io::ErrorKind::NotFound);
            let msg = err.to_string();
            assert!(
                msg.contains("test-dev") && msg.contains("absent.img"),
                "{msg}"
            );
            assert!(msg.contains("stria format"), "{msg}");
        }
    }

    #[test]
    fn open_of_a_too_small_file_names_both_sizes() {
        let dir = TestDir::new();
        let path = dir.path().join("short.img");
        fs::write(&path, vec![0u8; 64 << 10]).unwrap();
        let err = open(&file_config(&path, 1 << 20, false), true).unwrap_err();
        assert!(
            matches!(err, DeviceError::TooSmall { actual, configured, .. }
                if actual == 64 << 10 && configured == 1 << 20),
            "{err:?}"
        );
    }

    #[test]
    fn open_of_a_larger_file_uses_its_head() {
        let dir = TestDir::new();
        let path = dir.path().join("big.img");
        fs::write(&path, vec![0u8; 2 << 20]).unwrap();
        open(&file_config(&path, 1 << 20, false), true).unwrap();
    }

    #[test]
    fn refused_o_direct_suggests_direct_false() {
        // tmpfs accepts O_DIRECT since Linux 6.6, so the refusal cannot be
        // produced on demand everywhere; the message is checked directly.
        let dir = TestDir::new();
        let path = dir.path().join("dev.img");
        let cfg = file_config(&path, 1 << 20, true);
        let err = open_error(
            &cfg,
            &path,
            true,
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        let DeviceError::Open { source, .. } = &err else {
            panic!("expected Open, got {err:?}");
        };
        assert_eq!(source.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("direct: false"), "{err}");
    }

    #[test]
    fn info_follows_the_config() {
        let dir = TestDir::new();
        let cfg = file_config(&dir.path().join("dev.img"), 1 << 20, true);
        let direct = info(&cfg, BackendKind::Uring, true);
        assert_eq!(direct.capacity_blocks, 256);
        assert_eq!(direct.mem_align, DEFAULT_ALIGN);
        assert!(direct.volatile_cache);
        assert_eq!(info(&cfg, BackendKind::Psync, false).mem_align, 1);
    }
}
