//! [`LibraryFtl`]: the [`Ftl`] trait over a library's `nandlab_ftl_*`
//! functions, and the flash table's `extern "C"` trampolines.
//!
//! Each `Ftl` method builds the flash table with `ctx` pointing at a
//! [`CallCtx`] on its stack that holds the `&mut dyn Flash` it was given,
//! calls the C function, and turns its code and message back into a
//! [`FtlError`]. The trampolines cast `ctx` back and call the `Flash`
//! method; a flash error becomes its code. A table kept past the call it
//! was passed to points at a dead stack frame: the header forbids it.
//!
//! Error codes: 1 … 10 are [`FlashError`]s; 101 is rebuilt as
//! [`FtlError::OutOfRange`] from the request that was passed; 102, 103 and
//! 104 carry the library's message; any other code is [`FtlError::Other`]
//! with the code and the message, so a run stops on it as on any FTL error
//! without calling it something it is not (a layer's own failure is not
//! "no free space").

use super::library::Library;
use super::progress::{self, Call};
use super::{CCopybackOp, CEnv, CFlash, CInfo, COption, CProgramOp, CReadOp, CRequest, CStat, MSG_BYTES};
use crate::flash::{BufId, Cause, CopybackOp, Flash, FlashError, ProgramOp, ReadOp};
use crate::ftl::{Durability, Ftl, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats, Guarantee, IdleOutcome, IoRequest};
use crate::nand::{BlockAddr, PageAddr};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Arc, Mutex};

/// An FTL implemented by a loaded library.
pub struct LibraryFtl {
    library: Arc<Library>,
    handle: *mut c_void,
    info: FtlInfo,
    logical_sectors: u64,
    /// The message buffer of every call (only its first byte is cleared
    /// before a call: the library writes a NUL-terminated message).
    msg: Box<[c_char; MSG_BYTES]>,
}

/// What the flash table's `ctx` points at during one FTL call: the flash
/// of the call, writable except during `nandlab_ftl_prefetch` (where only
/// the hints and the read-only queries work; the rest fail with
/// `NANDLAB_E_INVALID_ARGUMENT`).
struct CallCtx<'a> {
    flash: *mut (dyn Flash + 'a),
    read_only: bool,
}

impl LibraryFtl {
    /// Create an instance (`nandlab_ftl_create`) with `options` passed as
    /// `KEY=VALUE` strings, the value being its TOML text.
    pub fn new(library: Arc<Library>, env: &FtlEnv, options: &FtlOptions) -> Result<LibraryFtl, String> {
        let cenv = CEnv::new(env);
        let mut strings = Vec::with_capacity(options.len());
        for (k, v) in options {
            let key = CString::new(k.as_str()).map_err(|_| format!("ftl option `{k}`: a NUL byte in the name"))?;
            let value =
                CString::new(v.to_string()).map_err(|_| format!("ftl option `{k}`: a NUL byte in the value"))?;
            strings.push((key, value));
        }
        let coptions: Vec<COption> =
            strings.iter().map(|(k, v)| COption { key: k.as_ptr(), value: v.as_ptr() }).collect();
        let mut msg = [0 as c_char; MSG_BYTES];
        let f = library.functions;
        progress::enter(Call::Create, None);
        // SAFETY: the pointers live for the call; the header's contract.
        let handle = unsafe { (f.create)(&cenv, coptions.as_ptr(), coptions.len(), msg.as_mut_ptr(), MSG_BYTES) };
        progress::leave();
        if handle.is_null() {
            return Err(format!(
                "ftl library {}: nandlab_ftl_create failed: {}",
                library.path().display(),
                message(&msg, "(no message)")
            ));
        }
        let mut cinfo = CInfo { name: std::ptr::null(), guarantee: 0, oob_bytes: 0 };
        // SAFETY: a live handle; cinfo is writable.
        unsafe { (f.info)(handle, &mut cinfo) };
        let name = if cinfo.name.is_null() {
            "unnamed".to_string()
        } else {
            // SAFETY: the header says a static NUL-terminated string.
            unsafe { CStr::from_ptr(cinfo.name) }.to_string_lossy().into_owned()
        };
        let guarantee = match cinfo.guarantee {
            0 => Guarantee::Baseline,
            1 => Guarantee::Optr,
            g => {
                // SAFETY: a live handle, destroyed once.
                unsafe { (f.destroy)(handle) };
                return Err(format!(
                    "ftl library {}: nandlab_ftl_info declares guarantee {g} (valid: 0 baseline, 1 optr)",
                    library.path().display()
                ));
            }
        };
        let info = FtlInfo { name: intern(&format!("lib:{name}")), guarantee, oob_bytes: cinfo.oob_bytes };
        Ok(LibraryFtl { library, handle, info, logical_sectors: env.logical_sectors, msg: Box::new([0; MSG_BYTES]) })
    }

