//! Workers: the threads that run the commands that wait (read-modify-write
//! commands wait for their stripes and their writes, WAITAOF for the log),
//! so that an event loop never does.
//!
//! A loop hands a worker the command with what it needs of the connection
//! ([`Job`]) and takes no further request of that connection until the
//! reply comes back; the reply goes back on the loop's channel, and the
//! loop is woken.

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam::channel;

use super::conn::{Conn, Job};
use super::resp::Reply;
use super::Shared;

/// A worker's reply, for the loop: the connection's slot, its client id
/// (a slot is reused once its connection is gone), the reply.
pub type Done = (usize, u64, Reply);

/// A job and where its reply goes.
pub struct Task {
    pub job: Job,
    pub slot: usize,
    pub back: Sender<Done>,
    pub waker: Arc<mio::Waker>,
}

/// The worker threads, fed from one queue.
pub struct Workers {
    tx: Option<channel::Sender<Task>>,
    threads: Vec<JoinHandle<()>>,
}

/// Workers, enough for many commands to share a group commit.
pub const WORKERS: usize = 32;

impl Workers {
    pub fn start(shared: &Arc<Shared>, n: usize) -> std::io::Result<Workers> {
        let (tx, rx) = channel::unbounded::<Task>();
        let mut w = Workers {
            tx: Some(tx),
            threads: Vec::new(),
        };
        for i in 0..n {
            let rx = rx.clone();
            let shared = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("stria-worker-{i}"))
                .stack_size(512 << 10)
                .spawn(move || {
                    for task in rx {
                        let id = task.job.client.id;
                        let r = Conn::run_job(&shared, task.job);
                        // A loop that has stopped takes no more replies.
                        if task.back.send((task.slot, id, r)).is_ok() {
                            let _ = task.waker.wake();
                        }
                    }
                })?;
            w.threads.push(t);
        }
        Ok(w)
    }

    /// A sender for the loops.
    pub fn sender(&self) -> channel::Sender<Task> {
        self.tx.clone().expect("workers running")
    }

    /// Ends the workers once the loops (which hold senders) are gone.
    pub fn stop(mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
