//! DMA-able memory from SPDK's environment (hugepages, or plain pages with
//! `hugepages: false`), the backing of [`crate::device::IoBuf`]s that a
//! PCIe controller can reach.

use std::ptr::NonNull;

use super::{env, ffi};

/// A zeroed region from `spdk_dma_zmalloc`, freed on drop.
#[derive(Debug)]
pub struct DmaRegion {
    ptr: NonNull<u8>,
}

// SAFETY: the region is owned exclusively (like a Box); spdk_dma_free may be
// called from any thread (DPDK's heap takes its own lock).
unsafe impl Send for DmaRegion {}
// SAFETY: DmaRegion hands out no access to the memory; IoBuf does, under
// its own &/&mut rules.
unsafe impl Sync for DmaRegion {}

impl DmaRegion {
    /// `size` zeroed bytes aligned to `align` (a power of two), or `None`
    /// when the environment is not up or its memory is exhausted.
    pub fn alloc(size: usize, align: usize) -> Option<DmaRegion> {
        if !env::ready() {
            return None;
        }
        // SAFETY: the environment is initialised (checked above); the call
        // takes plain integers and returns memory or NULL.
        let raw = unsafe { ffi::stria_dma_zmalloc(size.max(1), align) };
        NonNull::new(raw.cast()).map(|ptr| DmaRegion { ptr })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        // SAFETY: ptr came from stria_dma_zmalloc and is freed only here.
        unsafe { ffi::stria_dma_free(self.ptr.as_ptr().cast()) }
    }
}
