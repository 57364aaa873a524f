//! Summary pages: the last page of every group the data plane fills lists
//! what each of the group's data pages holds, so a mount reads one page
//! per full group instead of the spare area of every page.
//!
//! Real firmware does the same: OpenSSD Jasmine's FTLs keep the logical
//! page of each page of the open block in DRAM and write the list into the
//! block's last page ("misc metadata"), and OPTR (Chang et al.) chains
//! such summary pages. An FTL opts in ([`DataPlane::enable_summaries`]);
//! `page` does, `dftl` does not (yet: its translation pages are committed
//! without their OOB, see below).
//!
//! # Design
//!
//! - **One per group, in its last row.** The group (one block, or one
//!   block per plane of a die with multi-plane groups) is what is allocated,
//!   filled and erased as a unit, so one summary covers it: the last page of
//!   its last usable member block. Data fills the other rows (slots run row
//!   by row, member by member); the last page of the other members stays
//!   erased. So every row holding data is whole and a group holds an even
//!   multiple of its width: were the summary one slot among data, a die's
//!   rows would fall out of step with the placement cursor at every group
//!   (a row split over two host requests is two single-plane programs) and
//!   stay so on sequential traffic of row-sized requests, a large loss of
//!   throughput on multi-plane drives. A group narrowed by a bad block has
//!   a narrower summary row and its summary lists what is left.
//! - **Contents.** A header (magic, group, entry count) and, for
//!   every data slot in slot order, the 10 OOB bytes that page was
//!   programmed with (kind and stream, index, 40-bit sequence number): a
//!   mount learns from it exactly what an OOB scan of the group would.
//!   The entries are stored *dense* (see [`encode_dense`]): the first
//!   one as it is, then each later one as its sequence number's and its
//!   index's differences from the entry before (the index's from that
//!   one + 1), zigzag-coded, in as many bytes as the largest difference in
//!   this summary needs, and its kind byte only if the summary's kinds
//!   differ. Neighbouring slots are programmed close together (a
//!   multi-plane row at consecutive sequence numbers, sequential data at
//!   consecutive indexes), so differences are small, sequential ones
//!   smallest. Fixed widths, not varints: the encoder is two passes of
//!   straight-line code, cheaper than a varint coder. A summary whose
//!   dense form would not be shorter than the plain 10 bytes per entry is
//!   stored plain (the entry count's top bit says which), so a summary
//!   never needs more than the plain size [`DataPlane::enable_summaries`]
//!   checks against the page. Why dense: the simulator stores what is
//!   programmed, and plain summaries were a large share of what a big
//!   preconditioned drive holds in memory. Measured sizes and costs:
//!   `docs/design-notes/ftl.md`, *Summary pages*.
//! - **When.** Entries are kept in DRAM per open frontier (one buffer of
//!   `(pages per block − 1) × width` entries per unit and stream) as pages
//!   are programmed.
//!   The summary is programmed after the group's last data page has been
//!   programmed — never before, or a cut between the two would leave a
//!   summary vouching for a page that does not exist — and only then is the
//!   group sealed (a GC candidate). Its cause is `metadata`.
//! - **Cost.** One program per group: one per `(pages per block − 1) ×
//!   width` data programs (0.79 % with 128-page blocks, 1.6 % for `tiny`'s
//!   2 × 32-page groups), and the summary row is not available to data:
//!   one page per block of space, which the spare space loses (a higher
//!   WAF on drives with little spare space). GC and
//!   victim policies count the summary row like a missing block's pages:
//!   pages that are never valid data, never moved, and reclaimed with the
//!   erase (a group's valid count starts at its fixed pages, so policies
//!   rank groups by reclaimable data exactly as before). Wear leveling
//!   moves only valid pages: never a summary.
//! - **Trust.** [`DataPlane::read_summary`] accepts a summary only if its
//!   OOB says summary, its data reads (a torn program fails ECC), its
//!   header names this group and the right entry count, every entry is
//!   older than the summary, and the last data page of every other member
//!   carries the OOB the summary lists for it (no member was erased, or
//!   left undefined by a cut erase, since). Anything else — an open group
//!   (erased last slot), a torn summary, a group the FTL holds for its own
//!   metadata (checkpoints, logs: never summarised) — is for the FTL to
//!   scan page by page, as without summaries.
//! - **FTL metadata in data groups.** Entries are recorded where the data
//!   plane programs a page (host writes, GC and wear-leveling copies). An
//!   FTL that programs its own pages into frontier groups (`dftl`'s
//!   translation pages, [`DataPlane::commit_meta_page`]) would have to hand
//!   their OOB over too; until it does, summaries cannot be enabled with a
//!   metadata stream.

