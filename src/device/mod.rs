//! Raw block devices.
//!
//! A [`Device`] is a block device with no filesystem: a block size, a
//! capacity in blocks, and queues. A reactor opens its own [`Queue`] on each
//! device it uses and is the only thread that touches it: it submits
//! [`Request`]s (write, read, flush of whole blocks from aligned [`IoBuf`]s)
//! and polls [`Completion`]s without blocking. This is the shape of an NVMe
//! queue pair, so the same engine code drives every backend:
//!
//! | backend | what it is | blocks its reactor? |
//! |---|---|---|
//! | [`sim`] | RAM-backed NVMe model: volatile cache, latency, faults, power cut | no |
//! | [`psync`] | pwrite/pread/fdatasync, the plain kernel baseline | yes, by design |
//! | [`uring`] | io_uring with O_DIRECT, flush = fsync(DATASYNC) | no |
//! | `spdk` | SPDK's userspace NVMe driver, PCIe or NVMe/TCP (feature `spdk`) | no |
//!
//! Durability contract (every backend): a write is durable once a flush that
//! was submitted after the write completed has itself completed. A completed
//! write is visible to reads at once, durable or not. Once a flush of a
//! device fails (and, with buffered I/O, once a write fails), every later
//! flush of that device fails too until it is reopened: the kernel reports a
//! lost writeback once, so a flush that succeeds after a failure would prove
//! nothing.
//!
//! Engines are written against the traits here, never a backend; the
//! [`AnyDevice`] enum picks a backend at run time from the device map.

mod any;
mod buf;
mod error;
mod file;
pub mod psync;
pub mod sim;
#[cfg(feature = "spdk")]
pub mod spdk;
pub mod uring;
pub mod wait;

use std::fmt;
use std::os::fd::RawFd;
use std::time::Instant;

pub use any::{AnyDevice, AnyQueue};
pub use buf::{IoBuf, DEFAULT_ALIGN};
pub use error::{DeviceError, Result};
pub use file::{create as create_file, lock_exclusive, write_through};

/// Which backend drives a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Sim,
    Psync,
    Uring,
    Spdk,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Psync => "psync",
            BackendKind::Uring => "uring",
            BackendKind::Spdk => "spdk",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a device is, fixed when it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The name from the device map, used in every error.
    pub name: String,
    pub backend: BackendKind,
    /// Bytes per logical block; every LBA and buffer length is in these.
    pub block_size: u32,
    /// Number of addressable blocks.
    pub capacity_blocks: u64,
    /// Requests one queue may hold in flight at once.
    pub queue_depth: u32,
    /// Required alignment of buffer addresses, in bytes.
    pub mem_align: usize,
    /// True when completed writes sit in a volatile cache until a flush.
    pub volatile_cache: bool,
}

impl DeviceInfo {
    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks * u64::from(self.block_size)
    }
}

/// The kind of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    Write,
    Read,
    Flush,
}

impl fmt::Display for IoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoKind::Write => "write",
            IoKind::Read => "read",
            IoKind::Flush => "flush",
        })
    }
}

/// What a request asks the device to do.
#[derive(Debug)]
pub enum Op {
    /// Write the buffers, back to back, starting at `lba`. With `fua`
    /// (forced unit access) the write completes only once its own data is
    /// durable, as if a flush had followed it, without making any other
    /// write durable (NVMe FUA, `RWF_DSYNC`): one device round trip instead
    /// of a write and then a flush.
    Write {
        lba: u64,
        bufs: Vec<IoBuf>,
        fua: bool,
    },
    /// Read into the buffers, back to back, starting at `lba`.
    Read { lba: u64, bufs: Vec<IoBuf> },
    /// Make every write that completed before this was submitted durable.
    Flush,
}

/// A request: an operation and a tag the caller uses to match its completion.
#[derive(Debug)]
pub struct Request {
    pub tag: u64,
    pub op: Op,
}

impl Request {
    pub fn write(tag: u64, lba: u64, bufs: Vec<IoBuf>) -> Request {
        Request {
            tag,
            op: Op::Write {
                lba,
                bufs,
                fua: false,
            },
        }
    }

    /// A write that completes once its data is durable (see [`Op::Write`]).
    pub fn write_fua(tag: u64, lba: u64, bufs: Vec<IoBuf>) -> Request {
        Request {
            tag,
            op: Op::Write {
                lba,
                bufs,
                fua: true,
            },
        }
    }

    pub fn read(tag: u64, lba: u64, bufs: Vec<IoBuf>) -> Request {
        Request {
            tag,
            op: Op::Read { lba, bufs },
        }
    }

    pub fn flush(tag: u64) -> Request {
        Request { tag, op: Op::Flush }
    }

    /// True for a write with forced unit access.
    pub fn is_fua(&self) -> bool {
        matches!(self.op, Op::Write { fua: true, .. })
    }

