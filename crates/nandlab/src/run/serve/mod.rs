//! `serve`: the simulated drive as a block device over NBD, so real
//! programs (fio, file systems, databases) run on it while every NAND rule
//! and every read stays checked.
//!
//! The parts, along the data path:
//! - [`stream`]: where clients connect (TCP, loopback by default, or a
//!   Unix socket);
//! - [`connection`]: per client, the handshake ([`crate::host::nbd`]),
//!   a reader thread that parses requests and a writer that sends replies;
//! - the *drive*: the session, the byte store and serve's counters
//!   behind one lock ([`Core`]). Untimed, each connection's thread
//!   executes its own commands holding it; with `timed`, connections hand
//!   their commands to this module's loop, the *drive thread*, which
//!   executes them in arrival order and gives each reply to the pacer;
//! - [`executor`]: a command on the [`Session`] — host requests to the
//!   FTL, the oracle checking every read, the bytes from [`bytes`];
//! - [`send`]: replies queued and sent by `writev`, a read's data straight
//!   from the byte store (no copy in the server);
//! - with `timed`, [`timed`]: the reply held until the simulated drive
//!   (the `perf` timing model) would complete the command, paced against
//!   the real clock.
//!
//! **Why one command at a time.** The simulated drive is one state
//! machine (FTL, flash, oracle): executing commands one at a time makes a
//! run's checking a function of the request sequence, so a finding can be
//! replayed; serving requests in parallel would buy throughput the FTL
//! under test does not have anyway.
//!
//! **Why untimed connections execute their own commands.** A command
//! handed from a reader thread to a drive thread, and its reply to a
//! writer thread, costs two thread wake-ups (context switches) per
//! command; a connection thread that reads a request, executes it under
//! the lock and writes the reply needs none (the measurements are in
//! `docs/design-notes/serve.md`). It sends the replies it has when the
//! client has nothing more queued in the socket buffer, so a client that
//! pipelines gets its replies in batches. A client that stops reading
//! replies stops being read once the socket's buffer is full, so it
//! cannot make the server hold unbounded memory.
//!
//! **Flush across connections.** A command's reply is sent after the
//! command was executed, and a flush executes after every command that
//! was replied to before it was received, on any connection; the
//! FTL's flush makes everything it acknowledged durable. So a flush on
//! one connection covers writes completed on all connections, which is
//! what `NBD_FLAG_CAN_MULTI_CONN` promises, and it is advertised.
//!
//! **A panic in a command** (the FTL's, or nandlab's own) is caught on
//! the connection's thread and resumed on the server's thread, after every
//! open connection is closed: the process ends with the panic and its
//! message, as `stress` ends (a panic is not turned into a violation: the
//! drive's state after it is unknown, so nothing more is executed or
//! checked). Other clients see their connection close at once.
//!
//! **Shutdown.** On a stop request (SIGINT/SIGTERM in the CLI), with
//! `once` when the last client disconnects, or when the violation policy
//! says stop: no new connections, open ones are closed (commands not yet
//! executed are dropped; their clients see the connection close), then a
//! flush of the FTL, or with `remount_verify` a clean power cycle (FTL
//! shutdown, a fresh instance mounted from flash) and every sector read
//! back and checked; then the report.

pub mod allocator;
pub mod bytes;
pub mod connection;
pub mod drive_file;
pub mod executor;
pub mod send;
pub mod stream;
pub mod timed;

#[cfg(test)]
mod panic_tests;

use crate::config::Config;
use crate::flash::Cause;
use crate::host::nbd::handshake::{tflags, Export};
use crate::host::nbd::transmission::Command;
use crate::host::nbd::MAX_PAYLOAD_BYTES;
use crate::report::{self, resources, StressReport};
use crate::run::stress::{session_report, RunOutline, WorkloadEnd};
use crate::run::{RunError, StopFlag};
use bytes::ByteStoreStats;
use connection::Reply;
use executor::ServeDrive;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stream::{Listener, Stream};
use timed::{Pacer, TimedReport};

/// With `once`, how long the server waits for another client after the
/// last one left: clients such as fio's `nbd` engine open a connection to
/// probe the export, close it, and connect again at once.
pub const ONCE_GRACE: Duration = Duration::from_secs(1);

