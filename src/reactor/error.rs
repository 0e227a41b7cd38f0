//! Errors of the reactor layer.

use std::io;

use super::affinity::core_list;

/// Why a reactor could not start, or how it ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ReactorError {
    /// The configuration names a core this process may not run on.
    #[error("reactor {name}: core {core} is not one this process may run on (allowed: {})", core_list(.allowed))]
    CoreNotAllowed {
        name: String,
        core: usize,
        allowed: Vec<usize>,
    },

    /// The kernel refused to pin the reactor thread to its core.
    #[error("reactor {name}: cannot pin its thread to core {core}: {source}")]
    Pin {
        name: String,
        core: usize,
        #[source]
        source: io::Error,
    },

    /// A reactor needs room for at least one inbound message.
    #[error("reactor {name}: ring capacity must be at least 1")]
    ZeroCapacity { name: String },

    /// The eventfd that wakes a parked reactor could not be created.
    #[error("reactor {name}: cannot create its wake-up eventfd: {source}")]
    Doorbell {
        name: String,
        #[source]
        source: io::Error,
    },

    /// The OS refused to start the thread.
    #[error("reactor {name}: cannot start its thread: {source}")]
    Thread {
        name: String,
        #[source]
        source: io::Error,
    },

    /// The closure that builds the reactor's work panicked.
    #[error("reactor {name}: building its work panicked: {message}")]
    StartPanicked { name: String, message: String },

    /// The reactor thread panicked while running.
    #[error("reactor {name}: panicked: {message}")]
    Panicked { name: String, message: String },

    /// Sleeping failed for a reason other than a signal, such as a wait-hint
    /// fd that is not open.
    #[error("reactor {name}: cannot park: {source}")]
    Park {
        name: String,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = ReactorError> = std::result::Result<T, E>;

/// The message of a panic payload, as `panic!` formats it.
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}
