//! Before a run allocates anything, its memory is estimated from the
//! device, FTL, oracle unit and mode; past the limit (`--max-memory`, or
//! the machine's available memory) it is bad input: exit 2 with the
//! estimate, its largest parts and what to change.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// An 8 TiB device of 2^31 pages of 4 KiB (the example).
fn huge_device() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "nandlab-huge-{}-{:?}.toml",
        std::process::id(),
        std::thread::current().id()
    ));
    let text = "name = \"huge\"\n\
                [geometry]\nchannels = 8\nchips_per_channel = 8\ndies_per_chip = 2\nplanes_per_die = 4\n\
                blocks_per_plane = 8192\npages_per_block = 512\npage_size_bytes = 4096\noob_size_bytes = 128\n\
                sector_size_bytes = 4096\ncell_type = \"slc\"\npartial_programs_per_page = 1\n\
                [device]\nspare_percent = 7\n";
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_huge_device_is_refused_with_the_estimate_before_allocating() {
    let path = huge_device();
    let p = path.to_str().unwrap();
    for mode in ["stress", "crash"] {
        let (code, out, err) = nandlab(&[mode, "--config", p, "--max-memory", "64GiB", "--seed", "1"]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains("this run needs about") && err.contains("GiB"), "{mode}: {err}");
        assert!(err.contains("NAND page state") && err.contains("oracle"), "{mode}: the parts are named: {err}");
        assert!(err.contains("--max-memory is 64.0 GiB"), "{mode}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn without_max_memory_the_limit_is_the_machines_available_memory() {
    if !std::path::Path::new("/proc/meminfo").exists() {
        return; // no check where the available memory is unknown
    }
    // 256 drives of 8 TiB at once: more than any machine has.
    let path = huge_device();
    let (code, out, err) =
        nandlab(&["crash", "--config", path.to_str().unwrap(), "--threads", "256", "--crash-points", "256"]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("the machine has") && err.contains("available"), "{err}");
    assert!(err.contains("pass --max-memory") && err.contains("--threads"), "{err}");
}

#[test]
fn max_memory_1mib_refuses_even_tiny() {
    for (mode, preset) in [("stress", "tiny"), ("perf", "tiny-timed"), ("crash", "tiny")] {
        let (code, out, err) = nandlab(&[mode, "--preset", preset, "--max-memory", "1MiB", "--seed", "1"]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains("this run needs about") && err.contains("--max-memory is 1.0 MiB"), "{mode}: {err}");
        assert!(out.is_empty(), "{mode}: nothing ran: {out}");
    }
    let (code, _, err) = nandlab(&["stress", "--preset", "tiny", "--max-memory", "lots"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-memory"), "{err}");
}

#[test]
fn a_max_memory_above_the_estimate_lets_tiny_run() {
    let (code, out, err) =
        nandlab(&["stress", "--preset", "tiny", "--max-memory", "1GiB", "--write_size", "0.1x", "--seed", "1"]);
    assert_eq!(code, 0, "{out}{err}");
}
