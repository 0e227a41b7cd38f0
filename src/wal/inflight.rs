//! The batches the WAL reactor has written and not yet acknowledged at
//! every level, and where each of their copies stands.
//!
//! With `wal.copies: N` a batch goes to N devices of the stripe, each copy
//! with its own state. The batch is as far as its least advanced copy: it
//! is written once every copy's write completed, durable once every copy is
//! on stable media. A copy on a device the WAL lost is dropped, so the
//! batch then stands on the copies left (degraded mode).

use std::time::Instant;

use super::Lsn;

/// How far a batch, or one copy of it, has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum State {
    Writing,
    Written,
    Durable,
}

/// A batch written (or being written) to one or more devices.
#[derive(Debug)]
pub(super) struct Batch {
    pub id: u64,
    pub last: Lsn,
    /// Written with forced unit access where the device has a volatile
    /// cache: durable when the write completes.
    pub fua: bool,
    /// When its writes were submitted.
    pub sent: Instant,
    /// Each copy: the stripe position of its device, and its state.
    pub copies: Vec<(usize, State)>,
}

impl Batch {
    /// The state of its least advanced copy; `Writing` with none left (the
    /// WAL fails before that can be acknowledged).
    pub fn state(&self) -> State {
        self.copies
            .iter()
            .map(|&(_, s)| s)
            .min()
            .unwrap_or(State::Writing)
    }

    /// Moves the copy on device `dev` to `state`.
    pub fn set(&mut self, dev: usize, state: State) {
        if let Some(c) = self.copies.iter_mut().find(|(d, _)| *d == dev) {
            c.1 = state;
        }
    }

    /// Drops the copy on device `dev`; false when no copy is left.
    pub fn drop_copy(&mut self, dev: usize) -> bool {
        self.copies.retain(|&(d, _)| d != dev);
        !self.copies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(copies: &[usize]) -> Batch {
        Batch {
            id: 0,
            last: 1,
            fua: false,
            sent: Instant::now(),
            copies: copies.iter().map(|&d| (d, State::Writing)).collect(),
        }
    }

    #[test]
    fn a_batch_is_as_far_as_its_least_advanced_copy() {
        let mut b = batch(&[0, 1]);
        b.set(0, State::Durable);
        assert_eq!(b.state(), State::Writing);
        b.set(1, State::Written);
        assert_eq!(b.state(), State::Written);
        b.set(1, State::Durable);
        assert_eq!(b.state(), State::Durable);
    }

    #[test]
    fn a_lost_copy_leaves_the_batch_on_the_others() {
        let mut b = batch(&[0, 1]);
        b.set(0, State::Durable);
        assert!(b.drop_copy(1));
        assert_eq!(b.state(), State::Durable);
        assert!(!b.drop_copy(0));
        assert_eq!(b.state(), State::Writing);
    }
}
