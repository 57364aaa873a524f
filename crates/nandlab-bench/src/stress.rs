//! `nandlab bench stress`: VST's workloads, each run a separate `nandlab
//! stress` process whose JSON report is read back.
//!
//! By default `bench stress` runs every FTL configuration of the zoo (see
//! [`ZOO`]) on its two workloads and prints nandlab's figures only. With
//! `--vst PATH` it measures a locally built VST (`vst-jasmine`, with an FTL
//! shared object) on the same requests in the same run: each workload is
//! written once as a VST trace ([`nandlab::workload::trace::vst`]), VST's
//! geometry is checked against the preset's by a run on an empty trace, and
//! then nandlab and VST runs alternate, each measured as a child process by
//! `wait4` (user + system CPU time, peak RSS). Both tools' host bytes are
//! checked to be the trace's. The medians of both, in host GB (10^9 bytes
//! read + written) per CPU-second, and their ratios are printed; no VST
//! figure is printed that was not measured in the run. VST is always given
//! `-c` (replay the trace once): without it, VST repeats the trace until
//! its write bound, forever on a trace with no writes.

use crate::html::{fixed, BenchTable};
use crate::{median, report_of, run_measured, Measured, Verdict};
use nandlab::config::Config;
use nandlab::workload::synthetic::{SyntheticSpec, SyntheticWorkload};
use nandlab::workload::trace::vst::{VstTraceCounts, VstTraceWriter};
use nandlab::workload::Workload;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The standard stress workloads: (name, description, `nandlab stress`
/// arguments; `--write_size` is added from `--write-size`).
pub const STRESS_WORKLOADS: [(&str, &str, &str); 2] = [
    (
        "vst-rand",
        "uniform random, 8 KiB aligned, 8-64 KiB requests, 20 % reads, seed 12345",
        "--rw randrw --rwmixread 20 --bsrange 8k-64k --blockalign 8k --fsync 0 --trim_percent 0 --seed 12345",
    ),
    ("vst-seq", "sequential 64 KiB writes", "--rw write --bs 64k --fsync 0 --trim_percent 0 --seed 12345"),
];

/// One FTL configuration of the bench.
pub struct ZooEntry {
    pub label: &'static str,
    pub ftl: &'static str,
    pub args: &'static [&'static str],
    /// The closest FTL shipped with VST.
    pub counterpart: &'static str,
    /// Why this counterpart.
    pub why: &'static str,
}

/// The configurations `bench stress` runs by default.
pub const ZOO: [ZooEntry; 6] = [
    ZooEntry {
        label: "page",
        ftl: "page",
        args: &[],
        counterpart: "VST's greedy FTL",
        why: "page mapping with greedy GC and the whole map in DRAM, as Jasmine's greedy FTL",
    },
    ZooEntry {
        label: "page-dac",
        ftl: "page",
        args: &["--hot-cold", "dac:4", "--gc-policy", "cost-benefit"],
        counterpart: "VST's DAC FTL",
        why: "DAC's regions with cost-benefit cleaning over page mapping, as Jasmine's DAC FTL",
    },
    ZooEntry {
        label: "dftl",
        ftl: "dftl",
        args: &[],
        counterpart: "VST's greedy FTL",
        why: "page mapping with greedy GC; DFTL adds the map cache (2 MiB here, 6 % of the table) \
              — no OpenSSD FTL caches its map, so the greedy FTL is the closest",
    },
    ZooEntry {
        label: "dftl-whole-table",
        ftl: "dftl",
        args: &["--cmt-bytes", "100%"],
        counterpart: "VST's greedy FTL",
        why: "DFTL given the DRAM Jasmine's greedy FTL has: the same map in DRAM",
    },
    ZooEntry {
        label: "hybrid",
        ftl: "hybrid",
        args: &[],
        counterpart: "VST's FASTer FTL",
        why: "FAST's log blocks and merges are FASTer's (without its isolation area)",
    },
    ZooEntry {
        label: "block",
        ftl: "block",
        args: &[],
        counterpart: "VST's FASTer FTL",
        why: "no OpenSSD FTL maps whole blocks; FASTer's data blocks are block-mapped, so it is the closest",
    },
];

