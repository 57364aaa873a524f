//! The host side of a run: what the host knows and counts, beside the
//! drive ([`super::drive`]).
//!
//! It owns the oracle (the shadow disk: a version per sector), the request
//! and write ids it hands out, and the host counters. Its operations are
//! the host's half of every request, so each has one implementation that
//! `Session::submit` and the timed device's write cache share:
//! - *issue a write*: take the next write id and stamp a host buffer with
//!   it ([`HostSide::issue_write`]);
//! - *acknowledge it*: the oracle records the write, with the durability
//!   the drive acknowledged it with ([`HostSide::acknowledge_write`]);
//! - *complete it*: the buffer goes back and the write counts
//!   ([`HostSide::complete_write`]);
//! - *check a read*: every sector of a filled buffer against the oracle
//!   ([`HostSide::check_read`]).
//!
//! The oracle records a write only once the drive acknowledged it: a write
//! the FTL failed leaves the shadow disk as it was, and its request still
//! counts. Write ids are unique over a run and never exceed
//! [`MAX_WRITE_ID`] (the run stops with an input error instead).

use super::drive::Drive;
use super::RunError;
use crate::flash::BufId;
use crate::flash::FlashError;
use crate::ftl::Durability;
use crate::ftl::FtlError;
use crate::nand::payload::WriteId;
use crate::nand::reliability::LossCause;
use crate::oracle::{Oracle, SectorVersion, MAX_WRITE_ID};
use crate::report::HostCounters;
use crate::violation::Rule;

/// The host's state. See the module docs.
pub struct HostSide {
    oracle: Oracle,
    counters: HostCounters,
    next_write_id: WriteId,
    next_request_id: u64,
    sector_bytes: u64,
    /// How the drive acknowledged the last write request (crash checking).
    last_durability: Option<Durability>,
    /// The LBA of the last prefetch hint (its oracle entry's second stage).
    oracle_hinted: Option<u64>,
}

/// A host write issued and not yet completed: its id and stamped buffer.
#[derive(Copy, Clone, Debug)]
pub struct HostWrite {
    pub lba: u64,
    pub sectors: u32,
    pub write: WriteId,
    pub buf: BufId,
}

impl HostSide {
    /// A host side with an empty shadow disk of `logical_sectors` sectors,
    /// versions kept per `oracle_unit_sectors`, sectors of `sector_bytes`.
    pub fn new(logical_sectors: u64, oracle_unit_sectors: u32, sector_bytes: u64) -> HostSide {
        HostSide {
            oracle: Oracle::new(logical_sectors, oracle_unit_sectors),
            counters: HostCounters::default(),
            next_write_id: 1,
            next_request_id: 0,
            sector_bytes,
            last_durability: None,
            oracle_hinted: None,
        }
    }

    /// A host whose disk was shadowed by another process (`serve
    /// --drive`): `oracle` as it left it, write ids continuing from
    /// `next_write_id`; counters from zero.
    pub fn restored(oracle: Oracle, next_write_id: WriteId, sector_bytes: u64) -> HostSide {
        HostSide { next_write_id, ..HostSide::new(0, 1, sector_bytes) }.continued_with(oracle)
    }

    /// The same host carrying on with another view of the disk (after a
    /// crash test's recovery: what the recovered drive showed), its ids and
    /// counters continuing from here.
    pub fn continued_with(&self, oracle: Oracle) -> HostSide {
        HostSide {
            oracle,
            counters: self.counters.clone(),
            next_write_id: self.next_write_id,
            next_request_id: self.next_request_id,
            sector_bytes: self.sector_bytes,
            last_durability: self.last_durability,
            oracle_hinted: self.oracle_hinted,
        }
    }

    pub fn oracle(&self) -> &Oracle {
        &self.oracle
    }

    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    /// Host requests started so far.
    pub fn requests(&self) -> u64 {
        self.next_request_id
    }

    /// The id the next write will take.
    pub fn next_write_id(&self) -> WriteId {
        self.next_write_id
    }

    /// How the drive acknowledged the last write request (`None`: the last
    /// request was no write, or the write failed).
    pub fn last_durability(&self) -> Option<Durability> {
        self.last_durability
    }

    /// Bytes in `sectors` sectors.
    pub fn bytes(&self, sectors: u32) -> u64 {
        u64::from(sectors) * self.sector_bytes
    }

    /// Start a host request: its id (the next one).
    pub fn start_request(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.last_durability = None;
        id
    }

    /// A fresh write id.
    fn take_write_id(&mut self) -> Result<WriteId, RunError> {
        if self.next_write_id > MAX_WRITE_ID {
            return Err(RunError::Input(format!("the run exceeds {MAX_WRITE_ID} host writes")));
        }
        let w = self.next_write_id;
        self.next_write_id += 1;
        Ok(w)
    }

