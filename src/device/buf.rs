//! Aligned I/O buffers.
//!
//! Every buffer handed to a device is an [`IoBuf`]: a zero-initialised heap
//! region whose address is aligned for direct I/O. Buffers move into a queue
//! with a request and come back with its completion, so a backend may hand
//! their address to the kernel (io_uring) or a controller (SPDK) while the
//! request is in flight without any borrow outliving the call.
//!
//! Engines ask the device for buffers ([`crate::device::Device::alloc_buf`]) so
//! that a backend with its own memory can supply them: with the `spdk`
//! feature a buffer is backed either by the global allocator or by SPDK's
//! DMA-able memory ([`IoBuf::is_dma`] tells them apart; a PCIe controller
//! can only reach the latter).

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment used when nobody asks for another: a 4 KiB page, enough for
/// O_DIRECT on every logical block size up to 4 KiB and for NVMe PRPs.
pub const DEFAULT_ALIGN: usize = 4096;

/// An owned, aligned, zero-initialised byte buffer for device I/O.
pub struct IoBuf {
    /// Start of the allocation.
    base: NonNull<u8>,
    /// Bytes from `base` to the first byte of the buffer (0 but in tests of
    /// misaligned I/O).
    offset: usize,
    /// Visible length: what deref, I/O and `len` see.
    len: usize,
    /// Length the allocation was made for (>= `len`); `Drop` frees with it.
    capacity: usize,
    align: usize,
    /// Who owns the memory at `base`.
    backing: Backing,
}

/// Where an [`IoBuf`]'s memory comes from.
#[derive(Debug)]
enum Backing {
    /// The global allocator, with `IoBuf::layout`.
    Heap,
    /// SPDK's DMA heap; the region frees itself when dropped.
    #[cfg(feature = "spdk")]
    Dma {
        _region: super::spdk::dma::DmaRegion,
    },
}

// SAFETY: IoBuf owns its allocation exclusively (like Box<[u8]>); no other
// handle to the memory exists, so moving it to or sharing it with another
// thread is as safe as for a Vec<u8>.
unsafe impl Send for IoBuf {}
// SAFETY: shared access only hands out &[u8]; mutation needs &mut IoBuf.
unsafe impl Sync for IoBuf {}

impl IoBuf {
    /// A zeroed buffer of `len` bytes aligned to [`DEFAULT_ALIGN`].
    pub fn new(len: usize) -> IoBuf {
        IoBuf::with_align(len, DEFAULT_ALIGN)
    }

    /// A zeroed buffer of `len` bytes whose address is a multiple of `align`
    /// (a power of two).
    ///
    /// # Panics
    /// If `align` is not a power of two or the size overflows, as
    /// `Layout::from_size_align` would reject it.
    pub fn with_align(len: usize, align: usize) -> IoBuf {
        IoBuf::with_offset(len, align, 0)
    }

    /// A zeroed buffer of `len` bytes that starts `offset` bytes past an
    /// `align` boundary. Only tests of misaligned requests want `offset > 0`.
    pub fn with_offset(len: usize, align: usize, offset: usize) -> IoBuf {
        let layout = IoBuf::layout(len, align, offset);
        // SAFETY: the layout has a non-zero size (see IoBuf::layout).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(base) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        IoBuf {
            base,
            offset,
            len,
            capacity: len,
            align,
            backing: Backing::Heap,
        }
    }

    /// A zeroed buffer of `len` bytes in SPDK's DMA-able memory, aligned to
    /// `align`; `None` when that memory is exhausted or not set up.
    #[cfg(feature = "spdk")]
    pub fn dma(len: usize, align: usize) -> Option<IoBuf> {
        let region = super::spdk::dma::DmaRegion::alloc(len, align)?;
        Some(IoBuf {
            base: region.as_ptr(),
            offset: 0,
            len,
            capacity: len,
            align,
            backing: Backing::Dma { _region: region },
        })
    }

    /// True when the buffer lives in SPDK's DMA-able memory, which a PCIe
    /// controller can reach (always false without the `spdk` feature).
    pub fn is_dma(&self) -> bool {
        match self.backing {
            Backing::Heap => false,
            #[cfg(feature = "spdk")]
            Backing::Dma { .. } => true,
        }
    }

    fn layout(len: usize, align: usize, offset: usize) -> Layout {
        let size = len
            .checked_add(offset)
            .expect("IoBuf: size overflows")
            .max(1);
        Layout::from_size_align(size, align).expect("IoBuf: bad size or alignment")
    }

    /// A buffer holding a copy of `data`, aligned to [`DEFAULT_ALIGN`].
    pub fn from_slice(data: &[u8]) -> IoBuf {
        let mut buf = IoBuf::new(data.len());
        buf.copy_from_slice(data);
        buf
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated: the most [`IoBuf::restore_len`] can give back.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Shrinks the visible length to `len`, keeping the allocation, so that a
    /// buffer filled up to `len` can go to the device without a copy. Does
    /// nothing if `len` is not smaller.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes the whole allocation visible again after [`IoBuf::truncate`],
    /// so that a buffer can be reused at its full size. Bytes past the
    /// truncated length keep what they held.
    pub fn restore_len(&mut self) {
        self.len = self.capacity;
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The alignment the buffer was allocated with.
    pub fn align(&self) -> usize {
        self.align
    }

    /// The address of the first byte, for backends that hand it to hardware.
    pub fn as_ptr(&self) -> *const u8 {
        self.data_ptr()
    }

    /// The mutable address of the first byte, for backends that read into it.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.data_ptr()
    }

    fn data_ptr(&self) -> *mut u8 {
        // SAFETY: offset is within the allocation (its size is capacity +
        // offset, or 1 when that is 0).
        unsafe { self.base.as_ptr().add(self.offset) }
    }

    /// Sets every byte to `byte`.
    pub fn fill(&mut self, byte: u8) {
        self.as_mut().fill(byte);
    }
}

