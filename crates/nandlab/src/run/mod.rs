//! The modes of a run, and the session they share.
//!
//! A [`Session`] is one simulated SSD and its host, in two halves that
//! keep their own invariants (the split of MQSim's `SSD_Device` assembly):
//! - the [`drive::Drive`]: flash controller, FTL instance and the factory
//!   of fresh instances — format, power cycle (clean or not), mount, and
//!   the power cuts of crash tests;
//! - the [`host_side::HostSide`]: the oracle (shadow disk), request and
//!   write ids, host counters — issue a write, acknowledge it, check a read.
//!
//! [`Session::submit`] composes them for one host request — write: the
//! host side issues a write (fresh write id, stamped buffer), the drive's
//! FTL stores it, the host side records what the drive acknowledged; read:
//! the FTL fills an empty buffer and the host side checks every sector —
//! and the session can power-cycle the drive cleanly
//! ([`Session::remount`]) with a fresh FTL instance that sees nothing but
//! the flash.
//!
//! Modes build on it: [`stress`] runs a workload untimed and reports;
//! [`perf`] runs the same session inside the timed [`device`]; [`crash`]
//! cuts the drive's power at chosen operations and checks what recovers;
//! [`hunt`] runs many short sessions, each configured from its seed
//! (swarm testing), with mount cycles and whole-disk verification passes.
//! None of them reaches into the drive's or the host side's fields.

pub mod crash;
pub mod device;
pub mod drive;
pub mod endurance;
pub mod host_side;
pub mod hunt;
pub mod perf;
pub mod progress;
pub mod serve;
pub mod stress;

use crate::config::Config;
use crate::ftl::{self, Ftl, FtlEnv, FtlError, IoRequest};
use crate::report::RemountSummary;
use crate::workload::{HostOp, HostRequest, Workload, WorkloadError};
use drive::Drive;
use host_side::HostSide;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use thiserror::Error;

/// Why a run could not start or had to stop (as opposed to violations, which
/// are findings).
#[derive(Debug, Error)]
pub enum RunError {
    /// Bad configuration or options: the user's input (exit code 2).
    #[error("{0}")]
    Input(String),
    /// The workload failed (a bad trace line; exit code 2).
    #[error("workload: {0}")]
    Workload(String),
}

/// A request from outside a run to stop it early: the CLI sets it on SIGINT
/// or SIGTERM. Runs poll it between host requests (never inside one), so a
/// stopped run reports what it did, marked `interrupted`, exactly as the
/// same run cut at that request would. Unset by default.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Option<Arc<AtomicBool>>);

impl StopFlag {
    /// A stop flag read from `flag` (set it to stop the run).
    pub fn new(flag: Arc<AtomicBool>) -> StopFlag {
        StopFlag(Some(flag))
    }

    /// Whether a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

/// A workload read ahead of the request being served, so the requests
/// after it can be prefetched ([`Session::prefetch`]) before they are
/// submitted. Reading early changes nothing a run reports: the workload's
/// sequence does not depend on when it is read, and the end of the
/// workload or a read's error (a bad trace line) surfaces only when that
/// request is taken; requests read ahead of a stop are dropped.
pub struct Lookahead {
    /// Requests read early, oldest first; a read that failed or found the
    /// end is kept as read, and nothing is read after it.
    ahead: VecDeque<Result<Option<HostRequest>, WorkloadError>>,
    distance: usize,
}

impl Lookahead {
    /// Read up to `distance` requests ahead.
    pub fn new(distance: usize) -> Lookahead {
        Lookahead { ahead: VecDeque::with_capacity(distance), distance }
    }

    /// The workload's next request (`None`: it ended).
    pub fn next(&mut self, workload: &mut dyn Workload) -> Result<Option<HostRequest>, RunError> {
        let read = self.ahead.pop_front().unwrap_or_else(|| workload.next_request());
        read.map_err(|e| RunError::Workload(e.to_string()))
    }

