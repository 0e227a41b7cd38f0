//! The C functions of `shim.c`, as Rust sees them. Nothing but declarations:
//! every call is made by one of the safe wrappers beside this file, each in
//! an `unsafe` block that says why it holds.

use std::ffi::{c_char, c_int, c_void};

/// Opaque SPDK controller.
#[repr(C)]
pub struct SpdkCtrlr {
    _private: [u8; 0],
}

/// Opaque queue pair of the shim (`struct stria_qpair`).
#[repr(C)]
pub struct StriaQpair {
    _private: [u8; 0],
}

/// `struct stria_env_opts`.
#[repr(C)]
pub struct EnvOpts {
    pub name: *const c_char,
    pub core_mask: *const c_char,
    pub mem_size_mb: c_int,
    pub shm_id: c_int,
    pub no_huge: bool,
    pub no_pci: bool,
    pub pci_allowed: *const *const c_char,
    pub num_pci_allowed: usize,
}

/// `struct stria_ns_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NsInfo {
    pub sector_size: u32,
    pub num_sectors: u64,
    pub max_xfer_size: u32,
    pub volatile_cache: bool,
    pub flush_supported: bool,
}

/// `struct stria_cpl`: a finished request's slot and NVMe status.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpl {
    pub slot: u32,
    pub sct: u16,
    pub sc: u16,
}

extern "C" {
    pub fn stria_env_init(opts: *const EnvOpts) -> c_int;

    pub fn stria_ctrlr_connect(
        trid: *const c_char,
        keep_alive_ms: u32,
        io_queue_size: u32,
    ) -> *mut SpdkCtrlr;
    pub fn stria_ctrlr_detach(ctrlr: *mut SpdkCtrlr);
    pub fn stria_ctrlr_process_admin(ctrlr: *mut SpdkCtrlr) -> i32;
    pub fn stria_ctrlr_is_failed(ctrlr: *mut SpdkCtrlr) -> bool;
    pub fn stria_ns_info(ctrlr: *mut SpdkCtrlr, nsid: u32, out: *mut NsInfo) -> c_int;

    pub fn stria_qpair_alloc(
        ctrlr: *mut SpdkCtrlr,
        nsid: u32,
        depth: u32,
        requests: u32,
    ) -> *mut StriaQpair;
    pub fn stria_qpair_free(qp: *mut StriaQpair);
    pub fn stria_qpair_rw(
        qp: *mut StriaQpair,
        write: bool,
        fua: bool,
        slot: u32,
        lba: u64,
        nblocks: u32,
        iov: *const libc::iovec,
        iovcnt: c_int,
    ) -> c_int;
    pub fn stria_qpair_flush(qp: *mut StriaQpair, slot: u32) -> c_int;
    pub fn stria_qpair_poll(qp: *mut StriaQpair, out: *mut Cpl, cap: u32, got: *mut u32) -> i32;
    pub fn stria_qpair_disconnect(qp: *mut StriaQpair);
    pub fn stria_qpair_failure_reason(qp: *mut StriaQpair) -> c_int;
    pub fn stria_qpair_lost(qp: *mut StriaQpair) -> u64;

    pub fn stria_status_string(sct: u16, sc: u16) -> *const c_char;

    pub fn stria_dma_zmalloc(size: usize, align: usize) -> *mut c_void;
    pub fn stria_dma_free(buf: *mut c_void);
}
