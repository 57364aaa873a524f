//! Crash guarantees: which disks a recovery may legally show after a power cut.
//!
//! The [`CrashHistory`] follows a run as the host sees it, for the
//! guarantee being checked. It keeps a *durable floor* — per sector, the
//! newest version made durable by a completed flush or by a write the FTL
//! acknowledged as durable — and the log of writes and trims issued since
//! (the *pending* operations: volatile writes and trims not yet followed by
//! a completed flush), in submission order. At a power cut the request in
//! flight is one more pending operation: it may or may not have landed, in
//! part or whole.
//!
//! A write acknowledged as durable means different things per guarantee.
//! Under baseline only that write is durable: it enters the floor while the
//! operations issued before it stay pending, so where it covers one of them
//! its floor version *supersedes* that operation (is newer than it), and
//! the checks below never ask a sector showing the floor whether such an
//! operation landed; on the sectors it does not cover, the operation is as
//! pending as before. Under OPTR the disk after a
//! cut must be a prefix of the requests, and a prefix that contains the
//! durable write contains everything issued before it: so the history
//! makes every pending operation before it durable too, as a flush would
//! (and remembers which, so that losing one is reported as `not_a_prefix`,
//! naming the durable write that required it).
//!
//! A [`CrashChecker`] checks the recovered disk, read back sector by sector:
//!
//! - **baseline** ([`Guarantee::Baseline`]): each sector reads as its floor
//!   version or as a pending write or trim of that sector issued after the
//!   floor's version; never as a version older than the floor
//!   (`lost_durable_write`), a version never written to it (`phantom_data`),
//!   another LBA's data (`misdirected_read`), torn data (`corrupt_read`), or
//!   erased flash: `erased_read` where something durable was written,
//!   `unwritten_not_zero` elsewhere (a sector reads as zeros until written,
//!   as in `stress`). A trimmed
//!   sector therefore reads as trimmed (zeros) or as its previous data
//!   unless a flush completed after the trim.
//! - **OPTR strong** ([`Guarantee::Optr`], Chang et al.): on top of
//!   baseline, the disk must equal the disk after some prefix of the pending
//!   operations. Each sector's reading confines the prefix length `P` to an
//!   interval: showing operation `p` (or the floor, `p = -1`) means
//!   `p < P <= q`, where `q` is the next pending operation covering that
//!   sector. The intervals of all sectors must intersect. When they do
//!   not, the two binding sectors say why: the same request both kept and
//!   lost is a torn request (`torn_write_request`, atomicity); a later
//!   request kept while an earlier one is lost breaks the prefix
//!   (`not_a_prefix`). Flush semantics hold because the floor already
//!   contains everything before the last completed flush (or durable
//!   write, see above). Zeros can match
//!   several trims (or the floor); such sectors contribute a union of
//!   intervals, intersected at the end.
//!
//! - **every acknowledged write durable**
//!   ([`CrashChecker::all_acknowledged_durable`], for a drive with
//!   power-loss protection whose FTL flushed its cache as the power failed):
//!   on top of either guarantee, each sector shows the newest version
//!   acknowledged before the cut, or the request in flight's
//!   (`lost_durable_write`): in prefix terms, the prefix holds every
//!   pending operation.
//!
//! Only sectors some pending operation touches can constrain the prefix;
//! a per-64-sector index finds them, so checking a whole drive costs one
//! pass over the reads plus work proportional to the pending log.

use super::{Oracle, SectorVersion, NEVER, TRIMMED};
use crate::ftl::{Durability, Guarantee};
use crate::nand::payload::{Run, RunKind, WriteId};
use crate::violation::{Checker, Rule};
use crate::workload::{HostOp, HostRequest};
use std::collections::HashMap;

/// Granularity of the pending index, as a power of two of sectors.
const INDEX_SHIFT: u32 = 6;

/// A write or trim issued but not yet made durable.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PendingOp {
    /// The host request.
    pub request: u64,
    pub trim: bool,
    pub lba: u64,
    pub sectors: u32,
    /// The write's id; for a trim, the id of the last write issued before it.
    pub write: WriteId,
}

