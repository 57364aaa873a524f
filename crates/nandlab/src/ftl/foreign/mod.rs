//! FTLs from outside: a library written in C against `include/nandlab.h`,
//! loaded by path (`--ftl-lib PATH.so`, or `lib = "..."` in a device file's
//! `[ftl]` table) and run behind the [`Ftl`](super::Ftl) trait like any
//! Rust FTL.
//!
//! - This file: the `#[repr(C)]` types that mirror the header's structs,
//!   and the process-wide table of loaded libraries ([`load`] a library,
//!   then [`super::build`] finds it by its declared name `lib:NAME`).
//! - `library.rs`: opening the library (`libloading`), looking up every
//!   `nandlab_ftl_*` symbol, refusing another ABI version.
//! - `adapter.rs`: [`LibraryFtl`], the `Ftl` over the library's functions,
//!   and the `extern "C"` trampolines of the flash table, which turn each
//!   call back into a call on the `&mut dyn Flash` of the FTL call in
//!   progress.
//! - `progress.rs`: what the library FTL is doing right now (the request,
//!   the flash operations issued), published for `--isolate`'s report when
//!   the C code crashes.
//! - `drift_tests.rs`: the check that the header and these types agree,
//!   compiled by the system C compiler in `cargo test`.
//!
//! The message buffer every FTL function writes on failure is
//! [`MSG_BYTES`] bytes; an error code the header does not define is
//! reported with the code and the message (see [`adapter`]).

mod adapter;
mod library;
pub mod progress;

#[cfg(test)]
mod drift_tests;

pub use adapter::LibraryFtl;
pub use library::{Library, LibraryOption, ABI_VERSION};

use super::{Ftl, FtlEnv, FtlOptions};
use std::ffi::{c_char, c_void};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// `NANDLAB_MSG_BYTES`: the size of the message buffers passed to the FTL.
pub const MSG_BYTES: usize = 512;

/// `nandlab_geometry`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CGeometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    pub oob_size_bytes: u32,
    pub sector_size_bytes: u32,
    pub sectors_per_page: u32,
    pub bits_per_cell: u32,
    pub partial_programs_per_page: u32,
    pub dies: u32,
    pub planes: u32,
    pub blocks: u32,
    pub reserved: u32,
    pub pages: u64,
}

/// `nandlab_env`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CEnv {
    pub geometry: CGeometry,
    pub logical_sectors: u64,
    pub dram_budget_bytes: u64,
    pub seed: u64,
}

impl CEnv {
    pub fn new(env: &FtlEnv) -> CEnv {
        let g = &env.geometry;
        CEnv {
            geometry: CGeometry {
                channels: g.channels(),
                chips_per_channel: g.chips_per_channel(),
                dies_per_chip: g.dies_per_chip(),
                planes_per_die: g.planes_per_die(),
                blocks_per_plane: g.blocks_per_plane(),
                pages_per_block: g.pages_per_block(),
                page_size_bytes: g.page_size_bytes(),
                oob_size_bytes: g.oob_size_bytes(),
                sector_size_bytes: g.sector_size_bytes(),
                sectors_per_page: g.sectors_per_page(),
                bits_per_cell: g.cell_type().bits_per_cell(),
                partial_programs_per_page: g.partial_programs_per_page(),
                dies: g.dies(),
                planes: g.planes(),
                blocks: g.blocks(),
                reserved: 0,
                pages: g.pages(),
            },
            logical_sectors: env.logical_sectors,
            dram_budget_bytes: env.dram_budget_bytes,
            seed: env.seed,
        }
    }
}

/// `nandlab_option`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct COption {
    pub key: *const c_char,
    pub value: *const c_char,
}

/// `nandlab_info`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct CInfo {
    pub name: *const c_char,
    pub guarantee: u32,
    pub oob_bytes: u32,
}

/// `nandlab_request`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CRequest {
    pub id: u64,
    pub lba: u64,
    pub sectors: u32,
    pub reserved: u32,
    pub buf: u64,
}

