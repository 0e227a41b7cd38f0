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

/// Any backend's device.
#[derive(Clone)]
pub enum AnyDevice {
    Sim(SimDevice),
    Psync(PsyncDevice),
    Uring(UringDevice),
    #[cfg(feature = "spdk")]
    Spdk(SpdkDevice),
}

/// Any backend's queue.
#[expect(
    clippy::large_enum_variant,
    reason = "one queue per reactor per device, never moved on the I/O path; boxing would add a pointer chase to every call"
)]
pub enum AnyQueue {
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

impl AnyDevice {
    /// Opens the device `cfg` describes. File devices must exist (see
    /// [`AnyDevice::create`]); `sim` devices start empty. `spdk` devices
    /// set up SPDK's environment from `spdk` (the config's `spdk` section)
    /// when they are the first of the process to open; other backends
    /// ignore it.
    pub fn open(cfg: &DeviceConfig, spdk: &SpdkEnvConfig) -> Result<AnyDevice> {
        match &cfg.backend {
            BackendConfig::Sim(_) => SimDevice::open(cfg).map(AnyDevice::Sim),
            BackendConfig::Psync { .. } => PsyncDevice::open(cfg).map(AnyDevice::Psync),
            BackendConfig::Uring { .. } => UringDevice::open(cfg).map(AnyDevice::Uring),
            #[cfg(feature = "spdk")]
            BackendConfig::Spdk(_) => SpdkDevice::open(cfg, spdk).map(AnyDevice::Spdk),
            #[cfg(not(feature = "spdk"))]
            BackendConfig::Spdk(_) => {
                let _ = spdk;
                Err(spdk_unavailable(cfg))
            }
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
        dispatch!(self, AnyDevice, d => d.info())
    }

    fn open_queue(&self) -> Result<AnyQueue> {
        Ok(match self {
            AnyDevice::Sim(d) => AnyQueue::Sim(d.open_queue()?),
            AnyDevice::Psync(d) => AnyQueue::Psync(d.open_queue()?),
            AnyDevice::Uring(d) => AnyQueue::Uring(d.open_queue()?),
            #[cfg(feature = "spdk")]
            AnyDevice::Spdk(d) => AnyQueue::Spdk(d.open_queue()?),
        })
    }

    fn alloc_buf(&self, len: usize) -> IoBuf {
        dispatch!(self, AnyDevice, d => d.alloc_buf(len))
    }
}

impl Queue for AnyQueue {
    fn info(&self) -> &DeviceInfo {
        dispatch!(self, AnyQueue, q => q.info())
    }

    fn submit(&mut self, req: Request) -> Result<(), Rejected> {
        dispatch!(self, AnyQueue, q => q.submit(req))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        dispatch!(self, AnyQueue, q => q.poll(out))
    }

    fn in_flight(&self) -> usize {
        dispatch!(self, AnyQueue, q => q.in_flight())
    }

    fn wait_hint(&self) -> WaitHint {
        dispatch!(self, AnyQueue, q => q.wait_hint())
    }
}
