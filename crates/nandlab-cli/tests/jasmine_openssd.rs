//! The real OpenSSD 1.1.0 firmware (GPL-3.0, never in this repository)
//! through nandlab's Jasmine layer, when `NANDLAB_JASMINE_SRC` names a
//! checkout of openssd/jasmine: the repository root or its
//! `OpenSSD-1.1.0` directory. Each of the four FTLs must build unmodified
//! for `vst-jasmine` and run a short `stress --remount` to its report; the
//! firmware bugs that report shows are explained in docs/jasmine.md. Without
//! the variable the test says it was skipped (also in CI).

use std::path::{Path, PathBuf};
use std::process::Command;

fn openssd() -> Option<PathBuf> {
    let root = PathBuf::from(std::env::var_os("NANDLAB_JASMINE_SRC")?);
    [root.clone(), root.join("OpenSSD-1.1.0")].into_iter().find(|d| d.join("ftl_greedy/ftl.c").is_file())
}

#[test]
fn the_four_openssd_ftls_build_unmodified_and_run_stress_with_a_remount() {
    let Some(src) = openssd() else {
        eprintln!(
            "SKIPPED: NANDLAB_JASMINE_SRC is not set (or holds no ftl_greedy/ftl.c): \
             set it to a checkout of openssd/jasmine to run the OpenSSD 1.1.0 FTLs"
        );
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    for ftl in ["ftl_greedy", "ftl_dac", "ftl_faster", "ftl_tutorial"] {
        let dir = src.join(ftl);
        let so = cache.path().join(format!("{ftl}.so"));
        let nandlab = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_nandlab"))
                .args(args)
                .env("XDG_CACHE_HOME", cache.path())
                .output()
                .expect("nandlab runs")
        };
        let o = nandlab(&["jasmine", "build", dir.to_str().unwrap(), "-o", so.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{ftl}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(Path::new(&so).is_file());
        let o = nandlab(&[
            "stress",
            "--preset",
            "vst-jasmine",
            "--ftl",
            &format!("jasmine:{}", dir.display()),
            "--write_size",
            "8m",
            "--remount",
            "--seed",
            "1",
            "--no-progress",
            "--rule",
            "unwritten_not_zero=allow",
        ]);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        // A report, with or without findings: never a bad-input refusal, a
        // crash or a hang.
        assert!(matches!(o.status.code(), Some(0 | 1)), "{ftl}: {out}\n{err}");
        assert!(out.contains("result     "), "{ftl}: {out}");
        assert!(out.contains(&format!("FTL lib:{ftl}")), "{ftl}: {out}");
        // Never a report of the layer itself (its error code 900).
        assert!(!out.contains("jasmine layer"), "{ftl}: a layer error\n{out}");
        eprintln!("{ftl}: {}", out.lines().find(|l| l.contains("result     ")).unwrap_or(""));
    }
}
