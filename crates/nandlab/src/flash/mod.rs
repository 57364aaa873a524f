//! The flash interface: everything an FTL may do to the device.
//!
//! An FTL reaches flash only through [`Flash`]: page reads, programs with
//! OOB, block erases, copyback, multi-plane forms (program, read, erase,
//! copyback), data buffers in device DRAM, the geometry, its DRAM budget,
//! and (in timed modes) the current time and which dies are busy. The interface is deliberately
//! C-ABI-shaped: plain integers for addresses and buffer handles, byte
//! slices for metadata and OOB, error codes for failures, no generics or
//! closures, so firmware written in C can implement an FTL against the same
//! contract.
//!
//! Every call names its [`Cause`] (host data, garbage collection, wear
//! leveling, metadata, recovery, format). The controller also knows which
//! host request, if any, the FTL is serving, so timing can charge each
//! operation to the request that waits for it and reports can split write
//! amplification by cause.
//!
//! Functional effects happen at once: when a call returns, the NAND has
//! changed. A timed mode only *records* the operation on resource
//! timelines through a [`FlashObserver`]; power-cut and media-error
//! injection are observers too, so neither timing nor faults appear in FTL
//! code.

pub mod buffers;
mod controller;
pub mod sources;

/// The NAND's typed failures, as every flash operation returns them.
pub use crate::nand::FlashError;
pub use buffers::BufId;
pub use controller::{CrashImage, FlashController, FlashStats, OpCounts, PowerCut};

use crate::nand::{BlockAddr, Geometry, PageAddr};
use serde::{Deserialize, Serialize};

/// Why a flash operation is issued. Reports split flash traffic by cause;
/// write amplification counts everything that is not `Host` as extra.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Cause {
    /// Moving host data for a host request (including read-modify-write).
    Host = 0,
    /// Garbage collection (copying valid pages, erasing victims).
    Gc = 1,
    /// Wear leveling (moving cold data off young blocks).
    WearLeveling = 2,
    /// FTL metadata: mapping pages, summaries, checkpoints.
    Metadata = 3,
    /// Mount and recovery scans.
    Recovery = 4,
    /// First power-on formatting.
    Format = 5,
}

impl Cause {
    pub const ALL: [Cause; 6] =
        [Cause::Host, Cause::Gc, Cause::WearLeveling, Cause::Metadata, Cause::Recovery, Cause::Format];
    pub fn name(self) -> &'static str {
        match self {
            Cause::Host => "host",
            Cause::Gc => "gc",
            Cause::WearLeveling => "wear_leveling",
            Cause::Metadata => "metadata",
            Cause::Recovery => "recovery",
            Cause::Format => "format",
        }
    }
}

/// The kind of a flash operation, as seen by observers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Read,
    ReadOob,
    ReadMeta,
    Program,
    ProgramMeta,
    Copyback,
    Erase,
}

impl OpKind {
    pub const ALL: [OpKind; 7] = [
        OpKind::Read,
        OpKind::ReadOob,
        OpKind::ReadMeta,
        OpKind::Program,
        OpKind::ProgramMeta,
        OpKind::Copyback,
        OpKind::Erase,
    ];
}

/// One flash operation, described for observers (timing, fault injection).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlashOp {
    pub kind: OpKind,
    pub cause: Cause,
    /// The host request being served when the FTL issued the operation.
    pub request_id: Option<u64>,
    /// Index of this operation in the run (from 0).
    pub op_index: u64,
    /// The page (reads, programs, copyback destination) or block (erase).
    pub address: u64,
    /// Copyback source page.
    pub source: Option<u64>,
    /// Planes operated on together (1 unless multi-plane).
    pub planes: u32,
    /// Data bytes moved over the channel.
    pub transfer_bytes: u32,
    /// The buffer read into, or programmed from.
    pub buffer: Option<BufId>,
    /// A decoded read (reliability model on; 0 otherwise): re-reads with
    /// shifted voltages after the first attempt failed to decode, each a
    /// full tR + transfer + decode in the timing model.
    pub read_retries: u32,
    /// A decoded read: ECC decode time of all its attempts, ns.
    pub decode_ns: u64,
}

