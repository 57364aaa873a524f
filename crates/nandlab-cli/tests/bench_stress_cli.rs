//! `nandlab bench stress`: what it prints without VST, how `--vst` is
//! checked, the VST trace it writes, and the side-by-side plumbing (with a
//! stand-in shell script for VST's `vst-jasmine`; CI has no VST).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `nandlab bench stress` of one workload beside `vst` (on `preset`, or
/// the bench's own vst-jasmine when None).
fn bench_beside(
    vst: &Path,
    preset: Option<&str>,
    workload: &str,
    runs: &str,
    write_size: &str,
) -> (i32, String, String) {
    let mut args = vec!["bench", "stress"];
    if let Some(p) = preset {
        args.extend(["--preset", p]);
    }
    args.extend(["--workload", workload, "--runs", runs, "--write-size", write_size, "--vst", vst.to_str().unwrap()]);
    nandlab(&args)
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nandlab-bench-stress-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A stand-in for VST's `vst-jasmine` in `dir`, with `ftl_greedy/ftl.so`
/// beside it (where `--vst-ftl` defaults to). Like VST it takes `TRACE
/// FTL.so -c`, prints its geometry (`max_lba`: the last logical sector),
/// and after the run `Pass!` and the MB it read and wrote, which it sums
/// from the trace as VST's loader reads it (field 4 sectors, field 5: 0 =
/// write, else read). It appends its arguments to `dir/args`, copies each
/// trace it is given into `dir`, and burns some CPU so its rate is
/// measurable.
fn fake_vst(dir: &Path, max_lba: u64) -> PathBuf {
    let exe = dir.join("vst-jasmine");
    let script = format!(
        r##"#!/bin/sh
here="$(dirname "$0")"
echo "$*" >> "$here/args"
[ "$3" = "-c" ] || exit 3
[ -f "$2" ] || exit 4
cp "$1" "$here/$(basename "$1")"
echo "----------SSD Configuration----------"
echo "# banks: 8"
echo "Max LBA: {max_lba}"
echo "Sector size: 512"
echo "----------SSD Configuration----------"
awk 'BEGIN {{ for (i = 0; i < 25000000; i++) s += i }}
     {{ if ($5 == 0) w += $4; else r += $4 }}
     END {{ print "----------Statistic Results----------"; print "Pass!";
           printf "Total read (MB): %d\n", r * 512 / 1048576; printf "Total write (MB): %d\n", w * 512 / 1048576 }}' "$1"
"##
    );
    std::fs::write(&exe, script).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("ftl_greedy")).unwrap();
    std::fs::write(dir.join("ftl_greedy/ftl.so"), "").unwrap();
    exe
}

/// tiny's logical capacity: 57,042,432 bytes = 111,411 sectors.
const TINY_MAX_LBA: u64 = 111_410;
/// vst-jasmine's (and VST's): 124,822,461 sectors.
const JASMINE_MAX_LBA: u64 = 124_822_460;