use super::{decode_oob, encode_oob, DataPlane, NONE, OOB_BYTES};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::kit::wire::summary::{SummaryHeader, SUMMARY_HEADER_BYTES};
use crate::ftl::mutants::Mutant;
use crate::ftl::FtlError;
use crate::nand::PageAddr;

/// The OOB kind byte of a summary page. The data plane reserves it: FTLs
/// built on it use other kinds for their own pages.
pub const OOB_SUMMARY: u8 = 0x0e;
/// The header (magic, group, entry count; see [`SummaryHeader`]): its
/// dense flag set, entries as differences ([`encode_dense`]); clear, 10
/// plain OOB bytes each.
const HEADER_BYTES: usize = SUMMARY_HEADER_BYTES;
/// Head of the dense entries: seq step width, index step width, kind
/// width (0 or 1), the first entry as it is.
const DENSE_HEAD_BYTES: usize = 3 + OOB_BYTES;
/// Sequence numbers are 40 bits in the OOB.
const SEQ_LIMIT: u64 = 1 << 40;

/// What a mount found in a group's summary slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SummaryRead {
    /// A valid summary: the entries describe every page of the group.
    Valid,
    /// No summary there (an open or free group, or one the FTL holds).
    Absent,
    /// A summary that cannot be trusted (torn, or contradicted by a member).
    Rejected,
}

/// The summaries of the groups being filled, one per frontier.
pub(super) struct Summaries {
    /// Entries of a group without bad blocks (its data slots).
    entries_max: usize,
    /// Streams per unit (buffers are indexed `unit × streams + stream`).
    streams: usize,
    /// Per buffer: the group it is filling (NONE: none) and entries recorded.
    pub(super) group: Vec<u32>,
    filled: Vec<u32>,
    /// Per buffer: `entries_max` OOBs in slot order.
    oobs: Vec<[u8; OOB_BYTES]>,
    /// The buffer whose group has all its data pages, awaiting its summary.
    due: u32,
    /// The due summary was already programmed ([`Mutant::SummaryBeforeLastPage`]).
    programmed_early: bool,
    /// The page image a summary is built in (and a mount reads into).
    page: Vec<u8>,
}

impl Summaries {
    /// Bytes of a summary of `entries` entries.
    fn bytes(entries: usize) -> usize {
        HEADER_BYTES + entries * OOB_BYTES
    }

    fn clear(&mut self) {
        self.group.fill(NONE);
        self.filled.fill(0);
        self.due = NONE;
        self.programmed_early = false;
    }
}

