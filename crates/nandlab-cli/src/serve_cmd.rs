//! `nandlab serve`: the simulated drive as a block device over NBD.
//!
//! Everything the user gave is checked before the socket listens (exit 2
//! otherwise): the device and FTL, the address (loopback unless
//! `--allow-remote`), the outputs. Then one line on stderr says where to
//! connect (`nandlab serve: listening on nbd://127.0.0.1:10809`, parseable:
//! the address follows `listening on `), the drive serves until SIGINT or
//! SIGTERM (or, with `--once`, until the last client disconnects), and the
//! stress-style summary and `--json` report follow. SIGUSR1 prints the live
//! counters.

use crate::exit::{self, input_error};
use crate::options::{self, DeviceArgs, WorkloadArgs};
use crate::signals;
use clap::Args;
use nandlab::config::Config;
use nandlab::run::drive::Drive;
use nandlab::run::serve::drive_file::{self, OpenError};
use nandlab::run::serve::executor::{ServeDrive, ViolationPolicy};
use nandlab::run::serve::stream::Listener;
use nandlab::run::serve::{self, AtExit, ServeOptions};
use nandlab::run::{registry_factory, Session};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TCP address to listen on, HOST:PORT (port 0: any free port, printed).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:10809", conflicts_with = "unix")]
    pub listen: String,
    /// Listen on a Unix socket at PATH instead of TCP.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// Allow --listen on an address that is not loopback (anyone who can
    /// reach it can read and write the drive: NBD has no authentication here).
    #[arg(long = "allow-remote")]
    pub allow_remote: bool,
    /// The export's name (clients may also ask for the default export, "").
    #[arg(long = "export-name", default_value = "nandlab")]
    pub export_name: String,
    /// Exit when the last client disconnects (and no other connects within a second).
    #[arg(long)]
    pub once: bool,
    /// At exit: clean shutdown, mount a fresh FTL, read every sector back
    /// (otherwise the FTL is flushed).
    #[arg(long)]
    pub remount: bool,
    /// What a client gets for a request that caused a violation: continue
    /// (log it, answer with what the FTL returned), eio (log it, answer
    /// EIO), stop (log it, answer EIO, shut down).
    #[arg(long = "on-violation", default_value = "continue", value_parser = ViolationPolicy::parse)]
    pub on_violation: ViolationPolicy,
    /// Bytes of overwritten data kept for a broken FTL to return (beyond
    /// them, a stale sector reads as 0xD5 bytes).
    #[arg(long = "stale-bytes-max", value_name = "SIZE", default_value = "64MiB", value_parser = size_bytes)]
    pub stale_bytes_max: u64,
    /// Print the live counters every SECONDS (also on SIGUSR1).
    #[arg(long = "stats-interval", value_name = "SECONDS", value_parser = seconds)]
    pub stats_interval: Option<Duration>,
    /// The minimum block size advertised, bytes: a power of two from 1 to
    /// the sector size. The drive accepts any byte range (partial sectors
    /// by read-modify-write); libnbd clients refuse requests below what is
    /// advertised, so 1 lets byte-granular writers through (fuse2fs over
    /// nbdfuse updates the superblock a few bytes at a time).
    #[arg(long = "block-min", value_name = "BYTES", default_value_t = 512)]
    pub block_min: u32,
    /// Run seed (drawn and printed when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the JSON report to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Hold each reply until the simulated drive would complete it (the
    /// `perf` timing model, host interface and write cache), paced against
    /// the real clock: clients measure the simulated drive's latency and
    /// IOPS. Needs a preset with a [timing] table; not reproducible.
    #[arg(long)]
    pub timed: bool,
    /// Violations kept in full in the report.
    #[arg(long = "keep-violations", default_value_t = 20)]
    pub keep_violations: usize,
    /// Keep the drive in FILE across runs: a new FILE is formatted, an
    /// existing one is checked (device, checksums, version) and mounted
    /// by a fresh FTL; at a clean exit the FTL shuts down and FILE is saved.
    /// With --timed, the timing model's own copy of the drive mounts the
    /// same flash.
    #[arg(long, value_name = "FILE")]
    pub drive: Option<PathBuf>,
    /// At exit, leave the drive as a power cut would (no FTL shutdown, its
    /// volatile state lost) and save it: the next `serve --drive FILE`
    /// recovers it and checks every sector against what was flushed.
    #[arg(long = "power-cut-on-exit", requires = "drive", conflicts_with = "remount")]
    pub power_cut_on_exit: bool,
    /// TEST ONLY (hidden): a deliberate memory bug in the byte store, for
    /// the test of serve's memory bound: `keeps-second-copies` (every
    /// write's bytes copied once more and never freed).
    #[arg(long = "byte-store-mutant", hide = true, value_parser = ["keeps-second-copies"])]
    pub byte_store_mutant: Option<String>,
}

