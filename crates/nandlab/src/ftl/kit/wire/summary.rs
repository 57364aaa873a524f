//! The header of the data plane's summary pages (see
//! `data_plane/summary.rs` for what follows it and why).
//!
//! ```text
//! bytes 0-3   magic "NLSM"
//! bytes 4-7   the group the summary describes
//! bytes 8-11  entry count; top bit set: the entries are stored dense
//! ```

use super::{view, view_mut, U32Le};
use bytemuck::{Pod, Zeroable};

const MAGIC: u32 = 0x4d53_4c4e; // "NLSM"
const DENSE_FLAG: u32 = 1 << 31;

/// The byte view of a summary page's header.
#[derive(Copy, Clone, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct SummaryHeaderBytes {
    magic: U32Le,
    group: U32Le,
    count: U32Le,
}

/// Bytes of the header; the entries follow.
pub const SUMMARY_HEADER_BYTES: usize = std::mem::size_of::<SummaryHeaderBytes>();

/// A parsed summary header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SummaryHeader {
    pub group: u32,
    pub entries: u32,
    /// The entries are stored dense (else plain, an OOB each).
    pub dense: bool,
}

impl SummaryHeader {
    /// The header at the start of `page`, if its magic says summary.
    pub fn parse(page: &[u8]) -> Option<SummaryHeader> {
        let v: &SummaryHeaderBytes = view(page);
        let count = v.count.get();
        (v.magic.get() == MAGIC).then_some(SummaryHeader {
            group: v.group.get(),
            entries: count & !DENSE_FLAG,
            dense: count & DENSE_FLAG != 0,
        })
    }

    pub fn emit(&self, page: &mut [u8]) {
        let count = self.entries | if self.dense { DENSE_FLAG } else { 0 };
        *view_mut(page) =
            SummaryHeaderBytes { magic: U32Le::new(MAGIC), group: U32Le::new(self.group), count: U32Le::new(count) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_header_round_trips_in_the_same_bytes() {
        let mut page = [0u8; 16];
        SummaryHeader { group: 7, entries: 3, dense: true }.emit(&mut page);
        assert_eq!(page[..12], [0x4e, 0x4c, 0x53, 0x4d, 7, 0, 0, 0, 3, 0, 0, 0x80]);
        assert_eq!(SummaryHeader::parse(&page), Some(SummaryHeader { group: 7, entries: 3, dense: true }));
        assert_eq!(SummaryHeader::parse(&[0xff; 12]), None);
    }
}
