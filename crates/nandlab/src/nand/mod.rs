//! The virtual NAND: the state of every page and block, and the rules of
//! flash checked on every operation.
//!
//! # What is stored
//!
//! Per page: a 16-byte slot (content kind, program count, and content) and
//! the OOB bytes the FTL declared it uses. A page whose sectors are
//! consecutive LBAs in at most two runs of data, zeros or erased sectors —
//! a page written whole by one request, and what read-modify-write of half
//! a page produces — lives in the slot itself (base LBA, two write ids and
//! a split point). Other pages (LBAs from unrelated places, more runs), and
//! FTL metadata pages (real bytes, trailing 0xFF trimmed), live in
//! size-class slabs that recycle their slots when a block is erased.
//!
//! Why two runs and 16 bytes, not four runs in 24: the slot table is the
//! largest thing a big drive holds (a third more memory at 24 bytes a
//! page), while pages of three or four runs are rare and pay only for
//! themselves, in the slab (the measurements are in
//! `docs/design-notes/drive.md`). Sixteen bytes also never straddle a
//! cache line. Per block: the write pointer (lowest page never
//! programmed), the P/E count, the bad flag and a "stray content" flag.
//!
//! A format erases every block of a fresh device; the erase of a block that
//! is already erased must not touch its page slots, or the whole (lazily
//! mapped) slot table would be faulted in before the first request. A block
//! is known erased when its write pointer is 0 and its stray flag is clear:
//! every program raises the write pointer, and everything else that changes
//! a page (a torn program or erase, a corrupted page, a journal rollback)
//! sets the flag, which an erase clears.
//!
//! # Rules
//!
//! Each operation is checked against the rules of [`Rule`]'s NAND group and
//! violations go to the [`Checker`]; the severity decides whether they are
//! recorded. An operation that breaks a rule still takes effect when that is
//! physically meaningful (an out-of-order program still programs the page),
//! so one bug does not cascade into confusing secondary reports; operations
//! that cannot take effect (an address outside the device, a bad block)
//! return a [`FlashError`] as a real device would.
//!
//! # Reads of the different kinds of content
//!
//! - erased page: every sector reads as erased (0xFF); metadata reads 0xFF;
//! - host data page read as metadata bytes: a fixed 0xA5 pattern (a stamp
//!   has no bytes);
//! - metadata page read as host data: [`RunKind::Metadata`] sectors, which
//!   the oracle reports if they reach the host;
//! - garbage (a torn or corrupted page): the read fails as uncorrectable.

pub mod geometry;
pub mod image;
mod journal;
pub mod payload;
pub mod power;
pub mod reliability;

use crate::violation::{Checker, Rule};
mod error;
pub use crate::util::fast_div::FastDiv;
pub use error::FlashError;
pub use geometry::{BlockAddr, CellType, Geometry, GeometryConfig, GeometryError, PageAddr, PagePairing, PageType};
use payload::{push_run, slice_runs, splice_runs, total_len, ClassSlab, Run, RunKind};

/// Content kinds (low nibble of the per-page state byte).
const K_ERASED: u8 = 0;
/// Up to two data runs of consecutive LBAs, inline in the slot.
const K_INLINE: u8 = 1;
const K_RUNS: u8 = 2;
const K_META: u8 = 3;
const K_ZERO: u8 = 4;
const K_GARBAGE: u8 = 5;
/// A page of a block whose erase was interrupted: neither erased nor
/// readable (data, metadata and OOB reads fail) until the block is erased.
const K_UNDEFINED: u8 = 6;
/// Runs a slot holds inline.
const INLINE_RUNS: usize = 2;
/// Inline "write ids" of filler runs (never real write ids, which stay below 2^31).
const INLINE_ZERO: u32 = 0;
const INLINE_ERASED: u32 = u32::MAX;
const KIND_MASK: u8 = 0x0f;
/// Metadata pages are stored in slots of their length rounded up to 1/16
/// of its power of two (at most 6.25 % unused): plain powers of two waste
/// up to half of each slot, and FTL summary pages are often just over one
/// (see `docs/design-notes/drive.md`).
const BYTE_CLASS_STEP_SHIFT: u32 = 4;

const _: () = assert!(std::mem::size_of::<PageSlot>() == 16);

/// What a host-data page read as metadata returns in stamp mode.
pub const STAMP_AS_BYTES_PATTERN: u8 = 0xA5;

