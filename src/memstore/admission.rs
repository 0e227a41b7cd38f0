//! Writes admitted to a memstore and not yet inserted: who inserts them,
//! and what a flush that must wait for them reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::wal::Ticket;

/// Writes admitted to a memstore that can be inserted by someone other
/// than their writer once the WAL acknowledged them: a flush that waits
/// for a memstore's pending writes asks them, so a writer that holds
/// acknowledged writes without waiting for them cannot hold a flush up.
pub trait Inserter: Send + Sync {
    /// Inserts the writes if they are acknowledged; otherwise nothing.
    fn insert_acknowledged(&self);
}

/// Writes admitted to a memstore in one turn under its region's lock:
/// their WAL tickets, in the order they were appended (so in LSN order),
/// and how many of them are inserted. Their writer inserts them in that
/// order, so the inserted ones are always the first ones. A flush reads it
/// to learn which writes it must wait for: those whose LSN is at or below
/// the mark it records.
pub struct Admission {
    tickets: Vec<Ticket>,
    inserted: AtomicUsize,
}

impl Admission {
    pub fn new(tickets: Vec<Ticket>) -> Arc<Admission> {
        Arc::new(Admission {
            tickets,
            inserted: AtomicUsize::new(0),
        })
    }

    pub fn tickets(&self) -> &[Ticket] {
        &self.tickets
    }

    /// How many of the writes are inserted (or failed).
    pub fn inserted(&self) -> usize {
        self.inserted.load(Ordering::Acquire)
    }

    /// The next write is inserted (or failed): call after the insert, so
    /// whoever sees the count sees the entry.
    pub fn advance(&self) {
        self.advance_by(1);
    }

    /// The next `n` writes are inserted (or failed), as
    /// [`Admission::advance`].
    pub fn advance_by(&self, n: usize) {
        self.inserted.fetch_add(n, Ordering::Release);
    }

    pub(super) fn is_done(&self) -> bool {
        self.inserted() >= self.tickets.len()
    }

    /// Whether every write with an LSN at or below `lsn` is inserted. A
    /// write the WAL has given no LSN yet will get one above every LSN
    /// given so far; the caller reads `lsn` from a watermark first, so
    /// every LSN at or below it is seen as given (see [`Ticket::lsn`]).
    pub(super) fn inserted_through(&self, lsn: u64) -> bool {
        match self.tickets.get(self.inserted()) {
            None => true,
            Some(t) => t.lsn().is_none_or(|l| l > lsn),
        }
    }
}

/// The shortest list of admissions that is trimmed of finished ones.
pub(super) const TRIM_AT: usize = 64;
