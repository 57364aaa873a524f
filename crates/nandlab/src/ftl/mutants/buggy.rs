//! `buggy`: a small page-mapped FTL with switchable, *deliberate* bugs.
//!
//! It exists to prove that every checker catches what it claims to (the
//! tests run each bug and expect its rule; the correct variant passes the
//! same workloads), and to show what a finding looks like:
//!
//! ```sh
//! nandlab stress --preset tiny --ftl buggy --ftl-opt bug=gc-stale-remap
//! ```
//!
//! Its bugs are [`Mutant`]s like every other deliberate bug (`--ftl-opt
//! bug=NAME` names one in kebab-case). Never use it for anything else.
//!
//! The FTL is simple on purpose: one write frontier, a global free-block
//! queue, greedy victims found by a linear scan, and garbage collection that
//! is *incremental*: a victim's valid pages are listed when it is chosen and
//! copied two at a time between host page writes, as firmware interleaves
//! GC with host traffic. That interleaving is what makes the classic
//! "GC copies a page the host has overwritten since" bug possible.

use super::Mutant;
use crate::flash::{BufId, Cause, Flash, FlashError, ProgramOp};
use crate::ftl::kit::wire::{U32Le, U64Le};
use crate::ftl::{
    check_range, parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats,
    Guarantee, IdleOutcome, IoRequest, OptionDoc,
};
use crate::nand::{BlockAddr, PageAddr};
use serde::Deserialize;
use std::collections::VecDeque;

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "buggy",
    summary: "DELIBERATELY BROKEN page-mapped FTL for demonstrating and testing the checkers",
    options: &[OptionDoc {
        name: "bug",
        default: "none",
        help: "none, skip-first-page, skip-first-page-maps-it, write-in-place, out-of-order, gc-stale-remap, \
               gc-drops-valid-page, alias-two-lbas, ignores-trim, forgets-to-fill, programs-bad-blocks, \
               block-past-end, multi-plane-on-one-plane, copyback-across-planes, reads-unwritten-pages, fails-writes",
    }],
    build: build_buggy,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuggyOptions {
    #[serde(default, deserialize_with = "buggy_mutant")]
    bug: Mutant,
}

fn build_buggy(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let o: BuggyOptions = parse_options("buggy", options)?;
    Ok(Box::new(BuggyFtl::with_mutant(env, o.bug)?))
}

/// The mutants of `buggy` as `--ftl-opt bug=NAME` names them, in the order
/// an unknown name lists them.
const BUGGY_MUTANTS: [(&str, Mutant); 16] = [
    ("none", Mutant::None),
    ("skip-first-page", Mutant::SkipFirstPage),
    ("skip-first-page-maps-it", Mutant::SkipFirstPageMapsIt),
    ("write-in-place", Mutant::WriteInPlace),
    ("out-of-order", Mutant::OutOfOrder),
    ("gc-stale-remap", Mutant::GcStaleRemap),
    ("gc-drops-valid-page", Mutant::GcDropsValidPage),
    ("alias-two-lbas", Mutant::AliasTwoLbas),
    ("ignores-trim", Mutant::IgnoresTrim),
    ("forgets-to-fill", Mutant::ForgetsToFill),
    ("programs-bad-blocks", Mutant::ProgramsBadBlocks),
    ("block-past-end", Mutant::BlockPastEnd),
    ("multi-plane-on-one-plane", Mutant::MultiPlaneOnOnePlane),
    ("copyback-across-planes", Mutant::CopybackAcrossPlanes),
    ("reads-unwritten-pages", Mutant::ReadsUnwrittenPages),
    ("fails-writes", Mutant::FailsWrites),
];

/// The `bug` option: a unit enum variant named in kebab-case (read as an
/// enum, so a value of the wrong type fails as it would for any enum
/// option).
fn buggy_mutant<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Mutant, D::Error> {
    use serde::de::{EnumAccess, Error, VariantAccess, Visitor};
    const NAMES: [&str; BUGGY_MUTANTS.len()] = {
        let mut names = [""; BUGGY_MUTANTS.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = BUGGY_MUTANTS[i].0;
            i += 1;
        }
        names
    };
    struct ByName;
    impl<'de> Visitor<'de> for ByName {
        type Value = Mutant;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("enum Bug")
        }
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Mutant, A::Error> {
            let (name, variant): (String, _) = data.variant()?;
            let found = BUGGY_MUTANTS.iter().find(|(n, _)| *n == name);
            let &(_, mutant) = found.ok_or_else(|| A::Error::unknown_variant(&name, &NAMES))?;
            variant.unit_variant()?;
            Ok(mutant)
        }
    }
    d.deserialize_enum("Bug", &NAMES, ByName)
}

