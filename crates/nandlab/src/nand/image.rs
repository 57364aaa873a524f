//! The NAND's state as a byte stream, and back: what `serve --drive`
//! keeps between runs (see `run/serve/drive_file.rs` for the file around
//! it).
//!
//! What is written is what the flash holds, not how this process stores
//! it: per block its write pointer, P/E count, bad and stray flags; per
//! page that is not erased (or has spare bytes) its program count and
//! content kind, its content as runs (host data: LBA, write id, length;
//! zeros; erased sectors), as bytes (an FTL metadata page) or nothing
//! (garbage: torn or corrupted), and its stored spare bytes. Blocks
//! known erased (see the module docs of [`super`]) are skipped whole, so
//! the stream grows with what was programmed, not with the device.
//!
//! Reading checks every field against the geometry before it is used
//! (addresses, lengths, run lists covering exactly one page, write ids in
//! range), so a damaged stream is an error naming the page or block, never
//! a panic or an allocation the geometry does not bound.

use super::payload::{total_len, Run, RunKind};
use super::{Geometry, Nand, PageSlot, KIND_MASK, K_ERASED, K_GARBAGE, K_INLINE, K_META, K_RUNS, K_UNDEFINED, K_ZERO};
use crate::oracle::MAX_WRITE_ID;
use crate::util::codec::{Dec, Enc};
use std::io::{self, Read, Write};

/// Ends the list of pages.
const END_OF_PAGES: u64 = u64::MAX;

impl Nand {
    /// Write the flash's state (see the module docs).
    pub fn save_image<W: Write>(&self, e: &mut Enc<W>) -> io::Result<()> {
        let ppb = self.pages_per_block as usize;
        let blocks = self.write_ptr.len();
        e.u32(blocks as u32)?;
        e.u32(self.pages_per_block)?;
        e.u32(self.oob_stored_bytes as u32)?;
        for b in 0..blocks {
            e.u32(self.write_ptr[b])?;
            e.u32(self.erase_count[b])?;
            e.u8(u8::from(self.bad.get(b)) | u8::from(self.stray.get(b)) << 1)?;
        }
        let n = self.oob_stored_bytes;
        let mut runs = Vec::new();
        for b in (0..blocks).filter(|&b| self.write_ptr[b] != 0 || self.stray.get(b)) {
            for i in b * ppb..(b + 1) * ppb {
                let slot = self.slots[i];
                let oob = &self.oob[i * n..i * n + n];
                if slot.state == 0 && oob.iter().all(|&x| x == 0) {
                    continue;
                }
                e.u64(i as u64)?;
                e.u8(slot.state)?;
                match slot.state & KIND_MASK {
                    K_META => e.bytes(self.bytes.get(slot.a, slot.b() as usize))?,
                    K_GARBAGE | K_UNDEFINED => {}
                    _ => {
                        runs.clear();
                        self.append_page_runs(i, 0, self.sectors_per_page, &mut runs);
                        e.u32(runs.len() as u32)?;
                        for r in &runs {
                            e.u8(r.kind as u8)?;
                            e.u32(r.lba)?;
                            e.u32(r.write)?;
                            e.u32(r.len)?;
                        }
                    }
                }
                e.raw(oob)?;
            }
        }
        e.u64(END_OF_PAGES)
    }

