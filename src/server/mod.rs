//! The appliance server: RESP (the Redis protocol) over TCP on the engine.
//!
//! One shard reactor (an event-loop thread, epoll through mio) serves
//! every connection, Redis-style, and runs every command to completion on
//! the shard's state ([`shard`]); an acceptor thread hands it new
//! connections. A write is applied to the shard at once, so the next
//! command on its key sees it at memory speed, and goes to the WAL with
//! the rest of the turn's; every reply leaves only once the writes it
//! reveals are acknowledged at their levels, so what a client was told
//! survives as promised. Replies go out in order; a pipeline's writes,
//! and those of every connection, share the WAL's group commit.

mod acl;
mod clock;
mod cmd;
mod command;
mod command_info;
mod compaction;
mod conn;
mod event;
mod expiry;
pub mod glob;
mod help;
pub mod info;
pub mod keys;
mod keyspecs;
mod meta;
pub mod metrics;
mod monitor;
mod multi;
mod notify;
mod pubsub;
mod replace;
pub mod resp;
mod run;
mod script;
mod settings;
mod shard;
#[cfg(test)]
mod simulator;
mod subcommands;
mod sweep;
mod table;
mod tracking;

pub use run::serve;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{Config, Durability};
use crate::device::AnyDevice;
use crate::engine::{Engine, EngineStats};

use metrics::ServerMetrics;

/// The engine the server runs on.
pub type ServerEngine = Engine<AnyDevice>;

/// What the server takes from the device map.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub listen: SocketAddr,
    pub password: Option<String>,
    pub max_clients: usize,
    pub limits: resp::Limits,
    pub durability: Durability,
    /// The longest engine key (`memstore.max-key`).
    pub max_key: usize,
    /// The longest value (`memstore.max-value`).
    pub max_value: usize,
    pub metrics: Option<SocketAddr>,
    /// Bytes of the shard's row cache (`server.row-cache`).
    pub row_cache: u64,
    /// The shard submits the WAL's batches itself (`wal.submit: shard`).
    pub wal_on_shard: bool,
    /// The map's file name, for INFO.
    pub config_file: String,
    /// The device map, for a device replaced while serving (`None`: the
    /// server was not started from one).
    pub map: Option<Arc<Config>>,
}

impl ServerOptions {
    /// The most all connections' request buffers may hold together beyond
    /// their first 64 KiB each: four requests of `max-query`, at least 1 GiB.
    pub fn buffer_budget(&self) -> usize {
        (4 * self.limits.max_query).max(1 << 30)
    }

    pub fn from_config(cfg: &Config) -> ServerOptions {
        let s = &cfg.server;
        ServerOptions {
            listen: s.listen,
            password: s.password.clone(),
            max_clients: s.max_clients,
            limits: resp::Limits {
                max_bulk: s.max_bulk as usize,
                max_query: s.max_query as usize,
            },
            durability: cfg.wal.durability,
            max_key: cfg.memstore.max_key as usize,
            max_value: cfg.memstore.max_value as usize,
            metrics: s.metrics,
            row_cache: s.row_cache,
            wal_on_shard: cfg.wal.submit == crate::config::WalSubmit::Shard,
            config_file: cfg.source.clone(),
            map: Some(Arc::new(cfg.clone())),
        }
    }
}

/// A connected client, as CLIENT LIST and INFO show it.
pub struct Client {
    pub id: u64,
    pub addr: SocketAddr,
    pub local: SocketAddr,
    pub since: Instant,
    /// Milliseconds since `since` of the last command.
    last_active: AtomicU64,
    pub name: Mutex<Vec<u8>>,
    /// The ACL user it is authenticated as.
    pub user: Mutex<String>,
    /// Index in the command table of the last command; `usize::MAX`: none.
    pub last_command: AtomicUsize,
    pub proto: AtomicU8,
    /// CLIENT LIST's flags: CLIENT TRACKING's ([`tracking::FLAG_TRACKING`])
    /// and MONITOR's ([`monitor::FLAG_MONITOR`]).
    pub flags: AtomicU8,
}

impl Client {
    /// A client with no socket: the commands of a test.
    #[cfg(test)]
    pub fn detached(id: u64) -> Client {
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        Client {
            id,
            addr,
            local: addr,
            since: Instant::now(),
            last_active: AtomicU64::new(0),
            name: Mutex::new(Vec::new()),
            user: Mutex::new("default".into()),
            last_command: AtomicUsize::new(usize::MAX),
            proto: AtomicU8::new(2),
            flags: AtomicU8::new(0),
        }
    }
}