    /// The name the library declares (without `lib:`).
    pub fn declared_name(&self) -> &str {
        self.info.name.trim_start_matches("lib:")
    }

    /// Call `f` with the library's handle, a flash table over `flash` and
    /// the message buffer; returns its code.
    fn call(
        &mut self,
        flash: &mut dyn Flash,
        what: Call,
        request: Option<(u64, u64, u64)>,
        f: impl FnOnce(*mut c_void, *const CFlash, *mut c_char) -> i32,
    ) -> i32 {
        let mut ctx = CallCtx { flash: flash as *mut (dyn Flash + '_), read_only: false };
        let table = CFlash { ctx: &mut ctx as *mut CallCtx as *mut c_void, ..TABLE };
        self.msg[0] = 0;
        progress::enter(what, request);
        let code = f(self.handle, &table, self.msg.as_mut_ptr());
        progress::leave();
        code
    }

    /// The error for a nonzero code (`range`: the request's, for code 101).
    fn error(&self, code: i32, range: Option<(u64, u64)>) -> FtlError {
        let text = message(&self.msg[..], "");
        if let Some(e) = FlashError::from_code(code) {
            return FtlError::Flash(e);
        }
        match code {
            FtlError::CODE_OUT_OF_RANGE => {
                let (lba, sectors) = range.unwrap_or((0, 0));
                FtlError::OutOfRange { lba, end: lba.saturating_add(sectors), capacity: self.logical_sectors }
            }
            FtlError::CODE_NO_SPACE => FtlError::NoSpace(text),
            FtlError::CODE_MOUNT => FtlError::Mount(text),
            FtlError::CODE_DRAM => FtlError::Dram(text),
            _ => FtlError::Other { code, message: format!("{}: {text}", self.info.name) },
        }
    }

    fn simple(
        &mut self,
        flash: &mut dyn Flash,
        what: Call,
        f: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    ) -> Result<(), FtlError> {
        // SAFETY: a live handle, a table valid for the call, a message buffer of MSG_BYTES.
        let code = self.call(flash, what, None, |h, t, m| unsafe { f(h, t, m, MSG_BYTES) });
        match code {
            0 => Ok(()),
            c => Err(self.error(c, None)),
        }
    }
}

impl Drop for LibraryFtl {
    fn drop(&mut self) {
        progress::enter(Call::Destroy, None);
        // SAFETY: the handle came from create and is destroyed once.
        unsafe { (self.library.functions.destroy)(self.handle) };
        progress::leave();
    }
}

impl Ftl for LibraryFtl {
    fn info(&self) -> FtlInfo {
        self.info.clone()
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.simple(flash, Call::Format, self.library.functions.format)
    }

    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.simple(flash, Call::Mount, self.library.functions.mount)
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        let r = CRequest { id: req.id, lba: req.lba, sectors: req.sectors, reserved: 0, buf: req.buf.raw() };
        let f = self.library.functions.read;
        let request = Some((req.id, req.lba, u64::from(req.sectors)));
        // SAFETY: as in `simple`; `r` lives for the call.
        let code = self.call(flash, Call::Read, request, |h, t, m| unsafe { f(h, t, &r, m, MSG_BYTES) });
        match code {
            0 => Ok(()),
            c => Err(self.error(c, Some((req.lba, u64::from(req.sectors))))),
        }
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        let r = CRequest { id: req.id, lba: req.lba, sectors: req.sectors, reserved: 0, buf: req.buf.raw() };
        let f = self.library.functions.write;
        let mut durability = 0u32;
        let request = Some((req.id, req.lba, u64::from(req.sectors)));
        let code =
            // SAFETY: as in `read`; `durability` is writable for the call.
            self.call(flash, Call::Write, request, |h, t, m| unsafe { f(h, t, &r, &mut durability, m, MSG_BYTES) });
        match code {
            0 if durability == 1 => Ok(Durability::Volatile),
            0 => Ok(Durability::Durable),
            c => Err(self.error(c, Some((req.lba, u64::from(req.sectors))))),
        }
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        let f = self.library.functions.trim;
        let request = Some((u64::MAX - 1, lba, sectors));
        // SAFETY: as in `simple`.
        let code = self.call(flash, Call::Trim, request, |h, t, m| unsafe { f(h, t, lba, sectors, m, MSG_BYTES) });
        match code {
            0 => Ok(()),
            c => Err(self.error(c, Some((lba, sectors)))),
        }
    }

    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.simple(flash, Call::Flush, self.library.functions.flush)
    }