/// What `bench stress` was asked to do.
pub struct StressBenchArgs<'a> {
    /// The `nandlab` executable to run.
    pub nandlab: PathBuf,
    /// The workload of [`STRESS_WORKLOADS`] to run, by name (`None`: both).
    pub workload: Option<String>,
    /// Runs per workload, at least 1.
    pub runs: usize,
    /// Configurations of the [`ZOO`] by label or FTL name (none: the default ones).
    pub ftls: Vec<String>,
    pub preset: String,
    /// Bytes each workload writes (`--write_size` of the runs).
    pub write_size: String,
    /// A locally built VST and its FTL shared object.
    pub vst: Option<PathBuf>,
    pub vst_ftl: Option<PathBuf>,
    /// An FTL library (`--ftl-lib`): measured as `c-page` beside the
    /// Rust `page` FTL, runs interleaved, with the ratio of their medians.
    pub ftl_lib: Option<PathBuf>,
    /// A Jasmine firmware directory (`--jasmine`): measured as the
    /// `jasmine` configuration ([`jasmine_entry`]) instead of the zoo's.
    pub jasmine: Option<PathBuf>,
    /// Arguments added to every `nandlab stress` run.
    pub extra: Vec<String>,
    /// How `nandlab stress` reads an argument line (the CLI's parser): to
    /// write the requests a run issues as a VST trace.
    pub read_stress_line: &'a dyn Fn(&[String]) -> Result<StressRun, String>,
}

/// A `nandlab stress` argument line as the CLI reads it.
pub struct StressRun {
    pub config: Config,
    /// The synthetic workload it issues, or why there is none.
    pub spec: Result<SyntheticSpec, String>,
    pub seed: Option<u64>,
}

/// The medians of a configuration's runs, as the bench prints them after
/// its label: `median: … GB/s … peak RSS … MiB`.
fn median_line(figures: &[Figures]) -> String {
    let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
    format!(
        "median: {:8.2} GB/s  {:>11.0} req/s  {:>12.0} flash ops/s  WAF {:.3}  wall {:6.2} s  CPU {:6.2} s  peak RSS {:6.0} MiB",
        med(|f| f.gbps),
        med(|f| f.requests_per_s),
        med(|f| f.flash_ops_per_s),
        med(|f| f.waf),
        med(|f| f.wall_s),
        med(|f| f.cpu_s),
        med(|f| f.rss_mib)
    )
}

/// The columns of the bench's page ([`crate::html`]).
const TABLE_COLUMNS: [&str; 9] =
    ["configuration", "workload", "runs", "host GB/s", "requests/s", "WAF", "CPU s", "peak RSS, MiB", "side by side"];

/// A configuration's medians as a row of the page, and its bar (host GB/s).
fn table_row(table: &mut BenchTable, label: &str, workload: &str, figures: &[Figures], beside: String) {
    let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
    table.row(
        vec![
            label.to_string(),
            workload.to_string(),
            figures.len().to_string(),
            fixed(med(|f| f.gbps), 2),
            fixed(med(|f| f.requests_per_s), 0),
            fixed(med(|f| f.waf), 3),
            fixed(med(|f| f.cpu_s), 2),
            fixed(med(|f| f.rss_mib), 0),
            beside,
        ],
        Some((label.to_string(), workload.to_string(), med(|f| f.gbps))),
    );
}

struct Figures {
    gbps: f64,
    requests_per_s: f64,
    flash_ops_per_s: f64,
    waf: f64,
    wall_s: f64,
    cpu_s: f64,
    rss_mib: f64,
    errors: u64,
    host_read_bytes: u64,
    host_write_bytes: u64,
}

impl Figures {
    /// One run's figures as a bench line prints them after its label.
    fn run_line(&self) -> String {
        format!(
            "{:8.2} GB/s  {:>11.0} req/s  {:>12.0} flash ops/s  WAF {:.3}  wall {:6.2} s  CPU {:6.2} s  peak RSS {:6.0} MiB{}",
            self.gbps,
            self.requests_per_s,
            self.flash_ops_per_s,
            self.waf,
            self.wall_s,
            self.cpu_s,
            self.rss_mib,
            if self.errors > 0 { format!("  ({} ERRORS)", self.errors) } else { String::new() }
        )
    }
}

/// A locally built VST, checked before any run.
struct Vst {
    exe: PathBuf,
    ftl: PathBuf,
}