impl Deref for IoBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: data_ptr points to len <= capacity initialised (zeroed at
        // allocation) bytes inside the allocation owned by self.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.len) }
    }
}

impl DerefMut for IoBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for IoBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for IoBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Clone for IoBuf {
    /// A copy in the same kind of memory (DMA memory when it can be had).
    fn clone(&self) -> IoBuf {
        #[cfg(feature = "spdk")]
        if self.is_dma() && self.offset == 0 {
            if let Some(mut copy) = IoBuf::dma(self.len, self.align) {
                copy.copy_from_slice(self);
                return copy;
            }
        }
        let mut copy = IoBuf::with_offset(self.len, self.align, self.offset);
        copy.copy_from_slice(self);
        copy
    }
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        if !matches!(self.backing, Backing::Heap) {
            return; // the DmaRegion frees itself
        }
        let layout = IoBuf::layout(self.capacity, self.align, self.offset);
        // SAFETY: base was allocated by alloc_zeroed with exactly this layout
        // and is freed only here, once.
        unsafe { alloc::dealloc(self.base.as_ptr(), layout) }
    }
}

impl fmt::Debug for IoBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("align", &self.align)
            .field("dma", &self.is_dma())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for align in [512, 4096, 65536] {
            let buf = IoBuf::with_align(8192, align);
            assert_eq!(buf.as_ptr() as usize % align, 0);
            assert!(buf.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn offset_buffers_are_misaligned_on_purpose() {
        let buf = IoBuf::with_offset(4096, 4096, 8);
        assert_eq!(buf.as_ptr() as usize % 4096, 8);
        assert_eq!(buf.len(), 4096);
    }

    #[test]
    fn zero_length_is_valid() {
        let buf = IoBuf::new(0);
        assert!(buf.is_empty());
        assert_eq!(&buf[..], &[] as &[u8]);
    }

    #[test]
    fn clone_copies_contents_and_alignment() {
        let mut buf = IoBuf::with_align(4096, 512);
        buf.fill(7);
        let copy = buf.clone();
        assert_eq!(&copy[..], &buf[..]);
        assert_eq!(copy.align(), 512);
        assert_ne!(copy.as_ptr(), buf.as_ptr());
    }

    #[test]
    fn truncate_shrinks_the_view_and_restore_brings_it_back() {
        let mut buf = IoBuf::with_align(8192, 512);
        buf.fill(3);
        buf.truncate(4096);
        assert_eq!((buf.len(), buf.capacity()), (4096, 8192));
        assert!(buf.iter().all(|&b| b == 3));
        buf.truncate(10_000);
        assert_eq!(buf.len(), 4096, "truncate never grows");
        let copy = buf.clone();
        assert_eq!((copy.len(), copy.capacity()), (4096, 4096));
        buf.restore_len();
        assert_eq!(buf.len(), 8192);
        assert!(buf.iter().all(|&b| b == 3));
        // Dropping a truncated buffer frees the whole allocation (Miri and
        // the allocator's own checks catch a wrong layout here).
        let mut short = IoBuf::new(4096);
        short.truncate(0);
        assert!(short.is_empty());
        drop(short);
    }
}
