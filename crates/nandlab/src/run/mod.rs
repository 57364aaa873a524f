//! The modes of a run, and the session they share.
//!
//! A [`Session`] is one simulated SSD with its oracle: the flash controller
//! (NAND, buffers, counters, violation log), an FTL instance, and the shadow
//! disk. It executes host requests one at a time — write: the host buffer
//! gets a fresh write id, the FTL stores it, the oracle records it; read:
//! the FTL fills an empty buffer and the oracle checks every sector — and it
//! can power-cycle the drive cleanly ([`Session::remount`]) with a fresh FTL
//! instance that sees nothing but the flash.
//!
//! Modes build on it: [`stress`] runs a workload untimed and reports;
//! [`perf`] runs the same session with a timing model attached.

pub mod crash;
pub mod perf;
pub mod stress;

use crate::config::Config;
use crate::flash::{FlashController, FlashError};
use crate::ftl::{self, Durability, Ftl, FtlEnv, FtlError, IoRequest};
use crate::nand::payload::WriteId;
use crate::nand::Nand;
use crate::oracle::{Oracle, MAX_WRITE_ID};
use crate::seed::derive_seed;
use crate::violation::{Rule, Severity, Violation};
use crate::workload::{HostOp, HostRequest, Workload, WorkloadError};
use serde::Serialize;
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

/// Host-side counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostCounters {
    pub write_bytes: u64,
    pub read_bytes: u64,
    pub trim_bytes: u64,
    pub write_requests: u64,
    pub read_requests: u64,
    pub flush_requests: u64,
    pub trim_requests: u64,
    /// Writes acknowledged from a volatile cache (durable only after a flush).
    pub volatile_writes: u64,
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