/// What every connection shares.
pub struct Shared {
    pub engine: ServerEngine,
    pub opts: ServerOptions,
    pub metrics: ServerMetrics,
    pub started: Instant,
    /// The address the server listens on (the real port when 0 was asked).
    pub local_addr: SocketAddr,
    clients: Mutex<HashMap<u64, Arc<Client>>>,
    next_client: AtomicU64,
    cursors: Mutex<Cursors>,
    stopping: AtomicBool,
    stop_signal: Mutex<bool>,
    stop_cv: Condvar,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub settings: settings::Settings,
    /// The ACL users.
    pub acl: acl::Acl,
    pub versions: clock::Versions,
    pub clock: clock::Clock,
    /// Keys of a version below this are dead (FLUSHALL, [`keys::FLOOR`]).
    pub floor: AtomicU64,
    /// Bytes connections' request buffers hold beyond their first chunk.
    buffered: AtomicUsize,
}

/// SCAN cursors: a number for the client, the engine key to go on from.
#[derive(Default)]
struct Cursors {
    next: u64,
    open: VecDeque<(u64, Vec<u8>)>,
}

/// The Redis version the server says it speaks (HELLO, INFO): clients pick
/// features by it.
pub const REDIS_VERSION: &str = "7.2.0";

/// At most this many SCAN cursors are kept; the oldest go first.
const MAX_CURSORS: usize = 16 * 1024;

impl Shared {
    /// The state of a server on `engine`: its keyspace checked and opened
    /// ([`open_keyspace`]), the compaction filter installed.
    pub fn new(
        engine: ServerEngine,
        opts: ServerOptions,
        local_addr: SocketAddr,
    ) -> io::Result<Shared> {
        let (versions, clock, floor) = open_keyspace(&engine).map_err(io::Error::other)?;
        let acl = acl::Acl::open(&engine, opts.password.as_deref()).map_err(io::Error::other)?;
        engine.set_compaction_filter(compaction::filter());
        Ok(Shared {
            engine,
            // Counted by the server's own command table: the generic list
            // of `ServerMetrics::new` lacks the hash commands, WAITAOF and
            // STRIA.DURABILITY, which would all count as `unknown`.
            metrics: ServerMetrics::with_commands(
                &table::COMMANDS.iter().map(|c| c.name).collect::<Vec<_>>(),
            ),
            started: Instant::now(),
            local_addr,
            clients: Mutex::new(HashMap::new()),
            next_client: AtomicU64::new(1),
            cursors: Mutex::new(Cursors::default()),
            stopping: AtomicBool::new(false),
            stop_signal: Mutex::new(false),
            stop_cv: Condvar::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            settings: settings::Settings::new(
                &opts,
                local_addr.port(),
                local_addr.ip().to_string(),
            ),
            acl,
            versions,
            clock,
            floor: AtomicU64::new(floor),
            buffered: AtomicUsize::new(0),
            opts,
        })
    }

    /// Asks the server to stop (SHUTDOWN, a signal).
    pub fn request_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        *self.stop_signal.lock().expect("stop lock") = true;
        self.stop_cv.notify_all();
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub fn clients(&self) -> Vec<Arc<Client>> {
        let mut v: Vec<_> = self
            .clients
            .lock()
            .expect("clients lock")
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// A connection has ended: out of the registry.
    fn forget(&self, client: &Client) {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&client.id);
        self.metrics.connection_closed();
    }

    fn save_cursor(&self, from: Vec<u8>) -> u64 {
        let mut c = self.cursors.lock().expect("cursor lock");
        c.next += 1;
        let id = c.next;
        c.open.push_back((id, from));
        if c.open.len() > MAX_CURSORS {
            c.open.pop_front();
        }
        id
    }

    /// Where cursor `id` goes on from. A cursor may be used again, as in
    /// Redis; the oldest are forgotten once [`MAX_CURSORS`] are open.
    fn cursor(&self, id: u64) -> Option<Vec<u8>> {
        let c = self.cursors.lock().expect("cursor lock");
        c.open
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, k)| k.clone())
    }
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    loops: Vec<event::LoopHandle>,
    metrics: Option<(SocketAddr, JoinHandle<()>, metrics::ShutdownHandle)>,
}

