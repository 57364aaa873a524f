//! The drive side of `serve`: NBD commands executed on a [`Session`],
//! every read checked by the oracle and answered with the real bytes.
//!
//! Commands come in bytes; the drive works in sectors. A command on whole
//! sectors is one host request to the FTL per [`CHUNK_SECTORS`]; a write
//! that starts or ends inside a sector reads the partial sectors first
//! (checked reads, as any read) and writes whole sectors (what a drive
//! with 512-byte sectors does for a client that ignores the advertised
//! minimum block size). A trim drops only the whole sectors it covers (a
//! trim is a hint). `WRITE_ZEROES` trims what it may (no
//! `NBD_CMD_FLAG_NO_HOLE`; a trimmed sector reads as zeros) and writes
//! zeros elsewhere; `FUA` is a flush after the write.
//!
//! After each command the violation log is compared with before: new
//! error-severity findings are returned as log lines, and the
//! [`ViolationPolicy`] decides the client's answer.

use super::bytes::{ByteStore, Piece, ReadBytes};
use crate::flash::BufId;
use crate::ftl::{Guarantee, IoRequest};
use crate::host::nbd::errno;
use crate::host::nbd::transmission::Command;
use crate::oracle::crash_checker::{CrashHistory, PendingOp};
use crate::run::{RunError, Session};
use std::borrow::Cow;

/// Writes and trims a power-cut history keeps before the drive flushes on
/// its own (about 40 MiB of log; see [`ServeDrive::flush_on_its_own`]).
pub const PENDING_OPS_MAX: usize = 1 << 20;

/// Sectors per host request to the FTL (a longer command is split).
pub const CHUNK_SECTORS: u32 = 8192;

/// What the client gets when a command caused a violation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ViolationPolicy {
    /// Log it and answer with what the FTL returned (the default: the
    /// client sees what a real drive with this bug would give it).
    Continue,
    /// Log it and answer `NBD_EIO`.
    Eio,
    /// Log it, answer `NBD_EIO` and shut the server down.
    Stop,
}

impl ViolationPolicy {
    pub fn parse(text: &str) -> Result<ViolationPolicy, String> {
        match text {
            "continue" => Ok(ViolationPolicy::Continue),
            "eio" => Ok(ViolationPolicy::Eio),
            "stop" => Ok(ViolationPolicy::Stop),
            _ => Err(format!("`{text}` is not a policy: continue, eio or stop")),
        }
    }
}

/// The answer to one command.
#[derive(Debug)]
pub struct Answer {
    /// The read's bytes (pieces of the byte store, not copied), or the
    /// error value and why.
    pub result: Result<ReadBytes, (u32, String)>,
    /// New error violations, one line each.
    pub violations: Vec<String>,
    /// The policy asks the server to stop.
    pub stop: bool,
}

/// A session serving byte commands. See the module docs.
pub struct ServeDrive {
    session: Session,
    bytes: ByteStore,
    policy: ViolationPolicy,
    sector_bytes: u64,
    /// With `--power-cut-on-exit`: the durable floor and the writes and
    /// trims since, for the next run to check its recovery against.
    history: Option<CrashHistory>,
    /// The flash this drive was mounted from (a drive file's, kept for
    /// `--timed`: the timed device mounts it too).
    origin: Option<crate::nand::Nand>,
    /// See [`ServeDrive::flush_on_its_own`].
    pending_ops_max: usize,
    flushes_on_its_own: u64,
}

impl ServeDrive {
    pub fn new(session: Session, stale_bytes_max: u64, policy: ViolationPolicy) -> ServeDrive {
        let bytes = ByteStore::new(session.host().bytes(1) as u32, stale_bytes_max);
        ServeDrive::with_bytes(session, bytes, policy)
    }

    /// A drive whose bytes were kept by another run (`serve --drive`).
    pub fn with_bytes(session: Session, bytes: ByteStore, policy: ViolationPolicy) -> ServeDrive {
        let sector_bytes = session.host().bytes(1);
        ServeDrive {
            session,
            bytes,
            policy,
            sector_bytes,
            history: None,
            origin: None,
            pending_ops_max: PENDING_OPS_MAX,
            flushes_on_its_own: 0,
        }
    }