/// Connections open at once; more are closed at once (logged).
pub const MAX_CONNECTIONS: usize = 64;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub seed: u64,
    /// The export's name (the empty name selects it too).
    pub export_name: String,
    /// The minimum block size advertised (`NBD_INFO_BLOCK_SIZE`), bytes.
    pub block_min_bytes: u32,
    /// Exit when the last client disconnects (and no other connects
    /// within [`ONCE_GRACE`]).
    pub once: bool,
    /// At exit: a clean power cycle (FTL shutdown, a fresh instance
    /// mounted from flash) and every sector read back and checked;
    /// otherwise a flush.
    pub remount_verify: bool,
    /// Stop when set (SIGINT/SIGTERM).
    pub stop: StopFlag,
    /// Print the live counters when set (SIGUSR1); cleared when printed.
    pub stats_now: Option<Arc<AtomicBool>>,
    /// Print the live counters this often.
    pub stats_interval: Option<Duration>,
    /// Hold each reply until the simulated drive would complete it
    /// ([`timed`]; the preset needs a timing model).
    pub timed: bool,
    /// What the drive does at exit (after `remount_verify`'s check).
    pub at_exit: AtExit,
}

/// What the drive does when the server stops.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AtExit {
    /// The FTL flushes (the drive stays powered: nothing is kept).
    Flush,
    /// The FTL's clean shutdown (`--drive`: the flash is then saved).
    Shutdown,
    /// Nothing: the power is cut (`--drive --power-cut-on-exit`; the
    /// next run's FTL recovers).
    PowerCut,
}

/// A message to the server's loop.
pub enum Event {
    /// A command to execute (`timed`: untimed connections execute their own).
    Job(Job),
    /// A log line from a connection (a violation its command caused).
    Log(String),
    /// A request refused before the drive (`timed`: untimed connections count their own).
    Refused,
    /// A command's violation asks the server to stop (`--on-violation stop`).
    Stop,
    /// A command panicked on a connection's thread: the server closes every
    /// connection and panics with it, as it would have had the command run
    /// on its own thread.
    Panicked(Box<dyn std::any::Any + Send>),
    Opened(u64, String),
    /// Connection closed: `Ok(None)` as the protocol says, `Ok(Some)` with
    /// a note, `Err` after a protocol or socket error.
    Closed(u64, Result<Option<String>, String>),
}

/// A command from a connection, and where its reply goes.
pub struct Job {
    pub connection: u64,
    pub cookie: u64,
    pub command: Command,
    pub reply: Sender<Reply>,
    pub budget_bytes: u64,
    /// When the connection read the command (the arrival `timed` uses).
    pub arrived: Instant,
}

/// What `serve` counts beside the drive's report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServeCounters {
    pub connections: u64,
    /// Connections ended by a protocol or socket error.
    pub connection_errors: u64,
    pub commands: u64,
    /// Commands refused before the drive (range, size, unknown).
    pub commands_refused: u64,
    /// Commands answered with an error because of a violation or a failed FTL.
    pub commands_failed: u64,
    /// Flushes the drive made on its own: with `--power-cut-on-exit`, after
    /// a long run of writes the client never flushed (see
    /// `executor::PENDING_OPS_MAX`).
    pub flushes_on_its_own: u64,
    pub bytes: ByteStoreStats,
    /// Why the server stopped.
    pub stopped_by: String,
}

/// The drive and serve's counters, behind one lock (see the module docs).
pub struct Core {
    /// Taken by the server when it stops: a connection finding it gone
    /// executes nothing more.
    drive: Option<ServeDrive>,
    counters: ServeCounters,
    /// A violation asked to stop: nothing more is executed.
    stopping: bool,
}

// SAFETY: a `ServeDrive` is not `Send` only because its FTL, flash
// observers and FTL factory are trait objects without a `Send` bound (a
// C library FTL holds raw pointers). Confined here, it is used by one
// thread at a time: the `Core` is reached only through its `Mutex`, and
// nothing in it is shared with anything outside it (no `Rc` of the
// session is handed out; the timed pacer's device is its own, on the
// drive thread). That is the contract `include/nandlab.h` gives C FTLs
// too: one instance is called from one thread at a time, not always the
// same thread. Rust FTLs keep no thread-local state.
unsafe impl Send for Core {}

