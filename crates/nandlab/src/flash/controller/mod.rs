//! The flash controller: the one implementation of [`Flash`].
//!
//! It owns the virtual NAND, the data buffers, the operation counters and
//! the violation log, and calls the registered [`FlashObserver`]s around
//! every operation. Untimed `stress` runs register none; `perf` registers a
//! timing model, `crash` a power-cut injector.

use super::buffers::BufferPool;
use super::sources::ReadSources;
use super::{BufId, Cause, CopybackOp, Flash, FlashError, FlashObserver, FlashOp, OpKind, ProgramOp, ReadOp};
use crate::nand::payload::{Run, RunKind};
use crate::nand::power::PowerCutEffects;
use crate::nand::reliability::{Reliability, ReliabilityStats};
use crate::nand::{BlockAddr, Geometry, Nand, PageAddr};
use crate::violation::{Checker, FlashSource, Rule, RuleConfig, Severity, SourceLookup, ViolationLog};
use serde::Serialize;

/// Operation counts of one cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    pub page_reads: u64,
    pub oob_reads: u64,
    pub meta_reads: u64,
    pub page_programs: u64,
    pub meta_programs: u64,
    pub copybacks: u64,
    pub block_erases: u64,
}

impl OpCounts {
    /// Pages programmed, including metadata pages and copyback destinations.
    pub fn programs(&self) -> u64 {
        self.page_programs + self.meta_programs + self.copybacks
    }
    fn add(&mut self, kind: OpKind, n: u64) {
        match kind {
            OpKind::Read => self.page_reads += n,
            OpKind::ReadOob => self.oob_reads += n,
            OpKind::ReadMeta => self.meta_reads += n,
            OpKind::Program => self.page_programs += n,
            OpKind::ProgramMeta => self.meta_programs += n,
            OpKind::Copyback => self.copybacks += n,
            OpKind::Erase => self.block_erases += n,
        }
    }
    pub fn plus(&self, o: &OpCounts) -> OpCounts {
        OpCounts {
            page_reads: self.page_reads + o.page_reads,
            oob_reads: self.oob_reads + o.oob_reads,
            meta_reads: self.meta_reads + o.meta_reads,
            page_programs: self.page_programs + o.page_programs,
            meta_programs: self.meta_programs + o.meta_programs,
            copybacks: self.copybacks + o.copybacks,
            block_erases: self.block_erases + o.block_erases,
        }
    }
}

/// Operation counts by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlashStats {
    by_cause: [OpCounts; Cause::ALL.len()],
}

impl FlashStats {
    pub fn cause(&self, cause: Cause) -> &OpCounts {
        &self.by_cause[cause as usize]
    }
    pub fn total(&self) -> OpCounts {
        self.by_cause.iter().fold(OpCounts::default(), |a, c| a.plus(c))
    }
    /// Flash operations of any kind.
    pub fn operations(&self) -> u64 {
        let t = self.total();
        t.page_reads + t.oob_reads + t.meta_reads + t.page_programs + t.meta_programs + t.copybacks + t.block_erases
    }
}

/// The flash controller.
pub struct FlashController {
    nand: Nand,
    bufs: BufferPool,
    ftl_owned: Vec<bool>,
    stats: FlashStats,
    severities: [Severity; Rule::ALL.len()],
    log: ViolationLog,
    op_index: u64,
    request: Option<u64>,
    dram_budget_bytes: u64,
    ftl_buffer_bytes: u64,
    observers: Vec<Box<dyn FlashObserver>>,
    runs: Vec<Run>,
    power: PowerState,
    /// Which flash page filled which buffer sectors in this request.
    sources: ReadSources,
    /// The media reliability model, when it is on (see [`crate::nand::reliability`]).
    reliability: Option<Box<Reliability>>,
    /// The runs of the page being programmed (reliability model on).
    programmed_runs: Vec<Run>,
}

/// A scheduled power cut: at flash operation `op_index`, before it takes
/// effect (`during: false`) or while it runs (`during: true`, tearing it).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PowerCut {
    pub op_index: u64,
    pub during: bool,
}

/// The power-cut injector's state (see [`crate::nand::power`]).
#[derive(Clone, Debug)]
struct PowerState {
    /// Operations from this index on find the power cut (u64::MAX: none scheduled).
    cut_at: u64,
    during: bool,
    effects: PowerCutEffects,
    /// The operation at `cut_at` ran and must be torn when it finishes.
    tear_pending: bool,
    /// Journal length when the operation to tear began: its entries are the
    /// ones after this mark. (Not "the entries tagged with its index": a
    /// crash test's recovery reuses operation indices of the base run,
    /// whose rolled-back entries stay in the journal for the redo, so a
    /// read — which journals nothing — would otherwise tear whatever the
    /// base run did at the same index.)
    tear_from: usize,
    /// The reliability model's journal length then (the same for its entries).
    model_tear_from: usize,
    /// Pages and blocks the last live cut damaged.
    torn: (u32, u32),
    /// The journal was started for a live cut (stopped when power returns).
    journal_started: bool,
}

