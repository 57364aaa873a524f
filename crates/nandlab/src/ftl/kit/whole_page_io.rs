//! Host I/O of FTLs that program whole logical pages (`block`, `hybrid`):
//! a request is cut at logical-page boundaries; a read takes each piece
//! from wherever the FTL's map says the page is (zeros if never written);
//! a write of a whole page goes straight to the FTL, and a partial one is
//! a read-modify-write of the page through the FTL's scratch buffer, so
//! the FTL itself only ever sees whole pages. Trim writes zeros over the
//! written pages it covers (deterministic read-zero after trim) unless the
//! FTL has a cheaper way for a span.
//!
//! Formatting — erase every good block, skipping factory-bad ones and
//! those whose erase fails — is shared here too.

use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::ftl::mutants::Mutant;
use crate::ftl::{FtlError, IoRequest};
use crate::nand::{BlockAddr, Geometry, PageAddr};

/// One piece of a request: the part of it inside one logical page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PageSpan {
    /// Logical page.
    pub lpn: u32,
    /// First sector of the piece within the page.
    pub sector_in_page: u32,
    /// Sectors in the piece.
    pub sectors: u32,
    /// First sector of the piece within the request's buffer.
    pub sector_in_request: u32,
}

/// The pieces of the sector range `lba .. lba + sectors`, page by page.
pub fn page_spans(lba: u64, sectors: u64, sectors_per_page: u32) -> impl Iterator<Item = PageSpan> {
    let spp = u64::from(sectors_per_page);
    let end = lba + sectors;
    let mut at = lba;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let sector_in_page = (at % spp) as u32;
        let n = (spp - u64::from(sector_in_page)).min(end - at) as u32;
        let span =
            PageSpan { lpn: (at / spp) as u32, sector_in_page, sectors: n, sector_in_request: (at - lba) as u32 };
        at += u64::from(n);
        Some(span)
    })
}

/// What an FTL that programs whole logical pages offers this module.
pub trait WholePageStore {
    fn sectors_per_page(&self) -> u32;
    /// Where the current version of `lpn` is; `None` if never written.
    fn location(&self, lpn: u32) -> Option<PageAddr>;
    /// Program a whole logical page from `buf` starting at `sector`.
    fn write_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError>;
    /// The FTL's one-page scratch buffer.
    fn scratch_buf(&self) -> BufId;
    /// A read-modify-write read one page from flash.
    fn count_rmw_read(&mut self);
    /// A trim rewrote one page with zeros.
    fn count_trim_zero_page(&mut self);
    /// Whether `lpn` is lost to the media (see
    /// [`crate::ftl::kit::lost_pages`]): its reads fail with
    /// `Uncorrectable`, and so does a partial write, which would have to
    /// merge with the lost sectors, until a whole-page write or trim.
    fn is_lost(&self, _lpn: u32) -> bool {
        false
    }
    /// The OOB kind of the FTL's pad pages (zeros for offsets never
    /// written), if its map can point at one: a pad whose read is
    /// uncorrectable (media reliability) is known to hold zeros, so the
    /// read returns them instead of failing.
    fn pad_kind(&self) -> Option<u8> {
        None
    }
    /// The deliberate bug the FTL was built with (checker tests).
    fn mutant(&self) -> Mutant {
        Mutant::None
    }
}

/// Serve a host read.
pub fn read<F: WholePageStore>(ftl: &mut F, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
    for s in page_spans(req.lba, u64::from(req.sectors), ftl.sectors_per_page()) {
        if ftl.is_lost(s.lpn) {
            return Err(FlashError::Uncorrectable.into());
        }
        match ftl.location(s.lpn) {
            None => flash.buf_zero(req.buf, s.sector_in_request, s.sectors)?,
            Some(page) => {
                match flash.read(Cause::Host, page, s.sector_in_page, s.sectors, req.buf, s.sector_in_request, &mut [])
                {
                    Err(FlashError::Uncorrectable) if is_pad(ftl, flash, page)? => {
                        flash.buf_zero(req.buf, s.sector_in_request, s.sectors)?
                    }
                    r => r?,
                }
            }
        }
    }
    Ok(())
}

