//! The oracle: a shadow of the logical disk, outside the FTL.
//!
//! For every sector it knows the latest version: never written, trimmed, or
//! the id of the last host write to it. Every host read is checked sector by
//! sector against it ([`Oracle::check_read`]):
//!
//! | returned                    | expected             | rule                |
//! |-----------------------------|----------------------|---------------------|
//! | data of another LBA         | anything             | `misdirected_read`  |
//! | older write of this LBA     | a newer write        | `stale_read`        |
//! | newer / unknown write       | anything             | `phantom_data`      |
//! | data                        | never written        | `phantom_data`      |
//! | data                        | trimmed              | `trim_not_zero`     |
//! | zeros                       | a write              | `lost_write`        |
//! | erased flash (0xFF)         | a write or a trim    | `erased_read`       |
//! | erased flash (0xFF)         | never written        | `unwritten_not_zero` |
//! | FTL metadata                | anything             | `misdirected_read`  |
//! | torn / corrupted data       | anything             | `corrupt_read`      |
//! | nothing (buffer not filled) | anything             | `missing_data`      |
//!
//! A never-written sector must read as zeros, like a deallocated block of an
//! NVMe drive whose DLFEAT says reads return zeros: erased flash there means
//! the FTL returned a never-programmed page as host data. NVMe also allows
//! drives that return all-0xFF, so that rule (`unwritten_not_zero`) alone
//! among the oracle's has a configurable severity. A trimmed sector must
//! read as zeros too (NVMe DSM deterministic read-zero after trim).
//!
//! # Memory
//!
//! Versions are kept per *unit* of `2^k` sectors (chosen from the workload's
//! alignment, e.g. 16 sectors for 8 KiB-aligned I/O): a unit written whole
//! by one request stores one 32-bit version. A unit written in part becomes
//! an exception holding one version per sector, and collapses back when its
//! sectors agree again. Checking is per sector either way: never weaker.
//! Unit entries start as zero (`NEVER`) and live in a
//! [`SparseTable`]: only the chunks of units written become resident.

pub mod crash_checker;

use crate::nand::payload::{Run, RunKind, WriteId};
use crate::util::sparse_table::SparseTable;
use crate::violation::{Checker, Rule};

/// Version of a sector never written.
const NEVER: u32 = 0;
/// Version of a trimmed sector.
const TRIMMED: u32 = 0x7fff_ffff;
/// Flag: the unit's entry indexes an exception (per-sector versions).
const EXCEPTION: u32 = 0x8000_0000;
/// Write ids must stay below the special values.
pub const MAX_WRITE_ID: WriteId = TRIMMED - 1;
/// The largest unit a user may ask for (`--oracle-unit`), the same cap as
/// the default taken from a workload's alignment: a unit written in part
/// holds one version per sector, so its size is what one exception costs.
pub const MAX_UNIT_SECTORS: u32 = 1 << 16;

/// Check a unit asked for by the user: a power of two from 1 to
/// [`MAX_UNIT_SECTORS`] sectors (the oracle's arithmetic is by shifts).
pub fn check_unit_sectors(unit: u32) -> Result<u32, String> {
    if unit == 0 || !unit.is_power_of_two() || unit > MAX_UNIT_SECTORS {
        return Err(format!("must be a power of two from 1 to {MAX_UNIT_SECTORS} sectors, got {unit}"));
    }
    Ok(unit)
}

/// The latest version of a sector, as the oracle knows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SectorVersion {
    Never,
    Trimmed,
    Written(WriteId),
}

/// The shadow disk. See the module docs.
#[derive(Clone, Debug)]
pub struct Oracle {
    unit_shift: u32,
    logical_sectors: u64,
    units: SparseTable,
    exceptions: Vec<u32>,
    free_exceptions: Vec<u32>,
}

impl Oracle {
    /// A shadow of `logical_sectors` sectors, tracking versions per unit of
    /// `sectors_per_unit` (rounded down to a power of two).
    pub fn new(logical_sectors: u64, sectors_per_unit: u32) -> Oracle {
        let unit_shift = sectors_per_unit.max(1).ilog2();
        let units = logical_sectors.div_ceil(1 << unit_shift) as usize;
        Oracle {
            unit_shift,
            logical_sectors,
            units: SparseTable::zeroed(units),
            exceptions: Vec::new(),
            free_exceptions: Vec::new(),
        }
    }

