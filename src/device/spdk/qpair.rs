//! One I/O queue pair, owned by the thread that allocated it.
//!
//! A [`QPair`] holds every in-flight request in a slot (the slot number is
//! what the shim's completion callback records), together with the
//! `iovec`s the SGL callbacks read its buffers through, so neither the
//! buffers nor the `iovec`s can go away while the controller may use them.
//! It is neither Send nor Sync (it holds a raw pointer): SPDK requires a
//! queue pair to be used from one thread at a time, and the reactor that
//! opened it is that thread.

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use super::controller::Controller;
use super::ffi;
use crate::device::{Op, Request};

/// How a finished request ended: NVMe status code type and code (0, 0 =
/// success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub sct: u16,
    pub sc: u16,
}

impl Status {
    pub fn is_ok(self) -> bool {
        self.sct == 0 && self.sc == 0
    }

    /// SPDK's words for the status.
    pub fn describe(self) -> String {
        // SAFETY: the shim returns a pointer to a static NUL-terminated
        // string (SPDK's status table, or "UNKNOWN"), never NULL.
        let text = unsafe { CStr::from_ptr(ffi::stria_status_string(self.sct, self.sc)) };
        format!(
            "NVMe status {} (sct {:#x}, sc {:#x})",
            text.to_string_lossy(),
            self.sct,
            self.sc
        )
    }
}

/// An in-flight request and the `iovec`s pointing into its buffers.
struct Slot {
    req: Request,
    /// Boxed so the address handed to the shim stays put.
    _iovecs: Box<[libc::iovec]>,
}

/// A queue pair and its in-flight requests.
pub struct QPair {
    /// Declared first: dropped (freed, aborting what SPDK still holds)
    /// before the slots whose buffers it points into.
    raw: RawQpair,
    block_size: u32,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    cpls: Vec<ffi::Cpl>,
    /// Keeps the controller attached while the queue pair exists.
    _ctrl: Arc<Controller>,
}

/// The shim's queue pair; freed on drop.
struct RawQpair(NonNull<ffi::StriaQpair>);

// SAFETY: SPDK requires that a queue pair be used by one thread at a time
// ("mutual exclusion must be enforced by the user", spdk/nvme.h at
// spdk_nvme_ctrlr_alloc_io_qpair), not that it stay on one thread. A
// RawQpair is reached only through `&mut QPair` (a `Queue` takes `&mut
// self`), so moving it to another thread (an engine's pool of reader
// queues, behind a mutex) still leaves one user at a time.
unsafe impl Send for RawQpair {}

// SAFETY: the iovecs point into the buffers of the request held in the same
// slot, which moves with them; nothing else refers to them from Rust.
unsafe impl Send for Slot {}

impl Drop for RawQpair {
    fn drop(&mut self) {
        // SAFETY: the pointer came from stria_qpair_alloc and is freed only
        // here, by the queue pair's one user at a time; SPDK aborts
        // what is still in flight, whose buffers are still held by the
        // slots, dropped after this.
        unsafe { ffi::stria_qpair_free(self.0.as_ptr()) }
    }
}

impl QPair {
    /// A new queue pair on namespace `nsid` for `depth` requests in flight,
    /// with `requests` SPDK request objects (a large command takes several).
    pub fn alloc(
        ctrl: &Arc<Controller>,
        nsid: u32,
        block_size: u32,
        depth: u32,
        requests: u32,
    ) -> io::Result<QPair> {
        // SAFETY: the controller is attached while ctrl lives (and the new
        // QPair keeps an Arc of it); allocation is thread-safe in SPDK.
        let raw = unsafe { ffi::stria_qpair_alloc(ctrl.raw(), nsid, depth, requests) };
        let raw = NonNull::new(raw).ok_or_else(io::Error::last_os_error)?;
        Ok(QPair {
            raw: RawQpair(raw),
            block_size,
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            cpls: vec![ffi::Cpl::default(); depth as usize],
            _ctrl: Arc::clone(ctrl),
        })
    }

    fn ptr(&self) -> *mut ffi::StriaQpair {
        self.raw.0.as_ptr()
    }

