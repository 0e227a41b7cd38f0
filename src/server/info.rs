//! Placeholder until the info module lands.
use super::metrics::ServerMetrics;
use crate::device::Device;
use crate::engine::Engine;
pub fn engine_sections<D: Device<Queue: Send> + Clone>(
    _e: &Engine<D>,
    _s: &ServerMetrics,
    _section: Option<&str>,
) -> String {
    String::new()
}
