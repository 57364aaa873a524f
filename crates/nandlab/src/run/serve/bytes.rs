//! The real bytes of `serve`, kept beside the payload identities the FTL
//! moves.
//!
//! The FTL and the NAND handle host data as stamps (LBA and write id, see
//! [`crate::nand::payload`]); the byte store maps each write id to the
//! bytes the client sent with it. A read turns whatever runs the FTL put
//! in the buffer back into bytes: data of write `w` for LBA `l` is the
//! sector `l` of `w`'s bytes, zeros are zeros, erased flash is `0xFF`.
//! So a stale, misdirected or lost sector reaches the client as the bytes
//! the FTL really returned, and the oracle flags it in the same read.
//!
//! **Memory.** A version (the bytes of one write) is *live* while the
//! oracle still expects some of its sectors; it costs its size. A write
//! of zeros costs nothing (it is recorded as zeros). When the last of its
//! sectors is overwritten or trimmed, a version becomes *stale*: a correct
//! FTL never returns it again, a broken one may. Stale versions are kept,
//! oldest first out, up to `stale_bytes_max` bytes, so an FTL bug shows the
//! client the old bytes it would really see; a stale version dropped from
//! that window reads as [`FORGOTTEN_BYTE`] (the oracle has already
//! reported the read as stale whatever its bytes). Live data therefore
//! costs its size once, plus the stale window, plus up to one partly
//! overwritten write's old sectors per write still partly live.
//!
//! Content no host ever wrote gets a fixed pattern: an FTL metadata page
//! read as data is [`METADATA_BYTE`], unreadable (torn, corrupt) flash is
//! [`GARBAGE_BYTE`], a buffer sector the FTL never filled is
//! [`UNFILLED_BYTE`].
//!
//! **Reads without a copy.** A read is answered with [`ReadBytes`]: pieces
//! of the versions kept (shared, reference-counted) and runs of zeros, in
//! the order the FTL's runs name them; the connection hands them to the
//! socket as they are (a vectored write, [`super::send`]), so the bytes
//! are copied once, by the kernel, from the store into the socket. A piece
//! holds its version alive until the reply is sent, even if the version
//! leaves the store meanwhile.

use crate::nand::payload::{Run, RunKind, WriteId};
use crate::oracle::{Oracle, SectorVersion};
use crate::util::codec::{Dec, Enc};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A stale version no longer kept, as the client sees it.
pub const FORGOTTEN_BYTE: u8 = 0xD5;
/// An FTL metadata page returned as host data.
pub const METADATA_BYTE: u8 = 0x4D;
/// Unreadable flash (a torn program, a corrupted page).
pub const GARBAGE_BYTE: u8 = 0xBD;
/// A buffer sector the FTL left unfilled.
pub const UNFILLED_BYTE: u8 = 0xEE;

/// The bytes of one host write.
struct Version {
    lba: u64,
    sectors: u32,
    /// Sectors the oracle still expects from this write.
    live_sectors: u32,
    /// `None`: all zeros.
    data: Option<Arc<Vec<u8>>>,
}

impl Version {
    fn cost_bytes(&self) -> u64 {
        self.data.as_ref().map_or(0, |d| d.len() as u64)
    }
}

/// Counters of the byte store (reported).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ByteStoreStats {
    /// Bytes of versions the oracle still expects.
    pub live_bytes: u64,
    /// Bytes of stale versions kept for a broken FTL to return.
    pub stale_bytes: u64,
    /// Stale versions dropped from the window.
    pub versions_forgotten: u64,
}

/// See the module docs.
pub struct ByteStore {
    sector_bytes: usize,
    versions: HashMap<WriteId, Version>,
    stale: VecDeque<WriteId>,
    stale_bytes_max: u64,
    stats: ByteStoreStats,
    /// TEST ONLY ([`ByteStore::keep_second_copies`]): a copy of every
    /// write's bytes, never freed.
    second_copies: Option<Vec<Vec<u8>>>,
}

impl ByteStore {
    pub fn new(sector_bytes: u32, stale_bytes_max: u64) -> ByteStore {
        ByteStore {
            sector_bytes: sector_bytes as usize,
            versions: HashMap::new(),
            stale: VecDeque::new(),
            stale_bytes_max,
            stats: ByteStoreStats::default(),
            second_copies: None,
        }
    }

    /// TEST ONLY: a deliberate memory bug for the test of `serve`'s memory
    /// bound (`serve --byte-store-mutant keeps-second-copies`): every
    /// write's bytes are copied once more and the copy is never freed.
    pub fn keep_second_copies(&mut self) {
        self.second_copies = Some(Vec::new());
    }

