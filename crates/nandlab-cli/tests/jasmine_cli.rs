//! Jasmine OpenSSD firmware through nandlab's layer (`compat/jasmine`):
//! `nandlab jasmine build` and `--ftl jasmine:DIR`. The firmware written
//! here against the Jasmine API (`examples/jasmine/`) passes stress with a
//! remount and a crash campaign on the Jasmine-shaped test device; the one
//! with a known bug is caught by the rule it breaks; the test firmwares of
//! `tests/jasmine_fw/` prove the bad-input reports: a tree that does not
//! compile, a board function the layer lacks, a busy wait that never
//! ends, a store outside the board's memory, a page mixing host data and
//! firmware bytes, an interrupt handler that never clears the flags. The
//! board's flash interrupt reaches `ftl_isr` (a failing erase, which
//! `ftl_minimal` retires; without the interrupt set-up it is caught), and
//! `FC_MODIFY_COPYBACK` keeps host data's identity (`ftl_copyback`; the
//! wrong data address is caught). `mem_search_min_max` (greedy's victim
//! search, specialised in the layer) agrees with an item-by-item search
//! (`search_check`; a reference broken on ties is caught). A change to a
//! file a firmware includes from outside its directory rebuilds it. Builds
//! go to a temporary cache (`XDG_CACHE_HOME`); the
//! system C compiler (`cc`) is required, as for the C FTL tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn firmware(name: &str) -> String {
    let p = if name.starts_with("ftl_") {
        repo().join("examples/jasmine").join(name)
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jasmine_fw").join(name)
    };
    p.to_str().unwrap().to_string()
}

fn device() -> String {
    repo().join("examples/jasmine/jasmine-tiny.toml").to_str().unwrap().to_string()
}

