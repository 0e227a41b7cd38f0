//! A RAM-backed simulated NVMe device, for the crash checker and tests.
//!
//! The simulator exists to break the engine the ways a real drive can, on
//! demand and reproducibly: every random choice comes from a ChaCha8
//! generator seeded from `SimConfig::seed` (and from the reboot seed for the
//! fate of a crash), so a failing run is replayed by its seeds.
//!
//! # Fault model
//!
//! 1. **Validation.** Every request is checked by
//!    [`check_request`](crate::device::check_request) (whole aligned blocks,
//!    in range, room in the queue) and refused, with nothing changed, when it
//!    fails. An offline device refuses everything. Refused requests get no
//!    operation number.
//! 2. **Operation numbers.** Accepted requests are numbered 0, 1, 2, ... in
//!    acceptance order across all queues of the device; `fail-ops` and
//!    `power-cut-at-op` name these numbers.
//! 3. **Timing.** Reads and writes share one transfer link of `bandwidth`
//!    bytes/s (0: unlimited): a transfer starts when the link is free and
//!    takes `bytes / bandwidth`, then the request completes `read-us` or
//!    `write-us` later. A flush completes `flush-us` after submission. Time
//!    is real; a request completes at the first operation on the device
//!    after its due time, in due order device-wide, and its completion is
//!    returned by its queue's next `poll`. With zero latencies and
//!    bandwidth every request completes at the next `poll`.
//! 4. **Visibility.** A write takes effect when it completes: from then on
//!    reads from any queue see it. A read returns what is visible when it
//!    completes. Overlapping requests in flight together resolve in
//!    completion order.
//! 5. **Volatile write cache** (`volatile-cache: true`). A completed write is
//!    persistent only once a flush *submitted after the write completed* has
//!    completed; writes completing after a flush was submitted are not
//!    covered by it. With `volatile-cache: false` (power-loss protection) a
//!    write is persistent when it completes.
//! 6. **Cache capacity.** The cache holds [`CACHE_BYTES`] of writes; beyond
//!    that its oldest writes become persistent on their own, as a drive
//!    destages its cache in the background. (Unflushed data may survive a
//!    crash; nothing may rely on it.)
//! 7. **I/O errors.** A request whose number is in `fail-ops`, or that loses
//!    a draw against its kind's error rate (drawn at acceptance, in
//!    acceptance order), completes at its due time with
//!    [`DeviceError::Io`] (`io::ErrorKind::Other`, the message naming the
//!    op) and changes nothing: a failed write writes nothing, a failed flush
//!    makes nothing durable. A failed flush is sticky: every flush that
//!    completes after it, from any queue, fails too (naming the first
//!    failure) and makes nothing durable, until the device is rebooted. That
//!    is how the kernel backends behave (the page cache marks the pages of
//!    a failed writeback clean, so the data is gone whatever a retry says),
//!    and it lets the crash checker catch an engine that retries a failed
//!    flush and carries on. [`SimDevice::set_sticky_flush_errors`]`(false)`
//!    models a device on which each flush fails only by its own draw.
//! 8. **Power cut** ([`SimDevice::cut_power`], or the request numbered
//!    `power-cut-at-op`, which is itself refused). The device freezes:
//!    nothing completes any more, every later submission is refused with
//!    [`DeviceError::Offline`], and every request not yet returned by
//!    `poll`, whether in flight or already completed, is returned by the
//!    next `poll` with [`DeviceError::Offline`], never with success.
//! 9. **Crash outcome** ([`SimDevice::reboot`]). The rebooted device holds
//!    the persistent image plus, for each write at risk (in the cache,
//!    oldest first, then in flight at the cut, in submission order,
//!    including writes that were going to fail), a seeded choice: kept
//!    whole, dropped whole, or torn, each `sector-size` piece (split at
//!    multiples of `sector-size` from the start of the device) kept or
//!    dropped on its own. Tearing never splits a sector. A write covered by
//!    a completed flush is never at risk.
//! 10. **Process crash** ([`SimDevice::reboot_after_process_crash`]). The
//!     device kept power, so nothing completed is lost: the new device has
//!     the same persistent image and the same, still volatile, cache. Each
//!     write in flight when the process died was executed whole or not at
//!     all (seeded), and if executed sits in the cache. If the device had
//!     lost power before (a power cut, or a [`SimDevice::reboot`] of it),
//!     the power loss decides: the outcome is exactly that of
//!     `reboot(seed)`.
//!
//! 11. **Misdirected and lost writes** (`misdirect-rate`, `lost-write-rate`,
//!     drawn at acceptance after the error draw). A misdirected write
//!     reports success but lands, whole, at an LBA drawn uniformly from the
//!     device (the intended blocks keep what they held); a lost write
//!     reports success and writes nothing. Both are counted in
//!     `silent_faults`. [`SimDevice::misdirect_at_rest`] copies one block
//!     over another, for tests that want a misdirected block at a chosen
//!     place.
//! 12. **Latent sector errors** (`latent-errors`: a list of LBAs, and
//!     [`SimDevice::add_latent_errors`]). A read that covers such a block
//!     fails with [`DeviceError::Io`] naming it, until a write that lands
//!     on it (misdirected ones included) clears it. They are a defect of
//!     the media: a reboot keeps them.
//! 13. **Corrupted reads** (`corrupt-read-rate`): a read reports success
//!     with one bit of its data flipped (byte and bit drawn at acceptance);
//!     what is stored stays right. [`SimDevice::corrupt_at_rest`] flips a
//!     bit of the stored block itself, which every later read and a crash
//!     keep.
//! 14. **Gray failure** (`slow-from-op`, `slow-ops`, `slow-factor`, default
//!     100): requests numbered from `slow-from-op`, `slow-ops` of them, take
//!     `slow-factor` times the time items 3 give them, and succeed.
//! 15. **Fail-stop** (`vanish-at-op`, or [`SimDevice::vanish`]): the device
//!     vanishes as a pulled drive: the request with that number and every
//!     later one is refused offline, requests in flight fail as at a power
//!     cut, and a reboot brings back a device that is still gone (its
//!     first request is refused). Other devices go on.
//!
//! Not modelled: reordering of completions of a single queue beyond what
//! due times imply.
//!
//! Storage is sparse (64 KiB chunks allocated on first non-zero write), so
//! devices of several GiB cost only what is written. Unflushed writes are
//! kept once, as the writes themselves, never as a second image.

