//! The hook that watches a running script: past busy-reply-threshold, it
//! answers the shard's other clients (`BUSY`; SCRIPT KILL or FUNCTION
//! KILL stop a script that has not written; SHUTDOWN NOSAVE ends the
//! server), as Redis's event loop does meanwhile.
//!
//! It is set once on a Lua state, and again only after something else
//! replaced it (a kill, FUNCTION LOAD's timeout): setting a hook for each
//! run made and dropped a boxed closure and two host calls per script.
//! Between runs it finds nothing to watch and lets Lua go on.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, VmState};

use crate::server::resp::Limits;
use crate::server::shard::busy::{Busy, Running, Verdict};

/// How often a script past busy-reply-threshold answers the other clients.
const BUSY_POLL: Duration = Duration::from_millis(2);

/// Instructions between two looks at the clock.
const EVERY: u32 = 100_000;

/// The run under watch.
pub struct Watch {
    pub started: Instant,
    /// busy-reply-threshold.
    pub limit: Duration,
    /// Whether the script wrote (then only SHUTDOWN NOSAVE stops it).
    pub wrote: Rc<Cell<bool>>,
    pub busy: Rc<Busy>,
    pub limits: Limits,
    /// Whether the default user is open (no AUTH needed).
    pub open: bool,
    /// A function (FCALL) rather than an EVAL script.
    pub function: bool,
    /// What FUNCTION STATS shows once the script is past the threshold.
    pub running: Option<Running>,
    /// When the other clients were last answered.
    pub last: Option<Instant>,
    /// The script was killed: its hook is now one that fails every
    /// instruction, and this one must be set again after it.
    pub killed: bool,
}

/// The run a state's hook watches (`None` between runs).
pub type Watched = Rc<RefCell<Option<Watch>>>;

/// The error that stops a killed script.
pub fn killed_error(function: bool) -> mlua::Error {
    let by = if function {
        "FUNCTION KILL"
    } else {
        "SCRIPT KILL"
    };
    mlua::Error::runtime(format!("Script killed by user with {by}..."))
}

/// Sets the watching hook on `lua`.
pub fn install(lua: &Lua, watched: &Watched) {
    let watched = watched.clone();
    let _ = lua.set_hook(
        HookTriggers::new().every_nth_instruction(EVERY),
        move |lua, _| {
            let mut slot = watched.borrow_mut();
            let Some(w) = slot.as_mut() else {
                return Ok(VmState::Continue);
            };
            let now = Instant::now();
            if now.duration_since(w.started) <= w.limit
                || w.last.is_some_and(|t| now.duration_since(t) < BUSY_POLL)
            {
                return Ok(VmState::Continue);
            }
            if let Some(r) = w.running.take() {
                w.busy.set_running(Some(r));
            }
            w.last = Some(now);
            if w.busy.serve(w.limits, w.open, w.function, w.wrote.get()) == Verdict::Continue {
                return Ok(VmState::Continue);
            }
            // Killed: from now on every instruction fails, so a pcall in
            // the script cannot swallow the kill.
            w.killed = true;
            let killed = killed_error(w.function);
            let again = killed.clone();
            let _ = lua.set_hook(HookTriggers::new().every_nth_instruction(1), move |_, _| {
                Err(again.clone())
            });
            Err(killed)
        },
    );
}

/// Ends the watch of a run, and sets the hook again if a kill replaced it.
pub fn end(lua: &Lua, watched: &Watched) {
    let killed = watched.borrow_mut().take().is_some_and(|w| w.killed);
    if killed {
        install(lua, watched);
    }
}
