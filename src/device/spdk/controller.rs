//! One attached NVMe controller and its namespaces.
//!
//! The admin queue is polled by a small thread of the controller's own
//! (every [`ADMIN_POLL`]), which keeps NVMe-oF keep-alives flowing and
//! notices a failed controller; reactors only ever touch their I/O queue
//! pairs. `spdk_nvme_ctrlr_process_admin_completions` and
//! `spdk_nvme_ctrlr_alloc_io_qpair` are thread-safe in SPDK (they take the
//! controller's lock), which is what lets the handle be shared.
//!
//! A process attaches each controller once: devices naming the same
//! transport ID (two namespaces of one subsystem) share it through a
//! registry of weak handles, and the last one to go detaches it.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::ffi;

/// NVMe keep-alive timeout asked of the controller (0 would disable it).
const KEEP_ALIVE_MS: u32 = 10_000;

/// How often the admin thread polls: well inside the keep-alive timeout.
const ADMIN_POLL: Duration = Duration::from_millis(100);

/// What a namespace is (see `stria_ns_info` in the shim).
pub type NamespaceInfo = ffi::NsInfo;

/// The controller pointer, shareable (see the module comment).
#[derive(Clone, Copy)]
struct CtrlrPtr(NonNull<ffi::SpdkCtrlr>);

// SAFETY: the functions called through it from several threads (admin
// polling, failure check, qpair allocation, namespace queries) are
// thread-safe in SPDK; detach happens once, after the admin thread has been
// joined and every qpair freed (they hold an Arc<Controller>).
unsafe impl Send for CtrlrPtr {}
// SAFETY: as for Send.
unsafe impl Sync for CtrlrPtr {}

/// An attached controller.
pub struct Controller {
    ptr: CtrlrPtr,
    trid: String,
    failed: Arc<AtomicBool>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    admin: Option<JoinHandle<()>>,
}

impl Controller {
    /// The controller at `trid`, attaching it unless this process already has.
    pub fn get(trid: &str, io_queue_size: u32) -> io::Result<Arc<Controller>> {
        static ATTACHED: Mutex<Option<HashMap<String, Weak<Controller>>>> = Mutex::new(None);
        let mut attached = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
        let map = attached.get_or_insert_with(HashMap::new);
        if let Some(ctrl) = map.get(trid).and_then(Weak::upgrade) {
            return Ok(ctrl);
        }
        let ctrl = Arc::new(Controller::connect(trid, io_queue_size)?);
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(trid.to_string(), Arc::downgrade(&ctrl));
        Ok(ctrl)
    }

    fn connect(trid: &str, io_queue_size: u32) -> io::Result<Controller> {
        let c_trid = CString::new(trid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in transport ID"))?;
        // SAFETY: c_trid is a NUL-terminated string alive for the call; the
        // environment was initialised by the caller (SpdkDevice::open).
        let raw =
            unsafe { ffi::stria_ctrlr_connect(c_trid.as_ptr(), KEEP_ALIVE_MS, io_queue_size) };
        let Some(ptr) = NonNull::new(raw) else {
            // spdk_nvme_connect sets no errno; SPDK's log says what failed.
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "cannot attach the NVMe controller at {trid:?} (unreachable, or not an \
                     NVMe controller; SPDK's log above says why)"
                ),
            ));
        };
        let ptr = CtrlrPtr(ptr);
        let failed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let admin = {
            let (failed, stop, trid) = (Arc::clone(&failed), Arc::clone(&stop), trid.to_string());
            std::thread::Builder::new()
                .name("spdk-admin".into())
                .spawn(move || admin_loop(ptr, &trid, &failed, &stop))?
        };
        Ok(Controller {
            ptr,
            trid: trid.to_string(),
            failed,
            stop,
            admin: Some(admin),
        })
    }

    /// The transport ID it was attached with.
    pub fn trid(&self) -> &str {
        &self.trid
    }

    /// True once SPDK has declared the controller failed.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Namespace `nsid`, or `None` when it is not active.
    pub fn namespace(&self, nsid: u32) -> Option<NamespaceInfo> {
        let mut info = NamespaceInfo::default();
        // SAFETY: the controller is attached while self lives; info is a
        // valid stria_ns_info for the shim to fill.
        let rc = unsafe { ffi::stria_ns_info(self.ptr.0.as_ptr(), nsid, &mut info) };
        (rc == 0).then_some(info)
    }

    /// The raw pointer, for [`super::qpair::QPair::alloc`] only.
    pub(super) fn raw(&self) -> *mut ffi::SpdkCtrlr {
        self.ptr.0.as_ptr()
    }
}

/// Polls the admin queue until told to stop.
fn admin_loop(ptr: CtrlrPtr, trid: &str, failed: &AtomicBool, stop: &(Mutex<bool>, Condvar)) {
    let (lock, cvar) = stop;
    let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
    while !*stopped {
        // SAFETY: the controller stays attached until Controller::drop has
        // set `stop` and joined this thread.
        let rc = unsafe { ffi::stria_ctrlr_process_admin(ptr.0.as_ptr()) };
        // SAFETY: as above.
        let is_failed = unsafe { ffi::stria_ctrlr_is_failed(ptr.0.as_ptr()) };
        if (rc < 0 || is_failed) && !failed.swap(true, Ordering::Relaxed) {
            tracing::error!(controller = trid, rc, "NVMe controller failed");
        }
        stopped = cvar
            .wait_timeout(stopped, ADMIN_POLL)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cvar.notify_all();
        if let Some(admin) = self.admin.take() {
            let _ = admin.join();
        }
        // SAFETY: the admin thread is gone and every qpair (each holding an
        // Arc of self) was freed, so nothing uses the controller any more.
        unsafe { ffi::stria_ctrlr_detach(self.ptr.0.as_ptr()) }
    }
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("trid", &self.trid)
            .field("failed", &self.is_failed())
            .finish()
    }
}
