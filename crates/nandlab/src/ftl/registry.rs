//! The FTLs that ship with nandlab: their descriptors, building one by
//! name, and checking what an FTL needs of a device's geometry.

use super::{block, dftl, hybrid, mutants, optr, page, Ftl, FtlEnv, FtlInfo, FtlOptions, OptionDoc};
use crate::nand::Geometry;

/// An FTL that ships with nandlab.
pub struct FtlDescriptor {
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [OptionDoc],
    pub build: fn(&FtlEnv, &FtlOptions) -> Result<Box<dyn Ftl>, String>,
}

/// Every FTL nandlab ships.
pub fn registry() -> &'static [FtlDescriptor] {
    static REGISTRY: [FtlDescriptor; 6] = [
        page::DESCRIPTOR,
        dftl::DESCRIPTOR,
        hybrid::DESCRIPTOR,
        block::DESCRIPTOR,
        optr::DESCRIPTOR,
        mutants::buggy::DESCRIPTOR,
    ];
    &REGISTRY
}

pub fn descriptor(name: &str) -> Option<&'static FtlDescriptor> {
    registry().iter().find(|d| d.name == name)
}

/// Build an FTL by name with its options.
pub fn build(name: &str, env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    if descriptor(name).is_none() {
        // A library FTL loaded with `foreign::load` (`--ftl-lib`).
        if let Some(built) = super::foreign::build(name, env, options) {
            return built;
        }
    }
    let d = descriptor(name).ok_or_else(|| {
        let names: Vec<_> = registry().iter().map(|d| d.name).collect();
        format!("unknown FTL `{name}` (available: {})", names.join(", "))
    })?;
    (d.build)(env, options)
}

/// Check what an FTL declares it needs of the geometry (its [`FtlInfo`])
/// against a device: the spare bytes it writes per page must fit the
/// page's OOB. Returns the geometry field and the reason on a mismatch.
pub fn check_geometry(info: &FtlInfo, geometry: &Geometry) -> Result<(), (&'static str, String)> {
    if info.oob_bytes > geometry.oob_size_bytes() {
        return Err((
            "oob_size_bytes",
            format!(
                "ftl `{}` stores {} bytes of OOB (spare area) per page, but the geometry has {}; \
                 set oob_size_bytes to at least {}",
                info.name,
                info.oob_bytes,
                geometry.oob_size_bytes(),
                info.oob_bytes
            ),
        ));
    }
    Ok(())
}