    pub fn stats(&self) -> &ByteStoreStats {
        &self.stats
    }

    /// Keep the bytes of write `write` of `data` at `lba` (whole sectors),
    /// before the FTL sees it: a broken FTL may return it at once.
    /// An owned `data` is kept as it is (no copy).
    pub fn insert(&mut self, write: WriteId, lba: u64, data: Cow<'_, [u8]>) {
        debug_assert_eq!(data.len() % self.sector_bytes, 0);
        let sectors = (data.len() / self.sector_bytes) as u32;
        let data = data.iter().any(|&b| b != 0).then(|| Arc::new(data.into_owned()));
        if let (Some(copies), Some(data)) = (&mut self.second_copies, &data) {
            copies.push(data.to_vec());
        }
        let v = Version { lba, sectors, live_sectors: sectors, data };
        self.stats.live_bytes += v.cost_bytes();
        self.versions.insert(write, v);
    }

    /// The FTL failed write `write`: nothing expects it, but it may have
    /// reached the flash.
    pub fn abandon(&mut self, write: WriteId) {
        if let Some(v) = self.versions.get_mut(&write) {
            v.live_sectors = 0;
            self.make_stale(write);
        }
    }

    /// Sectors `lba .. lba+sectors` are about to take a new version (a
    /// write other than `except`, or a trim): the versions the oracle
    /// expects there now lose them.
    pub fn supersede(&mut self, oracle: &Oracle, lba: u64, sectors: u64, except: WriteId) {
        let mut s = lba;
        while s < lba + sectors {
            let SectorVersion::Written(w) = oracle.version(s) else {
                s += 1;
                continue;
            };
            // The run of sectors this version still covers in the range.
            let mut n = 1;
            while s + n < lba + sectors && oracle.version(s + n) == SectorVersion::Written(w) {
                n += 1;
            }
            if w != except {
                if let Some(v) = self.versions.get_mut(&w) {
                    v.live_sectors = v.live_sectors.saturating_sub(n as u32);
                    if v.live_sectors == 0 {
                        self.make_stale(w);
                    }
                }
            }
            s += n;
        }
    }

    fn make_stale(&mut self, write: WriteId) {
        let cost = self.versions[&write].cost_bytes();
        self.stats.live_bytes -= cost;
        if cost == 0 {
            self.versions.remove(&write);
            return;
        }
        self.stats.stale_bytes += cost;
        self.stale.push_back(write);
        while self.stats.stale_bytes > self.stale_bytes_max {
            let Some(old) = self.stale.pop_front() else { break };
            if let Some(v) = self.versions.remove(&old) {
                self.stats.stale_bytes -= v.cost_bytes();
                self.stats.versions_forgotten += 1;
            }
        }
    }

    /// Write the versions kept (live and stale, oldest stale first).
    pub fn save_image<W: std::io::Write>(&self, e: &mut Enc<W>) -> std::io::Result<()> {
        let mut ids: Vec<WriteId> = self.versions.keys().copied().collect();
        ids.sort_unstable();
        e.u64(ids.len() as u64)?;
        for id in ids {
            let v = &self.versions[&id];
            e.u32(id)?;
            e.u64(v.lba)?;
            e.u32(v.sectors)?;
            e.u8(u8::from(v.data.is_some()))?;
            if let Some(data) = &v.data {
                e.raw(data)?;
            }
        }
        e.u64(self.stale.len() as u64)?;
        for &id in &self.stale {
            e.u32(id)?;
        }
        Ok(())
    }

    /// Read the versions [`ByteStore::save_image`] wrote into this (empty)
    /// store, for a disk of `logical_sectors`: versions of at most
    /// `max_sectors` sectors, ids below `next_write_id`. Returns the stale
    /// order saved, for [`ByteStore::settle`].
    pub fn load_image<R: std::io::Read>(
        &mut self,
        d: &mut Dec<R>,
        logical_sectors: u64,
        max_sectors: u32,
        next_write_id: WriteId,
    ) -> Result<Vec<WriteId>, String> {
        let count = d.u64_below("byte versions count", u64::from(next_write_id))?;
        let mut last = 0;
        for k in 0..count {
            let what = |f: &str| format!("byte version {k} {f}");
            let id = d.u32(&what("write id"))?;
            if id <= last || id >= next_write_id {
                return Err(format!("{}: {id} is out of order or was never handed out", what("write id")));
            }
            last = id;
            let lba = d.u64_below(&what("LBA"), logical_sectors)?;
            let sectors = d.u32_max(&what("sectors"), max_sectors)?;
            if sectors == 0 || u64::from(sectors) > logical_sectors - lba {
                return Err(format!("{}: {sectors} sectors at LBA {lba} do not fit the disk", what("sectors")));
            }
            let data = match d.u8(&what("kind"))? {
                0 => None,
                1 => {
                    let mut data = vec![0; sectors as usize * self.sector_bytes];
                    d.raw(&what("bytes"), &mut data)?;
                    Some(Arc::new(data))
                }
                other => return Err(format!("{}: {other} is neither 0 (zeros) nor 1 (bytes)", what("kind"))),
            };
            self.versions.insert(id, Version { lba, sectors, live_sectors: 0, data });
        }
        let stale = d.u64_below("byte versions stale count", count + 1)?;
        let mut order = Vec::new();
        for k in 0..stale {
            order.push(d.u32(&format!("byte versions stale {k}"))?);
        }
        Ok(order)
    }