    /// Issue a write of `sectors` sectors at `lba`: a fresh write id, and a
    /// host buffer on `drive` stamped with it.
    pub fn issue_write(&mut self, drive: &mut Drive, lba: u64, sectors: u32) -> Result<HostWrite, RunError> {
        let write = self.take_write_id()?;
        let buf = drive.alloc_host_write(lba as u32, write, sectors);
        Ok(HostWrite { lba, sectors, write, buf })
    }

    /// The drive acknowledged `w` with `durability`: the oracle records it.
    pub fn acknowledge_write(&mut self, w: &HostWrite, durability: Durability) {
        self.last_durability = Some(durability);
        self.oracle.record_write(w.lba, u64::from(w.sectors), w.write);
        if durability == Durability::Volatile {
            self.counters.volatile_writes += 1;
        }
    }

    /// The write request `w` is done (acknowledged or failed): its buffer
    /// goes back to `drive`, unless the drive kept it (`buffer_kept`: a
    /// write cache took it as a line's buffer), and it counts.
    pub fn complete_write(&mut self, drive: &mut Drive, w: HostWrite, buffer_kept: bool) {
        if !buffer_kept {
            drive.free_host_buffer(w.buf);
        }
        self.counters.write_requests += 1;
        self.counters.write_bytes += self.bytes(w.sectors);
    }

    /// Check every sector `buf` holds, read from `lba`, against the oracle
    /// (findings go to the drive's log).
    pub fn check_read(&self, drive: &mut Drive, lba: u64, buf: BufId) -> Result<(), RunError> {
        let oracle = &self.oracle;
        let uncorrectable = drive.flash().reliability().is_some_and(|r| r.uncorrectable_in_request());
        let corrupt = if uncorrectable { Rule::UncorrectableReturnedAsData } else { Rule::CorruptRead };
        drive
            .inspect_buffer(buf, |runs, ck| oracle.check_read_as(ck, lba, runs, corrupt))
            .map_err(|e| RunError::Input(e.to_string()))
    }

    /// The drive failed a read of `sectors` sectors at `lba` with `e`.
    ///
    /// With the reliability model off, any error is an FTL failure. With it
    /// on, a media error (`Uncorrectable`) is the host's read error, which
    /// the oracle judges from what the model recorded (see
    /// [`crate::nand::reliability`]): legitimate, and counted, when the
    /// latest version of some sector of the read was lost to the media (an
    /// uncorrectable flash read of it); `lost_after_program_failure` when
    /// instead some sector's latest version is one whose program failed (the
    /// FTL kept it mapped to the failed page); `read_error_on_good_data`
    /// when no sector's data was lost at all.
    pub fn read_failed(&self, drive: &mut Drive, lba: u64, sectors: u32, e: FtlError) {
        let what = format!("read of {sectors} sectors at LBA {lba}");
        let media = matches!(e, FtlError::Flash(FlashError::Uncorrectable));
        let Some(model) = drive.flash().reliability().filter(|_| media) else {
            return drive.ftl_error(&what, e);
        };
        let mut cause = None;
        for s in lba..lba + u64::from(sectors) {
            if let SectorVersion::Written(w) = self.oracle.version(s) {
                match model.loss_of(s as u32, w) {
                    Some(LossCause::Media) => {
                        cause = Some(LossCause::Media);
                        break;
                    }
                    Some(LossCause::ProgramFailure) => cause = Some(LossCause::ProgramFailure),
                    None => {}
                }
            }
        }
        match cause {
            Some(LossCause::Media) => drive.count_host_read_error(),
            Some(LossCause::ProgramFailure) => drive.record_violation(
                Rule::LostAfterProgramFailure,
                format!("{what}: failed, and its data is the data of a program the flash reported failed"),
            ),
            None => drive.record_violation(
                Rule::ReadErrorOnGoodData,
                format!("{what}: failed with a media error, but none of its data was lost to the media"),
            ),
        }
    }

    /// A read request of `sectors` sectors is done.
    pub fn count_read(&mut self, sectors: u32) {
        self.counters.read_requests += 1;
        self.counters.read_bytes += self.bytes(sectors);
    }

    /// The drive trimmed `lba .. lba+sectors`: they read as zeros now.
    pub fn acknowledge_trim(&mut self, lba: u64, sectors: u64) {
        self.oracle.record_trim(lba, sectors);
    }

    /// A trim request of `sectors` sectors is done.
    pub fn count_trim(&mut self, sectors: u32) {
        self.counters.trim_requests += 1;
        self.counters.trim_bytes += self.bytes(sectors);
    }

    /// A flush request is done.
    pub fn count_flush(&mut self) {
        self.counters.flush_requests += 1;
    }

    /// Warm the oracle for a request at `lba` coming soon (two stages: its
    /// directory entry now, its unit entry at the next hint).
    pub fn prefetch(&mut self, lba: u64) {
        if let Some(hinted) = self.oracle_hinted.replace(lba) {
            self.oracle.prefetch(hinted);
        }
        self.oracle.prefetch_directory(lba);
    }
}
