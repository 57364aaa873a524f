//! The media reliability options on the command line: `--reliability`,
//! `--fail` and the `[reliability]` table are checked before any work
//! (exit 2 naming the option or file, line and key); a run with them
//! reports its media section (text and JSON); `crash` takes it; modes
//! that do not support the model yet refuse it.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SMALL: [&str; 9] =
    ["stress", "--preset", "tiny", "--no-progress", "--seed", "3", "--rw", "randwrite", "--io_size"];

#[test]
fn bad_reliability_options_exit_2_naming_the_option_and_the_reason() {
    for (extra, expect) in [
        (&["--reliability", "preset:xlc"][..], "--reliability preset:xlc: `preset`: unknown preset `xlc`"),
        (&["--reliability", "preset:tlc,floor=7"][..], "`floor`: must be within 0..=0.5"),
        (&["--reliability", "tlc"][..], "expected preset:NAME or KEY=VALUE"),
        (&["--reliability", "preset:tlc,colour=1"][..], "unknown field `colour`"),
        (&["--fail", "erase@block=3"][..], "--fail needs the reliability model on"),
        (&["--reliability", "preset:tlc", "--fail", "erase@block=9999"][..], "--fail erase@block=9999"),
        (&["--reliability", "preset:tlc", "--fail", "read@block=1"][..], "unknown operation `read`"),
        (&["--reliability", "preset:tlc", "--fail", "program@block=1"][..], "missing page"),
    ] {
        let mut args = SMALL.to_vec();
        args.push("1m");
        args.extend_from_slice(extra);
        let (code, out, err) = nandlab(&args);
        assert_eq!(code, 2, "{extra:?}: {out}{err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(!out.contains("nandlab stress"), "no work done: {out}");
    }
}

#[test]
fn a_bad_reliability_table_names_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("nandlab-reliability-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let preset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/tiny.toml");
    let text = std::fs::read_to_string(preset).unwrap() + "\n[reliability]\npreset = \"mlc\"\nread_retries = 500\n";
    let line = text.lines().position(|l| l.starts_with("read_retries")).unwrap() + 1;
    let file = dir.join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let (code, out, err) = nandlab(&["stress", "--config", file.to_str().unwrap(), "--no-progress"]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(&format!("bad.toml:{line}")) && err.contains("reliability.read_retries"), "{err}");
    assert!(err.contains("at most 64"), "{err}");
}

#[test]
fn an_exact_failure_is_handled_and_reported_in_text_and_json() {
    let dir = std::env::temp_dir().join(format!("nandlab-reliability-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let mut args = SMALL.to_vec();
    args.extend_from_slice(&["8m", "--reliability", "preset:tlc", "--fail", "program@block=0,page=0", "--remount"]);
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("media      tlc: 1 grown bad blocks (1 program, 0 erase failures"), "{out}");
    assert!(out.contains("retired_blocks 1") && out.contains("PASS"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(report["reliability"]["program_failures"], 1);
    assert_eq!(report["reliability"]["grown_bad_blocks"], 1);
    assert_eq!(report["reliability"]["preset"], "tlc");
}

#[test]
fn modes_without_the_model_refuse_it_before_any_work() {
    for mode in ["hunt"] {
        let (code, out, err) = nandlab(&[mode, "--preset", "tiny", "--reliability", "preset:tlc"]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains(&format!("{mode} does not support the media reliability model yet")), "{mode}: {err}");
    }
}

/// `crash` takes the model: bit errors alone pass on the example device;
/// one exact program failure shows the retirement window every FTL has
/// today (a cut after the failure, before the failed block's other pages
/// were moved, loses them: see the README), found, shrunk and with a
/// reproducer that takes the failure along.
#[test]
fn crash_takes_the_model_and_survives_the_retirement_window() {
    let base = ["crash", "--config", "../../examples/reliability/tlc-failing.toml", "--ftl", "page", "--seed", "5"];
    let quiet = ["--io_size", "4m", "--no-progress", "--threads", "1"];
    let rber = "preset:tlc,program_fail_probability=0,erase_fail_probability=0";
    let mut args = base.to_vec();
    args.extend_from_slice(&quiet);
    args.extend_from_slice(&["--reliability", rber]);
    let mut rber_only = args.clone();
    rber_only.extend_from_slice(&["--crash-points", "20"]);
    let (code, out, err) = nandlab(&rber_only);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("20 tested, 20 passed, 0 failed"), "{out}");
    // The program of block 0, page 12 is operation 608 with this seed: a
    // cut during it passes (the failure never happened); a cut right
    // after it falls in the retirement window, which the mount closes by
    // scanning the grown bad block (it lost data before: issue 21).
    args.extend_from_slice(&["--fail", "program@block=0,page=12", "--crash-at", "608:during", "--crash-at", "609"]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 tested, 2 passed, 0 failed") && out.contains("PASS"), "{out}");
}

#[test]
fn the_media_rules_are_listed() {
    let (code, out, _) = nandlab(&["rules"]);
    assert_eq!(code, 0);
    for rule in
        ["lost_after_program_failure", "used_bad_block", "uncorrectable_returned_as_data", "read_error_on_good_data"]
    {
        let line = out.lines().find(|l| l.starts_with(rule)).unwrap_or_else(|| panic!("{rule}: {out}"));
        assert!(line.contains("media") && line.contains("default error"), "{line}");
    }
}

#[test]
fn block_mapped_ftls_replace_failed_blocks_and_a_mutant_that_does_not_is_caught() {
    // Programs of any cause fail 1 in 5,000 (host pages, merge copies,
    // pads). `hybrid` keeps half its spare blocks free to replace them.
    let reliability = "preset:tlc,program_fail_probability=0.0002";
    for (ftl, opt) in [("block", None), ("hybrid", Some("random_log_blocks=\"50%\""))] {
        let mut args = SMALL.to_vec();
        args.extend_from_slice(&["16m", "--ftl", ftl, "--reliability", reliability, "--remount"]);
        if let Some(opt) = opt {
            args.extend_from_slice(&["--ftl-opt", opt]);
        }
        let (code, out, err) = nandlab(&args);
        assert_eq!(code, 0, "{ftl}: {out}{err}");
        assert!(out.contains("grown bad blocks") && out.contains("retired_blocks") && out.contains("PASS"), "{out}");
        args.extend_from_slice(&["--mutant", "keeps-failed-program"]);
        let (code, out, err) = nandlab(&args);
        assert_ne!(code, 0, "{ftl}: the mutant passed: {out}{err}");
        assert!(out.contains("used_bad_block"), "{ftl}: {out}{err}");
    }
}

#[test]
fn optr_retires_failed_blocks_and_a_mutant_that_keeps_a_failed_page_is_caught() {
    // Programs fail 1 in 1,000, and the first log block's sixth page
    // (metadata: the reserved blocks are chosen again); the remount reads
    // every sector back.
    let mut args = SMALL.to_vec();
    args.extend_from_slice(&["16m", "--ftl", "optr", "--reliability", "preset:tlc,program_fail_probability=0.001"]);
    args.extend_from_slice(&["--fail", "program@block=191,page=5", "--remount"]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("grown bad blocks") && out.contains("retired_blocks") && out.contains("PASS"), "{out}");
    assert!(out.contains("fresh FTL mounted"), "{out}");
    args.extend_from_slice(&["--mutant", "keeps-failed-program"]);
    let (code, out, err) = nandlab(&args);
    assert_ne!(code, 0, "the mutant passed: {out}{err}");
    assert!(out.contains("lost_after_program_failure"), "{out}{err}");
}