impl DataPlane {
    /// Write a summary page into the last slot of every group filled from
    /// now on (before format or mount). `on`: `Some(true)` requires it,
    /// `None` enables it where a summary fits in a page. Returns whether
    /// summaries are on.
    pub fn enable_summaries(&mut self, ftl: &str, on: Option<bool>) -> Result<bool, String> {
        if on == Some(false) {
            self.summaries = None;
            return Ok(false);
        }
        let entries_max = ((self.ppb - 1) * self.layout.planes_per_group) as usize;
        let page_bytes = self.geometry.page_size_bytes() as usize;
        let problem = if self.ppb < 2 {
            Some("a block of one page has no room for data beside a summary".to_string())
        } else if self.meta_stream.is_some() {
            Some("the FTL writes metadata pages into data groups, whose OOB summaries do not record".to_string())
        } else if Summaries::bytes(entries_max) > page_bytes {
            Some(format!(
                "a summary of {entries_max} pages takes {} bytes, more than a {page_bytes}-byte page",
                Summaries::bytes(entries_max)
            ))
        } else {
            None
        };
        match (problem, on) {
            (Some(p), Some(true)) => return Err(format!("{ftl} option `summary_pages`: {p}")),
            (Some(_), _) => {
                self.summaries = None;
                return Ok(false);
            }
            (None, _) => {}
        }
        let streams = usize::from(self.wl_stream) + 1;
        let buffers = self.layout.units() as usize * streams;
        self.summaries = Some(Summaries {
            entries_max,
            streams,
            group: vec![NONE; buffers],
            filled: vec![0; buffers],
            oobs: vec![[0xff; OOB_BYTES]; buffers * entries_max],
            due: NONE,
            programmed_early: false,
            page: vec![0xff; Summaries::bytes(entries_max)],
        });
        Ok(true)
    }

    /// Whether full groups get a summary page.
    pub fn summaries_enabled(&self) -> bool {
        self.summaries.is_some()
    }

    /// Device DRAM the summaries being built take.
    pub fn summary_dram_bytes(&self) -> u64 {
        self.summaries.as_ref().map_or(0, |s| (s.group.len() * 8 + s.oobs.len() * OOB_BYTES + s.page.len()) as u64)
    }

    /// Rows of `group` that never hold data: its summary's.
    pub(super) fn summary_rows(&self, group: u32) -> u32 {
        u32::from(self.summaries.is_some() && self.layout.width(group) > 0)
    }

    /// The page of `group` its summary goes to: its last member's last.
    fn summary_ppn(&self, group: u32) -> u32 {
        self.layout.slot_ppn(group, self.layout.capacity(group) - 1)
    }

    /// Power-on: no summary is being built.
    pub(super) fn reset_summaries(&mut self) {
        if let Some(s) = &mut self.summaries {
            s.clear();
        }
    }

    /// Page `ppn` of a frontier group is programmed with `oob`: record it
    /// in its group's summary (called before the program; the summary is
    /// written by [`DataPlane::write_due_summary`] after it).
    #[inline(always)]
    pub(super) fn summary_entry(
        &mut self,
        flash: &mut dyn Flash,
        ppn: u32,
        oob: &[u8; OOB_BYTES],
    ) -> Result<(), FtlError> {
        if self.summaries.is_some() {
            self.record_summary_entry(ppn, oob);
            let early = self.mutant == Mutant::SummaryBeforeLastPage;
            if self.summaries.as_ref().is_some_and(|s| early && s.due != NONE && !s.programmed_early) {
                self.program_summary(flash)?; // BUG (deliberate): before the page it lists last
            }
        }
        Ok(())
    }

    /// `group` is retired: forget the summary being built for it.
    pub(super) fn abandon_summary(&mut self, group: u32) {
        if let Some(s) = &mut self.summaries {
            for buffer in 0..s.group.len() {
                if s.group[buffer] == group {
                    (s.group[buffer], s.filled[buffer]) = (NONE, 0);
                    if s.due == buffer as u32 {
                        (s.due, s.programmed_early) = (NONE, false);
                    }
                }
            }
        }
    }

    /// Replace the entry of `ppn`, recorded before its program, with the
    /// OOB it is programmed with after all (a lost copy: see lost.rs).
    pub(super) fn amend_summary_entry(&mut self, ppn: u32, oob: &[u8; OOB_BYTES]) {
        if self.summaries.is_none() {
            return;
        }
        let (group, buffer, slot) = self.summary_slot(ppn);
        let s = self.summaries.as_mut().expect("summaries on");
        if s.group[buffer] == group {
            s.oobs[buffer * s.entries_max + slot] = *oob;
        }
    }