const NONE: u32 = u32::MAX;
/// OOB: the logical page (4 bytes) and a program sequence number (8).
const OOB_BYTES: usize = 12;

#[derive(Copy, Clone, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct OobBytes {
    lpn: U32Le,
    seq: U64Le,
}

pub struct BuggyFtl {
    mutant: Mutant,
    spp: u32,
    ppb: u32,
    blocks: u32,
    logical_sectors: u64,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    sealed: Vec<bool>,
    free: VecDeque<u32>,
    frontier: (u32, u32),
    gc: Option<(u32, Vec<(u32, u32)>, usize)>,
    /// The host path's buffer: a partial write or trim reads the old page
    /// into it, merges the new sectors and programs it.
    tmp: Option<BufId>,
    /// GC's own buffer for a cross-plane move. GC runs inside `program`,
    /// between a read-modify-write's merge and its program, so it must not
    /// touch `tmp`.
    gc_buf: Option<BufId>,
    seq: u64,
    writes: u64,
    gc_runs: u64,
}

impl BuggyFtl {
    /// The FTL with one of its deliberate bugs (see [`Mutant`]; a mutant
    /// of another FTL is refused).
    pub fn with_mutant(env: &FtlEnv, mutant: Mutant) -> Result<BuggyFtl, String> {
        mutant.check_breaks("buggy")?;
        let g = &env.geometry;
        let lpns = env.logical_sectors.div_ceil(u64::from(g.sectors_per_page())) as usize;
        Ok(BuggyFtl {
            mutant,
            spp: g.sectors_per_page(),
            ppb: g.pages_per_block(),
            blocks: g.blocks() + u32::from(mutant == Mutant::BlockPastEnd),
            logical_sectors: env.logical_sectors,
            l2p: vec![NONE; lpns],
            p2l: vec![NONE; g.pages() as usize + g.pages_per_block() as usize],
            valid: vec![0; g.blocks() as usize + 1],
            sealed: vec![false; g.blocks() as usize + 1],
            free: VecDeque::new(),
            frontier: (NONE, 0),
            gc: None,
            tmp: None,
            gc_buf: None,
            seq: 1,
            writes: 0,
            gc_runs: 0,
        })
    }

    fn oob(&mut self, lpn: u32) -> [u8; OOB_BYTES] {
        let o = bytemuck::cast(OobBytes { lpn: U32Le::new(lpn), seq: U64Le::new(self.seq) });
        self.seq += 1;
        o
    }

    fn plane_of(flash: &dyn Flash, ppn: u32) -> u32 {
        let g = flash.geometry();
        g.plane_of_block(g.block_of(PageAddr(u64::from(ppn))))
    }

    /// The next page of the frontier: (page mapped, page programmed).
    fn alloc(&mut self) -> Result<(u32, u32), FtlError> {
        let (mut block, mut next) = self.frontier;
        if block == NONE || next >= self.ppb {
            if block != NONE {
                self.sealed[block as usize] = true;
            }
            block = self.free.pop_front().ok_or_else(|| FtlError::NoSpace("no free block".into()))?;
            next = 0;
            if matches!(self.mutant, Mutant::SkipFirstPage | Mutant::SkipFirstPageMapsIt) {
                next = 1;
            }
        }
        let in_block = if self.mutant == Mutant::OutOfOrder { next ^ 1 } else { next };
        self.frontier = (block, next + 1);
        let programmed = block * self.ppb + in_block;
        let mapped =
            if self.mutant == Mutant::SkipFirstPageMapsIt && in_block == 1 { programmed - 1 } else { programmed };
        Ok((mapped, programmed))
    }

    fn invalidate(&mut self, ppn: u32) {
        if ppn != NONE && self.p2l[ppn as usize] != NONE {
            self.p2l[ppn as usize] = NONE;
            let b = (ppn / self.ppb) as usize;
            self.valid[b] = self.valid[b].saturating_sub(1);
        }
    }

