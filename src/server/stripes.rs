//! Key stripes: plain writes in flight, and commands that read a key to
//! decide what to write.
//!
//! A plain write (SET without options) marks its stripe while it is in
//! flight and is not waited for before the next request; its reply waits.
//! A read-modify-write command (INCR, SET NX, HSET, DEL, ...) takes its
//! stripes exclusively: it holds back new plain writes, waits until those
//! in flight are acknowledged (and so visible), then reads and writes.
//!
//! A connection that must wait for a stripe first waits for its own writes
//! in flight ([`Stripes::plain`] says when), so no connection waits for a
//! stripe while holding back a write another connection waits for.

use std::sync::{Condvar, Mutex};

use xxhash_rust::xxh3::xxh3_64;

const STRIPES: usize = 4096;

#[derive(Default)]
struct State {
    /// Plain writes submitted and not yet acknowledged.
    inflight: u32,
    /// A read-modify-write command holds the stripe.
    exclusive: bool,
}

#[derive(Default)]
struct Stripe {
    state: Mutex<State>,
    cv: Condvar,
}

pub struct Stripes {
    s: Vec<Stripe>,
}

/// A plain write's mark on its stripe; [`Stripes::done`] takes it off.
#[derive(Debug)]
#[must_use]
pub struct PlainMark(usize);

/// Exclusive hold of some stripes, let go on drop.
pub struct Exclusive<'a> {
    stripes: &'a Stripes,
    held: Vec<usize>,
}

impl Stripes {
    pub fn new() -> Stripes {
        Stripes {
            s: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }

    pub fn of(&self, key: &[u8]) -> usize {
        (xxh3_64(key) % STRIPES as u64) as usize
    }

    /// Runs `submit` with the stripe of `key` marked as having a plain
    /// write in flight. When a read-modify-write holds the stripe, first
    /// calls `settle` (the connection waits for its own writes), then waits.
    pub fn plain<T, E>(
        &self,
        key: &[u8],
        settle: impl FnOnce(),
        submit: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, PlainMark), E> {
        let i = self.of(key);
        let stripe = &self.s[i];
        let mut st = stripe.state.lock().expect("stripe lock");
        if st.exclusive {
            drop(st);
            settle();
            st = stripe.state.lock().expect("stripe lock");
            while st.exclusive {
                st = stripe.cv.wait(st).expect("stripe lock");
            }
        }
        // Submitting under the lock keeps a read-modify-write from reading
        // between the check above and the mark below.
        let out = submit()?;
        st.inflight += 1;
        Ok((out, PlainMark(i)))
    }

    /// The plain write of `mark` is acknowledged (or failed).
    pub fn done(&self, mark: PlainMark) {
        let stripe = &self.s[mark.0];
        let mut st = stripe.state.lock().expect("stripe lock");
        st.inflight -= 1;
        if st.inflight == 0 {
            stripe.cv.notify_all();
        }
    }

    /// Takes the stripes of `keys` exclusively, in stripe order (so two
    /// commands never wait for each other in a cycle), once no plain write
    /// is in flight on them. The caller has no writes of its own in flight.
    pub fn exclusive<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> Exclusive<'a> {
        let mut held: Vec<usize> = keys.iter().map(|k| self.of(k.as_ref())).collect();
        held.sort_unstable();
        held.dedup();
        for &i in &held {
            let stripe = &self.s[i];
            let mut st = stripe.state.lock().expect("stripe lock");
            while st.exclusive {
                st = stripe.cv.wait(st).expect("stripe lock");
            }
            st.exclusive = true;
            while st.inflight > 0 {
                st = stripe.cv.wait(st).expect("stripe lock");
            }
        }
        Exclusive {
            stripes: self,
            held,
        }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        for &i in &self.held {
            let stripe = &self.stripes.s[i];
            stripe.state.lock().expect("stripe lock").exclusive = false;
            stripe.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_exclusive_hold_waits_for_plain_writes_and_holds_new_ones_back() {
        let s = Arc::new(Stripes::new());
        let ((), mark) = s.plain(b"k", || {}, || Ok::<(), ()>(())).unwrap();
        let got = Arc::new(AtomicBool::new(false));
        let t = {
            let (s, got) = (s.clone(), got.clone());
            std::thread::spawn(move || {
                let _x = s.exclusive(&[b"k"]);
                got.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !got.load(Ordering::SeqCst),
            "took the stripe with a write in flight"
        );
        s.done(mark);
        while !got.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Now a plain write must settle its own writes first, then wait.
        let mut settled = false;
        let ((), mark) = s
            .plain(b"k", || settled = true, || Ok::<(), ()>(()))
            .unwrap();
        assert!(settled);
        t.join().unwrap();
        s.done(mark);
    }
}
