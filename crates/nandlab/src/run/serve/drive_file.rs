//! `serve --drive FILE`: the drive's state kept in a file between runs.
//!
//! **What is kept.** The flash as the NAND holds it ([`crate::nand::image`]:
//! page states, spare bytes, write ids, erase counts, bad blocks), the
//! shadow disk the host checks reads against (the oracle; after a power
//! cut its durable floor and the writes and trims pending over it), the
//! client's bytes of every version kept ([`super::bytes`]), the next write
//! id and the run seed. Not kept: the FTL's memory (a fresh instance
//! mounts the flash, as after a power cycle), counters (each run reports
//! its own).
//!
//! **Layout.** A header, then the state as one byte stream cut into
//! chunks of [`CHUNK_BYTES`], each preceded by its CRC-32 (`crc32fast`):
//!
//! | bytes | field |
//! |---|---|
//! | 0..16 | magic `nandlab drive\0\0\0` |
//! | 16..20 | format version ([`FORMAT_VERSION`]) |
//! | 20..24 | length of the device description |
//! | 24..32 | length of the state stream |
//! | 32..36 | chunk size |
//! | 36..40 | CRC-32 of bytes 0..36 and the description |
//! | 40.. | the device description: `key=value` lines |
//! | then | per chunk: CRC-32, then the chunk's bytes |
//!
//! All integers are little-endian. The description names the device the
//! file belongs to (geometry, capacity, DRAM, FTL and its options, spare
//! bytes kept per page); a file for another device is refused naming each
//! field that differs.
//!
//! **Sparse by construction.** Only what was written is in the stream:
//! programmed pages (never-programmed blocks are skipped whole), the
//! oracle's written runs, the bytes of live versions (and of the stale
//! window). A 1 TiB drive with 1 GiB written is about 1 GiB of bytes plus
//! 9 bytes per block and 16 to 40 bytes per programmed page. No
//! memory-mapped image: the state is rebuilt in the structures `stress`
//! uses, so a run on a drive file costs what a run on a fresh drive costs.
//!
//! **Crash safety.** The state is written to `FILE.tmp` beside the file,
//! synced, then renamed over it and the directory synced: if the nandlab
//! process dies while saving, the old file is intact (and a stale
//! `FILE.tmp` is overwritten next time). A file damaged afterwards is
//! refused before serving: a bad magic, another version, a header or
//! chunk whose CRC does not match (naming the chunk and its offset,
//! expected and found), a file shorter or longer than its header says.

use super::bytes::ByteStore;
use super::executor::{ServeDrive, ViolationPolicy};
use crate::config::Config;
use crate::nand::Nand;
use crate::oracle::crash_checker::{CrashHistory, PendingOp};
use crate::oracle::{Oracle, MAX_WRITE_ID};
use crate::run::crash::point::verify_disk;
use crate::run::drive::Drive;
use crate::run::host_side::HostSide;
use crate::run::{FtlFactory, RunError, Session};
use crate::util::codec::{Dec, Enc};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

pub const MAGIC: [u8; 16] = *b"nandlab drive\0\0\0";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 40;
/// Bytes of state per checksummed chunk.
pub const CHUNK_BYTES: u32 = 1 << 20;
/// The largest device description read.
const DESCRIPTION_MAX_BYTES: u32 = 1 << 16;

/// The device a drive file belongs to: `(field, value)` pairs.
pub fn describe_device(config: &Config, oob_stored_bytes: u32) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    if let Ok(serde_json::Value::Object(g)) = serde_json::to_value(config.geometry.config()) {
        for (k, v) in g {
            fields.push((format!("geometry.{k}"), v.to_string().trim_matches('"').to_string()));
        }
    }
    fields.push(("device.logical_sectors".into(), config.logical_sectors.to_string()));
    fields.push(("device.dram_bytes".into(), config.dram_budget_bytes.to_string()));
    fields.push(("ftl".into(), config.ftl_name.clone()));
    for (k, v) in &config.ftl_options {
        fields.push((format!("ftl.{k}"), v.to_string()));
    }
    fields.push(("ftl.spare_bytes_kept_per_page".into(), oob_stored_bytes.to_string()));
    fields.sort();
    fields
}