    fn map(&mut self, lpn: u32, ppn: u32) {
        let old = self.l2p[lpn as usize];
        if old != ppn {
            self.invalidate(old);
        }
        self.l2p[lpn as usize] = ppn;
        if self.p2l[ppn as usize] == NONE {
            self.valid[(ppn / self.ppb) as usize] += 1;
        }
        self.p2l[ppn as usize] = lpn;
    }

    /// Start a GC if free blocks are short; copy up to `steps` listed pages.
    fn gc_step(&mut self, flash: &mut dyn Flash, steps: usize) -> Result<(), FtlError> {
        if self.gc.is_none() && self.free.len() <= 4 {
            let victim = (0..self.blocks.min(self.sealed.len() as u32))
                .filter(|&b| self.sealed[b as usize] && b != self.frontier.0)
                .min_by_key(|&b| self.valid[b as usize]);
            if let Some(v) = victim {
                let first = v * self.ppb;
                let mut moves: Vec<(u32, u32)> = (first..first + self.ppb)
                    .filter(|&p| self.p2l[p as usize] != NONE)
                    .map(|p| (p, self.p2l[p as usize]))
                    .collect();
                if self.mutant == Mutant::GcDropsValidPage {
                    if let Some((_, lpn)) = moves.pop() {
                        self.l2p[lpn as usize] = NONE;
                    }
                }
                self.sealed[v as usize] = false;
                self.gc = Some((v, moves, 0));
                self.gc_runs += 1;
            }
        }
        let steps = if self.free.len() <= 1 { usize::MAX } else { steps };
        for _ in 0..steps {
            let Some((victim, moves, at)) = self.gc.take() else { return Ok(()) };
            if at == moves.len() {
                flash.erase(Cause::Gc, BlockAddr(u64::from(victim)))?;
                self.valid[victim as usize] = 0;
                for p in victim * self.ppb..(victim + 1) * self.ppb {
                    self.p2l[p as usize] = NONE;
                }
                self.free.push_back(victim);
                return Ok(());
            }
            let (src, lpn) = moves[at];
            self.gc = Some((victim, moves, at + 1));
            if self.mutant != Mutant::GcStaleRemap && self.l2p[lpn as usize] != src {
                continue; // overwritten since the victim was chosen
            }
            let (mapped, dst) = self.alloc()?;
            let oob = self.oob(lpn);
            let same_plane = Self::plane_of(flash, src) == Self::plane_of(flash, dst);
            if same_plane || self.mutant == Mutant::CopybackAcrossPlanes {
                flash.copyback(Cause::Gc, PageAddr(src.into()), PageAddr(dst.into()), Some(&oob))?;
            } else {
                let buf = self.gc_buf.expect("buffer");
                flash.read(Cause::Gc, PageAddr(src.into()), 0, self.spp, buf, 0, &mut [])?;
                flash.program(Cause::Gc, PageAddr(dst.into()), buf, 0, &oob)?;
            }
            self.invalidate(src);
            self.map(lpn, mapped);
        }
        Ok(())
    }

    fn program(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, at: u32) -> Result<(), FtlError> {
        self.gc_step(flash, 2)?;
        let old = self.l2p[lpn as usize];
        if self.mutant == Mutant::WriteInPlace && old != NONE && at == 0 && buf != self.tmp.expect("buffer") {
            let oob = self.oob(lpn);
            flash.program(Cause::Host, PageAddr(old.into()), buf, at, &oob)?;
            return Ok(());
        }
        let (mapped, ppn) = self.alloc()?;
        let oob = self.oob(lpn);
        flash.program(Cause::Host, PageAddr(ppn.into()), buf, at, &oob)?;
        self.map(lpn, mapped);
        if self.mutant == Mutant::AliasTwoLbas && lpn % 2 == 1 && self.l2p[lpn as usize - 1] != NONE {
            let prev = self.l2p[lpn as usize - 1];
            self.invalidate(prev);
            self.l2p[lpn as usize - 1] = mapped;
        }
        Ok(())
    }

    fn load(&mut self, flash: &mut dyn Flash, lpn: u32) -> Result<BufId, FtlError> {
        let tmp = self.tmp.expect("buffer");
        match self.l2p[lpn as usize] {
            NONE => flash.buf_zero(tmp, 0, self.spp)?,
            ppn => flash.read(Cause::Host, PageAddr(ppn.into()), 0, self.spp, tmp, 0, &mut [])?,
        }
        Ok(tmp)
    }