impl PendingOp {
    /// The pending operation a host request would be (None for reads and flushes).
    pub fn of(req: &HostRequest, request: u64, write: WriteId, writes_before: WriteId) -> Option<PendingOp> {
        match req.op {
            HostOp::Write => Some(PendingOp { request, trim: false, lba: req.lba, sectors: req.sectors, write }),
            HostOp::Trim => {
                Some(PendingOp { request, trim: true, lba: req.lba, sectors: req.sectors, write: writes_before })
            }
            _ => None,
        }
    }
    #[inline]
    fn covers(&self, s: u64) -> bool {
        s >= self.lba && s < self.lba + u64::from(self.sectors)
    }
    fn describe(&self) -> String {
        let what = if self.trim { "trim".to_string() } else { format!("write #{}", self.write) };
        format!("request {} ({what} of {} sectors at LBA {})", self.request, self.sectors, self.lba)
    }
}

/// What the host knows of a run, for crash checking. See the module docs.
#[derive(Clone, Debug)]
pub struct CrashHistory {
    guarantee: Guarantee,
    floor: Oracle,
    ops: Vec<PendingOp>,
    /// (write id, position in `ops`) of the pending writes, by write id.
    writes: Vec<(WriteId, u32)>,
    by_unit: HashMap<u64, Vec<u32>>,
    /// OPTR: operations made durable by a later write acknowledged as
    /// durable (the second of each pair), since the last completed flush.
    implied: Vec<(PendingOp, PendingOp)>,
}

impl CrashHistory {
    /// The history of a run whose recovered disks are checked for `guarantee`.
    pub fn new(logical_sectors: u64, oracle_unit_sectors: u32, guarantee: Guarantee) -> CrashHistory {
        CrashHistory {
            guarantee,
            floor: Oracle::new(logical_sectors, oracle_unit_sectors),
            ops: Vec::new(),
            writes: Vec::new(),
            by_unit: HashMap::new(),
            implied: Vec::new(),
        }
    }

    /// A history carried over from another process (`serve --drive`
    /// after a power cut): `floor` and the operations pending over it, in
    /// order. What only the live history knew (which operations a durable
    /// write implied under OPTR) is not carried: such a loss is reported as
    /// `lost_durable_write` instead of `not_a_prefix`.
    pub fn restored(guarantee: Guarantee, floor: Oracle, pending: &[PendingOp]) -> CrashHistory {
        let mut h = CrashHistory {
            guarantee,
            floor,
            ops: Vec::new(),
            writes: Vec::new(),
            by_unit: HashMap::new(),
            implied: Vec::new(),
        };
        for &op in pending {
            h.record(Some(op), false, None);
        }
        h
    }

    /// The durable floor.
    pub fn floor(&self) -> &Oracle {
        &self.floor
    }
    /// Operations issued since the floor.
    pub fn pending(&self) -> &[PendingOp] {
        &self.ops
    }

    /// Record a completed host request: a write (with how the FTL
    /// acknowledged it), a trim, or a flush (which makes everything durable).
    pub fn record(&mut self, op: Option<PendingOp>, flush: bool, durability: Option<Durability>) {
        if flush {
            self.make_durable();
            self.implied.clear();
            return;
        }
        let Some(op) = op else { return };
        if !op.trim && durability == Some(Durability::Durable) {
            if self.guarantee == Guarantee::Optr {
                // A prefix holding this write holds everything before it.
                self.implied.extend(self.ops.iter().map(|&before| (before, op)));
                self.make_durable();
            }
            self.floor.record_write(op.lba, u64::from(op.sectors), op.write);
            return;
        }
        let pos = self.ops.len() as u32;
        if !op.trim {
            self.writes.push((op.write, pos));
        }
        for unit in op.lba >> INDEX_SHIFT..=(op.lba + u64::from(op.sectors) - 1) >> INDEX_SHIFT {
            self.by_unit.entry(unit).or_default().push(pos);
        }
        self.ops.push(op);
    }

    /// Everything issued so far is durable (a completed flush).
    pub fn make_durable(&mut self) {
        for op in &self.ops {
            // A write acknowledged as durable after `op` already set the
            // floor of its sectors: `op` must not go over it.
            let newer = |v: u32| supersedes(v, op);
            let end = op.lba + u64::from(op.sectors);
            let mut s = op.lba;
            while s < end {
                if newer(self.floor.raw(s)) {
                    s += 1;
                    continue;
                }
                let mut e = s + 1;
                while e < end && !newer(self.floor.raw(e)) {
                    e += 1;
                }
                if op.trim {
                    self.floor.record_trim(s, e - s);
                } else {
                    self.floor.record_write(s, e - s, op.write);
                }
                s = e;
            }
        }
        self.ops.clear();
        self.writes.clear();
        self.by_unit.clear();
    }

