//! Logical pages lost to the media (media reliability: see
//! [`crate::nand::reliability`]), shared by every FTL that handles them
//! (`page`, `dftl` through the data plane; `block`, `hybrid`).
//!
//! A copy an FTL makes of its own accord (GC, wear leveling, a merge, the
//! replacement of a failed block) may read its source uncorrectable: the
//! data is gone. Firmware must neither stop nor copy the undecodable bytes
//! on as if they were the data. The logical page is marked *lost*: a host
//! read of it fails with the media error ([`FlashError::Uncorrectable`]),
//! as a drive reports an unrecovered read error for the LBA, until a write
//! or a trim of the whole page makes it good again.
//!
//! The mark lives here in DRAM (a set: lost pages are rare, and an empty
//! set costs one branch per host read), and on flash as the OOB kind
//! [`OOB_LOST`] of the slot the copy was to fill, so a mount finds it
//! again: each FTL's recovery says how (see its module docs).

use crate::flash::FlashError;
use crate::ftl::FtlError;
use std::collections::{BTreeMap, HashSet};

/// The OOB kind of a page that stands for a lost logical page (index: the
/// FTL's own — the logical page, or in `block` the logical block, the
/// offset being the page's). Every FTL that handles lost pages uses this
/// kind, which none of their other kinds takes; mounts that predate it
/// skipped it.
pub const OOB_LOST: u8 = 0x0d;

/// The set of lost logical pages, and how many were ever marked.
#[derive(Default, Clone, Debug)]
pub struct LostPages {
    set: HashSet<u32>,
    /// Pages marked lost since the FTL instance started (a metric: a page
    /// lost, written again and lost again counts twice).
    marked: u64,
}

impl LostPages {
    /// Whether `lpn` is lost.
    #[inline]
    pub fn contains(&self, lpn: u32) -> bool {
        !self.set.is_empty() && self.set.contains(&lpn)
    }

    /// A host read or partial write of `lpn`: the media error if it is lost.
    #[inline]
    pub fn check(&self, lpn: u32) -> Result<(), FtlError> {
        if self.contains(lpn) {
            return Err(FlashError::Uncorrectable.into());
        }
        Ok(())
    }

    /// `lpn`'s data was lost to the media (counted).
    pub fn mark(&mut self, lpn: u32) {
        self.set.insert(lpn);
        self.marked += 1;
    }

    /// A mount found `lpn` lost on flash (not counted again).
    pub fn restore(&mut self, lpn: u32) {
        self.set.insert(lpn);
    }

    /// `lpn` was written or trimmed whole: it is good again.
    #[inline]
    pub fn found_again(&mut self, lpn: u32) {
        if !self.set.is_empty() {
            self.set.remove(&lpn);
        }
    }

    /// Forget every mark (a new FTL state: format, or before a mount).
    pub fn clear(&mut self) {
        self.set.clear();
    }

    /// Pages lost now.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Pages marked lost since the instance started.
    pub fn marked(&self) -> u64 {
        self.marked
    }

    /// The metric `media_lost_sectors` (pages marked lost × sectors per
    /// page), only once a page was lost, so reports without losses do not
    /// change.
    pub fn insert_metric(&self, extra: &mut BTreeMap<String, serde_json::Value>, sectors_per_page: u32) {
        if self.marked > 0 {
            extra.insert("media_lost_sectors".into(), (self.marked * u64::from(sectors_per_page)).into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_page_fails_until_written_again_and_counts_once_per_mark() {
        let mut lost = LostPages::default();
        assert!(lost.check(3).is_ok());
        lost.mark(3);
        assert!(matches!(lost.check(3), Err(FtlError::Flash(FlashError::Uncorrectable))));
        assert!(lost.check(4).is_ok());
        lost.found_again(3);
        assert!(lost.check(3).is_ok());
        lost.restore(5);
        assert_eq!((lost.len(), lost.marked()), (1, 1));
        let mut extra = BTreeMap::new();
        lost.insert_metric(&mut extra, 8);
        assert_eq!(extra["media_lost_sectors"], 8);
        lost.clear();
        assert!(lost.is_empty());
    }
}
