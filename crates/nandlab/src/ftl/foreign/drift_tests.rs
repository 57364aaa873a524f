//! The header and the Rust side must not drift: this test writes a C file
//! of `_Static_assert`s — every struct's size and every field's offset as
//! the Rust `#[repr(C)]` mirror has them, every constant as Rust defines
//! it (error codes from [`FlashError::ALL`] and [`FtlError`], causes from
//! [`Cause::ALL`], the ABI version, the message size) and the exported
//! functions' prototypes — and compiles it against `include/nandlab.h` with
//! the system C compiler (`cc -Wall -Wextra -Werror -std=c11`). A copy with
//! one offset wrong must fail to compile, so the check can fail.

use super::*;
use crate::flash::{Cause, FlashError};
use crate::ftl::FtlError;
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

fn include_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

macro_rules! layout {
    ($out:expr, $c:literal, $t:ty, [$($f:ident),* $(,)?]) => {{
        let _ = writeln!($out, "_Static_assert(sizeof({}) == {}, \"sizeof {}\");", $c, size_of::<$t>(), $c);
        $(
            let _ = writeln!(
                $out,
                "_Static_assert(offsetof({}, {}) == {}, \"offset of {}.{}\");",
                $c, stringify!($f), offset_of!($t, $f), $c, stringify!($f)
            );
        )*
    }};
}

/// The C checks, as the Rust definitions say they must hold.
fn checks() -> String {
    let mut c = String::from("#include <stddef.h>\n#include \"nandlab.h\"\n\n");
    layout!(
        c,
        "nandlab_geometry",
        CGeometry,
        [
            channels,
            chips_per_channel,
            dies_per_chip,
            planes_per_die,
            blocks_per_plane,
            pages_per_block,
            page_size_bytes,
            oob_size_bytes,
            sector_size_bytes,
            sectors_per_page,
            bits_per_cell,
            partial_programs_per_page,
            dies,
            planes,
            blocks,
            reserved,
            pages
        ]
    );
    layout!(c, "nandlab_env", CEnv, [geometry, logical_sectors, dram_budget_bytes, seed]);
    layout!(c, "nandlab_option", COption, [key, value]);
    layout!(c, "nandlab_info", CInfo, [name, guarantee, oob_bytes]);
    layout!(c, "nandlab_request", CRequest, [id, lba, sectors, reserved, buf]);
    layout!(c, "nandlab_program_op", CProgramOp, [page, src, src_sector, reserved, oob, oob_len]);
    layout!(c, "nandlab_read_op", CReadOp, [page, dst, dst_sector, reserved]);
    layout!(c, "nandlab_copyback_op", CCopybackOp, [src, dst, oob, oob_len]);
    layout!(c, "nandlab_stat", CStat, [key, value]);
    layout!(c, "nandlab_option_doc", COptionDoc, [name, default_value, help]);
    layout!(
        c,
        "nandlab_flash",
        CFlash,
        [
            ctx,
            read,
            read_oob,
            read_meta,
            read_meta_at,
            program,
            program_meta,
            copyback,
            erase,
            program_multi,
            read_multi,
            erase_multi,
            copyback_multi,
            buf_alloc,
            buf_free,
            buf_copy,
            buf_zero,
            is_factory_bad,
            dram_budget_bytes,
            now_ns,
            die_busy_until_ns,
            prefetch_page,
            prefetch_meta
        ]
    );
    let mut constant = |name: &str, value: i64| {
        let _ = writeln!(c, "_Static_assert({name} == {value}, \"{name}\");");
    };
    constant("NANDLAB_ABI_VERSION", i64::from(ABI_VERSION));
    constant("NANDLAB_MSG_BYTES", MSG_BYTES as i64);
    constant("NANDLAB_OK", 0);
    for e in FlashError::ALL {
        let name = match e {
            FlashError::AddressOutOfRange => "ADDRESS_OUT_OF_RANGE",
            FlashError::BadBlock => "BAD_BLOCK",
            FlashError::ProgramFailed => "PROGRAM_FAILED",
            FlashError::EraseFailed => "ERASE_FAILED",
            FlashError::Uncorrectable => "UNCORRECTABLE",
            FlashError::PowerLoss => "POWER_LOSS",
            FlashError::OobTooLong => "OOB_TOO_LONG",
            FlashError::InvalidBuffer => "INVALID_BUFFER",
            FlashError::DramExhausted => "DRAM_EXHAUSTED",
            FlashError::InvalidArgument => "INVALID_ARGUMENT",
        };
        constant(&format!("NANDLAB_E_{name}"), i64::from(e.code()));
    }
    constant("NANDLAB_E_OUT_OF_RANGE", i64::from(FtlError::CODE_OUT_OF_RANGE));
    constant("NANDLAB_E_NO_SPACE", i64::from(FtlError::CODE_NO_SPACE));
    constant("NANDLAB_E_MOUNT", i64::from(FtlError::CODE_MOUNT));
    constant("NANDLAB_E_DRAM", i64::from(FtlError::CODE_DRAM));
    for cause in Cause::ALL {
        constant(&format!("NANDLAB_CAUSE_{}", cause.name().to_uppercase()), cause as i64);
    }
    // The values the adapter decodes (adapter.rs).
    constant("NANDLAB_GUARANTEE_BASELINE", 0);
    constant("NANDLAB_GUARANTEE_OPTR", 1);
    constant("NANDLAB_DURABLE", 0);
    constant("NANDLAB_VOLATILE", 1);
    constant("NANDLAB_IDLE_NOTHING", 0);
    constant("NANDLAB_IDLE_WORKED", 1);
    // The prototypes, as library.rs looks them up.
    for (name, ty) in [
        ("nandlab_ftl_abi_version", "uint32_t (*)(void)"),
        ("nandlab_ftl_create", "void *(*)(const nandlab_env *, const nandlab_option *, size_t, char *, size_t)"),
        ("nandlab_ftl_destroy", "void (*)(void *)"),
        ("nandlab_ftl_info", "void (*)(const void *, nandlab_info *)"),
        ("nandlab_ftl_format", "int32_t (*)(void *, const nandlab_flash *, char *, size_t)"),
        ("nandlab_ftl_mount", "int32_t (*)(void *, const nandlab_flash *, char *, size_t)"),
        ("nandlab_ftl_read", "int32_t (*)(void *, const nandlab_flash *, const nandlab_request *, char *, size_t)"),
        (
            "nandlab_ftl_write",
            "int32_t (*)(void *, const nandlab_flash *, const nandlab_request *, uint32_t *, char *, size_t)",
        ),
        ("nandlab_ftl_trim", "int32_t (*)(void *, const nandlab_flash *, uint64_t, uint64_t, char *, size_t)"),
        ("nandlab_ftl_flush", "int32_t (*)(void *, const nandlab_flash *, char *, size_t)"),
        ("nandlab_ftl_emergency_flush", "int32_t (*)(void *, const nandlab_flash *, char *, size_t)"),
        ("nandlab_ftl_idle", "int32_t (*)(void *, const nandlab_flash *, uint32_t *, char *, size_t)"),
        ("nandlab_ftl_shutdown", "int32_t (*)(void *, const nandlab_flash *, char *, size_t)"),
        ("nandlab_ftl_stats", "size_t (*)(const void *, nandlab_stat *, size_t)"),
        ("nandlab_ftl_prefetch", "void (*)(void *, const nandlab_flash *, uint64_t, uint32_t)"),
        ("nandlab_ftl_single_instance", "uint32_t (*)(void)"),
        ("nandlab_ftl_options", "const nandlab_option_doc *(*)(size_t *)"),
    ] {
        let _ = writeln!(c, "_Static_assert(_Generic(&{name}, {ty}: 1, default: 0), \"prototype of {name}\");");
    }
    c
}