    /// True for a flush and for a FUA write: requests whose success says
    /// data is durable.
    pub fn makes_durable(&self) -> bool {
        matches!(self.op, Op::Flush | Op::Write { fua: true, .. })
    }

    pub fn kind(&self) -> IoKind {
        match self.op {
            Op::Write { .. } => IoKind::Write,
            Op::Read { .. } => IoKind::Read,
            Op::Flush => IoKind::Flush,
        }
    }

    /// The first LBA (0 for a flush).
    pub fn lba(&self) -> u64 {
        match self.op {
            Op::Write { lba, .. } | Op::Read { lba, .. } => lba,
            Op::Flush => 0,
        }
    }

    /// Takes the buffers back out of the request.
    pub fn into_bufs(self) -> Vec<IoBuf> {
        match self.op {
            Op::Write { bufs, .. } | Op::Read { bufs, .. } => bufs,
            Op::Flush => Vec::new(),
        }
    }

    /// One iovec per buffer, in order (none for a flush), for backends that
    /// hand the buffers to the kernel or a controller. The pointers stay
    /// valid while the request, which owns the buffers, is alive.
    pub fn iovecs(&mut self) -> Box<[libc::iovec]> {
        match &mut self.op {
            Op::Write { bufs, .. } | Op::Read { bufs, .. } => bufs
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                })
                .collect(),
            Op::Flush => Box::new([]),
        }
    }

    /// Total bytes the request moves.
    pub fn bytes(&self) -> u64 {
        match &self.op {
            Op::Write { bufs, .. } | Op::Read { bufs, .. } => {
                bufs.iter().map(|b| b.len() as u64).sum()
            }
            Op::Flush => 0,
        }
    }
}

/// A finished request: its tag, its buffers back, and how it went.
#[derive(Debug)]
pub struct Completion {
    pub tag: u64,
    pub kind: IoKind,
    pub lba: u64,
    pub bufs: Vec<IoBuf>,
    pub result: Result<()>,
}

impl Completion {
    /// The completion of `req` with `result`, giving the buffers back.
    pub fn of(req: Request, result: Result<()>) -> Completion {
        let (tag, kind, lba) = (req.tag, req.kind(), req.lba());
        Completion {
            tag,
            kind,
            lba,
            bufs: req.into_bufs(),
            result,
        }
    }
}

/// A request the queue refused at submission, with the reason. The request
/// (and its buffers) go back to the caller; the device was not touched.
#[derive(Debug)]
pub struct Rejected {
    pub error: DeviceError,
    pub request: Request,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Rejected {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// How a parked reactor can learn that a queue has completions for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitHint {
    /// Nothing in flight: no completion will come.
    Idle,
    /// Completions are ready now; poll instead of sleeping.
    Ready,
    /// The next completion is due at this instant (simulated devices).
    Deadline(Instant),
    /// This file descriptor becomes readable when completions arrive.
    Fd(RawFd),
}

/// A raw block device, shared by the reactors that use it.
pub trait Device: Send + Sync + 'static {
    /// The per-reactor queue type.
    type Queue: Queue + Send;

    /// What the device is.
    fn info(&self) -> &DeviceInfo;

    /// Opens a new queue for the calling thread, which alone will use it.
    fn open_queue(&self) -> Result<Self::Queue>;

    /// A zeroed buffer of `len` bytes that this device can do I/O from.
    fn alloc_buf(&self, len: usize) -> IoBuf {
        IoBuf::with_align(len, self.info().mem_align.max(DEFAULT_ALIGN))
    }

    /// Requests of its queues that completed with an error, where the
    /// device counts them (the appliance's [`any::AnyDevice`] does).
    fn errors(&self) -> u64 {
        0
    }
}

/// One reactor's queue on a device. Submission never waits for the device
/// (except on `psync`, the deliberately blocking baseline); completions are
/// collected by [`Queue::poll`].
pub trait Queue {
    /// What the device is.
    fn info(&self) -> &DeviceInfo;

    /// Submits a request. A bad request (misaligned, out of range) or a full
    /// queue is refused here, with nothing changed on the device.
    fn submit(&mut self, req: Request) -> Result<(), Rejected>;

    /// Moves finished requests into `out`, without blocking, and returns how
    /// many it moved. Backends that batch submissions send them here too.
    fn poll(&mut self, out: &mut Vec<Completion>) -> usize;

    /// Requests submitted and not yet returned by `poll`.
    fn in_flight(&self) -> usize;

    /// How a reactor that wants to sleep can be woken for this queue.
    fn wait_hint(&self) -> WaitHint;

    /// The descriptor that becomes readable as completions arrive, on
    /// backends that have one (what [`WaitHint::Fd`] names while requests
    /// are in flight): an event loop that drives the queue watches it.
    fn event_fd(&self) -> Option<RawFd> {
        None
    }
}

/// The most buffers one request may carry (Linux's UIO_MAXIOV).
pub const MAX_BUFFERS: usize = 1024;

/// The most bytes one request may move. Linux moves at most 2 GiB less a
/// page per read or write call; a larger request would come back short.
pub const MAX_TRANSFER_BYTES: u64 = 1 << 30;