#[test]
fn without_vst_bench_stress_prints_no_vst_figure_no_target_and_no_ratio() {
    let (code, out, err) =
        nandlab(&["bench", "stress", "--preset", "tiny", "--ftl", "page", "--runs", "1", "--write-size", "1m"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("vst-rand / page") && out.contains("vst-seq / page"), "both workloads ran: {out}");
    assert!(out.contains("median:"), "{out}");
    for line in out.lines().filter(|l| l.contains("VST")) {
        assert!(!line.contains("GB/s"), "a VST figure was printed without --vst: {line}");
    }
    assert!(!out.contains("target"), "no target derived from VST figures: {out}");
    assert!(!out.contains("nandlab / VST") && !out.contains(" ratio"), "no ratio without --vst: {out}");
}

#[test]
fn a_missing_or_unexecutable_vst_exits_2_naming_the_option_and_path_before_any_run() {
    let dir = scratch("bad-path");
    let missing = dir.join("no-such-vst");
    let not_exec = dir.join("vst-jasmine");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (path, why) in [(&missing, "No such file"), (&not_exec, "not executable")] {
        let start = Instant::now();
        let (code, out, err) = nandlab(&["bench", "stress", "--vst", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(&format!("--vst {}", path.display())) && err.contains(why), "{err}");
        assert!(out.is_empty(), "nothing ran: {out}");
        assert!(start.elapsed() < Duration::from_secs(30), "refused before any work");
    }
    // An executable VST without its FTL beside it: --vst-ftl is named.
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out, err) = nandlab(&["bench", "stress", "--vst", not_exec.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--vst-ftl") && err.contains("ftl_greedy/ftl.so"), "{err}");
    assert!(out.is_empty(), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_vst_trace_of_sequential_64k_writes_is_the_text_vsts_loader_reads() {
    let dir = scratch("golden");
    let vst = fake_vst(&dir, TINY_MAX_LBA);
    let (code, out, err) = bench_beside(&vst, Some("tiny"), "vst-seq", "1", "256k");
    assert_eq!(code, 0, "{out}{err}");
    // VST's load_trace: fscanf("%s %d %d %d %d") = time token, device,
    // LBA (512 B sectors), sectors, 0 = write; 256 KiB = four 64 KiB writes.
    let trace = std::fs::read_to_string(dir.join("vst-seq.trace")).unwrap();
    assert_eq!(trace, "0 0 0 128 0\n0 0 128 128 0\n0 0 256 128 0\n0 0 384 128 0\n");
    // The geometry probe on an empty trace, then the run, each `TRACE FTL -c`.
    let args = std::fs::read_to_string(dir.join("args")).unwrap();
    let lines: Vec<&str> = args.lines().collect();
    assert_eq!(lines.len(), 2, "{args}");
    let ftl = std::fs::canonicalize(dir.join("ftl_greedy/ftl.so")).unwrap();
    assert!(lines[0].ends_with(&format!("empty.trace {} -c", ftl.display())), "{args}");
    assert!(lines[1].ends_with(&format!("vst-seq.trace {} -c", ftl.display())), "{args}");
    assert_eq!(std::fs::read_to_string(dir.join("empty.trace")).unwrap(), "");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn with_vst_both_tools_run_alternately_on_the_same_requests_and_the_ratio_is_printed() {
    let dir = scratch("side-by-side");
    let vst = fake_vst(&dir, JASMINE_MAX_LBA);
    let (code, out, err) = bench_beside(&vst, None, "vst-rand", "2", "0.3x");
    assert_eq!(code, 0, "{out}{err}");
    // Runs alternate: nandlab's run i, then VST's run i.
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            ["run 1:", "VST 1:", "run 2:", "VST 2:"].into_iter().find(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(order, ["run 1:", "VST 1:", "run 2:", "VST 2:"], "{out}");
    assert_eq!(std::fs::read_to_string(dir.join("args")).unwrap().lines().count(), 3, "probe + 2 runs");
    // The same requests: both sides' byte counts matched the trace (else the run fails).
    assert!(out.contains("side by side, medians of 2 alternating runs each"), "{out}");
    let ratio = out.lines().find(|l| l.contains("nandlab / VST:")).expect("a ratio line");
    assert!(ratio.contains("x GB/s per CPU-second") && ratio.contains("x peak RSS"), "{ratio}");
    // The medians: `    nandlab  R GB/s per CPU-s …` and `    VST      R GB/s per CPU-s …`.
    let rate = |who: &str| -> f64 {
        out.lines()
            .filter_map(|l| l.strip_prefix(who))
            .find_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no median rate for `{who}`: {out}"))
    };
    let (n, v) = (rate("    nandlab "), rate("    VST     "));
    let printed: f64 = ratio.split("VST:").nth(1).unwrap().trim().split('x').next().unwrap().parse().unwrap();
    assert!((printed - n / v).abs() <= 0.01 * printed.max(1.0), "{ratio}: {n} / {v}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_vst_built_for_another_geometry_is_refused_before_any_run() {
    let dir = scratch("geometry");
    let vst = fake_vst(&dir, JASMINE_MAX_LBA);
    let (code, out, err) =
        nandlab(&["bench", "stress", "--preset", "tiny", "--write-size", "256k", "--vst", vst.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--vst") && err.contains("124822461 logical sectors") && err.contains("111411"), "{err}");
    assert!(out.is_empty(), "no run: {out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_vst_that_did_not_write_the_traces_bytes_fails_the_run_with_exit_1() {
    let dir = scratch("other-work");
    let vst = fake_vst(&dir, TINY_MAX_LBA);
    // The same stand-in, but it reports one MB more written than the trace holds.
    let script = std::fs::read_to_string(&vst).unwrap().replace("w * 512 / 1048576", "w * 512 / 1048576 + 1");
    std::fs::write(&vst, script).unwrap();
    let (code, out, err) = bench_beside(&vst, Some("tiny"), "vst-seq", "1", "1m");
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("not the same requests"), "{out}");
    assert!(!out.contains("nandlab / VST"), "no ratio from a run that did other work: {out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `examples/c-ftl/cpage.c` compiled with the system C compiler into `dir`.
fn cpage_so(dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = dir.join("libcpage.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-std=c11", "-I"])
        .arg(repo.join("include"))
        .arg("-o")
        .arg(&out)
        .arg(repo.join("examples/c-ftl/cpage.c"))
        .status()
        .expect("a C compiler (`cc`) runs: install gcc");
    assert!(status.success(), "cc cpage.c failed");
    out
}

#[test]
fn with_an_ftl_lib_the_library_runs_interleaved_beside_page_and_the_ratio_is_printed() {
    let dir = scratch("ftl-lib");
    let lib = cpage_so(&dir);
    let (code, out, err) = nandlab(&[
        "bench",
        "stress",
        "--preset",
        "tiny",
        "--runs",
        "2",
        "--write-size",
        "1m",
        "--ftl-lib",
        lib.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("vst-rand:") && out.contains("vst-seq:"), "both workloads ran: {out}");
    // Interleaved: page's run i, then the library's run i.
    let order: Vec<String> = out
        .lines()
        .filter(|l| l.contains(" run ") && l.contains("GB/s"))
        .map(|l| l.split(':').next().unwrap().split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let one = ["page run 1", "c-page run 1", "page run 2", "c-page run 2"];
    assert_eq!(order, [one, one].concat(), "{out}");
    assert_eq!(out.lines().filter(|l| l.trim_start().starts_with("page   median:")).count(), 2, "{out}");
    assert_eq!(out.lines().filter(|l| l.trim_start().starts_with("c-page median:")).count(), 2, "{out}");
    let ratios: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("c-page / page:")).collect();
    assert_eq!(ratios.len(), 2, "a ratio per workload: {out}");
    assert!(ratios.iter().all(|r| r.contains("x host GB/s")), "{out}");
    assert!(out.contains(&format!("--ftl-lib {}", std::fs::canonicalize(&lib).unwrap().display())), "{out}");
    // Without --ftl-lib no library configuration is printed.
    let (code, out, err) =
        nandlab(&["bench", "stress", "--preset", "tiny", "--ftl", "page", "--runs", "1", "--write-size", "256k"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("c-page"), "{out}");
    // A missing library is an input error before any run.
    let (code, out, err) = nandlab(&["bench", "stress", "--ftl-lib", dir.join("nope.so").to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--ftl-lib") && out.is_empty(), "{out}{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `nandlab bench stress` with `XDG_CACHE_HOME` in `cache` (the Jasmine
/// layer's build cache), not the user's.
fn nandlab_cached(cache: &Path, args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).env("XDG_CACHE_HOME", cache).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn with_jasmine_the_firmware_runs_through_the_layer_as_the_jasmine_configuration() {
    let dir = scratch("jasmine");
    let fw = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/jasmine/ftl_minimal");
    let fw = std::fs::canonicalize(fw).unwrap();
    let (code, out, err) = nandlab_cached(
        &dir,
        &[
            "bench",
            "stress",
            "--jasmine",
            fw.to_str().unwrap(),
            "--workload",
            "vst-seq",
            "--runs",
            "1",
            "--write-size",
            "1m",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let header = format!(
        "== jasmine (--ftl jasmine:{} --rule unwritten_not_zero=allow --rule program_out_of_order=warn)",
        fw.display()
    );
    assert!(out.contains(&header), "{out}");
    assert!(out.contains("vst-seq / jasmine:"), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("median:")), "{out}");
    assert!(!out.contains("vst-rand"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_jasmine_dir_exits_2_naming_the_option_and_the_reason_before_any_run() {
    let dir = scratch("jasmine-bad");
    let missing = dir.join("nope");
    let no_ftl = dir.join("empty");
    let broken = dir.join("broken");
    std::fs::create_dir_all(&no_ftl).unwrap();
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("ftl.c"), "this is not C;\n").unwrap();
    for (d, reason) in [(&missing, "not a directory"), (&no_ftl, "no ftl.c"), (&broken, "does not build")] {
        let (code, out, err) =
            nandlab_cached(&dir, &["bench", "stress", "--jasmine", d.to_str().unwrap(), "--write-size", "1m"]);
        assert_eq!(code, 2, "{}: {out}{err}", d.display());
        assert!(err.contains(&format!("--jasmine {}", d.display())) && err.contains(reason), "{err}");
        assert!(out.is_empty(), "no run: {out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
