//! The plain kernel baseline: a file or block device through buffered
//! `pwrite`/`pread` and `fdatasync`.
//!
//! [`PsyncQueue::submit`] performs the request right there, blocking its
//! reactor for as long as the kernel takes, and queues the completion for
//! the next [`Queue::poll`]. That is the point of this backend: it is what a
//! conventional server does, and what the non-blocking backends are
//! measured against. Completions not yet polled still count against the
//! queue depth, so an engine sees the same back-pressure as on any backend.
//!
//! Once a flush or a write has failed, every later flush of the device
//! fails too, from any queue (see `file::FlushLatch`).

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::{
    check_request, file, BackendKind, Completion, Device, DeviceInfo, Op, Queue, Rejected, Request,
    Result, WaitHint,
};
use crate::config::DeviceConfig;

/// A file-backed device driven by blocking system calls. Clones share the
/// open file and its flush state.
#[derive(Clone, Debug)]
pub struct PsyncDevice {
    file: Arc<File>,
    latch: Arc<file::FlushLatch>,
    info: DeviceInfo,
}

impl PsyncDevice {
    /// Opens the backing file of `cfg` (buffered, no O_DIRECT); it must
    /// exist and hold `cfg.size` bytes (see `stria format`).
    pub fn open(cfg: &DeviceConfig) -> Result<PsyncDevice> {
        Ok(PsyncDevice {
            file: Arc::new(file::open(cfg, false)?),
            latch: Arc::new(file::FlushLatch::new(true)),
            info: file::info(cfg, BackendKind::Psync, false),
        })
    }
}

impl Device for PsyncDevice {
    type Queue = PsyncQueue;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open_queue(&self) -> Result<PsyncQueue> {
        Ok(PsyncQueue {
            file: Arc::clone(&self.file),
            latch: Arc::clone(&self.latch),
            info: self.info.clone(),
            done: VecDeque::with_capacity(self.info.queue_depth as usize),
        })
    }
}

/// One reactor's queue on a [`PsyncDevice`]: requests run at submission,
/// completions wait here until polled.
#[derive(Debug)]
pub struct PsyncQueue {
    file: Arc<File>,
    latch: Arc<file::FlushLatch>,
    info: DeviceInfo,
    done: VecDeque<Completion>,
}

impl PsyncQueue {
    /// Runs `req` to the end with one system call per buffer.
    fn perform(&self, req: &mut Request) -> io::Result<()> {
        let bs = u64::from(self.info.block_size);
        match &mut req.op {
            Op::Write { lba, bufs, fua } => {
                let mut offset = *lba * bs;
                for buf in bufs.iter() {
                    self.file.write_all_at(buf, offset)?;
                    offset += buf.len() as u64;
                }
                if *fua {
                    self.file.sync_data()?;
                }
            }
            Op::Read { lba, bufs } => {
                let mut offset = *lba * bs;
                for buf in bufs.iter_mut() {
                    self.file.read_exact_at(buf, offset)?;
                    offset += buf.len() as u64;
                }
            }
            Op::Flush => self.file.sync_data()?,
        }
        Ok(())
    }
}