/// The controller's state outside the NAND, saved while a crash image is
/// tested on the drive (see [`FlashController::enter_crash_image`]).
pub struct CrashImage {
    op_index: u64,
    stats: FlashStats,
    log: ViolationLog,
    dram: (BufferPool, Vec<bool>, u64),
    /// Journal entries of the base run: `undone .. end` were rolled back.
    undone: usize,
    end: usize,
    /// The same of the reliability model's journal (when the model is on).
    model_undone: usize,
    model_end: usize,
    /// Pages and blocks the cut damaged.
    pub torn_pages: u32,
    pub torn_blocks: u32,
}

/// A checker for the operation `$op`, borrowing only the fields it needs.
macro_rules! checker {
    ($s:ident, $op:expr) => {
        Checker::new(&$s.severities, &mut $s.log, $op.op_index, $op.request_id)
    };
}

impl FlashController {
    pub fn new(nand: Nand, rules: &RuleConfig, dram_budget_bytes: u64, keep_violations: usize) -> Self {
        let spp = nand.geometry().sectors_per_page() as usize;
        FlashController {
            nand,
            bufs: BufferPool::default(),
            ftl_owned: Vec::new(),
            stats: FlashStats::default(),
            severities: rules.table(),
            log: ViolationLog::new(keep_violations),
            op_index: 0,
            request: None,
            dram_budget_bytes,
            ftl_buffer_bytes: 0,
            observers: Vec::new(),
            runs: Vec::with_capacity(spp + 2),
            power: PowerState {
                cut_at: u64::MAX,
                during: false,
                effects: PowerCutEffects::default(),
                tear_pending: false,
                tear_from: 0,
                model_tear_from: 0,
                torn: (0, 0),
                journal_started: false,
            },
            sources: ReadSources::default(),
            reliability: None,
            programmed_runs: Vec::new(),
        }
    }

    /// Turn the media reliability model on (before the format).
    pub fn set_reliability(&mut self, reliability: Reliability) {
        self.reliability = Some(Box::new(reliability));
    }
    /// The reliability model, when it is on.
    pub fn reliability(&self) -> Option<&Reliability> {
        self.reliability.as_deref()
    }
    pub fn reliability_mut(&mut self) -> Option<&mut Reliability> {
        self.model_mut()
    }
    /// The reliability model, its journal's next entries tagged with the
    /// flash operation in progress (between operations: the last one
    /// begun). Tagged here, not in every operation's bookkeeping, so that
    /// a run without the model pays nothing for it.
    #[inline]
    fn model_mut(&mut self) -> Option<&mut Reliability> {
        let op = self.op_index.saturating_sub(1);
        let r = self.reliability.as_deref_mut()?;
        r.journal_set_op(op);
        Some(r)
    }
    /// What the reliability model did, when it is on.
    pub fn reliability_stats(&self) -> Option<ReliabilityStats> {
        self.reliability.as_ref().map(|r| r.stats())
    }

