//! Options and files that size the run's memory are bounded, and crash
//! campaigns refuse options that would be dropped or that test nothing:
//! each is bad input, exit 2 before any work, naming the option and the bound.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn refused(args: &[&str], needles: &[&str]) {
    let (code, out, err) = nandlab(args);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: expected `{n}` in: {err}");
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(!out.contains("PASS"), "{args:?}: nothing ran: {out}");
}

#[test]
fn oracle_unit_must_be_a_power_of_two_up_to_65536_sectors() {
    for mode in ["stress", "perf", "crash"] {
        for bad in ["0", "3", "131072", "4294967295"] {
            let preset = if mode == "perf" { "tiny-timed" } else { "tiny" };
            refused(
                &[mode, "--preset", preset, "--oracle-unit", bad, "--write_size", "0.1x"],
                &["--oracle-unit", "power of two", "65536"],
            );
        }
    }
    let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--oracle-unit", "8", "--write_size", "0.1x"]);
    assert_eq!(code, 0, "a power of two is accepted: {out}{err}");
}

#[test]
fn a_config_file_that_never_ends_is_refused_past_1_mib() {
    if !std::path::Path::new("/dev/zero").exists() {
        return;
    }
    refused(&["stress", "--config", "/dev/zero"], &["/dev/zero", "at most 1 MiB"]);
}

#[test]
fn a_config_file_over_1_mib_is_refused() {
    let path = std::env::temp_dir().join(format!("nandlab-big-config-{}.toml", std::process::id()));
    let mut text = String::from("# padding\n");
    while text.len() <= 1 << 20 {
        text.push_str("# a comment line that pads the file past the bound\n");
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap().to_string();
    let (code, _, err) = nandlab(&["stress", "--config", &p]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&p) && err.contains("at most 1 MiB"), "{err}");
}

#[test]
fn crash_points_past_one_million_are_refused() {
    refused(&["crash", "--preset", "tiny", "--crash-points", "1000000000"], &["--crash-points", "at most 1000000"]);
}

#[test]
fn crash_every_with_an_endless_span_is_refused() {
    refused(
        &["crash", "--preset", "tiny", "--crash-every", "1", "--crash-span", "18446744073709551615"],
        &["--crash-every", "at most 1000000"],
    );
}

#[test]
fn a_crash_span_past_the_end_of_the_workload_is_refused_instead_of_testing_nothing() {
    refused(
        &["crash", "--preset", "tiny", "--max-requests", "50", "--crash-span", "2000000", "--crash-points", "5"],
        &["--crash-span 2000000", "--crash-points", "test nothing"],
    );
    // A warm-up longer than the workload leaves an empty window.
    refused(
        &[
            "crash",
            "--preset",
            "tiny",
            "--max-requests",
            "50",
            "--warmup",
            "1x",
            "--crash-span",
            "10",
            "--crash-every",
            "1",
        ],
        &["--crash-span 10", "--crash-every", "test nothing"],
    );
    // So does a window emptied by the warm-up, without a span.
    refused(
        &["crash", "--preset", "tiny", "--max-requests", "50", "--warmup", "1x", "--crash-every", "1"],
        &["--crash-every", "test nothing"],
    );
    // A span inside the workload still runs.
    let (code, out, err) = nandlab(&[
        "crash",
        "--preset",
        "tiny",
        "--max-requests",
        "50",
        "--crash-span",
        "20",
        "--crash-points",
        "2",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn crash_at_with_options_it_would_drop_is_refused_naming_both() {
    for other in [
        ["--crash-points", "5"],
        ["--crash-every", "3"],
        ["--crash-span", "100"],
        ["--crash-phase", "during"],
        ["--warmup", "1x"],
    ] {
        refused(&["crash", "--preset", "tiny", "--crash-at", "1000", other[0], other[1]], &["--crash-at", other[0]]);
    }
}
