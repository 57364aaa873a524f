//! FTLs written in C (`--ftl-lib`): the example page-mapped FTL passes
//! stress, crash and perf and mounts after a clean power cycle; the
//! deliberately broken one is caught; every loading error is exit 2 with
//! the path and what is wrong. The libraries are compiled from
//! `examples/c-ftl/` with the system C compiler into a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compile `examples/c-ftl/SOURCE` (extra flags) into `DIR/NAME`.
fn cc(dir: &Path, source: &str, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I"])
        .arg(repo().join("include"))
        .args(extra)
        .arg("-o")
        .arg(&out)
        .arg(repo().join("examples/c-ftl").join(source))
        .status()
        .expect("a C compiler (`cc`) runs: install gcc");
    assert!(status.success(), "cc {source} failed");
    out
}

struct Libs {
    _dir: tempfile::TempDir,
    cpage: PathBuf,
    cbroken: PathBuf,
    /// cpage built as if for ABI version 99.
    future: PathBuf,
    /// A shared object that exports nothing of the contract but the version.
    partial: PathBuf,
}

fn libs() -> &'static Libs {
    static LIBS: OnceLock<Libs> = OnceLock::new();
    LIBS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cpage = cc(dir.path(), "cpage.c", "libcpage.so", &[]);
        let cbroken = cc(dir.path(), "cbroken.c", "libcbroken.so", &[]);
        let future = cc(dir.path(), "cpage.c", "libfuture.so", &["-DCPAGE_ABI_VERSION=99"]);
        let partial_src = dir.path().join("partial.c");
        std::fs::write(
            &partial_src,
            "#include \"nandlab.h\"\nuint32_t nandlab_ftl_abi_version(void) { return NANDLAB_ABI_VERSION; }\n",
        )
        .unwrap();
        let partial = dir.path().join("libpartial.so");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-std=c11", "-I"])
            .arg(repo().join("include"))
            .arg("-o")
            .arg(&partial)
            .arg(&partial_src)
            .status()
            .unwrap();
        assert!(status.success());
        Libs { _dir: dir, cpage, cbroken, future, partial }
    })
}