    pub fn sectors_per_unit(&self) -> u32 {
        1 << self.unit_shift
    }

    pub fn logical_sectors(&self) -> u64 {
        self.logical_sectors
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.units.memory_bytes() + (self.exceptions.capacity() + self.free_exceptions.capacity()) * 4
    }

    /// Units currently split into per-sector versions.
    pub fn exception_units(&self) -> usize {
        (self.exceptions.len() >> self.unit_shift) - self.free_exceptions.len()
    }

    #[inline]
    fn raw(&self, lba: u64) -> u32 {
        let e = self.units.get((lba >> self.unit_shift) as usize);
        if e & EXCEPTION == 0 {
            e
        } else {
            let base = ((e & !EXCEPTION) as usize) << self.unit_shift;
            self.exceptions[base + (lba & ((1 << self.unit_shift) - 1)) as usize]
        }
    }

    /// Hint that sectors from `lba` will be checked or recorded soon. It
    /// waits for the unit's directory entry unless
    /// [`Oracle::prefetch_directory`] warmed it a little earlier.
    #[inline]
    pub fn prefetch(&self, lba: u64) {
        self.units.prefetch((lba >> self.unit_shift) as usize);
    }

    /// The first of two prefetch stages for `lba` (see
    /// [`crate::util::sparse_table::SparseTable::prefetch_directory`]); it never waits.
    #[inline]
    pub fn prefetch_directory(&self, lba: u64) {
        self.units.prefetch_directory((lba >> self.unit_shift) as usize);
    }

    /// The latest version of one sector.
    pub fn version(&self, lba: u64) -> SectorVersion {
        match self.raw(lba) {
            NEVER => SectorVersion::Never,
            TRIMMED => SectorVersion::Trimmed,
            w => SectorVersion::Written(w),
        }
    }

    /// Every sector not [`SectorVersion::Never`], as runs `(first LBA,
    /// sectors, version)` of one version each, in LBA order; units never
    /// written are skipped without being read.
    pub fn written_runs(&self) -> Vec<(u64, u64, SectorVersion)> {
        let mut runs: Vec<(u64, u64, SectorVersion)> = Vec::new();
        let unit_len = 1u64 << self.unit_shift;
        self.units.for_each_nonzero(|unit, _| {
            let first = (unit as u64) << self.unit_shift;
            for lba in first..(first + unit_len).min(self.logical_sectors) {
                let v = self.version(lba);
                match runs.last_mut() {
                    Some((at, n, last)) if *at + *n == lba && *last == v => *n += 1,
                    _ if v == SectorVersion::Never => {}
                    _ => runs.push((lba, 1, v)),
                }
            }
        });
        runs
    }

    /// Write the shadow disk: its size, unit and [`Oracle::written_runs`].
    pub fn save_image<W: std::io::Write>(&self, e: &mut crate::util::codec::Enc<W>) -> std::io::Result<()> {
        e.u64(self.logical_sectors)?;
        e.u32(self.sectors_per_unit())?;
        let runs = self.written_runs();
        e.u64(runs.len() as u64)?;
        for (lba, n, v) in runs {
            e.u64(lba)?;
            e.u64(n)?;
            e.u32(match v {
                SectorVersion::Never => NEVER,
                SectorVersion::Trimmed => TRIMMED,
                SectorVersion::Written(w) => w,
            })?;
        }
        Ok(())
    }