    fn emergency_flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.simple(flash, Call::EmergencyFlush, self.library.functions.emergency_flush)
    }

    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        let f = self.library.functions.idle;
        let mut outcome = 0u32;
        // SAFETY: as in `simple`; `outcome` is writable for the call.
        let code = self.call(flash, Call::Idle, None, |h, t, m| unsafe { f(h, t, &mut outcome, m, MSG_BYTES) });
        match code {
            0 if outcome == 1 => Ok(IdleOutcome::Worked),
            0 => Ok(IdleOutcome::Nothing),
            c => Err(self.error(c, None)),
        }
    }

    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.simple(flash, Call::Shutdown, self.library.functions.shutdown)
    }

    fn stats(&self) -> FtlStats {
        let f = self.library.functions.stats;
        let mut entries = vec![CStat { key: std::ptr::null(), value: 0.0 }; 64];
        progress::enter(Call::Stats, None);
        // SAFETY: a live handle and a writable array of entries.len() entries.
        let mut n = unsafe { f(self.handle, entries.as_mut_ptr(), entries.len()) };
        if n > entries.len() {
            entries.resize(n, CStat { key: std::ptr::null(), value: 0.0 });
            // SAFETY: as above, with the larger array.
            n = unsafe { f(self.handle, entries.as_mut_ptr(), entries.len()) }.min(entries.len());
        }
        progress::leave();
        let mut stats = FtlStats::default();
        let mut extra = BTreeMap::new();
        for e in &entries[..n] {
            if e.key.is_null() {
                continue;
            }
            // SAFETY: the header: a NUL-terminated key valid until the next call.
            let key = unsafe { CStr::from_ptr(e.key) }.to_string_lossy().into_owned();
            let v = e.value;
            match key.as_str() {
                "gc_runs" => stats.gc_runs = v as u64,
                "dram_bytes" => stats.dram_bytes = v as u64,
                "free_blocks" => stats.free_blocks = Some(v as u64),
                k if k.starts_with("mount_") => stats.mount.push((intern(k), v as u64)),
                _ => {
                    let value = if v.fract() == 0.0 && v.abs() < 9.0e15 {
                        serde_json::json!(v as i64)
                    } else {
                        serde_json::json!(v)
                    };
                    extra.insert(key, value);
                }
            }
        }
        extra.insert("library".into(), serde_json::json!(self.library.path().display().to_string()));
        stats.extra = extra;
        stats
    }

    fn prefetch(&mut self, flash: &dyn Flash, lba: u64, sectors: u32) {
        if let Some(f) = self.library.functions.prefetch {
            // Never written through: `read_only` makes every mutating
            // trampoline fail before it would form a `&mut`.
            let mut ctx = CallCtx { flash: flash as *const (dyn Flash + '_) as *mut (dyn Flash + '_), read_only: true };
            let table = CFlash { ctx: &mut ctx as *mut CallCtx as *mut c_void, ..TABLE };
            // SAFETY: a live handle, a table valid for the call; the
            // function must not change state.
            unsafe { f(self.handle, &table, lba, sectors) }
        }
    }
}