/// Check `--vst` and `--vst-ftl`: both must be files, the first executable.
fn check_vst(exe: &Path, ftl: Option<&Path>) -> Result<Vst, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(exe).map_err(|e| format!("--vst {}: {e}", exe.display()))?;
    if !meta.is_file() {
        return Err(format!("--vst {}: not a file (give VST's vst-jasmine executable)", exe.display()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("--vst {}: not executable", exe.display()));
    }
    let ftl = match ftl {
        Some(f) => f.to_path_buf(),
        None => exe.parent().unwrap_or(Path::new(".")).join("ftl_greedy").join("ftl.so"),
    };
    match std::fs::metadata(&ftl) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("--vst-ftl {}: not a file (give VST's FTL shared object)", ftl.display())),
        Err(e) => {
            return Err(format!(
                "--vst-ftl {}: {e} (the FTL shared object VST loads; default ftl_greedy/ftl.so beside --vst)",
                ftl.display()
            ))
        }
    }
    // Absolute paths: VST runs in the bench's scratch directory.
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    Ok(Vst { exe: abs(exe), ftl: abs(&ftl) })
}

/// What VST printed (its configuration and statistics blocks).
#[derive(Default, Debug)]
struct VstOutput {
    max_lba: Option<u64>,
    sector_bytes: Option<u64>,
    passed: bool,
    read_mb: Option<u64>,
    write_mb: Option<u64>,
    bug: Option<String>,
}

fn parse_vst_output(text: &str) -> VstOutput {
    let mut o = VstOutput::default();
    let num = |l: &str, key: &str| l.strip_prefix(key).and_then(|v| v.trim().parse::<u64>().ok());
    for l in text.lines() {
        let l = l.trim();
        if let Some(v) = num(l, "Max LBA:") {
            o.max_lba = Some(v);
        } else if let Some(v) = num(l, "Sector size:") {
            o.sector_bytes = Some(v);
        } else if let Some(v) = num(l, "Total read (MB):") {
            o.read_mb = Some(v);
        } else if let Some(v) = num(l, "Total write (MB):") {
            o.write_mb = Some(v);
        } else if l == "Pass!" {
            o.passed = true;
        } else if l.starts_with("Bug detected") && o.bug.is_none() {
            o.bug = Some(l.to_string());
        }
    }
    o
}

/// Run VST on `trace` in `dir` (it writes `vst.log` into its working
/// directory), replaying the trace once (`-c`).
fn run_vst(vst: &Vst, trace: &Path, dir: &Path) -> Result<(Measured, VstOutput), String> {
    let out_path = dir.join("vst.out");
    let out = std::fs::File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let m = run_measured(
        Command::new(&vst.exe)
            .arg(trace)
            .arg(&vst.ftl)
            .arg("-c")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err),
    )
    .map_err(|e| format!("cannot run {}: {e}", vst.exe.display()))?;
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let parsed = parse_vst_output(&text);
    if !m.success || !parsed.passed {
        let tail: Vec<&str> = text.lines().rev().take(4).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "VST {}{}: {}",
            m.status,
            if parsed.passed { "" } else { ", no `Pass!`" },
            parsed.bug.clone().unwrap_or_else(|| tail.join(" / "))
        ));
    }
    Ok((m, parsed))
}

/// The arguments of one `nandlab stress` run of the bench (after `stress`).
fn stress_args(preset: &str, entry: &ZooEntry, workload_args: &str, write_size: &str, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = ["--preset", preset, "--ftl", entry.ftl, "--no-progress"].map(String::from).to_vec();
    a.extend(entry.args.iter().map(|s| s.to_string()));
    a.extend(workload_args.split_whitespace().map(String::from));
    a.extend(["--write_size".to_string(), write_size.to_string()]);
    a.extend(extra.iter().cloned());
    a
}

/// A workload written as a VST trace.
struct VstTrace {
    path: PathBuf,
    counts: VstTraceCounts,
}

impl VstTrace {
    fn read_bytes(&self) -> u64 {
        self.counts.read_sectors * 512
    }
    fn write_bytes(&self) -> u64 {
        self.counts.write_sectors * 512
    }
}