    pub fn nand(&self) -> &Nand {
        &self.nand
    }
    pub fn nand_mut(&mut self) -> &mut Nand {
        &mut self.nand
    }
    pub fn stats(&self) -> &FlashStats {
        &self.stats
    }
    pub fn log(&self) -> &ViolationLog {
        &self.log
    }
    pub fn log_mut(&mut self) -> &mut ViolationLog {
        &mut self.log
    }
    /// Operations issued so far (the index the next one gets).
    pub fn op_index(&self) -> u64 {
        self.op_index
    }
    pub fn severities(&self) -> &[Severity; Rule::ALL.len()] {
        &self.severities
    }
    /// A checker for findings outside a flash operation (the oracle's).
    pub fn checker(&mut self) -> Checker<'_> {
        Checker::new(&self.severities, &mut self.log, self.op_index, self.request)
    }
    pub fn add_observer(&mut self, o: Box<dyn FlashObserver>) {
        self.observers.push(o);
    }
    pub fn observers_mut(&mut self) -> &mut Vec<Box<dyn FlashObserver>> {
        &mut self.observers
    }
    /// The host request the FTL is now serving (None: background work).
    /// Read sources are per request: they start over here.
    pub fn set_request(&mut self, request: Option<u64>) {
        self.request = request;
        self.sources.clear();
        if let Some(r) = self.model_mut() {
            r.start_request(request.is_some());
        }
    }
    pub fn request(&self) -> Option<u64> {
        self.request
    }

    // ----- host-side buffers (the host interface's, not the FTL's) -----

    /// A buffer holding host write `write` of sectors `lba .. lba+sectors`.
    #[inline]
    pub fn alloc_host_write(&mut self, lba: u32, write: u32, sectors: u32) -> BufId {
        let id = self.bufs.alloc_data(lba, write, sectors);
        self.set_owner(id, false);
        id
    }
    /// An empty buffer for a host read (every sector unfilled).
    pub fn alloc_host_read(&mut self, sectors: u32) -> BufId {
        let id = self.bufs.alloc(sectors, RunKind::Unfilled);
        self.set_owner(id, false);
        id
    }
    pub fn buffer_runs(&self, id: BufId) -> Result<&[Run], FlashError> {
        self.bufs.runs(id)
    }
    /// Let a checker inspect a host buffer's runs (the oracle checking a
    /// read); its findings can name the flash page each sector came from.
    pub fn inspect_buffer(&mut self, id: BufId, check: impl FnOnce(&[Run], &mut Checker)) -> Result<(), FlashError> {
        let runs = self.bufs.runs(id)?;
        let lookup =
            BufferSources { sources: &self.sources, buf: id, pages_per_block: self.nand.geometry().pages_per_block() };
        let mut ck = Checker::new(&self.severities, &mut self.log, self.op_index, self.request);
        ck.sources = Some(&lookup);
        check(runs, &mut ck);
        Ok(())
    }

    /// Where sector `sector` of buffer `id` came from in this request.
    pub fn buffer_source(&self, id: BufId, sector: u32) -> Option<FlashSource> {
        self.sources.lookup(id, sector, self.nand.geometry().pages_per_block())
    }

    pub fn free_host_buffer(&mut self, id: BufId) {
        self.bufs.free(id);
    }
    /// Buffers the FTL holds now and their bytes.
    pub fn ftl_buffer_bytes(&self) -> u64 {
        self.ftl_buffer_bytes
    }

    fn set_owner(&mut self, id: BufId, ftl: bool) {
        let i = id.index() as usize;
        if self.ftl_owned.len() <= i {
            self.ftl_owned.resize(i + 1, false);
        }
        self.ftl_owned[i] = ftl;
    }

    // ----- operation bookkeeping -----

    #[inline]
    fn begin(
        &mut self,
        kind: OpKind,
        cause: Cause,
        address: u64,
        source: Option<u64>,
        planes: u32,
        transfer_bytes: u32,
        buffer: Option<BufId>,
    ) -> Result<FlashOp, FlashError> {
        let op = FlashOp {
            kind,
            cause,
            request_id: self.request,
            op_index: self.op_index,
            address,
            source,
            planes,
            transfer_bytes,
            buffer,
            read_retries: 0,
            decode_ns: 0,
        };
        self.op_index += 1;
        if op.op_index >= self.power.cut_at {
            self.power_gate(op.op_index)?;
        }
        self.nand.journal_set_op(op.op_index);
        for o in &mut self.observers {
            o.before_op(&op)?;
        }
        Ok(op)
    }

    #[inline]
    fn finish(&mut self, op: &FlashOp) -> Result<(), FlashError> {
        self.stats.by_cause[op.cause as usize].add(op.kind, u64::from(op.planes));
        for o in &mut self.observers {
            o.after_op(op);
        }
        if self.power.tear_pending {
            return self.tear_and_power_off();
        }
        Ok(())
    }

    fn sector_bytes(&self, sectors: u32) -> u32 {
        sectors.saturating_mul(self.nand.geometry().sector_size_bytes())
    }

    fn page_bytes(&self) -> u32 {
        self.nand.geometry().page_size_bytes()
    }

    /// Check every page of a multi-plane operation (see [`Nand::check_multi_plane`]).
    fn check_planes(&mut self, op: &FlashOp, pages: impl Iterator<Item = PageAddr> + Clone) -> bool {
        let mut ck = checker!(self, op);
        self.nand.check_multi_plane(&mut ck, pages)
    }

    /// A multi-plane operation failed with `error` after `done` of its
    /// pages (or blocks) took effect: those are counted and shown to the
    /// observers as an operation of `done` planes, moving `done_bytes`.
    #[cold]
    fn fail_multi(&mut self, op: &FlashOp, done: usize, done_bytes: u32, error: FlashError) -> Result<(), FlashError> {
        if done > 0 {
            let partial = FlashOp { planes: done as u32, transfer_bytes: done_bytes, ..*op };
            self.finish(&partial)?;
        }
        Err(error)
    }

    /// Program a page from a buffer, without bookkeeping (shared by single and multi-plane).
    fn program_page(
        &mut self,
        op: &FlashOp,
        page: PageAddr,
        src: BufId,
        src_sector: u32,
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let spp = self.nand.geometry().sectors_per_page();
        let runs = self.bufs.range(src, src_sector, spp, &mut self.runs)?;
        let mut ck = checker!(self, op);
        if self.reliability.is_none() {
            return self.nand.program(&mut ck, page, runs, oob);
        }
        // (`runs` may be the buffer's own: keep a copy for a failure.)
        let mut programmed = std::mem::take(&mut self.programmed_runs);
        programmed.clear();
        programmed.extend_from_slice(runs);
        self.refuse_grown_bad(op, page)?;
        let mut ck = checker!(self, op);
        let result = self.nand.program(&mut ck, page, &programmed, oob);
        let failed = result.is_ok() && can_fail(op.cause) && self.program_fails(page);
        if failed && op.cause == Cause::Host {
            // (A GC copy's data is still at its source: only host data is lost with the page.)
            if let Some(r) = self.model_mut() {
                r.record_failed_program(&programmed);
            }
        }
        self.programmed_runs = programmed;
        result?;
        if failed {
            self.nand.corrupt_page(page);
            return Err(FlashError::ProgramFailed);
        }
        Ok(())
    }

    /// A read with the reliability model on: its retries and decode time
    /// go on `op` for the timing model. An uncorrectable read took its
    /// time too (every retry), so the observers see it before the error
    /// goes to the FTL.
    #[cold]
    fn finish_decoded_read(&mut self, op: &mut FlashOp, result: Result<(), FlashError>) -> Result<(), FlashError> {
        let d = self.model_mut().expect("reliability on").take_op_decode();
        op.read_retries = d.retries;
        op.decode_ns = d.decode_ns;
        match result {
            Ok(()) => self.finish(op),
            Err(FlashError::Uncorrectable) => {
                self.finish(op)?;
                Err(FlashError::Uncorrectable)
            }
            Err(e) => Err(e),
        }
    }

    /// After a program of `page` took effect, with the reliability model
    /// on: whether it failed.
    #[cold]
    fn program_fails(&mut self, page: PageAddr) -> bool {
        let block = self.nand.geometry().block_of(page);
        let pe = self.nand.erase_count(block);
        let r = self.model_mut().expect("reliability on");
        r.program_fails(page, pe)
    }

    /// After a metadata program or a copyback to `page` took effect, with
    /// the reliability model on: fail it (the page left unreadable) if the
    /// model says so.
    #[cold]
    fn fail_if_program_fails(&mut self, cause: Cause, page: PageAddr) -> Result<(), FlashError> {
        if can_fail(cause) && self.program_fails(page) {
            self.nand.corrupt_page(page);
            return Err(FlashError::ProgramFailed);
        }
        Ok(())
    }

    /// A program of a page of a grown bad block: `used_bad_block`, refused.
    fn refuse_grown_bad(&mut self, op: &FlashOp, page: PageAddr) -> Result<(), FlashError> {
        let block = self.nand.geometry().block_of(page);
        self.refuse_grown_bad_block(op, block, "program")
    }

    /// A program or erase of a grown bad block: `used_bad_block`, refused.
    fn refuse_grown_bad_block(&mut self, op: &FlashOp, block: BlockAddr, what: &str) -> Result<(), FlashError> {
        if self.reliability.as_deref().is_some_and(|r| r.is_grown_bad(block)) {
            let mut ck = checker!(self, op);
            ck.flag(Rule::UsedBadBlock, block.0, || {
                format!("{what} of grown bad block {} (it failed before)", block.0)
            });
            return Err(FlashError::BadBlock);
        }
        Ok(())
    }

    /// An erase of `block`, through the reliability model when it is on.
    fn erase_block(&mut self, op: &FlashOp, block: BlockAddr) -> Result<(), FlashError> {
        if self.reliability.is_some() && block.0 < u64::from(self.nand.geometry().blocks()) && !self.nand.is_bad(block)
        {
            self.refuse_grown_bad_block(op, block, "erase")?;
            let pe = self.nand.erase_count(block);
            let r = self.model_mut().expect("reliability on");
            if r.erase_fails(block, pe, op.cause == Cause::Format) {
                return Err(FlashError::EraseFailed);
            }
        }
        let mut ck = checker!(self, op);
        self.nand.erase(&mut ck, block)
    }

    fn read_page(
        &mut self,
        op: &FlashOp,
        page: PageAddr,
        first: u32,
        sectors: u32,
        dst: BufId,
        dst_sector: u32,
        oob: &mut [u8],
    ) -> Result<(), FlashError> {
        // Validate the destination first so a bad handle does not half-complete the read.
        if self.bufs.sectors(dst)? < dst_sector.saturating_add(sectors) {
            return Err(FlashError::InvalidBuffer);
        }
        self.runs.clear();
        let mut ck = checker!(self, op);
        self.nand.read(&mut ck, page, first, sectors, &mut self.runs)?;
        if !oob.is_empty() {
            self.nand.read_oob(&mut ck, page, oob)?;
        }
        if let Some(r) = self.reliability.as_deref_mut() {
            r.journal_set_op(op.op_index);
            let pe = self.nand.erase_count(self.nand.geometry().block_of(page));
            if !r.decode_read(page, pe, first, sectors, &self.runs) {
                // The raw, undecodable data reaches the buffer.
                let garbage = [Run::filler(RunKind::Garbage, sectors)];
                self.bufs.write_runs(dst, dst_sector, &garbage)?;
                self.sources.record_read(dst, dst_sector, sectors, page.0, first, op.op_index);
                return Err(FlashError::Uncorrectable);
            }
        }
        self.bufs.write_runs(dst, dst_sector, &self.runs)?;
        self.sources.record_read(dst, dst_sector, sectors, page.0, first, op.op_index);
        Ok(())
    }
}