/// One simulated drive with its oracle. See the module docs.
pub struct Session {
    pub flash: FlashController,
    pub ftl: Box<dyn Ftl>,
    pub oracle: Oracle,
    pub host: HostCounters,
    factory: FtlFactory,
    env: FtlEnv,
    next_write_id: u32,
    next_request_id: u64,
    sector_bytes: u64,
    ftl_failed: bool,
    /// How the FTL acknowledged the last write request (crash checking).
    last_durability: Option<Durability>,
    /// The LBA of the last prefetch hint (its oracle entry's second stage).
    oracle_hinted: Option<u64>,
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
        let env = FtlEnv {
            geometry: config.geometry.clone(),
            logical_sectors: config.logical_sectors,
            dram_budget_bytes: config.dram_budget_bytes,
            seed: derive_seed(seed, "ftl"),
        };
        let mut ftl = factory(&env).map_err(|e| RunError::Input(config.locate_error(&e)))?;
        let info = ftl.info();
        // What the FTL needs of the geometry is checked before the drive is
        // built, so a device file that cannot hold it is bad input, not an
        // FTL failure found at the first program.
        ftl::check_geometry(&info, &config.geometry)
            .map_err(|(field, reason)| RunError::Input(config.field_error("geometry", field, reason).to_string()))?;
        let nand = Nand::new(config.geometry.clone(), info.oob_bytes, &config.factory_bad_blocks(seed))
            .map_err(RunError::Input)?;
        let mut flash = FlashController::new(nand, &config.rules, config.dram_budget_bytes, keep_violations);
        ftl.format(&mut flash)
            .map_err(|e| RunError::Input(format!("ftl `{}` failed to format the device: {e}", info.name)))?;
        Ok(Session {
            flash,
            ftl,
            oracle: Oracle::new(config.logical_sectors, oracle_unit_sectors),
            host: HostCounters::default(),
            factory,
            env,
            next_write_id: 1,
            next_request_id: 0,
            sector_bytes: u64::from(config.geometry.sector_size_bytes()),
            ftl_failed: false,
            last_durability: None,
            oracle_hinted: None,
        })
    }

    /// Whether the FTL has returned an error (its state can no longer be trusted).
    pub fn ftl_failed(&self) -> bool {
        self.ftl_failed
    }

    /// Host requests submitted so far.
    pub fn requests(&self) -> u64 {
        self.next_request_id
    }

    /// Start a host request that is executed outside [`Session::submit`]
    /// (the perf device's write cache): a fresh request id, set on the
    /// flash controller so operations are attributed to it.
    pub fn begin_request(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.flash.set_request(Some(id));
        id
    }

    /// End a request started with [`Session::begin_request`].
    pub fn end_request(&mut self) {
        self.flash.set_request(None);
    }

    /// A fresh write id for a host write executed outside [`Session::submit`].
    pub fn take_write_id(&mut self) -> Result<WriteId, RunError> {
        if self.next_write_id > MAX_WRITE_ID {
            return Err(RunError::Input(format!("the run exceeds {MAX_WRITE_ID} host writes")));
        }
        let w = self.next_write_id;
        self.next_write_id += 1;
        Ok(w)
    }

    pub(crate) fn ftl_error(&mut self, what: &str, e: FtlError) {
        self.record_ftl_failure(format!("{what}: {e}"));
    }

    /// Record that the FTL failed (an `ftl_error` violation); the session
    /// stops trusting it.
    pub fn record_ftl_failure(&mut self, message: String) {
        self.ftl_failed = true;
        let request_id = self.flash.request();
        let op_index = self.flash.op_index();
        self.flash.log_mut().record(Violation {
            rule: Rule::FtlError,
            severity: Severity::Error,
            op_index,
            request_id,
            address: 0,
            message,
            source: None,
        });
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
            if let Some(lba) = self.oracle_hinted.replace(req.lba) {
                self.oracle.prefetch(lba);
            }
            self.oracle.prefetch_directory(req.lba);
            if to_ftl {
                self.ftl.prefetch(&self.flash, req.lba, req.sectors);
            }
        }
    }

    /// How many requests ahead of its submission a request is best hinted
    /// ([`Session::prefetch`]): one per stage of the page FTL's pipeline.
    pub const PREFETCH_DISTANCE: usize = 3;

    /// Execute one host request through the FTL and check it with the oracle.
    pub fn submit(&mut self, req: &HostRequest) -> Result<(), RunError> {
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.last_durability = None;
        self.flash.set_request(Some(id));
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        match req.op {
            HostOp::Write => {
                if self.next_write_id > MAX_WRITE_ID {
                    return Err(RunError::Input(format!("the run exceeds {MAX_WRITE_ID} host writes")));
                }
                let write = self.next_write_id;
                self.next_write_id += 1;
                let buf = self.flash.alloc_host_write(req.lba as u32, write, req.sectors);
                let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf };
                match self.ftl.write(&mut self.flash, &io) {
                    Ok(d) => {
                        self.last_durability = Some(d);
                        self.oracle.record_write(req.lba, u64::from(req.sectors), write);
                        if d == Durability::Volatile {
                            self.host.volatile_writes += 1;
                        }
                    }
                    Err(e) => self.ftl_error(&format!("write of {} sectors at LBA {}", req.sectors, req.lba), e),
                }
                self.flash.free_host_buffer(buf);
                self.host.write_requests += 1;
                self.host.write_bytes += bytes;
            }
            HostOp::Read => {
                let buf = self.flash.alloc_host_read(req.sectors);
                let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf };
                match self.ftl.read(&mut self.flash, &io) {
                    Ok(()) => {
                        let oracle = &self.oracle;
                        self.flash
                            .inspect_buffer(buf, |runs, ck| oracle.check_read(ck, req.lba, runs))
                            .map_err(|e: FlashError| RunError::Input(e.to_string()))?;
                    }
                    Err(e) => self.ftl_error(&format!("read of {} sectors at LBA {}", req.sectors, req.lba), e),
                }
                self.flash.free_host_buffer(buf);
                self.host.read_requests += 1;
                self.host.read_bytes += bytes;
            }
            HostOp::Trim => {
                match self.ftl.trim(&mut self.flash, req.lba, u64::from(req.sectors)) {
                    Ok(()) => self.oracle.record_trim(req.lba, u64::from(req.sectors)),
                    Err(e) => self.ftl_error(&format!("trim of {} sectors at LBA {}", req.sectors, req.lba), e),
                }
                self.host.trim_requests += 1;
                self.host.trim_bytes += bytes;
            }
            HostOp::Flush => {
                if let Err(e) = self.ftl.flush(&mut self.flash) {
                    self.ftl_error("flush", e);
                }
                self.host.flush_requests += 1;
            }
        }
        self.flash.set_request(None);
        Ok(())
    }

    /// Let the FTL do background work until it has none (at most `max_steps` steps).
    pub fn idle(&mut self, max_steps: u32) {
        for _ in 0..max_steps {
            match self.ftl.idle(&mut self.flash) {
                Ok(ftl::IdleOutcome::Worked) => continue,
                Ok(ftl::IdleOutcome::Nothing) => break,
                Err(e) => {
                    self.ftl_error("background work", e);
                    break;
                }
            }
        }
    }

    /// Clean power cycle: shut the FTL down, then mount a fresh instance on
    /// the same flash. Nothing of the old instance's memory survives.
    pub fn remount(&mut self) -> Result<(), FtlError> {
        self.power_cycle(true)
    }

    /// The end-of-run check: a clean power cycle, then every sector read
    /// back and checked. The summary carries the fresh instance's mount
    /// counters (its `mount_*` metrics: what the mount read to rebuild).
    pub fn remount_and_verify(&mut self) -> crate::report::RemountSummary {
        use crate::report::RemountSummary;
        if let Err(e) = self.remount() {
            self.record_ftl_failure(format!("mount after clean shutdown failed: {e}"));
            return RemountSummary {
                mounted: false,
                verified_sectors: 0,
                error: Some(e.to_string()),
                ..Default::default()
            };
        }
        let mount_stats = self.ftl.stats().mount.into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        match self.verify_all(8192) {
            Ok(sectors) => RemountSummary { mounted: true, verified_sectors: sectors, error: None, mount_stats },
            Err(e) => RemountSummary { mounted: true, verified_sectors: 0, error: Some(e.to_string()), mount_stats },
        }
    }

    /// Power off (after a clean shutdown if `clean`) and mount a fresh FTL
    /// instance on the same flash. Without a clean shutdown, only what the
    /// FTL already put on flash can be found. Either way the device DRAM is
    /// lost: the old instance's buffers are freed (they no longer count
    /// against the DRAM budget) and their handles go stale.
    pub fn power_cycle(&mut self, clean: bool) -> Result<(), FtlError> {
        if clean {
            self.ftl.shutdown(&mut self.flash)?;
        }
        self.flash.release_ftl_buffers();
        self.ftl = (self.factory)(&self.env).map_err(FtlError::Mount)?;
        self.ftl.mount(&mut self.flash)
    }

    /// Read the whole logical space through the FTL and check every sector.
    /// Returns the sectors verified.
    pub fn verify_all(&mut self, chunk_sectors: u32) -> Result<u64, RunError> {
        let total = self.oracle.logical_sectors();
        let mut lba = 0;
        while lba < total && !self.ftl_failed {
            let n = (total - lba).min(u64::from(chunk_sectors)) as u32;
            let buf = self.flash.alloc_host_read(n);
            let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
            self.flash.set_request(None);
            match self.ftl.read(&mut self.flash, &io) {
                Ok(()) => {
                    let oracle = &self.oracle;
                    self.flash
                        .inspect_buffer(buf, |runs, ck| oracle.check_read(ck, lba, runs))
                        .map_err(|e| RunError::Input(e.to_string()))?;
                }
                Err(e) => self.ftl_error(&format!("verification read at LBA {lba}"), e),
            }
            self.flash.free_host_buffer(buf);
            lba += u64::from(n);
        }
        Ok(lba)
    }
}
