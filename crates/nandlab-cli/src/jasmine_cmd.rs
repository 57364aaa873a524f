//! Jasmine OpenSSD firmware: `nandlab jasmine build DIR -o ftl.so`, and
//! `--ftl jasmine:DIR` on `stress`, `perf` and `crash`, which builds the
//! same library (cached) and loads it as `--ftl-lib` would.
//!
//! A firmware directory holds the FTL as written for the board: `ftl.c`,
//! `ftl.h` and any sibling `.c` files. They are compiled, unmodified,
//! with the system C compiler (`$CC`, default `cc`) together with
//! nandlab's Jasmine layer (`compat/jasmine/`: the board's headers and
//! their implementation over `include/nandlab.h`), whose sources are
//! embedded in this binary. The board's geometry is fixed at compile
//! time, so the library is built for one device: the one `--preset` /
//! `--config` describes (default `vst-jasmine`); the layer refuses to run
//! on another (docs/jasmine.md).
//!
//! Flags: [`CFLAGS`] and [`LDFLAGS`]. `-Wl,-z,defs` makes a call to a
//! board function the layer does not implement a build error naming the
//! function; `-z now -z relro` leave only the firmware's own data
//! writable, which the layer resets at every power-on.
//!
//! The cache (`--ftl jasmine:DIR`) lives in `$XDG_CACHE_HOME/nandlab/
//! jasmine/` (default `~/.cache/nandlab/jasmine/`), one `HASH.so` per
//! SHA-256 of the layer's sources, the firmware directory's `.c` and `.h`
//! files, each firmware source as preprocessed (so files it includes from
//! outside the directory count too), the compiler's name and every flag.

use crate::exit::input_error;
use clap::{Args, Subcommand};
use nandlab::config::Config;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The layer's sources, by their path under `compat/jasmine/`.
const LAYER: &[(&str, &str)] = &[
    ("include/jasmine.h", include_str!("../../../compat/jasmine/include/jasmine.h")),
    ("include/nand.h", include_str!("../../../compat/jasmine/include/nand.h")),
    ("include/flash.h", include_str!("../../../compat/jasmine/include/flash.h")),
    ("include/mem_util.h", include_str!("../../../compat/jasmine/include/mem_util.h")),
    ("include/target.h", include_str!("../../../compat/jasmine/include/target.h")),
    ("include/peri.h", include_str!("../../../compat/jasmine/include/peri.h")),
    ("include/sdram.h", include_str!("../../../compat/jasmine/include/sdram.h")),
    ("include/rom.h", include_str!("../../../compat/jasmine/include/rom.h")),
    ("include/bank.h", include_str!("../../../compat/jasmine/include/bank.h")),
    ("include/misc.h", include_str!("../../../compat/jasmine/include/misc.h")),
    ("include/uart.h", include_str!("../../../compat/jasmine/include/uart.h")),
    ("include/sata.h", include_str!("../../../compat/jasmine/include/sata.h")),
    ("include/sata_cmd.h", include_str!("../../../compat/jasmine/include/sata_cmd.h")),
    ("include/sata_registers.h", include_str!("../../../compat/jasmine/include/sata_registers.h")),
    ("include/shashtbl.h", include_str!("../../../compat/jasmine/include/shashtbl.h")),
    ("include/nandlab.h", include_str!("../../../include/nandlab.h")),
    ("src/layer.h", include_str!("../../../compat/jasmine/src/layer.h")),
    ("src/board.c", include_str!("../../../compat/jasmine/src/board.c")),
    ("src/flash.c", include_str!("../../../compat/jasmine/src/flash.c")),
    ("src/mem.c", include_str!("../../../compat/jasmine/src/mem.c")),
    ("src/shashtbl.c", include_str!("../../../compat/jasmine/src/shashtbl.c")),
];

/// Compiler flags: optimised, C with GNU extensions (the firmware uses
/// them), position-independent for a shared library, `-fcommon` for
/// tentative definitions in headers as the board's old toolchain allowed.
pub const CFLAGS: &[&str] = &["-O2", "-std=gnu11", "-fPIC", "-fcommon", "-fno-strict-aliasing", "-w"];
/// Linker flags (see the module docs).
pub const LDFLAGS: &[&str] = &["-shared", "-Wl,-z,defs", "-Wl,-z,now", "-Wl,-z,relro"];

/// Lines of compiler output shown when a build fails.
const ERROR_LINES: usize = 20;