    fn chunks(&self, lba: u64, sectors: u64) -> Vec<(u32, u32, u32, u32)> {
        let spp = u64::from(self.spp);
        let mut v = Vec::new();
        let (mut s, end) = (lba, lba + sectors);
        while s < end {
            let in_page = (s % spp) as u32;
            let n = (spp - u64::from(in_page)).min(end - s) as u32;
            v.push(((s / spp) as u32, in_page, n, (s - lba) as u32));
            s += u64::from(n);
        }
        v
    }
}

impl Ftl for BuggyFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "buggy", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.tmp = Some(flash.buf_alloc(self.spp)?);
        self.gc_buf = Some(flash.buf_alloc(self.spp)?);
        for b in 0..self.blocks {
            let addr = BlockAddr(u64::from(b));
            if self.mutant != Mutant::ProgramsBadBlocks
                && self.mutant != Mutant::BlockPastEnd
                && flash.is_factory_bad(addr)
            {
                continue;
            }
            match flash.erase(Cause::Format, addr) {
                Ok(()) => self.free.push_back(b),
                // The buggy variants carry on as if the erase had worked.
                Err(FlashError::BadBlock | FlashError::AddressOutOfRange) if self.mutant != Mutant::None => {
                    self.free.push_back(b)
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn mount(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Err(FtlError::Mount("the test FTL has no recovery".into()))
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        for (lpn, in_page, n, at) in self.chunks(req.lba, u64::from(req.sectors)) {
            match self.l2p[lpn as usize] {
                NONE if self.mutant == Mutant::ForgetsToFill => {}
                NONE if self.mutant == Mutant::ReadsUnwrittenPages => {
                    flash.read(Cause::Host, PageAddr(lpn.into()), in_page, n, req.buf, at, &mut [])?
                }
                NONE => flash.buf_zero(req.buf, at, n)?,
                ppn => flash.read(Cause::Host, PageAddr(ppn.into()), in_page, n, req.buf, at, &mut [])?,
            }
        }
        Ok(())
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        self.writes += 1;
        if self.mutant == Mutant::FailsWrites && self.writes > 1000 {
            return Err(FtlError::NoSpace("deliberate failure".into()));
        }
        let chunks = self.chunks(req.lba, u64::from(req.sectors));
        if self.mutant == Mutant::MultiPlaneOnOnePlane {
            if let [(l0, 0, n0, a0), (l1, 0, n1, a1), ..] = chunks[..] {
                if n0 == self.spp && n1 == self.spp {
                    let ((m0, p0), (m1, p1)) = (self.alloc()?, self.alloc()?);
                    let (o0, o1) = (self.oob(l0), self.oob(l1));
                    let ops = [
                        ProgramOp { page: PageAddr(p0.into()), src: req.buf, src_sector: a0, oob: &o0 },
                        ProgramOp { page: PageAddr(p1.into()), src: req.buf, src_sector: a1, oob: &o1 },
                    ];
                    flash.program_multi(Cause::Host, &ops)?;
                    self.map(l0, m0);
                    self.map(l1, m1);
                    return Ok(Durability::Durable);
                }
            }
        }
        for (lpn, in_page, n, at) in chunks {
            if n == self.spp {
                self.program(flash, lpn, req.buf, at)?;
            } else {
                let tmp = self.load(flash, lpn)?;
                flash.buf_copy(tmp, in_page, req.buf, at, n)?;
                self.program(flash, lpn, tmp, 0)?;
            }
        }
        Ok(Durability::Durable)
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        check_range(lba, sectors, self.logical_sectors)?;
        if self.mutant == Mutant::IgnoresTrim {
            return Ok(());
        }
        for (lpn, in_page, n, _) in self.chunks(lba, sectors) {
            if self.l2p[lpn as usize] == NONE {
                continue;
            }
            if n == self.spp {
                let old = self.l2p[lpn as usize];
                self.invalidate(old);
                self.l2p[lpn as usize] = NONE;
            } else {
                let tmp = self.load(flash, lpn)?;
                flash.buf_zero(tmp, in_page, n)?;
                self.program(flash, lpn, tmp, 0)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(())
    }

    fn idle(&mut self, _flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        Ok(IdleOutcome::Nothing)
    }

    fn shutdown(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(())
    }

    fn stats(&self) -> FtlStats {
        FtlStats { gc_runs: self.gc_runs, ..Default::default() }
    }
}
