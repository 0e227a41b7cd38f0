//! SPDK's userspace NVMe driver, used directly (cargo feature `spdk`).
//!
//! An [`SpdkDevice`] is one namespace of one NVMe controller, reached over
//! PCIe (bare metal) or NVMe/TCP (anywhere). Each reactor's
//! [`Device::open_queue`] allocates that reactor's own I/O queue pair;
//! only that thread submits to it and reaps its completions, so the I/O
//! path takes no lock (see [`SpdkQueue`]).
//!
//! - **Binding.** `shim.c` wraps the few SPDK calls Stria makes in plain C
//!   functions; `ffi.rs` declares them; `env`, `controller`, `qpair` and
//!   `dma` are the safe wrappers, and hold every `unsafe` block.
//! - **Environment.** SPDK's environment (DPDK's EAL) is set up once per
//!   process, by the first device that opens, from the config's `spdk:`
//!   section ([`crate::config::SpdkEnvConfig`]): memory size, hugepages or
//!   not, and a core mask made of the reactor cores.
//! - **Scatter-gather.** A request's buffers go out as one NVMe command
//!   through SPDK's `writev`/`readv` with SGL callbacks over an `iovec` per
//!   buffer, not one command per buffer: one completion per request, and
//!   SPDK splits the command where the controller's transfer size or PRP
//!   rules require.
//! - **Memory.** [`Device::alloc_buf`] returns buffers in SPDK's DMA-able
//!   memory (falling back to the heap, with a warning, when that memory is
//!   exhausted). Over PCIe the controller can reach nothing else, so the
//!   queue refuses any other buffer with [`DeviceError::NotDma`]. Over TCP
//!   the host copies data through sockets, so any [`IoBuf`] is accepted.
//! - **Flush.** When the namespace reports a volatile write cache, every
//!   flush is an NVMe Flush command sent to the controller (never skipped).
//!   Without one, a completed write is already durable and a flush
//!   completes at once without a command.
//! - **Failure.** NVMe errors complete the request with
//!   [`DeviceError::Io`] naming the device, the LBA and the status. When a
//!   queue pair or its controller fails, every request in flight on it fails
//!   (never acknowledged) with [`DeviceError::Offline`], and so does every
//!   later request on that queue. A failed flush stays failed for every
//!   queue of the device, as on the other backends.

mod controller;
pub(crate) mod dma;
mod env;
mod ffi;
mod qpair;
mod queue;

use std::sync::Arc;

pub use queue::SpdkQueue;

use self::controller::Controller;
use super::{file, BackendKind, Device, DeviceError, DeviceInfo, IoBuf, Result, DEFAULT_ALIGN};
use crate::config::{BackendConfig, DeviceConfig, SpdkConfig, SpdkEnvConfig};

/// One namespace of an NVMe controller driven by SPDK. Clones share it.
#[derive(Clone, Debug)]
pub struct SpdkDevice {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    ctrl: Arc<Controller>,
    info: DeviceInfo,
    nsid: u32,
    /// Over PCIe only DMA memory reaches the controller.
    dma_only: bool,
    /// SPDK request objects per queue pair.
    requests: u32,
    latch: file::FlushLatch,
}

impl SpdkDevice {
    /// Attaches the controller `cfg` names (once per process) and checks
    /// its namespace against the map, initialising SPDK's environment from
    /// `env` first if no device did yet.
    pub fn open(cfg: &DeviceConfig, env: &SpdkEnvConfig) -> Result<SpdkDevice> {
        let BackendConfig::Spdk(spdk) = &cfg.backend else {
            return Err(DeviceError::Mismatch {
                device: cfg.name.clone(),
                what: format!("is a {} device, not an spdk one", cfg.kind()),
            });
        };
        let unavailable = |why: String| DeviceError::Unavailable {
            device: cfg.name.clone(),
            backend: BackendKind::Spdk.as_str(),
            why,
        };
        env::init(env).map_err(unavailable)?;
        let trid = spdk.transport_id();
        let ctrl =
            Controller::get(&trid, cfg.queue_depth).map_err(|e| unavailable(e.to_string()))?;
        let nsid = spdk.namespace();
        let mismatch = |what: String| DeviceError::Mismatch {
            device: cfg.name.clone(),
            what,
        };
        let ns = ctrl.namespace(nsid).ok_or_else(|| {
            mismatch(format!(
                "the controller at {trid:?} has no active namespace {nsid}"
            ))
        })?;
        if ns.sector_size != cfg.block_size {
            return Err(mismatch(format!(
                "namespace {nsid} at {trid:?} has {}-byte sectors, the map says block-size {}",
                ns.sector_size, cfg.block_size
            )));
        }
        let ns_bytes = ns.num_sectors * u64::from(ns.sector_size);
        if cfg.size > ns_bytes {
            return Err(mismatch(format!(
                "namespace {nsid} at {trid:?} holds {ns_bytes} bytes, the map says size {}",
                cfg.size
            )));
        }
        let capacity_blocks = if cfg.size == 0 {
            ns.num_sectors
        } else {
            cfg.capacity_blocks()
        };
        // Room for the largest request split at the controller's transfer
        // size, beside a full queue of small ones.
        let per_max = super::MAX_TRANSFER_BYTES / u64::from(ns.max_xfer_size.max(4096));
        let requests = (u64::from(cfg.queue_depth) * 2 + per_max + 1).min(1 << 16) as u32;
        tracing::info!(
            device = %cfg.name, %trid, nsid, sector = ns.sector_size, sectors = ns.num_sectors,
            vwc = ns.volatile_cache, flush = ns.flush_supported, "spdk namespace attached"
        );
        Ok(SpdkDevice {
            shared: Arc::new(Shared {
                info: DeviceInfo {
                    name: cfg.name.clone(),
                    backend: BackendKind::Spdk,
                    block_size: cfg.block_size,
                    capacity_blocks,
                    queue_depth: cfg.queue_depth,
                    mem_align: DEFAULT_ALIGN,
                    volatile_cache: ns.volatile_cache,
                },
                ctrl,
                nsid,
                dma_only: matches!(spdk, SpdkConfig::Pcie { .. }),
                requests,
                latch: file::FlushLatch::new(false),
            }),
        })
    }
}

impl Device for SpdkDevice {
    type Queue = SpdkQueue;

    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn open_queue(&self) -> Result<SpdkQueue> {
        SpdkQueue::open(Arc::clone(&self.shared))
    }

    /// A zeroed buffer in SPDK's DMA memory; on the heap (with a warning)
    /// when that memory is exhausted, which a TCP device still accepts and
    /// a PCIe device refuses at submission.
    fn alloc_buf(&self, len: usize) -> IoBuf {
        let align = self.shared.info.mem_align.max(DEFAULT_ALIGN);
        IoBuf::dma(len, align).unwrap_or_else(|| {
            tracing::warn!(
                device = %self.shared.info.name, len,
                "SPDK DMA memory exhausted, using heap memory (raise spdk.mem-size)"
            );
            IoBuf::with_align(len, align)
        })
    }
}