/// The message a C function wrote (NUL-terminated within the buffer).
fn message(msg: &[c_char], default: &str) -> String {
    let bytes: Vec<u8> = msg.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    if bytes.is_empty() {
        default.to_string()
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A `&'static str` for a name learnt at run time (FTL names, mount stat
/// keys: few, and the same ones again and again).
fn intern(s: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == s) {
        return n;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}

// ---- The flash table -------------------------------------------------------

const TABLE: CFlash = CFlash {
    ctx: std::ptr::null_mut(),
    read: t_read,
    read_oob: t_read_oob,
    read_meta: t_read_meta,
    read_meta_at: t_read_meta_at,
    program: t_program,
    program_meta: t_program_meta,
    copyback: t_copyback,
    erase: t_erase,
    program_multi: t_program_multi,
    read_multi: t_read_multi,
    erase_multi: t_erase_multi,
    copyback_multi: t_copyback_multi,
    buf_alloc: t_buf_alloc,
    buf_free: t_buf_free,
    buf_copy: t_buf_copy,
    buf_zero: t_buf_zero,
    is_factory_bad: t_is_factory_bad,
    dram_budget_bytes: t_dram_budget_bytes,
    now_ns: t_now_ns,
    die_busy_until_ns: t_die_busy_until_ns,
    prefetch_page: t_prefetch_page,
    prefetch_meta: t_prefetch_meta,
};

/// The flash of the call in progress, to change; an error during a
/// prefetch hint.
///
/// # Safety
/// `ctx` is the table's `ctx` during the FTL call that passed it.
unsafe fn flash<'a>(ctx: *mut c_void) -> Result<&'a mut dyn Flash, FlashError> {
    let c = &*(ctx as *const CallCtx<'a>);
    if c.read_only {
        return Err(FlashError::InvalidArgument);
    }
    Ok(&mut *c.flash)
}

/// The flash of the call in progress, to query.
///
/// # Safety
/// As [`flash`].
unsafe fn shared<'a>(ctx: *mut c_void) -> &'a dyn Flash {
    &*(*(ctx as *const CallCtx<'a>)).flash
}

fn code(r: Result<(), FlashError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.code(),
    }
}

fn cause(c: u8) -> Result<Cause, FlashError> {
    Cause::ALL.get(usize::from(c)).copied().ok_or(FlashError::InvalidArgument)
}

/// # Safety
/// `p` points at `n` readable bytes, or `n` is 0.
unsafe fn bytes<'a>(p: *const u8, n: usize) -> Result<&'a [u8], FlashError> {
    match (p.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(FlashError::InvalidArgument),
        (false, n) => Ok(std::slice::from_raw_parts(p, n)),
    }
}

/// # Safety
/// `p` points at `n` writable bytes, or `n` is 0.
unsafe fn bytes_mut<'a>(p: *mut u8, n: usize) -> Result<&'a mut [u8], FlashError> {
    match (p.is_null(), n) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(FlashError::InvalidArgument),
        (false, n) => Ok(std::slice::from_raw_parts_mut(p, n)),
    }
}

/// # Safety
/// `p` points at `n` readable items, or `n` is 0.
unsafe fn items<'a, T>(p: *const T, n: usize) -> Result<&'a [T], FlashError> {
    match (p.is_null(), n) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(FlashError::InvalidArgument),
        (false, n) => Ok(std::slice::from_raw_parts(p, n)),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn t_read(
    ctx: *mut c_void,
    c: u8,
    page: u64,
    first_sector: u32,
    sectors: u32,
    dst: u64,
    dst_sector: u32,
    oob: *mut u8,
    oob_len: usize,
) -> i32 {
    progress::flash_op();
    code((|| {
        let oob = bytes_mut(oob, oob_len)?;
        flash(ctx)?.read(cause(c)?, PageAddr(page), first_sector, sectors, BufId::from_raw(dst), dst_sector, oob)
    })())
}

unsafe extern "C" fn t_read_oob(ctx: *mut c_void, c: u8, page: u64, oob: *mut u8, oob_len: usize) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.read_oob(cause(c)?, PageAddr(page), bytes_mut(oob, oob_len)?))())
}

unsafe extern "C" fn t_read_meta(
    ctx: *mut c_void,
    c: u8,
    page: u64,
    data: *mut u8,
    data_len: usize,
    oob: *mut u8,
    oob_len: usize,
) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.read_meta(cause(c)?, PageAddr(page), bytes_mut(data, data_len)?, bytes_mut(oob, oob_len)?))())
}

unsafe extern "C" fn t_read_meta_at(
    ctx: *mut c_void,
    c: u8,
    page: u64,
    offset: u32,
    data: *mut u8,
    data_len: usize,
) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.read_meta_at(cause(c)?, PageAddr(page), offset, bytes_mut(data, data_len)?))())
}

unsafe extern "C" fn t_program(
    ctx: *mut c_void,
    c: u8,
    page: u64,
    src: u64,
    src_sector: u32,
    oob: *const u8,
    oob_len: usize,
) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.program(cause(c)?, PageAddr(page), BufId::from_raw(src), src_sector, bytes(oob, oob_len)?))())
}

unsafe extern "C" fn t_program_meta(
    ctx: *mut c_void,
    c: u8,
    page: u64,
    data: *const u8,
    data_len: usize,
    oob: *const u8,
    oob_len: usize,
) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.program_meta(cause(c)?, PageAddr(page), bytes(data, data_len)?, bytes(oob, oob_len)?))())
}

unsafe extern "C" fn t_copyback(ctx: *mut c_void, c: u8, src: u64, dst: u64, oob: *const u8, oob_len: usize) -> i32 {
    progress::flash_op();
    code((|| {
        let oob = if oob.is_null() { None } else { Some(bytes(oob, oob_len)?) };
        flash(ctx)?.copyback(cause(c)?, PageAddr(src), PageAddr(dst), oob)
    })())
}

unsafe extern "C" fn t_erase(ctx: *mut c_void, c: u8, block: u64) -> i32 {
    progress::flash_op();
    code((|| flash(ctx)?.erase(cause(c)?, BlockAddr(block)))())
}