/// A block's predicted raw bit error rate (see [`Flash::predicted_rber`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct PredictedRber {
    pub rber: f64,
    /// The RBER whose mean errors per codeword equal the first (hard)
    /// decode's correction capability.
    pub correctable_rber: f64,
}

/// A hook on every flash operation: timing models and fault injectors.
pub trait FlashObserver {
    /// Called before an operation takes effect; an error (e.g. a power cut)
    /// stops it and is returned to the FTL.
    fn before_op(&mut self, _op: &FlashOp) -> Result<(), FlashError> {
        Ok(())
    }
    /// Called after an operation took effect.
    fn after_op(&mut self, _op: &FlashOp) {}
    fn now_ns(&self) -> Option<u64> {
        None
    }
    fn die_busy_until_ns(&self, _die: u32) -> Option<u64> {
        None
    }
}

/// One page of a multi-plane program.
#[derive(Copy, Clone, Debug)]
pub struct ProgramOp<'a> {
    pub page: PageAddr,
    pub src: BufId,
    pub src_sector: u32,
    pub oob: &'a [u8],
}

/// One page of a multi-plane read (whole page into a buffer).
#[derive(Copy, Clone, Debug)]
pub struct ReadOp {
    pub page: PageAddr,
    pub dst: BufId,
    pub dst_sector: u32,
}

/// One page of a multi-plane copyback: `src` is copied to `dst` on the
/// same plane; `oob`, when given, replaces the destination's spare area.
#[derive(Copy, Clone, Debug)]
pub struct CopybackOp<'a> {
    pub src: PageAddr,
    pub dst: PageAddr,
    pub oob: Option<&'a [u8]>,
}

/// The flash interface an FTL sees. See the module docs.
///
/// Sector arguments count host sectors (`geometry().sector_size_bytes()`);
/// a page holds `geometry().sectors_per_page()` of them.
pub trait Flash {
    fn geometry(&self) -> &Geometry;
    /// Device DRAM available to the FTL (maps, caches, buffers), in bytes.
    fn dram_budget_bytes(&self) -> u64;
    /// Simulated time in ns, in timed modes.
    fn now_ns(&self) -> Option<u64>;
    /// When a die finishes its queued work, in timed modes.
    fn die_busy_until_ns(&self, die: u32) -> Option<u64>;
    /// The factory bad-block mark of a block (read from its spare area at format).
    fn is_factory_bad(&self, block: BlockAddr) -> bool;
    /// Whether `block`'s bad mark is one a retiring firmware wrote after a
    /// program or erase failed (a grown bad block) rather than the
    /// factory's: the NAND refuses to program or erase it but still reads
    /// it, so a mount scans its pages for data not yet moved off. False
    /// without the media reliability model (see [`crate::nand::reliability`]).
    fn is_grown_bad(&self, _block: BlockAddr) -> bool {
        false
    }
    /// The media's predicted raw bit error rate for the next read of
    /// `block` (its most error-prone page type), beside the RBER at which
    /// the first decode attempt's ECC runs out: what a firmware computes
    /// from its P/E, read and retention counters and the vendor's
    /// characterization tables, to decide when to refresh a block. `None`
    /// without the media reliability model (see [`crate::nand::reliability`]).
    fn predicted_rber(&self, _block: BlockAddr) -> Option<PredictedRber> {
        None
    }

