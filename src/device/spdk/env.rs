//! SPDK's environment (DPDK's EAL): set up once per process, by the first
//! `spdk` device that opens, and never torn down (DMA buffers may outlive
//! every device).

use std::ffi::CString;
use std::sync::OnceLock;

use super::ffi;
use crate::config::SpdkEnvConfig;

static ENV: OnceLock<Result<(), String>> = OnceLock::new();

/// Initialises the environment from `cfg` unless it already is; later calls
/// (whatever their `cfg`) return the first call's outcome, since EAL can be
/// set up only once per process.
pub fn init(cfg: &SpdkEnvConfig) -> Result<(), String> {
    ENV.get_or_init(|| init_once(cfg)).clone()
}

/// True once the environment is up: DMA memory can be allocated.
pub fn ready() -> bool {
    matches!(ENV.get(), Some(Ok(())))
}

fn init_once(cfg: &SpdkEnvConfig) -> Result<(), String> {
    let name = CString::new("stria").expect("no NUL");
    let mask = cfg.core_mask();
    let core_mask = CString::new(mask.clone()).expect("a hex mask has no NUL");
    let allowed: Vec<CString> = cfg
        .pci_allowed
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| format!("PCI address {a:?} holds a NUL")))
        .collect::<Result<_, _>>()?;
    let allowed_ptrs: Vec<*const std::ffi::c_char> = allowed.iter().map(|a| a.as_ptr()).collect();
    let mem_mb = cfg.mem_size >> 20;
    let opts = ffi::EnvOpts {
        name: name.as_ptr(),
        core_mask: core_mask.as_ptr(),
        mem_size_mb: i32::try_from(mem_mb)
            .map_err(|_| format!("mem-size {mem_mb} MiB is too large"))?,
        shm_id: cfg.shm_id.map_or(-1, |id| id as i32),
        no_huge: !cfg.hugepages,
        // Without pcie devices, keep DPDK away from the machine's PCI devices.
        no_pci: cfg.pci_allowed.is_empty(),
        pci_allowed: allowed_ptrs.as_ptr(),
        num_pci_allowed: allowed_ptrs.len(),
    };
    // SAFETY: every pointer in opts points into a CString or Vec above that
    // lives until the call returns; the shim copies what SPDK keeps.
    let rc = unsafe { ffi::stria_env_init(&opts) };
    if rc != 0 {
        let e = std::io::Error::from_raw_os_error(-rc);
        let pages = if cfg.hugepages {
            "hugepages (reserve them with hugepages/, or set `spdk: { hugepages: false }` on a development machine)"
        } else {
            "plain pages"
        };
        return Err(format!(
            "cannot initialise SPDK's environment (core mask {mask}, {mem_mb} MiB of {pages}): {e}"
        ));
    }
    tracing::info!(core_mask = %mask, mem_mb, hugepages = cfg.hugepages, "SPDK environment ready");
    Ok(())
}