unsafe extern "C" fn t_program_multi(ctx: *mut c_void, c: u8, ops: *const CProgramOp, n: usize) -> i32 {
    progress::flash_op();
    code((|| {
        let mut converted = Vec::with_capacity(n);
        for o in items(ops, n)? {
            converted.push(ProgramOp {
                page: PageAddr(o.page),
                src: BufId::from_raw(o.src),
                src_sector: o.src_sector,
                oob: bytes(o.oob, o.oob_len)?,
            });
        }
        flash(ctx)?.program_multi(cause(c)?, &converted)
    })())
}

unsafe extern "C" fn t_read_multi(ctx: *mut c_void, c: u8, ops: *const CReadOp, n: usize) -> i32 {
    progress::flash_op();
    code((|| {
        let converted: Vec<ReadOp> = items(ops, n)?
            .iter()
            .map(|o| ReadOp { page: PageAddr(o.page), dst: BufId::from_raw(o.dst), dst_sector: o.dst_sector })
            .collect();
        flash(ctx)?.read_multi(cause(c)?, &converted)
    })())
}

unsafe extern "C" fn t_erase_multi(ctx: *mut c_void, c: u8, blocks: *const u64, n: usize) -> i32 {
    progress::flash_op();
    code((|| {
        let converted: Vec<BlockAddr> = items(blocks, n)?.iter().map(|&b| BlockAddr(b)).collect();
        flash(ctx)?.erase_multi(cause(c)?, &converted)
    })())
}

unsafe extern "C" fn t_copyback_multi(ctx: *mut c_void, c: u8, ops: *const CCopybackOp, n: usize) -> i32 {
    progress::flash_op();
    code((|| {
        let mut converted = Vec::with_capacity(n);
        for o in items(ops, n)? {
            let oob = if o.oob.is_null() { None } else { Some(bytes(o.oob, o.oob_len)?) };
            converted.push(CopybackOp { src: PageAddr(o.src), dst: PageAddr(o.dst), oob });
        }
        flash(ctx)?.copyback_multi(cause(c)?, &converted)
    })())
}

unsafe extern "C" fn t_buf_alloc(ctx: *mut c_void, sectors: u32, out: *mut u64) -> i32 {
    if out.is_null() {
        return FlashError::InvalidArgument.code();
    }
    match flash(ctx).and_then(|f| f.buf_alloc(sectors)) {
        Ok(b) => {
            *out = b.raw();
            0
        }
        Err(e) => e.code(),
    }
}

unsafe extern "C" fn t_buf_free(ctx: *mut c_void, buf: u64) {
    if let Ok(f) = flash(ctx) {
        f.buf_free(BufId::from_raw(buf))
    }
}

unsafe extern "C" fn t_buf_copy(ctx: *mut c_void, dst: u64, dst_sector: u32, src: u64, src_sector: u32, n: u32) -> i32 {
    code(flash(ctx).and_then(|f| f.buf_copy(BufId::from_raw(dst), dst_sector, BufId::from_raw(src), src_sector, n)))
}

unsafe extern "C" fn t_buf_zero(ctx: *mut c_void, dst: u64, dst_sector: u32, n: u32) -> i32 {
    code(flash(ctx).and_then(|f| f.buf_zero(BufId::from_raw(dst), dst_sector, n)))
}

unsafe extern "C" fn t_is_factory_bad(ctx: *mut c_void, block: u64) -> i32 {
    i32::from(shared(ctx).is_factory_bad(BlockAddr(block)))
}

unsafe extern "C" fn t_dram_budget_bytes(ctx: *mut c_void) -> u64 {
    shared(ctx).dram_budget_bytes()
}

unsafe extern "C" fn t_now_ns(ctx: *mut c_void, out: *mut u64) -> i32 {
    match (shared(ctx).now_ns(), out.is_null()) {
        (Some(t), false) => {
            *out = t;
            1
        }
        _ => 0,
    }
}

unsafe extern "C" fn t_die_busy_until_ns(ctx: *mut c_void, die: u32, out: *mut u64) -> i32 {
    match (shared(ctx).die_busy_until_ns(die), out.is_null()) {
        (Some(t), false) => {
            *out = t;
            1
        }
        _ => 0,
    }
}

unsafe extern "C" fn t_prefetch_page(ctx: *mut c_void, page: u64) {
    shared(ctx).prefetch_page(PageAddr(page))
}

unsafe extern "C" fn t_prefetch_meta(ctx: *mut c_void, page: u64, offset: u32) {
    shared(ctx).prefetch_meta(PageAddr(page), offset)
}
