//! Reactors: pinned poll-mode threads (placeholder until the reactor module lands).

/// The cores this process may run on.
pub fn allowed_cores() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}