impl Flash for FlashController {
    fn geometry(&self) -> &Geometry {
        self.nand.geometry()
    }
    fn dram_budget_bytes(&self) -> u64 {
        self.dram_budget_bytes
    }
    fn now_ns(&self) -> Option<u64> {
        self.observers.iter().find_map(|o| o.now_ns())
    }
    fn die_busy_until_ns(&self, die: u32) -> Option<u64> {
        self.observers.iter().find_map(|o| o.die_busy_until_ns(die))
    }
    fn is_factory_bad(&self, block: BlockAddr) -> bool {
        // A grown bad block carries the marker a retiring firmware writes
        // (see `crate::nand::reliability`).
        self.nand.is_bad(block) || self.reliability.as_deref().is_some_and(|r| r.is_grown_bad(block))
    }
    fn is_grown_bad(&self, block: BlockAddr) -> bool {
        !self.nand.is_bad(block) && self.reliability.as_deref().is_some_and(|r| r.is_grown_bad(block))
    }
    fn predicted_rber(&self, block: BlockAddr) -> Option<super::PredictedRber> {
        let r = self.reliability.as_deref()?;
        (block.0 < u64::from(self.nand.geometry().blocks()))
            .then(|| r.predicted_rber(block, self.nand.erase_count(block)))
    }
    fn prefetch_page(&self, page: PageAddr) {
        self.nand.prefetch_page(page);
    }