    /// A NAND of `geometry` with the state [`Nand::save_image`] wrote.
    /// `oob_stored_bytes` must be what the stream was saved with.
    pub fn load_image<R: Read>(geometry: Geometry, oob_stored_bytes: u32, d: &mut Dec<R>) -> Result<Nand, String> {
        let mut nand = Nand::new(geometry, oob_stored_bytes, &[])?;
        let blocks = d.u32("NAND block count")?;
        let ppb = d.u32("NAND pages per block")?;
        let oob = d.u32("NAND spare bytes stored per page")?;
        let expect = (nand.write_ptr.len() as u32, nand.pages_per_block, nand.oob_stored_bytes as u32);
        if (blocks, ppb, oob) != expect {
            return Err(format!(
                "NAND: {blocks} blocks of {ppb} pages with {oob} spare bytes stored, the device has {} blocks of {} pages with {}",
                expect.0, expect.1, expect.2
            ));
        }
        for b in 0..blocks as usize {
            let what = |f: &str| format!("NAND block {b} {f}");
            nand.write_ptr[b] = d.u32_max(&what("write pointer"), ppb)?;
            nand.erase_count[b] = d.u32(&what("erase count"))?;
            let flags = d.u8(&what("flags"))?;
            if flags > 3 {
                return Err(format!("{}: {flags:#x} is not a set of flags (bad 1, stray 2)", what("flags")));
            }
            nand.bad.set(b, flags & 1 != 0);
            nand.stray.set(b, flags & 2 != 0);
        }
        let (pages, n, spp) = (nand.geometry.pages(), nand.oob_stored_bytes, nand.sectors_per_page);
        let mut next = 0u64;
        let mut runs = Vec::new();
        loop {
            let i = d.u64("NAND page index")?;
            if i == END_OF_PAGES {
                return Ok(nand);
            }
            if i < next || i >= pages {
                return Err(format!("NAND page index {i}: out of order or beyond the last page {}", pages - 1));
            }
            next = i + 1;
            let i = i as usize;
            let state = d.u8(&format!("NAND page {i} state"))?;
            let kind = state & KIND_MASK;
            match kind {
                K_META => {
                    let bytes =
                        d.bytes(&format!("NAND page {i} metadata"), nand.geometry.page_size_bytes() as usize)?;
                    let h = nand.bytes.insert(&bytes);
                    nand.slots[i] = PageSlot::content(K_META, h, bytes.len() as u32);
                }
                K_GARBAGE | K_UNDEFINED => nand.slots[i] = PageSlot::content(kind, 0, 0),
                K_ERASED | K_INLINE | K_RUNS | K_ZERO => {
                    load_runs(d, i, spp, &mut runs)?;
                    nand.store_runs(i, &runs);
                }
                _ => return Err(format!("NAND page {i} state {state:#x}: no such content kind")),
            }
            nand.slots[i].state = (nand.slots[i].state & KIND_MASK) | (state & !KIND_MASK);
            d.raw(&format!("NAND page {i} spare bytes"), &mut nand.oob[i * n..i * n + n])?;
            // Content in a block known erased would survive its next erase.
            let b = nand.block_index(i);
            if nand.write_ptr[b] == 0 {
                nand.stray.set(b, true);
            }
        }
    }
}

