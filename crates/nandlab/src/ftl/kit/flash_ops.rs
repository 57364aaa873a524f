//! Flash operations shared by FTLs: the pieces of a mount scan that
//! rebuilds state from the OOB of every page (`block`, `hybrid`), and the
//! page copy of their merges.
//!
//! What a power cut leaves (see [`crate::nand::power`]) decides what a scan
//! must check: a block whose erase was cut is *undefined* — every OOB read
//! fails — and a page whose program was cut is *torn*: its OOB reads back as
//! written but its data fails ECC. Pages are programmed in order, so only
//! the last programmed page of a block can be torn, and the first erased
//! page ends what a block holds.

use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::PageAddr;

pub use super::wire::oob::OOB_ERASED;

/// What a mount scan found in a block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BlockPages {
    /// Nothing programmed.
    Erased,
    /// An interrupted erase: every OOB read fails.
    Undefined,
    /// `valid` pages survived: those programmed, less the last one if it
    /// is `torn`.
    Programmed { valid: u32, torn: bool },
}

/// Read the OOBs of a block's pages `first_page ..` in order, up to its
/// first erased page, into `oobs`, and read one sector of its last
/// programmed page to see whether it is torn (unless `trust_last_page`,
/// which only a deliberately broken recovery sets).
pub fn scan_block<const N: usize>(
    flash: &mut dyn Flash,
    first_page: u64,
    pages: u32,
    oobs: &mut Vec<[u8; N]>,
    buf: BufId,
    trust_last_page: bool,
) -> Result<BlockPages, FlashError> {
    oobs.clear();
    let mut oob = [0u8; N];
    for page in 0..u64::from(pages) {
        match flash.read_oob(Cause::Recovery, PageAddr(first_page + page), &mut oob) {
            Ok(()) => {}
            Err(FlashError::Uncorrectable) => return Ok(BlockPages::Undefined),
            Err(e) => return Err(e),
        }
        if oob[0] == OOB_ERASED {
            break; // pages are programmed in order: the rest are erased
        }
        oobs.push(oob);
    }
    let Some(last) = (oobs.len() as u32).checked_sub(1) else { return Ok(BlockPages::Erased) };
    let torn = !trust_last_page && !page_survived(flash, PageAddr(first_page + u64::from(last)), buf)?;
    Ok(BlockPages::Programmed { valid: last + u32::from(!torn), torn })
}

/// Whether a programmed page's data survived: a torn page fails ECC. Reads
/// one sector into `buf`.
///
/// With the media reliability model on, an intact page may fail ECC too
/// (its raw bit errors beyond the code's reach on every retry), and each
/// read draws its errors anew; a torn page never decodes. So the page is
/// read up to [`TORN_CHECK_READS`] times, and torn only if every read
/// fails — as firmware re-reads a page before it declares it torn. (A page
/// that fails them all is taken for torn: a loss the model recorded.)
/// Without the model one read decides, as before.
pub fn page_survived(flash: &mut dyn Flash, page: PageAddr, buf: BufId) -> Result<bool, FlashError> {
    let block = crate::nand::BlockAddr(page.0 / u64::from(flash.geometry().pages_per_block()));
    let reads = if flash.predicted_rber(block).is_some() { TORN_CHECK_READS } else { 1 };
    for _ in 0..reads {
        match flash.read(Cause::Recovery, page, 0, 1, buf, 0, &mut []) {
            Ok(()) => return Ok(true),
            Err(FlashError::Uncorrectable) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Reads of a last programmed page before a mount takes it for torn, with
/// the media reliability model on (see [`page_survived`]).
pub const TORN_CHECK_READS: u32 = 16;

/// Copy a page of host data to `dst` with new OOB bytes: by copyback when
/// `copyback` is set (the caller checked both pages share a plane), else by
/// a read into `buf` and a program.
pub fn copy_page(
    flash: &mut dyn Flash,
    cause: Cause,
    src: PageAddr,
    dst: PageAddr,
    oob: &[u8],
    copyback: bool,
    buf: BufId,
) -> Result<(), FlashError> {
    if copyback {
        return flash.copyback(cause, src, dst, Some(oob));
    }
    let sectors = flash.geometry().sectors_per_page();
    flash.read(cause, src, 0, sectors, buf, 0, &mut [])?;
    flash.program(cause, dst, buf, 0, oob)
}
