//! Opening an FTL library: `dlopen` through `libloading`, every
//! `nandlab_ftl_*` symbol looked up at once, and the ABI version checked
//! before anything else is called.

use super::{CEnv, CFlash, CInfo, COption, COptionDoc, CRequest, CStat};
use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};

/// `NANDLAB_ABI_VERSION`: the version of `include/nandlab.h` this build
/// implements.
pub const ABI_VERSION: u32 = 1;

/// The library's functions (see the header for each).
#[derive(Copy, Clone)]
pub(super) struct Functions {
    pub create: unsafe extern "C" fn(*const CEnv, *const COption, usize, *mut c_char, usize) -> *mut c_void,
    pub destroy: unsafe extern "C" fn(*mut c_void),
    pub info: unsafe extern "C" fn(*const c_void, *mut CInfo),
    pub format: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    pub mount: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    pub read: unsafe extern "C" fn(*mut c_void, *const CFlash, *const CRequest, *mut c_char, usize) -> i32,
    pub write: unsafe extern "C" fn(*mut c_void, *const CFlash, *const CRequest, *mut u32, *mut c_char, usize) -> i32,
    pub trim: unsafe extern "C" fn(*mut c_void, *const CFlash, u64, u64, *mut c_char, usize) -> i32,
    pub flush: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    pub emergency_flush: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    pub idle: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut u32, *mut c_char, usize) -> i32,
    pub shutdown: unsafe extern "C" fn(*mut c_void, *const CFlash, *mut c_char, usize) -> i32,
    pub stats: unsafe extern "C" fn(*const c_void, *mut CStat, usize) -> usize,
    /// Optional.
    pub prefetch: Option<unsafe extern "C" fn(*mut c_void, *const CFlash, u64, u32)>,
}

/// One option a library lists (`nandlab_ftl_options`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryOption {
    pub name: String,
    /// TOML text of the default.
    pub default_value: String,
    pub help: String,
}

/// An opened FTL library. It stays loaded as long as an FTL built from it
/// lives (each [`super::LibraryFtl`] holds it).
pub struct Library {
    path: PathBuf,
    pub(super) functions: Functions,
    /// The library exports `nandlab_ftl_single_instance` returning
    /// nonzero: its instances share process-wide state (a Jasmine
    /// firmware's globals and board memory), so only one of them may run
    /// at a time and never two on different threads.
    single_instance: bool,
    /// What `nandlab_ftl_options` lists (`None` without the symbol).
    options: Option<Vec<LibraryOption>>,
    abi_version: u32,
    _library: libloading::Library,
}

impl Library {
    /// Open the library at `path`. Errors name the path and what is
    /// missing or wrong.
    pub fn open(path: &Path) -> Result<Library, String> {
        let shown = path.display();
        if !path.exists() {
            return Err(format!("{shown}: no such file"));
        }
        // A bare file name would make dlopen search the system paths.
        let absolute = if path.is_absolute() || path.components().count() > 1 {
            path.to_path_buf()
        } else {
            Path::new(".").join(path)
        };
        // SAFETY: loading a library runs its initialisers; that is what
        // the user asked for by naming it.
        let library = unsafe { libloading::Library::new(&absolute) }
            .map_err(|e| format!("{shown}: cannot load the library: {e}"))?;
        let version = {
            // SAFETY: the header declares `uint32_t nandlab_ftl_abi_version(void)`.
            let f = unsafe { library.get::<unsafe extern "C" fn() -> u32>(b"nandlab_ftl_abi_version\0") }
                .map_err(|_| missing(path, "nandlab_ftl_abi_version"))?;
            // SAFETY: as declared.
            unsafe { f() }
        };
        if version != ABI_VERSION {
            return Err(format!(
                "{shown}: the library was built for nandlab ABI version {version}, \
                 but this nandlab implements ABI version {ABI_VERSION} (rebuild it against this include/nandlab.h)"
            ));
        }
        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the type is the header's declaration of the symbol
                // (checked against the header in the drift test).
                let s = unsafe { library.get(concat!($name, "\0").as_bytes()) }.map_err(|_| missing(path, $name))?;
                *s
            }};
        }
        let functions = Functions {
            create: symbol!("nandlab_ftl_create"),
            destroy: symbol!("nandlab_ftl_destroy"),
            info: symbol!("nandlab_ftl_info"),
            format: symbol!("nandlab_ftl_format"),
            mount: symbol!("nandlab_ftl_mount"),
            read: symbol!("nandlab_ftl_read"),
            write: symbol!("nandlab_ftl_write"),
            trim: symbol!("nandlab_ftl_trim"),
            flush: symbol!("nandlab_ftl_flush"),
            emergency_flush: symbol!("nandlab_ftl_emergency_flush"),
            idle: symbol!("nandlab_ftl_idle"),
            shutdown: symbol!("nandlab_ftl_shutdown"),
            stats: symbol!("nandlab_ftl_stats"),
            // SAFETY: the header's declaration of the optional symbol.
            prefetch: unsafe { library.get(b"nandlab_ftl_prefetch\0") }.ok().map(|s| *s),
        };
        let single_instance = {
            // SAFETY: the header's declaration of the optional symbol.
            let f = unsafe { library.get::<unsafe extern "C" fn() -> u32>(b"nandlab_ftl_single_instance\0") }.ok();
            // SAFETY: as declared.
            f.is_some_and(|f| unsafe { f() } != 0)
        };
        let options = {
            // SAFETY: the header's declaration of the optional symbol.
            let f = unsafe {
                library.get::<unsafe extern "C" fn(*mut usize) -> *const COptionDoc>(b"nandlab_ftl_options\0")
            }
            .ok();
            // SAFETY: as declared: a static table of *count entries.
            f.map(|f| unsafe { option_table(*f) })
        };
        Ok(Library {
            path: path.to_path_buf(),
            functions,
            single_instance,
            options,
            abi_version: version,
            _library: library,
        })
    }

    /// The options the library lists, if it exports `nandlab_ftl_options`.
    pub fn options(&self) -> Option<&[LibraryOption]> {
        self.options.as_deref()
    }

    /// What `nandlab_ftl_abi_version` returned.
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }

    /// Whether only one instance may exist at a time (see the field).
    pub fn single_instance(&self) -> bool {
        self.single_instance
    }

    /// The path the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn missing(path: &Path, symbol: &str) -> String {
    format!(
        "{}: the library does not export `{symbol}` (an FTL library exports every \
         nandlab_ftl_* function of include/nandlab.h)",
        path.display()
    )
}

/// The library's option table, copied out (NULL strings read as empty).
///
/// # Safety
/// `f` is the library's `nandlab_ftl_options`: it returns NULL or a table
/// of `*count` entries whose strings are NUL-terminated.
unsafe fn option_table(f: unsafe extern "C" fn(*mut usize) -> *const COptionDoc) -> Vec<LibraryOption> {
    let mut count = 0usize;
    // SAFETY: the caller's contract.
    let table = unsafe { f(&mut count) };
    if table.is_null() {
        return Vec::new();
    }
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated string in static storage (the header).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: `count` entries at `table` (the header).
    let docs = unsafe { std::slice::from_raw_parts(table, count) };
    docs.iter()
        .map(|d| LibraryOption { name: text(d.name), default_value: text(d.default_value), help: text(d.help) })
        .collect()
}
