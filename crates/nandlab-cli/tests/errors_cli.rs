//! Bad input found after parsing, and conflicting options: exit 2 naming
//! the file, line and key, or the options, and what was expected.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bs_and_bsrange_together_exit_2_naming_both() {
    for mode in ["stress", "crash"] {
        let (code, out, err) = nandlab(&[mode, "--preset", "tiny", "--bs", "4k", "--bsrange", "4k-16k"]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains("--bs") && err.contains("--bsrange"), "{mode}: {err}");
    }
}

#[test]
fn a_gc_free_percent_that_is_not_a_number_from_0_to_100_exits_2_naming_the_option() {
    for value in ["nan", "-5", "inf"] {
        let opt = format!("gc_foreground_free_percent={value}");
        let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--write_size", "0.1x", "--ftl-opt", &opt]);
        assert_eq!(code, 2, "{value}: {out}{err}");
        assert!(err.contains("gc_foreground_free_percent") && err.contains("0 to 100"), "{value}: {err}");
    }
}