fn nandlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("nandlab runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_c_page_ftl_passes_stress_and_mounts_after_a_clean_power_cycle() {
    let l = libs();
    let o =
        nandlab(&["stress", "--preset", "tiny", "--ftl-lib", s(&l.cpage), "--seed", "7", "--remount", "--no-progress"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("FTL lib:cpage"), "{out}");
    assert!(out.contains(&format!("library {}", l.cpage.display())), "reports name the library: {out}");
    assert!(out.contains("clean power cycle, fresh FTL mounted"), "{out}");
    assert!(out.contains("sectors verified"), "{out}");
    assert!(out.contains("result     PASS"), "{out}");
    let gc: u64 = out.split("GC         ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(gc > 0, "the workload makes the FTL collect: {out}");
}

#[test]
fn the_broken_c_ftl_is_caught_by_stress() {
    let l = libs();
    let o = nandlab(&["stress", "--preset", "tiny", "--ftl-lib", s(&l.cbroken), "--seed", "7", "--no-progress"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("result     FAIL"), "{out}");
    let read_rules = ["misdirected_read", "erased_read", "stale_read"];
    assert!(read_rules.iter().any(|r| out.contains(&format!("[Error] {r}"))), "a read returns wrong data: {out}");
    assert!(out.contains("--ftl-lib"), "the reproducer names the library: {out}");
}

#[test]
fn the_c_page_ftl_survives_power_cuts() {
    let l = libs();
    let o = nandlab(&[
        "crash",
        "--preset",
        "tiny",
        "--ftl-lib",
        s(&l.cpage),
        "--seed",
        "4",
        "--crash-points",
        "60",
        "--write_size",
        "1x",
        "--threads",
        "2",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("60 passed, 0 failed"), "{out}");
    assert!(out.contains("tore a program or erase"), "{out}");
}

#[test]
fn the_broken_c_ftl_fails_power_cuts_too() {
    let l = libs();
    let o = nandlab(&[
        "crash",
        "--preset",
        "tiny",
        "--ftl-lib",
        s(&l.cbroken),
        "--seed",
        "4",
        "--crash-points",
        "20",
        "--write_size",
        "2x",
        "--threads",
        "2",
        "--no-shrink",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("lost_durable_write"), "the page GC dropped is lost: {out}");
}

#[test]
fn the_c_page_ftl_runs_timed() {
    let l = libs();
    let o = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--ftl-lib",
        s(&l.cpage),
        "--seed",
        "5",
        "--write_size",
        "1x",
        "--no-progress",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("nandlab perf — preset tiny-timed — FTL lib:cpage"), "{out}");
    assert!(out.contains("result     PASS"), "{out}");
}

#[test]
fn a_device_file_names_the_library_relative_to_itself() {
    let l = libs();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&l.cpage, dir.path().join("libmine.so")).unwrap();
    let tiny = std::fs::read_to_string(repo().join("presets/tiny.toml")).unwrap();
    let device = tiny.replace("name = \"page\"\ngc_policy = \"greedy\"", "lib = \"libmine.so\"\ngc_free_blocks = 3");
    assert_ne!(device, tiny);
    let file = dir.path().join("dev.toml");
    std::fs::write(&file, device).unwrap();
    let o = nandlab(&["stress", "--config", s(&file), "--seed", "1", "--write_size", "1x", "--no-progress"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("FTL lib:cpage"), "{out}");
    // The library's own option check: a bad value is refused by `create`.
    let bad = nandlab(&["stress", "--config", s(&file), "--ftl-opt", "gc_free_blocks=0", "--no-progress"]);
    let (out, err) = text(&bad);
    assert_eq!(bad.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("[ftl] lib") && err.contains("libmine.so"), "{err}");
    assert!(err.contains("option `gc_free_blocks`"), "{err}");
}

/// Every way loading can fail is bad input: exit 2, the path and the reason.
#[test]
fn loading_errors_name_the_path_and_what_is_missing() {
    let l = libs();
    let run = |lib: &str, extra: &[&str]| {
        let mut args = vec!["stress", "--preset", "tiny", "--ftl-lib", lib, "--no-progress"];
        args.extend_from_slice(extra);
        let o = nandlab(&args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{lib}: {out}\n{err}");
        assert!(!out.contains("result"), "no work is done: {out}");
        err
    };
    let e = run("/nonexistent/libnothing.so", &[]);
    assert!(e.contains("--ftl-lib /nonexistent/libnothing.so: no such file"), "{e}");
    let e = run(s(&l.partial), &[]);
    assert!(e.contains(s(&l.partial)) && e.contains("does not export `nandlab_ftl_create`"), "{e}");
    let e = run(s(&l.future), &[]);
    assert!(e.contains(s(&l.future)), "{e}");
    assert!(e.contains("ABI version 99") && e.contains("ABI version 1"), "names both versions: {e}");
    let not_a_library = repo().join("presets/tiny.toml");
    let e = run(s(&not_a_library), &[]);
    assert!(e.contains("cannot load the library"), "{e}");
    let e = run(s(&l.cpage), &["--ftl-opt", "colour=blue"]);
    assert!(e.contains("nandlab_ftl_create failed") && e.contains("unknown option `colour`"), "{e}");
    // The correct library with the same arguments loads.
    let o = nandlab(&["stress", "--preset", "tiny", "--ftl-lib", s(&l.cpage), "--write_size", "1m", "--no-progress"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

/// A segfault in C code under `--isolate` is a finding: the signal, the
/// function, the request and the flash operation, and the reproducer.
#[test]
fn ftls_describes_a_library_ftl_by_its_declarations() {
    let l = libs();
    let o = nandlab(&["ftls", "--ftl-lib", s(&l.cpage)]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.starts_with(&format!("lib:cpage — library FTL, {}", l.cpage.display())), "{out}");
    assert!(out.contains("ABI version 1 (this nandlab implements 1)"), "{out}");
    assert!(out.contains("crash guarantee baseline, 16 OOB bytes per page"), "{out}");
    assert!(out.contains("gc_free_blocks") && out.contains("default 2"), "{out}");
    assert!(!out.contains("crash_at_request"), "cpage does not take the broken one's option: {out}");
    // The broken build lists its extra option; a library without the
    // optional table says so.
    let (out, _) = text(&nandlab(&["ftls", "--ftl-lib", s(&l.cbroken)]));
    assert!(out.starts_with("lib:cbroken") && out.contains("crash_at_request"), "{out}");
    // The test instance gets the options: a bad one is create's error.
    let o = nandlab(&["ftls", "--ftl-lib", s(&l.cpage), "--ftl-opt", "gc_free_blocks=0"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("option `gc_free_blocks`: `0` is not a number of blocks"), "{err}");
}

#[test]
fn ftls_refuses_a_bad_library_with_exit_2() {
    let l = libs();
    for (lib, want) in [
        (s(&l.partial), "does not export `nandlab_ftl_create`".to_string()),
        (s(&l.future), "built for nandlab ABI version 99, but this nandlab implements ABI version 1".to_string()),
        ("/no/such/lib.so", "/no/such/lib.so: no such file".to_string()),
    ] {
        let o = nandlab(&["ftls", "--ftl-lib", lib]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{lib}: {out}\n{err}");
        assert!(err.contains(lib) && err.contains(&want), "{err}");
        assert!(out.is_empty(), "{out}");
    }
}

#[test]
fn isolate_reports_a_segfault_of_the_c_code_as_a_violation() {
    let l = libs();
    let args = |lib: &Path, extra: &[&'static str]| {
        let mut a: Vec<String> = ["stress", "--preset", "tiny", "--ftl-lib", s(lib), "--isolate", "--no-progress"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        a.extend(["--seed", "3", "--write_size", "1x"].iter().map(|x| x.to_string()));
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut crash = args(&l.cbroken, &["--ftl-opt", "crash_at_request=500"]);
    crash.extend(["--json".to_string(), s(&report).to_string()]);
    let o = nandlab(&crash.iter().map(String::as_str).collect::<Vec<_>>());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("SIGSEGV (signal 11)"), "{out}");
    assert!(out.contains("[Error] ftl_crash at flash op "), "{out}");
    assert!(out.contains("(request 500: ") && out.contains("in nandlab_ftl_write"), "{out}");
    assert!(
        out.contains("Reproduce with:") && out.contains("--isolate") && out.contains("--ftl-opt crash_at_request=500"),
        "{out}"
    );
    assert!(out.contains("--seed 3"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["result"], "fail");
    assert_eq!(json["violations"][0]["rule"], "ftl_crash");
    assert_eq!(json["violations"][0]["function"], "nandlab_ftl_write");
    assert_eq!(json["violations"][0]["request"]["id"], 500);
    // The same library and run, the crash not armed: passes through the
    // child with the child's own report and exit code.
    let calm = args(&l.cpage, &[]);
    let o = nandlab(&calm.iter().map(String::as_str).collect::<Vec<_>>());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS") && !out.contains("ftl_crash"), "{out}");
}

/// cpage (included unchanged) whose `nandlab_ftl_prefetch` first tries to
/// change the flash through the table: it erases the block and programs a
/// page the previous hint's data is on, and allocates a buffer. Each call
/// the adapter refuses (`NANDLAB_E_INVALID_ARGUMENT`) is counted in the
/// statistic `prefetch_refused`; a call that is not refused makes the next
/// write fail with its code.
const PREFETCH_WRITES_C: &str = r#"
#define nandlab_ftl_prefetch cpage_prefetch
#define nandlab_ftl_write cpage_write
#define nandlab_ftl_stats cpage_stats
#include "cpage.c"
#undef nandlab_ftl_prefetch
#undef nandlab_ftl_write
#undef nandlab_ftl_stats

static uint64_t refused;
static int32_t allowed_code;

static void note(int32_t rc) {
    if (rc == NANDLAB_E_INVALID_ARGUMENT) {
        refused++;
    } else if (!allowed_code) {
        allowed_code = rc ? rc : -1;
    }
}

void nandlab_ftl_prefetch(void *ftl, const nandlab_flash *fl, uint64_t lba, uint32_t sectors) {
    cpage *f = ftl;
    uint64_t lpn = f->hint_lba / f->spp;
    if (f->hint_sectors && lpn < f->lpns && f->l2p[lpn] != UNMAPPED) {
        uint32_t ppn = f->l2p[lpn];
        note(fl->erase(fl->ctx, NANDLAB_CAUSE_HOST, ppn / f->ppb));
        note(fl->program(fl->ctx, NANDLAB_CAUSE_HOST, ppn, f->tmp, 0, NULL, 0));
        uint64_t buf = 0;
        note(fl->buf_alloc(fl->ctx, 1, &buf));
    }
    cpage_prefetch(ftl, fl, lba, sectors);
}

int32_t nandlab_ftl_write(void *ftl, const nandlab_flash *fl, const nandlab_request *req, uint32_t *durability,
                          char *msg, size_t msg_len) {
    if (allowed_code) {
        snprintf(msg, msg_len, "a flash call during nandlab_ftl_prefetch was allowed (code %d)", (int)allowed_code);
        return NANDLAB_E_NO_SPACE;
    }
    return cpage_write(ftl, fl, req, durability, msg, msg_len);
}

size_t nandlab_ftl_stats(const void *ftl, nandlab_stat *stats, size_t capacity) {
    size_t n = cpage_stats(ftl, stats, capacity);
    if (n < capacity) {
        stats[n].key = "prefetch_refused";
        stats[n].value = (double)refused;
    }
    return n + 1;
}
"#;

#[test]
fn flash_calls_that_change_state_are_refused_during_prefetch() {
    let l = libs();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prefetch_writes.c");
    std::fs::write(&src, PREFETCH_WRITES_C).unwrap();
    let lib = dir.path().join("libprefetchwrites.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-std=c11", "-I"])
        .arg(repo().join("include"))
        .arg("-I")
        .arg(repo().join("examples/c-ftl"))
        .arg("-o")
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("a C compiler (`cc`) runs: install gcc");
    assert!(status.success(), "cc prefetch_writes.c failed");
    let args = |l: &Path| -> Vec<String> {
        ["stress", "--preset", "tiny", "--ftl-lib", s(l), "--seed", "7", "--no-progress"].map(String::from).to_vec()
    };
    let run = |l: &Path| {
        let a = args(l);
        let o = nandlab(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };
    let (code, out, err) = run(&lib);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS"), "{out}");
    let refused: u64 = out
        .split("prefetch_refused ")
        .nth(1)
        .unwrap_or_else(|| panic!("the statistic is shown: {out}"))
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(refused >= 3, "prefetch was called and its erase, program and buf_alloc were refused: {out}");
    // The example itself passes the same run.
    let (code, out, err) = run(&l.cpage);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS") && !out.contains("prefetch_refused"), "{out}");
}

/// `hunt` takes library FTLs, each run in a child process: the correct C
/// FTL passes a short campaign, the broken one is found (its GC bug, and
/// a segfault of its C code as `ftl_crash`), each with a reproducer.
#[test]
fn hunt_runs_library_ftls_in_child_processes_and_finds_the_broken_one() {
    let l = libs();
    let args = |lib: &Path, extra: &[&str]| {
        let mut a = vec!["hunt", "--preset", "tiny", "--ftl-lib", s(lib), "--no-shrink"];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let o = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(&a).output().unwrap();
        let (out, err) = text(&o);
        (o.status.code(), out, err)
    };
    let (code, out, err) = run(args(&l.cpage, &["--runs", "4"]));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("hunt: 4 runs") && out.contains("result: nothing found"), "{out}");
    assert!(out.contains("coverage: ") && out.contains("gc_runs"), "the library's counters: {out}");

    let (code, out, err) = run(args(&l.cbroken, &["--runs", "4"]));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("FINDING misdirected_read"), "{out}");
    let reproduce: Vec<String> = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("reproduce nandlab "))
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let (code, again, err) = run(reproduce);
    assert_eq!(code, Some(1), "{again}{err}");
    assert!(again.contains("FINDING misdirected_read"), "{again}");

    let (code, out, err) = run(args(&l.cbroken, &["--ftl-opt", "crash_at_request=50", "--runs", "1"]));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("FINDING ftl_crash"), "{out}");
    assert!(out.contains("killed by signal 11 in nandlab_ftl_"), "{out}");
}
