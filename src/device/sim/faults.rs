//! Which accepted requests fail, and which go wrong silently.
//!
//! A request's fate is decided when it is accepted, from its operation
//! number (`fail-ops`) or draws of the device's seeded generator against
//! the rates of its kind. Draws happen in acceptance order, so a run that
//! submits the same requests in the same order gets the same fates. The
//! error draw comes first and the silent faults are drawn only when their
//! rate is set, so seeds that set none keep the fates they always had.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::SimFaults;
use crate::device::IoKind;

/// What happens to an accepted request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// It does what it says.
    Normal,
    /// It completes with an I/O error and changes nothing.
    Fail(String),
    /// A write that reports success but lands at this LBA instead.
    Misdirect(u64),
    /// A write that reports success and writes nothing.
    Lose,
    /// A read whose data comes back with one bit flipped: bit `bit` of
    /// byte `byte` of the data (modulo its length).
    Corrupt { byte: u64, bit: u8 },
}

/// The I/O fault plan of one device.
pub(super) struct Faults {
    rng: ChaCha8Rng,
    fail_ops: HashSet<u64>,
    read_rate: f64,
    write_rate: f64,
    flush_rate: f64,
    misdirect_rate: f64,
    lost_rate: f64,
    corrupt_rate: f64,
}

impl Faults {
    pub(super) fn new(faults: &SimFaults, seed: u64) -> Faults {
        Faults {
            rng: ChaCha8Rng::seed_from_u64(seed),
            fail_ops: faults.fail_ops.iter().copied().collect(),
            read_rate: faults.read_error_rate,
            write_rate: faults.write_error_rate,
            flush_rate: faults.flush_error_rate,
            misdirect_rate: faults.misdirect_rate,
            lost_rate: faults.lost_write_rate,
            corrupt_rate: faults.corrupt_read_rate,
        }
    }

    /// The fate of request number `op` of `kind`, `blocks` long, on a
    /// device of `capacity` blocks.
    pub(super) fn fate(&mut self, op: u64, kind: IoKind, blocks: u64, capacity: u64) -> Fate {
        if self.fail_ops.contains(&op) {
            return Fate::Fail(format!("injected I/O error: fail-ops lists op {op}"));
        }
        let rate = match kind {
            IoKind::Read => self.read_rate,
            IoKind::Write => self.write_rate,
            IoKind::Flush => self.flush_rate,
        };
        if rate > 0.0 && self.rng.random_bool(rate) {
            return Fate::Fail(format!(
                "injected I/O error: {kind} error rate {rate} hit op {op}"
            ));
        }
        match kind {
            IoKind::Write => {
                if self.misdirect_rate > 0.0 && self.rng.random_bool(self.misdirect_rate) {
                    let span = capacity.saturating_sub(blocks).max(1);
                    return Fate::Misdirect(self.rng.random_range(0..span));
                }
                if self.lost_rate > 0.0 && self.rng.random_bool(self.lost_rate) {
                    return Fate::Lose;
                }
            }
            IoKind::Read => {
                if self.corrupt_rate > 0.0 && self.rng.random_bool(self.corrupt_rate) {
                    return Fate::Corrupt {
                        byte: self.rng.random(),
                        bit: self.rng.random_range(0..8),
                    };
                }
            }
            IoKind::Flush => {}
        }
        Fate::Normal
    }
}

/// Why a rate is not a probability, if one is not.
pub(super) fn check_rates(faults: &SimFaults) -> Option<String> {
    [
        ("read-error-rate", faults.read_error_rate),
        ("write-error-rate", faults.write_error_rate),
        ("flush-error-rate", faults.flush_error_rate),
        ("misdirect-rate", faults.misdirect_rate),
        ("lost-write-rate", faults.lost_write_rate),
        ("corrupt-read-rate", faults.corrupt_read_rate),
    ]
    .into_iter()
    .find(|(_, rate)| !(0.0..=1.0).contains(rate))
    .map(|(name, rate)| format!("{name} {rate} is not a probability in [0, 1]"))
}
