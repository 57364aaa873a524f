//! `nandlab presets`, `nandlab ftls`, `nandlab rules`: what the library ships, listed;
//! `nandlab ftls --ftl-lib PATH.so` (or `--ftl jasmine:DIR`): what a library FTL declares.

use clap::Args;
use nandlab::config::{Config, PRESETS};
use nandlab::ftl;
use nandlab::util::assignment;
use nandlab::violation::Rule;
use std::path::PathBuf;
use std::process::ExitCode;

/// `nandlab ftls` options: without them, the FTLs built into nandlab.
#[derive(Args, Debug)]
pub struct FtlsArgs {
    /// Describe a library FTL built against include/nandlab.h: its declared
    /// name, ABI version, crash guarantee and options.
    #[arg(long = "ftl-lib", value_name = "PATH.so", conflicts_with = "ftl")]
    pub ftl_lib: Option<PathBuf>,
    /// `jasmine:DIR`: build a Jasmine OpenSSD firmware tree for the device
    /// (cached, as `--ftl jasmine:DIR` of a run) and describe it.
    #[arg(long, value_name = "jasmine:DIR")]
    pub ftl: Option<String>,
    /// The device the library's test instance is created for (default:
    /// `tiny`, or `vst-jasmine` with --ftl jasmine:DIR).
    #[arg(long, conflicts_with = "config")]
    pub preset: Option<String>,
    /// A device configuration file (TOML) instead of --preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An option for the test instance, KEY=VALUE (repeatable).
    #[arg(long = "ftl-opt", value_name = "KEY=VALUE")]
    pub ftl_opt: Vec<String>,
}

/// The device presets: name, description and source.
pub fn presets() -> ExitCode {
    for (name, _) in PRESETS {
        match Config::preset(name) {
            Ok(c) => println!("{name:16} {}\n{:16} source: {}", c.description, "", c.source),
            Err(e) => println!("{name:16} (invalid: {e})"),
        }
    }
    ExitCode::SUCCESS
}

/// The FTLs and their options; with `--ftl-lib`/`--ftl jasmine:DIR`, the
/// library's declaration (exit 2 when it cannot be loaded).
pub fn ftls(args: &FtlsArgs) -> ExitCode {
    if args.ftl_lib.is_some() || args.ftl.is_some() {
        return match describe_library(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => crate::exit::input_error(e),
        };
    }
    for d in ftl::registry() {
        println!("{} — {}", d.name, d.summary);
        for o in d.options {
            println!("    {:36} default {:10} {}", o.name, o.default, o.help);
        }
    }
    ExitCode::SUCCESS
}

/// Load the library `args` name for its device and print what it declares.
fn describe_library(args: &FtlsArgs) -> Result<(), String> {
    let jasmine = match &args.ftl {
        Some(f) => Some(f.strip_prefix("jasmine:").ok_or_else(|| {
            format!("--ftl {f}: `nandlab ftls` describes a library FTL: give --ftl jasmine:DIR or --ftl-lib PATH.so")
        })?),
        None => None,
    };
    let mut config = match (&args.preset, &args.config) {
        (Some(p), _) => Config::preset(p),
        (None, Some(f)) => Config::load(f),
        (None, None) => Config::preset(if jasmine.is_some() { "vst-jasmine" } else { "tiny" }),
    }
    .map_err(|e| e.to_string())?;
    config.ftl_options.clear();
    let lib = match (jasmine, &args.ftl_lib) {
        (Some(dir), _) => crate::jasmine_cmd::cached_build(std::path::Path::new(dir), &config)
            .map_err(|e| format!("--ftl jasmine:{e}"))?,
        (None, Some(lib)) => lib.clone(),
        (None, None) => unreachable!("checked by the caller"),
    };
    for a in &args.ftl_opt {
        let (key, value) = assignment::parse_toml(a).map_err(|e| format!("--ftl-opt {e}"))?;
        config.ftl_options.insert(key, value);
    }
    let how = if jasmine.is_some() { "--ftl jasmine:" } else { "--ftl-lib " };
    let d = ftl::foreign::describe_for(&config, &lib).map_err(|e| format!("{how}{e}"))?;
    println!("{} — library FTL, {}", d.name, d.path.display());
    println!("    ABI version {} (this nandlab implements {})", d.abi_version, ftl::foreign::ABI_VERSION);
    println!("    crash guarantee {}, {} OOB bytes per page", d.guarantee, d.oob_bytes);
    println!("    test instance created for device `{}`", config.name);
    if d.single_instance {
        println!("    one instance per process (nandlab_ftl_single_instance): crash campaigns run on one thread");
    }
    match &d.options {
        None => println!("    options: not listed (the library does not export nandlab_ftl_options)"),
        Some(o) if o.is_empty() => println!("    options: none"),
        Some(o) => {
            for o in o {
                println!("    {:36} default {:10} {}", o.name, o.default_value, o.help);
            }
        }
    }
    Ok(())
}

/// The rules nandlab checks, their group and default severity.
pub fn rules() -> ExitCode {
    for r in Rule::ALL {
        let group = if r.is_nand_rule() {
            "nand"
        } else if r.is_media_rule() {
            "media"
        } else {
            "oracle"
        };
        println!(
            "{:22} {:6} default {:6} {}",
            r.name(),
            group,
            format!("{:?}", r.default_severity()).to_lowercase(),
            r.description()
        );
    }
    ExitCode::SUCCESS
}