impl Server {
    /// Binds the listener (and the metrics endpoint) and starts accepting.
    pub fn start(engine: ServerEngine, opts: ServerOptions) -> io::Result<Server> {
        let listener = TcpListener::bind(opts.listen).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot listen on {}: {e}", opts.listen))
        })?;
        let local_addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(engine, opts, local_addr)?);
        let metrics = match shared.opts.metrics {
            Some(addr) => {
                let s = shared.clone();
                let render: Arc<dyn Fn() -> String + Send + Sync> =
                    Arc::new(move || metrics::render_prometheus(&s.engine, &s.metrics));
                Some(metrics::spawn_endpoint(addr, render).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot serve metrics on {addr}: {e}"))
                })?)
            }
            None => None,
        };
        // One shard: every key is its own, so commands on any keys run
        // serially, to completion, with no lock (see ARCHITECTURE.md).
        let mut loops = Vec::new();
        let mut handoff = Vec::new();
        let parts = event::Parts::new().map_err(|e| {
            io::Error::new(e.kind(), format!("cannot start the shard reactor: {e}"))
        })?;
        let (handle, tx) = event::spawn(shared.clone(), 0, parts).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot start the shard reactor: {e}"))
        })?;
        handoff.push((tx, handle.waker.clone()));
        loops.push(handle);
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("stria-accept".into())
            .spawn(move || accept_loop(&s, listener, handoff));
        let acceptor = match acceptor {
            Ok(a) => a,
            Err(e) => {
                stop_loops(&shared, loops);
                return Err(e);
            }
        };
        Ok(Server {
            shared,
            acceptor: Some(acceptor),
            loops,
            metrics,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Where `/metrics` is served, when it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|m| m.0)
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Blocks until SHUTDOWN or [`Shared::request_stop`].
    pub fn wait(&self) {
        let mut stop = self.shared.stop_signal.lock().expect("stop lock");
        while !*stop {
            stop = self.shared.stop_cv.wait(stop).expect("stop lock");
        }
    }

    /// Stops cleanly: no new connections; each loop answers the requests
    /// it has read (sending for up to 10 s to clients that read slowly) and
    /// closes its connections; then the log is made durable, the
    /// memstores are flushed (so the next start replays nothing) and the
    /// devices are closed.
    pub fn stop(self) -> Result<EngineStats, String> {
        let Server {
            shared,
            mut acceptor,
            loops,
            mut metrics,
        } = self;
        shared.request_stop();
        // Wake the acceptor, which checks the flag after each accept.
        let _ = TcpStream::connect_timeout(&wakeup(shared.local_addr), Duration::from_secs(1));
        if let Some(a) = acceptor.take() {
            let _ = a.join();
        }
        // No write lands after the loops are done: the log is made
        // durable after.
        stop_loops(&shared, loops);
        if let Some((_, handle, stop)) = metrics.take() {
            stop.shutdown();
            let _ = handle.join();
        }
        let engine_ref = &shared.engine;
        engine_ref
            .wal()
            .barrier()
            .map_err(|e| e.to_string())
            .and_then(|t| t.wait().map_err(|e| e.to_string()))
            .map_err(|e| format!("making the log durable: {e}"))?;
        engine_ref
            .flush_all()
            .map_err(|e| format!("flushing the memstores: {e}"))?;
        // The metrics endpoint's threads may still hold theirs for a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut shared = shared;
        let inner = loop {
            match Arc::try_unwrap(shared) {
                Ok(s) => break s,
                Err(s) if Instant::now() < deadline => {
                    shared = s;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => return Err("connections did not end within 10 s of the stop".into()),
            }
        };
        inner.engine.close().map_err(|e| format!("closing: {e}"))
    }
}

/// The address to connect to to reach a listener on `addr` (0.0.0.0 is
/// reached through loopback).
fn wakeup(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// Checks that the store is in this server's key encoding (an empty
/// store is made so) and reads the version floor; the version range and
/// the clock go on from where the last run left them.
fn open_keyspace(engine: &ServerEngine) -> Result<(clock::Versions, clock::Clock, u64), String> {
    let read = |e: crate::engine::EngineError| format!("reading the engine: {e}");
    match engine.get(keys::ENCODING).map_err(read)? {
        Some(v) if v == keys::ENCODING_VERSION => {}
        Some(v) => {
            return Err(format!(
                "the store's keys are in encoding {} and this server reads encoding {}: run the server that wrote them",
                String::from_utf8_lossy(&v),
                String::from_utf8_lossy(keys::ENCODING_VERSION)
            ))
        }
        None => {
            if !engine.scan(&[], None, 1).map_err(read)?.is_empty() {
                return Err("the store holds keys written before typed keys (an older Stria's encoding) and this server cannot read them: read them out with the older server, then `stria format` the devices".into());
            }
            engine
                .write_batch(
                    &[(keys::ENCODING, Some(keys::ENCODING_VERSION))],
                    Some(Durability::Sync),
                )
                .map_err(read)?;
        }
    }
    let floor = engine
        .get(keys::FLOOR)
        .map_err(read)?
        .and_then(|v| String::from_utf8(v).ok()?.parse().ok())
        .unwrap_or(0);
    let versions = clock::Versions::open(engine).map_err(read)?;
    let clock = clock::Clock::open(engine).map_err(read)?;
    Ok((versions, clock, floor))
}

/// Wakes the loops (which see the stop flag) and waits for them to end.
fn stop_loops(shared: &Shared, loops: Vec<event::LoopHandle>) {
    shared.request_stop();
    for l in &loops {
        let _ = l.waker.wake();
    }
    for l in loops {
        let _ = l.thread.join();
    }
}

/// Accepts connections and hands them to the loops in turn.
fn accept_loop(
    shared: &Arc<Shared>,
    listener: TcpListener,
    loops: Vec<(Sender<event::Handoff>, Arc<mio::Waker>)>,
) {
    let mut next = 0;
    for stream in listener.incoming() {
        if shared.stopping() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: {e}");
                // Out of descriptors: give the others a moment to close.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (Ok(addr), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
            continue;
        };
        let mut clients = shared.clients.lock().expect("clients lock");
        if clients.len() >= shared.opts.max_clients {
            drop(clients);
            shared.metrics.connection_rejected();
            let mut s = stream;
            let _ = s.write_all(b"-ERR max number of clients reached\r\n");
            continue;
        }
        let id = shared.next_client.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(Client {
            id,
            addr,
            local,
            since: Instant::now(),
            last_active: AtomicU64::new(0),
            name: Mutex::new(Vec::new()),
            user: Mutex::new("default".into()),
            last_command: AtomicUsize::new(usize::MAX),
            proto: AtomicU8::new(2),
            flags: AtomicU8::new(0),
        });
        clients.insert(id, client.clone());
        drop(clients);
        shared.metrics.connection_opened();
        let (tx, waker) = &loops[next % loops.len()];
        next += 1;
        if tx.send((client.clone(), stream)).is_err() {
            // The loop has ended (the server is stopping).
            shared.forget(&client);
            continue;
        }
        if let Err(e) = waker.wake() {
            tracing::warn!("cannot wake an event loop: {e}");
        }
    }
}

/// CLIENT LIST's flags: `N` for none.
fn client_flags(c: &Client) -> String {
    let t = c.flags.load(Ordering::Relaxed);
    let mut f = String::new();
    for (bit, ch) in [
        (monitor::FLAG_MONITOR, 'O'),
        (tracking::FLAG_TRACKING, 't'),
        (tracking::FLAG_BROKEN, 'R'),
        (tracking::FLAG_BCAST, 'B'),
    ] {
        if t & bit != 0 {
            f.push(ch);
        }
    }
    if f.is_empty() {
        f.push('N');
    }
    f
}

/// A CLIENT LIST line.
pub fn client_line(c: &Client) -> String {
    let name = String::from_utf8_lossy(&c.name.lock().expect("client lock")).into_owned();
    format!(
        "id={} addr={} laddr={} name={} age={} idle={} flags={} db=0 cmd={} user={} resp={}",
        c.id,
        c.addr,
        c.local,
        name,
        c.since.elapsed().as_secs(),
        conn::Conn::idle_of(c),
        client_flags(c),
        table::COMMANDS
            .get(c.last_command.load(Ordering::Relaxed))
            .map_or("NULL", |s| s.name),
        c.user.lock().expect("client lock"),
        c.proto.load(Ordering::Relaxed)
    )
}

/// INFO's server section.
pub fn server_section(s: &Shared) -> String {
    let up = s.started.elapsed().as_secs();
    format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nstria_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\nconfig_file:{}\r\nappliance_durability:{:?}\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        s.local_addr.port(),
        up / 86400,
        s.opts.config_file,
        s.opts.durability,
    )
}
