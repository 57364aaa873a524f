//! The drive: the flash controller (NAND, buffers, counters, violation
//! log), the FTL instance running on it, and what builds a fresh instance
//! (the factory and the environment it is given).
//!
//! A run is a *drive* and a *host side* ([`super::host_side`]), composed by
//! a [`super::Session`], as MQSim's `SSD_Device` assembles its device from
//! a host interface, a data cache, an FTL and the NAND. The drive is what
//! survives or does not survive a power loss: it formats, mounts, powers
//! off cleanly or not, and lets a crash test cut its power and restore the
//! base run afterwards ([`Drive::cut_power_for_test`]). It knows nothing of
//! the host: no oracle, no request ids of its own (the host side says which
//! request is in flight, [`Drive::set_request`]), no host counters.
//!
//! Its invariants:
//! - a fresh FTL instance is only ever built from the factory and mounted
//!   on the flash (or formats it, once): nothing of an old instance
//!   survives a power cycle, and the old instance's buffers are freed;
//! - once the FTL returned an error, [`Drive::ftl_failed`] stays set and
//!   the failure is an `ftl_error` violation in the log;
//! - between a test's power cut and the next mount no FTL instance runs
//!   (a drive without power runs no firmware); calling the FTL then is a
//!   bug of the caller and panics.
//!
//! It lives in `run` beside the modes, not at the top of the crate: a
//! drive is built from a run's configuration and reports the run's errors
//! ([`RunError`]), and only the modes use it.

use super::{FtlFactory, RunError};
use crate::config::Config;
use crate::flash::{BufId, CrashImage, Flash, FlashController, FlashError, FlashObserver, PowerCut};
use crate::ftl::{self, Durability, Ftl, FtlEnv, FtlError, IoRequest};
use crate::nand::payload::{Run, WriteId};
use crate::nand::power::PowerCutEffects;
use crate::nand::reliability::Reliability;
use crate::nand::{Nand, PageAddr};
use crate::seed::derive_seed;
use crate::violation::{Checker, Rule, Severity, Violation, ViolationLog};

/// Panic message of an FTL call on a drive with no instance running.
const NO_FTL: &str = "an FTL instance runs (the drive is mounted after a power cut)";

/// One simulated drive: flash, FTL, and what builds the FTL. See the module docs.
pub struct Drive {
    flash: FlashController,
    /// The running instance; `None` only between a test's power cut and the next mount.
    ftl: Option<Box<dyn Ftl>>,
    factory: FtlFactory,
    env: FtlEnv,
    ftl_failed: bool,
    /// The [`FtlError::code`] of the first FTL failure, when it was an
    /// FTL error (not a failure described only by text).
    first_failure_code: Option<i32>,
}

/// The base run's state a crash test sets aside: the controller's state
/// outside the NAND and the running FTL instance (see
/// [`Drive::cut_power_for_test`]).
pub struct BaseRun {
    image: CrashImage,
    ftl: Option<Box<dyn Ftl>>,
    ftl_failed: bool,
    first_failure_code: Option<i32>,
}

impl BaseRun {
    /// Pages and blocks the cut tore.
    pub fn torn(&self) -> (u32, u32) {
        (self.image.torn_pages, self.image.torn_blocks)
    }
}

/// A point in the drive's history a crash test can roll back to: the
/// NAND's undo journal length and the flash operation index.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DriveMark {
    journal_len: usize,
    /// The reliability model's journal length (0 with the model off).
    model_journal_len: usize,
    op_index: u64,
}

impl DriveMark {
    /// The index of the next flash operation at the mark.
    pub fn op_index(&self) -> u64 {
        self.op_index
    }
}