    /// The group of `ppn`, and its summary buffer and slot there.
    #[inline]
    fn summary_slot(&self, ppn: u32) -> (u32, usize, usize) {
        let block = self.layout.block_of_ppn(ppn);
        let group = self.layout.group_of_block(block);
        let unit = self.table.unit[group as usize] as usize;
        let stream = usize::from(self.group_stream[group as usize]);
        let width = self.layout.width(group);
        let member = if width == 1 { 0 } else { self.layout.member_index(group, block) };
        let slot = self.layout.page_in_block(ppn) * width + member;
        let s = self.summaries.as_ref().expect("summaries on");
        (group, unit * s.streams + stream, slot as usize)
    }

    fn record_summary_entry(&mut self, ppn: u32, oob: &[u8; OOB_BYTES]) {
        let (group, buffer, slot) = self.summary_slot(ppn);
        let entries = self.data_capacity(group);
        let s = self.summaries.as_mut().expect("summaries on");
        if s.group[buffer] != group {
            s.group[buffer] = group;
            s.filled[buffer] = 0;
        }
        s.oobs[buffer * s.entries_max + slot] = *oob;
        s.filled[buffer] += 1;
        if s.filled[buffer] == entries {
            debug_assert_eq!(s.due, NONE, "one group completes at a time");
            s.due = buffer as u32;
        }
    }

    /// After pages were programmed and committed: if they completed a
    /// group, program its summary and seal it.
    #[inline(always)]
    pub(super) fn write_due_summary(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        match &self.summaries {
            Some(s) if s.due != NONE => self.finish_summarised_group(flash),
            _ => Ok(()),
        }
    }

    #[cold]
    fn finish_summarised_group(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let s = self.summaries.as_ref().expect("summaries on");
        let group = s.group[s.due as usize];
        if !s.programmed_early {
            match self.program_summary(flash) {
                // BUG (deliberate): the group is sealed without its summary.
                Err(FtlError::Flash(FlashError::ProgramFailed)) if self.mutant == Mutant::KeepsFailedMetaProgram => {}
                r => r?,
            }
        }
        let s = self.summaries.as_mut().expect("summaries on");
        let buffer = s.due as usize;
        (s.group[buffer], s.filled[buffer], s.due, s.programmed_early) = (NONE, 0, NONE, false);
        self.seal(group);
        Ok(())
    }

    /// Program the due group's summary into its last slot.
    fn program_summary(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let seq = self.next_seq();
        let early = self.mutant == Mutant::SummaryBeforeLastPage;
        let s = self.summaries.as_mut().expect("summaries on");
        let buffer = s.due as usize;
        let group = s.group[buffer];
        let entries = self.data_capacity(group) as usize;
        let ppn = self.summary_ppn(group);
        let s = self.summaries.as_mut().expect("summaries on");
        let len = Summaries::bytes(entries);
        let page = &mut s.page[..len];
        let from = buffer * s.entries_max;
        let listed = &s.oobs[from..from + entries];
        let (dense, len) = match encode_dense(listed, &mut page[HEADER_BYTES..]) {
            Some(n) => (true, HEADER_BYTES + n),
            None => {
                for (dst, oob) in page[HEADER_BYTES..].chunks_exact_mut(OOB_BYTES).zip(listed) {
                    dst.copy_from_slice(oob);
                }
                (false, len)
            }
        };
        SummaryHeader { group, entries: entries as u32, dense }.emit(page);
        s.programmed_early = early;
        let oob = encode_oob(OOB_SUMMARY, group, seq);
        flash.program_meta(Cause::Metadata, PageAddr(u64::from(ppn)), &s.page[..len], &oob)?;
        self.counters.summary_pages += 1;
        Ok(())
    }

