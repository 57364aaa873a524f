//! What the library FTL is doing right now, for the report of a crash of
//! its C code (`--isolate`).
//!
//! Every call into the library records which `Ftl` method it is and, for a
//! host request, its id and sectors; every flash operation the library
//! issues counts one (buffer calls do not count), so the count is the
//! index of the flash operation in progress. The record is a few words of
//! plain memory: by default a static of this process; in an isolated
//! child, a shared file mapping ([`publish_to`]) that the parent reads
//! after the child died.
//!
//! One record per process: in a crash campaign with several threads, it
//! shows the thread that wrote last.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

/// The record (all little-endian `u64`s in the shared file, in this order).
#[repr(C)]
#[derive(Default)]
pub struct Progress {
    /// [`MAGIC`] once the record is live.
    pub magic: AtomicU64,
    /// Flash operations issued by the library so far (the index of the
    /// one in progress, counted from 0).
    pub flash_ops: AtomicU64,
    /// The `Ftl` method being called ([`Call`] as a number; 0: none).
    pub call: AtomicU64,
    /// The host request's id (`u64::MAX`: none).
    pub request_id: AtomicU64,
    /// Its first sector.
    pub lba: AtomicU64,
    /// Its sectors.
    pub sectors: AtomicU64,
}

/// `magic` of a live record: "nandprog".
pub const MAGIC: u64 = u64::from_le_bytes(*b"nandprog");
/// Bytes of the record.
pub const BYTES: usize = std::mem::size_of::<Progress>();

/// The `Ftl` method in progress.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Call {
    None = 0,
    Create = 1,
    Format = 2,
    Mount = 3,
    Read = 4,
    Write = 5,
    Trim = 6,
    Flush = 7,
    EmergencyFlush = 8,
    Idle = 9,
    Shutdown = 10,
    Stats = 11,
    Destroy = 12,
}

impl Call {
    const ALL: [Call; 13] = [
        Call::None,
        Call::Create,
        Call::Format,
        Call::Mount,
        Call::Read,
        Call::Write,
        Call::Trim,
        Call::Flush,
        Call::EmergencyFlush,
        Call::Idle,
        Call::Shutdown,
        Call::Stats,
        Call::Destroy,
    ];

    pub fn from_number(n: u64) -> Call {
        Call::ALL.into_iter().find(|c| *c as u64 == n).unwrap_or(Call::None)
    }

    /// The C function's name.
    pub fn function(self) -> &'static str {
        match self {
            Call::None => "(none)",
            Call::Create => "nandlab_ftl_create",
            Call::Format => "nandlab_ftl_format",
            Call::Mount => "nandlab_ftl_mount",
            Call::Read => "nandlab_ftl_read",
            Call::Write => "nandlab_ftl_write",
            Call::Trim => "nandlab_ftl_trim",
            Call::Flush => "nandlab_ftl_flush",
            Call::EmergencyFlush => "nandlab_ftl_emergency_flush",
            Call::Idle => "nandlab_ftl_idle",
            Call::Shutdown => "nandlab_ftl_shutdown",
            Call::Stats => "nandlab_ftl_stats",
            Call::Destroy => "nandlab_ftl_destroy",
        }
    }
}

static LOCAL: Progress = Progress {
    magic: AtomicU64::new(MAGIC),
    flash_ops: AtomicU64::new(0),
    call: AtomicU64::new(0),
    request_id: AtomicU64::new(u64::MAX),
    lba: AtomicU64::new(0),
    sectors: AtomicU64::new(0),
};

static CURRENT: AtomicPtr<Progress> = AtomicPtr::new(&LOCAL as *const Progress as *mut Progress);

fn current() -> &'static Progress {
    // SAFETY: CURRENT points at LOCAL or at a mapping that is never unmapped.
    unsafe { &*CURRENT.load(Relaxed) }
}

/// A library call begins: `request` is (id, lba, sectors) of a host request.
#[inline]
pub fn enter(call: Call, request: Option<(u64, u64, u64)>) {
    let p = current();
    p.call.store(call as u64, Relaxed);
    let (id, lba, sectors) = request.unwrap_or((u64::MAX, 0, 0));
    p.request_id.store(id, Relaxed);
    p.lba.store(lba, Relaxed);
    p.sectors.store(sectors, Relaxed);
}

/// A library call returned.
#[inline]
pub fn leave() {
    current().call.store(Call::None as u64, Relaxed);
}

/// The library issues a flash operation.
#[inline]
pub fn flash_op() {
    let p = current();
    p.flash_ops.store(p.flash_ops.load(Relaxed) + 1, Relaxed);
}

/// Publish the record in `file` (a shared mapping of [`BYTES`] bytes), for
/// a parent process to read after this one died. Linux only.
#[cfg(target_os = "linux")]
pub fn publish_to(file: &std::fs::File) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    file.set_len(BYTES as u64).map_err(|e| format!("progress file: {e}"))?;
    // SAFETY: a fresh shared mapping of a file we own, never unmapped.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("progress file: mmap failed: {}", std::io::Error::last_os_error()));
    }
    let shared = p as *mut Progress;
    // SAFETY: the mapping is BYTES long and page-aligned; Progress is plain u64s.
    unsafe {
        let s = &*shared;
        s.flash_ops.store(LOCAL.flash_ops.load(Relaxed), Relaxed);
        s.call.store(0, Relaxed);
        s.request_id.store(u64::MAX, Relaxed);
        s.magic.store(MAGIC, Relaxed);
    }
    CURRENT.store(shared, Relaxed);
    Ok(())
}

/// A record as read back from its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub flash_ops: u64,
    pub call: Call,
    /// (id, lba, sectors) of the host request, if one was being served.
    pub request: Option<(u64, u64, u64)>,
}

/// Read a record published by [`publish_to`]; `None` if it never went live.
pub fn read_snapshot(bytes: &[u8]) -> Option<Snapshot> {
    let word = |i: usize| bytes.get(i * 8..i * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if word(0)? != MAGIC {
        return None;
    }
    let id = word(3)?;
    Some(Snapshot {
        flash_ops: word(1)?,
        call: Call::from_number(word(2)?),
        request: (id != u64::MAX).then(|| (id, word(4).unwrap_or(0), word(5).unwrap_or(0))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_dead_one_does_not() {
        let mut bytes = Vec::new();
        for w in [MAGIC, 41, Call::Write as u64, 7, 4096, 16] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let s = read_snapshot(&bytes).unwrap();
        assert_eq!(s, Snapshot { flash_ops: 41, call: Call::Write, request: Some((7, 4096, 16)) });
        bytes[0] ^= 1;
        assert_eq!(read_snapshot(&bytes), None);
        assert_eq!(read_snapshot(&[]), None);
    }
}