fn description_text(fields: &[(String, String)]) -> String {
    fields.iter().map(|(k, v)| format!("{k}={}\n", v.replace('\n', " "))).collect()
}

/// What a drive file holds (see the module docs).
pub struct DriveState {
    pub seed: u64,
    pub next_write_id: u32,
    /// Saved as a power cut left it: `oracle` is the durable floor and
    /// `pending` what was written or trimmed over it since.
    pub power_cut: bool,
    pub nand: Nand,
    pub oracle: Oracle,
    pub pending: Vec<PendingOp>,
    pub bytes: ByteStore,
    /// The stale versions' order, for [`ByteStore::settle`].
    pub stale_order: Vec<u32>,
}

/// What to save: borrowed from the running server.
pub struct SaveParts<'a> {
    pub seed: u64,
    pub next_write_id: u32,
    pub power_cut: bool,
    pub nand: &'a Nand,
    pub oracle: &'a Oracle,
    pub pending: &'a [PendingOp],
    pub bytes: &'a ByteStore,
}

/// Save `parts` to `path` for the device `description` (temp file,
/// sync, rename: see the module docs).
pub fn save(path: &Path, description: &[(String, String)], parts: &SaveParts) -> io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let text = description_text(description);
    let mut file = File::create(&tmp)?;
    file.write_all(&[0; HEADER_BYTES])?;
    file.write_all(text.as_bytes())?;
    let mut chunks = ChunkWriter { out: BufWriter::new(file), buf: Vec::with_capacity(CHUNK_BYTES as usize), total: 0 };
    let mut e = Enc::new(&mut chunks);
    write_state(&mut e, parts)?;
    let total = chunks.finish()?;
    let mut file = chunks.out.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header(&text, total))?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

fn write_state<W: Write>(e: &mut Enc<W>, p: &SaveParts) -> io::Result<()> {
    e.u64(p.seed)?;
    e.u32(p.next_write_id)?;
    e.u8(u8::from(p.power_cut))?;
    p.nand.save_image(e)?;
    p.oracle.save_image(e)?;
    e.u64(p.pending.len() as u64)?;
    for op in p.pending {
        e.u64(op.request)?;
        e.u8(u8::from(op.trim))?;
        e.u64(op.lba)?;
        e.u32(op.sectors)?;
        e.u32(op.write)?;
    }
    p.bytes.save_image(e)
}

/// The header of a file with device description `text` and a state of
/// `state_bytes` (see the module docs).
fn header(text: &str, state_bytes: u64) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..16].copy_from_slice(&MAGIC);
    header[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[20..24].copy_from_slice(&(text.len() as u32).to_le_bytes());
    header[24..32].copy_from_slice(&state_bytes.to_le_bytes());
    header[32..36].copy_from_slice(&CHUNK_BYTES.to_le_bytes());
    let crc = header_crc(&header[..36], text.as_bytes());
    header[36..40].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A well-formed file around the state stream `state` for the device
/// `description` (fuzzing and tests reach the state parser through it).
pub fn file_of_state(description: &[(String, String)], state: &[u8]) -> Vec<u8> {
    let text = description_text(description);
    let mut file = header(&text, state.len() as u64).to_vec();
    file.extend_from_slice(text.as_bytes());
    for chunk in state.chunks(CHUNK_BYTES as usize) {
        file.extend_from_slice(&crc32fast::hash(chunk).to_le_bytes());
        file.extend_from_slice(chunk);
    }
    file
}

/// The state stream of a file [`read_header`] accepted: its chunks'
/// bytes without their CRCs (tests).
pub fn state_of_file(file: &[u8]) -> Vec<u8> {
    let text_len = u32::from_le_bytes(file[20..24].try_into().expect("a header")) as usize;
    let mut state = Vec::new();
    for chunk in file[HEADER_BYTES + text_len..].chunks(4 + CHUNK_BYTES as usize) {
        state.extend_from_slice(&chunk[4..]);
    }
    state
}

fn header_crc(header: &[u8], description: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(description);
    h.finalize()
}

/// Cuts the state stream into checksummed chunks.
struct ChunkWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    total: u64,
}