    /// Keep `nand`, the flash this drive was mounted from, for the timed
    /// device ([`ServeDrive::take_timing_origin`]).
    pub fn keep_origin(&mut self, nand: crate::nand::Nand) {
        self.origin = Some(nand);
    }

    /// Where the timed device starts: the flash this drive was mounted
    /// from (if it was kept) and the host's view of the disk now.
    pub fn take_timing_origin(&mut self) -> Option<super::timed::TimingOrigin> {
        let nand = self.origin.take()?;
        let host = self.session.host();
        Some(super::timed::TimingOrigin { nand, oracle: host.oracle().clone(), next_write_id: host.next_write_id() })
    }

    /// Keep what a power cut may lose from here on (everything the oracle
    /// holds now is durable): the writes and trims since the last flush,
    /// for `guarantee`.
    pub fn track_power_cut(&mut self, guarantee: Guarantee) {
        let floor = self.session.host().oracle().clone();
        self.history = Some(CrashHistory::restored(guarantee, floor, &[]));
    }

    /// What a power cut now may lose, when tracked.
    pub fn power_cut_history(&self) -> Option<&CrashHistory> {
        self.history.as_ref()
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    pub fn bytes(&self) -> &ByteStore {
        &self.bytes
    }

    pub fn bytes_mut(&mut self) -> &mut ByteStore {
        &mut self.bytes
    }

    /// The export's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.session.host().oracle().logical_sectors() * self.sector_bytes
    }

    /// Execute `cmd` (already checked against the export's size).
    pub fn execute(&mut self, cmd: Command) -> Answer {
        let log = self.session.drive().flash().log();
        let (errors_before, kept_before) = (log.errors(), log.kept().len());
        let result = if self.session.ftl_failed() {
            Err((errno::EIO, "the FTL failed earlier; the drive no longer answers".to_string()))
        } else {
            self.run(cmd).map_err(|e| (errno::EIO, e.to_string()))
        };
        let log = self.session.drive().flash().log();
        let new_errors = log.errors() - errors_before;
        if new_errors == 0 {
            return Answer { result, violations: Vec::new(), stop: false };
        }
        let mut violations: Vec<String> = log.kept()[kept_before..].iter().map(|v| v.to_string()).collect();
        if violations.len() < new_errors as usize {
            violations.push(format!(
                "{} more error(s), not kept (see --keep-violations)",
                new_errors as usize - violations.len()
            ));
        }
        let refuse = || Err((errno::EIO, format!("nandlab found {new_errors} violation(s) serving this request")));
        match self.policy {
            ViolationPolicy::Continue => Answer { result, violations, stop: false },
            ViolationPolicy::Eio => Answer { result: result.and_then(|_| refuse()), violations, stop: false },
            ViolationPolicy::Stop => Answer { result: result.and_then(|_| refuse()), violations, stop: true },
        }
    }

    fn run(&mut self, cmd: Command) -> Result<ReadBytes, RunError> {
        let answer = self.run_command(cmd);
        if self.history.as_ref().is_some_and(|h| h.pending().len() >= self.pending_ops_max) {
            self.flush_on_its_own();
        }
        answer
    }

    fn run_command(&mut self, cmd: Command) -> Result<ReadBytes, RunError> {
        match cmd {
            Command::Read { offset_bytes, length_bytes } => self.read_bytes(offset_bytes, u64::from(length_bytes)),
            Command::Write { offset_bytes, data, fua } => {
                self.write_bytes(offset_bytes, data)?;
                self.flush_if(fua)
            }
            Command::Flush => self.flush_if(true),
            Command::Trim { offset_bytes, length_bytes, fua } => {
                let (first, end) = self.whole_sectors(offset_bytes, u64::from(length_bytes));
                self.trim_sectors(first, end);
                self.flush_if(fua)
            }
            Command::WriteZeroes { offset_bytes, length_bytes, fua, may_trim } => {
                self.write_zeroes(offset_bytes, u64::from(length_bytes), may_trim)?;
                self.flush_if(fua)
            }
        }
    }

