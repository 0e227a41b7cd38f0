//! The plain kernel baseline: a file or block device through buffered
//! `pwrite`/`pread` and `fdatasync`.
//!
//! [`PsyncQueue::submit`] performs the request right there, blocking its
//! reactor for as long as the kernel takes, and queues the completion for
//! the next [`Queue::poll`]. That is the point of this backend: it is what a
//! conventional server does, and what the non-blocking backends are
//! measured against. Completions not yet polled still count against the
//! queue depth, so an engine sees the same back-pressure as on any backend.

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
/// open file.
#[derive(Clone, Debug)]
pub struct PsyncDevice {
    file: Arc<File>,
    info: DeviceInfo,
}

impl PsyncDevice {
    /// Opens the backing file of `cfg` (buffered, no O_DIRECT); it must
    /// exist and hold `cfg.size` bytes (see `stria format`).
    pub fn open(cfg: &DeviceConfig) -> Result<PsyncDevice> {
        Ok(PsyncDevice {
            file: Arc::new(file::open(cfg, false)?),
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
    info: DeviceInfo,
    done: VecDeque<Completion>,
}

impl PsyncQueue {
    /// Runs `req` to the end with one system call per buffer.
    fn perform(&self, req: &mut Request) -> io::Result<()> {
        let bs = u64::from(self.info.block_size);
        match &mut req.op {
            Op::Write { lba, bufs } => {
                let mut offset = *lba * bs;
                for buf in bufs.iter() {
                    self.file.write_all_at(buf, offset)?;
                    offset += buf.len() as u64;
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
        let Err(DeviceError::Io {
            kind, lba, source, ..
        }) = &c.result
        else {
            panic!("expected an I/O error, got {:?}", c.result);
        };
        assert_eq!((*kind, *lba, c.tag), (crate::device::IoKind::Read, 100, 3));
        assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
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
