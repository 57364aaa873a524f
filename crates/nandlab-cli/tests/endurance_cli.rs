//! `nandlab endurance` on the command line: bad options and a missing
//! reliability model exit 2 before any work; a run prints its projection
//! and, to the end of life, exits 0 when nothing but the end was found.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const RUN: [&str; 16] = [
    "endurance",
    "--preset",
    "tiny",
    "--seed",
    "1",
    "--rw",
    "randrw",
    "--rwmixread",
    "50",
    "--bs",
    "4k",
    "--ftl-opt",
    "multi_plane=false",
    "--ftl-opt",
    "wear_leveling=dynamic",
    "--reliability=preset:tlc,endurance_pe=40,wear_coefficient=1.5e-5,read_retries=1",
];

#[test]
fn bad_endurance_options_exit_2_naming_the_option_before_any_work() {
    for (extra, expect) in [
        (&["--warranty-years", "0"][..], "--warranty-years"),
        (&["--project-after=0"][..], "--project-after"),
        (&["--max-writes", "2"][..], "--max-writes"),
        (&["--until", "forever"][..], "invalid value 'forever'"),
    ] {
        let mut args = RUN.to_vec();
        args.extend_from_slice(extra);
        let (code, out, err) = nandlab(&args);
        assert_eq!(code, 2, "{extra:?}: {out}{err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(!out.contains("projected"), "no work done: {out}");
    }
    let (code, _, err) = nandlab(&RUN[..15]);
    assert_eq!(code, 2);
    assert!(err.contains("needs the media reliability model"), "{err}");
}

#[test]
fn a_projection_and_a_run_to_end_of_life_report_when_the_drive_wears_out() {
    let (code, out, err) = nandlab(&RUN);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("  lifetime   TBW ") && out.contains("DWPD over 5 years"), "{out}");
    assert!(!out.contains("end of life"), "a projection only: {out}");
    let mut args = RUN.to_vec();
    args.extend_from_slice(&["--until", "worn-out"]);
    let (code, out, err) = nandlab(&args);
    assert_eq!(code, 0, "the end of life is not a finding: {out}{err}");
    assert!(out.contains("END OF LIFE") && out.contains("end of life reached: first uncorrectable read at "), "{out}");
}
