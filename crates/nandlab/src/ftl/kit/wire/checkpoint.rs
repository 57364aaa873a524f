//! `page`'s metadata pages: checkpoint pages (the map, then the erase
//! counts) and trim records (see `page/recovery.rs` for how they are used).
//!
//! ```text
//! checkpoint page                     trim record page
//! bytes 0-3    magic "NLCK"           bytes 0-3   magic "NLTR"
//! bytes 4-7    index of this page     bytes 4-7   entry count
//! bytes 8-11   pages in the checkpoint then per entry (12 bytes):
//! bytes 12-15  entry count              logical page (4), sequence number (8)
//! then 4-byte entries
//! ```

use super::{array, view, view_mut, U32Le, U64Le};
use bytemuck::{Pod, Zeroable};

const CHECKPOINT_MAGIC: u32 = 0x4b43_4c4e; // "NLCK"
const TRIM_MAGIC: u32 = 0x5254_4c4e; // "NLTR"

/// The byte view of a checkpoint page's header.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct CheckpointHeaderBytes {
    magic: U32Le,
    index: U32Le,
    pages: U32Le,
    entries: U32Le,
}

/// Bytes of a checkpoint page's header; its 4-byte entries follow.
pub const CHECKPOINT_HEADER_BYTES: usize = std::mem::size_of::<CheckpointHeaderBytes>();

/// A parsed checkpoint page header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointHeader {
    /// This page's place in the checkpoint.
    pub index: u32,
    /// Pages of the whole checkpoint.
    pub pages: u32,
    /// Entries on this page.
    pub entries: u32,
}

impl CheckpointHeader {
    /// The header at the start of `page`, if its magic says checkpoint.
    pub fn parse(page: &[u8]) -> Option<CheckpointHeader> {
        let v: &CheckpointHeaderBytes = view(page);
        (v.magic.get() == CHECKPOINT_MAGIC).then(|| Self::parse_unchecked(page))
    }

    /// The header's fields, whatever its magic (for a page already known
    /// to be a checkpoint page, whose magic a mount checked when it found it).
    pub fn parse_unchecked(page: &[u8]) -> CheckpointHeader {
        let v: &CheckpointHeaderBytes = view(page);
        CheckpointHeader { index: v.index.get(), pages: v.pages.get(), entries: v.entries.get() }
    }

    pub fn emit(&self, page: &mut [u8]) {
        *view_mut(page) = CheckpointHeaderBytes {
            magic: U32Le::new(CHECKPOINT_MAGIC),
            index: U32Le::new(self.index),
            pages: U32Le::new(self.pages),
            entries: U32Le::new(self.entries),
        };
    }

    /// The `n` entries after the header, to write.
    pub fn entries_mut(page: &mut [u8], n: usize) -> &mut [U32Le] {
        super::array_mut(page, CHECKPOINT_HEADER_BYTES, n)
    }

    /// The `n` entries after the header.
    pub fn entries(page: &[u8], n: usize) -> &[U32Le] {
        array(page, CHECKPOINT_HEADER_BYTES, n)
    }
}

/// The byte view of a trim record page's header.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct TrimRecordHeaderBytes {
    magic: U32Le,
    count: U32Le,
}

/// Bytes of a trim record page's header.
pub const TRIM_HEADER_BYTES: usize = std::mem::size_of::<TrimRecordHeaderBytes>();

/// The byte view of one trim: the logical page, and the sequence number
/// the trim happened at.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct TrimEntryBytes {
    pub lpn: U32Le,
    pub seq: U64Le,
}

/// Bytes of one trim entry.
pub const TRIM_ENTRY_BYTES: usize = std::mem::size_of::<TrimEntryBytes>();

/// A page of trim records.
pub struct TrimRecords;

impl TrimRecords {
    /// The trims a trim record page holds (bounded by the page), or `None`
    /// if it is not one.
    pub fn parse(page: &[u8]) -> Option<&[TrimEntryBytes]> {
        let v: &TrimRecordHeaderBytes = view(page);
        if v.magic.get() != TRIM_MAGIC {
            return None;
        }
        let n = (v.count.get() as usize).min((page.len() - TRIM_HEADER_BYTES) / TRIM_ENTRY_BYTES);
        Some(array(page, TRIM_HEADER_BYTES, n))
    }

    /// Write `trims` ((logical page, sequence number) each) as a trim record page.
    pub fn emit(trims: &[(u32, u64)], page: &mut [u8]) {
        *view_mut(page) =
            TrimRecordHeaderBytes { magic: U32Le::new(TRIM_MAGIC), count: U32Le::new(trims.len() as u32) };
        let entries: &mut [TrimEntryBytes] = super::array_mut(page, TRIM_HEADER_BYTES, trims.len());
        for (e, &(lpn, seq)) in entries.iter_mut().zip(trims) {
            *e = TrimEntryBytes { lpn: U32Le::new(lpn), seq: U64Le::new(seq) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_and_trim_pages_round_trip_in_the_same_bytes() {
        let mut page = [0xffu8; 32];
        CheckpointHeader { index: 1, pages: 2, entries: 3 }.emit(&mut page);
        CheckpointHeader::entries_mut(&mut page, 1)[0] = U32Le::new(9);
        assert_eq!(page[..20], [0x4e, 0x4c, 0x43, 0x4b, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0]);
        assert_eq!(CheckpointHeader::parse(&page), Some(CheckpointHeader { index: 1, pages: 2, entries: 3 }));
        let mut page = [0xffu8; 32];
        TrimRecords::emit(&[(5, 6)], &mut page);
        assert_eq!(page[..20], [0x4e, 0x4c, 0x54, 0x52, 1, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]);
        let trims = TrimRecords::parse(&page).unwrap();
        assert_eq!((trims[0].lpn.get(), trims[0].seq.get()), (5, 6));
    }
}