    /// Read ahead to `distance` requests (not past the end or an error);
    /// the newest request read now, if any: the one to prefetch.
    pub fn fill(&mut self, workload: &mut dyn Workload) -> Option<HostRequest> {
        let mut newest = None;
        while self.ahead.len() < self.distance && !matches!(self.ahead.back(), Some(Ok(None) | Err(_))) {
            let read = workload.next_request();
            newest = read.as_ref().ok().copied().flatten();
            self.ahead.push_back(read);
        }
        newest
    }
}

/// Builds a fresh FTL instance for a drive (at format, and at every
/// remount: nothing of an old instance survives a power cycle).
pub type FtlFactory = Box<dyn Fn(&FtlEnv) -> Result<Box<dyn Ftl>, String>>;

/// A factory for a registered FTL with its options.
pub fn registry_factory(name: &str, options: &ftl::FtlOptions) -> FtlFactory {
    let (name, options) = (name.to_string(), options.clone());
    Box::new(move |env| ftl::build(&name, env, &options))
}

/// One simulated drive and its host. See the module docs.
pub struct Session {
    drive: Drive,
    host: HostSide,
}

impl Session {
    /// Build the drive for `config` (FTL `config.ftl_name` with its options),
    /// formatted and ready. The oracle tracks versions per `oracle_unit_sectors`.
    pub fn new(config: &Config, seed: u64, unit: u32, keep_violations: usize) -> Result<Session, RunError> {
        let factory = registry_factory(&config.ftl_name, &config.ftl_options);
        Session::with_factory(config, factory, seed, unit, keep_violations)
    }

    /// Build the drive with an FTL from `factory` (an FTL of your own, or a
    /// deliberately broken one in a test).
    pub fn with_factory(
        config: &Config,
        factory: FtlFactory,
        seed: u64,
        oracle_unit_sectors: u32,
        keep_violations: usize,
    ) -> Result<Session, RunError> {
        let drive = Drive::build(config, factory, seed, keep_violations)?;
        let sector_bytes = u64::from(config.geometry.sector_size_bytes());
        Ok(Session { drive, host: HostSide::new(config.logical_sectors, oracle_unit_sectors, sector_bytes) })
    }

    /// A session of a drive and a host built apart (`serve --drive`).
    pub fn from_parts(drive: Drive, host: HostSide) -> Session {
        Session { drive, host }
    }

    /// The drive: flash, FTL.
    pub fn drive(&self) -> &Drive {
        &self.drive
    }

    /// The drive, to operate on (its methods keep its invariants).
    pub fn drive_mut(&mut self) -> &mut Drive {
        &mut self.drive
    }

    /// The host side: oracle, ids, counters.
    pub fn host(&self) -> &HostSide {
        &self.host
    }

    /// Both halves, to run a request across them (the timed device).
    pub fn parts_mut(&mut self) -> (&mut Drive, &mut HostSide) {
        (&mut self.drive, &mut self.host)
    }

    /// Whether the FTL has returned an error (its state can no longer be trusted).
    pub fn ftl_failed(&self) -> bool {
        self.drive.ftl_failed()
    }

    /// Host requests submitted so far.
    pub fn requests(&self) -> u64 {
        self.host.requests()
    }

    /// Start a host request that is executed outside [`Session::submit`]
    /// (the perf device's write cache): a fresh request id, set on the
    /// drive so flash operations are attributed to it.
    pub fn begin_request(&mut self) -> u64 {
        let id = self.host.start_request();
        self.drive.set_request(Some(id));
        id
    }

    /// End a request started with [`Session::begin_request`].
    pub fn end_request(&mut self) {
        self.drive.set_request(None);
    }

    /// Record that the FTL failed (an `ftl_error` violation); the session
    /// stops trusting it.
    pub fn record_ftl_failure(&mut self, message: String) {
        self.drive.record_ftl_failure(message);
    }

    /// Tell the oracle and the FTL that `req` comes soon, so they can warm
    /// their caches (a simulator speed hint; it changes no result). Hints
    /// form a pipeline, each taking the earlier ones a stage further (the
    /// oracle: directory entry, then unit entry; the page FTL: three
    /// stages), as every stage waits for nothing: hint a request
    /// [`Session::PREFETCH_DISTANCE`] requests before it is submitted.
    /// `to_ftl`: whether the FTL serves `req` when it is submitted (not a
    /// write the perf device's write-back cache absorbs).
    pub fn prefetch(&mut self, req: &HostRequest, to_ftl: bool) {
        if matches!(req.op, HostOp::Read | HostOp::Write | HostOp::Trim) {
            self.host.prefetch(req.lba);
            if to_ftl {
                self.drive.prefetch(req.lba, req.sectors);
            }
        }
    }

    /// How many requests ahead of its submission a request is best hinted
    /// ([`Session::prefetch`]): one per stage of the page FTL's pipeline.
    pub const PREFETCH_DISTANCE: usize = 3;