    fn read(
        &mut self,
        cause: Cause,
        page: PageAddr,
        first_sector: u32,
        sectors: u32,
        dst: BufId,
        dst_sector: u32,
        oob: &mut [u8],
    ) -> Result<(), FlashError> {
        let bytes = self.sector_bytes(sectors);
        let mut op = self.begin(OpKind::Read, cause, page.0, None, 1, bytes, Some(dst))?;
        let result = self.read_page(&op, page, first_sector, sectors, dst, dst_sector, oob);
        if self.reliability.is_some() {
            return self.finish_decoded_read(&mut op, result);
        }
        result?;
        self.finish(&op)
    }

    fn read_oob(&mut self, cause: Cause, page: PageAddr, oob: &mut [u8]) -> Result<(), FlashError> {
        let op = self.begin(OpKind::ReadOob, cause, page.0, None, 1, oob.len() as u32, None)?;
        let mut ck = checker!(self, op);
        self.nand.read_oob(&mut ck, page, oob)?;
        self.finish(&op)
    }

    fn read_meta(&mut self, cause: Cause, page: PageAddr, data: &mut [u8], oob: &mut [u8]) -> Result<(), FlashError> {
        let op = self.begin(OpKind::ReadMeta, cause, page.0, None, 1, (data.len() + oob.len()) as u32, None)?;
        let mut ck = checker!(self, op);
        self.nand.read_meta(&mut ck, page, data)?;
        if !oob.is_empty() {
            self.nand.read_oob(&mut ck, page, oob)?;
        }
        self.finish(&op)
    }

    fn read_meta_at(
        &mut self,
        cause: Cause,
        page: PageAddr,
        offset_bytes: u32,
        data: &mut [u8],
    ) -> Result<(), FlashError> {
        let op = self.begin(OpKind::ReadMeta, cause, page.0, None, 1, data.len() as u32, None)?;
        let mut ck = checker!(self, op);
        self.nand.read_meta_at(&mut ck, page, offset_bytes as usize, data)?;
        self.finish(&op)
    }

    fn program(
        &mut self,
        cause: Cause,
        page: PageAddr,
        src: BufId,
        src_sector: u32,
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let bytes = self.page_bytes();
        let op = self.begin(OpKind::Program, cause, page.0, None, 1, bytes, Some(src))?;
        self.program_page(&op, page, src, src_sector, oob)?;
        self.finish(&op)
    }