impl<W: Write> ChunkWriter<W> {
    fn emit(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.out.write_all(&crc32fast::hash(&self.buf).to_le_bytes())?;
            self.out.write_all(&self.buf)?;
            self.total += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
    fn finish(&mut self) -> io::Result<u64> {
        self.emit()?;
        self.out.flush()?;
        Ok(self.total)
    }
}

impl<W: Write> Write for ChunkWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK_BYTES as usize - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK_BYTES as usize {
            self.emit()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads the state stream, checking each chunk's CRC before handing out
/// any of its bytes.
struct ChunkReader<R: Read> {
    input: R,
    chunk_bytes: usize,
    /// Bytes of the stream not yet read into chunks.
    remaining: u64,
    buf: Vec<u8>,
    at: usize,
    chunk: u64,
    /// File offset of the next chunk.
    offset: u64,
}

impl<R: Read> Read for ChunkReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() {
            if self.remaining == 0 {
                return Ok(0);
            }
            let len = (self.remaining as usize).min(self.chunk_bytes);
            let mut crc = [0; 4];
            self.buf.resize(len, 0);
            let read = self.input.read_exact(&mut crc).and_then(|_| self.input.read_exact(&mut self.buf));
            if read.is_err() {
                return Err(io::Error::other(format!(
                    "truncated: chunk {} (file offset {}) ends early",
                    self.chunk, self.offset
                )));
            }
            let (expected, found) = (u32::from_le_bytes(crc), crc32fast::hash(&self.buf));
            if expected != found {
                return Err(io::Error::other(format!(
                    "chunk {} (file offset {}, {len} bytes) is corrupt: CRC-32 expected {expected:#010x}, found {found:#010x}",
                    self.chunk, self.offset
                )));
            }
            self.remaining -= len as u64;
            self.offset += 4 + len as u64;
            self.chunk += 1;
            self.at = 0;
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The device a file is for, and where its state starts: read and check
/// the header of `input` (a file of `file_bytes`).
pub struct Header {
    pub description: Vec<(String, String)>,
    pub description_bytes: u32,
    pub state_bytes: u64,
    pub chunk_bytes: u32,
}

pub fn read_header<R: Read>(input: &mut R, file_bytes: u64) -> Result<Header, String> {
    let mut h = [0u8; HEADER_BYTES];
    let got = read_up_to(input, &mut h).map_err(|e| format!("header: {e}"))?;
    if got < 16 || h[..16] != MAGIC {
        return Err(format!(
            "not a nandlab drive file: bytes 0..16 are {:?}, expected {:?}",
            String::from_utf8_lossy(&h[..got.min(16)]),
            String::from_utf8_lossy(&MAGIC)
        ));
    }
    if got < HEADER_BYTES {
        return Err(format!("truncated: {got} bytes, a header has {HEADER_BYTES}"));
    }
    let field = |r: std::ops::Range<usize>| {
        let mut b = [0u8; 8];
        b[..r.len()].copy_from_slice(&h[r]);
        u64::from_le_bytes(b)
    };
    let version = field(16..20) as u32;
    if version != FORMAT_VERSION {
        return Err(format!(
            "format version {version} (header bytes 16..20); this nandlab reads version {FORMAT_VERSION}"
        ));
    }
    let text_len = field(20..24) as u32;
    if text_len > DESCRIPTION_MAX_BYTES {
        return Err(format!("header: a device description of {text_len} bytes (at most {DESCRIPTION_MAX_BYTES})"));
    }
    let (state_bytes, chunk_bytes) = (field(24..32), field(32..36) as u32);
    let mut text = vec![0; text_len as usize];
    if read_up_to(input, &mut text).map_err(|e| format!("header: {e}"))? < text.len() {
        return Err("truncated: the file ends inside the device description".into());
    }
    let (expected, found) = (field(36..40) as u32, header_crc(&h[..36], &text));
    if expected != found {
        return Err(format!(
            "the header (bytes 0..{}) is corrupt: CRC-32 expected {expected:#010x}, found {found:#010x}",
            HEADER_BYTES + text.len()
        ));
    }
    if chunk_bytes == 0 || chunk_bytes > 64 << 20 {
        return Err(format!("header: chunk size {chunk_bytes} (1 byte to 64 MiB)"));
    }
    let chunks = state_bytes.div_ceil(u64::from(chunk_bytes));
    let expected_bytes = (HEADER_BYTES as u64 + u64::from(text_len))
        .checked_add(state_bytes)
        .and_then(|n| n.checked_add(4 * chunks))
        .ok_or_else(|| format!("header: a state of {state_bytes} bytes"))?;
    if file_bytes < expected_bytes {
        return Err(format!(
            "truncated: {file_bytes} bytes, the header says {expected_bytes} ({chunks} chunks of state)"
        ));
    }
    if file_bytes > expected_bytes {
        return Err(format!(
            "{} bytes after the last chunk (the header says the file ends at {expected_bytes})",
            file_bytes - expected_bytes
        ));
    }
    let text = String::from_utf8(text).map_err(|_| "header: the device description is not UTF-8".to_string())?;
    let description = text
        .lines()
        .map(|l| l.split_once('=').map_or((l.to_string(), String::new()), |(k, v)| (k.into(), v.into())))
        .collect();
    Ok(Header { description, description_bytes: text_len, state_bytes, chunk_bytes })
}

/// The fields where the file's device and this one differ, one line.
pub fn device_differences(file: &[(String, String)], here: &[(String, String)]) -> Option<String> {
    let get = |list: &[(String, String)], k: &str| list.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    let mut keys: Vec<&String> = file.iter().chain(here).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let (a, b) = (get(file, k), get(here, k));
            (a != b).then(|| {
                format!(
                    "{k} is {} in the file, {} here",
                    a.as_deref().unwrap_or("absent"),
                    b.as_deref().unwrap_or("absent")
                )
            })
        })
        .collect();
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

fn read_up_to<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Read a drive file's state from `input` (a file of `file_bytes`) for
/// the device `config` whose FTL keeps `oob_stored_bytes` per page; byte
/// versions get the store `bytes` (empty) and hold at most `max_sectors`.
pub fn load<R: Read>(
    input: R,
    file_bytes: u64,
    config: &Config,
    oob_stored_bytes: u32,
    bytes: ByteStore,
    max_sectors: u32,
) -> Result<DriveState, String> {
    let mut input = input;
    let header = read_header(&mut input, file_bytes)?;
    if let Some(diff) = device_differences(&header.description, &describe_device(config, oob_stored_bytes)) {
        return Err(format!("the file was made for another device: {diff}"));
    }
    let reader = ChunkReader {
        input,
        chunk_bytes: header.chunk_bytes as usize,
        remaining: header.state_bytes,
        buf: Vec::new(),
        at: 0,
        chunk: 0,
        offset: HEADER_BYTES as u64 + u64::from(header.description_bytes),
    };
    let mut d = Dec::new(reader);
    read_state(&mut d, config, oob_stored_bytes, bytes, max_sectors)
}

fn read_state<R: Read>(
    d: &mut Dec<R>,
    config: &Config,
    oob_stored_bytes: u32,
    mut bytes: ByteStore,
    max_sectors: u32,
) -> Result<DriveState, String> {
    let seed = d.u64("seed")?;
    let next_write_id = d.u32_max("next write id", MAX_WRITE_ID + 1)?.max(1);
    let power_cut = match d.u8("shutdown kind")? {
        0 => false,
        1 => true,
        other => return Err(format!("shutdown kind: {other} is neither 0 (clean) nor 1 (power cut)")),
    };
    let nand = Nand::load_image(config.geometry.clone(), oob_stored_bytes, d)?;
    let oracle = Oracle::load_image(d, "oracle", config.logical_sectors, next_write_id)?;
    let count = d.u64_below("pending operation count", u64::from(u32::MAX))?;
    let mut pending = Vec::new();
    for k in 0..count {
        let what = |f: &str| format!("pending operation {k} {f}");
        let request = d.u64(&what("request"))?;
        let trim = d.u8(&what("kind"))? != 0;
        let lba = d.u64_below(&what("LBA"), config.logical_sectors)?;
        let sectors = d.u32(&what("sectors"))?;
        let write = d.u32_max(&what("write id"), next_write_id.saturating_sub(1))?;
        if sectors == 0 || u64::from(sectors) > config.logical_sectors - lba || (!trim && write == 0) {
            return Err(format!(
                "pending operation {k}: {sectors} sectors at LBA {lba} by write {write} is no operation"
            ));
        }
        if !trim && pending.iter().rev().find(|p: &&PendingOp| !p.trim).is_some_and(|p| p.write >= write) {
            return Err(format!("pending operation {k}: write {write} is not newer than the write before it"));
        }
        pending.push(PendingOp { request, trim, lba, sectors, write });
    }
    let stale_order = bytes.load_image(d, config.logical_sectors, max_sectors, next_write_id)?;
    if !d.at_end()? {
        return Err("the state goes on after its last field".into());
    }
    Ok(DriveState { seed, next_write_id, power_cut, nand, oracle, pending, bytes, stale_order })
}

/// Read `data` as a whole drive file for `config` (fuzzing and tests).
pub fn load_bytes(data: &[u8], config: &Config, oob_stored_bytes: u32) -> Result<DriveState, String> {
    let store = ByteStore::new(config.geometry.sector_size_bytes(), 1 << 20);
    load(data, data.len() as u64, config, oob_stored_bytes, store, super::executor::CHUNK_SECTORS)
}

/// Why a drive file could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The file or the options (exit 2).
    Input(String),
    /// The FTL failed to mount the flash (a finding: exit 1).
    Mount(String),
}

/// A drive opened from its file.
pub struct Opened {
    pub drive: ServeDrive,
    /// The file's seed unless another was given.
    pub seed: u64,
    /// One line: how the drive came up.
    pub how: String,
}

/// Open the drive kept in `path` (an existing file) for `config`: check
/// the file, rebuild the flash, mount it with a fresh FTL from `factory`;
/// after a power cut, read every sector back and check the recovery
/// against what was durable (as `crash` does: violations go to the
/// drive's log), and carry on with the disk the recovery showed. With
/// `keep_origin` the flash as the file held it is kept in the drive, for
/// the timed device to mount too.
#[allow(clippy::too_many_arguments)]
pub fn open(
    path: &Path,
    config: &Config,
    factory: FtlFactory,
    seed: Option<u64>,
    keep_violations: usize,
    stale_bytes_max: u64,
    policy: ViolationPolicy,
    keep_origin: bool,
) -> Result<Opened, OpenError> {
    let input = |e: RunError| OpenError::Input(e.to_string());
    let (oob, guarantee) = Drive::ftl_needs(config, &factory, 0).map_err(input)?;
    let named = |e: String| OpenError::Input(format!("--drive {}: {e}", path.display()));
    let file = File::open(path).map_err(|e| named(format!("cannot open: {e}")))?;
    let file_bytes = file.metadata().map_err(|e| named(e.to_string()))?.len();
    let sector_bytes = config.geometry.sector_size_bytes();
    let store = ByteStore::new(sector_bytes, stale_bytes_max);
    let state = load(io::BufReader::new(file), file_bytes, config, oob, store, super::executor::CHUNK_SECTORS)
        .map_err(named)?;
    let seed = seed.unwrap_or(state.seed);
    let origin = keep_origin.then(|| state.nand.clone());
    let mut drive = match Drive::mount_on(config, factory, seed, keep_violations, state.nand).map_err(input)? {
        Ok(d) => d,
        Err((_, e)) => {
            let after = if state.power_cut { "a power cut" } else { "a clean shutdown" };
            return Err(OpenError::Mount(format!(
                "--drive {}: the FTL failed to mount the flash after {after}: {e}",
                path.display()
            )));
        }
    };
    let (oracle, how) = if state.power_cut {
        let history = CrashHistory::restored(guarantee, state.oracle, &state.pending);
        let mut checker = history.checker(None);
        if verify_disk(&mut drive, &mut checker, config.logical_sectors, super::executor::CHUNK_SECTORS) {
            checker.finish(&mut drive.checker());
        }
        let name =
            serde_json::to_value(guarantee).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let how = format!(
            "recovered after a power cut; every sector read back and checked (guarantee {name}, {} write(s) and trim(s) not yet durable at the cut): {} error violation(s)",
            state.pending.len(),
            drive.flash().log().errors()
        );
        (checker.recovered_oracle(), how)
    } else {
        (state.oracle, "mounted after a clean shutdown".to_string())
    };
    let session = Session::from_parts(drive, HostSide::restored(oracle, state.next_write_id, u64::from(sector_bytes)));
    let mut bytes = state.bytes;
    bytes.settle(state.stale_order, session.host().oracle());
    let mut drive = ServeDrive::with_bytes(session, bytes, policy);
    if let Some(nand) = origin {
        drive.keep_origin(nand);
    }
    Ok(Opened { drive, seed, how })
}

/// Save the drive `drive` serves to `path`: as a clean shutdown left it,
/// or (`power_cut`) as the power cut leaves it, with what it may have lost.
pub fn save_drive(path: &Path, config: &Config, drive: &ServeDrive, seed: u64, power_cut: bool) -> io::Result<()> {
    let session = drive.session();
    let nand = session.drive().flash().nand();
    let (oracle, pending) = match (power_cut, drive.power_cut_history()) {
        (true, Some(h)) => (h.floor(), h.pending()),
        _ => (session.host().oracle(), &[][..]),
    };
    let parts = SaveParts {
        seed,
        next_write_id: session.host().next_write_id(),
        power_cut,
        nand,
        oracle,
        pending,
        bytes: drive.bytes(),
    };
    save(path, &describe_device(config, nand.oob_stored_bytes() as u32), &parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::Flash;
    use crate::ftl::{Durability, Ftl, FtlError, FtlInfo, FtlStats, IdleOutcome, IoRequest};
    use crate::host::nbd::transmission::Command;
    use crate::run::registry_factory;
    use crate::run::serve::tests_support::pattern;
    use crate::violation::Rule;

    fn config(ftl: &str) -> Config {
        let mut c = Config::preset("tiny").unwrap();
        c.ftl_name = ftl.into();
        c.ftl_options.clear();
        c
    }

    fn fresh(config: &Config, factory: FtlFactory) -> ServeDrive {
        let session = Session::with_factory(config, factory, 7, 1, 20).unwrap();
        ServeDrive::new(session, 1 << 20, ViolationPolicy::Continue)
    }

    fn reopen(path: &Path, config: &Config, factory: FtlFactory) -> Opened {
        open(path, config, factory, None, 20, 1 << 20, ViolationPolicy::Continue, false)
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn write(d: &mut ServeDrive, offset_bytes: u64, data: &[u8]) {
        let a = d.execute(Command::Write { offset_bytes, data: data.to_vec(), fua: false });
        assert!(a.result.is_ok() && a.violations.is_empty(), "{a:?}");
    }

    fn read(d: &mut ServeDrive, offset_bytes: u64, length_bytes: u32) -> Vec<u8> {
        let a = d.execute(Command::Read { offset_bytes, length_bytes });
        assert!(a.violations.is_empty(), "{:?}", a.violations);
        a.result.unwrap().to_vec()
    }

    fn flush(d: &mut ServeDrive) {
        assert!(d.execute(Command::Flush).result.is_ok());
    }

    fn errors(d: &ServeDrive) -> u64 {
        d.session().drive().flash().log().errors()
    }

    const BLOCK: usize = 16 << 10;

    #[test]
    fn a_clean_restart_mounts_the_flash_and_every_byte_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.nld");
        let c = config("page");
        let mut d = fresh(&c, registry_factory("page", &c.ftl_options));
        let mut expected = Vec::new();
        for i in 0..48u64 {
            let b = pattern(BLOCK, i);
            write(&mut d, i * BLOCK as u64, &b);
            expected.push(b);
        }
        for i in (0..48u64).step_by(3) {
            expected[i as usize] = pattern(BLOCK, 1000 + i);
            write(&mut d, i * BLOCK as u64, &expected[i as usize]);
        }
        let trim = Command::Trim { offset_bytes: 5 * BLOCK as u64, length_bytes: BLOCK as u32, fua: false };
        assert!(d.execute(trim).result.is_ok());
        expected[5] = vec![0; BLOCK];
        d.session_mut().drive_mut().shutdown().unwrap();
        save_drive(&path, &c, &d, 7, false).unwrap();
        for round in 0..2u64 {
            let o = reopen(&path, &c, registry_factory("page", &c.ftl_options));
            assert_eq!((o.seed, o.how.as_str()), (7, "mounted after a clean shutdown"));
            let mut d = o.drive;
            for (i, b) in expected.iter().enumerate() {
                assert_eq!(&read(&mut d, i as u64 * BLOCK as u64, BLOCK as u32), b, "round {round}, block {i}");
            }
            assert_eq!(read(&mut d, 60 * BLOCK as u64, 4096), vec![0; 4096], "never written");
            // Writes go on with fresh ids: what was kept is never mistaken for them.
            expected[7] = pattern(BLOCK, 2000 + round);
            write(&mut d, 7 * BLOCK as u64, &expected[7]);
            assert_eq!(&read(&mut d, 7 * BLOCK as u64, BLOCK as u32), &expected[7]);
            assert_eq!(errors(&d), 0);
            assert_eq!(d.bytes().stats().live_bytes, 47 * BLOCK as u64, "every live version, once");
            d.session_mut().drive_mut().shutdown().unwrap();
            save_drive(&path, &c, &d, 7, false).unwrap();
        }
    }

    #[test]
    fn after_a_power_cut_what_was_flushed_reads_back_and_the_rest_is_old_or_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.nld");
        let c = config("optr");
        let factory = || registry_factory("optr", &c.ftl_options);
        let mut d = fresh(&c, factory());
        let (_, guarantee) = Drive::ftl_needs(&c, &factory(), 0).unwrap();
        d.track_power_cut(guarantee);
        let old: Vec<Vec<u8>> = (0..32).map(|i| pattern(BLOCK, i)).collect();
        for (i, b) in old.iter().enumerate() {
            write(&mut d, i as u64 * BLOCK as u64, b);
        }
        flush(&mut d);
        let new: Vec<Vec<u8>> = (0..32).map(|i| pattern(BLOCK, 500 + i)).collect();
        for i in (0..32).step_by(2) {
            write(&mut d, i as u64 * BLOCK as u64, &new[i]);
        }
        assert!(!d.power_cut_history().unwrap().pending().is_empty(), "writes since the flush are pending");
        save_drive(&path, &c, &d, 7, true).unwrap();
        let o = reopen(&path, &c, factory());
        assert!(o.how.starts_with("recovered after a power cut"), "{}", o.how);
        let mut d = o.drive;
        assert_eq!(errors(&d), 0, "{:?}", d.session().drive().flash().log().kept());
        for i in 0..32 {
            let got = read(&mut d, i as u64 * BLOCK as u64, BLOCK as u32);
            if i % 2 == 1 {
                assert_eq!(got, old[i], "block {i} was flushed and not written since");
            } else {
                assert!(got == old[i] || got == new[i], "block {i}: neither the flushed nor the later bytes");
            }
        }
    }

    /// The optr FTL with a flush that does nothing (deliberately broken).
    struct IgnoresFlush(Box<dyn Ftl>);

    impl Ftl for IgnoresFlush {
        fn info(&self) -> FtlInfo {
            self.0.info()
        }
        fn format(&mut self, f: &mut dyn Flash) -> Result<(), FtlError> {
            self.0.format(f)
        }
        fn mount(&mut self, f: &mut dyn Flash) -> Result<(), FtlError> {
            self.0.mount(f)
        }
        fn read(&mut self, f: &mut dyn Flash, r: &IoRequest) -> Result<(), FtlError> {
            self.0.read(f, r)
        }
        fn write(&mut self, f: &mut dyn Flash, r: &IoRequest) -> Result<Durability, FtlError> {
            self.0.write(f, r)
        }
        fn trim(&mut self, f: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
            self.0.trim(f, lba, sectors)
        }
        fn flush(&mut self, _: &mut dyn Flash) -> Result<(), FtlError> {
            Ok(())
        }
        fn idle(&mut self, f: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
            self.0.idle(f)
        }
        fn shutdown(&mut self, f: &mut dyn Flash) -> Result<(), FtlError> {
            self.0.shutdown(f)
        }
        fn stats(&self) -> FtlStats {
            self.0.stats()
        }
    }

    #[test]
    fn a_flush_the_ftl_ignored_is_caught_when_the_next_run_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.nld");
        let c = config("optr");
        let options = c.ftl_options.clone();
        let factory = || -> FtlFactory {
            let options = options.clone();
            Box::new(move |env| Ok(Box::new(IgnoresFlush(crate::ftl::build("optr", env, &options)?)) as Box<dyn Ftl>))
        };
        let mut d = fresh(&c, factory());
        d.track_power_cut(Drive::ftl_needs(&c, &factory(), 0).unwrap().1);
        for i in 0..4u64 {
            write(&mut d, i * BLOCK as u64, &pattern(BLOCK, i));
        }
        flush(&mut d);
        save_drive(&path, &c, &d, 7, true).unwrap();
        let d = reopen(&path, &c, factory()).drive;
        let log = d.session().drive().flash().log();
        assert!(log.count(Rule::LostDurableWrite) > 0, "{:?}", log.kept());
    }

