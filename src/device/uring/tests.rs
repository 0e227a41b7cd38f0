//! Tests of the io_uring backend. Each one first asks [`uring_available`];
//! where the kernel refuses io_uring, it prints its own name and the reason
//! and returns, so the log says which cases did not run.

use std::path::Path;

use super::*;
use crate::device::file::testing::{self, TestDir, BLOCK};

/// Returns from the test, naming it, when io_uring cannot run here.
macro_rules! require_uring {
    ($name:literal) => {
        if let Err(why) = uring_available() {
            eprintln!("uring test {} not run: io_uring unavailable: {why}", $name);
            return;
        }
    };
}

/// A formatted uring device of `size` bytes and queue depth `depth` in `dir`.
fn device_sized(dir: &Path, direct: bool, depth: u32, size: u64) -> UringDevice {
    let mut cfg = testing::file_config(&dir.join("uring.img"), size, direct);
    cfg.queue_depth = depth;
    file::create(&cfg).unwrap();
    UringDevice::open(&cfg).unwrap()
}

/// A formatted 1 MiB uring device of queue depth `depth` in `dir`.
fn device_with(dir: &Path, direct: bool, depth: u32) -> UringDevice {
    device_sized(dir, direct, depth, 1 << 20)
}

fn device(dir: &TestDir) -> UringDevice {
    device_with(dir.path(), true, 8)
}

#[test]
fn reports_whether_uring_runs_here() {
    match uring_available() {
        Ok(()) => eprintln!("io_uring available: the uring tests run"),
        Err(why) => eprintln!("io_uring unavailable, the uring tests do not run: {why}"),
    }
}

#[test]
fn too_many_buffers_are_refused() {
    require_uring!("too_many_buffers_are_refused");
    let dir = TestDir::new();
    // Large enough that the blocks are in range: only the count is wrong.
    let dev = device_sized(dir.path(), true, 2, 8 << 20);
    let mut q = dev.open_queue().unwrap();
    let bufs = (0..=MAX_BUFS).map(|_| dev.alloc_buf(BLOCK)).collect();
    let refused = q.submit(Request::write(1, 0, bufs)).unwrap_err();
    assert!(
        matches!(refused.error, DeviceError::TooLarge { .. }),
        "{}",
        refused.error
    );
    assert_eq!(refused.request.into_bufs().len(), MAX_BUFS + 1);
    assert_eq!(q.in_flight(), 0);
}

#[test]
fn wait_hint_follows_the_request() {
    require_uring!("wait_hint_follows_the_request");
    let dir = TestDir::new();
    let dev = device(&dir);
    let mut q = dev.open_queue().unwrap();
    assert_eq!(q.wait_hint(), WaitHint::Idle);
    q.submit(Request::flush(1)).unwrap();
    // Not yet given to the kernel: the reactor must poll, not sleep.
    assert_eq!(q.wait_hint(), WaitHint::Ready);
    let mut out = Vec::new();
    q.poll(&mut out);
    if out.is_empty() {
        match q.wait_hint() {
            WaitHint::Fd(fd) => {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: pfd is one valid pollfd for the duration of the call.
                let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
                assert_eq!(n, 1, "the eventfd did not signal the completion");
                assert_eq!(q.wait_hint(), WaitHint::Ready);
            }
            WaitHint::Ready => {}
            other => panic!("unexpected hint {other:?} with a flush in flight"),
        }
        out.extend(testing::wait(&mut q, 1));
    }
    assert_eq!(out.len(), 1);
    assert!(out[0].result.is_ok());
    assert_eq!(q.wait_hint(), WaitHint::Idle);
}

#[test]
fn dropping_a_queue_waits_for_its_requests() {
    require_uring!("dropping_a_queue_waits_for_its_requests");
    let dir = TestDir::new();
    let dev = device(&dir);
    let mut q = dev.open_queue().unwrap();
    for i in 0..4u64 {
        let mut buf = dev.alloc_buf(BLOCK);
        buf.fill(0x30 + i as u8);
        q.submit(Request::write(i, i, vec![buf])).unwrap();
    }
    // Two given to the kernel, two still only in the ring.
    q.poll(&mut Vec::new());
    for i in 4..6u64 {
        let mut buf = dev.alloc_buf(BLOCK);
        buf.fill(0x30 + i as u8);
        q.submit(Request::write(i, i, vec![buf])).unwrap();
    }
    drop(q);
    let mut q = dev.open_queue().unwrap();
    for i in 0..6u64 {
        let back = testing::read_back(&dev, &mut q, i, 1);
        assert!(back.iter().all(|&b| b == 0x30 + i as u8), "block {i}");
    }
}