/// Checks a request against the device's rules, as every backend must before
/// touching the device: whole blocks, aligned buffers, in range, and room in
/// the queue. Returns the number of blocks it covers.
pub fn check_request(info: &DeviceInfo, req: &Request, in_flight: usize) -> Result<u64> {
    if in_flight >= info.queue_depth as usize {
        return Err(DeviceError::QueueFull {
            device: info.name.clone(),
            depth: info.queue_depth,
        });
    }
    let (lba, bufs) = match &req.op {
        Op::Flush => return Ok(0),
        Op::Write { lba, bufs, .. } | Op::Read { lba, bufs } => (*lba, bufs),
    };
    if bufs.len() > MAX_BUFFERS {
        return Err(DeviceError::TooLarge {
            device: info.name.clone(),
            what: format!(
                "the {} at LBA {lba} has {} buffers; at most {MAX_BUFFERS} are allowed",
                req.kind(),
                bufs.len()
            ),
        });
    }
    let bs = info.block_size as usize;
    let mut bytes = 0u64;
    for (i, buf) in bufs.iter().enumerate() {
        if buf.is_empty() || buf.len() % bs != 0 {
            return Err(DeviceError::Misaligned {
                device: info.name.clone(),
                what: format!(
                    "buffer {i} of the {} at LBA {lba} is {} bytes, not a whole number of {bs}-byte blocks",
                    req.kind(),
                    buf.len()
                ),
            });
        }
        if buf.as_ptr() as usize % info.mem_align != 0 {
            return Err(DeviceError::Misaligned {
                device: info.name.clone(),
                what: format!(
                    "buffer {i} of the {} at LBA {lba} is at address {:#x}, not aligned to {} bytes",
                    req.kind(),
                    buf.as_ptr() as usize,
                    info.mem_align
                ),
            });
        }
        bytes += buf.len() as u64;
    }
    if bytes > MAX_TRANSFER_BYTES {
        return Err(DeviceError::TooLarge {
            device: info.name.clone(),
            what: format!(
                "the {} at LBA {lba} moves {bytes} bytes; at most {MAX_TRANSFER_BYTES} are allowed",
                req.kind()
            ),
        });
    }
    let blocks = bytes / bs as u64;
    let end = lba.checked_add(blocks);
    if blocks == 0 || end.is_none_or(|end| end > info.capacity_blocks) {
        return Err(DeviceError::OutOfRange {
            device: info.name.clone(),
            kind: req.kind(),
            lba,
            blocks,
            capacity: info.capacity_blocks,
        });
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DeviceInfo {
        DeviceInfo {
            name: "d0".into(),
            backend: BackendKind::Sim,
            block_size: 4096,
            capacity_blocks: 16,
            queue_depth: 2,
            mem_align: 512,
            volatile_cache: true,
        }
    }

    #[test]
    fn accepts_whole_aligned_blocks_in_range() {
        let req = Request::write(1, 14, vec![IoBuf::new(4096), IoBuf::new(4096)]);
        assert_eq!(check_request(&info(), &req, 0).unwrap(), 2);
    }

    #[test]
    fn refuses_partial_blocks_misaligned_addresses_and_ranges() {
        let partial = Request::write(1, 0, vec![IoBuf::new(512)]);
        assert!(matches!(
            check_request(&info(), &partial, 0),
            Err(DeviceError::Misaligned { .. })
        ));
        let odd = Request::write(1, 0, vec![IoBuf::with_offset(4096, 4096, 8)]);
        assert!(matches!(
            check_request(&info(), &odd, 0),
            Err(DeviceError::Misaligned { .. })
        ));
        let past_end = Request::write(1, 15, vec![IoBuf::new(8192)]);
        assert!(matches!(
            check_request(&info(), &past_end, 0),
            Err(DeviceError::OutOfRange { .. })
        ));
        let overflow = Request::read(1, u64::MAX, vec![IoBuf::new(4096)]);
        assert!(matches!(
            check_request(&info(), &overflow, 0),
            Err(DeviceError::OutOfRange { .. })
        ));
        let empty = Request::read(1, 0, vec![]);
        assert!(matches!(
            check_request(&info(), &empty, 0),
            Err(DeviceError::OutOfRange { .. })
        ));
    }

    #[test]
    fn refuses_too_many_buffers() {
        let bufs = (0..=MAX_BUFFERS).map(|_| IoBuf::new(512)).collect();
        let mut big = info();
        big.block_size = 512;
        big.capacity_blocks = 1 << 20;
        let req = Request::write(1, 0, bufs);
        assert!(matches!(
            check_request(&big, &req, 0),
            Err(DeviceError::TooLarge { .. })
        ));
    }

    #[test]
    fn refuses_when_queue_is_full() {
        let req = Request::flush(1);
        assert!(check_request(&info(), &req, 2).unwrap_err().is_queue_full());
    }
}
