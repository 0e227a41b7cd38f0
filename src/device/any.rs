//! A device whose backend the device map chooses at run time.
//!
//! The engine stays generic over [`Device`]; the appliance instantiates it
//! with [`AnyDevice`], so one map can mix backends (say, `uring` WAL devices
//! beside a `psync` data device) and the match costs one branch per call.

use super::psync::{PsyncDevice, PsyncQueue};
use super::sim::{SimDevice, SimQueue};
#[cfg(feature = "spdk")]
use super::spdk::{SpdkDevice, SpdkQueue};
use super::uring::{UringDevice, UringQueue};
use super::{
    file, BackendKind, Completion, Device, DeviceInfo, IoBuf, Queue, Rejected, Request, Result,
    WaitHint,
};
use crate::config::{BackendConfig, DeviceConfig, SpdkEnvConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Any backend's device, and the requests of it that failed.
#[derive(Clone)]
pub struct AnyDevice {
    backend: Backend,
    errors: Arc<AtomicU64>,
}

#[derive(Clone)]
enum Backend {
    Sim(SimDevice),
    Psync(PsyncDevice),
    Uring(UringDevice),
    #[cfg(feature = "spdk")]
    Spdk(SpdkDevice),
}

/// Any backend's queue.
pub struct AnyQueue {
    backend: BackendQueue,
    /// The device's count of failed requests.
    errors: Arc<AtomicU64>,
}

#[expect(
    clippy::large_enum_variant,
    reason = "one queue per reactor per device, never moved on the I/O path; boxing would add a pointer chase to every call"
)]
enum BackendQueue {
    Sim(SimQueue),
    Psync(PsyncQueue),
    Uring(UringQueue),
    #[cfg(feature = "spdk")]
    Spdk(SpdkQueue),
}

/// Calls the same method on whichever backend is inside.
macro_rules! dispatch {
    ($self:expr, $enum:ident, $inner:ident => $call:expr) => {
        match $self {
            $enum::Sim($inner) => $call,
            $enum::Psync($inner) => $call,
            $enum::Uring($inner) => $call,
            #[cfg(feature = "spdk")]
            $enum::Spdk($inner) => $call,
        }
    };
}

impl From<SimDevice> for AnyDevice {
    fn from(d: SimDevice) -> AnyDevice {
        AnyDevice::of(Backend::Sim(d))
    }
}

impl AnyDevice {
    /// Opens the device `cfg` describes. File devices must exist (see
    /// [`AnyDevice::create`]); `sim` devices start empty. `spdk` devices
    /// set up SPDK's environment from `spdk` (the config's `spdk` section)
    /// when they are the first of the process to open; other backends
    /// ignore it.
    pub fn open(cfg: &DeviceConfig, spdk: &SpdkEnvConfig) -> Result<AnyDevice> {
        let backend = match &cfg.backend {
            BackendConfig::Sim(_) => SimDevice::open(cfg).map(Backend::Sim),
            BackendConfig::Psync { .. } => PsyncDevice::open(cfg).map(Backend::Psync),
            BackendConfig::Uring { .. } => UringDevice::open(cfg).map(Backend::Uring),
            #[cfg(feature = "spdk")]
            BackendConfig::Spdk(_) => SpdkDevice::open(cfg, spdk).map(Backend::Spdk),
            #[cfg(not(feature = "spdk"))]
            BackendConfig::Spdk(_) => {
                let _ = spdk;
                Err(spdk_unavailable(cfg))
            }
        };
        backend.map(AnyDevice::of)
    }

    /// Stands in for the device `cfg` describes when it cannot be used
    /// (missing, unreadable, not this appliance's): every request fails
    /// with `why`, so a caller that may go on without it (the WAL, with
    /// copies) loses it.
    pub fn missing(cfg: &DeviceConfig, why: String) -> AnyDevice {
        let sim = SimDevice::absent(&cfg.name, cfg.block_size, cfg.capacity_blocks(), why);
        AnyDevice::of(Backend::Sim(sim))
    }

