//! Members of large sets that SPOP found ahead of its next pops.
//!
//! A pop of one member from a large set seeks to a random point of the
//! set's hash order: a descent of the memstore's B-tree and of each block
//! file, most of a pop's cost. So a seek reads a short run of members
//! from that point instead of one, and the pops that follow take the
//! rest of the run, each checked (another command may have removed it
//! meanwhile; a member added meanwhile is found by a later seek): most
//! often without a read, as the shard knows no write reached it since
//! the seek found it. A run is kept as the members' sub-keys, which the
//! pops delete. Members sit in hash order, so a run of them is
//! as random as the point it starts from; its members go out in a random
//! order.
//!
//! A run is kept under the set's key and version: a set deleted and made
//! again has a new version, and its old run is dropped when next asked.
//! What is kept is bounded: past [`MAX_SETS`] sets the run kept longest
//! ago goes.

use std::collections::HashMap;

use rand::seq::SliceRandom;

/// Members a seek reads for the pops that follow, for a set of `count`
/// members: a sixty-fourth of the set, at least 16 and at most 64. A seek
/// costs as much as a dozen pops; a run is at most 1/64 of the set, so
/// the pops that follow take neighbours of a random point from a set
/// that still has 63 times as many elsewhere.
pub fn run(count: u64) -> usize {
    (count / 64).clamp(16, 64) as usize
}

/// Sets whose runs are kept at most.
const MAX_SETS: usize = 64;

struct Run {
    version: u64,
    /// Sub-keys of the members not yet handed out, the next one last.
    members: Vec<Vec<u8>>,
    /// When it was kept ([`Draws::kept`] then), for the bound.
    kept: u64,
}

/// Runs of members found ahead, by set.
#[derive(Default)]
pub struct Draws {
    runs: HashMap<Vec<u8>, Run>,
    /// Runs kept so far.
    kept: u64,
}

impl Draws {
    /// The sub-key of the next member found ahead for set `key` at
    /// `version`, if any: it may have been removed since (the caller
    /// checks).
    pub fn take(&mut self, key: &[u8], version: u64) -> Option<Vec<u8>> {
        let run = self.runs.get_mut(key)?;
        if run.version != version {
            self.runs.remove(key);
            return None;
        }
        let next = run.members.pop();
        if run.members.is_empty() {
            self.runs.remove(key);
        }
        next
    }

    /// Keeps `members` (sub-keys) for the next pops of set `key` at `version`, in
    /// place of what was kept for it, to be handed out in a random order
    /// (the run is neighbours in hash order; the order within it need
    /// not be).
    pub fn keep(&mut self, key: &[u8], version: u64, mut members: Vec<Vec<u8>>) {
        if members.is_empty() {
            self.runs.remove(key);
            return;
        }
        members.shuffle(&mut rand::rng());
        self.kept += 1;
        let run = Run {
            version,
            members,
            kept: self.kept,
        };
        self.runs.insert(key.to_vec(), run);
        if self.runs.len() > MAX_SETS {
            // One look over a few dozen runs, only when one too many.
            let oldest = self.runs.iter().min_by_key(|(_, r)| r.kept);
            if let Some(k) = oldest.map(|(k, _)| k.clone()) {
                self.runs.remove(&k);
            }
        }
    }

    /// Sets with a run kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_run_is_handed_out_for_its_version_only() {
        let mut d = Draws::default();
        d.keep(b"s", 7, members(&["a", "b", "c"]));
        let first = d.take(b"s", 7).expect("a member of the run");
        assert!(members(&["a", "b", "c"]).contains(&first));
        assert_eq!(d.take(b"t", 7), None);
        // The set was made again: its old run is gone.
        assert_eq!(d.take(b"s", 8), None);
        assert_eq!(d.take(b"s", 7), None);
        d.keep(b"s", 8, members(&["x"]));
        assert_eq!(d.take(b"s", 8), Some(b"x".to_vec()));
        assert_eq!(d.len(), 0, "a run used up is dropped");
    }

    #[test]
    fn runs_of_many_sets_are_bounded() {
        let mut d = Draws::default();
        for i in 0..10 * MAX_SETS {
            d.keep(format!("s{i}").as_bytes(), 1, members(&["a", "b"]));
            // One set popped over and over keeps its run.
            d.keep(b"hot", 1, members(&["a", "b"]));
        }
        assert!(d.len() <= MAX_SETS, "{} runs", d.len());
        let last = format!("s{}", 10 * MAX_SETS - 1);
        assert!(d.take(last.as_bytes(), 1).is_some());
        assert!(d.take(b"hot", 1).is_some(), "the run kept last stays");
        assert!(d.take(b"s0", 1).is_none(), "the oldest went");
    }
}