    /// Read sectors `first_sector .. first_sector+sectors` of a page into a
    /// buffer at `dst_sector`, and the page's OOB into `oob` (may be empty).
    fn read(
        &mut self,
        cause: Cause,
        page: PageAddr,
        first_sector: u32,
        sectors: u32,
        dst: BufId,
        dst_sector: u32,
        oob: &mut [u8],
    ) -> Result<(), FlashError>;
    /// Read only the spare area of a page (erased spare reads as 0xFF).
    fn read_oob(&mut self, cause: Cause, page: PageAddr, oob: &mut [u8]) -> Result<(), FlashError>;
    /// Read a page of FTL metadata as bytes, and its OOB.
    fn read_meta(&mut self, cause: Cause, page: PageAddr, data: &mut [u8], oob: &mut [u8]) -> Result<(), FlashError>;
    /// Read bytes `offset_bytes .. offset_bytes+data.len()` of a metadata
    /// page: NAND "random data output", where the page is sensed as usual
    /// but only the bytes asked for cross the channel (e.g. one entry of a
    /// translation page). The default reads the page prefix through
    /// [`Flash::read_meta`]; the controller transfers only the range.
    fn read_meta_at(
        &mut self,
        cause: Cause,
        page: PageAddr,
        offset_bytes: u32,
        data: &mut [u8],
    ) -> Result<(), FlashError> {
        let mut prefix = vec![0u8; offset_bytes as usize + data.len()];
        self.read_meta(cause, page, &mut prefix, &mut [])?;
        data.copy_from_slice(&prefix[offset_bytes as usize..]);
        Ok(())
    }
    /// Program a page with one page of host data taken from `src` at
    /// `src_sector`, and OOB bytes. Erased sectors of the source are left
    /// erased, which is how a partial program (NOP > 1) is expressed.
    fn program(
        &mut self,
        cause: Cause,
        page: PageAddr,
        src: BufId,
        src_sector: u32,
        oob: &[u8],
    ) -> Result<(), FlashError>;
    /// Program a page with FTL metadata bytes (at most a page) and OOB.
    fn program_meta(&mut self, cause: Cause, page: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError>;
    /// Copy a page within a plane without a channel transfer; `oob`, when
    /// given, replaces the destination's spare area.
    fn copyback(&mut self, cause: Cause, src: PageAddr, dst: PageAddr, oob: Option<&[u8]>) -> Result<(), FlashError>;
    fn erase(&mut self, cause: Cause, block: BlockAddr) -> Result<(), FlashError>;
    /// Program one page on each of several planes of a die at once.
    fn program_multi(&mut self, cause: Cause, ops: &[ProgramOp]) -> Result<(), FlashError>;
    /// Read one whole page on each of several planes of a die at once.
    fn read_multi(&mut self, cause: Cause, ops: &[ReadOp]) -> Result<(), FlashError>;
    /// Erase one block on each of several planes of a die at once.
    fn erase_multi(&mut self, cause: Cause, blocks: &[BlockAddr]) -> Result<(), FlashError>;
    /// Copy one page within each of several planes of a die at once: the
    /// sources, like the destinations, share a block and page offset (a
    /// multi-plane read, then a multi-plane program, inside the die).
    fn copyback_multi(&mut self, cause: Cause, ops: &[CopybackOp]) -> Result<(), FlashError>;

    /// A data buffer of `sectors` sectors in device DRAM, initially erased (0xFF).
    fn buf_alloc(&mut self, sectors: u32) -> Result<BufId, FlashError>;
    fn buf_free(&mut self, buf: BufId);
    fn buf_copy(
        &mut self,
        dst: BufId,
        dst_sector: u32,
        src: BufId,
        src_sector: u32,
        sectors: u32,
    ) -> Result<(), FlashError>;
    /// Fill sectors of a buffer with zeros.
    fn buf_zero(&mut self, dst: BufId, dst_sector: u32, sectors: u32) -> Result<(), FlashError>;

    /// A hint that `page` will be read soon, so the simulator can warm its
    /// CPU caches. No effect on state, timing or counters. Default: nothing.
    fn prefetch_page(&self, _page: PageAddr) {}

    /// A hint that bytes `offset_bytes ..` of metadata page `page` will be
    /// read soon (e.g. a translation entry). Like [`Flash::prefetch_page`],
    /// no effect on state, timing or counters. Default: nothing.
    fn prefetch_meta(&self, _page: PageAddr, _offset_bytes: u32) {}
}