    fn program_meta(&mut self, cause: Cause, page: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError> {
        let bytes = self.page_bytes();
        let op = self.begin(OpKind::ProgramMeta, cause, page.0, None, 1, bytes, None)?;
        if self.reliability.is_some() {
            self.refuse_grown_bad(&op, page)?;
        }
        let mut ck = checker!(self, op);
        self.nand.program_meta(&mut ck, page, data, oob)?;
        if self.reliability.is_some() {
            self.fail_if_program_fails(cause, page)?;
        }
        self.finish(&op)
    }

    fn copyback(&mut self, cause: Cause, src: PageAddr, dst: PageAddr, oob: Option<&[u8]>) -> Result<(), FlashError> {
        let op = self.begin(OpKind::Copyback, cause, dst.0, Some(src.0), 1, 0, None)?;
        if self.reliability.is_some() {
            self.refuse_grown_bad(&op, dst)?;
        }
        let mut ck = checker!(self, op);
        self.nand.copyback(&mut ck, src, dst, oob)?;
        if self.reliability.is_some() {
            self.fail_if_program_fails(cause, dst)?;
        }
        self.finish(&op)
    }

    fn erase(&mut self, cause: Cause, block: BlockAddr) -> Result<(), FlashError> {
        let op = self.begin(OpKind::Erase, cause, block.0, None, 1, 0, None)?;
        self.erase_block(&op, block)?;
        self.finish(&op)
    }

    fn program_multi(&mut self, cause: Cause, ops: &[ProgramOp]) -> Result<(), FlashError> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let bytes = self.page_bytes() * ops.len() as u32;
        let op = self.begin(OpKind::Program, cause, first.page.0, None, ops.len() as u32, bytes, Some(first.src))?;
        self.check_planes(&op, ops.iter().map(|o| o.page));
        for (done, o) in ops.iter().enumerate() {
            if let Err(e) = self.program_page(&op, o.page, o.src, o.src_sector, o.oob) {
                return self.fail_multi(&op, done, self.page_bytes() * done as u32, e);
            }
        }
        self.finish(&op)
    }

    fn read_multi(&mut self, cause: Cause, ops: &[ReadOp]) -> Result<(), FlashError> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let bytes = self.page_bytes() * ops.len() as u32;
        let mut op = self.begin(OpKind::Read, cause, first.page.0, None, ops.len() as u32, bytes, Some(first.dst))?;
        self.check_planes(&op, ops.iter().map(|o| o.page));
        let spp = self.nand.geometry().sectors_per_page();
        for (done, o) in ops.iter().enumerate() {
            if let Err(e) = self.read_page(&op, o.page, 0, spp, o.dst, o.dst_sector, &mut []) {
                if e == FlashError::Uncorrectable {
                    // The failing page was read (with every retry) too.
                    op = FlashOp {
                        planes: done as u32 + 1,
                        transfer_bytes: self.page_bytes() * (done as u32 + 1),
                        ..op
                    };
                    return self.finish_decoded_read(&mut op, Err(e));
                }
                return self.fail_multi(&op, done, self.page_bytes() * done as u32, e);
            }
        }
        if self.reliability.is_some() {
            return self.finish_decoded_read(&mut op, Ok(()));
        }
        self.finish(&op)
    }

    fn erase_multi(&mut self, cause: Cause, blocks: &[BlockAddr]) -> Result<(), FlashError> {
        let Some(first) = blocks.first() else {
            return Ok(());
        };
        let op = self.begin(OpKind::Erase, cause, first.0, None, blocks.len() as u32, 0, None)?;
        let ppb = u64::from(self.nand.geometry().pages_per_block());
        self.check_planes(&op, blocks.iter().map(|b| PageAddr(b.0 * ppb)));
        for (done, b) in blocks.iter().enumerate() {
            if let Err(e) = self.erase_block(&op, *b) {
                return self.fail_multi(&op, done, 0, e);
            }
        }
        self.finish(&op)
    }

    fn copyback_multi(&mut self, cause: Cause, ops: &[CopybackOp]) -> Result<(), FlashError> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let op = self.begin(OpKind::Copyback, cause, first.dst.0, Some(first.src.0), ops.len() as u32, 0, None)?;
        // The read half is a multi-plane read: its pages must agree as well.
        if self.check_planes(&op, ops.iter().map(|o| o.dst)) {
            self.check_planes(&op, ops.iter().map(|o| o.src));
        }
        for (done, o) in ops.iter().enumerate() {
            if self.reliability.is_some() {
                if let Err(e) = self.refuse_grown_bad(&op, o.dst) {
                    return self.fail_multi(&op, done, 0, e);
                }
            }
            let mut ck = checker!(self, op);
            let mut result = self.nand.copyback(&mut ck, o.src, o.dst, o.oob);
            if result.is_ok() && self.reliability.is_some() {
                result = self.fail_if_program_fails(cause, o.dst);
            }
            if let Err(e) = result {
                return self.fail_multi(&op, done, 0, e);
            }
        }
        self.finish(&op)
    }

    fn buf_alloc(&mut self, sectors: u32) -> Result<BufId, FlashError> {
        let bytes = u64::from(self.sector_bytes(sectors));
        if self.ftl_buffer_bytes + bytes > self.dram_budget_bytes {
            return Err(FlashError::DramExhausted);
        }
        self.ftl_buffer_bytes += bytes;
        let id = self.bufs.alloc(sectors, RunKind::Erased);
        self.set_owner(id, true);
        Ok(id)
    }

    fn buf_free(&mut self, buf: BufId) {
        // Only the FTL's own live buffers; host buffers belong to the host
        // interface, and a stale handle names nothing.
        let i = buf.index() as usize;
        if self.ftl_owned.get(i).copied().unwrap_or(false) && self.bufs.is_live(buf) {
            if let Ok(sectors) = self.bufs.sectors(buf) {
                self.ftl_buffer_bytes -= u64::from(self.sector_bytes(sectors));
            }
            self.ftl_owned[i] = false;
            self.bufs.free(buf);
        }
    }

    fn buf_copy(
        &mut self,
        dst: BufId,
        dst_sector: u32,
        src: BufId,
        src_sector: u32,
        sectors: u32,
    ) -> Result<(), FlashError> {
        self.bufs.copy(dst, dst_sector, src, src_sector, sectors)?;
        self.sources.record_copy(dst, dst_sector, src, src_sector, sectors);
        Ok(())
    }

    fn buf_zero(&mut self, dst: BufId, dst_sector: u32, sectors: u32) -> Result<(), FlashError> {
        self.bufs.fill(dst, dst_sector, sectors, RunKind::Zero)?;
        self.sources.record_fill(dst, dst_sector, sectors);
        Ok(())
    }

    fn prefetch_meta(&self, page: PageAddr, offset_bytes: u32) {
        self.nand.prefetch_meta(page, offset_bytes as usize);
    }
}

