//! Where the sectors of data buffers came from, so a wrong read names the
//! physical page that supplied it.
//!
//! The oracle finds a wrong sector in a host buffer; the FTL put it there
//! by reading a flash page into that buffer, or into one of its own and
//! copying it over. The controller records, for the current host request,
//! every flash read into a buffer (which page, which of its sectors, which
//! operation, which buffer sectors), carries those records along when
//! sectors are copied between buffers, and shadows them when sectors are
//! overwritten with zeros. A violation looks up the sector it is about
//! ([`ReadSources::lookup`]), and only then.
//!
//! Cost on the hot path: one push onto a reused vector per read, and a
//! check of a short list per buffer copy or fill; no allocation after the
//! vectors have grown to a request's worth of reads. The records are
//! cleared at every host request boundary, and when a request (or a long
//! stretch of background work) fills [`ReadSources::CAPACITY`] of them:
//! a lookup then finds nothing, so a source is reported as unknown, never
//! as a wrong page.

use super::BufId;
use crate::violation::FlashSource;

/// Marks a record that shadows older ones: those sectors were not filled
/// from flash (zeros, or copied from a buffer with no flash source).
const NOT_FROM_FLASH: u64 = u64::MAX;
/// Buffers tracked at once (a host buffer and a few FTL buffers per request).
const TRACKED_BUFFERS: usize = 16;

/// Sectors `at .. at+len` of `buf` hold sectors `first ..` of `page`, read
/// by flash operation `op_index`.
#[derive(Copy, Clone, Debug)]
struct Fill {
    buf: BufId,
    at: u32,
    len: u32,
    page: u64,
    first: u32,
    op_index: u64,
}

impl Fill {
    fn covers(&self, buf: BufId, sector: u32) -> bool {
        self.buf == buf && sector >= self.at && sector - self.at < self.len
    }
}

/// The fill records of the current request. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct ReadSources {
    fills: Vec<Fill>,
    /// Buffers that received a flash read since the last clear: copies and
    /// fills of other buffers need no record.
    tracked: Vec<BufId>,
    scratch: Vec<Fill>,
}

impl ReadSources {
    /// Records kept before the oldest are dropped.
    pub const CAPACITY: usize = 4096;

    /// Forget every record (a new host request begins).
    #[inline]
    pub fn clear(&mut self) {
        self.fills.clear();
        self.tracked.clear();
    }

    fn track(&mut self, buf: BufId) {
        if !self.tracked.contains(&buf) {
            if self.tracked.len() == TRACKED_BUFFERS {
                self.clear();
            }
            self.tracked.push(buf);
        }
    }

    fn push(&mut self, fill: Fill) {
        if self.fills.len() == Self::CAPACITY {
            self.clear();
            self.track(fill.buf);
        }
        self.fills.push(fill);
    }

    /// Sectors `at .. at+len` of `buf` were read from sectors `first ..` of `page`.
    #[inline]
    pub fn record_read(&mut self, buf: BufId, at: u32, len: u32, page: u64, first: u32, op_index: u64) {
        self.track(buf);
        self.push(Fill { buf, at, len, page, first, op_index });
    }

    /// Sectors `at .. at+len` of `buf` were overwritten with something not from flash.
    #[inline]
    pub fn record_fill(&mut self, buf: BufId, at: u32, len: u32) {
        if self.tracked.contains(&buf) {
            self.push(Fill { buf, at, len, page: NOT_FROM_FLASH, first: 0, op_index: 0 });
        }
    }

    /// `len` sectors were copied from `src` at `src_at` to `dst` at `dst_at`:
    /// the destination inherits the source's records for that range.
    #[inline]
    pub fn record_copy(&mut self, dst: BufId, dst_at: u32, src: BufId, src_at: u32, len: u32) {
        if !self.tracked.contains(&src) {
            self.record_fill(dst, dst_at, len);
            return;
        }
        // The newest records win, so walk back from the end until one
        // covers the whole range (the usual case: the last read into a
        // reused scratch buffer), keeping the overlapping ones.
        let mut found = std::mem::take(&mut self.scratch);
        found.clear();
        let end = src_at + len;
        for f in self.fills.iter().rev().filter(|f| f.buf == src) {
            let (lo, hi) = (f.at.max(src_at), (f.at + f.len).min(end));
            if lo < hi {
                found.push(*f);
                if f.at <= src_at && f.at + f.len >= end {
                    break;
                }
            }
        }
        self.track(dst);
        self.push(Fill { buf: dst, at: dst_at, len, page: NOT_FROM_FLASH, first: 0, op_index: 0 });
        for f in found.iter().rev() {
            let (lo, hi) = (f.at.max(src_at), (f.at + f.len).min(end));
            let first = if f.page == NOT_FROM_FLASH { 0 } else { f.first + (lo - f.at) };
            self.push(Fill {
                buf: dst,
                at: dst_at + (lo - src_at),
                len: hi - lo,
                page: f.page,
                first,
                op_index: f.op_index,
            });
        }
        self.scratch = found;
    }