    /// Mount: read and check `group`'s summary. When valid, `out` holds the
    /// OOB of every data slot of the group in slot order, then the summary's own.
    pub fn read_summary(
        &mut self,
        flash: &mut dyn Flash,
        group: u32,
        out: &mut Vec<[u8; OOB_BYTES]>,
    ) -> Result<SummaryRead, FtlError> {
        out.clear();
        let width = self.layout.width(group);
        if self.summaries.is_none() || width == 0 {
            return Ok(SummaryRead::Absent);
        }
        let entries = self.data_capacity(group) as usize;
        let at = PageAddr(u64::from(self.summary_ppn(group)));
        let s = self.summaries.as_mut().expect("summaries on");
        let mut oob = [0u8; OOB_BYTES];
        match flash.read_oob(Cause::Recovery, at, &mut oob) {
            Ok(()) if oob[0] == OOB_SUMMARY => {}
            Ok(()) => return Ok(SummaryRead::Absent),
            Err(FlashError::Uncorrectable) => return Ok(SummaryRead::Rejected), // an erase was cut
            Err(e) => return Err(e.into()),
        }
        let page = &mut s.page[..Summaries::bytes(entries)];
        match flash.read_meta(Cause::Recovery, at, page, &mut []) {
            Ok(()) => {}
            Err(FlashError::Uncorrectable) => return Ok(SummaryRead::Rejected), // torn
            Err(e) => return Err(e.into()),
        }
        let Some(header) = SummaryHeader::parse(page).filter(|h| h.group == group && h.entries as usize == entries)
        else {
            return Ok(SummaryRead::Rejected);
        };
        let body = &page[HEADER_BYTES..];
        let decoded = if header.dense {
            decode_dense(body, entries, out)
        } else {
            out.extend(body.chunks_exact(OOB_BYTES).map(|e| <[u8; OOB_BYTES]>::try_from(e).unwrap()));
            true
        };
        let (_, _, seq) = decode_oob(&oob);
        if !decoded || out.iter().any(|entry| decode_oob(entry).2 >= seq) {
            out.clear();
            return Ok(SummaryRead::Rejected);
        }
        out.push(oob);
        // Every other member still holds what the summary lists at its last data page.
        let last_row = (self.ppb - 2) * width;
        for i in 0..width - 1 {
            let ppn = self.layout.member(group, i) * self.ppb + self.ppb - 2;
            match flash.read_oob(Cause::Recovery, PageAddr(u64::from(ppn)), &mut oob) {
                Ok(()) if oob == out[(last_row + i) as usize] => {}
                Ok(()) | Err(FlashError::Uncorrectable) => return Ok(SummaryRead::Rejected),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(SummaryRead::Valid)
    }
}

/// An entry's differences from the one before it (`prev`: its seq, kind,
/// index), zigzag-coded so that small negative steps are small too.
#[inline(always)]
fn entry_steps(entry: &[u8; OOB_BYTES], prev: (u64, u8, u32)) -> (u64, u64, (u64, u8, u32)) {
    let (kind, index, seq) = decode_oob(entry);
    let seq_step = zigzag(seq.wrapping_sub(prev.0) as i64);
    let index_step = u64::from(zigzag(i64::from(index.wrapping_sub(prev.2.wrapping_add(1)) as i32)) as u32);
    (seq_step, index_step, (seq, kind, index))
}

/// (seq, kind, index) of an OOB.
fn fields(entry: &[u8; OOB_BYTES]) -> (u64, u8, u32) {
    let (kind, index, seq) = decode_oob(entry);
    (seq, kind, index)
}

/// Bytes needed for `v` (0 for 0).
fn width_of(v: u64) -> usize {
    (u64::BITS - v.leading_zeros()).div_ceil(8) as usize
}

/// Write `entries` in the dense format into `out`; `None` if that is not
/// shorter than `out` (then the summary is stored plain). See the module
/// docs: a head (the byte widths of the sequence and index steps, whether
/// kinds are listed, then the first entry's 10 bytes as they are), then
/// for every later entry its steps from the one before in those widths,
/// and its kind if listed (else it is the first's). Two passes of
/// straight-line code: a summary is encoded for every group the drive
/// fills, one entry per page programmed.
pub(super) fn encode_dense(entries: &[[u8; OOB_BYTES]], out: &mut [u8]) -> Option<usize> {
    let (first, rest) = entries.split_first()?;
    let (mut seq_bits, mut index_bits, mut mixed_kinds, mut prev) = (0u64, 0u64, false, fields(first));
    for entry in rest {
        let (seq_step, index_step, now) = entry_steps(entry, prev);
        (seq_bits, index_bits, mixed_kinds, prev) =
            (seq_bits | seq_step, index_bits | index_step, mixed_kinds | (now.1 != first[0]), now);
    }
    let (seq_width, index_width, kind_width) = (width_of(seq_bits), width_of(index_bits), usize::from(mixed_kinds));
    let entry_width = seq_width + index_width + kind_width;
    let len = DENSE_HEAD_BYTES + rest.len() * entry_width;
    if len >= out.len() {
        return None;
    }
    out[..3].copy_from_slice(&[seq_width as u8, index_width as u8, kind_width as u8]);
    out[3..DENSE_HEAD_BYTES].copy_from_slice(first);
    let (mut at, mut prev) = (DENSE_HEAD_BYTES, fields(first));
    let mut staged = [0u8; 24];
    for entry in rest {
        let (seq_step, index_step, now) = entry_steps(entry, prev);
        // Whole 8-byte stores, each overwriting the previous one's unused
        // high bytes; the 24-byte window has room for every width.
        staged[..8].copy_from_slice(&seq_step.to_le_bytes());
        staged[seq_width..seq_width + 8].copy_from_slice(&index_step.to_le_bytes());
        staged[seq_width + index_width] = now.1;
        match out.get_mut(at..at + 16) {
            Some(dst) => dst.copy_from_slice(&staged[..16]),
            None => out[at..at + entry_width].copy_from_slice(&staged[..entry_width]),
        }
        at += entry_width;
        prev = now;
    }
    Some(len)
}

/// Read `count` dense entries from `bytes` into `out` (the inverse of
/// [`encode_dense`]); false if they are malformed (widths no encoder
/// writes, entries running off the page, a sequence number outside 40
/// bits).
pub(super) fn decode_dense(bytes: &[u8], count: usize, out: &mut Vec<[u8; OOB_BYTES]>) -> bool {
    let Some(head) = bytes.first_chunk::<DENSE_HEAD_BYTES>() else {
        return false;
    };
    let (seq_width, index_width, kind_width) = (usize::from(head[0]), usize::from(head[1]), usize::from(head[2]));
    let first: [u8; OOB_BYTES] = head[3..].try_into().unwrap();
    let entry_width = seq_width + index_width + kind_width;
    let fits = DENSE_HEAD_BYTES + count.saturating_sub(1) * entry_width <= bytes.len();
    if count == 0 || seq_width > 6 || index_width > 4 || kind_width > 1 || !fits {
        return false;
    }
    out.push(first);
    let mask = |width: usize| (1u64 << (8 * width)) - 1;
    let (mut seq, _, mut index) = fields(&first);
    let mut window = [0u8; 16];
    for k in 0..count - 1 {
        let at = DENSE_HEAD_BYTES + k * entry_width;
        window[..entry_width].copy_from_slice(&bytes[at..at + entry_width]);
        let packed = u128::from_le_bytes(window);
        let seq_step = packed as u64 & mask(seq_width);
        let index_step = (packed >> (8 * seq_width)) as u64 & mask(index_width);
        let kind = if kind_width == 0 { first[0] } else { (packed >> (8 * (seq_width + index_width))) as u8 };
        let Some(s) = seq.checked_add_signed(unzigzag(seq_step)).filter(|&s| s < SEQ_LIMIT) else { return false };
        seq = s;
        index = index.wrapping_add(1).wrapping_add(unzigzag(index_step) as u32);
        out.push(encode_oob(kind, index, seq));
    }
    true
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_entry() -> impl Strategy<Value = [u8; OOB_BYTES]> {
        prop_oneof![
            (0u8..3, any::<u32>(), 0u64..SEQ_LIMIT).prop_map(|(k, i, s)| encode_oob(k, i, s)),
            any::<[u8; OOB_BYTES]>(),
        ]
    }

    proptest! {
        /// Whatever the entries, the dense form (when it fits) reads back
        /// exactly: a mount learns what an OOB scan would.
        #[test]
        fn dense_entries_read_back_exactly(entries in prop::collection::vec(arb_entry(), 0..40)) {
            let mut page = vec![0xffu8; entries.len() * OOB_BYTES];
            let mut out = Vec::new();
            if let Some(n) = encode_dense(&entries, &mut page) {
                prop_assert!(decode_dense(&page[..n], entries.len(), &mut out));
                prop_assert_eq!(out, entries);
            }
        }
    }

    #[test]
    fn neighbouring_pages_take_a_few_bytes_each() {
        // A sequential run in a 2-plane group: consecutive indexes, rows one
        // multi-plane program (consecutive seqs) apart by ~100 programs.
        let entries: Vec<_> = (0..510u32)
            .map(|i| encode_oob(1, 5000 + i, 1_000_000 + u64::from(i / 2) * 100 + u64::from(i % 2)))
            .collect();
        let mut page = vec![0xff; entries.len() * OOB_BYTES];
        let n = encode_dense(&entries, &mut page).expect("fits");
        // seq steps 1 and 99 (zigzag < 2^8), index steps all 0, one kind.
        assert_eq!(n, DENSE_HEAD_BYTES + entries.len() - 1, "one byte an entry");
        let mut out = Vec::new();
        assert!(decode_dense(&page[..n], entries.len(), &mut out));
        assert_eq!(out, entries);
    }

    #[test]
    fn entries_that_do_not_compress_are_refused_so_the_summary_is_stored_plain() {
        // Sequence numbers jumping across the 40-bit range (6-byte steps),
        // indexes across the 32-bit range (4 bytes), kinds alternating (1).
        let entries: Vec<_> = (0..8u64)
            .map(|i| encode_oob(1 + (i % 2) as u8, (i % 2) as u32 * (1 << 31), (i % 2) * (SEQ_LIMIT - 1)))
            .collect();
        let mut page = vec![0xff; entries.len() * OOB_BYTES];
        assert_eq!(encode_dense(&entries, &mut page), None);
    }

    #[test]
    fn malformed_dense_entries_are_refused() {
        let head = |widths: [u8; 3], seq: u64| {
            let mut h = widths.to_vec();
            h.extend(encode_oob(1, 7, seq));
            h
        };
        let mut out = Vec::new();
        assert!(!decode_dense(&head([1, 0, 0], 5)[..8], 1, &mut out), "a head cut short");
        let with = |mut h: Vec<u8>, steps: &[u8]| {
            h.extend(steps);
            h
        };
        assert!(!decode_dense(&with(head([7, 0, 0], 5), &[0; 7]), 2, &mut out), "a seq width beyond 6 bytes");
        assert!(!decode_dense(&with(head([1, 5, 0], 5), &[0; 6]), 2, &mut out), "an index width beyond 4 bytes");
        assert!(!decode_dense(&with(head([1, 0, 2], 5), &[0; 3]), 2, &mut out), "a kind width beyond 1 byte");
        assert!(!decode_dense(&with(head([2, 0, 0], 5), &[0]), 2, &mut out), "entries running off the page");
        assert!(!decode_dense(&head([1, 0, 0], 5), 0, &mut out), "no entries: never written dense");
        // Step -6 (zigzag 11) from seq 5: below zero.
        assert!(!decode_dense(&with(head([1, 0, 0], 5), &[11]), 2, &mut out), "a sequence number below zero");
        // Step +1 (zigzag 2) from 2^40 - 1: beyond the OOB's 40 bits.
        assert!(!decode_dense(&with(head([1, 0, 0], SEQ_LIMIT - 1), &[2]), 2, &mut out), "a seq beyond 40 bits");
        out.clear();
        assert!(decode_dense(&with(head([1, 0, 0], SEQ_LIMIT - 2), &[2]), 2, &mut out), "2^40 - 1 is fine");
        assert_eq!(out, [encode_oob(1, 7, SEQ_LIMIT - 2), encode_oob(1, 8, SEQ_LIMIT - 1)]);
    }
}
