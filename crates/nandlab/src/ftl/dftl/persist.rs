//! What `dftl` keeps on flash besides host data, and the DRAM state that
//! decides when it is written: the layout of its metadata pages, the
//! trims not yet in a translation page, the erase-count record, and the
//! corrections a mount has not yet written back.
//!
//! Every metadata page starts with a 16-byte header: a magic number, the
//! page's index (translation page number, or record chunk) and the
//! sequence number the page took when its content was composed. GC moves
//! a page with a new sequence number in its OOB (that orders the copies:
//! the copy with the highest is the newest) but the header keeps the one
//! its content was composed at: a mount replays data pages numbered
//! after *that*.

use super::{page_addr, TranslationMap, NONE, OOB_ERASE_COUNTS};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::kit::data_plane::{encode_oob, DataPlane};
use crate::ftl::mutants::Mutant;
use crate::ftl::FtlError;
use crate::nand::Geometry;

use crate::ftl::kit::wire::translation::MetaHeader;
/// The layout of the metadata pages is [`crate::ftl::kit::wire::translation`].
pub(super) use crate::ftl::kit::wire::translation::{
    entry, set_entry, ERASE_COUNTS_MAGIC, META_HEADER_BYTES as HEADER_BYTES, TPAGE_MAGIC,
};

/// Map entries (or erase counts) of 4 bytes a metadata page holds after its header.
pub(super) fn entries_per_page(g: &Geometry) -> u32 {
    (g.page_size_bytes() - HEADER_BYTES) / 4
}

/// Write the header of a metadata page.
pub(super) fn seal(page: &mut [u8], magic: u32, index: u32, seq: u64) {
    MetaHeader { magic, index, seq }.emit(page);
}

/// The header of a metadata page: the sequence number its content was
/// composed at, if the page is a `magic` page of `index`.
pub(super) fn content_seq(page: &[u8], magic: u32, index: u32) -> Option<u64> {
    let header = MetaHeader::parse(page);
    (header.magic == magic && header.index == index).then_some(header.seq)
}

/// Trims not yet in a translation page on flash: one bit per translation
/// page holding such a trimmed entry, and one per group holding the
/// newest copy of a page trimmed since (its erase would let an older copy
/// come back at a mount).
#[derive(Default)]
pub(super) struct PendingTrims {
    pages: Vec<u64>,
    groups: Vec<u64>,
    /// Translation pages whose bit is set.
    pending: u32,
}