impl Core {
    /// The core, locked. After a panic in a command (the lock is then
    /// poisoned) the drive is in no state to go on: nothing more is
    /// executed, and the server's loop ends the process with that panic
    /// ([`Event::Panicked`]).
    pub fn lock(core: &Mutex<Core>) -> std::sync::MutexGuard<'_, Core> {
        core.lock().unwrap_or_else(|poisoned| {
            let mut core = poisoned.into_inner();
            core.stopping = true;
            core
        })
    }

    /// Execute `command` of connection `connection`: its reply (with no
    /// budget), the log lines of the violations it caused, and whether
    /// the server must stop; `None` when the server is stopping (the
    /// command is dropped, as commands not yet executed at a stop are).
    pub fn execute(&mut self, connection: u64, cookie: u64, command: Command) -> Option<(Reply, Vec<String>, bool)> {
        if self.stopping {
            return None;
        }
        let drive = self.drive.as_mut()?;
        self.counters.commands += 1;
        let offset_bytes = match command {
            Command::Read { offset_bytes, .. } => offset_bytes,
            _ => 0,
        };
        let answer = drive.execute(command);
        if answer.result.is_err() {
            self.counters.commands_failed += 1;
        }
        let lines = answer
            .violations
            .iter()
            .map(|v| format!("violation (connection {connection}, cookie {cookie:#x}): {v}"))
            .collect();
        self.stopping = answer.stop;
        Some((Reply { cookie, offset_bytes, result: answer.result, budget_bytes: 0 }, lines, answer.stop))
    }

    /// A request refused before the drive (range, size, unknown command).
    pub fn count_refused(&mut self) {
        self.counters.commands_refused += 1;
    }
}

/// The report of a `serve` run: the stress report's fields and serve's own.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServeReport {
    #[serde(flatten)]
    pub run: StressReport,
    pub serve: ServeCounters,
    /// With `timed`: latencies and lag (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed: Option<TimedReport>,
}

impl ServeReport {
    /// The stress-style summary and serve's lines.
    pub fn summary(&self) -> String {
        let s = &self.serve;
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        format!(
            "{}  nbd        {} connection(s) ({} ended by an error), {} commands ({} refused, {} failed), stopped: {}\n  bytes      {:.1} MiB live, {:.1} MiB stale kept, {} stale version(s) forgotten\n",
            self.run.summary(),
            s.connections,
            s.connection_errors,
            s.commands,
            s.commands_refused,
            s.commands_failed,
            s.stopped_by,
            mib(s.bytes.live_bytes),
            mib(s.bytes.stale_bytes),
            s.bytes.versions_forgotten
        ) + &self.timed.as_ref().map(TimedReport::summary).unwrap_or_default()
    }
}

/// The export a drive of `size_bytes` offers: blocks of at least
/// `block_min_bytes`, preferably pages of `page_bytes`.
pub fn export(name: &str, size_bytes: u64, block_min_bytes: u32, page_bytes: u32) -> Export {
    Export {
        name: name.to_string(),
        description: "nandlab: a simulated SSD, every read checked".to_string(),
        size_bytes,
        transmission_flags: tflags::HAS_FLAGS
            | tflags::SEND_FLUSH
            | tflags::SEND_FUA
            | tflags::SEND_TRIM
            | tflags::SEND_WRITE_ZEROES
            | tflags::SEND_DF
            | tflags::CAN_MULTI_CONN,
        block_min_bytes,
        block_preferred_bytes: page_bytes.max(block_min_bytes).max(512),
        block_max_bytes: MAX_PAYLOAD_BYTES,
    }
}