mod crash;
mod faults;
mod media;
mod queue;
mod state;
mod store;
mod timing;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::media::Media;
use self::state::State;
use crate::config::{BackendConfig, DeviceConfig, SimConfig, SimFaults};
use crate::device::{BackendKind, Device, DeviceError, DeviceInfo, Result, DEFAULT_ALIGN};

pub use self::media::CACHE_BYTES;
pub use self::queue::SimQueue;

/// The ChaCha stream of the crash choices, apart from the stream the
/// rebooted device draws its own faults from with the same seed.
const CRASH_STREAM: u64 = 1;

/// Counters of one simulated device since it was created or rebooted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Requests accepted, by kind.
    pub writes: u64,
    pub reads: u64,
    pub flushes: u64,
    /// Bytes moved by writes and reads that completed successfully.
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Requests failed by fault injection (`fail-ops`, an error rate, or a
    /// flush failing after an injected flush failure).
    pub errors_injected: u64,
    /// Misdirected and lost writes and corrupted reads: requests that
    /// reported success and did something else.
    pub silent_faults: u64,
    /// Requests refused at submission (invalid, queue full, offline).
    pub refused: u64,
    /// Bytes of completed writes in the volatile cache, not yet persistent.
    pub cached_bytes: u64,
    /// Bytes of memory holding the persistent image.
    pub stored_bytes: u64,
}

/// A simulated NVMe device. Clones are handles to the same device.
#[derive(Clone, Debug)]
pub struct SimDevice {
    shared: Arc<Shared>,
}

/// What the queues of a device share.
struct Shared {
    info: DeviceInfo,
    state: Mutex<State>,
}

