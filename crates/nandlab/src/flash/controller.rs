//! The flash controller: the one implementation of [`Flash`].
//!
//! It owns the virtual NAND, the data buffers, the operation counters and
//! the violation log, and calls the registered [`FlashObserver`]s around
//! every operation. Untimed `stress` runs register none; `perf` registers a
//! timing model, `crash` a power-cut injector.

use super::buffers::BufferPool;
use super::{BufId, Cause, Flash, FlashError, FlashObserver, FlashOp, OpKind, ProgramOp, ReadOp};
use crate::nand::payload::{Run, RunKind};
use crate::nand::{BlockAddr, Geometry, Nand, PageAddr};
use crate::violation::{Checker, Rule, RuleConfig, Severity, ViolationLog};
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
}

/// A checker for the operation `$op`, borrowing only the fields it needs.
macro_rules! checker {
    ($s:ident, $op:expr) => {
        Checker { severities: &$s.severities, log: &mut $s.log, op_index: $op.op_index, request_id: $op.request_id }
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
        }
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
        Checker { severities: &self.severities, log: &mut self.log, op_index: self.op_index, request_id: self.request }
    }
    pub fn add_observer(&mut self, o: Box<dyn FlashObserver>) {
        self.observers.push(o);
    }
    pub fn observers_mut(&mut self) -> &mut Vec<Box<dyn FlashObserver>> {
        &mut self.observers
    }
    /// The host request the FTL is now serving (None: background work).
    pub fn set_request(&mut self, request: Option<u64>) {
        self.request = request;
    }
    pub fn request(&self) -> Option<u64> {
        self.request
    }

    // ----- host-side buffers (the host interface's, not the FTL's) -----

    /// A buffer holding host write `write` of sectors `lba .. lba+sectors`.
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
    /// Let a checker inspect a host buffer's runs (the oracle checking a read).
    pub fn inspect_buffer(&mut self, id: BufId, check: impl FnOnce(&[Run], &mut Checker)) -> Result<(), FlashError> {
        let runs = self.bufs.runs(id)?;
        let mut ck = Checker {
            severities: &self.severities,
            log: &mut self.log,
            op_index: self.op_index,
            request_id: self.request,
        };
        check(runs, &mut ck);
        Ok(())
    }

    pub fn free_host_buffer(&mut self, id: BufId) {
        self.bufs.free(id);
    }
    /// Buffers the FTL holds now and their bytes.
    pub fn ftl_buffer_bytes(&self) -> u64 {
        self.ftl_buffer_bytes
    }

    fn set_owner(&mut self, id: BufId, ftl: bool) {
        let i = id.0 as usize;
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
        };
        self.op_index += 1;
        for o in &mut self.observers {
            o.before_op(&op)?;
        }
        Ok(op)
    }

    #[inline]
    fn finish(&mut self, op: &FlashOp) {
        self.stats.by_cause[op.cause as usize].add(op.kind, u64::from(op.planes));
        for o in &mut self.observers {
            o.after_op(op);
        }
    }

    fn sector_bytes(&self, sectors: u32) -> u32 {
        sectors.saturating_mul(self.nand.geometry().sector_size_bytes())
    }

    fn page_bytes(&self) -> u32 {
        self.nand.geometry().page_size_bytes()
    }

    /// Check the pages of a multi-plane operation (up to 16 planes are compared).
    fn check_planes(&mut self, op: &FlashOp, pages: impl Iterator<Item = PageAddr>) {
        let mut list = [PageAddr(0); 16];
        let mut n = 0;
        for (slot, p) in list.iter_mut().zip(pages) {
            *slot = p;
            n += 1;
        }
        let mut ck = checker!(self, op);
        self.nand.check_multi_plane(&mut ck, &list[..n]);
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
        self.runs.clear();
        self.bufs.slice(src, src_sector, spp, &mut self.runs)?;
        let mut ck = checker!(self, op);
        self.nand.program(&mut ck, page, &self.runs, oob)
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
        self.bufs.write_runs(dst, dst_sector, &self.runs)
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
        self.nand.is_bad(block)
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
        let op = self.begin(OpKind::Read, cause, page.0, None, 1, bytes, Some(dst))?;
        self.read_page(&op, page, first_sector, sectors, dst, dst_sector, oob)?;
        self.finish(&op);
        Ok(())
    }

    fn read_oob(&mut self, cause: Cause, page: PageAddr, oob: &mut [u8]) -> Result<(), FlashError> {
        let op = self.begin(OpKind::ReadOob, cause, page.0, None, 1, oob.len() as u32, None)?;
        let mut ck = checker!(self, op);
        self.nand.read_oob(&mut ck, page, oob)?;
        self.finish(&op);
        Ok(())
    }

    fn read_meta(&mut self, cause: Cause, page: PageAddr, data: &mut [u8], oob: &mut [u8]) -> Result<(), FlashError> {
        let op = self.begin(OpKind::ReadMeta, cause, page.0, None, 1, (data.len() + oob.len()) as u32, None)?;
        let mut ck = checker!(self, op);
        self.nand.read_meta(&mut ck, page, data)?;
        if !oob.is_empty() {
            self.nand.read_oob(&mut ck, page, oob)?;
        }
        self.finish(&op);
        Ok(())
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
        self.finish(&op);
        Ok(())
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
        self.finish(&op);
        Ok(())
    }

    fn program_meta(&mut self, cause: Cause, page: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError> {
        let bytes = self.page_bytes();
        let op = self.begin(OpKind::ProgramMeta, cause, page.0, None, 1, bytes, None)?;
        let mut ck = checker!(self, op);
        self.nand.program_meta(&mut ck, page, data, oob)?;
        self.finish(&op);
        Ok(())
    }

    fn copyback(&mut self, cause: Cause, src: PageAddr, dst: PageAddr, oob: Option<&[u8]>) -> Result<(), FlashError> {
        let op = self.begin(OpKind::Copyback, cause, dst.0, Some(src.0), 1, 0, None)?;
        let mut ck = checker!(self, op);
        self.nand.copyback(&mut ck, src, dst, oob)?;
        self.finish(&op);
        Ok(())
    }

    fn erase(&mut self, cause: Cause, block: BlockAddr) -> Result<(), FlashError> {
        let op = self.begin(OpKind::Erase, cause, block.0, None, 1, 0, None)?;
        let mut ck = checker!(self, op);
        self.nand.erase(&mut ck, block)?;
        self.finish(&op);
        Ok(())
    }

    fn program_multi(&mut self, cause: Cause, ops: &[ProgramOp]) -> Result<(), FlashError> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let bytes = self.page_bytes() * ops.len() as u32;
        let op = self.begin(OpKind::Program, cause, first.page.0, None, ops.len() as u32, bytes, Some(first.src))?;
        self.check_planes(&op, ops.iter().map(|o| o.page));
        for o in ops {
            self.program_page(&op, o.page, o.src, o.src_sector, o.oob)?;
        }
        self.finish(&op);
        Ok(())
    }

    fn read_multi(&mut self, cause: Cause, ops: &[ReadOp]) -> Result<(), FlashError> {
        let Some(first) = ops.first() else {
            return Ok(());
        };
        let bytes = self.page_bytes() * ops.len() as u32;
        let op = self.begin(OpKind::Read, cause, first.page.0, None, ops.len() as u32, bytes, Some(first.dst))?;
        self.check_planes(&op, ops.iter().map(|o| o.page));
        let spp = self.nand.geometry().sectors_per_page();
        for o in ops {
            self.read_page(&op, o.page, 0, spp, o.dst, o.dst_sector, &mut [])?;
        }
        self.finish(&op);
        Ok(())
    }

    fn erase_multi(&mut self, cause: Cause, blocks: &[BlockAddr]) -> Result<(), FlashError> {
        let Some(first) = blocks.first() else {
            return Ok(());
        };
        let op = self.begin(OpKind::Erase, cause, first.0, None, blocks.len() as u32, 0, None)?;
        let g = self.nand.geometry().clone();
        self.check_planes(&op, blocks.iter().map(|b| g.page_addr(*b, 0)));
        for b in blocks {
            let mut ck = checker!(self, op);
            self.nand.erase(&mut ck, *b)?;
        }
        self.finish(&op);
        Ok(())
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
        // Only the FTL's own buffers; host buffers belong to the host interface.
        if self.ftl_owned.get(buf.0 as usize).copied().unwrap_or(false) {
            if let Ok(sectors) = self.bufs.sectors(buf) {
                self.ftl_buffer_bytes -= u64::from(self.sector_bytes(sectors));
            }
            self.ftl_owned[buf.0 as usize] = false;
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
        self.bufs.copy(dst, dst_sector, src, src_sector, sectors)
    }

    fn buf_zero(&mut self, dst: BufId, dst_sector: u32, sectors: u32) -> Result<(), FlashError> {
        self.bufs.fill(dst, dst_sector, sectors, RunKind::Zero)
    }

    fn prefetch_page(&self, page: PageAddr) {
        self.nand.prefetch_page(page);
    }

    fn prefetch_meta(&self, page: PageAddr, offset_bytes: u32) {
        self.nand.prefetch_meta(page, offset_bytes as usize);
    }
}
