//! Logical pages lost to the media (media reliability: see
//! [`crate::nand::reliability`]).
//!
//! GC (or wear leveling) moving a valid data page by reading it out and
//! programming it back (across planes, or with `copyback = false`) may
//! find the page uncorrectable: its data is gone. Firmware must not copy
//! the undecodable bytes on as if they were the data (a later read would
//! return garbage as good data), and must not stop: the page is marked
//! *lost*. The logical page is unmapped and remembered; a host read of it
//! fails with the media error ([`FlashError::Uncorrectable`]), which the
//! oracle accepts because the flash reported that data uncorrectable, as
//! a drive reports an unrecovered read error for the LBA. A later write or
//! trim of the page makes it good again (a partial write, which would have
//! to merge with the lost sectors, fails with the same error).
//!
//! The read happens after the copy's destination slot was taken (a
//! multi-plane row is assembled before it is issued), so the slot is
//! programmed all the same, with the undecodable bytes and an OOB of kind
//! [`OOB_LOST`] (its summary entry too): the *lost slot*.
//!
//! **Persistence.** The logical page stays mapped to its lost slot, which
//! is a valid page like any other: GC moves it (its read is uncorrectable
//! again, so it moves as a lost slot again; copyback moves it raw),
//! `page`'s checkpoints and `dftl`'s translation pages record the mapping,
//! and a mount finds it as it finds any data page — the newest copy of
//! its logical page, by sequence number — and, seeing the kind, restores
//! the mark (`restore_lost`). So after a clean power cycle or a cut the
//! page still reads as the media error, never as an older copy or zeros.
//! This needs no record of its own: the map the FTL already persists
//! points at the lost slot, and the slot's OOB says what it is. (Its data
//! never decodes, so even a firmware that forgot the mark would return
//! the media error; the mark saves the futile read.) A lost slot is never
//! taken for torn by a mount: whether its program completed or not, the
//! page's data was gone.

use super::{encode_oob, DataPlane, Mapper, OOB_BYTES, OOB_DATA, UNMAPPED};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::mutants::Mutant;
use crate::ftl::FtlError;
use crate::nand::PageAddr;

/// The OOB kind of a copy slot whose source was uncorrectable (index: the
/// logical page lost; see [`crate::ftl::kit::lost_pages`]).
pub use crate::ftl::kit::lost_pages::OOB_LOST;

impl DataPlane {
    /// A GC read of data page `src` into the GC buffer at `into_sector`.
    /// Returns whether it was uncorrectable (the copy must not be mapped:
    /// see the module docs); other errors fail.
    pub(super) fn read_gc_copy(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        src: u32,
        into_sector: u32,
    ) -> Result<bool, FtlError> {
        let buf = self.gc_buf.expect("gc buffer allocated at power-on");
        match flash.read(cause, PageAddr(u64::from(src)), 0, self.spp, buf, into_sector, &mut []) {
            Err(FlashError::Uncorrectable) => Ok(true),
            r => r.map(|()| false).map_err(FtlError::from),
        }
    }

    /// The OOB the slot `dst` of a lost copy is programmed with instead of
    /// the copy's `copy_oob` (its summary entry amended to match): kind
    /// lost, in the copy's stream.
    pub(super) fn lost_copy_oob(&mut self, dst: u32, copy_oob: &[u8; OOB_BYTES]) -> [u8; OOB_BYTES] {
        let (kind, lpn, _) = super::decode_oob(copy_oob);
        let oob = encode_oob(OOB_LOST | (kind & !super::OOB_KIND_MASK), lpn, self.next_seq());
        self.amend_summary_entry(dst, &oob);
        oob
    }

    /// After the copy of logical page `lpn` from `src` to `dst` was lost:
    /// `lpn` moves to its lost slot `dst` as a moved page does (see the
    /// module docs: the mapping persists the loss), marked lost (counted
    /// once, however often the slot moves on).
    pub(super) fn page_lost<M: Mapper>(&mut self, m: &mut M, victim: u32, lpn: u32, src: u32, dst: u32) {
        if self.mutant == Mutant::ForgetsLostPage {
            // BUG (deliberate): the page is unmapped unmarked, and reads
            // as never written.
            self.valid_bits[(src / 64) as usize] &= !(1 << (src % 64));
            self.table.valid[victim as usize] -= 1;
            self.balance.unit_valid[self.table.unit[victim as usize] as usize] -= 1;
            m.relocate(OOB_DATA, lpn, src, UNMAPPED);
            return;
        }
        self.page_moved(m, victim, OOB_DATA, lpn, src, dst);
        if !self.lost.contains(lpn) {
            self.lost.mark(lpn);
        }
    }

    /// A mount found `lpn` mapped to a lost slot: it is lost.
    pub fn restore_lost(&mut self, lpn: u32) {
        self.lost.restore(lpn);
    }

    /// A host read or partial write of `lpn`: the media error if it is lost.
    #[inline]
    pub(super) fn check_lost(&self, lpn: u32) -> Result<(), FtlError> {
        self.lost.check(lpn)
    }

    /// `lpn` was written or trimmed: it is good again.
    #[inline]
    pub(super) fn found_again(&mut self, lpn: u32) {
        self.lost.found_again(lpn);
    }
}