    /// The guarantee the history is kept for.
    pub fn guarantee(&self) -> Guarantee {
        self.guarantee
    }

    /// The durable write that made the floor version `v` of sector `s`
    /// durable by prefix semantics alone, if it did (see the module docs).
    fn implied_by(&self, s: u64, v: u32) -> Option<(PendingOp, PendingOp)> {
        let &(op, by) = self.implied.iter().rev().find(|(op, _)| op.covers(s))?;
        let same = if op.trim { v == TRIMMED } else { v == op.write };
        same.then_some((op, by))
    }

    /// A checker for the disk recovered after a cut while `in_flight` was
    /// being served.
    pub fn checker(&self, in_flight: Option<PendingOp>) -> CrashChecker<'_> {
        CrashChecker {
            h: self,
            in_flight,
            optr: self.guarantee == Guarantee::Optr,
            acked_durable: false,
            lost_acked: None,
            lo: 0,
            lo_witness: None,
            hi: i64::MAX,
            hi_witness: None,
            ambiguous: Vec::new(),
            observed: Vec::new(),
        }
    }
}

/// Checks one recovered disk. See the module docs.
pub struct CrashChecker<'a> {
    h: &'a CrashHistory,
    in_flight: Option<PendingOp>,
    optr: bool,
    /// Every acknowledged operation must have survived (power-loss protection).
    acked_durable: bool,
    /// (sector, position of the acknowledged operation it does not show).
    lost_acked: Option<(u64, usize)>,
    /// Feasible prefix lengths: `lo ..= hi`.
    lo: i64,
    /// (sector, position of the operation it shows) that set `lo`.
    lo_witness: Option<(u64, usize)>,
    hi: i64,
    /// (sector, position of the operation it does not show) that set `hi`.
    hi_witness: Option<(u64, usize)>,
    /// Sectors whose zeros match several operations: unions of intervals.
    ambiguous: Vec<(u64, Vec<(i64, i64)>)>,
    /// What pending-touched sectors showed when it was not the floor.
    observed: Vec<(u64, u32, SectorVersion)>,
}