    fn of(backend: Backend) -> AnyDevice {
        AnyDevice {
            backend,
            errors: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Creates and sizes the backing file of a file device (a no-op for a
    /// block device of sufficient size). Other backends have nothing to create.
    pub fn create(cfg: &DeviceConfig) -> Result<()> {
        match &cfg.backend {
            BackendConfig::Psync { .. } | BackendConfig::Uring { .. } => file::create(cfg),
            BackendConfig::Sim(_) => Ok(()),
            #[cfg(feature = "spdk")]
            BackendConfig::Spdk(_) => Ok(()),
            #[cfg(not(feature = "spdk"))]
            BackendConfig::Spdk(_) => Err(spdk_unavailable(cfg)),
        }
    }

    pub fn kind(&self) -> BackendKind {
        self.info().backend
    }
}

#[cfg(not(feature = "spdk"))]
fn spdk_unavailable(cfg: &DeviceConfig) -> super::DeviceError {
    super::DeviceError::Unavailable {
        device: cfg.name.clone(),
        backend: "spdk",
        why:
            "this build has no SPDK support; rebuild with `cargo build --release --features spdk` \
              (see spdk-env/README.md)"
                .into(),
    }
}

impl Device for AnyDevice {
    type Queue = AnyQueue;

    fn info(&self) -> &DeviceInfo {
        dispatch!(&self.backend, Backend, d => d.info())
    }

    fn open_queue(&self) -> Result<AnyQueue> {
        let backend = match &self.backend {
            Backend::Sim(d) => BackendQueue::Sim(d.open_queue()?),
            Backend::Psync(d) => BackendQueue::Psync(d.open_queue()?),
            Backend::Uring(d) => BackendQueue::Uring(d.open_queue()?),
            #[cfg(feature = "spdk")]
            Backend::Spdk(d) => BackendQueue::Spdk(d.open_queue()?),
        };
        Ok(AnyQueue {
            backend,
            errors: self.errors.clone(),
        })
    }

    fn alloc_buf(&self, len: usize) -> IoBuf {
        dispatch!(&self.backend, Backend, d => d.alloc_buf(len))
    }

    /// Requests of any queue of this device that completed with an error
    /// (reads, writes and flushes), since it was opened.
    fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

impl Queue for AnyQueue {
    fn info(&self) -> &DeviceInfo {
        dispatch!(&self.backend, BackendQueue, q => q.info())
    }

    fn submit(&mut self, req: Request) -> Result<(), Rejected> {
        dispatch!(&mut self.backend, BackendQueue, q => q.submit(req))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let from = out.len();
        let n = dispatch!(&mut self.backend, BackendQueue, q => q.poll(out));
        let failed = out[from..].iter().filter(|c| c.result.is_err()).count();
        if failed > 0 {
            self.errors.fetch_add(failed as u64, Ordering::Relaxed);
        }
        n
    }

    fn in_flight(&self) -> usize {
        dispatch!(&self.backend, BackendQueue, q => q.in_flight())
    }

    fn wait_hint(&self) -> WaitHint {
        dispatch!(&self.backend, BackendQueue, q => q.wait_hint())
    }

    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        dispatch!(&self.backend, BackendQueue, q => q.event_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SimConfig, SimFaults};
    use crate::device::wait;

    #[test]
    fn failed_requests_are_counted_per_device_over_all_its_queues() {
        let sim = |name: &str, read_error_rate: f64| {
            let model = SimConfig {
                faults: SimFaults {
                    read_error_rate,
                    ..SimFaults::default()
                },
                ..SimConfig::default()
            };
            AnyDevice::from(SimDevice::new(name, 4096, 64, 8, model))
        };
        let (bad, good) = (sim("bad", 1.0), sim("good", 0.0));
        for d in [&bad, &good] {
            let mut q = d.open_queue().unwrap();
            let buf = d.alloc_buf(4096);
            let c = wait::run(&mut q, Request::write(1, 0, vec![buf])).unwrap();
            assert!(c.result.is_ok());
            for (tag, mut q) in [(2, q), (3, d.open_queue().unwrap())] {
                let buf = d.alloc_buf(4096);
                let _ = wait::run(&mut q, Request::read(tag, 0, vec![buf])).unwrap();
            }
        }
        assert_eq!((bad.errors(), good.errors()), (2, 0));
    }
}