    /// With `--power-cut-on-exit` the writes and trims since the client's
    /// last flush are kept, for the next run to check its recovery
    /// against; a client that never flushes would grow that log without
    /// bound. So after [`PENDING_OPS_MAX`] of them the drive flushes on its
    /// own, as a drive's write-back cache writes back when it likes: what
    /// was acknowledged becomes durable and the log starts over. (The
    /// checking then covers the writes since that flush.)
    fn flush_on_its_own(&mut self) {
        let drive = self.session.drive_mut();
        match drive.flush() {
            Ok(()) => {
                self.flushes_on_its_own += 1;
                if let Some(h) = &mut self.history {
                    h.record(None, true, None);
                }
            }
            Err(e) => drive.ftl_error("the drive's own flush of a long unflushed log", e),
        }
    }

    /// Flushes the drive made on its own (see [`ServeDrive::flush_on_its_own`]).
    pub fn flushes_on_its_own(&self) -> u64 {
        self.flushes_on_its_own
    }

    /// Lower the bound on the unflushed log (tests).
    pub fn set_pending_ops_max(&mut self, ops: usize) {
        self.pending_ops_max = ops.max(1);
    }

    fn flush_if(&mut self, flush: bool) -> Result<ReadBytes, RunError> {
        if flush {
            let (drive, host) = self.session.parts_mut();
            let id = host.start_request();
            drive.set_request(Some(id));
            match drive.flush() {
                Ok(()) => {
                    if let Some(h) = &mut self.history {
                        h.record(None, true, None);
                    }
                }
                Err(e) => drive.ftl_error("flush", e),
            }
            host.count_flush();
            drive.set_request(None);
        }
        Ok(ReadBytes::default())
    }

    /// The sectors wholly inside `offset .. offset+length`: `first .. end`.
    fn whole_sectors(&self, offset: u64, length: u64) -> (u64, u64) {
        (offset.div_ceil(self.sector_bytes), (offset + length) / self.sector_bytes)
    }

    /// Read bytes `offset .. offset+length`: pieces of the byte store.
    fn read_bytes(&mut self, offset: u64, length: u64) -> Result<ReadBytes, RunError> {
        let first = offset / self.sector_bytes;
        let end = (offset + length).div_ceil(self.sector_bytes);
        let mut out = ReadBytes::default();
        self.read_sectors(first, end - first, &mut out)?;
        let skip = (offset - first * self.sector_bytes) as usize;
        if skip > 0 || out.len() as u64 != length {
            out = out.cut(skip, length as usize);
        }
        Ok(out)
    }

    /// Read whole sectors `lba .. lba+sectors` onto `out`, a request per chunk.
    fn read_sectors(&mut self, lba: u64, sectors: u64, out: &mut ReadBytes) -> Result<(), RunError> {
        let mut at = lba;
        while at < lba + sectors {
            let n = (lba + sectors - at).min(u64::from(CHUNK_SECTORS)) as u32;
            self.read_chunk(at, n, out)?;
            at += u64::from(n);
        }
        Ok(())
    }

    /// Read whole sectors from `lba` into `dst` (copied: a partial write merges them).
    fn read_sectors_into(&mut self, lba: u64, dst: &mut [u8]) -> Result<(), RunError> {
        let mut read = ReadBytes::default();
        self.read_sectors(lba, dst.len() as u64 / self.sector_bytes, &mut read)?;
        read.copy_to(dst);
        Ok(())
    }

    fn read_chunk(&mut self, lba: u64, sectors: u32, out: &mut ReadBytes) -> Result<(), RunError> {
        let len_bytes = sectors as usize * self.sector_bytes as usize;
        let (drive, host) = self.session.parts_mut();
        let id = host.start_request();
        drive.set_request(Some(id));
        let buf: BufId = drive.alloc_host_read(sectors);
        let io = IoRequest { id, lba, sectors, buf };
        let result = match drive.read(&io) {
            Ok(()) => {
                let (oracle, bytes) = (host.oracle(), &self.bytes);
                drive
                    .inspect_buffer(buf, |runs, ck| {
                        oracle.check_read(ck, lba, runs);
                        bytes.read(runs, len_bytes, out);
                    })
                    .map_err(|e| RunError::Input(e.to_string()))
            }
            Err(e) => {
                drive.ftl_error(&format!("read of {sectors} sectors at LBA {lba}"), e);
                out.push(Piece::Zeros(len_bytes));
                Ok(())
            }
        };
        drive.free_host_buffer(buf);
        host.count_read(sectors);
        drive.set_request(None);
        result
    }