    /// Requests the controller holds.
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Sends `req` (already checked: whole blocks, in range, below the
    /// depth) as one NVMe command. On failure the request comes back with
    /// SPDK's negative errno (-ENOMEM: out of request objects for now).
    pub fn submit(&mut self, mut req: Request) -> Result<(), (Request, i32)> {
        let Some(slot) = self.free.pop() else {
            return Err((req, -libc::EBUSY));
        };
        let iovecs = req.iovecs();
        let rc = match &req.op {
            Op::Write { lba, .. } | Op::Read { lba, .. } => {
                let write = matches!(req.op, Op::Write { .. });
                let blocks = (req.bytes() / u64::from(self.block_size)) as u32;
                // SAFETY: the qpair is live and used on its own thread; the
                // iovecs and the buffers they point into move into
                // slots[slot] below and stay there, unmoved (both are heap
                // allocations), until this slot's completion is polled or the
                // qpair is freed, which happens before the slots are dropped.
                unsafe {
                    ffi::stria_qpair_rw(
                        self.ptr(),
                        write,
                        req.is_fua(),
                        slot,
                        *lba,
                        blocks,
                        iovecs.as_ptr(),
                        iovecs.len() as i32,
                    )
                }
            }
            // SAFETY: the qpair is live and used on its own thread; a flush
            // carries no memory.
            Op::Flush => unsafe { ffi::stria_qpair_flush(self.ptr(), slot) },
        };
        if rc != 0 {
            self.free.push(slot);
            return Err((req, rc));
        }
        self.slots[slot as usize] = Some(Slot {
            req,
            _iovecs: iovecs,
        });
        Ok(())
    }

    /// Processes completions, handing each finished request and its status
    /// to `each`. Returns SPDK's negative errno when the queue pair failed
    /// (its in-flight requests then need [`QPair::abort_all`]).
    pub fn poll(&mut self, mut each: impl FnMut(Request, Status)) -> Result<usize, i32> {
        let mut got = 0u32;
        let cap = self.cpls.len() as u32;
        // SAFETY: the qpair is live and used on its own thread; cpls has
        // room for cap entries and got is a valid u32.
        let rc =
            unsafe { ffi::stria_qpair_poll(self.ptr(), self.cpls.as_mut_ptr(), cap, &mut got) };
        for i in 0..got as usize {
            let cpl = self.cpls[i];
            let Some(slot) = self.slots.get_mut(cpl.slot as usize).and_then(Option::take) else {
                tracing::error!(slot = cpl.slot, "SPDK completion for no request");
                continue;
            };
            self.free.push(cpl.slot);
            each(
                slot.req,
                Status {
                    sct: cpl.sct,
                    sc: cpl.sc,
                },
            );
        }
        if rc < 0 {
            Err(rc)
        } else {
            Ok(got as usize)
        }
    }

    /// Gives up on a failed queue pair: disconnects it, which makes SPDK
    /// abort every command it holds, and returns every request still in a
    /// slot. None of them completed; the caller fails them. The queue pair
    /// must not be used for I/O afterwards.
    pub fn abort_all(&mut self) -> Vec<Request> {
        // SAFETY: the qpair is live and used on its own thread.
        unsafe { ffi::stria_qpair_disconnect(self.ptr()) };
        // Collect the aborted commands' callbacks (their status is an abort).
        let mut left = Vec::new();
        let _ = self.poll(|req, _| left.push(req));
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(slot) = slot.take() {
                self.free.push(i as u32);
                left.push(slot.req);
            }
        }
        left
    }

    /// SPDK's reason code for a disconnected queue pair, for messages.
    pub fn failure_reason(&self) -> i32 {
        // SAFETY: the qpair is live and used on its own thread.
        unsafe { ffi::stria_qpair_failure_reason(self.ptr()) }
    }

    /// Completions the shim could not record (always 0 unless a bug lets
    /// more requests in flight than the depth).
    pub fn lost(&self) -> u64 {
        // SAFETY: the qpair is live and used on its own thread.
        unsafe { ffi::stria_qpair_lost(self.ptr()) }
    }
}