/// `nandlab_program_op`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct CProgramOp {
    pub page: u64,
    pub src: u64,
    pub src_sector: u32,
    pub reserved: u32,
    pub oob: *const u8,
    pub oob_len: usize,
}

/// `nandlab_read_op`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct CReadOp {
    pub page: u64,
    pub dst: u64,
    pub dst_sector: u32,
    pub reserved: u32,
}

/// `nandlab_copyback_op`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct CCopybackOp {
    pub src: u64,
    pub dst: u64,
    pub oob: *const u8,
    pub oob_len: usize,
}

/// `nandlab_option_doc`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct COptionDoc {
    pub name: *const c_char,
    pub default_value: *const c_char,
    pub help: *const c_char,
}

/// `nandlab_stat`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct CStat {
    pub key: *const c_char,
    pub value: f64,
}

/// `nandlab_flash`: the flash as a table of function pointers.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct CFlash {
    pub ctx: *mut c_void,
    pub read: unsafe extern "C" fn(*mut c_void, u8, u64, u32, u32, u64, u32, *mut u8, usize) -> i32,
    pub read_oob: unsafe extern "C" fn(*mut c_void, u8, u64, *mut u8, usize) -> i32,
    pub read_meta: unsafe extern "C" fn(*mut c_void, u8, u64, *mut u8, usize, *mut u8, usize) -> i32,
    pub read_meta_at: unsafe extern "C" fn(*mut c_void, u8, u64, u32, *mut u8, usize) -> i32,
    pub program: unsafe extern "C" fn(*mut c_void, u8, u64, u64, u32, *const u8, usize) -> i32,
    pub program_meta: unsafe extern "C" fn(*mut c_void, u8, u64, *const u8, usize, *const u8, usize) -> i32,
    pub copyback: unsafe extern "C" fn(*mut c_void, u8, u64, u64, *const u8, usize) -> i32,
    pub erase: unsafe extern "C" fn(*mut c_void, u8, u64) -> i32,
    pub program_multi: unsafe extern "C" fn(*mut c_void, u8, *const CProgramOp, usize) -> i32,
    pub read_multi: unsafe extern "C" fn(*mut c_void, u8, *const CReadOp, usize) -> i32,
    pub erase_multi: unsafe extern "C" fn(*mut c_void, u8, *const u64, usize) -> i32,
    pub copyback_multi: unsafe extern "C" fn(*mut c_void, u8, *const CCopybackOp, usize) -> i32,
    pub buf_alloc: unsafe extern "C" fn(*mut c_void, u32, *mut u64) -> i32,
    pub buf_free: unsafe extern "C" fn(*mut c_void, u64),
    pub buf_copy: unsafe extern "C" fn(*mut c_void, u64, u32, u64, u32, u32) -> i32,
    pub buf_zero: unsafe extern "C" fn(*mut c_void, u64, u32, u32) -> i32,
    pub is_factory_bad: unsafe extern "C" fn(*mut c_void, u64) -> i32,
    pub dram_budget_bytes: unsafe extern "C" fn(*mut c_void) -> u64,
    pub now_ns: unsafe extern "C" fn(*mut c_void, *mut u64) -> i32,
    pub die_busy_until_ns: unsafe extern "C" fn(*mut c_void, u32, *mut u64) -> i32,
    pub prefetch_page: unsafe extern "C" fn(*mut c_void, u64),
    pub prefetch_meta: unsafe extern "C" fn(*mut c_void, u64, u32),
}

/// The libraries loaded in this process, by their FTL name (`lib:NAME`).
static LOADED: Mutex<Vec<(String, Arc<Library>)>> = Mutex::new(Vec::new());