    /// Write `data` at byte `offset`: partial sectors at either end are
    /// read, merged and written whole.
    /// Write `data` at byte `offset` (the client's payload, kept as the
    /// write's bytes without a copy when it is one aligned chunk).
    fn write_bytes(&mut self, offset: u64, data: Vec<u8>) -> Result<(), RunError> {
        let sb = self.sector_bytes;
        if data.is_empty() {
            return Ok(());
        }
        if offset % sb == 0 && data.len() as u64 % sb == 0 {
            return self.write_sectors(offset / sb, data);
        }
        let first = offset / sb;
        let end = (offset + data.len() as u64).div_ceil(sb);
        let mut merged = vec![0; ((end - first) * sb) as usize];
        self.read_sectors_into(first, &mut merged[..sb as usize])?;
        if end - 1 > first {
            let tail = merged.len() - sb as usize;
            self.read_sectors_into(end - 1, &mut merged[tail..])?;
        }
        let at = (offset - first * sb) as usize;
        merged[at..at + data.len()].copy_from_slice(&data);
        self.write_sectors(first, merged)
    }

    /// Write whole sectors from `lba`, a request per chunk.
    fn write_sectors(&mut self, lba: u64, data: Vec<u8>) -> Result<(), RunError> {
        let chunk_bytes = CHUNK_SECTORS as usize * self.sector_bytes as usize;
        if data.len() <= chunk_bytes {
            return self.write_chunk(lba, Cow::Owned(data));
        }
        for (i, src) in data.chunks(chunk_bytes).enumerate() {
            self.write_chunk(lba + (i * CHUNK_SECTORS as usize) as u64, Cow::Borrowed(src))?;
        }
        Ok(())
    }

    fn write_chunk(&mut self, lba: u64, src: Cow<'_, [u8]>) -> Result<(), RunError> {
        let sectors = (src.len() as u64 / self.sector_bytes) as u32;
        let (drive, host) = self.session.parts_mut();
        let id = host.start_request();
        drive.set_request(Some(id));
        let w = host.issue_write(drive, lba, sectors)?;
        // Kept before the FTL sees the write: a broken FTL may return it at once.
        self.bytes.insert(w.write, lba, src);
        let io = IoRequest { id, lba, sectors, buf: w.buf };
        match drive.write(&io) {
            Ok(durability) => {
                self.bytes.supersede(host.oracle(), lba, u64::from(sectors), w.write);
                host.acknowledge_write(&w, durability);
                if let Some(h) = &mut self.history {
                    let op = PendingOp { request: id, trim: false, lba, sectors, write: w.write };
                    h.record(Some(op), false, Some(durability));
                }
            }
            Err(e) => {
                drive.ftl_error(&format!("write of {sectors} sectors at LBA {lba}"), e);
                self.bytes.abandon(w.write);
            }
        }
        host.complete_write(drive, w, false);
        drive.set_request(None);
        Ok(())
    }

    /// Trim sectors `first .. end`, a request per chunk.
    fn trim_sectors(&mut self, first: u64, end: u64) {
        let mut lba = first;
        while lba < end {
            let sectors = (end - lba).min(u64::from(CHUNK_SECTORS)) as u32;
            let (drive, host) = self.session.parts_mut();
            let id = host.start_request();
            drive.set_request(Some(id));
            match drive.trim(lba, u64::from(sectors)) {
                Ok(()) => {
                    self.bytes.supersede(host.oracle(), lba, u64::from(sectors), 0);
                    host.acknowledge_trim(lba, u64::from(sectors));
                    if let Some(h) = &mut self.history {
                        let write = host.next_write_id() - 1;
                        h.record(Some(PendingOp { request: id, trim: true, lba, sectors, write }), false, None);
                    }
                }
                Err(e) => drive.ftl_error(&format!("trim of {sectors} sectors at LBA {lba}"), e),
            }
            host.count_trim(sectors);
            drive.set_request(None);
            lba += u64::from(sectors);
        }
    }