    /// The flash page that supplied sector `sector` of `buf` in this request,
    /// if it came from a flash read.
    pub fn lookup(&self, buf: BufId, sector: u32, pages_per_block: u32) -> Option<FlashSource> {
        let f = self.fills.iter().rev().find(|f| f.covers(buf, sector))?;
        (f.page != NOT_FROM_FLASH).then(|| FlashSource {
            page: f.page,
            block: f.page / u64::from(pages_per_block),
            page_in_block: (f.page % u64::from(pages_per_block)) as u32,
            sector_in_page: f.first + (sector - f.at),
            op_index: f.op_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PPB: u32 = 32;

    fn page_of(s: &ReadSources, buf: BufId, sector: u32) -> Option<(u64, u32, u64)> {
        s.lookup(buf, sector, PPB).map(|f| (f.page, f.sector_in_page, f.op_index))
    }

    #[test]
    fn a_read_names_its_page_sector_and_operation() {
        let mut s = ReadSources::default();
        let host = BufId::new(0, 0);
        s.record_read(host, 8, 8, 100, 0, 7);
        s.record_read(host, 0, 4, 65, 4, 9);
        assert_eq!(page_of(&s, host, 10), Some((100, 2, 7)));
        assert_eq!(page_of(&s, host, 3), Some((65, 7, 9)));
        assert_eq!(page_of(&s, host, 5), None, "never filled");
        let f = s.lookup(host, 10, PPB).unwrap();
        assert_eq!((f.block, f.page_in_block), (3, 4));
    }

    #[test]
    fn copies_carry_sources_and_zeros_shadow_them() {
        let mut s = ReadSources::default();
        let (host, tmp) = (BufId::new(0, 0), BufId::new(1, 0));
        s.record_read(tmp, 0, 8, 200, 0, 1);
        s.record_copy(host, 16, tmp, 2, 4);
        assert_eq!(page_of(&s, host, 17), Some((200, 3, 1)));
        s.record_read(tmp, 0, 8, 300, 0, 2);
        s.record_copy(host, 0, tmp, 0, 8);
        assert_eq!(page_of(&s, host, 0), Some((300, 0, 2)), "the newest read of the scratch buffer");
        assert_eq!(page_of(&s, host, 17), Some((200, 3, 1)), "earlier copies keep theirs");
        s.record_fill(host, 16, 2);
        assert_eq!(page_of(&s, host, 17), None, "zeros are not from flash");
        let stale = BufId::new(0, 1);
        assert_eq!(page_of(&s, stale, 0), None, "another generation is another buffer");
        s.clear();
        assert_eq!(page_of(&s, host, 0), None);
    }

    #[test]
    fn a_copy_from_an_untracked_buffer_shadows_the_destination() {
        let mut s = ReadSources::default();
        let (host, cache) = (BufId::new(0, 0), BufId::new(5, 0));
        s.record_read(host, 0, 8, 10, 0, 1);
        s.record_copy(host, 0, cache, 0, 4);
        assert_eq!(page_of(&s, host, 1), None, "overlaid from a DRAM cache");
        assert_eq!(page_of(&s, host, 5), Some((10, 5, 1)));
    }

    #[test]
    fn a_full_log_starts_over_instead_of_growing() {
        let mut s = ReadSources::default();
        let host = BufId::new(0, 0);
        for i in 0..ReadSources::CAPACITY as u64 + 10 {
            s.record_read(host, (i % 64) as u32, 1, i, 0, i);
        }
        assert!(s.fills.len() <= ReadSources::CAPACITY);
        assert_eq!(page_of(&s, host, 9), Some((ReadSources::CAPACITY as u64 + 9, 0, ReadSources::CAPACITY as u64 + 9)));
    }
}