/// The run list of page `i`: it must cover the page exactly.
fn load_runs<R: Read>(d: &mut Dec<R>, i: usize, spp: u32, runs: &mut Vec<Run>) -> Result<(), String> {
    let count = d.u32_max(&format!("NAND page {i} run count"), spp)?;
    runs.clear();
    for k in 0..count {
        let what = |f: &str| format!("NAND page {i} run {k} {f}");
        let kind = match d.u8(&what("kind"))? {
            0 => RunKind::Data,
            1 => RunKind::Zero,
            2 => RunKind::Erased,
            3 => RunKind::Metadata,
            5 => RunKind::Garbage,
            other => return Err(format!("{}: {other} is no kind a page holds", what("kind"))),
        };
        let lba = d.u32(&what("LBA"))?;
        let write = d.u32_max(&what("write id"), MAX_WRITE_ID)?;
        let len = d.u32_max(&what("length"), spp)?;
        if len == 0 || (kind == RunKind::Data && (write == 0 || lba.checked_add(len).is_none())) {
            return Err(format!("NAND page {i} run {k}: {len} sectors of write {write} at LBA {lba} is no run"));
        }
        runs.push(if kind == RunKind::Data { Run::data(lba, write, len) } else { Run::filler(kind, len) });
    }
    if total_len(runs) != spp {
        return Err(format!("NAND page {i}: its runs cover {} sectors, a page has {spp}", total_len(runs)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::PageContent;
    use super::*;
    use crate::nand::{BlockAddr, GeometryConfig, PageAddr};
    use crate::violation::{Checker, RuleConfig, ViolationLog};

    fn nand() -> Nand {
        let g = GeometryConfig::one_die_for_tests(2, 8, 4, 4096);
        Nand::new(g.validate().unwrap(), 8, &[BlockAddr(5)]).unwrap()
    }

    fn save(n: &Nand) -> Vec<u8> {
        let mut e = Enc::new(Vec::new());
        n.save_image(&mut e).unwrap();
        e.into_inner()
    }

    #[test]
    fn every_kind_of_page_and_block_state_round_trips() {
        let mut n = nand();
        let sev = RuleConfig::default().table();
        let mut log = ViolationLog::new(8);
        let mut ck = Checker::new(&sev, &mut log, 0, None);
        n.program(&mut ck, PageAddr(0), &[Run::data(100, 7, 8)], &[1, 2, 3]).unwrap();
        let mixed = [Run::data(3, 9, 2), Run::filler(RunKind::Zero, 1), Run::data(40, 11, 5)];
        n.program(&mut ck, PageAddr(1), &mixed, &[]).unwrap();
        n.program_meta(&mut ck, PageAddr(4), b"summary", &[9; 8]).unwrap();
        n.program(&mut ck, PageAddr(8), &[Run::filler(RunKind::Zero, 8)], &[]).unwrap();
        n.corrupt_page(PageAddr(9));
        n.erase(&mut ck, BlockAddr(3)).unwrap();
        n.mark_bad(BlockAddr(6));
        let bytes = save(&n);
        let back = Nand::load_image(n.geometry().clone(), 8, &mut Dec::new(&bytes[..])).unwrap();
        for p in 0..n.geometry().pages() {
            assert_eq!(back.page_content(PageAddr(p)), n.page_content(PageAddr(p)), "page {p}");
            assert_eq!(back.is_programmed(PageAddr(p)), n.is_programmed(PageAddr(p)), "page {p}");
        }
        for b in 0..n.geometry().blocks() {
            let b = BlockAddr(u64::from(b));
            assert_eq!(
                (back.is_bad(b), back.erase_count(b), back.write_pointer(b)),
                (n.is_bad(b), n.erase_count(b), n.write_pointer(b))
            );
        }
        assert_eq!(back.oob, n.oob);
        assert!(matches!(back.page_content(PageAddr(4)), PageContent::Metadata(m) if m == b"summary"));
        assert_eq!(save(&back), bytes, "saving what was loaded gives the same stream");
    }

    #[test]
    fn a_damaged_stream_is_an_error_naming_the_place() {
        let mut n = nand();
        let sev = RuleConfig::default().table();
        let mut log = ViolationLog::new(8);
        n.program(&mut Checker::new(&sev, &mut log, 0, None), PageAddr(0), &[Run::data(100, 7, 8)], &[]).unwrap();
        let good = save(&n);
        let load = |b: &[u8]| Nand::load_image(n.geometry().clone(), 8, &mut Dec::new(b)).err().unwrap();
        assert!(load(&good[..good.len() - 3]).contains("ends early"));
        let mut bad = good.clone();
        bad[12] = 99; // block 0's write pointer
        assert!(load(&bad).contains("NAND block 0 write pointer"), "{}", load(&bad));
        let page_at = 12 + 16 * 9;
        let mut bad = good.clone();
        bad[page_at..page_at + 8].copy_from_slice(&1000u64.to_le_bytes());
        assert!(load(&bad).contains("page index 1000"), "{}", load(&bad));
        let mut bad = good.clone();
        bad[page_at + 9..page_at + 13].copy_from_slice(&9u32.to_le_bytes()); // run count
        assert!(load(&bad).contains("run count"), "{}", load(&bad));
        let mut bad = good;
        bad[page_at + 13 + 9..page_at + 13 + 13].copy_from_slice(&7u32.to_le_bytes()); // run length
        assert!(load(&bad).contains("cover 7 sectors"), "{}", load(&bad));
    }
}