    /// Zeros at `offset .. offset+length`: whole sectors trimmed when
    /// `may_trim`, the rest written.
    fn write_zeroes(&mut self, offset: u64, length: u64, may_trim: bool) -> Result<(), RunError> {
        let sb = self.sector_bytes;
        let (first, end) = self.whole_sectors(offset, length);
        if !may_trim || first >= end {
            let chunk = u64::from(CHUNK_SECTORS) * sb;
            let mut at = offset;
            while at < offset + length {
                let n = (offset + length - at).min(chunk);
                self.write_bytes(at, vec![0; n as usize])?;
                at += n;
            }
            return Ok(());
        }
        self.write_bytes(offset, vec![0; (first * sb - offset) as usize])?;
        self.trim_sectors(first, end);
        self.write_bytes(end * sb, vec![0; (offset + length - end * sb) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::host::nbd::transmission;
    use crate::run::serve::tests_support::pattern;

    fn drive(ftl: &str, bug: Option<&str>, policy: ViolationPolicy) -> ServeDrive {
        let mut config = Config::preset("tiny").unwrap();
        config.ftl_name = ftl.to_string();
        config.ftl_options.clear();
        if let Some(bug) = bug {
            config.ftl_options.insert("bug".into(), toml::Value::String(bug.into()));
        }
        ServeDrive::new(Session::new(&config, 9, 1, 20).unwrap(), 1 << 20, policy)
    }

    fn write(d: &mut ServeDrive, offset_bytes: u64, data: &[u8]) -> Answer {
        d.execute(Command::Write { offset_bytes, data: data.to_vec(), fua: false })
    }

    fn read(d: &mut ServeDrive, offset_bytes: u64, length_bytes: u32) -> Answer {
        d.execute(Command::Read { offset_bytes, length_bytes })
    }

    /// A client that never flushes does not grow the power-cut history
    /// without bound: past the bound the drive flushes on its own (not
    /// counted as the host's flushes), and the log starts over.
    #[test]
    fn a_client_that_never_flushes_keeps_the_unflushed_log_bounded() {
        // optr acknowledges writes as volatile (page's are durable at once).
        let mut d = drive("optr", None, ViolationPolicy::Continue);
        d.track_power_cut(Guarantee::Optr);
        d.set_pending_ops_max(4);
        for i in 0..10 {
            assert!(write(&mut d, i * 4096, &pattern(4096, i)).result.is_ok());
            assert!(d.power_cut_history().unwrap().pending().len() < 4, "after write {i}");
        }
        assert_eq!(d.flushes_on_its_own(), 2);
        assert_eq!(d.session().host().counters().flush_requests, 0);
        assert!(read(&mut d, 0, 40960).result.is_ok());
        assert_eq!(d.session().drive().flash().log().errors(), 0);
    }

    #[test]
    fn on_the_page_ftl_every_byte_round_trips_aligned_or_not() {
        let mut d = drive("page", None, ViolationPolicy::Continue);
        let a = pattern(64 << 10, 1);
        assert!(write(&mut d, 1 << 20, &a).result.is_ok());
        let b = pattern(777, 2);
        assert!(write(&mut d, (1 << 20) + 1001, &b).result.is_ok());
        let mut expected = a.clone();
        expected[1001..1001 + 777].copy_from_slice(&b);
        assert_eq!(read(&mut d, 1 << 20, 64 << 10).result.unwrap().to_vec(), expected);
        assert_eq!(read(&mut d, (1 << 20) + 3, 5).result.unwrap().to_vec(), &expected[3..8]);
        assert_eq!(read(&mut d, 0, 4096).result.unwrap().to_vec(), vec![0; 4096], "never written: zeros");
        let trim = Command::Trim { offset_bytes: (1 << 20) + 100, length_bytes: 8192, fua: true };
        assert!(d.execute(trim).result.is_ok());
        let after = read(&mut d, 1 << 20, 16384).result.unwrap().to_vec();
        assert_eq!(&after[..512], &expected[..512], "a partial sector is not trimmed");
        assert_eq!(&after[512..8192], &vec![0; 7680][..], "the whole sectors are");
        assert_eq!(&after[8192..], &expected[8192..16384]);
        let zeroes =
            Command::WriteZeroes { offset_bytes: (1 << 20) + 9000, length_bytes: 3000, fua: false, may_trim: false };
        assert!(d.execute(zeroes).result.is_ok());
        assert_eq!(read(&mut d, (1 << 20) + 9000, 3000).result.unwrap().to_vec(), vec![0; 3000]);
        assert_eq!(d.session().drive().flash().log().errors(), 0);
    }

    #[test]
    fn a_broken_ftl_returns_wrong_bytes_and_the_violation_comes_with_them() {
        for policy in [ViolationPolicy::Continue, ViolationPolicy::Eio] {
            let mut d = drive("buggy", Some("alias-two-lbas"), policy);
            let blocks: Vec<Vec<u8>> = (0..256).map(|i| pattern(4096, i + 10)).collect();
            for (i, b) in blocks.iter().enumerate() {
                assert!(write(&mut d, i as u64 * 4096, b).result.is_ok());
            }
            let mut wrong = 0;
            for (i, b) in blocks.iter().enumerate() {
                let answer = read(&mut d, i as u64 * 4096, 4096);
                match (&answer.result, policy) {
                    (Ok(got), ViolationPolicy::Continue) if got.to_vec() != *b => {
                        wrong += 1;
                        assert!(!answer.violations.is_empty(), "wrong bytes without a violation at block {i}");
                        let other = blocks.iter().position(|x| *x == got.to_vec());
                        assert!(other.is_some(), "the wrong bytes are another block's real bytes");
                    }
                    (Ok(got), _) => assert!(got.to_vec() == *b && answer.violations.is_empty(), "block {i}"),
                    (Err((e, _)), ViolationPolicy::Eio) => {
                        wrong += 1;
                        assert_eq!(*e, errno::EIO);
                        assert!(!answer.violations.is_empty());
                    }
                    (Err(e), _) => panic!("unexpected error {e:?}"),
                }
            }
            assert!(wrong > 0, "{policy:?}: the aliasing bug must show");
            assert!(d.session().drive().flash().log().errors() >= wrong);
        }
    }

    #[test]
    fn overwriting_keeps_the_bytes_of_live_data_only_plus_the_stale_window() {
        let mut d = drive("page", None, ViolationPolicy::Continue);
        for round in 0..8 {
            for i in 0..64 {
                assert!(write(&mut d, i * 16384, &pattern(16384, round * 100 + i)).result.is_ok());
            }
        }
        let s = d.bytes().stats();
        assert_eq!(s.live_bytes, 64 * 16384, "one version of each sector is live");
        assert!(s.stale_bytes <= 1 << 20, "the stale window is bounded");
        assert!(s.versions_forgotten > 0);
        assert_eq!(read(&mut d, 0, 16384).result.unwrap().to_vec(), pattern(16384, 700));
    }

    #[test]
    fn random_client_streams_never_panic_the_protocol_or_the_drive() {
        let mut d = drive("page", None, ViolationPolicy::Continue);
        let size = d.size_bytes();
        let export = crate::run::serve::export("nandlab", size, 512, 4096);
        // A valid handshake prefix (flags, GO ""), then noise shaped like requests.
        let mut prefix = 1u32.to_be_bytes().to_vec();
        prefix.extend_from_slice(&crate::host::nbd::handshake::IHAVEOPT.to_be_bytes());
        prefix.extend_from_slice(&7u32.to_be_bytes());
        prefix.extend_from_slice(&6u32.to_be_bytes());
        prefix.extend_from_slice(&[0; 6]);
        for seed in 0..300u64 {
            let mut input = prefix.clone();
            let noise = pattern(64 + (seed as usize * 37) % 2000, seed);
            for chunk in noise.chunks(28) {
                if chunk[0] % 2 == 0 {
                    input.extend_from_slice(&transmission::REQUEST_MAGIC.to_be_bytes());
                }
                input.extend_from_slice(chunk);
            }
            let mut conn = std::io::Cursor::new(input);
            let mut sink = Vec::new();
            let mut duplex = crate::run::serve::tests_support::Duplex { input: &mut conn, output: &mut sink };
            crate::run::serve::serve_in_line(&mut d, &mut duplex, &export);
        }
    }
}