/// The per-page slot. `state` is the content kind | program count << 4.
/// Content: for inline data, the first LBA (`a`), the write id of each run
/// (`w`) and where runs 2.. start (`splits`, 0 = unused); for a run list in
/// the slab, (handle `a`, run count `w[0]`); for a metadata page, (handle
/// `a`, byte length `w[0]`). One slot is one aligned 16-byte load, so a
/// page lookup costs one cache miss at most.
#[derive(Copy, Clone, Default, Debug, bytemuck::Zeroable)]
#[repr(C)]
struct PageSlot {
    state: u8,
    splits: [u8; INLINE_RUNS - 1],
    a: u32,
    w: [u32; INLINE_RUNS],
}

impl PageSlot {
    fn content(kind: u8, a: u32, b: u32) -> PageSlot {
        let mut w = [0; INLINE_RUNS];
        w[0] = b;
        PageSlot { state: kind, splits: [0; INLINE_RUNS - 1], a, w }
    }
    /// The count or length of slab-backed content.
    fn b(&self) -> u32 {
        self.w[0]
    }
    /// Inline content for `runs`, if they fit: at most two runs, each
    /// data of consecutive LBAs (one base LBA for the whole page), zeros or
    /// erased sectors.
    fn inline(runs: &[Run], sectors_per_page: u32) -> Option<PageSlot> {
        if runs.is_empty() || runs.len() > INLINE_RUNS || (runs.len() > 1 && sectors_per_page > 255) {
            return None;
        }
        let mut slot = PageSlot { state: K_INLINE, splits: [0; INLINE_RUNS - 1], a: 0, w: [0; INLINE_RUNS] };
        let mut base = None;
        let mut at = 0u32;
        for (k, r) in runs.iter().enumerate() {
            slot.w[k] = match r.kind {
                RunKind::Data => {
                    let b = *base.get_or_insert(r.lba.wrapping_sub(at));
                    if r.lba != b.wrapping_add(at) {
                        return None;
                    }
                    r.write
                }
                RunKind::Zero => INLINE_ZERO,
                RunKind::Erased => INLINE_ERASED,
                _ => return None,
            };
            if k > 0 {
                slot.splits[k - 1] = at as u8;
            }
            at += r.len;
        }
        slot.a = base?; // all fillers: not inline data
        Some(slot)
    }

    /// Append the inline runs covering sectors `first .. first+count`.
    #[inline]
    fn append_inline(&self, first: u32, count: u32, sectors_per_page: u32, out: &mut Vec<Run>) {
        let end = first + count;
        let mut start = 0u32;
        for k in 0..INLINE_RUNS {
            let stop = match self.splits.get(k) {
                Some(&s) if s != 0 => u32::from(s),
                _ => sectors_per_page,
            };
            if stop > first && start < end {
                let from = first.max(start);
                let len = end.min(stop) - from;
                push_run(
                    out,
                    match self.w[k] {
                        INLINE_ZERO => Run::filler(RunKind::Zero, len),
                        INLINE_ERASED => Run::filler(RunKind::Erased, len),
                        w => Run::data(self.a.wrapping_add(from), w, len),
                    },
                );
            }
            if stop >= end || stop == sectors_per_page {
                break;
            }
            start = stop;
        }
    }
}

/// The content of a page, for inspection by tests and tools (never by FTLs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageContent {
    Erased,
    Data(Vec<Run>),
    Metadata(Vec<u8>),
    Garbage,
}

/// The virtual NAND array.
#[derive(Clone)]
pub struct Nand {
    geometry: Geometry,
    sectors_per_page: u32,
    pages_per_block: u32,
    /// log2(pages per block) when it is a power of two (address math by shifts).
    ppb_shift: Option<u32>,
    /// Division by blocks per plane (the copyback plane check) and by
    /// planes per die (the multi-plane checks), without a `div`.
    plane_div: FastDiv,
    die_div: FastDiv,
    oob_stored_bytes: usize,
    slots: Vec<PageSlot>,
    /// Spare bytes, stored inverted so that erased (0xFF) is zero.
    oob: Vec<u8>,
    /// Per block: lowest page index never programmed since the last erase.
    write_ptr: Vec<u32>,
    erase_count: Vec<u32>,
    /// Bad-block bits (small enough to stay in the L1 cache).
    bad: BlockBits,
    /// Blocks whose pages may hold content their write pointer does not
    /// account for (see the module docs).
    stray: BlockBits,
    runs: ClassSlab<Run>,
    bytes: ClassSlab<u8>,
    scratch: Vec<Run>,
    scratch2: Vec<Run>,
    journal: journal::Journal,
}