/// Write the requests `nandlab stress ARGS` issues as a VST trace at
/// `path`; also returns the device's logical sectors.
fn write_vst_trace(a: &StressBenchArgs, args: &[String], path: &Path) -> Result<(VstTrace, u64), String> {
    let StressRun { config, spec, seed } = (a.read_stress_line)(args)?;
    let sector = config.geometry.sector_size_bytes();
    if sector != 512 {
        return Err(format!(
            "--vst: preset {} has {sector}-byte sectors; VST's traces count 512-byte sectors",
            config.name
        ));
    }
    let spec = spec?;
    let seed = seed.ok_or("--vst: the workload needs a seed to be replayed")?;
    let mut workload = SyntheticWorkload::new(&spec, config.logical_bytes(), sector, seed)?;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = VstTraceWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    while let Some(r) = workload.next_request().map_err(|e| e.to_string())? {
        w.write(&r).map_err(|e| format!("--vst: the workload cannot be written as a VST trace: {e}"))?;
    }
    let (_, counts) = w.finish().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((VstTrace { path: path.to_path_buf(), counts }, config.logical_sectors))
}

/// Host GB (10^9 bytes) per CPU-second, if the CPU time is measurable.
fn gb_per_cpu_s(bytes: u64, cpu_s: f64) -> Option<f64> {
    nandlab::report::perf::per_cpu_second(bytes as f64 / 1e9, cpu_s)
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map_or_else(|| "    n/a".to_string(), |v| format!("{v:7.2}"))
}

/// Side-by-side figures of one tool in one run.
#[derive(Clone, Copy)]
struct Side {
    cpu_s: f64,
    rss_mib: f64,
}

/// The medians of one workload and configuration, side by side.
struct Compared {
    nandlab_rate: Option<f64>,
    vst_rate: Option<f64>,
    rss_ratio: f64,
}