/// One build cache for the whole test binary, outside the user's home.
fn cache() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn nandlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(args)
        .env("XDG_CACHE_HOME", cache())
        .output()
        .expect("nandlab runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn stress(fw: &str, extra: &[&str]) -> Output {
    let ftl = format!("jasmine:{}", firmware(fw));
    let mut args = vec!["stress", "--config", &device(), "--ftl", &ftl, "--no-progress", "--seed", "5"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    args.extend(extra.iter().map(|s| s.to_string()));
    nandlab(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn the_minimal_jasmine_ftl_passes_stress_with_garbage_collection_and_a_remount() {
    let o = stress("ftl_minimal", &["--write_size", "120m", "--remount"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS"), "{out}");
    assert!(out.contains("remount    clean power cycle, fresh FTL mounted, 212992 sectors verified"), "{out}");
    // Garbage collection moved pages through the board's copy buffers.
    let moved = out.lines().find(|l| l.trim_start().starts_with("GC")).unwrap();
    assert!(!moved.contains(" 0 pages moved"), "{moved}");
    assert!(out.contains("FTL lib:ftl_minimal"), "{out}");
}

#[test]
fn the_minimal_jasmine_ftl_survives_power_cuts_on_one_thread() {
    let ftl = format!("jasmine:{}", firmware("ftl_minimal"));
    let o = nandlab(&[
        "crash",
        "--config",
        &device(),
        "--ftl",
        &ftl,
        "--write_size",
        "8m",
        "--crash-points",
        "12",
        "--seed",
        "3",
        "--threads",
        "2",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("12 tested, 12 passed, 0 failed"), "{out}");
    assert!(err.contains("runs one instance per process: the campaign runs on one thread"), "{err}");
    assert!(out.contains("1 threads"), "{out}");
}

#[test]
fn the_buggy_jasmine_ftl_is_caught_by_the_read_check() {
    let o = stress("ftl_buggy", &["--write_size", "30m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("[Error] lost_write"), "{out}");
    assert!(out.contains("Reproduce with:") && out.contains("--ftl jasmine:"), "{out}");
}

/// The media model with one failing erase and no random failures: the
/// erase of block 3 (bank 0's first data block) fails the first time.
const FAILING_ERASE: [&str; 4] =
    ["--reliability", "preset:mlc,program_fail_probability=0,erase_fail_probability=0", "--fail", "erase@block=3"];

fn stat(out: &str, key: &str) -> u64 {
    let line = out.lines().find(|l| l.trim_start().starts_with("ftl ")).unwrap_or_else(|| panic!("{out}"));
    let at = line.find(&format!("{key} ")).unwrap_or_else(|| panic!("no {key} in {line}")) + key.len() + 1;
    line[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn the_minimal_jasmine_ftl_retires_a_block_whose_erase_fails_through_its_ftl_isr() {
    let mut args = vec!["--write_size", "60m", "--remount"];
    args.extend(FAILING_ERASE);
    let o = stress("ftl_minimal", &args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS"), "{out}");
    assert!(out.contains("1 grown bad blocks (0 program, 1 erase failures"), "{out}");
    // The board called the firmware's interrupt handler for it, once.
    assert_eq!(stat(&out, "jasmine_interrupts"), 1, "{out}");
}

#[test]
fn a_firmware_that_never_takes_the_flash_interrupt_writes_into_the_failed_block() {
    // ftl_minimal without its INTR_MASK set-up: ftl_isr is never called.
    let mut args = vec!["--write_size", "10m"];
    args.extend(FAILING_ERASE);
    let o = stress("no_interrupts", &args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("[Error] used_bad_block") && out.contains("program of grown bad block 3"), "{out}");
    assert_eq!(stat(&out, "jasmine_interrupts"), 0, "{out}");
}

#[test]
fn an_interrupt_handler_that_leaves_the_flags_set_is_reported() {
    let o = stress("isr_keeps_flags", &["--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("ftl_isr returned with bank 0's interrupt flags 0x20 still set (INTR_MASK 0x20)"), "{out}");
}

#[test]
fn modified_copybacks_keep_the_identity_of_host_data() {
    let o = stress("ftl_copyback", &["--write_size", "120m", "--remount"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("result     PASS"), "{out}");
    assert!(out.contains("remount    clean power cycle, fresh FTL mounted, 212992 sectors verified"), "{out}");
    assert!(stat(&out, "jasmine_modified_copybacks") > 100, "{out}");
}

#[test]
fn a_modified_copyback_given_the_wrong_data_address_is_caught_by_the_read_check() {
    let o = stress("copyback_wrong_address", &["--write_size", "30m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("[Error] lost_write"), "{out}");
}

#[test]
fn a_firmware_tree_that_does_not_compile_is_exit_2_with_the_compilers_errors() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("x.so");
    let o = nandlab(&["jasmine", "build", &firmware("does_not_compile"), "-o", so.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("does not compile against nandlab's Jasmine layer"), "{err}");
    assert!(err.contains("does_not_compile/ftl.c:") && err.contains("error: expected"), "{err}");
    assert!(!so.exists());
    // The same through --ftl jasmine:DIR, before any work.
    let o = stress("does_not_compile", &["--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("--ftl jasmine:") && err.contains("error: expected"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn a_board_function_the_layer_lacks_is_named_at_build_time() {
    let o = stress("missing_api", &["--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("calls a board function that nandlab's Jasmine layer does not implement: `test_nand_blocks`"),
        "{err}"
    );
}

#[test]
fn a_busy_wait_that_never_ends_is_reported_with_the_register_and_function() {
    let o = stress("busy_wait", &["--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("busy wait that never ends: the firmware polls SATA_WBUF_PTR (0x70000194)"), "{out}");
    assert!(out.contains("jasmine layer (ftl_write)") && out.contains("`ftl_write`"), "{out}");
    // The layer's own failure keeps its code and is not called something
    // it is not (it used to read "no free space: ...").
    assert!(out.contains("error code 900"), "{out}");
    assert!(!out.contains("no free space"), "{out}");
}

#[test]
fn a_store_outside_the_board_memory_is_reported_with_its_address() {
    let o = stress("out_of_region", &["--write_size", "1m", "--isolate"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("the firmware accessed address 0x0000000043e10800 outside the emulated board memory")
            && err.contains("in ftl_write"),
        "{err}"
    );
    assert!(out.contains("[Error] ftl_crash") && out.contains("SIGSEGV in nandlab_ftl_write"), "{out}");
}

#[test]
fn a_page_mixing_host_sectors_and_firmware_bytes_is_reported() {
    let o = stress("mixed_page", &["--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("mixes") && out.contains("host sectors with 1 sectors of bytes the firmware wrote"), "{out}");
}

#[test]
fn a_library_built_for_another_geometry_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("minimal-vst.so");
    // Built for the default device, vst-jasmine (4152 blocks per bank).
    let o = nandlab(&["jasmine", "build", &firmware("ftl_minimal"), "-o", so.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = nandlab(&["stress", "--config", &device(), "--ftl-lib", so.to_str().unwrap(), "--write_size", "1m"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("the firmware was built for banks (channels x chips_per_channel x dies_per_chip) = 8, the device has 4 (rebuild it for this geometry)"), "{err}");
}

#[test]
fn a_device_no_jasmine_board_can_have_is_refused() {
    let o = nandlab(&["stress", "--preset", "tiny", "--ftl", &format!("jasmine:{}", firmware("ftl_minimal"))]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("a Jasmine board cannot have planes_per_die = 2"), "{err}");
}

#[test]
fn ftls_describes_a_jasmine_firmware_built_for_the_device() {
    let ftl = format!("jasmine:{}", firmware("ftl_minimal"));
    let o = nandlab(&["ftls", "--ftl", &ftl, "--config", &device()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.starts_with("lib:ftl_minimal — library FTL"), "{out}");
    assert!(out.contains("ABI version 1") && out.contains("device `jasmine-tiny`"), "{out}");
    assert!(out.contains("one instance per process") && out.contains("options: none"), "{out}");
    // A tree that does not build: exit 2 with the compiler's errors.
    let bad = format!("jasmine:{}", firmware("does_not_compile"));
    let o = nandlab(&["ftls", "--ftl", &bad, "--config", &device()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("error: expected"), "{err}");
}

#[test]
fn a_directory_without_ftl_c_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = nandlab(&["jasmine", "build", dir.path().to_str().unwrap(), "-o", "x.so"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("no ftl.c"), "{err}");
}

#[test]
fn mem_search_min_max_agrees_with_an_item_by_item_search() {
    let o = stress("search_check", &["--write_size", "1m", "--isolate"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("PASS"), "{out}");
    assert!(!err.contains("outside the emulated board memory"), "{err}");
}

#[test]
fn a_search_reference_that_takes_the_last_of_a_tie_is_caught_by_the_check() {
    let o = stress("search_check_broken", &["--write_size", "1m", "--isolate"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("the firmware accessed address 0x0000000000000008 outside the emulated board memory")
            && err.contains("in ftl_open"),
        "{err}"
    );
}

/// The build cache's key covers files a firmware includes from outside its
/// directory: `search_check_broken/ftl.c` includes `../search_check/ftl.c`;
/// after that file changes (its broken reference removed), the same
/// directory must be rebuilt, not served from the cache.
#[test]
fn a_change_to_a_file_included_from_outside_the_firmware_directory_rebuilds_it() {
    let tree = tempfile::tempdir().unwrap();
    for name in ["search_check", "search_check_broken"] {
        std::fs::create_dir(tree.path().join(name)).unwrap();
        // The copies include the repository's examples by absolute path.
        let examples = format!("{}/", repo().join("examples").display());
        for file in ["ftl.c", "ftl.h"] {
            let text = std::fs::read_to_string(Path::new(&firmware(name)).join(file)).unwrap();
            std::fs::write(tree.path().join(name).join(file), text.replace("../../../../../examples/", &examples))
                .unwrap();
        }
    }
    let broken = tree.path().join("search_check_broken");
    let run = || {
        let ftl = format!("jasmine:{}", broken.display());
        nandlab(&[
            "stress",
            "--config",
            &device(),
            "--ftl",
            &ftl,
            "--no-progress",
            "--seed",
            "5",
            "--write_size",
            "1m",
            "--isolate",
        ])
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    let outside = tree.path().join("search_check/ftl.c");
    let source = std::fs::read_to_string(&outside).unwrap();
    assert!(source.contains("#ifdef SEARCH_CHECK_BROKEN\n"), "the test firmware changed shape");
    std::fs::write(&outside, source.replace("#ifdef SEARCH_CHECK_BROKEN\n", "#ifdef SEARCH_CHECK_BROKEN_NEVER\n"))
        .unwrap();
    let o = run();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "a stale cached build ran:\n{out}\n{err}");
    assert!(out.contains("PASS"), "{out}");
}
