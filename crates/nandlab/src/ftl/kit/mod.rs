//! What the FTLs share: parts that are not an FTL on their own.
//!
//! - [`data_plane`]: allocation, striping, garbage collection, hot/cold
//!   streams, wear leveling and summary pages of the page-mapped FTLs
//!   (`page`, `dftl`); an FTL built on it keeps only its map.
//! - [`policy`]: victim selection, hot/cold separation and wear leveling,
//!   one policy per file, chosen in the configuration.
//! - [`whole_page_io`]: host I/O and formatting of the FTLs that program
//!   whole logical pages (`block`, `hybrid`).
//! - [`flash_ops`]: the pieces of an OOB mount scan and the page copy of
//!   merges (`block`, `hybrid`).
//! - [`free_blocks`]: the per-plane pool of erased blocks of `block` and
//!   `hybrid`.
//! - [`lost_pages`]: the logical pages lost to the media (uncorrectable
//!   copies) and their OOB marker, for every FTL that handles them.
//! - [`wire`]: the on-flash records (OOB, summary, checkpoint, trim and
//!   translation pages) as byte views with parse and emit.
//! - [`map_table`]: a logical-to-physical table whose unmapped state is
//!   zero bytes, so a large map becomes resident only where it is written.
//!
//! A part belongs here when more than one FTL uses it; a part one FTL
//! uses stays in that FTL's folder. Generic containers that know nothing
//! of flash live in [`crate::util`].

pub mod data_plane;
pub mod flash_ops;
pub mod free_blocks;
pub mod lost_pages;
pub mod map_table;
pub mod policy;
pub mod whole_page_io;
pub mod wire;
