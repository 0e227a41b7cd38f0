//! Placeholder until the metrics module lands.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::device::Device;
use crate::engine::Engine;

pub struct ServerMetrics;
impl ServerMetrics {
    pub fn new() -> ServerMetrics {
        ServerMetrics
    }
    pub fn connection_opened(&self) {}
    pub fn connection_closed(&self) {}
    pub fn connection_rejected(&self) {}
    pub fn command(&self, _n: &str, _l: Duration, _e: bool) {}
    pub fn bytes_in(&self, _n: u64) {}
    pub fn bytes_out(&self, _n: u64) {}
    pub fn protocol_error(&self) {}
    pub fn auth_failure(&self) {}
}
pub struct ShutdownHandle;
impl ShutdownHandle {
    pub fn stop(&self) {}
}
pub fn render_prometheus<D: Device<Queue: Send> + Clone>(
    _e: &Engine<D>,
    _s: &ServerMetrics,
) -> String {
    String::new()
}
pub fn spawn_endpoint(
    _a: SocketAddr,
    _r: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>, ShutdownHandle)> {
    unimplemented!()
}