#[test]
fn short_read_is_an_io_error() {
    require_uring!("short_read_is_an_io_error");
    let dir = TestDir::new();
    let dev = device(&dir);
    let mut q = dev.open_queue().unwrap();
    // Cut the file behind the device's back: the read runs off its end.
    dev.file.set_len(2 * BLOCK as u64).unwrap();
    q.submit(Request::read(5, 1, vec![dev.alloc_buf(2 * BLOCK)]))
        .unwrap();
    let c = testing::wait(&mut q, 1).pop().unwrap();
    testing::assert_io_error(&c, IoKind::Read, 1, 5, io::ErrorKind::UnexpectedEof);
    assert_eq!(c.bufs.len(), 1);
}

#[test]
fn missing_and_too_small_files_are_refused() {
    require_uring!("missing_and_too_small_files_are_refused");
    let dir = TestDir::new();
    let cfg = testing::file_config(&dir.path().join("uring.img"), 1 << 20, true);
    let err = UringDevice::open(&cfg).unwrap_err();
    assert!(matches!(err, DeviceError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("stria format"), "{err}");
    std::fs::write(cfg.path().unwrap(), [0u8; BLOCK]).unwrap();
    let err = UringDevice::open(&cfg).unwrap_err();
    assert!(matches!(err, DeviceError::TooSmall { .. }), "{err:?}");
}

/// Asserts that `c` is a flush that failed because an earlier request did,
/// naming the one that did (`first`, like "an earlier flush failed at").
fn assert_sticky_flush_error(c: &Completion, first: &str) {
    let Err(DeviceError::Io { kind, source, .. }) = &c.result else {
        panic!("expected a flush error, got {:?}", c.result);
    };
    assert_eq!(*kind, IoKind::Flush);
    let msg = source.to_string();
    assert!(msg.contains(first), "{msg}");
    assert!(msg.contains("must be reopened"), "{msg}");
}

/// Submits `req` on `q` and returns its completion, failed or not.
fn complete(q: &mut UringQueue, req: Request) -> Completion {
    q.submit(req).unwrap();
    testing::wait(q, 1).pop().unwrap()
}

#[test]
fn a_failed_flush_fails_every_later_flush_on_every_queue() {
    require_uring!("a_failed_flush_fails_every_later_flush_on_every_queue");
    for direct in [true, false] {
        let dir = TestDir::new();
        let dev = device_with(dir.path(), direct, 8);
        let (mut a, mut b) = (dev.open_queue().unwrap(), dev.open_queue().unwrap());
        testing::run(&mut b, Request::flush(1));
        dev.latch.fail_next_flush();
        let failed = complete(&mut a, Request::flush(2));
        let Err(DeviceError::Io { source, .. }) = &failed.result else {
            panic!("expected the injected EIO, got {:?}", failed.result);
        };
        assert_eq!(source.raw_os_error(), Some(libc::EIO));
        // The kernel now reports success to both; neither may pass it on.
        let first = "an earlier flush failed at";
        assert_sticky_flush_error(&complete(&mut b, Request::flush(3)), first);
        assert_sticky_flush_error(&complete(&mut a, Request::flush(4)), first);
        // Writes and reads go on; flushes stay failed.
        let mut buf = dev.alloc_buf(BLOCK);
        buf.fill(4);
        testing::run(&mut b, Request::write(5, 3, vec![buf]));
        assert!(testing::read_back(&dev, &mut a, 3, 1)
            .iter()
            .all(|&x| x == 4));
        assert_sticky_flush_error(&complete(&mut b, Request::flush(6)), first);
        let mut c = dev.clone().open_queue().unwrap();
        assert_sticky_flush_error(&complete(&mut c, Request::flush(7)), first);
    }
}

/// A device sharing `dev`'s flush state whose descriptor refuses writes,
/// so that they fail for real (EBADF).
fn read_only_twin(dev: &UringDevice, dir: &Path) -> UringDevice {
    UringDevice {
        file: Arc::new(File::open(dir.join("uring.img")).unwrap()),
        latch: Arc::clone(&dev.latch),
        info: dev.info.clone(),
    }
}

#[test]
fn a_failed_buffered_write_fails_later_flushes_a_direct_one_does_not() {
    require_uring!("a_failed_buffered_write_fails_later_flushes_a_direct_one_does_not");
    for direct in [true, false] {
        let dir = TestDir::new();
        let dev = device_with(dir.path(), direct, 8);
        let twin = read_only_twin(&dev, dir.path());
        let mut broken = twin.open_queue().unwrap();
        let c = complete(
            &mut broken,
            Request::write(1, 2, vec![dev.alloc_buf(BLOCK)]),
        );
        assert!(matches!(c.result, Err(DeviceError::Io { .. })), "{c:?}");
        let mut q = dev.open_queue().unwrap();
        let flushed = complete(&mut q, Request::flush(2));
        if direct {
            // The write never reached a cache: nothing earlier is at risk.
            flushed.result.unwrap();
        } else {
            assert_sticky_flush_error(&flushed, "an earlier write at LBA 2 failed at");
        }
    }
}

#[test]
fn a_persistent_submit_failure_fails_the_unsent_requests() {
    require_uring!("a_persistent_submit_failure_fails_the_unsent_requests");
    let dir = TestDir::new();
    let dev = device(&dir);
    let mut q = dev.open_queue().unwrap();
    // One request reaches the kernel before io_uring_enter starts failing.
    let mut sent = dev.alloc_buf(BLOCK);
    sent.fill(1);
    q.submit(Request::write(1, 0, vec![sent])).unwrap();
    let mut out = Vec::new();
    q.poll(&mut out);
    q.submit_error = Some(libc::EFAULT);
    let mut unsent = dev.alloc_buf(BLOCK);
    unsent.fill(2);
    q.submit(Request::write(2, 1, vec![unsent])).unwrap();
    q.submit(Request::flush(3)).unwrap();
    q.poll(&mut out);
    let failed: Vec<_> = out.iter().filter(|c| c.tag != 1).collect();
    assert_eq!(failed.len(), 2, "the unsent requests complete: {out:?}");
    for c in &failed {
        let Err(DeviceError::Io { source, .. }) = &c.result else {
            panic!("expected an I/O error, got {:?}", c.result);
        };
        assert_eq!(source.raw_os_error(), Some(libc::EFAULT), "{source}");
    }
    assert_eq!(failed[0].bufs.len(), 1, "the buffer comes back");
    // The request the kernel took completes as usual; then nothing is left
    // to poll for.
    if !out.iter().any(|c| c.tag == 1) {
        out.extend(testing::wait(&mut q, 1));
    }
    out.iter()
        .find(|c| c.tag == 1)
        .unwrap()
        .result
        .as_ref()
        .unwrap();
    assert_eq!(q.in_flight(), 0);
    assert_eq!(q.wait_hint(), WaitHint::Idle);
    // Later requests fail at once, without a system call that would fail.
    q.submit(Request::read(4, 0, vec![dev.alloc_buf(BLOCK)]))
        .unwrap();
    assert_eq!(q.wait_hint(), WaitHint::Ready);
    let c = testing::wait(&mut q, 1).pop().unwrap();
    assert!(matches!(c.result, Err(DeviceError::Io { .. })), "{c:?}");
    assert_eq!(q.wait_hint(), WaitHint::Idle);
    // Dropping the queue never hands the failed write to the kernel.
    drop(q);
    let mut q = dev.open_queue().unwrap();
    assert!(testing::read_back(&dev, &mut q, 0, 1)
        .iter()
        .all(|&b| b == 1));
    assert!(testing::read_back(&dev, &mut q, 1, 1)
        .iter()
        .all(|&b| b == 0));
}
