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
//! [`OOB_LOST`] (its summary entry too), which no mount takes for data:
//! the group fills without a hole and nothing else moves.
//!
//! Not persisted: the lost marks live in DRAM. After a power cycle a lost
//! page reads as whatever older copy a mount finds (or zeros), not as a
//! read error. Persisting them (a marker page the mount recognises, as an
//! NVMe Write Uncorrectable would need) is left.

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

    /// The OOB the slot `dst` of a lost copy of `lpn` is programmed with
    /// (its summary entry amended to match).
    pub(super) fn lost_copy_oob(&mut self, dst: u32, lpn: u32) -> [u8; OOB_BYTES] {
        let oob = encode_oob(OOB_LOST, lpn, self.next_seq());
        self.amend_summary_entry(dst, &oob);
        oob
    }

    /// After the copy of logical page `lpn` from `src` was lost: `src`
    /// leaves its victim as a moved page does (`page_moved`, without the
    /// victim policy, which no longer holds the victim), the unit holds one
    /// valid page less, and `lpn` is unmapped and marked lost.
    pub(super) fn page_lost<M: Mapper>(&mut self, m: &mut M, victim: u32, lpn: u32, src: u32) {
        self.valid_bits[(src / 64) as usize] &= !(1 << (src % 64));
        self.table.valid[victim as usize] -= 1;
        self.balance.unit_valid[self.table.unit[victim as usize] as usize] -= 1;
        m.relocate(OOB_DATA, lpn, src, UNMAPPED);
        if self.mutant != Mutant::ForgetsLostPage {
            self.lost.mark(lpn);
        } // else BUG (deliberate): the page reads as never written
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
