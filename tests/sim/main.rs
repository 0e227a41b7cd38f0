//! Tests of the simulated device through its public API: `io` for requests,
//! timing and fault injection, `crash` for power cuts and what survives them.

mod crash;
mod faults;
mod io;

use std::time::Instant;

use stria::config::SimConfig;
use stria::device::sim::{SimDevice, SimQueue};
use stria::device::{Completion, Device, IoBuf, Queue, Request, WaitHint};

pub const BS: usize = 4096;

/// A model in which every request completes at the next poll.
pub fn instant() -> SimConfig {
    SimConfig {
        write_us: 0,
        read_us: 0,
        flush_us: 0,
        bandwidth: 0,
        ..SimConfig::default()
    }
}

/// A 64-block device of 4 KiB blocks with queue depth 8.
pub fn device(model: SimConfig) -> SimDevice {
    SimDevice::new("d0", BS as u32, 64, 8, model)
}

/// `blocks` blocks filled with `fill`.
pub fn filled(fill: u8, blocks: usize) -> IoBuf {
    let mut buf = IoBuf::new(blocks * BS);
    buf.fill(fill);
    buf
}

/// Submits `req` and waits for its completion (sleeping, never spinning,
/// until its deadline).
pub fn run(q: &mut SimQueue, req: Request) -> Completion {
    q.submit(req).expect("accepted");
    wait_one(q)
}

/// Waits for the next completion on `q`.
pub fn wait_one(q: &mut SimQueue) -> Completion {
    let mut out = wait_for(q, 1);
    assert_eq!(out.len(), 1, "one completion at a time");
    out.pop().unwrap()
}

/// Waits until at least `n` completions have come from `q`, sleeping to
/// each deadline; returns them in completion order.
pub fn wait_for(q: &mut SimQueue, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < n {
        if q.poll(&mut out) > 0 {
            continue;
        }
        match q.wait_hint() {
            WaitHint::Deadline(due) => {
                std::thread::sleep(due.saturating_duration_since(Instant::now()))
            }
            WaitHint::Ready => {}
            other => panic!("waiting with nothing to wait for: {other:?}"),
        }
    }
    out
}

/// Writes `buf` at `lba` and checks it completed.
pub fn write(q: &mut SimQueue, lba: u64, buf: IoBuf) {
    let c = run(q, Request::write(lba, lba, vec![buf]));
    c.result.expect("write succeeds");
}

/// Flushes and checks it completed.
pub fn flush(q: &mut SimQueue) {
    run(q, Request::flush(u64::MAX))
        .result
        .expect("flush succeeds");
}

/// Reads `blocks` blocks at `lba` through the queue.
pub fn read(q: &mut SimQueue, lba: u64, blocks: usize) -> Vec<u8> {
    let c = run(q, Request::read(lba, lba, vec![IoBuf::new(blocks * BS)]));
    c.result.expect("read succeeds");
    c.bufs[0].to_vec()
}

/// Opens a queue, which cannot fail on a simulated device.
pub fn queue(dev: &SimDevice) -> SimQueue {
    dev.open_queue().expect("sim queues always open")
}
