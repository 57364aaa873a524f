//! Shared helpers for the CLI tests.

use std::path::Path;

/// A public trace from `shared/traces/` (see its SOURCES.md), found in a
/// directory above this crate: beside a clone and beside a worktree alike.
pub fn shared_trace(name: &str) -> String {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|d| d.join("shared/traces").join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("shared/traces/{name} not found above {}", here.display()))
        .display()
        .to_string()
}