/// Accept clients on `listener` and serve `drive` until a stop; then the
/// clean shutdown, the check of every sector and the report. Log lines
/// (connections, violations, live counters) go to `log`.
pub fn run(
    config: &Config,
    mut drive: ServeDrive,
    listener: Listener,
    opts: &ServeOptions,
    log: &mut dyn FnMut(&str),
) -> Result<(ServeReport, ServeDrive), RunError> {
    let started = Instant::now();
    let cpu_start = resources::cpu_seconds();
    let mut pacer =
        if opts.timed { Some(Pacer::new(config, opts.seed, started, drive.take_timing_origin())?) } else { None };
    let export = export(&opts.export_name, drive.size_bytes(), opts.block_min_bytes, config.geometry.page_size_bytes());
    listener.set_nonblocking().map_err(|e| RunError::Input(format!("listening socket: {e}")))?;
    let core = Arc::new(Mutex::new(Core { drive: Some(drive), counters: ServeCounters::default(), stopping: false }));
    // Untimed, connections execute their own commands on the core.
    let direct = (!opts.timed).then(|| Arc::clone(&core));
    let (tx, rx) = channel::<Event>();
    let shutdown = Arc::new(AtomicBool::new(false));
    let streams: Arc<Mutex<HashMap<u64, Stream>>> = Arc::default();
    let acceptor = {
        let (shutdown, streams, tx) = (Arc::clone(&shutdown), Arc::clone(&streams), tx.clone());
        std::thread::spawn(move || accept_loop(&listener, &export, &shutdown, &streams, &tx, direct.as_ref()))
    };
    drop(tx);
    let mut open = 0u64;
    let mut interrupted = false;
    let stopped_by;
    let mut connections = 0u64;
    let mut connection_errors = 0u64;
    let mut next_stats = opts.stats_interval.map(|d| Instant::now() + d);
    // With `once`: when the last client left, if no other came since.
    let mut idle_since: Option<Instant> = None;
    loop {
        if open == 0 && idle_since.is_some_and(|t| t.elapsed() >= ONCE_GRACE) {
            stopped_by = "the last client disconnected (--once)".into();
            break;
        }
        if opts.stop.is_set() {
            interrupted = true;
            stopped_by = "interrupted".into();
            break;
        }
        let asked = opts.stats_now.as_ref().is_some_and(|f| f.swap(false, Ordering::Relaxed));
        let due = next_stats.is_some_and(|t| Instant::now() >= t);
        if asked || due {
            let core = Core::lock(&core);
            if let Some(drive) = &core.drive {
                log(&live_line(drive, &core.counters, open));
            }
            next_stats = opts.stats_interval.map(|d| Instant::now() + d);
        }
        let mut wait = Duration::from_millis(50);
        if let Some(next) = pacer.as_mut().and_then(Pacer::release_due) {
            wait = wait.min(next);
        }
        match rx.recv_timeout(wait) {
            Ok(Event::Job(job)) => {
                // The pacer times the command after: the drive gets a copy.
                let execute = || Core::lock(&core).execute(job.connection, job.cookie, job.command.clone());
                let executed = match std::panic::catch_unwind(AssertUnwindSafe(execute)) {
                    Ok(executed) => executed,
                    Err(payload) => close_all_and_resume(&shutdown, &streams, payload),
                };
                let Some((mut reply, lines, stop)) = executed else { continue };
                for line in &lines {
                    log(line);
                }
                reply.budget_bytes = job.budget_bytes;
                send_timed(pacer.as_mut(), job, reply, log);
                if stop {
                    stopped_by = "a violation (--on-violation stop)".into();
                    break;
                }
            }
            Ok(Event::Log(line)) => log(&line),
            Ok(Event::Refused) => Core::lock(&core).count_refused(),
            Ok(Event::Panicked(payload)) => close_all_and_resume(&shutdown, &streams, payload),
            Ok(Event::Stop) => {
                stopped_by = "a violation (--on-violation stop)".into();
                break;
            }
            Ok(Event::Opened(id, peer)) => {
                open += 1;
                idle_since = None;
                connections += 1;
                log(&format!("connection {id} from {peer}"));
            }
            Ok(Event::Closed(id, how)) => {
                open -= 1;
                match how {
                    Ok(None) => log(&format!("connection {id} closed")),
                    Ok(Some(note)) => log(&format!("connection {id} closed: {note}")),
                    Err(e) => {
                        connection_errors += 1;
                        log(&format!("connection {id} dropped: {e}"));
                    }
                }
                if opts.once && open == 0 {
                    idle_since = Some(Instant::now());
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                stopped_by = "the listener failed".into();
                break;
            }
        }
    }
    shutdown.store(true, Ordering::Relaxed);
    let _ = acceptor.join();
    // The drive leaves the core: a connection still reading executes
    // nothing more (its command is dropped).
    let (mut drive, mut counters) = {
        let mut core = Core::lock(&core);
        let drive = core.drive.take().expect("the drive is taken once");
        (drive, std::mem::take(&mut core.counters))
    };
    for stream in streams.lock().expect("streams lock").values() {
        stream.shutdown();
    }
    counters.connections = connections;
    counters.connection_errors = connection_errors;
    counters.stopped_by = stopped_by;
    let mut report = finish(config, &mut drive, counters, interrupted, opts, started, cpu_start);
    report.timed = pacer.as_ref().map(Pacer::report);
    Ok((report, drive))
}

/// A command panicked (the FTL, or nandlab's own checking): the drive is
/// in no state to go on, so no new connections are accepted, every open
/// one is closed — its client sees the close at once instead of waiting
/// on a server that is gone — and the panic goes on, on this thread: the
/// process ends with it, as `stress` does (see the module docs).
fn close_all_and_resume(
    shutdown: &AtomicBool,
    streams: &Mutex<HashMap<u64, Stream>>,
    payload: Box<dyn std::any::Any + Send>,
) -> ! {
    shutdown.store(true, Ordering::Relaxed);
    for stream in streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values() {
        stream.shutdown();
    }
    std::panic::resume_unwind(payload)
}

/// Serve one connection's whole byte stream on this thread, replies
/// discarded: the handshake, then every request until the stream ends or
/// breaks the protocol (for fuzzing and tests: no sockets, no threads).
pub fn serve_in_line(drive: &mut ServeDrive, conn: &mut (impl std::io::Read + std::io::Write), export: &Export) {
    use crate::host::nbd::transmission::{read_request, Incoming};
    if crate::host::nbd::handshake::negotiate(conn, export).is_err() {
        return;
    }
    while let Ok(incoming) = read_request(conn, export.size_bytes) {
        match incoming {
            Incoming::Command(_, cmd) => {
                let _ = drive.execute(cmd);
            }
            Incoming::Refuse(..) => {}
            Incoming::Disconnect => return,
        }
    }
}

/// Send a reply of the drive thread: held by the pacer until the
/// simulated drive would complete its command, or at once.
fn send_timed(pacer: Option<&mut Pacer>, job: Job, reply: Reply, log: &mut dyn FnMut(&str)) {
    match pacer {
        Some(pacer) => {
            if let Err(e) = pacer.hold(&job.command, job.connection, job.arrived, job.reply, reply) {
                // Logged once: a failed timed FTL fails every command after.
                if pacer.timing_errors() == 1 {
                    log(&format!(
                        "timing (connection {}, cookie {:#x}): {e}; this and every failing command answered at once, untimed (counted in the report)",
                        job.connection, job.cookie
                    ));
                }
            }
        }
        None => {
            // A client gone before its reply is no error of the drive's.
            let _ = job.reply.send(reply);
        }
    }
}

/// Accept clients until `shutdown`; each gets a thread, which executes
/// its commands on `direct` when given (untimed) or sends them to the
/// drive thread.
fn accept_loop(
    listener: &Listener,
    export: &Export,
    shutdown: &AtomicBool,
    streams: &Arc<Mutex<HashMap<u64, Stream>>>,
    tx: &Sender<Event>,
    direct: Option<&Arc<Mutex<Core>>>,
) {
    let mut next_id = 1;
    while !shutdown.load(Ordering::Relaxed) {
        let (stream, peer) = match listener.accept() {
            Ok(Some(accepted)) => accepted,
            Ok(None) | Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = next_id;
        next_id += 1;
        if streams.lock().expect("streams lock").len() >= MAX_CONNECTIONS {
            // Each connection may hold a request's payload and its budget:
            // their number is bounded so clients cannot exhaust memory.
            stream.shutdown();
            let refused = Err(format!("refused: {MAX_CONNECTIONS} connections are open already"));
            if tx.send(Event::Opened(id, peer)).is_err() || tx.send(Event::Closed(id, refused)).is_err() {
                return;
            }
            continue;
        }
        if let Ok(clone) = stream.try_clone() {
            streams.lock().expect("streams lock").insert(id, clone);
        }
        if tx.send(Event::Opened(id, peer)).is_err() {
            return;
        }
        let (export, tx_conn, streams_conn, direct) =
            (export.clone(), tx.clone(), Arc::clone(streams), direct.cloned());
        let spawned = std::thread::Builder::new().name(format!("nbd-{id}")).spawn(move || {
            let how = connection::serve(id, stream, &export, &tx_conn, direct.as_deref());
            streams_conn.lock().expect("streams lock").remove(&id);
            let _ = tx_conn.send(Event::Closed(id, how));
        });
        if let Err(e) = spawned {
            // No thread (the machine is out of threads or memory): the
            // connection is closed at once, not left open and unserved
            // holding one of the slots.
            if let Some(stream) = streams.lock().expect("streams lock").remove(&id) {
                stream.shutdown();
            }
            if tx.send(Event::Closed(id, Err(format!("cannot start its thread: {e}")))).is_err() {
                return;
            }
        }
    }
}

/// The live counters, one line.
fn live_line(drive: &ServeDrive, counters: &ServeCounters, open: u64) -> String {
    let session = drive.session();
    let h = session.host().counters();
    let stats = session.drive().flash().stats();
    let waf = report::waf(stats.cause(Cause::Host).programs(), stats.total().programs());
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    format!(
        "stats: {open} open connection(s), {} commands; host wrote {:.1} MiB, read {:.1} MiB; WAF {waf:.3}; {} error violation(s); bytes {:.1} MiB live, {:.1} MiB stale",
        counters.commands,
        mib(h.write_bytes),
        mib(h.read_bytes),
        session.drive().flash().log().errors(),
        mib(drive.bytes().stats().live_bytes),
        mib(drive.bytes().stats().stale_bytes)
    )
}

/// The clean shutdown (or none: see [`AtExit`]), the check of every
/// sector, and the report.
fn finish(
    config: &Config,
    drive: &mut ServeDrive,
    mut counters: ServeCounters,
    interrupted: bool,
    opts: &ServeOptions,
    started: Instant,
    cpu_start: f64,
) -> ServeReport {
    let (seed, remount_verify) = (opts.seed, opts.remount_verify && opts.at_exit != AtExit::PowerCut);
    counters.bytes = drive.bytes().stats().clone();
    counters.flushes_on_its_own = drive.flushes_on_its_own();
    let session = drive.session_mut();
    let end = WorkloadEnd::take(session, started);
    let stopped_early = session.ftl_failed().then(|| "the FTL returned an error".to_string());
    let remount = (remount_verify && !session.ftl_failed()).then(|| session.remount_and_verify());
    if !session.ftl_failed() {
        let drive = session.drive_mut();
        match opts.at_exit {
            AtExit::Flush if !remount_verify => {
                if let Err(e) = drive.flush() {
                    drive.ftl_error("the flush at exit", e);
                }
            }
            AtExit::Shutdown => {
                if let Err(e) = drive.shutdown() {
                    drive.ftl_error("the shutdown at exit", e);
                }
            }
            AtExit::Flush | AtExit::PowerCut => {}
        }
    }
    let outline = RunOutline {
        mode: "serve",
        seed,
        workload: format!("NBD clients ({} connection(s))", counters.connections),
        workload_report: None,
        waf_steady: None,
        series: Vec::new(),
        stopped_early,
        interrupted,
        remount,
        started,
        cpu_start,
    };
    let run = session_report(config, session, end, outline);
    ServeReport { run, serve: counters, timed: None }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use std::io::{Read, Write};

    /// Deterministic pseudo-random bytes (xorshift) for test data.
    pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// A connection made of a reader and a writer (tests).
    pub struct Duplex<'a, R: Read, W: Write> {
        pub input: &'a mut R,
        pub output: &'a mut W,
    }

    impl<R: Read, W: Write> Read for Duplex<'_, R, W> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl<R: Read, W: Write> Write for Duplex<'_, R, W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.output.flush()
        }
    }
}