    #[test]
    fn mutated_states_behind_valid_checksums_are_refused_or_read_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.nld");
        let c = config("page");
        let mut d = fresh(&c, registry_factory("page", &c.ftl_options));
        for i in 0..6u64 {
            write(&mut d, i * 5000, &pattern(3000, i));
        }
        let trim = Command::Trim { offset_bytes: 0, length_bytes: 4096, fua: false };
        assert!(d.execute(trim).result.is_ok());
        d.session_mut().drive_mut().shutdown().unwrap();
        save_drive(&path, &c, &d, 7, false).unwrap();
        let oob = d.session().drive().flash().nand().oob_stored_bytes() as u32;
        let state = state_of_file(&std::fs::read(&path).unwrap());
        let description = describe_device(&c, oob);
        assert!(load_bytes(&file_of_state(&description, &state), &c, oob).is_ok());
        let (mut refused, mut read) = (0, 0);
        for seed in 0..400u64 {
            let noise = pattern(16, seed);
            let mut s = state.clone();
            for k in 0..1 + seed as usize % 4 {
                let at = (u64::from_le_bytes(noise[..8].try_into().unwrap()) as usize + k * 7919) % s.len();
                s[at] ^= noise[8 + k].max(1);
            }
            if seed % 5 == 0 {
                s.truncate(s.len() * (seed as usize % 7) / 7);
            }
            match load_bytes(&file_of_state(&description, &s), &c, oob) {
                Ok(_) => read += 1,
                Err(e) => {
                    assert!(!e.is_empty());
                    refused += 1;
                }
            }
        }
        assert!(refused > 100 && read > 0, "refused {refused}, read {read}");
    }

    #[test]
    fn damaged_or_foreign_files_are_refused_naming_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.nld");
        let c = config("page");
        let mut d = fresh(&c, registry_factory("page", &c.ftl_options));
        for i in 0..200u64 {
            write(&mut d, i * BLOCK as u64, &pattern(BLOCK, i));
        }
        d.session_mut().drive_mut().shutdown().unwrap();
        save_drive(&path, &c, &d, 7, false).unwrap();
        let good = std::fs::read(&path).unwrap();
        assert!(good.len() > 3 * CHUNK_BYTES as usize, "several chunks: {} bytes", good.len());
        let oob = d.session().drive().flash().nand().oob_stored_bytes() as u32;
        let err = |bytes: &[u8], c: &Config| load_bytes(bytes, c, oob).err().expect("refused");
        assert!(load_bytes(&good, &c, oob).is_ok());

        let mut bad = good.clone();
        bad[good.len() / 2] ^= 0x10;
        let e = err(&bad, &c);
        assert!(e.contains("chunk 1 (file offset") && e.contains("CRC-32 expected"), "{e}");
        let e = err(&good[..good.len() - 100], &c);
        assert!(e.starts_with("truncated:"), "{e}");
        let e = err(&good[..30], &c);
        assert!(e.starts_with("truncated: 30 bytes"), "{e}");
        let mut bad = good.clone();
        bad[16] = 2;
        assert_eq!(err(&bad, &c), "format version 2 (header bytes 16..20); this nandlab reads version 1");
        let mut bad = good.clone();
        bad[0] = b'N';
        assert!(err(&bad, &c).starts_with("not a nandlab drive file"));
        let mut bad = good.clone();
        bad[45] ^= 1;
        assert!(err(&bad, &c).contains("the header (bytes 0.."), "{}", err(&bad, &c));
        let mut other = c.clone();
        other.logical_sectors -= 8;
        let e = err(&good, &other);
        assert!(e.contains("another device: device.logical_sectors is"), "{e}");
        let e = err(&good, &config("dftl"));
        assert!(e.contains("ftl is page in the file, dftl here"), "{e}");
        let mut longer = good.clone();
        longer.push(0);
        assert!(err(&longer, &c).starts_with("1 bytes after the last chunk"));
    }
}