    /// After [`ByteStore::load_image`]: a version is live for the sectors
    /// `oracle` names it on (after a power cut, maybe fewer than at the
    /// save), stale otherwise, the stale ones in the order saved first.
    pub fn settle(&mut self, stale_order: Vec<WriteId>, oracle: &Oracle) {
        for (_, n, v) in oracle.written_runs() {
            if let SectorVersion::Written(w) = v {
                if let Some(version) = self.versions.get_mut(&w) {
                    version.live_sectors = (version.live_sectors + n as u32).min(version.sectors);
                }
            }
        }
        let mut ids: Vec<WriteId> = self.versions.keys().copied().collect();
        ids.sort_unstable();
        self.stats = ByteStoreStats::default();
        for &id in &ids {
            self.stats.live_bytes += self.versions[&id].cost_bytes();
        }
        let mut seen = std::collections::HashSet::new();
        for id in stale_order.into_iter().chain(ids) {
            if self.versions.get(&id).is_some_and(|v| v.live_sectors == 0) && seen.insert(id) {
                self.make_stale(id);
            }
        }
    }

    /// Write the bytes of `runs` (a read buffer's content) into `out`
    /// (a partial sector's read-modify-write: the bytes are merged).
    pub fn fill(&self, runs: &[Run], out: &mut [u8]) {
        let mut read = ReadBytes::default();
        self.read(runs, out.len(), &mut read);
        read.copy_to(out);
    }

    /// Append the `len_bytes` bytes of `runs` (a read buffer's content) to
    /// `out`, as pieces of the versions kept: no copy. Runs beyond
    /// `len_bytes` are left out; a buffer the runs do not cover reads as
    /// zeros there.
    pub fn read(&self, runs: &[Run], len_bytes: usize, out: &mut ReadBytes) {
        let mut at = 0;
        for run in runs {
            let len = (run.len as usize * self.sector_bytes).min(len_bytes - at);
            if len == 0 {
                break;
            }
            let piece = match run.kind {
                RunKind::Data => self.data_piece(run, len),
                RunKind::Zero => Piece::Zeros(len),
                RunKind::Erased => Piece::filled(0xFF, len),
                RunKind::Metadata => Piece::filled(METADATA_BYTE, len),
                RunKind::Unfilled => Piece::filled(UNFILLED_BYTE, len),
                RunKind::Garbage => Piece::filled(GARBAGE_BYTE, len),
            };
            out.push(piece);
            at += len;
        }
        out.push(Piece::Zeros(len_bytes - at));
    }

    fn data_piece(&self, run: &Run, len: usize) -> Piece {
        let Some(v) = self.versions.get(&run.write) else { return Piece::filled(FORGOTTEN_BYTE, len) };
        let first = u64::from(run.lba);
        // A stamp of this write always lies inside it; anything else is
        // not bytes this store can name.
        if first < v.lba || first + u64::from(run.len) > v.lba + u64::from(v.sectors) {
            return Piece::filled(FORGOTTEN_BYTE, len);
        }
        match &v.data {
            None => Piece::Zeros(len),
            Some(data) => {
                let from = (first - v.lba) as usize * self.sector_bytes;
                Piece::Kept { bytes: Arc::clone(data), from, len }
            }
        }
    }
}

/// One piece of a read's bytes.
#[derive(Clone, Debug)]
pub enum Piece {
    /// `len` bytes of a kept version (or of a pattern), from byte `from`.
    Kept { bytes: Arc<Vec<u8>>, from: usize, len: usize },
    /// `len` zero bytes.
    Zeros(usize),
}