/// Whether a program of `cause` may fail (reliability model on): every
/// program after the format but a mount's (recovery programs are the
/// mount's own repair, which this model leaves alone).
fn can_fail(cause: Cause) -> bool {
    !matches!(cause, Cause::Format | Cause::Recovery)
}

/// The read sources of one buffer, as a checker looks them up.
struct BufferSources<'a> {
    sources: &'a ReadSources,
    buf: BufId,
    pages_per_block: u32,
}

impl SourceLookup for BufferSources<'_> {
    fn source(&self, buffer_sector: u32) -> Option<FlashSource> {
        self.sources.lookup(self.buf, buffer_sector, self.pages_per_block)
    }
}

/// Violations a crash test keeps in full.
const CRASH_LOG_KEEP: usize = 20;

/// Power cuts (see [`crate::nand::power`] for what a cut does to flash).
impl FlashController {
    /// Set which effects a power cut has.
    pub fn set_power_cut_effects(&mut self, effects: PowerCutEffects) {
        self.power.effects = effects;
    }
    pub fn power_cut_effects(&self) -> PowerCutEffects {
        self.power.effects
    }

    /// Cut the power at a future operation: from then on every operation
    /// fails with [`FlashError::PowerLoss`] until [`FlashController::restore_power`].
    pub fn schedule_power_cut(&mut self, cut: PowerCut) {
        self.power.cut_at = cut.op_index;
        self.power.during = cut.during;
        if cut.during && !self.nand.journal_active() {
            // A torn operation is found from the entries it journals.
            self.nand.journal_start();
            if let Some(r) = self.reliability.as_deref_mut() {
                r.journal_start();
            }
            self.power.journal_started = true;
        }
    }

    /// Pages and blocks the last live cut tore, reset to none.
    pub fn take_torn(&mut self) -> (u32, u32) {
        std::mem::take(&mut self.power.torn)
    }

    /// Whether the power is off (a scheduled cut happened).
    pub fn power_is_off(&self) -> bool {
        self.op_index > self.power.cut_at
    }

    /// Power back on: no cut scheduled, operations succeed again.
    pub fn restore_power(&mut self) {
        self.power.cut_at = u64::MAX;
        self.power.tear_pending = false;
        if std::mem::take(&mut self.power.journal_started) {
            self.nand.journal_stop();
            if let Some(r) = self.reliability.as_deref_mut() {
                r.journal_stop();
            }
        }
    }

    /// An operation at or after the scheduled cut: let the cut operation run
    /// (to be torn when it finishes) or fail it.
    #[cold]
    fn power_gate(&mut self, index: u64) -> Result<(), FlashError> {
        if index == self.power.cut_at && self.power.during {
            self.power.tear_pending = true;
            self.power.tear_from = self.nand.journal_len();
            self.power.model_tear_from = self.reliability.as_deref().map_or(0, |r| r.journal_len());
            return Ok(());
        }
        self.power.tear_pending = false;
        if index == self.power.cut_at {
            self.lose_dram();
        }
        Err(FlashError::PowerLoss)
    }

