//! Shared helpers for the CLI tests.

use std::path::Path;

/// A public trace the repository carries in `crates/nandlab/tests/data/traces/`
/// (see its SOURCES.md for origin and licence).
pub fn public_trace(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nandlab/tests/data/traces").join(name);
    assert!(path.exists(), "{} is missing from the repository", path.display());
    path.display().to_string()
}