impl Nand {
    /// A fresh device: every page erased, every block with P/E count 0.
    /// `oob_stored_bytes` is how much of each page's OOB is kept (the most any
    /// FTL on this device writes); the rest reads as 0xFF. It is clamped to
    /// the geometry's OOB size: a session rejects an FTL that needs more
    /// before building the NAND (see [`crate::ftl::check_geometry`]).
    ///
    /// The tables are sized by the geometry (up to 2^32 - 1 pages), so
    /// their allocation can fail: that is an error naming the size, never a
    /// panic. Runs estimate their memory before this ([`crate::memory`]).
    pub fn new(geometry: Geometry, oob_stored_bytes: u32, factory_bad: &[BlockAddr]) -> Result<Nand, String> {
        let too_big = |what: &str, len: u64, each: u64| {
            format!(
                "cannot allocate the NAND's {what}: {len} x {each} bytes ({}) for {} pages",
                crate::util::size::human(len.saturating_mul(each)),
                geometry.pages()
            )
        };
        let pages = usize::try_from(geometry.pages()).map_err(|_| too_big("page state", geometry.pages(), 16))?;
        let oob_stored = oob_stored_bytes.min(geometry.oob_size_bytes()) as usize;
        let oob_len =
            pages.checked_mul(oob_stored).ok_or_else(|| too_big("OOB bytes", geometry.pages(), oob_stored as u64))?;
        let slots = crate::util::prefetch::try_zeroed_vec(pages, false)
            .ok_or_else(|| too_big("page state", geometry.pages(), std::mem::size_of::<PageSlot>() as u64))?;
        let oob = crate::util::prefetch::try_zeroed_vec(oob_len, false)
            .ok_or_else(|| too_big("OOB bytes", geometry.pages(), oob_stored as u64))?;
        let blocks = geometry.blocks() as usize;
        let block_table = || -> Result<Vec<u32>, String> {
            let mut v = Vec::new();
            v.try_reserve_exact(blocks).map_err(|_| too_big("block state", u64::from(geometry.blocks()), 8))?;
            v.resize(blocks, 0);
            Ok(v)
        };
        let (write_ptr, erase_count) = (block_table()?, block_table()?);
        let mut bad = BlockBits::new(blocks);
        for b in factory_bad.iter().filter(|b| (b.0 as usize) < blocks) {
            bad.set(b.0 as usize, true);
        }
        let spp = geometry.sectors_per_page();
        Ok(Nand {
            sectors_per_page: spp,
            pages_per_block: geometry.pages_per_block(),
            plane_div: FastDiv::new(geometry.blocks_per_plane()),
            die_div: FastDiv::new(geometry.planes_per_die()),
            ppb_shift: geometry
                .pages_per_block()
                .is_power_of_two()
                .then(|| geometry.pages_per_block().trailing_zeros()),
            oob_stored_bytes: oob_stored,
            // All-zero is the erased state of both (see `oob`): nothing is
            // resident until programmed.
            slots,
            oob,
            write_ptr,
            erase_count,
            bad,
            stray: BlockBits::new(blocks),
            runs: ClassSlab::new(1, 1, spp.max(2) as usize),
            bytes: ClassSlab::new(6, BYTE_CLASS_STEP_SHIFT, (geometry.page_size_bytes() as usize).max(64)),
            scratch: Vec::with_capacity(spp as usize + 2),
            scratch2: Vec::with_capacity(spp as usize + 2),
            journal: journal::Journal::default(),
            geometry,
        })
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }
    pub fn oob_stored_bytes(&self) -> usize {
        self.oob_stored_bytes
    }
    pub fn is_bad(&self, block: BlockAddr) -> bool {
        (block.0 as usize) < self.write_ptr.len() && self.bad_bit(block.0 as usize)
    }
    #[inline]
    fn bad_bit(&self, block: usize) -> bool {
        self.bad.get(block)
    }
    /// Mark a block bad (a grown bad block after a program or erase failure).
    pub fn mark_bad(&mut self, block: BlockAddr) {
        if (block.0 as usize) < self.write_ptr.len() {
            self.journal_block(block.0 as usize);
            self.bad.set(block.0 as usize, true);
        }
    }
    pub fn erase_count(&self, block: BlockAddr) -> u32 {
        self.erase_count.get(block.0 as usize).copied().unwrap_or(0)
    }
    /// The lowest page of a block never programmed since its last erase.
    pub fn write_pointer(&self, block: BlockAddr) -> u32 {
        self.write_ptr.get(block.0 as usize).copied().unwrap_or(0)
    }
    /// Whether a page has been programmed since its block's last erase.
    pub fn is_programmed(&self, page: PageAddr) -> bool {
        self.slots.get(page.0 as usize).is_some_and(|s| s.state >> 4 != 0)
    }
    /// Erase counts of all blocks (for wear reports).
    pub fn erase_counts(&self) -> impl Iterator<Item = u32> + Clone + '_ {
        self.erase_count.iter().copied()
    }

    /// Warm the CPU cache for a page's slot and spare bytes (a simulator
    /// speed hint): every operation on a page reads its slot, and GC reads
    /// and programs spare areas of pages touched long before.
    #[inline]
    pub fn prefetch_page(&self, page: PageAddr) {
        crate::util::prefetch::prefetch(&self.slots, page.0 as usize);
        crate::util::prefetch::prefetch(&self.oob, page.0 as usize * self.oob_stored_bytes);
    }

    /// Warm the CPU cache for byte `offset` of a metadata page (a simulator
    /// speed hint: it reads the page's slot to find the bytes).
    #[inline]
    pub fn prefetch_meta(&self, page: PageAddr, offset: usize) {
        if let Some(slot) = self.slots.get(page.0 as usize) {
            if slot.state & KIND_MASK == K_META && offset < slot.b() as usize {
                let bytes = self.bytes.get(slot.a, slot.b() as usize);
                crate::util::prefetch::prefetch(bytes, offset);
            }
        }
    }

    /// Heap bytes held by the page and block state.
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<PageSlot>()
            + self.oob.capacity()
            + (self.write_ptr.capacity() + self.erase_count.capacity()) * 4
            + self.bad.memory_bytes()
            + self.stray.memory_bytes()
            + self.runs.heap_bytes()
            + self.bytes.heap_bytes()
    }

    /// The content of a page (inspection only; checks nothing).
    pub fn page_content(&self, page: PageAddr) -> PageContent {
        let i = page.0 as usize;
        let slot = self.slots[i];
        match slot.state & KIND_MASK {
            K_ERASED => PageContent::Erased,
            K_META => PageContent::Metadata(self.bytes.get(slot.a, slot.b() as usize).to_vec()),
            K_GARBAGE | K_UNDEFINED => PageContent::Garbage,
            _ => {
                let mut v = Vec::new();
                self.append_page_runs(i, 0, self.sectors_per_page, &mut v);
                PageContent::Data(v)
            }
        }
    }

    // ----- checks shared by the operations -----

    #[inline]
    fn block_index(&self, page: usize) -> usize {
        match self.ppb_shift {
            Some(s) => page >> s,
            None => page / self.pages_per_block as usize,
        }
    }

    #[inline]
    fn check_page(&self, ck: &mut Checker, page: PageAddr, what: &str) -> Result<usize, FlashError> {
        if page.0 >= self.geometry.pages() {
            ck.flag(Rule::AddressOutOfRange, page.0, || {
                format!("{what} of page {} beyond the last page {}", page.0, self.geometry.pages() - 1)
            });
            return Err(FlashError::AddressOutOfRange);
        }
        let block = self.block_index(page.0 as usize);
        if self.bad_bit(block) {
            ck.flag(Rule::BadBlock, page.0, || format!("{what} of page {} in bad block {block}", page.0));
            return Err(FlashError::BadBlock);
        }
        Ok(page.0 as usize)
    }

    #[inline]
    fn check_oob_len(&self, oob: &[u8]) -> Result<(), FlashError> {
        if oob.len() > self.oob_stored_bytes && oob[self.oob_stored_bytes..].iter().any(|&b| b != 0xff) {
            return Err(FlashError::OobTooLong);
        }
        Ok(())
    }

    /// Check program order and partial-program count; update the write pointer.
    /// Returns the page's program count before this program, and whether an
    /// in-place violation was already reported for it.
    #[inline]
    fn check_program_order(&mut self, ck: &mut Checker, i: usize) -> u8 {
        let block = self.block_index(i);
        let pib = (i - block * self.pages_per_block as usize) as u32;
        let count = self.slots[i].state >> 4;
        let wp = self.write_ptr[block];
        if count == 0 {
            if pib > wp {
                ck.flag(Rule::ProgramOutOfOrder, i as u64, || {
                    format!("program of page {pib} of block {block} while page {wp} is still erased")
                });
            } else if pib < wp {
                ck.flag(Rule::ProgramOutOfOrder, i as u64, || {
                    format!("program of page {pib} of block {block} after page {} was programmed", wp - 1)
                });
            }
        } else if u32::from(count) >= self.geometry.partial_programs_per_page() {
            let nop = self.geometry.partial_programs_per_page();
            ck.flag(Rule::ProgramNotErased, i as u64, || {
                format!(
                    "program #{} of page {pib} of block {block} since its erase (NOP allows {nop}): in-place write",
                    count + 1
                )
            });
        }
        if pib + 1 > wp {
            self.write_ptr[block] = pib + 1;
        }
        count
    }

    fn bump_program_count(&mut self, i: usize, previous: u8) {
        let kind = self.slots[i].state & KIND_MASK;
        self.slots[i].state = kind | (previous.saturating_add(1).min(15) << 4);
    }

    /// Free page `i`'s slab content before it is replaced, unless the
    /// journal recorded the slot (then the journal entry owns it).
    #[inline]
    fn free_content(&mut self, i: usize) {
        if !self.journal.active {
            self.release_slot_content(self.slots[i]);
        }
    }

    /// Replace a page's content, keeping its program count.
    #[inline]
    fn set_content(&mut self, i: usize, content: PageSlot) {
        let count = self.slots[i].state & !KIND_MASK;
        self.slots[i] = PageSlot { state: content.state | count, ..content };
    }

    /// Store a normalized run list covering the page as its content.
    #[inline]
    fn store_runs(&mut self, i: usize, runs: &[Run]) {
        self.free_content(i);
        let content = match runs {
            [r] if r.kind == RunKind::Zero => PageSlot::content(K_ZERO, 0, 0),
            [r] if r.kind == RunKind::Erased => PageSlot::content(K_ERASED, 0, 0),
            [r] if r.kind == RunKind::Garbage => PageSlot::content(K_GARBAGE, 0, 0),
            _ => match PageSlot::inline(runs, self.sectors_per_page) {
                Some(slot) => slot,
                None => PageSlot::content(K_RUNS, self.runs.insert(runs), runs.len() as u32),
            },
        };
        self.set_content(i, content);
    }

    /// Append the runs of sectors `first .. first+count` of page `i` to `out`.
    #[inline]
    fn append_page_runs(&self, i: usize, first: u32, count: u32, out: &mut Vec<Run>) {
        let slot = self.slots[i];
        match slot.state & KIND_MASK {
            K_INLINE => slot.append_inline(first, count, self.sectors_per_page, out),
            K_RUNS => slice_runs(self.runs.get(slot.a, slot.b() as usize), first, count, out),
            K_ZERO => push_run(out, Run::filler(RunKind::Zero, count)),
            K_META => push_run(out, Run::filler(RunKind::Metadata, count)),
            K_GARBAGE | K_UNDEFINED => push_run(out, Run::filler(RunKind::Garbage, count)),
            _ => push_run(out, Run::filler(RunKind::Erased, count)),
        }
    }

    fn store_oob(&mut self, i: usize, oob: &[u8], partial: bool) {
        let n = oob.len().min(self.oob_stored_bytes);
        let dst = &mut self.oob[i * self.oob_stored_bytes..i * self.oob_stored_bytes + n];
        if n <= 16 && !partial {
            // Small spare writes (the common case) as a loop the compiler
            // inlines, instead of a memcpy call.
            for (d, s) in dst.iter_mut().zip(oob) {
                *d = !*s;
            }
            return;
        }
        // A later partial program can only add bits to still-erased bytes.
        for (d, s) in dst.iter_mut().zip(oob) {
            if !partial || *s != 0xff {
                *d = !*s;
            }
        }
    }

    // ----- operations -----

    /// Read sectors `first .. first+count` of a page, appending their runs to `out`.
    pub fn read(
        &mut self,
        ck: &mut Checker,
        page: PageAddr,
        first: u32,
        count: u32,
        out: &mut Vec<Run>,
    ) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "read")?;
        if first + count > self.sectors_per_page {
            return Err(FlashError::InvalidBuffer);
        }
        match self.slots[i].state {
            0 => ck.flag(Rule::ReadErasedPage, page.0, || format!("read of never-programmed page {}", page.0)),
            s if s & KIND_MASK >= K_GARBAGE => return Err(FlashError::Uncorrectable),
            _ => {}
        }
        self.append_page_runs(i, first, count, out);
        Ok(())
    }

    /// Read the stored OOB bytes of a page into `out` (0xFF beyond what is stored).
    pub fn read_oob(&mut self, ck: &mut Checker, page: PageAddr, out: &mut [u8]) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "OOB read")?;
        if self.slots[i].state & KIND_MASK == K_UNDEFINED {
            return Err(FlashError::Uncorrectable);
        }
        let n = out.len().min(self.oob_stored_bytes);
        let start = i * self.oob_stored_bytes;
        for (o, s) in out[..n].iter_mut().zip(&self.oob[start..start + n]) {
            *o = !*s;
        }
        out[n..].fill(0xff);
        Ok(())
    }

    /// Read a page as bytes (FTL metadata) into `out`, which may be shorter than a page.
    pub fn read_meta(&mut self, ck: &mut Checker, page: PageAddr, out: &mut [u8]) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "metadata read")?;
        let slot = self.slots[i];
        match slot.state & KIND_MASK {
            K_META => {
                let stored = self.bytes.get(slot.a, slot.b() as usize);
                let n = stored.len().min(out.len());
                out[..n].copy_from_slice(&stored[..n]);
                out[n..].fill(0xff);
            }
            K_ERASED => {
                if slot.state == 0 {
                    ck.flag(Rule::ReadErasedPage, page.0, || format!("read of never-programmed page {}", page.0));
                }
                out.fill(0xff)
            }
            K_ZERO => out.fill(0),
            K_GARBAGE | K_UNDEFINED => return Err(FlashError::Uncorrectable),
            _ => out.fill(STAMP_AS_BYTES_PATTERN),
        }
        Ok(())
    }

    /// Read bytes `offset .. offset+out.len()` of a page as metadata (NAND
    /// "random data output": the whole page is sensed into the register,
    /// only these bytes are transferred). Bytes beyond what was programmed
    /// read as 0xFF.
    pub fn read_meta_at(
        &mut self,
        ck: &mut Checker,
        page: PageAddr,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "metadata read")?;
        if offset.saturating_add(out.len()) > self.geometry.page_size_bytes() as usize {
            return Err(FlashError::InvalidArgument);
        }
        let slot = self.slots[i];
        match slot.state & KIND_MASK {
            K_META => {
                let stored = self.bytes.get(slot.a, slot.b() as usize);
                let from = offset.min(stored.len());
                let n = (stored.len() - from).min(out.len());
                out[..n].copy_from_slice(&stored[from..from + n]);
                out[n..].fill(0xff);
            }
            K_ERASED => {
                if slot.state == 0 {
                    ck.flag(Rule::ReadErasedPage, page.0, || format!("read of never-programmed page {}", page.0));
                }
                out.fill(0xff)
            }
            K_ZERO => out.fill(0),
            K_GARBAGE => return Err(FlashError::Uncorrectable),
            _ => out.fill(STAMP_AS_BYTES_PATTERN),
        }
        Ok(())
    }

    /// Program a page with host data: `runs` must cover exactly one page.
    /// Erased runs leave their sectors erased (programming 0xFF changes no cell).
    pub fn program(&mut self, ck: &mut Checker, page: PageAddr, runs: &[Run], oob: &[u8]) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "program")?;
        self.check_oob_len(oob)?;
        if total_len(runs) != self.sectors_per_page {
            return Err(FlashError::InvalidBuffer);
        }
        self.journal_page(i);
        let previous = self.check_program_order(ck, i);
        if previous == 0 {
            self.store_runs(i, runs);
        } else {
            // Beyond the NOP allowance the violation is already reported.
            let within_nop = u32::from(previous) < self.geometry.partial_programs_per_page();
            self.merge_partial_program(ck, i, runs, within_nop);
        }
        self.store_oob(i, oob, previous != 0);
        self.bump_program_count(i, previous);
        Ok(())
    }

    /// A second (partial) program of a page: new sectors may only land on erased ones.
    fn merge_partial_program(&mut self, ck: &mut Checker, i: usize, runs: &[Run], report_overlap: bool) {
        let mut current = std::mem::take(&mut self.scratch);
        let mut scratch = std::mem::take(&mut self.scratch2);
        current.clear();
        if self.slots[i].state & KIND_MASK == K_META {
            // Host data over a metadata page: the result is neither.
            if report_overlap {
                ck.flag(Rule::ProgramNotErased, i as u64, || format!("host-data program over metadata page {i}"));
            }
            push_run(&mut current, Run::filler(RunKind::Garbage, self.sectors_per_page));
        } else {
            self.append_page_runs(i, 0, self.sectors_per_page, &mut current);
        }
        let mut pos = 0;
        for r in runs {
            if r.kind != RunKind::Erased {
                scratch.clear();
                slice_runs(&current, pos, r.len, &mut scratch);
                if report_overlap && scratch.iter().any(|c| c.kind != RunKind::Erased) {
                    let pib = i as u32 % self.pages_per_block;
                    ck.flag(Rule::ProgramNotErased, i as u64, || {
                        format!("partial program of page {pib} overwrites programmed sectors {pos}..{}", pos + r.len)
                    });
                }
                scratch.clear();
                splice_runs(&current, pos, std::slice::from_ref(r), &mut scratch);
                std::mem::swap(&mut current, &mut scratch);
            }
            pos += r.len;
        }
        self.store_runs(i, &current);
        self.scratch = current;
        self.scratch2 = scratch;
    }

    /// Program a page with FTL metadata bytes (at most one page).
    pub fn program_meta(
        &mut self,
        ck: &mut Checker,
        page: PageAddr,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let i = self.check_page(ck, page, "program")?;
        self.check_oob_len(oob)?;
        if data.len() > self.geometry.page_size_bytes() as usize {
            return Err(FlashError::InvalidArgument);
        }
        self.journal_page(i);
        let previous = self.check_program_order(ck, i);
        // Trailing 0xFF bytes are erased cells: not stored.
        let len = data.iter().rposition(|&b| b != 0xff).map_or(0, |p| p + 1);
        if previous != 0 && self.slots[i].state & KIND_MASK == K_META {
            let slot = self.slots[i];
            let mut merged = self.bytes.get(slot.a, slot.b() as usize).to_vec();
            if merged.len() < len {
                merged.resize(len, 0xff);
            }
            for (k, &b) in data[..len].iter().enumerate() {
                if b != 0xff {
                    if merged[k] != 0xff {
                        ck.flag(Rule::ProgramNotErased, i as u64, || {
                            format!("partial program of metadata page {i} overwrites byte {k}")
                        });
                    }
                    merged[k] = b;
                }
            }
            self.free_content(i);
            let h = self.bytes.insert(&merged);
            self.set_content(i, PageSlot::content(K_META, h, merged.len() as u32));
        } else {
            if previous != 0 && self.slots[i].state & KIND_MASK != K_ERASED {
                ck.flag(Rule::ProgramNotErased, i as u64, || format!("metadata program over host-data page {i}"));
            }
            self.free_content(i);
            let h = self.bytes.insert(&data[..len]);
            self.set_content(i, PageSlot::content(K_META, h, len as u32));
        }
        self.store_oob(i, oob, previous != 0);
        self.bump_program_count(i, previous);
        Ok(())
    }

    /// Copy a page inside the chip (no channel transfer). `oob` replaces the
    /// destination's OOB when given (controllers may patch it in the page register).
    pub fn copyback(
        &mut self,
        ck: &mut Checker,
        src: PageAddr,
        dst: PageAddr,
        oob: Option<&[u8]>,
    ) -> Result<(), FlashError> {
        let s = self.check_page(ck, src, "copyback read")?;
        let d = self.check_page(ck, dst, "copyback program")?;
        if let Some(o) = oob {
            self.check_oob_len(o)?;
        }
        if self.slots[s].state & KIND_MASK >= K_GARBAGE {
            return Err(FlashError::Uncorrectable);
        }
        let (sp, dp) =
            (self.plane_div.quotient(self.block_index(s) as u32), self.plane_div.quotient(self.block_index(d) as u32));
        if sp != dp {
            ck.flag(Rule::CopybackCrossPlane, dst.0, || {
                format!("copyback from page {} (plane {sp}) to page {} (plane {dp})", src.0, dst.0)
            });
        }
        if self.slots[s].state == 0 {
            ck.flag(Rule::ReadErasedPage, src.0, || format!("copyback of never-programmed page {}", src.0));
        }
        self.journal_page(d);
        let previous = self.check_program_order(ck, d);
        // A copyback programs a whole page: onto a programmed page it is an
        // in-place write even within the NOP allowance (beyond it the
        // program-order check has reported it already).
        if previous != 0 && u32::from(previous) < self.geometry.partial_programs_per_page() {
            ck.flag(Rule::ProgramNotErased, dst.0, || format!("copyback onto programmed page {}", dst.0));
        }
        self.free_content(d);
        let mut content = self.slots[s];
        content.state &= KIND_MASK;
        match content.state {
            K_RUNS => content.a = self.runs.duplicate(content.a, content.b() as usize),
            K_META => content.a = self.bytes.duplicate(content.a, content.b() as usize),
            _ => {}
        }
        self.set_content(d, content);
        let n = self.oob_stored_bytes;
        match oob {
            Some(o) => self.store_oob(d, o, false),
            None => self.oob.copy_within(s * n..s * n + n, d * n),
        }
        self.bump_program_count(d, previous);
        Ok(())
    }

    /// Erase a block: every page erased, write pointer 0, P/E count + 1.
    pub fn erase(&mut self, ck: &mut Checker, block: BlockAddr) -> Result<(), FlashError> {
        if block.0 >= u64::from(self.geometry.blocks()) {
            ck.flag(Rule::AddressOutOfRange, block.0, || {
                format!("erase of block {} beyond the last block {}", block.0, self.geometry.blocks() - 1)
            });
            return Err(FlashError::AddressOutOfRange);
        }
        let b = block.0 as usize;
        if self.bad_bit(b) {
            ck.flag(Rule::BadBlock, block.0, || format!("erase of bad block {b}"));
            return Err(FlashError::BadBlock);
        }
        let ppb = self.pages_per_block as usize;
        let n = self.oob_stored_bytes;
        self.journal_block(b);
        // An erased block (a format erases them all) is left untouched, so
        // its memory stays unmapped until something is programmed (see the
        // module docs).
        let erased = self.write_ptr[b] == 0 && !self.stray.get(b);
        if !erased {
            for i in b * ppb..(b + 1) * ppb {
                self.journal_page(i);
                self.free_content(i);
            }
            self.slots[b * ppb..(b + 1) * ppb].fill(PageSlot::default());
            self.oob[b * ppb * n..(b + 1) * ppb * n].fill(0);
            self.stray.set(b, false);
        }
        self.write_ptr[b] = 0;
        self.erase_count[b] += 1;
        Ok(())
    }

    /// Check that the pages of a multi-plane operation are on one die, on
    /// distinct planes, at the same block and page offset. Every page is
    /// checked (an operation spans few planes: each is compared with the
    /// ones before it, which needs no allocation).
    pub fn check_multi_plane<I>(&self, ck: &mut Checker, pages: I) -> bool
    where
        I: Iterator<Item = PageAddr> + Clone,
    {
        let Some(first) = pages.clone().next() else {
            return true;
        };
        if pages.clone().any(|p| p.0 >= self.geometry.pages()) {
            return true; // reported by the operations themselves
        }
        let f = self.place(first);
        for (i, p) in pages.clone().enumerate() {
            let q = self.place(p);
            let repeat = pages.clone().take(i).any(|o| self.place(o).plane == q.plane);
            if q.die != f.die || q.block_in_plane != f.block_in_plane || q.page_in_block != f.page_in_block || repeat {
                ck.flag(Rule::MultiPlaneMismatch, p.0, || {
                    format!(
                        "multi-plane operation mixes page {} (die {}, block {}, page {}) and page {} (die {}, block {}, page {}{})",
                        first.0,
                        f.die,
                        f.block_in_plane,
                        f.page_in_block,
                        p.0,
                        q.die,
                        q.block_in_plane,
                        q.page_in_block,
                        if repeat { ", same plane twice" } else { "" }
                    )
                });
                return false;
            }
        }
        true
    }

    /// Where page `page` (within the device) is: its die, plane, block
    /// offset and page offset, by shifts and multiplications (a multi-plane
    /// operation is checked page by page).
    #[inline]
    fn place(&self, page: PageAddr) -> Place {
        let i = page.0 as usize;
        let block = self.block_index(i) as u32;
        let plane = self.plane_div.quotient(block);
        Place {
            die: self.die_div.quotient(plane),
            plane,
            block_in_plane: block - plane * self.geometry.blocks_per_plane(),
            page_in_block: (i - block as usize * self.pages_per_block as usize) as u32,
        }
    }

    /// Overwrite a page's content with garbage (power-cut and media-error
    /// models): data unreadable, OOB as written, program count kept.
    pub fn corrupt_page(&mut self, page: PageAddr) {
        let i = page.0 as usize;
        if i < self.slots.len() {
            let count = (self.slots[i].state >> 4).max(1);
            self.replace_slot(i, PageSlot::content(K_GARBAGE | (count << 4), 0, 0));
        }
    }

    /// Replace page `i`'s slot outside a program (damage, not data): the
    /// block's write pointer no longer accounts for its content.
    fn replace_slot(&mut self, i: usize, slot: PageSlot) {
        self.journal_page(i);
        self.free_content(i);
        self.slots[i] = slot;
        self.stray.set(self.block_index(i), true);
    }
}

/// A page's place in the array (see [`Nand::place`]).
#[derive(Copy, Clone, PartialEq, Eq)]
struct Place {
    die: u32,
    plane: u32,
    block_in_plane: u32,
    page_in_block: u32,
}

/// One bit per block.
#[derive(Clone)]
struct BlockBits(Vec<u64>);

impl BlockBits {
    fn new(blocks: usize) -> BlockBits {
        BlockBits(vec![0; blocks.div_ceil(64)])
    }
    #[inline]
    fn get(&self, block: usize) -> bool {
        self.0[block / 64] & (1 << (block % 64)) != 0
    }
    #[inline]
    fn set(&mut self, block: usize, on: bool) {
        let (word, bit) = (&mut self.0[block / 64], 1u64 << (block % 64));
        *word = if on { *word | bit } else { *word & !bit };
    }
    fn memory_bytes(&self) -> usize {
        self.0.capacity() * 8
    }
}

#[cfg(test)]
mod tests;