/// Load the FTL library at `path`: open it, check its ABI version and
/// symbols, and make a test instance to learn its name (a failing
/// `create` is reported here, before any work). Returns the name under
/// which [`super::build`] finds it: `lib:NAME`, NAME being what the
/// library's `nandlab_ftl_info` declares.
///
/// Errors name the path and what is wrong (missing file, missing symbol,
/// another ABI version, `create`'s message).
pub fn load(path: &Path, env: &FtlEnv, options: &FtlOptions) -> Result<String, String> {
    let library = Arc::new(Library::open(path)?);
    let ftl = LibraryFtl::new(library.clone(), env, options)?;
    let name = format!("lib:{}", ftl.declared_name());
    drop(ftl);
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.retain(|(n, _)| *n != name);
    loaded.push((name.clone(), library));
    Ok(name)
}

/// Build an FTL from a loaded library by its name (`lib:NAME`); `None` if
/// no library of that name is loaded.
pub fn build(name: &str, env: &FtlEnv, options: &FtlOptions) -> Option<Result<Box<dyn Ftl>, String>> {
    let library = {
        let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        loaded.iter().find(|(n, _)| n == name).map(|(_, l)| l.clone())?
    };
    Some(LibraryFtl::new(library, env, options).map(|f| Box::new(f) as Box<dyn Ftl>))
}

/// The path of the loaded library named `name`, if any.
pub fn library_path(name: &str) -> Option<std::path::PathBuf> {
    let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.iter().find(|(n, _)| n == name).map(|(_, l)| l.path().to_path_buf())
}

/// Whether the loaded library named `name` declares one instance per
/// process (`nandlab_ftl_single_instance`): runs that build several
/// instances at once on threads (crash campaigns) must use one thread.
pub fn single_instance(name: &str) -> bool {
    let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.iter().any(|(n, l)| n == name && l.single_instance())
}

/// [`load`] the library at `path` for a device (its geometry, capacity,
/// DRAM and FTL options; the test instance's seed is 0).
pub fn load_for(config: &crate::config::Config, path: &Path) -> Result<String, String> {
    let env = FtlEnv {
        geometry: config.geometry.clone(),
        logical_sectors: config.logical_sectors,
        dram_budget_bytes: config.dram_budget_bytes,
        seed: 0,
    };
    load(path, &env, &config.ftl_options)
}

/// What `nandlab ftls --ftl-lib` shows of a library FTL.
#[derive(Clone, Debug)]
pub struct LibraryDescription {
    /// `lib:NAME`, NAME as the library declares it.
    pub name: String,
    pub path: std::path::PathBuf,
    /// `nandlab_ftl_abi_version()` (this nandlab refuses any other than
    /// [`ABI_VERSION`]).
    pub abi_version: u32,
    /// The crash guarantee it claims (`baseline`, `optr`).
    pub guarantee: &'static str,
    /// OOB bytes per page it writes.
    pub oob_bytes: u32,
    /// It exports `nandlab_ftl_single_instance`.
    pub single_instance: bool,
    /// Its options (`nandlab_ftl_options`), or `None` when it does not
    /// list them.
    pub options: Option<Vec<LibraryOption>>,
}

/// Open the library at `path`, make a test instance for a device (as
/// [`load_for`] does; a failing `create` is the error) and describe it.
pub fn describe_for(config: &crate::config::Config, path: &Path) -> Result<LibraryDescription, String> {
    let library = Arc::new(Library::open(path)?);
    let env = FtlEnv {
        geometry: config.geometry.clone(),
        logical_sectors: config.logical_sectors,
        dram_budget_bytes: config.dram_budget_bytes,
        seed: 0,
    };
    let ftl = LibraryFtl::new(library.clone(), &env, &config.ftl_options)?;
    let info = ftl.info();
    Ok(LibraryDescription {
        name: info.name.to_string(),
        path: path.to_path_buf(),
        abi_version: library.abi_version(),
        guarantee: match info.guarantee {
            super::Guarantee::Baseline => "baseline",
            super::Guarantee::Optr => "optr",
        },
        oob_bytes: info.oob_bytes,
        single_instance: library.single_instance(),
        options: library.options().map(<[LibraryOption]>::to_vec),
    })
}
