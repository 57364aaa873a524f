//! `nandlab hunt`: a short campaign finds a realistic mutant and prints a
//! reproducer that repeats the finding from its seed alone; the correct
//! FTL finds nothing in the same runs; bad options exit 2 before any run.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The arguments of the line that starts with `prefix` (after it).
fn command_after<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    let line = out.lines().find_map(|l| l.trim_start().strip_prefix(prefix)).expect("the line");
    let line = line.split("   (").next().unwrap();
    line.split_whitespace().skip(2).collect() // `nandlab hunt`
}

#[test]
fn a_hunt_finds_a_mutant_and_its_shrunk_reproducer_repeats_the_finding() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hunt.json");
    let findings = dir.path().join("findings");
    let (code, out, err) = nandlab(&[
        "hunt",
        "--preset",
        "tiny",
        "--ftl",
        "optr",
        "--mutant",
        "trim-keeps-cached-page",
        "--runs",
        "4",
        "--json",
        json.to_str().unwrap(),
        "--findings",
        findings.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FINDING trim_not_zero"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["mode"], "hunt");
    assert_eq!(report["runs"], 4);
    assert_eq!(report["findings"][0]["rule"], "trim_not_zero");
    let seed = report["findings"][0]["seeds"][0].as_u64().unwrap();
    assert!(findings.join(format!("trim_not_zero-{seed}.sh")).exists());

    for prefix in ["reproduce ", "shrunk    "] {
        let args = command_after(&out, prefix);
        let mut full = vec!["hunt"];
        full.extend(args);
        let (code, again, err) = nandlab(&full);
        assert_eq!(code, 1, "{full:?}: {again}{err}");
        assert!(again.contains("FINDING trim_not_zero"), "{full:?}: {again}");
        assert!(again.contains(&format!("run {seed}: requests ")), "prints the run's configuration: {again}");
    }
}

#[test]
fn the_correct_ftl_finds_nothing_in_the_same_runs() {
    let (code, out, err) = nandlab(&["hunt", "--preset", "tiny", "--ftl", "optr", "--runs", "4"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hunt: 4 runs") && out.contains("result: nothing found"), "{out}");
}

#[test]
fn bad_hunt_options_exit_2_naming_the_option() {
    for (args, named) in [
        (&["--runs", "0"][..], "--runs"),
        (&["--budget", "soon"][..], "--budget"),
        (&["--jobs", "0"][..], "--jobs"),
        (&["--mutant", "no-such-bug"][..], "--mutant"),
        (&["--mutant", "seal-drops-entries"][..], "--mutant"),
        (&["--seed", "3", "--without", "gravity"][..], "--without"),
        (&["--seed", "3", "--splice", "gravity=1"][..], "--splice"),
        (&["--seed", "3", "--splice", "trims=x"][..], "--splice"),
        (&["--hang-timeout", "0s"][..], "--hang-timeout"),
        (&["--ftl", "nope"][..], "nope"),
        (&["--ftl", "buggy"][..], "--ftl buggy"),
    ] {
        let mut full = vec!["hunt", "--preset", "tiny"];
        full.extend(args);
        let (code, out, err) = nandlab(&full);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(!out.contains("hunt:"), "no run before the error: {out}");
    }
}

/// A finding of `hunt` in the shipped `dftl` (docs/design-notes/hunt.md):
/// with 3 % factory bad blocks, random GC and static wear leveling, GC had
/// to open a group with none free (`ftl_out_of_space` at request 75102):
/// its threshold counted groups, not the room of groups narrowed by bad
/// blocks. The same run is clean now.
#[test]
fn the_dftl_out_of_space_finding_of_seed_158_is_fixed() {
    let (code, out, err) =
        nandlab(&["hunt", "--preset", "tiny", "--ftl", "dftl", "--seed", "158", "--requests", "80000"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("factory bad blocks 3%"), "the run is the one that failed: {out}");
    assert!(out.contains("result: nothing found"), "{out}");
}

/// The `page` finding's stress reproducer: `tiny` with 3 % factory bad
/// blocks and DAC hot/cold streams. Format accepted it and GC later made
/// no progress on a short die; now format refuses it (exit 2, before any
/// request), naming the die and a logical capacity that fits.
#[test]
fn format_refuses_the_page_hot_cold_device_hunt_found_failing() {
    let dir = tempfile::tempdir().unwrap();
    let preset = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/tiny.toml")).unwrap();
    let text = preset
        .replace("spare_percent = 15", "spare_percent = 15\nfactory_bad_block_percent = 3")
        .replace("write_size = \"4x\"", "write_size = \"6x\"");
    assert!(text.contains("factory_bad_block_percent = 3") && text.contains("\"6x\""));
    let config = dir.path().join("tiny-bad3.toml");
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let args = ["stress", "--config", config, "--ftl", "page", "--hot-cold", "dac", "--seed", "1", "--no-progress"];
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("failed to format the device: no free space: page: die 2 has 124 good blocks"), "{err}");
    assert!(err.contains("garbage collection needs the room of 5 groups of 64 pages"), "{err}");
    assert!(err.contains("lower the logical capacity to at most"), "{err}");
    // Without hot/cold streams (GC keeps 2 groups free) the same device runs.
    let (code, out, err) = nandlab(&["stress", "--config", config, "--ftl", "page", "--seed", "1", "--no-progress"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASS"), "{out}");
}

/// `--isolate` runs each hunt run in a watched child: an FTL that spins
/// without a flash operation (the `trim-spins-at-page-end` mutant) is
/// killed after `--hang-timeout` and reported as `ftl_hang`, with the
/// FTL call and request, and a reproducer that finds it again; the
/// correct FTL passes the same isolated runs.
#[test]
fn an_isolated_hunt_reports_a_hanging_ftl_as_ftl_hang() {
    let base = ["hunt", "--preset", "tiny", "--ftl", "page", "--isolate", "--hang-timeout", "1s", "--no-shrink"];
    let mut args = base.to_vec();
    args.extend(["--mutant", "trim-spins-at-page-end", "--runs", "6"]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FINDING ftl_hang"), "{out}");
    assert!(out.contains("nandlab_ftl_trim issued no flash operation for 1.0 s"), "{out}");
    let mut again = vec!["hunt"];
    again.extend(command_after(&out, "reproduce "));
    again.extend(["--hang-timeout", "1s"]);
    let (code, out2, err) = nandlab(&again);
    assert_eq!(code, 1, "{again:?}: {out2}{err}");
    assert!(out2.contains("FINDING ftl_hang"), "{out2}");

    let mut clean = base.to_vec();
    clean.extend(["--runs", "6"]);
    let (code, out, err) = nandlab(&clean);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("result: nothing found"), "{out}");
}

/// A guided campaign keeps its corpus on disk and prints how it grew; a
/// second campaign starts from it; a finding of a mutated run repeats
/// from its printed `--splice` reproducer; without `--guided` a campaign
/// says it is unguided.
#[test]
fn a_guided_hunt_keeps_its_corpus_and_its_mutated_findings_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let c = corpus.to_str().unwrap();
    let args = ["hunt", "--preset", "tiny", "--ftl", "dftl", "--runs", "16", "--no-shrink", "--corpus", c];
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("guidance: ") && out.contains("grew at runs 1(+"), "{out}");
    let entries = std::fs::read_dir(&corpus).unwrap().count();
    assert!(entries > 1, "{entries}");
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains(&format!("guided ({entries} corpus entries)")), "{err}");

    let mutant = ["--mutant", "evicts-trimmed-entry-without-write-back", "--runs", "16", "--stop-at-first"];
    let mut guided = vec!["hunt", "--preset", "tiny", "--ftl", "dftl", "--no-shrink", "--guided"];
    guided.extend(mutant);
    let (code, out, err) = nandlab(&guided);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FINDING trim_not_zero"), "{out}");
    let mut again = vec!["hunt"];
    again.extend(command_after(&out, "reproduce "));
    let (code, out2, err) = nandlab(&again);
    assert_eq!(code, 1, "{again:?}: {out2}{err}");
    assert!(out2.contains("FINDING trim_not_zero"), "{out2}");

    let (code, _, err) = nandlab(&["hunt", "--preset", "tiny", "--ftl", "page", "--runs", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(", unguided"), "{err}");
}

/// The two `ftl_out_of_space` findings hunt made in the unmodified `dftl`
/// (docs/design-notes/hunt.md), as their shrunk reproducers printed them:
/// seed 1003 (3 % factory bad blocks, DAC, a 3 % map cache: foreground GC
/// gave up below its threshold while the unit's spare room sat in its
/// five open groups) and seed 188 (FIFO GC whose trim write-back before
/// an erase started a nested GC, victim after victim held out of the free
/// groups). Both reported a finding before the fixes in
/// `ftl/kit/data_plane/gc.rs`; both runs are clean now.
#[test]
fn the_dftl_out_of_space_findings_of_seeds_1003_and_188_stay_fixed() {
    let runs: [&[&str]; 2] = [
        &["--seed", "1003", "--requests", "64351", "--without", "opt-copyback,opt-gc_stream"],
        &[
            "--seed",
            "188",
            "--requests",
            "15355",
            "--without",
            "idle,opt-cmt_replacement,opt-copyback,opt-gc_background_free_percent,opt-multi_plane,\
             opt-wear_leveling,sequential-runs",
        ],
    ];
    for run in runs {
        let mut args = vec!["hunt", "--preset", "tiny", "--ftl", "dftl"];
        args.extend(run);
        let (code, out, err) = nandlab(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(out.contains("0 distinct finding(s)"), "{args:?}: {out}");
    }
}

/// An FTL that loops *with* flash operations (the `trim-rereads-at-page-end`
/// mutant re-reads its page forever) is stopped by hunt's limit on the
/// flash operations of one call, without `--isolate`, and reported as
/// `ftl_hang` with a reproducer that finds it again; the correct FTL
/// passes the same runs.
#[test]
fn a_call_that_loops_issuing_flash_operations_is_ftl_hang() {
    let base = ["hunt", "--preset", "tiny", "--ftl", "page", "--runs", "6", "--no-shrink"];
    let mut args = base.to_vec();
    args.extend(["--mutant", "trim-rereads-at-page-end"]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FINDING ftl_hang"), "{out}");
    assert!(out.contains("nandlab_ftl_trim issued more than 262144 flash operations in one call"), "{out}");
    let mut again = vec!["hunt"];
    again.extend(command_after(&out, "reproduce "));
    let (code, out2, err) = nandlab(&again);
    assert_eq!(code, 1, "{again:?}: {out2}{err}");
    assert!(out2.contains("FINDING ftl_hang"), "{out2}");

    let (code, out, err) = nandlab(&base);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("result: nothing found"), "{out}");
}

/// `hunt --ftl jasmine:DIR` hunts a Jasmine firmware (built against
/// nandlab's Jasmine layer, run in a child process per run): the buggy
/// example firmware is found (`lost_write`), the minimal one is clean in
/// the same runs, and no run is refused: draws the layer cannot honour
/// (factory bad blocks, another spare) are not made for a Jasmine target.
/// Needs the system C compiler (`cc`), as `jasmine_cli` does.
#[test]
fn a_hunt_finds_the_buggy_jasmine_firmware_and_not_the_minimal_one() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let device = repo.join("examples/jasmine/jasmine-tiny.toml");
    let cache = tempfile::tempdir().unwrap();
    let hunt = |fw: &str| {
        let ftl = format!("jasmine:{}", repo.join("examples/jasmine").join(fw).display());
        let out = Command::new(env!("CARGO_BIN_EXE_nandlab"))
            .args(["hunt", "--config", device.to_str().unwrap(), "--ftl", &ftl, "--runs", "8", "--no-shrink"])
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .expect("runs");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = hunt("ftl_buggy");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FINDING lost_write"), "{out}");
    assert!(out.contains("hunt: 8 runs (0 skipped: configuration refused)"), "{out}");
    let (code, out) = hunt("ftl_minimal");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: nothing found"), "{out}");
    assert!(out.contains("hunt: 8 runs (0 skipped: configuration refused)"), "{out}");
}