fn size_bytes(text: &str) -> Result<u64, String> {
    nandlab::util::size::parse_bytes(text)
}

fn seconds(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 1e6 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("`{text}` is not a number of seconds above 0")),
    }
}

/// Bind the socket the options name; refuses a non-loopback address
/// without `--allow-remote`.
fn bind(args: &ServeArgs) -> Result<(Listener, String), String> {
    if let Some(path) = &args.unix {
        let l = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| format!("--unix {}: cannot listen: {e}", path.display()))?;
        return Ok((Listener::Unix(l), format!("nbd+unix:///?socket={}", path.display())));
    }
    let addrs: Vec<SocketAddr> = args
        .listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {}: not an address HOST:PORT ({e})", args.listen))?
        .collect();
    let addr = *addrs.first().ok_or_else(|| format!("--listen {}: names no address", args.listen))?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(format!(
            "--listen {}: {} is not a loopback address; NBD has no authentication, so serving beyond this machine needs --allow-remote",
            args.listen,
            addr.ip()
        ));
    }
    let l = TcpListener::bind(addr).map_err(|e| format!("--listen {}: cannot listen: {e}", args.listen))?;
    let local = l.local_addr().map_err(|e| format!("--listen {}: {e}", args.listen))?;
    Ok((Listener::Tcp(l), format!("nbd://{local}")))
}

/// Hold `FILE.lock` (an exclusive `flock`) beside the drive file for as
/// long as the returned file is open: a second `serve --drive FILE` while
/// one runs is refused (exit 2) rather than both saving over each other,
/// the last to exit winning. The lock is on a file of its own because a
/// save replaces the drive file by a rename (a new inode each time), and
/// it is left in place on exit (removing a lock file races with the next
/// server taking it); the kernel releases the lock when the process ends,
/// however it ends.
fn lock_drive(path: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::unix::io::AsRawFd;
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = std::path::PathBuf::from(name);
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(|e| {
            format!("--drive {}: cannot open its lock file {}: {e}", path.display(), lock_path.display())
        })?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            format!(
                "--drive {}: in use by another nandlab serve (it holds {}); stop it first",
                path.display(),
                lock_path.display()
            )
        } else {
            format!("--drive {}: cannot lock {}: {e}", path.display(), lock_path.display())
        });
    }
    Ok(file)
}

/// The drive to serve and its seed: a fresh one, or the one `--drive`
/// keeps (formatted when the file does not exist yet). The exit code when
/// it cannot be had (the file is damaged or for another device: exit 2;
/// the FTL failed to mount it: exit 1).
fn open_drive(config: &Config, args: &ServeArgs) -> Result<(ServeDrive, u64), ExitCode> {
    let factory = registry_factory(&config.ftl_name, &config.ftl_options);
    if let Some(path) = args.drive.as_ref().filter(|p| p.exists()) {
        let opened = drive_file::open(
            path,
            config,
            factory,
            args.seed,
            args.keep_violations,
            args.stale_bytes_max,
            args.on_violation,
            args.timed,
        );
        return match opened {
            Ok(o) => {
                eprintln!("nandlab serve: drive {}: {}", path.display(), o.how);
                for v in o.drive.session().drive().flash().log().kept() {
                    eprintln!("nandlab serve: violation (recovery): {v}");
                }
                Ok((o.drive, o.seed))
            }
            Err(OpenError::Input(e)) => Err(input_error(e)),
            Err(OpenError::Mount(e)) => {
                eprintln!("error: {e}");
                Err(ExitCode::from(exit::VIOLATIONS))
            }
        };
    }
    if let Some(path) = &args.drive {
        // Refused now, not after serving: the directory must take the file.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(input_error(format!("--drive {}: {} is not a directory", path.display(), dir.display())));
        }
    }
    let seed = args.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    let session = Session::with_factory(config, factory, seed, 1, args.keep_violations).map_err(input_error)?;
    if let Some(path) = &args.drive {
        eprintln!("nandlab serve: drive {}: new, formatted", path.display());
    }
    Ok((ServeDrive::new(session, args.stale_bytes_max, args.on_violation), seed))
}