impl Piece {
    /// `len` bytes of `byte` (the patterns for content no host wrote: rare,
    /// so they are allocated when read).
    fn filled(byte: u8, len: usize) -> Piece {
        Piece::Kept { bytes: Arc::new(vec![byte; len]), from: 0, len }
    }

    pub fn len(&self) -> usize {
        match self {
            Piece::Kept { len, .. } | Piece::Zeros(len) => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A read's bytes, as pieces (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct ReadBytes {
    pieces: Vec<Piece>,
    len: usize,
}

impl ReadBytes {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Append `piece`, joined to the last one when it continues it.
    pub fn push(&mut self, piece: Piece) {
        if piece.is_empty() {
            return;
        }
        self.len += piece.len();
        match (self.pieces.last_mut(), &piece) {
            (Some(Piece::Zeros(n)), Piece::Zeros(more)) => *n += more,
            (Some(Piece::Kept { bytes, from, len }), Piece::Kept { bytes: b, from: f, len: l })
                if Arc::ptr_eq(bytes, b) && *from + *len == *f =>
            {
                *len += l
            }
            _ => self.pieces.push(piece),
        }
    }

    /// Bytes `skip .. skip+len` of these (a read that starts or ends inside
    /// a sector).
    pub fn cut(&self, skip: usize, len: usize) -> ReadBytes {
        let mut out = ReadBytes::default();
        let mut at = 0;
        for piece in &self.pieces {
            let (start, end) = (at.max(skip), (at + piece.len()).min(skip + len));
            if start < end {
                out.push(match piece {
                    Piece::Kept { bytes, from, .. } => {
                        Piece::Kept { bytes: Arc::clone(bytes), from: from + start - at, len: end - start }
                    }
                    Piece::Zeros(_) => Piece::Zeros(end - start),
                });
            }
            at += piece.len();
        }
        out
    }

    /// Copy the bytes into `out` (at most its length).
    pub fn copy_to(&self, out: &mut [u8]) {
        let mut at = 0;
        for piece in &self.pieces {
            let n = piece.len().min(out.len() - at);
            let dst = &mut out[at..at + n];
            match piece {
                Piece::Kept { bytes, from, .. } => dst.copy_from_slice(&bytes[*from..*from + n]),
                Piece::Zeros(_) => dst.fill(0),
            }
            at += n;
        }
    }

    /// The bytes, copied (tests, fuzzing).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        self.copy_to(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_return_the_bytes_of_the_version_the_runs_name() {
        let mut oracle = Oracle::new(64, 1);
        let mut store = ByteStore::new(4, 1 << 20);
        store.insert(1, 8, Cow::Borrowed(b"aaaabbbbcccc"));
        oracle.record_write(8, 3, 1);
        store.supersede(&oracle, 9, 1, 2);
        store.insert(2, 9, Cow::Borrowed(b"BBBB"));
        oracle.record_write(9, 1, 2);
        let mut out = [0u8; 16];
        store.fill(
            &[Run::data(8, 1, 1), Run::data(9, 2, 1), Run::data(10, 1, 1), Run::filler(RunKind::Erased, 1)],
            &mut out,
        );
        assert_eq!(&out, b"aaaaBBBBcccc\xff\xff\xff\xff");
        // The stale sector of write 1 is still there for a broken FTL to return.
        store.fill(&[Run::data(9, 1, 1)], &mut out[..4]);
        assert_eq!(&out[..4], b"bbbb");
        assert_eq!(store.stats().live_bytes, 16);
    }

    #[test]
    fn stale_versions_beyond_the_window_are_forgotten_and_zeros_cost_nothing() {
        let mut oracle = Oracle::new(64, 1);
        let mut store = ByteStore::new(4, 8);
        for w in 1..=4u32 {
            store.supersede(&oracle, 0, 2, w);
            store.insert(w, 0, Cow::Borrowed(&[w as u8; 8]));
            oracle.record_write(0, 2, w);
        }
        // Versions 1..=3 are stale; the window keeps only the newest (8 bytes).
        assert_eq!(store.stats().stale_bytes, 8);
        assert_eq!(store.stats().versions_forgotten, 2);
        let mut out = [0u8; 4];
        store.fill(&[Run::data(0, 1, 1)], &mut out);
        assert_eq!(out, [FORGOTTEN_BYTE; 4]);
        store.fill(&[Run::data(1, 3, 1)], &mut out);
        assert_eq!(out, [3; 4]);
        store.supersede(&oracle, 0, 2, 5);
        store.insert(5, 0, Cow::Borrowed(&[0; 8]));
        oracle.record_write(0, 2, 5);
        assert_eq!(store.stats().live_bytes, 0, "a write of zeros is stored as zeros");
    }
}