impl fmt::Debug for Shared {
    /// The name and state only: the contents would drown any message.
    /// Never waits for the lock, so that it may be called while it is held.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("SimDevice");
        s.field("name", &self.info.name);
        if let Ok(state) = self.state.try_lock() {
            s.field("offline", &state.offline)
                .field("stats", &state.stats);
        }
        s.finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("a thread panicked while updating the simulated device")
    }
}

impl SimDevice {
    /// A blank (all zeroes), powered device.
    ///
    /// # Panics
    /// If the geometry or model is invalid: a block size that is not a power
    /// of two, zero capacity, queue depth or sector size, or an error rate
    /// outside [0, 1]. [`SimDevice::open`] reports these as errors instead.
    pub fn new(
        name: &str,
        block_size: u32,
        capacity_blocks: u64,
        queue_depth: u32,
        model: SimConfig,
    ) -> SimDevice {
        if let Some(problem) = invalid(block_size, capacity_blocks, queue_depth, &model) {
            panic!("simulated device {name}: {problem}");
        }
        let media = Media::new(block_size, model.volatile_cache);
        SimDevice::with_media(name, block_size, capacity_blocks, queue_depth, model, media)
    }

    /// A blank device as the device map describes it.
    pub fn open(cfg: &DeviceConfig) -> Result<SimDevice> {
        let unavailable = |why: String| DeviceError::Unavailable {
            device: cfg.name.clone(),
            backend: BackendKind::Sim.as_str(),
            why,
        };
        let BackendConfig::Sim(model) = &cfg.backend else {
            return Err(unavailable(format!(
                "the device map gives it the {} backend",
                cfg.kind()
            )));
        };
        let capacity = cfg.capacity_blocks();
        if let Some(problem) = invalid(cfg.block_size, capacity, cfg.queue_depth, model) {
            return Err(unavailable(problem));
        }
        Ok(SimDevice::new(
            &cfg.name,
            cfg.block_size,
            capacity,
            cfg.queue_depth,
            model.clone(),
        ))
    }

    fn with_media(
        name: &str,
        block_size: u32,
        capacity_blocks: u64,
        queue_depth: u32,
        model: SimConfig,
        media: Media,
    ) -> SimDevice {
        let info = DeviceInfo {
            name: name.to_string(),
            backend: BackendKind::Sim,
            block_size,
            capacity_blocks,
            queue_depth,
            // Block-size alignment (up to 4 KiB), as O_DIRECT demands of the
            // logical block size, so that engine code that passes here
            // passes on the kernel backends too.
            mem_align: (block_size as usize).min(DEFAULT_ALIGN),
            volatile_cache: model.volatile_cache,
        };
        let state = State::new(info.clone(), model, media);
        SimDevice {
            shared: Arc::new(Shared {
                info,
                state: Mutex::new(state),
            }),
        }
    }

    /// Replaces the device's fault plan from now on, as a test that sets
    /// up cleanly and then turns faults on does. Draws restart from a
    /// generator seeded with the model's seed and the next operation
    /// number, so a run stays reproducible; `latent-errors` are added to
    /// the blocks already bad.
    pub fn set_faults(&self, faults: SimFaults) {
        self.shared.lock().set_faults(faults);
    }

    /// Makes reads of blocks `lba..lba + blocks` fail until they are
    /// rewritten (fault model, item 12).
    pub fn add_latent_errors(&self, lba: u64, blocks: u64) {
        self.shared.lock().latent.extend(lba..lba + blocks);
    }

    /// Flips bit `bit` of byte `byte` of block `lba` at rest: in what reads
    /// see and in what survives a crash (fault model, item 13).
    pub fn corrupt_at_rest(&self, lba: u64, byte: usize, bit: u8) {
        let mut state = self.shared.lock();
        let bs = state.info.block_size as usize;
        let mut block = vec![0u8; bs];
        state.media.read(lba, &mut block);
        block[byte % bs] ^= 1 << (bit % 8);
        state.media.write_bufs_through(lba, &[&block]);
    }

