//! Which accepted requests fail.
//!
//! A request's fate is decided when it is accepted, from its operation
//! number (`fail-ops`) or a draw of the device's seeded generator against
//! the error rate of its kind. Draws happen in acceptance order, so a run
//! that submits the same requests in the same order fails the same ones.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::SimFaults;
use crate::device::IoKind;

/// The I/O fault plan of one device.
pub(super) struct Faults {
    rng: ChaCha8Rng,
    fail_ops: HashSet<u64>,
    read_rate: f64,
    write_rate: f64,
    flush_rate: f64,
}

impl Faults {
    pub(super) fn new(faults: &SimFaults, seed: u64) -> Faults {
        Faults {
            rng: ChaCha8Rng::seed_from_u64(seed),
            fail_ops: faults.fail_ops.iter().copied().collect(),
            read_rate: faults.read_error_rate,
            write_rate: faults.write_error_rate,
            flush_rate: faults.flush_error_rate,
        }
    }

    /// Why request number `op` of `kind` is to fail, or `None` if it is to
    /// succeed.
    pub(super) fn fate(&mut self, op: u64, kind: IoKind) -> Option<String> {
        if self.fail_ops.contains(&op) {
            return Some(format!("injected I/O error: fail-ops lists op {op}"));
        }
        let rate = match kind {
            IoKind::Read => self.read_rate,
            IoKind::Write => self.write_rate,
            IoKind::Flush => self.flush_rate,
        };
        (rate > 0.0 && self.rng.random_bool(rate))
            .then(|| format!("injected I/O error: {kind} error rate {rate} hit op {op}"))
    }
}

/// Why an error rate is not a probability, if it is not.
pub(super) fn check_rates(faults: &SimFaults) -> Option<String> {
    [
        ("read-error-rate", faults.read_error_rate),
        ("write-error-rate", faults.write_error_rate),
        ("flush-error-rate", faults.flush_error_rate),
    ]
    .into_iter()
    .find(|(_, rate)| !(0.0..=1.0).contains(rate))
    .map(|(name, rate)| format!("{name} {rate} is not a probability in [0, 1]"))
}