/// Run `bench stress`, printing as it goes.
pub fn run(a: &StressBenchArgs, table: &mut BenchTable) -> Result<Verdict, String> {
    *table = BenchTable::new("nandlab bench stress", &TABLE_COLUMNS, "host GB/s (median)");
    table.setup = format!(
        "preset {}, {} run(s) per workload and configuration, --write-size {}, one process per run (single-threaded){}",
        a.preset,
        a.runs,
        a.write_size,
        if a.extra.is_empty() { String::new() } else { format!("; extra arguments: {}", a.extra.join(" ")) }
    );
    let vst = a.vst.as_deref().map(|p| check_vst(p, a.vst_ftl.as_deref())).transpose()?;
    if let Err(e) = a.write_size.parse::<nandlab::util::size::SizeSpec>() {
        return Err(format!("--write-size {}: {e}", a.write_size));
    }
    if let Some(lib) = &a.ftl_lib {
        return run_beside_lib(a, lib, table);
    }
    let jasmine = a.jasmine.as_deref().map(|d| check_jasmine(&a.nandlab, d)).transpose()?;
    let entries: Vec<&ZooEntry> = if let Some(entry) = jasmine {
        vec![entry]
    } else if a.ftls.is_empty() {
        if vst.is_some() {
            ZOO.iter().filter(|e| e.label == "page").collect()
        } else {
            ZOO.iter().collect()
        }
    } else {
        let mut chosen = Vec::new();
        for f in &a.ftls {
            let matching: Vec<&ZooEntry> = ZOO.iter().filter(|e| e.label == f || e.ftl == f).collect();
            if matching.is_empty() {
                let labels: Vec<&str> = ZOO.iter().map(|e| e.label).collect();
                return Err(format!("--ftl {f}: not a bench configuration (choose from {})", labels.join(", ")));
            }
            // A label and an FTL name may pick the same entry: measure it once.
            for e in matching {
                if !chosen.iter().any(|c: &&ZooEntry| std::ptr::eq(*c, e)) {
                    chosen.push(e);
                }
            }
        }
        chosen
    };
    let workloads: Vec<(&str, &str, &str)> =
        STRESS_WORKLOADS.into_iter().filter(|(name, _, _)| a.workload.as_deref().is_none_or(|w| w == *name)).collect();
    let dir = std::env::temp_dir().join(format!("nandlab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let outcome = bench_stress_in(a, vst.as_ref(), &a.nandlab, &entries, &workloads, &dir, table);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// The rules `--jasmine` runs relax: the ones OpenSSD's `ftl_greedy`
/// breaks by design or by its known bugs (docs/jasmine.md): reads of
/// never-written sectors return whatever the DRAM buffer held, and map
/// blocks skip page 0 (finding 1). Everything else stays an error.
pub const JASMINE_RULES: [&str; 4] = ["--rule", "unwritten_not_zero=allow", "--rule", "program_out_of_order=warn"];

/// `--jasmine DIR`: a directory with the firmware's `ftl.c` that builds
/// against the layer (`nandlab jasmine build`, whose errors are returned),
/// as the `jasmine` configuration, VST's greedy FTL its counterpart.
fn check_jasmine(exe: &Path, dir: &Path) -> Result<&'static ZooEntry, String> {
    let shown = dir.display();
    if !dir.is_dir() {
        return Err(format!("--jasmine {shown}: not a directory (give a Jasmine firmware directory, with its ftl.c)"));
    }
    if !dir.join("ftl.c").is_file() {
        return Err(format!("--jasmine {shown}: no ftl.c in it (give a Jasmine firmware directory, with its ftl.c)"));
    }
    let dir = dir.canonicalize().map_err(|e| format!("--jasmine {shown}: {e}"))?;
    let so = std::env::temp_dir().join(format!("nandlab-bench-jasmine-{}.so", std::process::id()));
    let out = Command::new(exe)
        .args(["jasmine", "build"])
        .arg(&dir)
        .arg("-o")
        .arg(&so)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let _ = std::fs::remove_file(&so);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = err.lines().take(5).collect();
        return Err(format!("--jasmine {shown}: the firmware does not build:\n{}", first.join("\n")));
    }
    // One configuration per bench process: leaked to live as the zoo's.
    let ftl: &'static str = Box::leak(format!("jasmine:{}", dir.display()).into_boxed_str());
    Ok(Box::leak(Box::new(ZooEntry {
        label: "jasmine",
        ftl,
        args: &JASMINE_RULES,
        counterpart: "VST's greedy FTL (its 64-bit port of ftl_greedy, published bugs fixed)",
        why: "the firmware runs unmodified through the Jasmine layer: OpenSSD's ftl_greedy is the source VST ported; \
              the rules its known bugs break are relaxed (unwritten_not_zero=allow, program_out_of_order=warn)",
    })))
}

/// The label of the library FTL's configuration.
const LIB_LABEL: &str = "c-page";

/// `bench stress --ftl-lib LIB`: each workload on the Rust `page` FTL and
/// on the library, runs interleaved (page run i, then the library's run
/// i), the medians of both and the ratio of their host GB/s.
fn run_beside_lib(a: &StressBenchArgs, lib: &Path, table: &mut BenchTable) -> Result<Verdict, String> {
    if a.vst.is_some() || !a.ftls.is_empty() {
        return Err("--ftl-lib: measured beside the page FTL only (without --vst and --ftl)".to_string());
    }
    match std::fs::metadata(lib) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("--ftl-lib {}: not a file (give the FTL's shared object)", lib.display())),
        Err(e) => return Err(format!("--ftl-lib {}: {e}", lib.display())),
    }
    let lib = std::fs::canonicalize(lib).unwrap_or_else(|_| lib.to_path_buf());
    let page = ZOO.iter().find(|e| e.label == "page").expect("the zoo has page");
    let workloads: Vec<(&str, &str, &str)> =
        STRESS_WORKLOADS.into_iter().filter(|(name, _, _)| a.workload.as_deref().is_none_or(|w| w == *name)).collect();
    let dir = std::env::temp_dir().join(format!("nandlab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let preset = a.preset.as_str();
    let runs = a.runs;
    println!(
        "nandlab bench stress — preset {preset}, {runs} run(s) per workload and configuration, one process per run \
         (single-threaded)\n{} (--ftl-lib {}) beside page (--ftl page), runs interleaved",
        LIB_LABEL,
        lib.display()
    );
    let mut failed = false;
    let mut results: Vec<(&str, f64, f64)> = Vec::new();
    for (name, description, args) in &workloads {
        println!("\n{name}: {description}, --write_size {}", a.write_size);
        let page_args = stress_args(preset, page, args, &a.write_size, &a.extra);
        let mut lib_args: Vec<String> = ["--preset", preset, "--no-progress", "--ftl-lib"].map(String::from).to_vec();
        lib_args.push(lib.display().to_string());
        lib_args.extend(args.split_whitespace().map(String::from));
        lib_args.extend(["--write_size".to_string(), a.write_size.clone()]);
        lib_args.extend(a.extra.iter().cloned());
        let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
        'runs: for i in 0..runs {
            for (k, (label, sargs)) in [(page.label, &page_args), (LIB_LABEL, &lib_args)].into_iter().enumerate() {
                let json = dir.join(format!("{name}-{label}-{i}.json"));
                let mut cmd = Command::new(&a.nandlab);
                cmd.arg("stress").args(sargs).arg("--json").arg(&json);
                let Some(report) = report_of(cmd, &json) else {
                    println!("  {label:6} run {}: failed (no report)", i + 1);
                    failed = true;
                    break 'runs;
                };
                let f = figures_of(&report);
                println!("  {label:6} run {}: {}", i + 1, f.run_line());
                failed |= f.errors > 0;
                figures[k].push(f);
            }
        }
        if figures[1].is_empty() {
            continue;
        }
        let mut medians = [0.0; 2];
        for (k, label) in [page.label, LIB_LABEL].into_iter().enumerate() {
            medians[k] = median(figures[k].iter().map(|f| f.gbps).collect());
            println!("  {label:6} {}", median_line(&figures[k]));
        }
        let ratio = medians[1] / medians[0].max(f64::MIN_POSITIVE);
        println!("  {LIB_LABEL} / page: {ratio:.2}x host GB/s (medians of {} interleaved runs each)", figures[1].len());
        table_row(table, page.label, name, &figures[0], String::new());
        table_row(
            table,
            LIB_LABEL,
            name,
            &figures[1],
            format!("{LIB_LABEL} / page: {ratio:.2}x host GB/s (interleaved)"),
        );
        results.push((*name, medians[0], medians[1]));
    }
    let _ = std::fs::remove_dir_all(&dir);
    if results.len() > 1 {
        println!("\nSummary (medians; figures from this machine, which may be shared):");
        println!("  {:9} {:>11} {:>11} {:>9}", "workload", "page GB/s", "c-page GB/s", "ratio");
        for (w, p, c) in &results {
            println!("  {:9} {:>11.2} {:>11.2} {:>8.2}x", w, p, c, c / p.max(f64::MIN_POSITIVE));
        }
    }
    Ok(Verdict::of(failed))
}