fn bit(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

impl PendingTrims {
    pub fn new(tpages: u32, groups: u32) -> PendingTrims {
        PendingTrims {
            pages: vec![0; tpages.div_ceil(64) as usize],
            groups: vec![0; groups.div_ceil(64) as usize],
            pending: 0,
        }
    }

    /// An entry of translation page `tvpn` was trimmed; its data was in `group`.
    pub fn add(&mut self, tvpn: u32, group: u32) {
        if !bit(&self.pages, tvpn) {
            self.pages[(tvpn / 64) as usize] |= 1 << (tvpn % 64);
            self.pending += 1;
        }
        self.groups[(group / 64) as usize] |= 1 << (group % 64);
    }

    /// Translation page `tvpn` is on flash as it is in DRAM now.
    pub fn written_back(&mut self, tvpn: u32) {
        if !self.pages.is_empty() && bit(&self.pages, tvpn) {
            self.pages[(tvpn / 64) as usize] &= !(1 << (tvpn % 64));
            self.pending -= 1;
        }
    }

    /// Whether `group` holds the newest copy of a page trimmed since the trims were last persisted.
    pub fn in_group(&self, group: u32) -> bool {
        self.pending > 0 && bit(&self.groups, group)
    }

    /// A translation page holding a trim not on flash.
    pub fn next_page(&self) -> Option<u32> {
        if self.pending == 0 {
            return None;
        }
        let (word, bits) = self.pages.iter().enumerate().find(|(_, &b)| b != 0)?;
        Some(word as u32 * 64 + bits.trailing_zeros())
    }

    /// Every trim is on flash (or, for the deliberately broken flush, forgotten).
    pub fn clear(&mut self) {
        if self.pending > 0 {
            self.pages.fill(0);
        }
        self.pending = 0;
        self.groups.fill(0);
    }
}

/// The erase-count record: every group's erase count, in chunks of one
/// metadata page each, written at a clean shutdown (as `page` keeps them
/// in its shutdown checkpoint). After a power cut a mount restores the
/// counts of the last clean shutdown: the erases since are forgotten.
/// (Rewriting it every so many erases would bound that, but each unit's
/// metadata frontier it opens holds a group out of the spare space, which
/// a whole-table cache otherwise never spends: 5 % more write
/// amplification on `tiny`.)
pub(super) struct EraseCountRecord {
    /// The page holding each chunk, or NONE.
    ppn: Vec<u32>,
}

impl EraseCountRecord {
    pub fn new(pages: u32) -> EraseCountRecord {
        EraseCountRecord { ppn: vec![NONE; pages as usize] }
    }

    /// Pages a record of `groups` counts takes.
    pub fn pages(g: &Geometry, groups: u32) -> u32 {
        groups.div_ceil(entries_per_page(g))
    }

    pub fn len(&self) -> u32 {
        self.ppn.len() as u32
    }

    /// Power-on: nothing is known yet.
    pub fn reset(&mut self) {
        self.ppn.fill(NONE);
    }

    /// GC moved chunk `chunk` from `src` to `dst`.
    pub fn moved(&mut self, chunk: u32, src: u32, dst: u32) {
        debug_assert_eq!(self.ppn[chunk as usize], src, "valid erase-count page {src} is not current");
        self.ppn[chunk as usize] = dst;
    }

    /// Mount: chunk `chunk` is at `ppn`.
    pub fn found(&mut self, chunk: u32, ppn: u32) {
        self.ppn[chunk as usize] = ppn;
    }
}

impl TranslationMap {
    /// Write the erase-count record (see [`EraseCountRecord`]).
    pub(super) fn write_erase_counts(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let per_page = entries_per_page(&self.geometry);
        let mut chunk = 0;
        while chunk < self.erase_record.len() {
            // Allocate first: its GC erases, and may move the old chunk.
            let dst = dp.alloc_meta_page(flash, self)?;
            let mut page = std::mem::take(&mut self.tpage);
            page.fill(0xff);
            let counts = &dp.table.erase_count;
            let range = (chunk * per_page) as usize..(((chunk + 1) * per_page) as usize).min(counts.len());
            for (i, &count) in counts[range].iter().enumerate() {
                set_entry(&mut page, i as u32, count);
            }
            let seq = dp.next_seq();
            seal(&mut page, ERASE_COUNTS_MAGIC, chunk, seq);
            let oob = encode_oob(OOB_ERASE_COUNTS | dp.meta_stream() << 4, chunk, seq);
            let result = flash.program_meta(Cause::Metadata, page_addr(dst), &page, &oob);
            self.tpage = page;
            match result {
                Err(FlashError::ProgramFailed) if self.mutant != Mutant::KeepsFailedMetaProgram => {
                    // Retire the group it went to; write the chunk again.
                    dp.retire_failed_groups(flash, self)?;
                    continue;
                }
                // BUG (deliberate, with the mutant): kept where it failed.
                Err(FlashError::ProgramFailed) => {}
                r => r?,
            }
            self.counters.erase_count_pages += 1;
            let old = std::mem::replace(&mut self.erase_record.ppn[chunk as usize], dst);
            if old != NONE {
                dp.invalidate(old);
            }
            dp.commit_meta_page(dst);
            chunk += 1;
        }
        Ok(())
    }
}

/// Mount only: the entries the scan corrected (data written after its
/// translation page, or a stale entry), per translation page, until that
/// page is written back. Every write-back of a page during the mount
/// takes its corrections first, so no copy of a translation page newer
/// than the scan can miss one of them.
#[derive(Default)]
pub(super) struct MountFixes {
    /// (lpn, ppn), by translation page.
    fixes: Vec<(u32, u32)>,
    /// Per translation page: its range of `fixes` (emptied when taken).
    range: Vec<(u32, u32)>,
}

impl MountFixes {
    pub fn new(tpages: u32) -> MountFixes {
        MountFixes { fixes: Vec::new(), range: vec![(0, 0); tpages as usize] }
    }

    /// Add the corrections of translation page `tvpn` (pages in order).
    pub fn add(&mut self, tvpn: u32, fixes: impl Iterator<Item = (u32, u32)>) {
        let start = self.fixes.len() as u32;
        self.fixes.extend(fixes);
        self.range[tvpn as usize] = (start, self.fixes.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.fixes.len()
    }

    pub fn has(&self, tvpn: u32) -> bool {
        self.range.get(tvpn as usize).is_some_and(|&(a, b)| a < b)
    }

    /// The corrections of `tvpn` not yet taken (then none are left).
    pub fn take(&mut self, tvpn: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (a, b) = match self.range.get_mut(tvpn as usize) {
            Some(r) => std::mem::take(r),
            None => (0, 0),
        };
        self.fixes[a as usize..b as usize].iter().copied()
    }

    /// Every correction, as a whole-table cache takes them.
    pub fn drain_all(&mut self) -> Vec<(u32, u32)> {
        self.range.clear();
        std::mem::take(&mut self.fixes)
    }
}