    /// A shadow disk [`Oracle::save_image`] wrote; `what` names it in
    /// errors. Its size must be `logical_sectors` and every write id below
    /// `next_write_id`.
    pub fn load_image<R: std::io::Read>(
        d: &mut crate::util::codec::Dec<R>,
        what: &str,
        logical_sectors: u64,
        next_write_id: WriteId,
    ) -> Result<Oracle, String> {
        let size = d.u64(&format!("{what} size"))?;
        if size != logical_sectors {
            return Err(format!("{what}: {size} sectors, the device has {logical_sectors}"));
        }
        let unit = d.u32(&format!("{what} unit"))?;
        check_unit_sectors(unit).map_err(|e| format!("{what} unit: {e}"))?;
        let mut o = Oracle::new(logical_sectors, unit);
        let count = d.u64_below(&format!("{what} run count"), logical_sectors + 1)?;
        let mut next = 0;
        for k in 0..count {
            let lba = d.u64(&format!("{what} run {k} LBA"))?;
            let n = d.u64(&format!("{what} run {k} length"))?;
            let v = d.u32(&format!("{what} run {k} version"))?;
            if lba < next || n == 0 || n > logical_sectors - lba.min(logical_sectors) {
                return Err(format!("{what} run {k}: {n} sectors at LBA {lba} is out of order or beyond the disk"));
            }
            next = lba + n;
            match v {
                TRIMMED => o.record_trim(lba, n),
                w if w != NEVER && w < next_write_id => o.record_write(lba, n, w),
                w => return Err(format!("{what} run {k}: write id {w} was never handed out (next: {next_write_id})")),
            }
        }
        Ok(o)
    }

    /// Record a completed write of `sectors` sectors at `lba` by write `write`.
    pub fn record_write(&mut self, lba: u64, sectors: u64, write: WriteId) {
        assert!(write != NEVER && write <= MAX_WRITE_ID, "write id {write} out of range");
        self.set_range(lba, sectors, write);
    }

    /// Record a completed trim.
    pub fn record_trim(&mut self, lba: u64, sectors: u64) {
        self.set_range(lba, sectors, TRIMMED);
    }

    fn set_range(&mut self, lba: u64, sectors: u64, value: u32) {
        let unit_len = 1u64 << self.unit_shift;
        let (mut s, end) = (lba, lba + sectors);
        while s < end {
            let unit = (s >> self.unit_shift) as usize;
            let unit_start = (unit as u64) << self.unit_shift;
            let n = (unit_start + unit_len).min(end) - s;
            if n == unit_len {
                self.release_exception(unit);
                self.units.set(unit, value);
            } else {
                self.set_partial(unit, (s - unit_start) as usize, n as usize, value);
            }
            s += n;
        }
    }

    fn release_exception(&mut self, unit: usize) {
        let e = self.units.get(unit);
        if e & EXCEPTION != 0 {
            self.free_exceptions.push(e & !EXCEPTION);
        }
    }

    fn set_partial(&mut self, unit: usize, offset: usize, n: usize, value: u32) {
        let unit_len = 1usize << self.unit_shift;
        let e = self.units.get(unit);
        let idx = if e & EXCEPTION != 0 {
            e & !EXCEPTION
        } else {
            // Split the unit into per-sector versions.
            let idx = match self.free_exceptions.pop() {
                Some(i) => i,
                None => {
                    let i = (self.exceptions.len() >> self.unit_shift) as u32;
                    self.exceptions.resize(self.exceptions.len() + unit_len, 0);
                    i
                }
            };
            let base = (idx as usize) << self.unit_shift;
            self.exceptions[base..base + unit_len].fill(e);
            self.units.set(unit, idx | EXCEPTION);
            idx
        };
        let base = (idx as usize) << self.unit_shift;
        let slice = &mut self.exceptions[base..base + unit_len];
        slice[offset..offset + n].fill(value);
        if slice.iter().all(|&v| v == value) {
            self.free_exceptions.push(idx);
            self.units.set(unit, value);
        }
    }

    /// Check the runs a host read returned for sectors `lba ..` (buffer
    /// sector 0 is `lba`). Each mismatching run is reported once, at its
    /// first bad sector, with the flash page that sector came from when the
    /// checker knows it.
    pub fn check_read(&self, ck: &mut Checker, lba: u64, runs: &[Run]) {
        self.check_read_as(ck, lba, runs, Rule::CorruptRead);
    }

    /// [`Oracle::check_read`], reporting corrupt sectors as `corrupt`: with
    /// the reliability model on, corrupt sectors after an uncorrectable
    /// flash read in the request are `uncorrectable_returned_as_data`.
    pub fn check_read_as(&self, ck: &mut Checker, lba: u64, runs: &[Run], corrupt: Rule) {
        let request = (lba, runs.iter().map(|r| u64::from(r.len)).sum::<u64>());
        let mut s = lba;
        for run in runs {
            self.check_run(ck, s, run, request, corrupt);
            s += u64::from(run.len);
        }
    }