fn bench_stress_in(
    a: &StressBenchArgs,
    vst: Option<&Vst>,
    exe: &Path,
    entries: &[&ZooEntry],
    workloads: &[(&str, &str, &str)],
    dir: &Path,
    table: &mut BenchTable,
) -> Result<Verdict, String> {
    let preset = a.preset.as_str();
    let runs = a.runs;
    // With VST: every workload as a VST trace, and VST's geometry checked, before any run.
    let mut traces: Vec<Option<VstTrace>> = Vec::new();
    if let Some(vst) = vst {
        let mut logical = 0;
        for (name, _, args) in workloads {
            let sargs = stress_args(preset, entries[0], args, &a.write_size, &a.extra);
            let (t, l) = write_vst_trace(a, &sargs, &dir.join(format!("{name}.trace")))?;
            logical = l;
            traces.push(Some(t));
        }
        let empty = dir.join("empty.trace");
        std::fs::write(&empty, "").map_err(|e| format!("{}: {e}", empty.display()))?;
        match run_vst(vst, &empty, dir) {
            Err(e) => return Err(format!("--vst {}: a run on an empty trace failed: {e}", vst.exe.display())),
            Ok((_, out)) => {
                if out.max_lba.map(|m| m + 1) != Some(logical) || out.sector_bytes != Some(512) {
                    return Err(format!(
                        "--vst {}: VST models {} logical sectors of {} bytes, preset {preset} has {logical} of 512: \
                         the same requests would not be the same work (VST's geometry is compiled in)",
                        vst.exe.display(),
                        out.max_lba.map_or("?".to_string(), |m| (m + 1).to_string()),
                        out.sector_bytes.map_or("?".to_string(), |s| s.to_string()),
                    ));
                }
            }
        }
    } else {
        traces.resize_with(workloads.len(), || None);
    }
    println!(
        "nandlab bench stress — preset {preset}, {runs} run(s) per workload, one process per run (single-threaded){}",
        if let Some(v) = vst {
            format!(
                "\nside by side with VST: {} {} -c, runs alternating; CPU time and peak RSS of each child by wait4",
                v.exe.display(),
                v.ftl.display()
            )
        } else {
            String::new()
        }
    );
    let mut failed = false;
    let mut results: Vec<(&ZooEntry, &str, f64, f64, Option<Compared>)> = Vec::new();
    for entry in entries {
        let ftl = entry.label;
        println!(
            "\n== {} (--ftl {}{}); closest VST FTL: {} ({})",
            entry.label,
            entry.ftl,
            entry.args.iter().map(|a| format!(" {a}")).collect::<String>(),
            entry.counterpart,
            entry.why
        );
        for ((name, description, args), trace) in workloads.iter().zip(&traces) {
            println!("\n{name} / {ftl}: {description}, --write_size {}", a.write_size);
            let sargs = stress_args(preset, entry, args, &a.write_size, &a.extra);
            let mut figures = Vec::new();
            let mut sides: Vec<(Side, Side)> = Vec::new();
            for i in 0..runs {
                let json = dir.join(format!("{name}-{ftl}-{i}.json"));
                let mut cmd = Command::new(exe);
                cmd.arg("stress").args(&sargs).arg("--json").arg(&json);
                let (report, measured) = if trace.is_some() {
                    let _ = std::fs::remove_file(&json);
                    let m = run_measured(cmd.stdout(Stdio::null()));
                    let r = std::fs::read_to_string(&json).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok());
                    (r, m.ok())
                } else {
                    (report_of(cmd, &json), None)
                };
                let Some(report) = report else {
                    println!("  run {}: failed (no report)", i + 1);
                    failed = true;
                    break;
                };
                let f = figures_of(&report);
                println!("  run {}: {}", i + 1, f.run_line());
                failed |= f.errors > 0;
                if let (Some(t), Some(vst)) = (trace, vst) {
                    let Some(m) = measured else {
                        println!("  run {}: nandlab could not be measured", i + 1);
                        failed = true;
                        break;
                    };
                    if (f.host_read_bytes, f.host_write_bytes) != (t.read_bytes(), t.write_bytes()) {
                        println!(
                            "  run {}: nandlab read {} and wrote {} bytes, the VST trace reads {} and writes {}: not the same requests",
                            i + 1,
                            f.host_read_bytes,
                            f.host_write_bytes,
                            t.read_bytes(),
                            t.write_bytes()
                        );
                        failed = true;
                        break;
                    }
                    let v = match run_vst(vst, &t.path, dir) {
                        Ok((v, out)) => {
                            let mb = |b: u64| b / (1 << 20);
                            if (out.read_mb, out.write_mb) != (Some(mb(t.read_bytes())), Some(mb(t.write_bytes()))) {
                                println!(
                                    "  VST {}: read {:?} MB and wrote {:?} MB, the trace {} and {}: not the same requests",
                                    i + 1,
                                    out.read_mb,
                                    out.write_mb,
                                    mb(t.read_bytes()),
                                    mb(t.write_bytes())
                                );
                                failed = true;
                                break;
                            }
                            v
                        }
                        Err(e) => {
                            println!("  VST {}: failed: {e}", i + 1);
                            failed = true;
                            break;
                        }
                    };
                    let bytes = t.read_bytes() + t.write_bytes();
                    let n = Side { cpu_s: m.cpu_s, rss_mib: m.rss_bytes as f64 / f64::from(1u32 << 20) };
                    let s = Side { cpu_s: v.cpu_s, rss_mib: v.rss_bytes as f64 / f64::from(1u32 << 20) };
                    println!(
                        "  VST {}: {} GB/s per CPU-s  CPU {:6.2} s  peak RSS {:6.0} MiB   (nandlab {}: {} GB/s per CPU-s  CPU {:6.2} s  peak RSS {:6.0} MiB)",
                        i + 1,
                        fmt_rate(gb_per_cpu_s(bytes, s.cpu_s)),
                        s.cpu_s,
                        s.rss_mib,
                        i + 1,
                        fmt_rate(gb_per_cpu_s(bytes, n.cpu_s)),
                        n.cpu_s,
                        n.rss_mib
                    );
                    sides.push((n, s));
                }
                figures.push(f);
            }
            if figures.is_empty() {
                continue;
            }
            let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
            println!("  {}", median_line(&figures));
            let compared = match trace {
                Some(t) if !sides.is_empty() && sides.len() == figures.len() => {
                    let bytes = t.read_bytes() + t.write_bytes();
                    let med_side = |pick: fn(&(Side, Side)) -> Side| {
                        let v: Vec<Side> = sides.iter().map(pick).collect();
                        Side {
                            cpu_s: median(v.iter().map(|s| s.cpu_s).collect()),
                            rss_mib: median(v.iter().map(|s| s.rss_mib).collect()),
                        }
                    };
                    let (n, s) = (med_side(|p| p.0), med_side(|p| p.1));
                    let c = Compared {
                        nandlab_rate: gb_per_cpu_s(bytes, n.cpu_s),
                        vst_rate: gb_per_cpu_s(bytes, s.cpu_s),
                        rss_ratio: n.rss_mib / s.rss_mib.max(f64::MIN_POSITIVE),
                    };
                    println!(
                        "  side by side, medians of {} alternating runs each, {:.2} GB of host reads + writes per run:",
                        sides.len(),
                        bytes as f64 / 1e9
                    );
                    println!(
                        "    nandlab {} GB/s per CPU-s  CPU {:6.2} s  peak RSS {:6.0} MiB",
                        fmt_rate(c.nandlab_rate),
                        n.cpu_s,
                        n.rss_mib
                    );
                    println!(
                        "    VST     {} GB/s per CPU-s  CPU {:6.2} s  peak RSS {:6.0} MiB",
                        fmt_rate(c.vst_rate),
                        s.cpu_s,
                        s.rss_mib
                    );
                    match (c.nandlab_rate, c.vst_rate) {
                        (Some(x), Some(y)) => println!(
                            "    nandlab / VST: {:.2}x GB/s per CPU-second, {:.2}x peak RSS",
                            x / y,
                            c.rss_ratio
                        ),
                        _ => println!(
                            "    nandlab / VST: n/a GB/s per CPU-second (a CPU time below {} s is not measurable), {:.2}x peak RSS",
                            nandlab::report::perf::MIN_MEASURABLE_CPU_SECONDS,
                            c.rss_ratio
                        ),
                    }
                    Some(c)
                }
                _ => None,
            };
            let beside = compared.as_ref().map_or_else(String::new, |c| {
                let ratio = match (c.nandlab_rate, c.vst_rate) {
                    (Some(x), Some(y)) => format!("{:.2}x", x / y),
                    _ => "n/a".to_string(),
                };
                format!(
                    "VST {} GB/CPU-s, nandlab {}: nandlab / VST {ratio} GB per CPU-s, {:.2}x peak RSS (alternating runs)",
                    fmt_rate(c.vst_rate).trim(),
                    fmt_rate(c.nandlab_rate).trim(),
                    c.rss_ratio
                )
            });
            table_row(table, entry.label, name, &figures, beside);
            results.push((entry, name, med(|f| f.gbps), med(|f| f.waf), compared));
        }
    }
    if results.len() > 1 {
        println!("\nSummary (medians; figures from this machine, which may be shared):");
        if vst.is_some() {
            println!(
                "  {:18} {:9} {:>9} {:>8}  {:>14} {:>14} {:>11} {:>10}",
                "configuration", "workload", "GB/s", "WAF", "nandlab GB/CPU-s", "VST GB/CPU-s", "ratio", "RSS ratio"
            );
        } else {
            println!("  {:18} {:9} {:>9} {:>8}", "configuration", "workload", "GB/s", "WAF");
        }
        for (e, w, gbps, waf, c) in &results {
            match c {
                Some(c) => println!(
                    "  {:18} {:9} {:>9.2} {:>8.3}  {:>16} {:>14} {:>11} {:>9.2}x",
                    e.label,
                    w,
                    gbps,
                    waf,
                    fmt_rate(c.nandlab_rate),
                    fmt_rate(c.vst_rate),
                    match (c.nandlab_rate, c.vst_rate) {
                        (Some(x), Some(y)) => format!("{:.2}x", x / y),
                        _ => "n/a".to_string(),
                    },
                    c.rss_ratio
                ),
                None => println!("  {:18} {:9} {:>9.2} {:>8.3}", e.label, w, gbps, waf),
            }
        }
    }
    Ok(Verdict::of(failed))
}

fn figures_of(r: &Value) -> Figures {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    Figures {
        gbps: f("effective_host_gbps"),
        requests_per_s: f("requests_per_second"),
        flash_ops_per_s: f("flash_ops_per_second"),
        waf: f("waf"),
        wall_s: f("wall_seconds"),
        cpu_s: f("cpu_seconds"),
        rss_mib: f("peak_rss_bytes") / f64::from(1u32 << 20),
        errors: r["errors"].as_u64().unwrap_or(0),
        host_read_bytes: r["host"]["read_bytes"].as_u64().unwrap_or(0),
        host_write_bytes: r["host"]["write_bytes"].as_u64().unwrap_or(0),
    }
}
