//! Multi-plane operations: when a unit is a die, the pages of one row of a
//! group (the same page offset in every member block, which share a block
//! offset) are programmed — and GC copies are read, copied back and
//! programmed — with one multi-plane operation, which costs the die one
//! cell phase for all its planes instead of one per plane.
//!
//! # Host writes
//!
//! A host page is *staged* when it is allocated: its slot is taken from the
//! stream's frontier, and pages that follow it in the same row of the same
//! group are staged with it. The row is programmed when it is complete,
//! when the next page goes elsewhere (another unit, stream or row), before
//! anything that may run GC or evict a cached map entry (`dftl`'s: the
//! staged pages hold their entries' cache slots), and at the end of every
//! host request. So a write is never held waiting for a partner: a
//! request that leaves a row half full programs what it has single-plane,
//! and the next page to that row is programmed single-plane too. The
//! cursor stays on a die for a row (`placement.rs`), so a request of many
//! pages fills whole rows on one die after another. Pages are numbered
//! (OOB sequence) and remapped when they are programmed, in slot order, so
//! the newest copy of a logical page always has the highest number.
//! Read-modify-write pages wait in a staging buffer of one page per plane.
//!
//! # Garbage collection
//!
//! A victim group's valid pages are copied into the GC frontier of the
//! same die stream by stream, each destination slot taking a source from
//! its own plane where one is left (copyback stays within a plane), else
//! from the plane with the most left (moved by read + program: a channel
//! transfer each way). Each destination row is issued as: one multi-plane
//! copyback for its same-plane pages when their sources, too, share a page
//! offset (a multi-plane read; they share the victim's block offset), else
//! one copyback each; and for the rest (or all, without copyback) reads
//! into the GC buffer — multi-plane when the sources share a page offset —
//! and one multi-plane program. Metadata pages moved across planes go one
//! by one (read and program of metadata bytes). Victims are erased with
//! one multi-plane erase of the group.

use super::{encode_oob, DataPlane, Mapper, MAX_PLANES_PER_GROUP, OOB_BYTES, OOB_DATA};
use crate::flash::{BufId, Cause, CopybackOp, Flash, FlashError, ProgramOp, ReadOp};
use crate::ftl::mutants::Mutant;
use crate::ftl::FtlError;
use crate::nand::PageAddr;

fn page(ppn: u32) -> PageAddr {
    PageAddr(u64::from(ppn))
}

/// A host page waiting for the rest of its row.
#[derive(Copy, Clone, Debug)]
struct Staged {
    lpn: u32,
    tag: u32,
    ppn: u32,
    buf: BufId,
    sector: u32,
}

/// The host pages staged for one row of a group.
#[derive(Clone, Debug)]
pub(super) struct HostRow {
    n: usize,
    unit: usize,
    stream: u8,
    group: u32,
    row: u32,
    pages: [Staged; MAX_PLANES_PER_GROUP],
    /// Pages of the staging buffer holding staged read-modify-write data.
    buf_used: u32,
}

impl Default for HostRow {
    fn default() -> Self {
        let none = Staged { lpn: 0, tag: 0, ppn: 0, buf: BufId::from_raw(u64::MAX), sector: 0 };
        HostRow { n: 0, unit: 0, stream: 0, group: 0, row: 0, pages: [none; MAX_PLANES_PER_GROUP], buf_used: 0 }
    }
}

impl HostRow {
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// One GC copy of a row.
#[derive(Copy, Clone, Debug)]
struct RowCopy {
    src: u32,
    dst: u32,
    index: u32,
    kind: u8,
    oob: [u8; OOB_BYTES],
}

/// The GC copies of one destination row.
struct GcRow {
    n: usize,
    copies: [RowCopy; MAX_PLANES_PER_GROUP],
}

impl GcRow {
    fn new() -> GcRow {
        let none = RowCopy { src: 0, dst: 0, index: 0, kind: 0, oob: [0; OOB_BYTES] };
        GcRow { n: 0, copies: [none; MAX_PLANES_PER_GROUP] }
    }
}

impl DataPlane {
    /// The plane (within its die) of page `ppn`.
    fn plane_in_die(&self, ppn: u32) -> u32 {
        self.layout.plane_in_unit(self.layout.block_of_ppn(ppn))
    }

    // ----- host writes -----

