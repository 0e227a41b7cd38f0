//! A device of the map that could not be opened or is not what its
//! superblock must say (a missing or truncated file, a superblock
//! overwritten): it keeps its place in the WAL stripe, so the others keep
//! their stripe positions, and refuses every request offline. With
//! `wal.copies` above one, recovery reads the log from the other devices
//! and the WAL runs degraded without this one.

use std::sync::Arc;

use super::{Completion, Device, DeviceError, DeviceInfo, IoBuf, Queue, Rejected, Request, Result};
use super::{WaitHint, DEFAULT_ALIGN};
use crate::config::DeviceConfig;

/// A device that is not there, and why.
#[derive(Clone, Debug)]
pub struct AbsentDevice {
    info: DeviceInfo,
    why: Arc<str>,
}

/// Its queue: every request is refused.
#[derive(Debug)]
pub struct AbsentQueue {
    info: DeviceInfo,
    why: Arc<str>,
}

impl AbsentDevice {
    /// The device `cfg` describes, standing in for it with the geometry
    /// the map gives.
    pub fn new(cfg: &DeviceConfig, why: String) -> AbsentDevice {
        let bs = cfg.block_size.max(512);
        AbsentDevice {
            info: DeviceInfo {
                name: cfg.name.clone(),
                backend: cfg.kind(),
                block_size: bs,
                capacity_blocks: cfg.size / u64::from(bs),
                queue_depth: cfg.queue_depth.max(1),
                mem_align: DEFAULT_ALIGN,
                volatile_cache: true,
            },
            why: why.into(),
        }
    }

    /// Why the device is absent.
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl Device for AbsentDevice {
    type Queue = AbsentQueue;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open_queue(&self) -> Result<AbsentQueue> {
        Ok(AbsentQueue {
            info: self.info.clone(),
            why: self.why.clone(),
        })
    }

    fn alloc_buf(&self, len: usize) -> IoBuf {
        IoBuf::with_align(len, DEFAULT_ALIGN)
    }
}

impl Queue for AbsentQueue {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn submit(&mut self, req: Request) -> Result<(), Rejected> {
        Err(Rejected {
            error: DeviceError::Offline {
                device: self.info.name.clone(),
                kind: req.kind(),
                lba: req.lba(),
                why: self.why.to_string(),
            },
            request: req,
        })
    }

    fn poll(&mut self, _out: &mut Vec<Completion>) -> usize {
        0
    }

    fn in_flight(&self) -> usize {
        0
    }

    fn wait_hint(&self) -> WaitHint {
        WaitHint::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendConfig, Role, SimConfig};

    #[test]
    fn every_request_is_refused_offline_and_changes_nothing() {
        let cfg = DeviceConfig {
            name: "wal1".into(),
            role: Role::Wal,
            size: 8 << 20,
            block_size: 4096,
            queue_depth: 32,
            backend: BackendConfig::Sim(SimConfig::default()),
        };
        let dev = AbsentDevice::new(&cfg, "its file is missing".into());
        assert_eq!(dev.info().capacity_blocks, 2048);
        let mut q = dev.open_queue().unwrap();
        for req in [
            Request::write(1, 7, vec![dev.alloc_buf(4096)]),
            Request::read(2, 7, vec![dev.alloc_buf(4096)]),
            Request::flush(3),
        ] {
            let r = q.submit(req).unwrap_err();
            let text = r.error.to_string();
            assert!(
                text.contains("wal1") && text.contains("its file is missing"),
                "{text}"
            );
        }
        assert_eq!(q.poll(&mut Vec::new()), 0);
        assert_eq!(q.wait_hint(), WaitHint::Idle);
    }
}