    /// Copies block `from` over block `to` at rest, as a misdirected write
    /// of `from`'s data would have left it (fault model, item 11).
    pub fn misdirect_at_rest(&self, from: u64, to: u64) {
        let mut state = self.shared.lock();
        let bs = state.info.block_size as usize;
        let mut block = vec![0u8; bs];
        state.media.read(from, &mut block);
        state.media.write_bufs_through(to, &[&block]);
    }

    /// The device vanishes now, as a pulled drive (fault model, item 15):
    /// every request fails, and it stays gone across reboots.
    pub fn vanish(&self) {
        let mut state = self.shared.lock();
        state.vanished = true;
        state.go_offline(
            "the device vanished (fail-stop, as a pulled drive)".to_string(),
            true,
        );
    }

    /// A device that stands in for one that cannot be used (a missing
    /// file, a device of another appliance): `name`'s geometry, every
    /// request failing with `why`.
    pub fn absent(name: &str, block_size: u32, capacity_blocks: u64, why: String) -> SimDevice {
        let dev = SimDevice::new(
            name,
            block_size,
            capacity_blocks.max(1),
            1,
            SimConfig::default(),
        );
        {
            let mut state = dev.shared.lock();
            state.vanished = true;
            state.go_offline(why, true);
        }
        dev
    }

    /// Cuts the power now (fault model, item 8). Idempotent.
    pub fn cut_power(&self) {
        self.shared.lock().go_offline("power cut".to_string(), true);
    }

    /// Whether a failed flush makes every later flush fail until reboot
    /// (fault model, item 7); on by default. A rebooted device keeps the
    /// setting (but not the failure).
    pub fn set_sticky_flush_errors(&self, sticky: bool) {
        self.shared.lock().sticky_flush_errors = sticky;
    }

    /// False once the power was cut (or the device was rebooted away from).
    pub fn is_powered(&self) -> bool {
        self.shared.lock().offline.is_none()
    }

    /// Whether the device vanished (fail-stop): offline for good, while
    /// the others may run on.
    pub fn is_vanished(&self) -> bool {
        self.shared.lock().vanished
    }

    /// The device as it comes back after a power loss (fault model, item 9),
    /// with the crash's choices drawn from `seed`. Cuts the power first if
    /// it is still on. Leaves this device as it was, so several reboots with
    /// different seeds explore several outcomes of the same crash.
    ///
    /// The new device has the same name, geometry and model, except that it
    /// draws its faults from `seed` too and that `fail-ops` and
    /// `power-cut-at-op` are cleared (they name operation numbers, which
    /// restart at 0); error rates stay. Its counters start at zero.
    pub fn reboot(&self, seed: u64) -> SimDevice {
        let mut state = self.shared.lock();
        self.reboot_after_power_loss(&mut state, seed)
    }

    /// [`SimDevice::reboot`] with the lock held.
    fn reboot_after_power_loss(&self, state: &mut State, seed: u64) -> SimDevice {
        state.go_offline("power cut".to_string(), true);
        let mut image = state.media.durable().clone();
        let mut rng = crash_rng(seed);
        let at_risk = state.media.unflushed().map(|w| (w.lba, &w.data[..]));
        let in_flight = state.lost.iter().map(|w| (w.lba, &w.data[..]));
        let info = &self.shared.info;
        crash::settle(
            &mut image,
            at_risk.chain(in_flight),
            info.block_size,
            state.model.sector_size,
            &mut rng,
        );
        let model = rebooted_model(&state.model, seed);
        let media = Media::from_durable(image, info.block_size, model.volatile_cache);
        self.rebooted(state, model, media)
    }

    /// The device that comes back with `media`, keeping the settings of
    /// this one's `state`.
    fn rebooted(&self, state: &State, model: SimConfig, media: Media) -> SimDevice {
        let info = &self.shared.info;
        let new = SimDevice::with_media(
            &info.name,
            info.block_size,
            info.capacity_blocks,
            info.queue_depth,
            model,
            media,
        );
        new.set_sticky_flush_errors(state.sticky_flush_errors);
        {
            let mut s = new.shared.lock();
            s.latent = state.latent.clone();
            if state.vanished {
                // A pulled drive stays gone: it fails from its first request.
                s.model.faults.vanish_at_op = Some(0);
            }
        }
        new
    }