impl Drive {
    /// Build the drive for `config` with an FTL from `factory`, formatted
    /// and ready.
    pub fn build(config: &Config, factory: FtlFactory, seed: u64, keep_violations: usize) -> Result<Drive, RunError> {
        let (env, mut ftl, info) = Drive::instance(config, &factory, seed)?;
        let nand = Nand::new(config.geometry.clone(), info.oob_bytes, &config.factory_bad_blocks(seed))
            .map_err(RunError::Input)?;
        let mut flash = FlashController::new(nand, &config.rules, config.dram_budget_bytes, keep_violations);
        if let Some(settings) = &config.reliability {
            flash.set_reliability(Reliability::new(settings.clone(), &config.geometry, seed));
        }
        ftl.format(&mut flash)
            .map_err(|e| RunError::Input(format!("ftl `{}` failed to format the device: {e}", info.name)))?;
        Ok(Drive { flash, ftl: Some(ftl), factory, env, ftl_failed: false, first_failure_code: None })
    }

    /// The FTL's environment for `config`, a fresh instance from
    /// `factory` and what it declares, checked against the geometry.
    fn instance(
        config: &Config,
        factory: &FtlFactory,
        seed: u64,
    ) -> Result<(FtlEnv, Box<dyn Ftl>, ftl::FtlInfo), RunError> {
        let env = FtlEnv {
            geometry: config.geometry.clone(),
            logical_sectors: config.logical_sectors,
            dram_budget_bytes: config.dram_budget_bytes,
            seed: derive_seed(seed, "ftl"),
        };
        let ftl = factory(&env).map_err(|e| RunError::Input(config.locate_error(&e)))?;
        let info = ftl.info();
        // What the FTL needs of the geometry is checked before the drive is
        // built, so a device file that cannot hold it is bad input, not an
        // FTL failure found at the first program.
        ftl::check_geometry(&info, &config.geometry)
            .map_err(|(field, reason)| RunError::Input(config.field_error("geometry", field, reason).to_string()))?;
        Ok((env, ftl, info))
    }

    /// The spare bytes per page the FTL of `config` stores (what its NAND
    /// keeps of each page's OOB), and the crash guarantee it declares.
    pub fn ftl_needs(config: &Config, factory: &FtlFactory, seed: u64) -> Result<(u32, ftl::Guarantee), RunError> {
        let (_, _, info) = Drive::instance(config, factory, seed)?;
        Ok((info.oob_bytes.min(config.geometry.oob_size_bytes()), info.guarantee))
    }

    /// A drive on flash that already holds a drive (`serve --drive`): a
    /// fresh FTL instance mounts it (no format), as after a power cycle.
    /// The mount's error is returned with the drive unmounted.
    pub fn mount_on(
        config: &Config,
        factory: FtlFactory,
        seed: u64,
        keep_violations: usize,
        nand: Nand,
    ) -> Result<Result<Drive, (Drive, FtlError)>, RunError> {
        let (env, mut ftl, _) = Drive::instance(config, &factory, seed)?;
        let mut flash = FlashController::new(nand, &config.rules, config.dram_budget_bytes, keep_violations);
        let mounted = ftl.mount(&mut flash);
        let drive = Drive { flash, ftl: Some(ftl), factory, env, ftl_failed: false, first_failure_code: None };
        Ok(match mounted {
            Ok(()) => Ok(drive),
            Err(e) => Err((drive, e)),
        })
    }

    /// The FTL's clean shutdown (the drive is powered off after it: no
    /// FTL call may follow but a [`Drive::power_cycle`]).
    pub fn shutdown(&mut self) -> Result<(), FtlError> {
        let (ftl, flash) = self.running();
        ftl.shutdown(flash)
    }

    /// The flash controller (NAND, stats, violation log), read-only.
    pub fn flash(&self) -> &FlashController {
        &self.flash
    }

    /// Whether an FTL instance runs (not after a failed mount).
    pub fn has_ftl(&self) -> bool {
        self.ftl.is_some()
    }

    /// The running FTL instance.
    pub fn ftl(&self) -> &dyn Ftl {
        self.ftl.as_deref().expect(NO_FTL)
    }