/// Compile `source` with the system C compiler; the compiler's stderr on failure.
fn compile(source: &str, tag: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("nandlab-drift-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("drift.c");
    std::fs::write(&file, source).unwrap();
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-Wall", "-Wextra", "-Werror", "-std=c11", "-fsyntax-only", "-I"])
        .arg(include_dir())
        .arg(&file)
        .output()
        .expect("a C compiler (`cc`) runs: install gcc");
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_header_matches_the_rust_definitions() {
    let source = checks();
    assert!(source.matches("_Static_assert").count() > 100, "{source}");
    if let Err(e) = compile(&source, "ok") {
        panic!("include/nandlab.h drifted from crates/nandlab/src/ftl/foreign (or the constants):\n{e}");
    }
}

#[test]
fn a_drifted_field_fails_the_check() {
    let wrong = checks().replacen(
        &format!("offsetof(nandlab_request, buf) == {}", offset_of!(CRequest, buf)),
        &format!("offsetof(nandlab_request, buf) == {}", offset_of!(CRequest, buf) + 8),
        1,
    );
    assert_ne!(wrong, checks());
    let e = compile(&wrong, "bad").expect_err("a wrong offset must not compile");
    assert!(e.contains("offset of nandlab_request.buf"), "{e}");
    let wrong_code = checks().replacen("NANDLAB_E_NO_SPACE == 102", "NANDLAB_E_NO_SPACE == 103", 1);
    assert!(compile(&wrong_code, "bad2").is_err());
    let wrong_proto = checks().replacen("size_t (*)(const void *, nandlab_stat *, size_t)", "int (*)(void)", 1);
    assert!(compile(&wrong_proto, "bad3").is_err());
}