    /// Where read-modify-write data goes: a free page of the staging buffer.
    pub(super) fn rmw_buffer(&self) -> (BufId, u32) {
        match self.stage_buf {
            Some(buf) => (buf, (!self.staged.buf_used).trailing_zeros() * self.spp),
            None => (self.tmp_buf.expect("buffers allocated at power-on"), 0),
        }
    }

    /// Stage host page `lpn` (its entry looked up as `tag`) from `buf` at
    /// `sector` on `unit` and `stream`; program the row if it is complete.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stage_host_page<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        stream: u8,
        lpn: u32,
        tag: u32,
        buf: BufId,
        sector: u32,
    ) -> Result<(), FtlError> {
        let f = self.units[unit].frontier[stream as usize];
        let s = &self.staged;
        if s.n > 0 && (s.unit != unit || s.stream != stream || s.group != f.group || s.row != f.row) {
            self.flush_host_row(flash, m)?;
        }
        let ppn = match self.take_slot(unit, stream) {
            Some(ppn) => ppn,
            // Nothing is staged (it would be in this row): GC may run.
            None => self.alloc_page_slow(flash, m, unit, stream)?,
        };
        // Programmed with its row, soon: warm its NAND state now.
        flash.prefetch_page(page(ppn));
        // The slot taken ended its row when the frontier moved on to the next.
        let row_done = self.units[unit].frontier[stream as usize].member == 0;
        let (group, row) = (self.group_of_ppn(ppn), self.layout.page_in_block(ppn));
        let s = &mut self.staged;
        if s.n == 0 {
            (s.unit, s.stream, s.group, s.row) = (unit, stream, group, row);
        }
        s.pages[s.n] = Staged { lpn, tag, ppn, buf, sector };
        s.n += 1;
        if Some(buf) == self.stage_buf {
            s.buf_used |= 1 << (sector / self.spp);
        }
        if row_done {
            self.flush_host_row(flash, m)?;
        }
        Ok(())
    }

    /// Program the staged row (one multi-plane program, or one program for
    /// a single page), then number and remap its pages in slot order.
    pub(super) fn flush_host_row<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<(), FtlError> {
        let (n, stream, unit) = (self.staged.n, self.staged.stream, self.staged.unit);
        if n == 0 {
            return Ok(());
        }
        self.staged.n = 0;
        self.staged.buf_used = 0;
        // The staged pages are read in place, one at a time (nothing stages
        // while a row is programmed): a copy of the whole row was a `memcpy`
        // per host request.
        let mut oobs = [[0u8; OOB_BYTES]; MAX_PLANES_PER_GROUP];
        for (k, oob) in oobs.iter_mut().enumerate().take(n) {
            let p = self.staged.pages[k];
            *oob = encode_oob(OOB_DATA | stream << 4, p.lpn, self.next_seq());
            self.summary_entry(flash, p.ppn, oob)?;
        }
        let pages = &self.staged.pages[..n];
        let programmed = if n == 1 {
            let p = &pages[0];
            self.counters.host_single_plane_programs += 1;
            flash.program(Cause::Host, page(p.ppn), p.buf, p.sector, &oobs[0])
        } else {
            self.counters.host_multi_plane_programs += 1;
            let mut ops =
                [ProgramOp { page: PageAddr(0), src: pages[0].buf, src_sector: 0, oob: &[] }; MAX_PLANES_PER_GROUP];
            for ((op, p), oob) in ops.iter_mut().zip(pages).zip(&oobs) {
                *op = ProgramOp { page: page(p.ppn), src: p.buf, src_sector: p.sector, oob };
            }
            flash.program_multi(Cause::Host, &ops[..n])
        };
        match programmed {
            Ok(()) => {}
            Err(FlashError::ProgramFailed) if self.mutant != Mutant::KeepsFailedProgram => {
                return self.restage_failed_row(flash, m, n);
            }
            Err(FlashError::ProgramFailed) => {
                // BUG (deliberate): the row stays mapped where it failed.
                self.retire_after_program_failure(flash, m, self.staged.group)?;
            }
            Err(e) => return Err(e.into()),
        }
        for k in 0..n {
            let p = self.staged.pages[k];
            self.host_page_programmed(m, unit, p.lpn, p.tag, p.ppn);
        }
        self.write_due_summary_or_retire(flash, m)
    }