    /// The running FTL and the flash it runs on.
    #[inline]
    fn running(&mut self) -> (&mut dyn Ftl, &mut FlashController) {
        (self.ftl.as_deref_mut().expect(NO_FTL), &mut self.flash)
    }

    /// Whether the FTL has returned an error (its state can no longer be trusted).
    pub fn ftl_failed(&self) -> bool {
        self.ftl_failed
    }

    /// Record that the FTL failed (an `ftl_error` violation); the drive
    /// stops trusting it.
    pub fn record_ftl_failure(&mut self, message: String) {
        self.record_ftl_failure_with_code(message, None);
    }

    /// [`Drive::record_ftl_failure`] of an [`FtlError`] with `code`.
    fn record_ftl_failure_with_code(&mut self, message: String, code: Option<i32>) {
        if !self.ftl_failed {
            self.first_failure_code = code;
        }
        self.ftl_failed = true;
        self.record_violation(Rule::FtlError, message);
    }

    /// Record an FTL call's error `e` while doing `what`.
    pub fn ftl_error(&mut self, what: &str, e: FtlError) {
        self.record_ftl_failure_with_code(format!("{what}: {e}"), Some(e.code()));
    }

    /// The [`FtlError::code`] of the first FTL failure recorded, if it was
    /// an FTL error (`hunt` classifies `NoSpace` by it, not by the text).
    pub fn first_failure_code(&self) -> Option<i32> {
        self.first_failure_code
    }

    /// Record an error-severity finding that no flash operation checks
    /// (a failed FTL call, a failed recovery), at the current operation
    /// and request.
    pub fn record_violation(&mut self, rule: Rule, message: String) {
        let request_id = self.flash.request();
        let op_index = self.flash.op_index();
        self.flash.log_mut().record(Violation {
            rule,
            severity: Severity::Error,
            op_index,
            request_id,
            address: 0,
            message,
            source: None,
        });
    }

    /// A host read failed with data truly lost to the media (reliability model on).
    pub fn count_host_read_error(&mut self) {
        if let Some(r) = self.flash.reliability_mut() {
            r.count_host_read_error();
        }
    }

    /// Take the violation log, leaving an empty one that keeps as many.
    pub fn take_log(&mut self) -> ViolationLog {
        self.flash.take_log()
    }

    /// Replace the violation log (a crash test starting from a log it kept).
    pub fn replace_log(&mut self, log: ViolationLog) {
        *self.flash.log_mut() = log;
    }

