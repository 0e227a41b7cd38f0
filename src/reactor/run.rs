//! The reactor loop: poll, drain the ring, then spin, park or go round again.

use std::hint;
use std::io;
use std::time::{Duration, Instant};

use super::channel::Inbound;
use super::counters::Counters;
use super::park::Parker;
use super::work::Work;
use crate::config::IdlePolicy;
use crate::device::WaitHint;

/// Runs `work` until a stop is requested, then handles the messages left in
/// the ring and calls [`Work::finish`]. Returns an error only when parking
/// fails.
pub(super) fn run<W: Work>(
    work: &mut W,
    inbound: &Inbound<W::Msg>,
    counters: &Counters,
    idle: IdlePolicy,
    spin: Duration,
) -> io::Result<()> {
    // One iteration handles at most a ring's worth of messages, so a flood
    // of messages cannot starve device completions.
    let batch = inbound.capacity();
    let mut parker = Parker::default();
    let mut hints: Vec<WaitHint> = Vec::new();
    let mut last = Instant::now();
    let mut idle_since: Option<Instant> = None;

    while !inbound.stop_requested() {
        let progress = work.poll();
        let mut messages = 0;
        while messages < batch && work.accepting() {
            let Some(msg) = inbound.pop() else { break };
            work.handle(msg);
            messages += 1;
        }

        // One clock read per iteration; its time goes to busy or idle
        // according to what the iteration did.
        let now = Instant::now();
        let elapsed = nanos(now - last);
        last = now;
        counters.iterations.add(1);
        counters.messages.add(messages as u64);
        counters.completions.add(progress.completions as u64);
        counters.work.add(progress.work as u64);
        if messages > 0 || !progress.is_idle() {
            counters.busy_ns.add(elapsed);
            idle_since = None;
            continue;
        }
        counters.idle_ns.add(elapsed);

        match idle {
            IdlePolicy::Poll => hint::spin_loop(),
            IdlePolicy::Park => {
                let since = *idle_since.get_or_insert(now);
                if now - since < spin {
                    hint::spin_loop();
                    continue;
                }
                hints.clear();
                work.wait_hints(&mut hints);
                let accepting = work.accepting();
                parker.park(
                    &inbound.doorbell,
                    &hints,
                    || accepting && inbound.pending(),
                    counters,
                )?;
                // Parked time is idle time, whatever woke the reactor; the
                // iteration that follows is measured from here.
                let woke = Instant::now();
                let parked = nanos(woke - now);
                counters.idle_ns.add(parked);
                counters.parked_ns.add(parked);
                last = woke;
            }
        }
    }

    inbound.close();
    let mut left = 0u64;
    while let Some(msg) = inbound.pop() {
        work.handle(msg);
        left += 1;
    }
    counters.messages.add(left);
    work.finish();
    Ok(())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
