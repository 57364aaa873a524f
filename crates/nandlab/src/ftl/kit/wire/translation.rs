//! `dftl`'s metadata pages: translation pages (map entries) and the pages
//! of the erase-count record (see `dftl/persist.rs` for how they are used).
//!
//! ```text
//! bytes 0-3    magic "NLTP" (translation page) or "NLEC" (erase counts)
//! bytes 4-7    which page: translation page number, or record chunk
//! bytes 8-15   the sequence number the content was composed at
//! then 4-byte entries (physical page, or erase count)
//! ```

use super::{view, view_mut, U32Le, U64Le};
use bytemuck::{Pod, Zeroable};

/// Magic of a translation page.
pub const TPAGE_MAGIC: u32 = 0x5054_4c4e; // "NLTP"
/// Magic of a page of the erase-count record.
pub const ERASE_COUNTS_MAGIC: u32 = 0x4345_4c4e; // "NLEC"

/// The byte view of a metadata page's header.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct MetaHeaderBytes {
    magic: U32Le,
    index: U32Le,
    seq: U64Le,
}

/// Bytes of the header; the 4-byte entries follow.
pub const META_HEADER_BYTES: u32 = std::mem::size_of::<MetaHeaderBytes>() as u32;

/// A parsed metadata page header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MetaHeader {
    pub magic: u32,
    pub index: u32,
    /// The sequence number the page's content was composed at.
    pub seq: u64,
}

impl MetaHeader {
    pub fn parse(page: &[u8]) -> MetaHeader {
        let v: &MetaHeaderBytes = view(page);
        MetaHeader { magic: v.magic.get(), index: v.index.get(), seq: v.seq.get() }
    }

    pub fn emit(&self, page: &mut [u8]) {
        *view_mut(page) =
            MetaHeaderBytes { magic: U32Le::new(self.magic), index: U32Le::new(self.index), seq: U64Le::new(self.seq) };
    }
}

/// The byte offset of entry `i` (after the header).
#[inline]
pub fn entry_offset(i: u32) -> usize {
    (META_HEADER_BYTES + 4 * i) as usize
}

/// The `i`-th entry after the header.
#[inline]
pub fn entry(page: &[u8], i: u32) -> u32 {
    view::<U32Le>(&page[entry_offset(i)..]).get()
}

/// Set the `i`-th entry after the header.
#[inline]
pub fn set_entry(page: &mut [u8], i: u32, value: u32) {
    *view_mut(&mut page[entry_offset(i)..]) = U32Le::new(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_translation_page_round_trips_in_the_same_bytes() {
        let mut page = [0xffu8; 24];
        MetaHeader { magic: TPAGE_MAGIC, index: 2, seq: 3 }.emit(&mut page);
        set_entry(&mut page, 1, 7);
        assert_eq!(page[..16], [0x4e, 0x4c, 0x54, 0x50, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(page[20..24], [7, 0, 0, 0]);
        assert_eq!(MetaHeader::parse(&page), MetaHeader { magic: TPAGE_MAGIC, index: 2, seq: 3 });
        assert_eq!((entry(&page, 0), entry(&page, 1)), (u32::MAX, 7));
    }
}