    #[cold]
    fn tear_and_power_off(&mut self) -> Result<(), FlashError> {
        self.power.tear_pending = false;
        let entries = self.power.tear_from..self.nand.journal_len();
        let effects = self.power.effects;
        self.power.torn = self.nand.tear_operation(entries, &effects);
        // The torn operation reported no status: what the model drew for
        // it never happened (see `crate::nand::reliability::journal`).
        let model_from = self.power.model_tear_from;
        if let Some(r) = self.reliability.as_deref_mut().filter(|r| r.journal_active()) {
            r.journal_rollback(model_from);
        }
        self.lose_dram();
        Err(FlashError::PowerLoss)
    }

    /// The device DRAM loses the FTL's buffers (when the effect is on).
    fn lose_dram(&mut self) {
        if self.power.effects.write_cache_lost {
            self.release_ftl_buffers();
        }
    }

    /// Free every buffer the FTL holds (its DRAM is gone: a power cycle).
    /// Their handles become stale: a later FTL instance cannot use them.
    pub fn release_ftl_buffers(&mut self) {
        for (i, owned) in self.ftl_owned.iter_mut().enumerate() {
            if std::mem::take(owned) {
                self.bufs.free_slot(i as u32);
            }
        }
        self.ftl_buffer_bytes = 0;
    }

    /// Turn the drive into the image a power cut at `cut` leaves, for a
    /// crash test, and save what the base run needs to carry on
    /// ([`FlashController::leave_crash_image`]). The cut must fall in the
    /// operations journaled since the NAND journal was last committed (the
    /// last host request): those after it are rolled back, the cut one is
    /// torn if the cut is `during` it. The device DRAM is lost (or, without
    /// `write_cache_lost`, kept for the caller's emergency flush). The
    /// violation log starts empty; [`FlashController::take_log`] hands it over.
    pub fn enter_crash_image(&mut self, cut: PowerCut) -> CrashImage {
        let end = self.nand.journal_len();
        let keep_through = cut.op_index + u64::from(cut.during);
        let undone = self.nand.journal_first_at_or_after(keep_through, end);
        self.nand.journal_undo(undone, end);
        let (mut torn_pages, mut torn_blocks) = (0, 0);
        if cut.during {
            let first = self.nand.journal_first_at_or_after(cut.op_index, undone);
            self.nand.journal_set_op(cut.op_index);
            (torn_pages, torn_blocks) = self.nand.tear_operation(first..undone, &self.power.effects.clone());
        }
        // The model rolls back to before the cut operation, torn or not
        // (see `crate::nand::reliability::journal`).
        let (model_undone, model_end) = match self.reliability.as_deref_mut() {
            Some(r) => {
                let model_end = r.journal_len();
                let model_undone = r.journal_first_at_or_after(cut.op_index, model_end);
                r.journal_undo(model_undone, model_end);
                (model_undone, model_end)
            }
            None => (0, 0),
        };
        let image = CrashImage {
            op_index: self.op_index,
            stats: self.stats.clone(),
            log: std::mem::replace(&mut self.log, ViolationLog::new(CRASH_LOG_KEEP)),
            dram: (self.bufs.clone(), self.ftl_owned.clone(), self.ftl_buffer_bytes),
            undone,
            end,
            model_undone,
            model_end,
            torn_pages,
            torn_blocks,
        };
        self.op_index = keep_through;
        self.lose_dram();
        image
    }

    /// Undo everything since [`FlashController::enter_crash_image`] and put
    /// the base run's state back.
    pub fn leave_crash_image(&mut self, image: CrashImage) {
        self.restore_power();
        self.nand.journal_rollback(image.end);
        self.nand.journal_redo(image.undone, image.end);
        if let Some(r) = self.reliability.as_deref_mut() {
            r.journal_rollback(image.model_end);
            r.journal_redo(image.model_undone, image.model_end);
        }
        self.op_index = image.op_index;
        self.stats = image.stats;
        self.log = image.log;
        (self.bufs, self.ftl_owned, self.ftl_buffer_bytes) = image.dram;
    }

    /// Set the index of the next operation (a crash test rewinding a recovery it rolled back).
    pub fn reset_op_index(&mut self, op_index: u64) {
        self.op_index = op_index;
    }

    /// Take the violation log (leaving an empty one).
    pub fn take_log(&mut self) -> ViolationLog {
        std::mem::replace(&mut self.log, ViolationLog::new(CRASH_LOG_KEEP))
    }
}

#[cfg(test)]
mod tests;