    /// A checker at the current operation (findings go to the log).
    pub fn checker(&mut self) -> Checker<'_> {
        self.flash.checker()
    }

    /// The host request the following flash operations serve (`None`:
    /// none, e.g. background work).
    pub fn set_request(&mut self, request: Option<u64>) {
        self.flash.set_request(request);
    }

    // ----- host buffers -----

    /// A host buffer of `sectors` sectors stamped with write `write` from `lba`.
    pub fn alloc_host_write(&mut self, lba: u32, write: WriteId, sectors: u32) -> BufId {
        self.flash.alloc_host_write(lba, write, sectors)
    }

    /// An empty host buffer of `sectors` sectors (for a read).
    pub fn alloc_host_read(&mut self, sectors: u32) -> BufId {
        self.flash.alloc_host_read(sectors)
    }

    pub fn free_host_buffer(&mut self, buf: BufId) {
        self.flash.free_host_buffer(buf);
    }

    /// Copy `sectors` sectors between buffers (device DRAM).
    pub fn buf_copy(
        &mut self,
        dst: BufId,
        dst_sector: u32,
        src: BufId,
        src_sector: u32,
        sectors: u32,
    ) -> Result<(), FlashError> {
        Flash::buf_copy(&mut self.flash, dst, dst_sector, src, src_sector, sectors)
    }

    /// Hand what a buffer holds to `check`, with a checker for its findings.
    pub fn inspect_buffer(&mut self, buf: BufId, check: impl FnOnce(&[Run], &mut Checker)) -> Result<(), FlashError> {
        self.flash.inspect_buffer(buf, check)
    }

    // ----- the FTL's calls -----

    pub fn write(&mut self, io: &IoRequest) -> Result<Durability, FtlError> {
        let (ftl, flash) = self.running();
        ftl.write(flash, io)
    }

    pub fn read(&mut self, io: &IoRequest) -> Result<(), FtlError> {
        let (ftl, flash) = self.running();
        ftl.read(flash, io)
    }

    pub fn trim(&mut self, lba: u64, sectors: u64) -> Result<(), FtlError> {
        let (ftl, flash) = self.running();
        ftl.trim(flash, lba, sectors)
    }

    pub fn flush(&mut self) -> Result<(), FtlError> {
        let (ftl, flash) = self.running();
        ftl.flush(flash)
    }

    /// One step of background work.
    pub fn idle_step(&mut self) -> Result<ftl::IdleOutcome, FtlError> {
        let (ftl, flash) = self.running();
        ftl.idle(flash)
    }

    /// Tell the FTL that `lba .. lba+sectors` comes soon (a speed hint).
    pub fn prefetch(&mut self, lba: u64, sectors: u32) {
        let (ftl, flash) = self.running();
        ftl.prefetch(flash, lba, sectors);
    }

    /// The FTL's emergency flush on power-loss protection's stored energy.
    pub fn emergency_flush(&mut self) -> Result<(), FtlError> {
        let (ftl, flash) = self.running();
        ftl.emergency_flush(flash)
    }

    /// Let the FTL do background work until it has none (at most `max_steps` steps).
    pub fn idle(&mut self, max_steps: u32) {
        for _ in 0..max_steps {
            match self.idle_step() {
                Ok(ftl::IdleOutcome::Worked) => continue,
                Ok(ftl::IdleOutcome::Nothing) => break,
                Err(e) => {
                    self.ftl_error("background work", e);
                    break;
                }
            }
        }
    }

    // ----- power -----

    /// Power off (after a clean shutdown if `clean`) and mount a fresh FTL
    /// instance on the same flash. Without a clean shutdown, only what the
    /// FTL already put on flash can be found. Either way the device DRAM is
    /// lost: the old instance's buffers are freed (they no longer count
    /// against the DRAM budget) and their handles go stale. If the factory
    /// fails, the old instance stays (unmounted).
    pub fn power_cycle(&mut self, clean: bool) -> Result<(), FtlError> {
        if clean {
            let (ftl, flash) = self.running();
            ftl.shutdown(flash)?;
        }
        self.flash.release_ftl_buffers();
        self.ftl = Some((self.factory)(&self.env).map_err(FtlError::Mount)?);
        let (ftl, flash) = self.running();
        ftl.mount(flash)
    }

    /// What a power cut does to operations (crash campaigns).
    pub fn set_power_cut_effects(&mut self, effects: PowerCutEffects) {
        self.flash.set_power_cut_effects(effects);
    }

    /// Cut the power at flash operation `cut.op_index` (during it, tearing
    /// it, or before it) — an operation the base run already did: the NAND
    /// rolls back to the cut through its undo journal, the device DRAM is
    /// lost and no FTL instance runs until the next
    /// [`Drive::power_cycle`]. The base run's state is returned for
    /// [`Drive::restore_base_run`], which undoes everything since.
    pub fn cut_power_for_test(&mut self, cut: PowerCut) -> BaseRun {
        let image = self.flash.enter_crash_image(cut);
        BaseRun {
            image,
            ftl: self.ftl.take(),
            ftl_failed: self.ftl_failed,
            first_failure_code: self.first_failure_code,
        }
    }

    /// Undo everything since [`Drive::cut_power_for_test`] and carry on
    /// with the base run.
    pub fn restore_base_run(&mut self, base: BaseRun) {
        self.flash.leave_crash_image(base.image);
        self.ftl = base.ftl;
        self.ftl_failed = base.ftl_failed;
        self.first_failure_code = base.first_failure_code;
    }

    /// Cut the power at a later operation (`cut.op_index` not done yet).
    pub fn schedule_power_cut(&mut self, cut: PowerCut) {
        self.flash.schedule_power_cut(cut);
    }

    /// Pages and blocks the last scheduled cut tore (and forget them).
    pub fn take_torn(&mut self) -> (u32, u32) {
        self.flash.take_torn()
    }

    /// Power back on after a cut (no cut scheduled any more).
    pub fn restore_power(&mut self) {
        self.flash.restore_power();
    }

    // ----- the NAND's undo journal (crash tests) -----

    /// Start journaling NAND changes, so they can be rolled back.
    pub fn start_journal(&mut self) {
        self.flash.nand_mut().journal_start();
        if let Some(r) = self.flash.reliability_mut() {
            r.journal_start();
        }
    }

    /// Stop journaling and forget the journal (a power cut that is not
    /// rolled back: `hunt`'s cuts).
    pub fn stop_journal(&mut self) {
        self.flash.nand_mut().journal_stop();
    }

    /// Forget the journal so far (the base run moved past it).
    pub fn clear_journal(&mut self) {
        self.flash.nand_mut().journal_discard_from(0);
        if let Some(r) = self.flash.reliability_mut() {
            r.journal_discard_from(0);
        }
    }

    /// The current point, to roll back to.
    pub fn mark(&self) -> DriveMark {
        DriveMark {
            journal_len: self.flash.nand().journal_len(),
            model_journal_len: self.flash.reliability().map_or(0, |r| r.journal_len()),
            op_index: self.flash.op_index(),
        }
    }

    /// Undo every NAND change since `mark` and rewind the operation index to it.
    pub fn roll_back_to(&mut self, mark: DriveMark) {
        self.flash.nand_mut().journal_rollback(mark.journal_len);
        if let Some(r) = self.flash.reliability_mut() {
            r.journal_rollback(mark.model_journal_len);
        }
        self.flash.reset_op_index(mark.op_index);
    }

    /// The flash operations that changed the NAND since `mark`, in order
    /// (programs, copybacks, erases; not reads), and, with the reliability
    /// model on, those that grew a bad block (a failed erase changes no
    /// page, but a cut before it and one after it leave different drives).
    pub fn state_changes_since(&self, mark: DriveMark) -> Vec<u64> {
        let nand = self.flash.nand();
        let mut ops: Vec<u64> = Vec::new();
        for at in mark.journal_len..nand.journal_len() {
            let op = nand.journal_op_of(at).expect("an entry below the journal's length");
            if ops.last() != Some(&op) {
                ops.push(op);
            }
        }
        if let Some(r) = self.flash.reliability() {
            ops.extend(r.journal_bad_block_ops_since(mark.model_journal_len));
            ops.sort_unstable();
            ops.dedup();
        }
        ops
    }

    // ----- observers and fault injection -----

    /// Attach an observer of every flash operation (timing, tests).
    pub fn add_observer(&mut self, observer: Box<dyn FlashObserver>) {
        self.flash.add_observer(observer);
    }

    /// Detach every observer (an untimed phase); give them back with
    /// [`Drive::restore_observers`].
    pub fn take_observers(&mut self) -> Vec<Box<dyn FlashObserver>> {
        std::mem::take(self.flash.observers_mut())
    }

    pub fn restore_observers(&mut self, observers: Vec<Box<dyn FlashObserver>>) {
        *self.flash.observers_mut() = observers;
    }

    /// Overwrite a page's content with garbage, as a media error would
    /// (fault injection: its data reads as uncorrectable).
    pub fn corrupt_page(&mut self, page: PageAddr) {
        self.flash.nand_mut().corrupt_page(page);
    }
}