pub fn run(device: &DeviceArgs, args: &ServeArgs) -> ExitCode {
    let ([json], stop, config) = match device.start(&WorkloadArgs::default(), &[], [("--json", args.json.as_deref())]) {
        Ok(started) => started,
        Err(e) => return input_error(e),
    };
    if let Err(e) = crate::options::refuse_reliability(&config, "serve") {
        return input_error(e);
    }
    let sector_bytes = config.geometry.sector_size_bytes();
    if !args.block_min.is_power_of_two() || args.block_min > sector_bytes {
        return input_error(format!(
            "--block-min {}: must be a power of two from 1 to the sector size ({sector_bytes} bytes)",
            args.block_min
        ));
    }
    if args.timed {
        if let Err(e) = config.require_timing() {
            return input_error(format!("--timed: {e}"));
        }
    }
    // Held until the process ends (a missing directory is left to
    // `open_drive`, which names it).
    let parent_is_dir = |p: &&std::path::Path| {
        p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).is_dir()
    };
    let _drive_lock = match args.drive.as_deref().filter(parent_is_dir).map(lock_drive).transpose() {
        Ok(lock) => lock,
        Err(e) => return input_error(e),
    };
    let (mut drive, seed) = match open_drive(&config, args) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    if args.byte_store_mutant.is_some() {
        drive.bytes_mut().keep_second_copies();
    }
    if args.power_cut_on_exit {
        let factory = registry_factory(&config.ftl_name, &config.ftl_options);
        match Drive::ftl_needs(&config, &factory, seed) {
            Ok((_, guarantee)) => drive.track_power_cut(guarantee),
            Err(e) => return input_error(e),
        }
    }
    let (listener, url) = match bind(args) {
        Ok(bound) => bound,
        Err(e) => return input_error(e),
    };
    let stats_now = Arc::new(AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&stats_now)) {
        eprintln!("warning: cannot handle SIGUSR1 ({e}): live counters only with --stats-interval");
    }
    eprintln!(
        "nandlab serve: preset {}, FTL {}, seed {seed}, {} bytes, export `{}`{}",
        config.name,
        config.ftl_name,
        drive.size_bytes(),
        args.export_name,
        if args.timed { ", timed (replies paced by the simulated drive)" } else { "" }
    );
    eprintln!("nandlab serve: listening on {url}");
    let opts = ServeOptions {
        seed,
        export_name: args.export_name.clone(),
        once: args.once,
        block_min_bytes: args.block_min,
        remount_verify: args.remount,
        stop,
        stats_now: Some(stats_now),
        stats_interval: args.stats_interval,
        timed: args.timed,
        at_exit: match (&args.drive, args.power_cut_on_exit) {
            (None, _) => AtExit::Flush,
            (Some(_), false) => AtExit::Shutdown,
            (Some(_), true) => AtExit::PowerCut,
        },
    };
    // After the drive is built: its large zeroed tables stay lazily mapped
    // by the default allocator (see `allocator.rs`).
    serve::allocator::tune_for_serve();
    let result = serve::run(&config, drive, listener, &opts, &mut |line| eprintln!("nandlab serve: {line}"));
    if let Some(path) = &args.unix {
        let _ = std::fs::remove_file(path);
    }
    let (mut report, drive) = match result {
        Ok(r) => r,
        Err(e) => return input_error(e),
    };
    if let Some(path) = &args.drive {
        let how = if args.power_cut_on_exit { "as a power cut left it" } else { "after a clean shutdown" };
        match drive_file::save_drive(path, &config, &drive, seed, args.power_cut_on_exit) {
            Ok(()) => eprintln!("nandlab serve: drive saved to {} ({how})", path.display()),
            Err(e) => {
                eprintln!("error: --drive {}: cannot save the drive: {e}", path.display());
                return ExitCode::from(exit::VIOLATIONS);
            }
        }
    }
    if report.run.interrupted {
        signals::announce();
    }
    report.run.reproduce = Some(options::reproduce_command(seed));
    print!("{}", report.summary());
    crate::stress_cmd::print_findings(&report.run);
    if let Some(out) = json {
        let text = serde_json::to_string_pretty(&report).expect("reports serialize") + "\n";
        if let Err(e) = out.write(text.as_bytes()) {
            return input_error(e);
        }
    }
    exit::of_run(report.run.errors > 0, report.run.interrupted)
}