/// Whether `page` (whose read was uncorrectable) is one of the FTL's pads.
#[cold]
fn is_pad<F: WholePageStore>(ftl: &F, flash: &mut dyn Flash, page: PageAddr) -> Result<bool, FlashError> {
    let Some(pad) = ftl.pad_kind() else { return Ok(false) };
    let mut kind = [0u8; 1];
    flash.read_oob(Cause::Host, page, &mut kind)?;
    Ok(kind[0] == pad)
}

/// Serve a host write, page by page.
pub fn write<F: WholePageStore>(ftl: &mut F, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
    let spp = ftl.sectors_per_page();
    for s in page_spans(req.lba, u64::from(req.sectors), spp) {
        if s.sectors == spp {
            ftl.write_page(flash, s.lpn, req.buf, s.sector_in_request)?;
        } else {
            let tmp = ftl.scratch_buf();
            load_page(ftl, flash, s.lpn, tmp)?;
            let in_page = if ftl.mutant() == Mutant::RmwAtWrongOffset { 0 } else { s.sector_in_page };
            flash.buf_copy(tmp, in_page, req.buf, s.sector_in_request, s.sectors)?;
            ftl.write_page(flash, s.lpn, tmp, 0)?;
        }
    }
    Ok(())
}

/// Load the current version of `lpn` into `buf` (zeros if never written).
pub fn load_page<F: WholePageStore>(ftl: &mut F, flash: &mut dyn Flash, lpn: u32, buf: BufId) -> Result<(), FtlError> {
    let spp = ftl.sectors_per_page();
    if ftl.is_lost(lpn) {
        return Err(FlashError::Uncorrectable.into());
    }
    match ftl.location(lpn) {
        None => flash.buf_zero(buf, 0, spp)?,
        Some(page) => {
            ftl.count_rmw_read();
            match flash.read(Cause::Host, page, 0, spp, buf, 0, &mut []) {
                Err(FlashError::Uncorrectable) if is_pad(ftl, flash, page)? => flash.buf_zero(buf, 0, spp)?,
                r => r?,
            }
        }
    }
    Ok(())
}

/// Trim one piece: rewrite its page with the piece zeroed. A never-written
/// page already reads as zeros and is left alone.
pub fn trim_span<F: WholePageStore>(ftl: &mut F, flash: &mut dyn Flash, s: PageSpan) -> Result<(), FtlError> {
    if ftl.location(s.lpn).is_none() {
        return Ok(());
    }
    let (spp, tmp) = (ftl.sectors_per_page(), ftl.scratch_buf());
    if s.sectors == spp {
        flash.buf_zero(tmp, 0, spp)?;
    } else {
        load_page(ftl, flash, s.lpn, tmp)?;
        if ftl.mutant() == Mutant::PartialTrimZeroesWholePage {
            flash.buf_zero(tmp, 0, spp)?;
        } else {
            flash.buf_zero(tmp, s.sector_in_page, s.sectors)?;
        }
    }
    ftl.write_page(flash, s.lpn, tmp, 0)?;
    ftl.count_trim_zero_page();
    Ok(())
}

/// Erase every block that is not factory-bad, calling `each(block, good)`
/// for every block: `good` when it erased, not when it is factory-bad or
/// its erase failed. Returns the number of good blocks.
pub fn format_blocks(
    flash: &mut dyn Flash,
    geometry: &Geometry,
    mut each: impl FnMut(u32, bool),
) -> Result<u32, FtlError> {
    let mut count = 0;
    for block in 0..geometry.blocks() {
        let addr = BlockAddr(u64::from(block));
        if flash.is_factory_bad(addr) {
            each(block, false);
            continue;
        }
        match flash.erase(Cause::Format, addr) {
            Ok(()) => {
                each(block, true);
                count += 1;
            }
            Err(FlashError::EraseFailed | FlashError::BadBlock) => each(block, false),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cut_a_request_at_page_boundaries() {
        let spans: Vec<_> = page_spans(6, 12, 8).collect();
        assert_eq!(
            spans,
            [
                PageSpan { lpn: 0, sector_in_page: 6, sectors: 2, sector_in_request: 0 },
                PageSpan { lpn: 1, sector_in_page: 0, sectors: 8, sector_in_request: 2 },
                PageSpan { lpn: 2, sector_in_page: 0, sectors: 2, sector_in_request: 10 },
            ]
        );
        assert_eq!(page_spans(8, 0, 8).count(), 0);
    }
}