impl CrashChecker<'_> {
    /// Require every operation acknowledged before the cut to have
    /// survived (a drive with power-loss protection that flushed its cache
    /// as the power failed); only the request in flight may be missing.
    pub fn all_acknowledged_durable(mut self) -> Self {
        self.acked_durable = true;
        self
    }

    /// Whether sectors showing pending operations constrain the prefix.
    fn constrains(&self) -> bool {
        self.optr || self.acked_durable
    }

    /// Sector `s` (sector `buffer_sector` of the read) lost its durable
    /// version `v`: `lost_durable_write`, or `not_a_prefix` when only a
    /// later durable write made `v` durable.
    fn flag_lost(&self, ck: &mut Checker, s: u64, buffer_sector: u64, v: u32, what: impl FnOnce() -> String) {
        match self.h.implied_by(s, v) {
            Some((op, by)) => ck.flag_read(Rule::NotAPrefix, s, buffer_sector, || {
                format!(
                    "{}; the earlier {} is lost, but the later {} was acknowledged as durable and a prefix holding \
                     it holds everything before it",
                    what(),
                    op.describe(),
                    by.describe()
                )
            }),
            None => ck.flag_read(Rule::LostDurableWrite, s, buffer_sector, what),
        }
    }

    fn n_ops(&self) -> usize {
        self.h.ops.len() + usize::from(self.in_flight.is_some())
    }
    fn op(&self, pos: usize) -> &PendingOp {
        self.h.ops.get(pos).unwrap_or_else(|| self.in_flight.as_ref().expect("position of the request in flight"))
    }
    fn pos_of_write(&self, w: WriteId) -> Option<usize> {
        if let Some(f) = &self.in_flight {
            if !f.trim && f.write == w {
                return Some(self.h.ops.len());
            }
        }
        let i = self.h.writes.binary_search_by_key(&w, |&(id, _)| id).ok()?;
        Some(self.h.writes[i].1 as usize)
    }
    /// Pending positions whose operation touches the index unit of `s`, in order.
    fn positions_near(&self, s: u64) -> impl Iterator<Item = usize> + '_ {
        let listed = self.h.by_unit.get(&(s >> INDEX_SHIFT)).map(|v| v.as_slice()).unwrap_or(&[]);
        let flight = self.in_flight.as_ref().filter(|f| {
            f.lba >> INDEX_SHIFT <= s >> INDEX_SHIFT
                && (f.lba + u64::from(f.sectors) - 1) >> INDEX_SHIFT >= s >> INDEX_SHIFT
        });
        listed.iter().map(|&p| p as usize).chain(flight.map(|_| self.h.ops.len()))
    }
    /// Whether any pending operation touches the index units of `s0 .. s0+len`.
    fn touches_range(&self, s0: u64, len: u32) -> bool {
        let (first, last) = (s0 >> INDEX_SHIFT, (s0 + u64::from(len) - 1) >> INDEX_SHIFT);
        let flight = self.in_flight.as_ref().is_some_and(|f| {
            f.lba >> INDEX_SHIFT <= last && (f.lba + u64::from(f.sectors) - 1) >> INDEX_SHIFT >= first
        });
        flight || (!self.h.by_unit.is_empty() && (first..=last).any(|u| self.h.by_unit.contains_key(&u)))
    }

    fn touched(&self, s: u64) -> bool {
        self.positions_near(s).any(|p| self.op(p).covers(s))
    }
    /// The first pending operation after position `after` covering `s`.
    fn next_after(&self, s: u64, after: i64) -> Option<usize> {
        self.positions_near(s).find(|&p| p as i64 > after && self.op(p).covers(s))
    }
    fn floor_raw(&self, s: u64) -> u32 {
        self.h.floor.raw(s)
    }

    /// Check the runs a read of the recovered disk returned for sectors `lba ..`.
    pub fn check_read(&mut self, ck: &mut Checker, lba: u64, runs: &[Run]) {
        let mut s = lba;
        for run in runs {
            self.check_run(ck, lba, s, run);
            s += u64::from(run.len);
        }
    }

    /// Check one run at `s0` of a read starting at `base` (buffer sector 0).
    fn check_run(&mut self, ck: &mut Checker, base: u64, s0: u64, run: &Run) {
        let len = run.len;
        match run.kind {
            RunKind::Data => self.check_data(ck, base, s0, run),
            RunKind::Zero => {
                // Fast path: nothing durable was written here and no pending
                // operation touches these sectors (most of a fresh disk).
                let durable_data = self.h.floor.first_sector(s0, len, |v| v != NEVER && v != TRIMMED).is_some();
                if !durable_data && !self.touches_range(s0, len) {
                    return;
                }
                for s in s0..s0 + u64::from(len) {
                    if !self.check_zero_sector(ck, base, s) {
                        return;
                    }
                }
            }
            RunKind::Erased => match self.h.floor.first_sector(s0, len, |v| v != NEVER) {
                Some((at, v)) => ck.flag_read(Rule::ErasedRead, at, at - base, || {
                    format!("LBA {at}: returned erased flash after the power cut, durable version {}", describe(v))
                }),
                // Erased flash is no version of anything: a never-written
                // sector reads as zeros after a power cut as before it.
                None => ck.flag_read(Rule::UnwrittenNotZero, s0, s0 - base, || {
                    format!(
                        "LBA {s0}: returned erased flash (0xFF) for {len} sectors never durably written, \
                         after the power cut (expected zeros or a pending write)"
                    )
                }),
            },
            RunKind::Metadata => ck.flag_read(Rule::MisdirectedRead, s0, s0 - base, || {
                format!("LBA {s0}: returned the bytes of an FTL metadata page for {len} sectors after the power cut")
            }),
            RunKind::Garbage => ck.flag_read(Rule::CorruptRead, s0, s0 - base, || {
                format!("LBA {s0}: returned torn or corrupted data for {len} sectors after the power cut")
            }),
            RunKind::Unfilled => ck.flag_read(Rule::MissingData, s0, s0 - base, || {
                format!("LBA {s0}: {len} sectors were never filled by the recovered FTL")
            }),
        }
    }

    fn check_data(&mut self, ck: &mut Checker, base: u64, s0: u64, run: &Run) {
        let (len, w) = (run.len, run.write);
        if u64::from(run.lba) != s0 {
            ck.flag_read(Rule::MisdirectedRead, s0, s0 - base, || {
                format!("LBA {s0}: returned data of LBA {} (write #{w}) for {len} sectors after the power cut", run.lba)
            });
            return;
        }
        if self.h.floor.first_sector(s0, len, |v| v != w).is_none() {
            self.constrain_floor(s0, len, w);
            return;
        }
        let Some(p) = self.pos_of_write(w).filter(|&p| {
            let op = self.op(p);
            op.covers(s0) && op.covers(s0 + u64::from(len) - 1)
        }) else {
            let (at, v) = self.h.floor.first_sector(s0, len, |v| v != w).expect("a mismatch");
            let what = || format!("LBA {at}: returned write #{w} after the power cut; durable version {}", describe(v));
            // Data of a durably trimmed sector, or older than its durable write, is a lost durable version.
            if v == TRIMMED || (v != NEVER && w < v) {
                self.flag_lost(ck, at, at - base, v, what);
            } else {
                ck.flag_read(Rule::PhantomData, at, at - base, what);
            }
            return;
        };
        // The pending write must be newer than the durable version.
        if let Some((at, v)) = self.h.floor.first_sector(s0, len, |v| v != NEVER && v != TRIMMED && v > w) {
            self.flag_lost(ck, at, at - base, v, || {
                format!("LBA {at}: returned write #{w} after the power cut, older than durable write #{v}")
            });
            return;
        }
        self.observed.push((s0, len, SectorVersion::Written(w)));
        if self.constrains() {
            self.shows(s0, p as i64);
            for s in s0..s0 + u64::from(len) {
                if let Some(q) = self.next_after(s, p as i64) {
                    self.not_beyond(s, q);
                }
            }
        }
    }

    /// A sector that read as zeros; false if it was flagged.
    fn check_zero_sector(&mut self, ck: &mut Checker, base: u64, s: u64) -> bool {
        let v = self.floor_raw(s);
        let floor_zero = v == NEVER || v == TRIMMED;
        let trims: Vec<usize> = self
            .positions_near(s)
            .filter(|&p| {
                let op = self.op(p);
                op.trim && op.covers(s) && !supersedes(v, op)
            })
            .collect();
        if !floor_zero && trims.is_empty() {
            self.flag_lost(ck, s, s - base, v, || {
                format!("LBA {s}: returned zeros after the power cut, durable version {}", describe(v))
            });
            return false;
        }
        if !trims.is_empty() {
            self.observed.push((s, 1, SectorVersion::Trimmed));
        }
        if self.constrains() && self.touched(s) {
            let mut candidates: Vec<i64> = trims.iter().map(|&p| p as i64).collect();
            if floor_zero {
                candidates.insert(0, -1);
            }
            let intervals: Vec<(i64, i64)> =
                candidates.iter().map(|&c| (c + 1, self.next_after(s, c).map_or(i64::MAX, |q| q as i64))).collect();
            if let [(lo, hi)] = intervals[..] {
                if lo > 0 {
                    self.shows(s, lo - 1);
                }
                if hi != i64::MAX {
                    self.not_beyond(s, hi as usize);
                }
            } else {
                self.ambiguous.push((s, intervals));
            }
        }
        true
    }

    /// Sectors `s0 ..` show their floor version `v`: each pending
    /// operation covering one of them must be beyond the prefix, unless `v`
    /// supersedes it (under baseline a write acknowledged as durable enters
    /// the floor while the operations issued before it stay pending; where
    /// it covers them, showing it says nothing of whether they landed).
    fn constrain_floor(&mut self, s0: u64, len: u32, v: u32) {
        if !self.constrains() {
            return;
        }
        let end = s0 + u64::from(len);
        let mut unit = s0 >> INDEX_SHIFT;
        while unit << INDEX_SHIFT < end {
            let from = s0.max(unit << INDEX_SHIFT);
            let to = end.min((unit + 1) << INDEX_SHIFT);
            let first = self
                .positions_near(from)
                .filter(|&p| {
                    let op = self.op(p);
                    op.lba < to && op.lba + u64::from(op.sectors) > from && !supersedes(v, op)
                })
                .min();
            if let Some(q) = first {
                let op = *self.op(q);
                self.not_beyond(from.max(op.lba), q);
            }
            unit += 1;
        }
    }

    /// Sector `s` shows operation `p`: the prefix includes it.
    fn shows(&mut self, s: u64, p: i64) {
        if p + 1 > self.lo {
            self.lo = p + 1;
            self.lo_witness = Some((s, p as usize));
        }
    }
    /// Sector `s` does not show operation `q`: the prefix stops before it.
    fn not_beyond(&mut self, s: u64, q: usize) {
        if self.acked_durable && q < self.h.ops.len() && self.lost_acked.is_none() {
            self.lost_acked = Some((s, q));
        }
        if (q as i64) < self.hi {
            self.hi = q as i64;
            self.hi_witness = Some((s, q));
        }
    }

    /// After every read: the OPTR verdict (prefix, atomicity). Returns the
    /// prefix length chosen (the longest feasible one) when there is one.
    pub fn finish(&self, ck: &mut Checker) -> Option<usize> {
        if self.acked_durable && !self.finish_acked_durable(ck) {
            return None;
        }
        if !self.optr {
            return None;
        }
        let hi = self.hi.min(self.n_ops() as i64);
        let mut feasible = if self.lo <= hi { vec![(self.lo, hi)] } else { Vec::new() };
        for (_, union) in &self.ambiguous {
            feasible = intersect(&feasible, union);
        }
        if let Some(&(_, hi)) = feasible.last() {
            return Some(hi as usize);
        }
        match (self.lo_witness, self.hi_witness) {
            (Some((s1, a)), Some((s2, b))) if b == a => {
                let op = *self.op(a);
                ck.flag(Rule::TornWriteRequest, s2, || {
                    format!("{} survived the power cut in part: LBA {s1} shows it, LBA {s2} does not", op.describe())
                });
            }
            (Some((s1, a)), Some((s2, b))) if b < a => {
                let (kept, lost) = (*self.op(a), *self.op(b));
                ck.flag(Rule::NotAPrefix, s2, || {
                    format!(
                        "{} survived the power cut (LBA {s1}) but the earlier {} did not (LBA {s2})",
                        kept.describe(),
                        lost.describe()
                    )
                });
            }
            _ => {
                let s = self.ambiguous.first().map_or(0, |a| a.0);
                ck.flag(Rule::NotAPrefix, s, || {
                    format!("the recovered disk matches no prefix of the write requests (trimmed LBA {s})")
                });
            }
        }
        None
    }

    /// Whether every acknowledged operation survived; flags the first sector
    /// that shows otherwise.
    fn finish_acked_durable(&self, ck: &mut Checker) -> bool {
        let acked = self.h.ops.len() as i64;
        let lost = self.lost_acked.or_else(|| {
            // A zero sector matching several operations: some match must
            // leave every acknowledged one in the prefix.
            let &(s, _) = self.ambiguous.iter().find(|(_, union)| union.iter().all(|&(_, hi)| hi < acked))?;
            let last_acked = self.positions_near(s).filter(|&p| (p as i64) < acked && self.op(p).covers(s)).last()?;
            Some((s, last_acked))
        });
        let Some((s, q)) = lost else { return true };
        let op = *self.op(q);
        ck.flag(Rule::LostDurableWrite, s, || {
            format!(
                "LBA {s} does not show {}, acknowledged before the power cut: the drive's power-loss protection \
                 must have made it durable",
                op.describe()
            )
        });
        false
    }

    /// The disk the checks accepted, as an oracle for the workload that
    /// follows recovery: the floor, with what pending sectors showed.
    pub fn recovered_oracle(&self) -> Oracle {
        let mut o = self.h.floor.clone();
        for &(s, len, v) in &self.observed {
            match v {
                SectorVersion::Written(w) => o.record_write(s, u64::from(len), w),
                SectorVersion::Trimmed => o.record_trim(s, u64::from(len)),
                SectorVersion::Never => {}
            }
        }
        o
    }
}

/// Intersect a set of disjoint sorted intervals with a union of intervals.
fn intersect(set: &[(i64, i64)], union: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &(a, b) in set {
        for &(c, d) in union {
            let (lo, hi) = (a.max(c), b.min(d));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out.sort_unstable();
    out
}

/// Whether floor version `v` of a sector of `op` was issued after `op`
/// (a write acknowledged as durable over it), so that `op` no longer decides
/// what the sector reads. A trim's id is that of the last write issued
/// before it, so a write with a larger id came after the trim.
#[inline]
fn supersedes(v: u32, op: &PendingOp) -> bool {
    v != NEVER && v != TRIMMED && v > op.write
}

fn describe(version: u32) -> String {
    match version {
        NEVER => "never written".into(),
        TRIMMED => "trimmed".into(),
        w => format!("write #{w}"),
    }
}

#[cfg(test)]
mod tests;