    /// The device as the next process finds it after this one crashed while
    /// the device kept power (fault model, item 10). This device goes
    /// offline, as the dead process's queues are gone. The new device is as
    /// after [`SimDevice::reboot`] (seed, faults, counters), but keeps every
    /// completed write, the unflushed ones still only in its volatile cache.
    ///
    /// A device that had lost power (see [`SimDevice::cut_power`]) cannot
    /// have kept its cache: then this is [`SimDevice::reboot`]`(seed)`.
    pub fn reboot_after_process_crash(&self, seed: u64) -> SimDevice {
        let mut state = self.shared.lock();
        if state.power_lost {
            return self.reboot_after_power_loss(&mut state, seed);
        }
        state.go_offline(
            "the process that used the device crashed".to_string(),
            false,
        );
        let mut media = state.media.clone();
        let mut rng = crash_rng(seed);
        for w in &state.lost {
            if crash::survives_process_crash(&mut rng) {
                if w.fua {
                    media.write_bufs_through(w.lba, &[&w.data]);
                } else {
                    media.write(w.lba, w.data.clone());
                }
            }
        }
        let model = rebooted_model(&state.model, seed);
        self.rebooted(&state, model, media)
    }

    /// Counters since creation or reboot.
    pub fn stats(&self) -> SimStats {
        let state = self.shared.lock();
        SimStats {
            cached_bytes: state.media.cached_bytes(),
            stored_bytes: state.media.durable().allocated_bytes(),
            ..state.stats.clone()
        }
    }

    /// What a read of `blocks` blocks at `lba` would return now (requests
    /// already due complete first).
    ///
    /// # Panics
    /// If the range is not on the device.
    pub fn visible_read(&self, lba: u64, blocks: u64) -> Vec<u8> {
        let mut out = self.range_buf(lba, blocks);
        let mut state = self.shared.lock();
        state.advance(Instant::now());
        state.media.read(lba, &mut out);
        out
    }

    /// What is persistent at `lba` now: what survives a crash if every write
    /// at risk is dropped.
    ///
    /// # Panics
    /// If the range is not on the device.
    pub fn durable_read(&self, lba: u64, blocks: u64) -> Vec<u8> {
        let mut out = self.range_buf(lba, blocks);
        let mut state = self.shared.lock();
        state.advance(Instant::now());
        state.media.read_durable(lba, &mut out);
        out
    }

    fn range_buf(&self, lba: u64, blocks: u64) -> Vec<u8> {
        let info = &self.shared.info;
        assert!(
            lba.checked_add(blocks)
                .is_some_and(|end| end <= info.capacity_blocks),
            "device {}: {blocks} blocks at LBA {lba} are past its {} blocks",
            info.name,
            info.capacity_blocks
        );
        vec![0; (blocks * u64::from(info.block_size)) as usize]
    }
}

impl Device for SimDevice {
    type Queue = SimQueue;

    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn open_queue(&self) -> Result<SimQueue> {
        Ok(SimQueue::new(Arc::clone(&self.shared)))
    }
}

fn crash_rng(seed: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(CRASH_STREAM);
    rng
}

/// The model of a device rebooted with `seed`: operation-numbered faults
/// cleared, rates kept.
fn rebooted_model(model: &SimConfig, seed: u64) -> SimConfig {
    let mut model = model.clone();
    model.seed = seed;
    model.faults.fail_ops.clear();
    model.faults.power_cut_at_op = None;
    model.faults.vanish_at_op = None;
    model
}

/// Why a device cannot be built with this geometry and model, if it cannot.
fn invalid(
    block_size: u32,
    capacity_blocks: u64,
    queue_depth: u32,
    model: &SimConfig,
) -> Option<String> {
    if !block_size.is_power_of_two() {
        return Some(format!("block size {block_size} is not a power of two"));
    }
    if capacity_blocks == 0 {
        return Some("capacity is less than one block".to_string());
    }
    if queue_depth == 0 {
        return Some("queue depth is 0".to_string());
    }
    if model.sector_size == 0 {
        return Some("sector-size is 0".to_string());
    }
    faults::check_rates(&model.faults)
}