impl Queue for PsyncQueue {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn submit(&mut self, mut req: Request) -> Result<(), Rejected> {
        if let Err(error) = check_request(&self.info, &req, self.done.len()) {
            return Err(Rejected {
                error,
                request: req,
            });
        }
        let result = self
            .perform(&mut req)
            .map_err(|e| file::io_error(&self.info, &req, e));
        let result = self.latch.finish(&self.info, &req, result);
        self.done.push_back(Completion::of(req, result));
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let n = self.done.len();
        out.extend(self.done.drain(..));
        n
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn wait_hint(&self) -> WaitHint {
        if self.done.is_empty() {
            WaitHint::Idle
        } else {
            WaitHint::Ready
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendConfig;
    use crate::device::file::testing::{self, TestDir};
    use crate::device::DeviceError;

    /// A formatted 1 MiB psync device in `dir`.
    fn device(dir: &TestDir) -> PsyncDevice {
        let cfg = testing::config(
            BackendConfig::Psync {
                path: dir.path().join("psync.img"),
            },
            1 << 20,
        );
        file::create(&cfg).unwrap();
        PsyncDevice::open(&cfg).unwrap()
    }

    #[test]
    fn writes_are_visible_through_another_queue_at_once() {
        let dir = TestDir::new();
        let dev = device(&dir);
        let (mut a, mut b) = (dev.open_queue().unwrap(), dev.open_queue().unwrap());
        let mut buf = dev.alloc_buf(4096);
        buf.fill(5);
        testing::run(&mut a, Request::write(1, 9, vec![buf]));
        assert!(testing::read_back(&dev, &mut b, 9, 1)
            .iter()
            .all(|&x| x == 5));
    }

    #[test]
    fn io_errors_name_the_request() {
        let dir = TestDir::new();
        let dev = device(&dir);
        let mut q = dev.open_queue().unwrap();
        // Cut the file behind the device's back: the read runs off its end.
        dev.file.set_len(4096).unwrap();
        q.submit(Request::read(3, 100, vec![dev.alloc_buf(4096)]))
            .unwrap();
        let c = testing::wait(&mut q, 1).pop().unwrap();
        testing::assert_io_error(
            &c,
            crate::device::IoKind::Read,
            100,
            3,
            io::ErrorKind::UnexpectedEof,
        );
    }

    /// Asserts that `c` is a flush that failed because an earlier one did.
    fn assert_sticky_flush_error(c: &Completion) {
        let Err(DeviceError::Io { kind, source, .. }) = &c.result else {
            panic!("expected a flush error, got {:?}", c.result);
        };
        assert_eq!(*kind, crate::device::IoKind::Flush);
        let msg = source.to_string();
        assert!(msg.contains("an earlier flush failed at"), "{msg}");
        assert!(msg.contains("reopened"), "{msg}");
    }

    #[test]
    fn a_failed_flush_fails_every_later_flush_on_every_queue() {
        let dir = TestDir::new();
        let dev = device(&dir);
        let (mut a, mut b) = (dev.open_queue().unwrap(), dev.open_queue().unwrap());
        testing::run(&mut b, Request::flush(1));
        dev.latch.fail_next_flush();
        a.submit(Request::flush(2)).unwrap();
        let failed = testing::wait(&mut a, 1).pop().unwrap();
        let Err(DeviceError::Io { source, .. }) = &failed.result else {
            panic!("expected the injected EIO, got {:?}", failed.result);
        };
        assert_eq!(source.raw_os_error(), Some(libc::EIO));
        // The kernel would now report success to both: neither may.
        for (q, tag) in [(&mut b, 3), (&mut a, 4)] {
            q.submit(Request::flush(tag)).unwrap();
            assert_sticky_flush_error(&testing::wait(q, 1).pop().unwrap());
        }
        // Writes and reads go on; flushes stay failed.
        let mut buf = dev.alloc_buf(4096);
        buf.fill(8);
        testing::run(&mut b, Request::write(5, 2, vec![buf]));
        assert!(testing::read_back(&dev, &mut a, 2, 1)
            .iter()
            .all(|&x| x == 8));
        b.submit(Request::flush(6)).unwrap();
        assert_sticky_flush_error(&testing::wait(&mut b, 1).pop().unwrap());
        // Another handle on the same open device shares the state.
        let mut c = dev.clone().open_queue().unwrap();
        c.submit(Request::flush(7)).unwrap();
        assert_sticky_flush_error(&testing::wait(&mut c, 1).pop().unwrap());
    }

    #[test]
    fn a_failed_buffered_write_fails_every_later_flush() {
        let dir = TestDir::new();
        let dev = device(&dir);
        let (mut a, mut b) = (dev.open_queue().unwrap(), dev.open_queue().unwrap());
        // A queue of the same device whose descriptor refuses writes
        // (EBADF): its write fails for real.
        let ro = std::fs::File::open(dir.path().join("psync.img")).unwrap();
        let mut broken = PsyncQueue {
            file: Arc::new(ro),
            latch: Arc::clone(&dev.latch),
            info: dev.info.clone(),
            done: VecDeque::new(),
        };
        broken
            .submit(Request::write(1, 0, vec![dev.alloc_buf(4096)]))
            .unwrap();
        let c = testing::wait(&mut broken, 1).pop().unwrap();
        assert!(matches!(c.result, Err(DeviceError::Io { .. })), "{c:?}");
        a.submit(Request::flush(2)).unwrap();
        let c = testing::wait(&mut a, 1).pop().unwrap();
        let Err(DeviceError::Io { source, .. }) = &c.result else {
            panic!("expected a flush error, got {:?}", c.result);
        };
        let msg = source.to_string();
        assert!(msg.contains("an earlier write at LBA 0 failed at"), "{msg}");
        testing::run(&mut b, Request::read(3, 0, vec![dev.alloc_buf(4096)]));
    }

    #[test]
    fn missing_and_too_small_files_are_refused() {
        let dir = TestDir::new();
        let cfg = testing::config(
            BackendConfig::Psync {
                path: dir.path().join("psync.img"),
            },
            1 << 20,
        );
        assert!(matches!(
            PsyncDevice::open(&cfg),
            Err(DeviceError::Open { .. })
        ));
        std::fs::write(cfg.path().unwrap(), [0u8; 4096]).unwrap();
        assert!(matches!(
            PsyncDevice::open(&cfg),
            Err(DeviceError::TooSmall { .. })
        ));
    }
}