#[derive(Subcommand, Debug)]
pub enum JasmineCommand {
    /// Build a Jasmine OpenSSD firmware directory (ftl.c, ftl.h, sibling .c)
    /// against nandlab's Jasmine layer into an FTL library for --ftl-lib.
    Build(BuildArgs),
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The firmware directory.
    pub dir: PathBuf,
    /// The library to write.
    #[arg(short = 'o', long = "output", value_name = "PATH.so")]
    pub output: PathBuf,
    /// The device the firmware is built for (default: vst-jasmine).
    #[arg(long, conflicts_with = "config")]
    pub preset: Option<String>,
    /// A device configuration file (TOML) the firmware is built for.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(command: JasmineCommand) -> ExitCode {
    match command {
        JasmineCommand::Build(args) => {
            let config = match (&args.preset, &args.config) {
                (_, Some(f)) => Config::load(f).map_err(|e| e.to_string()),
                (p, None) => Config::preset(p.as_deref().unwrap_or("vst-jasmine")).map_err(|e| e.to_string()),
            };
            let result = config.and_then(|c| build(&args.dir, &c, &args.output));
            match result {
                Ok(()) => {
                    println!("built {} from {}", args.output.display(), args.dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => input_error(e),
            }
        }
    }
}

/// The board's geometry as the layer's -D options, from a device; errors
/// name the field a Jasmine board cannot have.
fn defines(dir: &Path, config: &Config) -> Result<Vec<String>, String> {
    let g = &config.geometry;
    let banks = g.channels() * g.chips_per_channel() * g.dies_per_chip();
    let fail = |what: String| Err(format!("{}: a Jasmine board cannot have {what} ({})", config.name, dir.display()));
    if g.planes_per_die() != 1 {
        return fail(format!("planes_per_die = {} (nandlab's Jasmine is single-plane: 1)", g.planes_per_die()));
    }
    if !(1..=32).contains(&banks) {
        return fail(format!("{banks} banks (channels x chips x dies: 1 to 32)"));
    }
    if g.sector_size_bytes() != 512 {
        return fail(format!("sector_size_bytes = {} (512)", g.sector_size_bytes()));
    }
    let spp = g.sectors_per_page();
    if spp < 2 || spp % 2 != 0 {
        return fail(format!("{spp} sectors per page (an even number: a page is two physical pages)"));
    }
    if g.blocks_per_plane() < 4 || g.blocks_per_plane() > 65535 {
        return fail(format!("blocks_per_plane = {} (4 to 65535)", g.blocks_per_plane()));
    }
    if u64::from(g.blocks_per_plane()) * u64::from(g.pages_per_block()) > u64::from(u32::MAX / 2) {
        return fail("more than 2^31 pages per bank".to_string());
    }
    if config.logical_sectors >= u64::from(u32::MAX) {
        return fail(format!("{} logical sectors (the firmware counts them in 32 bits)", config.logical_sectors));
    }
    // The board's spare blocks per bank (56 of 4152) kept in proportion;
    // the firmware's capacity is the device's.
    let spare = u64::from(g.blocks_per_plane()) * 56 / 4152;
    let name = dir.file_name().map_or_else(|| "jasmine".to_string(), |n| n.to_string_lossy().into_owned());
    let name: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c)).collect();
    Ok(vec![
        format!("-DJASMINE_NUM_BANKS={banks}"),
        format!("-DJASMINE_VBLKS_PER_BANK={}", g.blocks_per_plane()),
        format!("-DJASMINE_PAGES_PER_VBLK={}", g.pages_per_block()),
        format!("-DJASMINE_SECTORS_PER_PAGE={spp}"),
        format!("-DJASMINE_SPARE_VBLKS_PER_BANK={spare}"),
        format!("-DJASMINE_NUM_LSECTORS={}", config.logical_sectors),
        format!("-DJASMINE_NAME=\"{name}\""),
    ])
}

/// The firmware's files: (`.c` sources, every `.c` and `.h`), sorted.
fn firmware_files(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    let shown = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{shown}: cannot read the firmware directory: {e}"))?;
    let mut all: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "c" || x == "h"))
        .collect();
    all.sort();
    if !all.iter().any(|p| p.file_name().is_some_and(|n| n == "ftl.c")) {
        return Err(format!(
            "{shown}: no ftl.c (a Jasmine firmware directory holds ftl.c, ftl.h and any sibling .c files)"
        ));
    }
    let sources = all.iter().filter(|p| p.extension().is_some_and(|x| x == "c")).cloned().collect();
    Ok((sources, all))
}

fn compiler() -> String {
    std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| "cc".to_string())
}

/// Build the firmware in `dir` for `config`'s device into `output`.
pub fn build(dir: &Path, config: &Config, output: &Path) -> Result<(), String> {
    let defines = defines(dir, config)?;
    let (sources, _) = firmware_files(dir)?;
    let layer = write_layer()?;
    let cc = compiler();
    let mut command = Command::new(&cc);
    command
        .args(CFLAGS)
        .args(&defines)
        .arg("-I")
        .arg(layer.path().join("include"))
        .arg("-I")
        .arg(dir)
        .args(LAYER.iter().filter(|(p, _)| p.ends_with(".c")).map(|(p, _)| layer.path().join(p)))
        .args(&sources)
        .arg("-o")
        .arg(output)
        .args(LDFLAGS);
    let out = command.output().map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(explain_failure(dir, &cc, &String::from_utf8_lossy(&out.stderr)))
}