    /// A program of the staged row (its first `n` pages, no longer
    /// staged) failed: retire the group, then stage and program the whole
    /// row again elsewhere (none of its pages was remapped yet; the copies
    /// that did program carry lower sequence numbers than the new ones).
    #[cold]
    fn restage_failed_row<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, n: usize) -> Result<(), FtlError> {
        let (row, unit, stream, group) = (self.staged.pages, self.staged.unit, self.staged.stream, self.staged.group);
        self.retire_after_program_failure(flash, m, group)?;
        for p in &row[..n] {
            self.stage_host_page(flash, m, unit, stream, p.lpn, p.tag, p.buf, p.sector)?;
        }
        self.flush_host_row(flash, m)
    }

    // ----- garbage collection -----

    /// Copy a victim's valid pages (gathered plane by plane, each with its
    /// destination stream) row by row into the streams' frontiers of `unit`.
    pub(super) fn copy_batch_rows<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        victim: u32,
        cause: Cause,
        batch: &mut [(u32, u32, u8, u8)],
    ) -> Result<(), FtlError> {
        // Stream by stream; within a stream plane by plane, row by row.
        batch.sort_unstable_by_key(|&(src, _, _, stream)| (stream, src));
        let mut start = 0;
        while start < batch.len() {
            let stream = batch[start].3;
            let end = start + batch[start..].iter().take_while(|e| e.3 == stream).count();
            self.copy_stream_rows(flash, m, unit, victim, cause, stream, &batch[start..end])?;
            start = end;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_stream_rows<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        victim: u32,
        cause: Cause,
        stream: u8,
        pages: &[(u32, u32, u8, u8)],
    ) -> Result<(), FtlError> {
        // Per plane: the range of `pages` from that plane, and how far it is taken.
        let mut next = [0usize; MAX_PLANES_PER_GROUP];
        let mut end = [0usize; MAX_PLANES_PER_GROUP];
        for (i, &(src, ..)) in pages.iter().enumerate() {
            let p = self.plane_in_die(src) as usize;
            if end[p] == 0 {
                next[p] = i;
            }
            end[p] = i + 1;
        }
        let mut row = GcRow::new();
        for _ in 0..pages.len() {
            if !self.frontier_has_room(unit, stream) {
                self.open_group(unit, stream)?;
            }
            let f = self.units[unit].frontier[stream as usize];
            let want = self.plane_in_die(f.block_ppn) as usize;
            let plane = if next[want] < end[want] {
                want
            } else {
                (0..MAX_PLANES_PER_GROUP).max_by_key(|&p| end[p] - next[p]).expect("planes")
            };
            let (src, index, kind, _) = pages[next[plane]];
            next[plane] += 1;
            if row.n > 0
                && (self.group_of_ppn(row.copies[0].dst) != f.group
                    || self.layout.page_in_block(row.copies[0].dst) != f.row)
            {
                self.issue_gc_row(flash, m, victim, cause, &mut row)?;
            }
            let dst = self.take_slot(unit, stream).expect("the frontier has room");
            // Its slot is programmed when the row is issued: warm it now, so
            // the row's misses overlap.
            flash.prefetch_page(page(dst));
            let oob = encode_oob(kind | stream << 4, index, self.next_seq());
            self.summary_entry(flash, dst, &oob)?;
            row.copies[row.n] = RowCopy { src, dst, index, kind, oob };
            row.n += 1;
            if self.units[unit].frontier[stream as usize].member == 0 || !self.frontier_has_room(unit, stream) {
                self.issue_gc_row(flash, m, victim, cause, &mut row)?;
            }
        }
        self.issue_gc_row(flash, m, victim, cause, &mut row)
    }

    /// Whether the pages share a block offset and page offset (one multi-plane read).
    fn one_offset(&self, mut pages: impl Iterator<Item = u32>) -> bool {
        let Some(first) = pages.next() else { return true };
        let l = &self.layout;
        let at = |p: u32| (l.block_in_plane(l.block_of_ppn(p)), l.page_in_block(p));
        pages.all(|p| at(p) == at(first))
    }

    /// Move a row's pages (see the module docs), then remap them in slot order.
    fn issue_gc_row<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        victim: u32,
        cause: Cause,
        row: &mut GcRow,
    ) -> Result<(), FtlError> {
        // Which copies' reads were uncorrectable (bit k: copy k).
        let lost = match self.move_gc_row(flash, cause, row) {
            // BUG (deliberate): the row is remapped where it failed.
            Err(FtlError::Flash(FlashError::ProgramFailed)) if self.mutant == Mutant::KeepsFailedCopy => 0,
            r => r?,
        };
        for (k, c) in row.copies[..row.n].iter().enumerate() {
            if lost >> k & 1 == 1 {
                self.page_lost(m, victim, c.index, c.src, c.dst);
            } else {
                self.page_moved(m, victim, c.kind, c.index, c.src, c.dst);
            }
        }
        row.n = 0;
        self.write_due_summary_or_retire(flash, m)
    }

    /// The flash operations of [`DataPlane::issue_gc_row`]; returns which
    /// copies (bit k: copy k) were lost to an uncorrectable read.
    fn move_gc_row(&mut self, flash: &mut dyn Flash, cause: Cause, row: &GcRow) -> Result<u32, FtlError> {
        let copies = &row.copies[..row.n];
        let mut lost_oobs = [[0u8; OOB_BYTES]; MAX_PLANES_PER_GROUP];
        let mut lost = 0u32;
        let mut by_copyback = [false; MAX_PLANES_PER_GROUP];
        for (cb, c) in by_copyback.iter_mut().zip(copies) {
            *cb = self.opts.copyback && self.plane_in_die(c.src) == self.plane_in_die(c.dst);
        }
        // Same-plane pages by copyback.
        let mut cb = [CopybackOp { src: PageAddr(0), dst: PageAddr(0), oob: None }; MAX_PLANES_PER_GROUP];
        let mut ncb = 0;
        for (c, _) in copies.iter().zip(&by_copyback).filter(|(_, &b)| b) {
            cb[ncb] = CopybackOp { src: page(c.src), dst: page(c.dst), oob: Some(&c.oob) };
            ncb += 1;
        }
        if ncb > 1 && self.one_offset(cb[..ncb].iter().map(|o| o.src.0 as u32)) {
            self.counters.gc_multi_plane_ops += 1;
            flash.copyback_multi(cause, &cb[..ncb])?;
        } else {
            for o in &cb[..ncb] {
                flash.copyback(cause, o.src, o.dst, o.oob)?;
            }
        }
        // The others by read + program through the GC buffer.
        let buf = self.gc_buf.expect("gc buffer allocated at power-on");
        let mut reads = [ReadOp { page: PageAddr(0), dst: buf, dst_sector: 0 }; MAX_PLANES_PER_GROUP];
        let mut programs = [ProgramOp { page: PageAddr(0), src: buf, src_sector: 0, oob: &[] }; MAX_PLANES_PER_GROUP];
        let mut n = 0;
        let mut copy_of = [0usize; MAX_PLANES_PER_GROUP];
        for (k, (c, _)) in copies.iter().zip(&by_copyback).enumerate().filter(|(_, (_, &b))| !b) {
            if c.kind != OOB_DATA && c.kind != super::lost::OOB_LOST {
                self.move_meta_page(flash, cause, c.src, c.dst, &c.oob)?;
                continue;
            }
            reads[n] = ReadOp { page: page(c.src), dst: buf, dst_sector: n as u32 * self.spp };
            copy_of[n] = k;
            n += 1;
        }
        let read_one_by_one = if n > 1 && self.one_offset(reads[..n].iter().map(|r| r.page.0 as u32)) {
            // An uncorrectable page: read them one by one to know which (see lost.rs).
            match flash.read_multi(cause, &reads[..n]) {
                Err(FlashError::Uncorrectable) => true,
                r => r.map(|()| false)?,
            }
        } else {
            true
        };
        if read_one_by_one {
            for (i, r) in reads[..n].iter().enumerate() {
                if self.read_gc_copy(flash, cause, r.page.0 as u32, r.dst_sector)? {
                    let c = &copies[copy_of[i]];
                    lost_oobs[i] = self.lost_copy_oob(c.dst, &c.oob);
                    lost |= 1 << copy_of[i];
                }
            }
        }
        for i in 0..n {
            let c = &copies[copy_of[i]];
            let oob: &[u8] = if lost >> copy_of[i] & 1 == 1 { &lost_oobs[i] } else { &c.oob };
            programs[i] = ProgramOp { page: page(c.dst), src: buf, src_sector: i as u32 * self.spp, oob };
        }
        match n {
            0 => {}
            1 => flash.program(cause, programs[0].page, buf, 0, programs[0].oob)?,
            _ => {
                self.counters.gc_multi_plane_ops += 1;
                flash.program_multi(cause, &programs[..n])?
            }
        }
        Ok(lost)
    }
}