    /// Execute one host request through the FTL and check it with the oracle.
    pub fn submit(&mut self, req: &HostRequest) -> Result<(), RunError> {
        submit(&mut self.drive, &mut self.host, req)
    }

    /// Let the FTL do background work until it has none (at most `max_steps` steps).
    pub fn idle(&mut self, max_steps: u32) {
        self.drive.idle(max_steps);
    }

    /// Clean power cycle: shut the FTL down, then mount a fresh instance on
    /// the same flash. Nothing of the old instance's memory survives.
    pub fn remount(&mut self) -> Result<(), FtlError> {
        self.power_cycle(true)
    }

    /// The end-of-run check: a clean power cycle, then every sector read
    /// back and checked. The summary carries the fresh instance's mount
    /// counters (its `mount_*` metrics: what the mount read to rebuild).
    pub fn remount_and_verify(&mut self) -> RemountSummary {
        if let Err(e) = self.remount() {
            self.record_ftl_failure(format!("mount after clean shutdown failed: {e}"));
            return RemountSummary {
                mounted: false,
                verified_sectors: 0,
                error: Some(e.to_string()),
                ..Default::default()
            };
        }
        let mount_stats = self.drive.ftl().stats().mount.into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        match self.verify_all(8192) {
            Ok(sectors) => RemountSummary { mounted: true, verified_sectors: sectors, error: None, mount_stats },
            Err(e) => RemountSummary { mounted: true, verified_sectors: 0, error: Some(e.to_string()), mount_stats },
        }
    }

    /// Power off (after a clean shutdown if `clean`) and mount a fresh FTL
    /// instance on the same flash: see [`Drive::power_cycle`].
    pub fn power_cycle(&mut self, clean: bool) -> Result<(), FtlError> {
        self.drive.power_cycle(clean)
    }

    /// Read the whole logical space through the FTL and check every sector.
    /// Returns the sectors verified.
    pub fn verify_all(&mut self, chunk_sectors: u32) -> Result<u64, RunError> {
        let total = self.host.oracle().logical_sectors();
        let mut lba = 0;
        while lba < total && !self.drive.ftl_failed() {
            let n = (total - lba).min(u64::from(chunk_sectors)) as u32;
            let buf = self.drive.alloc_host_read(n);
            let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
            self.drive.set_request(None);
            match self.drive.read(&io) {
                Ok(()) => self.host.check_read(&mut self.drive, lba, buf)?,
                Err(e @ FtlError::Flash(crate::flash::FlashError::Uncorrectable))
                    if self.drive.flash().reliability().is_some() =>
                {
                    self.host.read_failed(&mut self.drive, lba, n, e)
                }
                Err(e) => self.drive.ftl_error(&format!("verification read at LBA {lba}"), e),
            }
            self.drive.free_host_buffer(buf);
            lba += u64::from(n);
        }
        Ok(lba)
    }
}

/// Execute one host request on `drive` for `host`: the write, read, trim
/// or flush half of each side, composed (see [`host_side`]).
pub(crate) fn submit(drive: &mut Drive, host: &mut HostSide, req: &HostRequest) -> Result<(), RunError> {
    let id = host.start_request();
    drive.set_request(Some(id));
    match req.op {
        HostOp::Write => {
            let w = host.issue_write(drive, req.lba, req.sectors)?;
            let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf: w.buf };
            match drive.write(&io) {
                Ok(d) => host.acknowledge_write(&w, d),
                Err(e) => drive.ftl_error(&format!("write of {} sectors at LBA {}", req.sectors, req.lba), e),
            }
            host.complete_write(drive, w, false);
        }
        HostOp::Read => {
            let buf = drive.alloc_host_read(req.sectors);
            let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf };
            match drive.read(&io) {
                Ok(()) => host.check_read(drive, req.lba, buf)?,
                Err(e) => host.read_failed(drive, req.lba, req.sectors, e),
            }
            drive.free_host_buffer(buf);
            host.count_read(req.sectors);
        }
        HostOp::Trim => {
            match drive.trim(req.lba, u64::from(req.sectors)) {
                Ok(()) => host.acknowledge_trim(req.lba, u64::from(req.sectors)),
                Err(e) => drive.ftl_error(&format!("trim of {} sectors at LBA {}", req.sectors, req.lba), e),
            }
            host.count_trim(req.sectors);
        }
        HostOp::Flush => {
            if let Err(e) = drive.flush() {
                drive.ftl_error("flush", e);
            }
            host.count_flush();
        }
    }
    drive.set_request(None);
    Ok(())
}