/// The layer's sources written to a fresh temporary directory.
fn write_layer() -> Result<tempfile::TempDir, String> {
    let layer = tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    for (path, text) in LAYER {
        let p = layer.path().join(path);
        std::fs::create_dir_all(p.parent().expect("layer paths have a directory"))
            .and_then(|()| std::fs::write(&p, text))
            .map_err(|e| format!("cannot write the Jasmine layer to {}: {e}", p.display()))?;
    }
    Ok(layer)
}

/// Every source of the build (the layer's and the firmware's) as the compiler sees it (`cc -E -P`, with the
/// layer's headers and the device's defines), so the cache key covers
/// each file a source includes wherever it lives (`#include
/// "../common/x.c"`, a header in a sibling tree, a system header) and the
/// compiler's own predefined macros. The temporary layer directory's name,
/// which `__FILE__` may expand to, is replaced by a fixed token. `None`
/// when the compiler cannot preprocess a source: the build then runs and
/// reports the error.
fn preprocessed_sources(dir: &Path, sources: &[PathBuf], defines: &[String]) -> Result<Option<Vec<u8>>, String> {
    let layer = write_layer()?;
    let layer_name = layer.path().to_string_lossy().into_owned();
    let cc = compiler();
    let mut all = Vec::new();
    // The layer's own sources include the firmware's ftl.h too.
    let layer_sources = LAYER.iter().filter(|(p, _)| p.ends_with(".c")).map(|(p, _)| layer.path().join(p));
    for source in layer_sources.chain(sources.iter().cloned()) {
        let out = Command::new(&cc)
            .args(CFLAGS)
            .args(defines)
            .arg("-I")
            .arg(layer.path().join("include"))
            .arg("-I")
            .arg(dir)
            .args(["-E", "-P"])
            .arg(&source)
            .output()
            .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
        if !out.status.success() {
            return Ok(None);
        }
        all.extend_from_slice(String::from_utf8_lossy(&out.stdout).replace(&layer_name, "<layer>").as_bytes());
        all.push(0);
    }
    Ok(Some(all))
}

/// What a failed build says: the board functions the layer lacks, or the
/// compiler's first errors.
fn explain_failure(dir: &Path, cc: &str, stderr: &str) -> String {
    let mut missing: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split("undefined reference to `").nth(1))
        .filter_map(|rest| rest.split('\'').next())
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        return format!(
            "{}: the firmware calls {} that nandlab's Jasmine layer does not implement: {}",
            dir.display(),
            if missing.len() == 1 { "a board function" } else { "board functions" },
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let first: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).take(ERROR_LINES).collect();
    format!(
        "{}: the firmware does not compile against nandlab's Jasmine layer ({cc}); its first errors:\n{}",
        dir.display(),
        first.join("\n")
    )
}

/// Where built libraries are cached.
fn cache_dir() -> Result<PathBuf, String> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => {
                return Err("--ftl jasmine: neither XDG_CACHE_HOME nor HOME is set (the build cache lives there)".into())
            }
        },
    };
    Ok(base.join("nandlab").join("jasmine"))
}

/// The library for `dir` on `config`'s device, built unless the cache has
/// it (by the SHA-256 of everything that goes into the build).
pub fn cached_build(dir: &Path, config: &Config) -> Result<PathBuf, String> {
    let defines = defines(dir, config)?;
    let (sources, files) = firmware_files(dir)?;
    let Some(preprocessed) = preprocessed_sources(dir, &sources, &defines)? else {
        // Not even the preprocessor accepts it: build to report why.
        let scratch = tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        build(dir, config, &scratch.path().join("ftl.so"))?;
        return Err(format!("{}: the C preprocessor fails on the firmware but the build does not", dir.display()));
    };
    let mut hash = Sha256::new();
    hash.update(&preprocessed);
    for (path, text) in LAYER {
        hash.update(path.as_bytes());
        hash.update([0]);
        hash.update(text.as_bytes());
        hash.update([0]);
    }
    for f in &files {
        let bytes = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
        hash.update(f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default().as_bytes());
        hash.update([0]);
        hash.update(&bytes);
        hash.update([0]);
    }
    for flag in CFLAGS.iter().chain(LDFLAGS).map(|s| s.to_string()).chain(defines).chain([compiler()]) {
        hash.update(flag.as_bytes());
        hash.update([0]);
    }
    let key: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let cache = cache_dir()?;
    let path = cache.join(format!("{key}.so"));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&cache).map_err(|e| format!("cannot create the build cache {}: {e}", cache.display()))?;
    // Build beside the final name, then rename: a concurrent or interrupted
    // build never leaves a half-written library under the key.
    let partial = tempfile::Builder::new()
        .prefix(".building-")
        .suffix(".so")
        .tempfile_in(&cache)
        .map_err(|e| format!("cannot write in the build cache {}: {e}", cache.display()))?;
    build(dir, config, partial.path())?;
    partial.persist(&path).map_err(|e| format!("cannot store {} in the build cache: {e}", path.display()))?;
    eprintln!("note: built Jasmine firmware {} into {}", dir.display(), path.display());
    Ok(path)
}