    fn check_run(&self, ck: &mut Checker, lba: u64, run: &Run, request: (u64, u64), corrupt: Rule) {
        // Messages are built only for violations kept in full.
        let ctx = || format!(" (read of {} sectors at LBA {})", request.1, request.0);
        match run.kind {
            RunKind::Data => {
                if u64::from(run.lba) != lba {
                    ck.flag_read(Rule::MisdirectedRead, lba, lba - request.0, || {
                        format!(
                            "LBA {lba}: returned data of LBA {} (write #{}) for {} sectors{}",
                            run.lba,
                            run.write,
                            run.len,
                            ctx()
                        )
                    });
                    return;
                }
                if let Some((at, expected)) = self.first_mismatch(lba, run.len, run.write) {
                    let rule = match expected {
                        NEVER => Rule::PhantomData,
                        TRIMMED => Rule::TrimNotZero,
                        e if run.write < e => Rule::StaleRead,
                        _ => Rule::PhantomData,
                    };
                    ck.flag_read(rule, at, at - request.0, || {
                        format!("LBA {at}: returned write #{}, expected {}{}", run.write, describe(expected), ctx())
                    });
                }
            }
            RunKind::Zero => {
                if let Some((at, e)) = self.first_sector(lba, run.len, |v| v != NEVER && v != TRIMMED) {
                    ck.flag_read(Rule::LostWrite, at, at - request.0, || {
                        format!("LBA {at}: returned zeros, expected {}{}", describe(e), ctx())
                    });
                }
            }
            RunKind::Erased => match self.first_sector(lba, run.len, |v| v != NEVER) {
                Some((at, e)) => ck.flag_read(Rule::ErasedRead, at, at - request.0, || {
                    format!("LBA {at}: returned erased flash (0xFF), expected {}{}", describe(e), ctx())
                }),
                None => ck.flag_read(Rule::UnwrittenNotZero, lba, lba - request.0, || {
                    format!(
                        "LBA {lba}: returned erased flash (0xFF) for {} never-written sectors, expected zeros{}",
                        run.len,
                        ctx()
                    )
                }),
            },
            RunKind::Metadata => ck.flag_read(Rule::MisdirectedRead, lba, lba - request.0, || {
                format!("LBA {lba}: returned the bytes of an FTL metadata page for {} sectors{}", run.len, ctx())
            }),
            RunKind::Garbage => ck.flag_read(corrupt, lba, lba - request.0, || {
                format!("LBA {lba}: returned torn or corrupted data for {} sectors{}", run.len, ctx())
            }),
            RunKind::Unfilled => ck.flag_read(Rule::MissingData, lba, lba - request.0, || {
                format!("LBA {lba}: {} sectors were never filled by the FTL{}", run.len, ctx())
            }),
        }
    }

    /// First sector of `lba .. lba+len` whose version is not `write`.
    #[inline]
    fn first_mismatch(&self, lba: u64, len: u32, write: u32) -> Option<(u64, u32)> {
        self.first_sector(lba, len, |v| v != write)
    }

    /// First sector of the range whose version satisfies `bad`, unit by unit.
    #[inline]
    fn first_sector(&self, lba: u64, len: u32, bad: impl Fn(u32) -> bool) -> Option<(u64, u32)> {
        let unit_len = 1u64 << self.unit_shift;
        let (mut s, end) = (lba, lba + u64::from(len));
        while s < end {
            let unit = (s >> self.unit_shift) as usize;
            let e = self.units.get(unit);
            let unit_end = ((unit as u64 + 1) << self.unit_shift).min(end);
            if e & EXCEPTION == 0 {
                if bad(e) {
                    return Some((s, e));
                }
            } else {
                for x in s..unit_end {
                    let v = self.raw(x);
                    if bad(v) {
                        return Some((x, v));
                    }
                }
            }
            s = unit_end;
            debug_assert!(unit_len > 0);
        }
        None
    }
}

fn describe(version: u32) -> String {
    match version {
        NEVER => "never written".into(),
        TRIMMED => "trimmed (zeros)".into(),
        w => format!("write #{w}"),
    }
}

#[cfg(test)]
mod tests;
