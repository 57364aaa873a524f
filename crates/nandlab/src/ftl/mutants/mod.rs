//! Deliberate bugs: the one home of every broken variant of an FTL.
//!
//! They exist to prove that the checkers catch what they claim to: a test
//! builds an FTL with one [`Mutant`], runs a workload or a crash campaign
//! and expects the rule that names the bug, while the correct FTL
//! ([`Mutant::None`]) passes the same run. Most bugs are classics from
//! real firmware (VST found several of them in the OpenSSD FTLs). Never
//! use them for anything else.
//!
//! There is one way to switch a bug on: the FTL's `with_mutant`
//! constructor (`PageFtl::with_mutant(env, options, Mutant::TrustsTornPage)`),
//! which refuses a mutant that does not break that FTL
//! ([`Mutant::breaks`]); [`build_mutated`] calls it by FTL name. The
//! `buggy` FTL ([`buggy`]) is built for its mutants alone and names them
//! as an option (`--ftl buggy --ftl-opt bug=gc-stale-remap`); the shipped
//! FTLs' mutants ([`SHIPPED_MUTANTS`]) are reached from the command line
//! only through the hidden, test-only `--mutant NAME` of `stress` and
//! `hunt`, which measures what each mode finds (the README's `hunt`
//! table).
//!
//! A bug sits in the code it breaks: each hook is a comparison with a
//! `Mutant` variant where the correct code would differ, so
//! `grep -rn Mutant:: src/ftl` lists every one of them.

pub mod buggy;

/// A deliberate bug, and which FTLs have it (each variant says).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Mutant {
    /// Correct.
    #[default]
    None,

    // ----- page, and its data plane -----
    /// `page`: the OpenSSD DAC bug class: the open block of every hot region
    /// (stream 1 and up) is also registered as a GC candidate, so GC can
    /// choose and erase a block a region is still writing, and the region
    /// keeps programming it at its old write offset. Needs hot/cold streams.
    GcErasesActiveBlock,
    /// `page`, `dftl`, `block`, `hybrid`: recovery maps a page on its OOB
    /// alone, without checking that its data survived (a torn program's
    /// page is trusted because its OOB looks valid; `crash` finds the
    /// unreadable page).
    TrustsTornPage,
    /// `page`: recovery ignores program sequence numbers: the first copy of
    /// a logical page found in the scan wins, old or new. `dftl`: recovery
    /// ignores the sequence number a translation page was composed at: its
    /// entry wins over data pages written after it.
    IgnoresSequenceNumbers,
    /// `page`: recovery erases the blocks of the checkpoint it loaded before
    /// it has written a new one, so a cut during recovery loses the map.
    RecoveryNotCrashSafe,
    /// `page`, `dftl`: a flush does not make trims durable (no trim records).
    ForgetsTrimsOnFlush,
    /// `page`: a group's summary page is programmed as soon as its last
    /// entry is known, before that last data page itself: a cut between
    /// the two leaves a summary that vouches for a page never written.
    SummaryBeforeLastPage,

    // ----- dftl -----
    /// `dftl`: evicts a dirty cached entry without writing its translation
    /// page back: the update is lost, and the next miss on that page reads
    /// the older mapping from flash.
    EvictsDirtyWithoutWriteBack,

    // ----- hybrid -----
    /// `hybrid`: the OpenSSD FASTer bug class: reclaiming a random log block
    /// that holds no valid page returns early, erasing it but not
    /// installing a new log block, so the next random write goes to the
    /// page after the full log block — the first page of the next block on
    /// the device.
    MergeReturnsEarlyWithoutLogBlock,
    /// `hybrid`: recovery erases the stale blocks before it finishes the
    /// merges a cut interrupted — as it once did: a stale random log may
    /// hold the only other copy of pages an unfinished merge block holds,
    /// so a cut tearing the finish loses them (`crash` with nested cuts
    /// finds the lost durable write).
    RecoveryErasesStaleBlocksFirst,

    // ----- block -----
    /// `block`: an off-by-one in the read-modify-write: the last page of the
    /// old block is not copied before the old block is erased (`stress`
    /// finds the lost write).
    ReplacementDropsLastPage,

    // ----- optr -----
    /// `optr`: a flush drops the dirty pages of the write cache instead of
    /// writing them.
    LosesCacheOnFlush,
    /// `optr`: the emergency flush of power-loss protection drops the dirty
    /// pages of the write cache (a regular flush still writes them).
    EmergencyFlushDropsCache,
    /// `optr`: a flush acknowledges before the cache is written; the pages
    /// go to flash after the next write request's.
    ReordersAcrossFlush,
    /// `optr`: recovery keeps every page it finds, without checking that
    /// the write request it belongs to is complete: a multi-page request
    /// can come back half-written.
    HalfDurableRequests,

    // ----- realistic one-line bugs that default runs miss (issue 19) -----
    //
    // Each is a slip a firmware engineer could make, in a path the default
    // `stress --preset tiny` run never takes; `nandlab hunt` finds them
    // (the README's table says in how long, with which rule). They are
    // switched on like every mutant: `with_mutant`, or `nandlab hunt
    // --mutant NAME` (a test-only option).
    /// `page`, `dftl` (the data plane), `hybrid`, `block` (whole-page
    /// I/O): the read-modify-write of a partial page copies the host's
    /// sectors to the start of the page instead of their offset in it.
    /// Only an unaligned write smaller than a page shows it; the default
    /// workloads are page-aligned. Caught by the oracle (`read_stale` or
    /// `read_wrong_lba` on the next read of that page).
    RmwAtWrongOffset,
    /// `page`, `dftl`, `hybrid`, `block`: a trim of part of a page zeroes
    /// the whole page (the piece's offset and length ignored), destroying
    /// the sectors around it. Needs sub-page trims.
    PartialTrimZeroesWholePage,
    /// `page`, `dftl`: a whole-page trim unmaps the page but does not mark
    /// its flash copy invalid, so GC later copies the trimmed data and
    /// maps it back (release builds: the oracle sees trimmed sectors come
    /// back; debug builds: the map's own assertion panics, `ftl_panic`).
    TrimSkipsInvalidate,
    /// `page`, `dftl`: GC's scan of a victim's valid pages stops one page
    /// short of the block's end (an off-by-one in the loop bound), so a
    /// valid last page is erased with the victim.
    GcSkipsLastValidPage,
    /// `page`, `dftl`, `hybrid`, `block`: the mount does not load the
    /// factory bad-block marks, so a fresh instance scans, erases and
    /// programs bad blocks (`bad_block`). Needs factory bad blocks and a
    /// mount before the end.
    MountForgetsBadBlocks,
    /// `dftl`: a write-back of a translation page drops the corrections
    /// the last mount's scan made to it (entries newer than the page on
    /// flash), so after an unclean mount those logical pages read older
    /// data once their translation page is written back and evicted.
    WriteBackDropsMountFixes,
    /// `dftl`: the first write-back of a translation page that was never
    /// on flash does not record where it went (the directory update sits
    /// inside `if old != NONE`), so the next miss on it reads nothing and
    /// its entries come back unmapped. Needs a map cache smaller than the
    /// map (evictions).
    FirstWriteBackNotRecorded,
    /// `hybrid`: a switch merge adopts every page of the sequential log,
    /// including one the host rewrote since into a random log block, so
    /// the superseded copy becomes current. Needs a sequential run with
    /// an overwrite inside it.
    MergeAdoptsSupersededPage,
    /// `hybrid`: a full merge copies offsets `0 .. last` instead of
    /// `0 ..= last`, dropping the last page of the logical block that
    /// holds data.
    FullMergeStopsBeforeLastPage,
    /// `optr`: a partial-page write that misses the write cache does not
    /// read the rest of the page from flash into the fresh entry, so the
    /// page's other sectors come from whatever the reused buffer held.
    CacheMissSkipsFill,
    /// `optr`: a whole-page trim unmaps the page but leaves a dirty copy in
    /// the write cache, which is written back later and resurrects it.
    TrimKeepsCachedPage,
    /// `optr`: an incremental checkpoint counts the map entries that go in
    /// its seal page but writes none of them, so a mount that loads the
    /// checkpoint maps those pages to where they were before.
    SealDropsEntries,

    // ----- harder ones: a rare combination of features (issue 19, guidance) -----
    //
    // Each needs several draws at once, so a plain swarm campaign meets it
    // seldom; they measure whether coverage guidance pays (the README's
    // guided/unguided table).
    /// `page`, `dftl` (the data plane): static wear leveling's move of a
    /// cold group stops one page short of each block (the GC bound's
    /// off-by-one, in the wear-leveling copy alone), so the last page of a
    /// relocated block is erased with it. Needs static wear leveling and
    /// enough erases for the wear spread to pass its threshold.
    WearLevelingDropsLastPage,
    /// `page`, `dftl` (the data plane): GC of a multi-plane group narrowed
    /// by a factory bad block (one block wide), holding exactly one valid
    /// page, erases it without copying the page (the row copy pairs pages
    /// by plane, and a lone page of a narrow group pairs with nothing).
    /// Needs factory bad blocks, multi-plane groups and such a victim.
    NarrowGroupGcDropsLonePage,
    /// `dftl`: evicting a dirty cached entry that a trim unmapped drops it
    /// without writing its translation page back (an entry pointing
    /// nowhere is taken for one with nothing to save), so the translation
    /// page on flash still maps the trimmed page: it comes back on the next
    /// miss. Needs trims, a map cache smaller than the map, and the
    /// eviction before a flush writes the trim back.
    EvictsTrimmedEntryWithoutWriteBack,
    /// `page`, `dftl` (the data plane): a sub-page trim that ends exactly
    /// at the end of its page never finishes (the piece loop's cursor
    /// wraps to the start of the same page): the FTL spins without a flash
    /// operation. Proves `ftl_hang` (`hunt --isolate`).
    TrimSpinsAtPageEnd,
    /// `page`, `dftl` (the data plane): the same sub-page trim re-reads
    /// its page forever instead of going on (the read-modify-write's
    /// retry never stops): the FTL loops issuing flash reads, so the flash
    /// operation count keeps growing. Proves hunt's per-call limit on
    /// flash operations (`ftl_hang`, without `--isolate`).
    TrimRereadsAtPageEnd,

    // ----- media errors (issue 21; need the reliability model on) -----
    /// `page`, `dftl`: after a program failure the data plane retires the
    /// block but keeps the logical page mapped to the failed page instead
    /// of programming it again (`lost_after_program_failure`). `block`,
    /// `hybrid`: go on programming the failed block (`used_bad_block`).
    /// `optr`: retires the chain block but maps the page where its program
    /// failed (`lost_after_program_failure` on the next read of it).
    KeepsFailedProgram,
    /// `page`, `dftl`: an erase failure is ignored and the group goes back
    /// to the free pool, so it is programmed again (`used_bad_block`).
    /// `optr`: a GC victim or free block whose erase failed goes back to
    /// the free pool (`used_bad_block`).
    ReusesFailedBlock,
    /// `page`, `dftl`, `optr`: a host read ignores an uncorrectable flash
    /// read and returns the undecodable data
    /// (`uncorrectable_returned_as_data`).
    IgnoresUncorrectableRead,
    /// `page`, `dftl`: a host read of a logical page whose number is a
    /// multiple of 7 fails with a media error although it decoded
    /// (`read_error_on_good_data`).
    SpuriousReadError,
    /// `page`, `dftl`: a GC or wear-leveling copy whose program failed is
    /// remapped to the failed page (the destination group stays open, so
    /// it is programmed again: `used_bad_block`; the copy reads as garbage).
    KeepsFailedCopy,
    /// `page`, `dftl`: a failed program of the FTL's metadata (a summary,
    /// a checkpoint or trim-log page, a translation page) is taken as
    /// done: the group is sealed or kept as it is and later programmed or
    /// erased again (`used_bad_block`), or its data is lost at the next mount.
    /// `optr`: a failed summary page, metadata-log page or full-checkpoint
    /// page is taken as done: the block is collected, programmed or erased
    /// again (`used_bad_block`).
    KeepsFailedMetaProgram,
    /// `page`, `dftl`: GC unmaps a page whose read was uncorrectable but
    /// does not mark it lost, so a later host read returns zeros instead
    /// of the read error. `block`, `hybrid`: a merge or replacement copy
    /// whose read was uncorrectable is padded with zeros as if the offset
    /// had never been written, unmarked: a later host read returns zeros.
    ForgetsLostPage,
    /// `page`, `dftl`, `block`, `hybrid`: the mount does not restore the
    /// lost-page marks persisted on flash, so after a power cycle a lost
    /// page reads as an older copy or zeros instead of the read error.
    MountForgetsLostPages,
    /// `page`, `dftl`, `hybrid`, `block`: the mount skips grown bad blocks
    /// as it skips factory bad ones, so the readable pages of a block whose retirement a cut
    /// interrupted (acknowledged data not yet moved off) are lost
    /// (`lost_durable_write`; the behaviour before the retirement window
    /// was closed).
    MountSkipsGrownBadBlocks,

    // ----- buggy (see `buggy.rs`; named on the command line in kebab-case) -----
    /// `buggy`: starts every fresh block at page 1 (VST's "pages skipped at
    /// first power-on"); the map is right.
    SkipFirstPage,
    /// `buggy`: skips page 1 of a fresh block too, but maps the data to the
    /// page it skipped, so reads find erased flash.
    SkipFirstPageMapsIt,
    /// `buggy`: rewrites a whole overwritten page in place.
    WriteInPlace,
    /// `buggy`: programs the pages of a block in swapped pairs: 1, 0, 3, 2, …
    OutOfOrder,
    /// `buggy`: GC copies the pages it listed when it chose the victim
    /// without checking the map again, so a page the host overwrote
    /// meanwhile is copied and remapped over the newer data.
    GcStaleRemap,
    /// `buggy`: GC drops the last valid page of each victim and unmaps it.
    GcDropsValidPage,
    /// `buggy`: a write of an odd logical page also remaps the even page
    /// before it.
    AliasTwoLbas,
    /// `buggy`: trims do nothing.
    IgnoresTrim,
    /// `buggy`: reads of unmapped pages leave the host buffer unfilled.
    ForgetsToFill,
    /// `buggy`: ignores factory bad-block marks.
    ProgramsBadBlocks,
    /// `buggy`: counts one block too many (an off-by-one in the block count).
    BlockPastEnd,
    /// `buggy`: writes page pairs with one multi-plane program on a single
    /// plane.
    MultiPlaneOnOnePlane,
    /// `buggy`: GC moves pages by copyback even across planes.
    CopybackAcrossPlanes,
    /// `buggy`: reads unmapped logical pages from flash instead of
    /// returning zeros.
    ReadsUnwrittenPages,
    /// `buggy`: fails every write after the first 1000.
    FailsWrites,
}

impl Mutant {
    /// The FTLs that have this bug (every FTL is correct with [`Mutant::None`]).
    pub fn ftls(self) -> &'static [&'static str] {
        use Mutant::*;
        match self {
            None => &["page", "dftl", "hybrid", "block", "optr", "buggy"],
            GcErasesActiveBlock | RecoveryNotCrashSafe | SummaryBeforeLastPage => &["page"],
            TrustsTornPage => &["page", "dftl", "block", "hybrid"],
            IgnoresSequenceNumbers | ForgetsTrimsOnFlush => &["page", "dftl"],
            EvictsDirtyWithoutWriteBack => &["dftl"],
            MergeReturnsEarlyWithoutLogBlock | RecoveryErasesStaleBlocksFirst => &["hybrid"],
            ReplacementDropsLastPage => &["block"],
            LosesCacheOnFlush | EmergencyFlushDropsCache | ReordersAcrossFlush | HalfDurableRequests => &["optr"],
            RmwAtWrongOffset | PartialTrimZeroesWholePage | MountForgetsBadBlocks => {
                &["page", "dftl", "hybrid", "block"]
            }
            TrimSkipsInvalidate | GcSkipsLastValidPage => &["page", "dftl"],
            WearLevelingDropsLastPage | NarrowGroupGcDropsLonePage | TrimSpinsAtPageEnd | TrimRereadsAtPageEnd => {
                &["page", "dftl"]
            }
            EvictsTrimmedEntryWithoutWriteBack => &["dftl"],
            KeepsFailedProgram => &["page", "dftl", "block", "hybrid", "optr"],
            ReusesFailedBlock | IgnoresUncorrectableRead | KeepsFailedMetaProgram => &["page", "dftl", "optr"],
            SpuriousReadError | KeepsFailedCopy => &["page", "dftl"],
            MountSkipsGrownBadBlocks => &["page", "dftl", "hybrid", "block"],
            ForgetsLostPage | MountForgetsLostPages => &["page", "dftl", "block", "hybrid"],
            WriteBackDropsMountFixes | FirstWriteBackNotRecorded => &["dftl"],
            MergeAdoptsSupersededPage | FullMergeStopsBeforeLastPage => &["hybrid"],
            CacheMissSkipsFill | TrimKeepsCachedPage | SealDropsEntries => &["optr"],
            SkipFirstPage | SkipFirstPageMapsIt | WriteInPlace | OutOfOrder | GcStaleRemap | GcDropsValidPage
            | AliasTwoLbas | IgnoresTrim | ForgetsToFill | ProgramsBadBlocks | BlockPastEnd | MultiPlaneOnOnePlane
            | CopybackAcrossPlanes | ReadsUnwrittenPages | FailsWrites => &["buggy"],
        }
    }

    /// Whether FTL `ftl` has this bug.
    pub fn breaks(self, ftl: &str) -> bool {
        self.ftls().contains(&ftl)
    }

    /// `Ok` if FTL `ftl` has this bug, else the message its `with_mutant` fails with.
    pub fn check_breaks(self, ftl: &str) -> Result<(), String> {
        if self.breaks(ftl) {
            Ok(())
        } else {
            Err(format!("{ftl}: mutant {self:?} is a bug of {}, not of {ftl}", self.ftls().join(", ")))
        }
    }
}

/// The mutants of the shipped FTLs as `nandlab hunt --mutant NAME` names
/// them (a test-only option: it measures what a hunt finds).
pub const SHIPPED_MUTANTS: &[(&str, Mutant)] = &[
    ("gc-erases-active-block", Mutant::GcErasesActiveBlock),
    ("trusts-torn-page", Mutant::TrustsTornPage),
    ("ignores-sequence-numbers", Mutant::IgnoresSequenceNumbers),
    ("recovery-not-crash-safe", Mutant::RecoveryNotCrashSafe),
    ("forgets-trims-on-flush", Mutant::ForgetsTrimsOnFlush),
    ("summary-before-last-page", Mutant::SummaryBeforeLastPage),
    ("evicts-dirty-without-write-back", Mutant::EvictsDirtyWithoutWriteBack),
    ("merge-returns-early-without-log-block", Mutant::MergeReturnsEarlyWithoutLogBlock),
    ("recovery-erases-stale-blocks-first", Mutant::RecoveryErasesStaleBlocksFirst),
    ("replacement-drops-last-page", Mutant::ReplacementDropsLastPage),
    ("loses-cache-on-flush", Mutant::LosesCacheOnFlush),
    ("emergency-flush-drops-cache", Mutant::EmergencyFlushDropsCache),
    ("reorders-across-flush", Mutant::ReordersAcrossFlush),
    ("half-durable-requests", Mutant::HalfDurableRequests),
    ("rmw-at-wrong-offset", Mutant::RmwAtWrongOffset),
    ("partial-trim-zeroes-whole-page", Mutant::PartialTrimZeroesWholePage),
    ("trim-skips-invalidate", Mutant::TrimSkipsInvalidate),
    ("gc-skips-last-valid-page", Mutant::GcSkipsLastValidPage),
    ("mount-forgets-bad-blocks", Mutant::MountForgetsBadBlocks),
    ("write-back-drops-mount-fixes", Mutant::WriteBackDropsMountFixes),
    ("first-write-back-not-recorded", Mutant::FirstWriteBackNotRecorded),
    ("merge-adopts-superseded-page", Mutant::MergeAdoptsSupersededPage),
    ("full-merge-stops-before-last-page", Mutant::FullMergeStopsBeforeLastPage),
    ("cache-miss-skips-fill", Mutant::CacheMissSkipsFill),
    ("trim-keeps-cached-page", Mutant::TrimKeepsCachedPage),
    ("seal-drops-entries", Mutant::SealDropsEntries),
    ("wear-leveling-drops-last-page", Mutant::WearLevelingDropsLastPage),
    ("narrow-group-gc-drops-lone-page", Mutant::NarrowGroupGcDropsLonePage),
    ("evicts-trimmed-entry-without-write-back", Mutant::EvictsTrimmedEntryWithoutWriteBack),
    ("trim-spins-at-page-end", Mutant::TrimSpinsAtPageEnd),
    ("trim-rereads-at-page-end", Mutant::TrimRereadsAtPageEnd),
    ("keeps-failed-program", Mutant::KeepsFailedProgram),
    ("reuses-failed-block", Mutant::ReusesFailedBlock),
    ("ignores-uncorrectable-read", Mutant::IgnoresUncorrectableRead),
    ("spurious-read-error", Mutant::SpuriousReadError),
    ("keeps-failed-copy", Mutant::KeepsFailedCopy),
    ("keeps-failed-meta-program", Mutant::KeepsFailedMetaProgram),
    ("forgets-lost-page", Mutant::ForgetsLostPage),
    ("mount-forgets-lost-pages", Mutant::MountForgetsLostPages),
    ("mount-skips-grown-bad-blocks", Mutant::MountSkipsGrownBadBlocks),
];

/// The realistic mutants of issue 19 (the ones `nandlab hunt` is measured
/// on), by name.
pub const HUNT_MUTANTS: [&str; 12] = [
    "rmw-at-wrong-offset",
    "partial-trim-zeroes-whole-page",
    "trim-skips-invalidate",
    "gc-skips-last-valid-page",
    "mount-forgets-bad-blocks",
    "write-back-drops-mount-fixes",
    "first-write-back-not-recorded",
    "merge-adopts-superseded-page",
    "full-merge-stops-before-last-page",
    "cache-miss-skips-fill",
    "trim-keeps-cached-page",
    "seal-drops-entries",
];

/// The harder mutants (a rare combination of features), by name: the
/// guided/unguided comparison runs on these and [`HUNT_MUTANTS`].
pub const HARD_MUTANTS: [&str; 3] =
    ["wear-leveling-drops-last-page", "narrow-group-gc-drops-lone-page", "evicts-trimmed-entry-without-write-back"];

/// A shipped FTL's mutant by its kebab-case name.
pub fn shipped_mutant(name: &str) -> Result<Mutant, String> {
    SHIPPED_MUTANTS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m).ok_or_else(|| {
        let names: Vec<&str> = SHIPPED_MUTANTS.iter().map(|(n, _)| *n).collect();
        format!("unknown mutant `{name}` (known: {})", names.join(", "))
    })
}

/// Build shipped FTL `ftl` with its `options` and the bug `mutant` (the
/// FTL's `with_mutant` constructor, which refuses another FTL's bug).
pub fn build_mutated(
    ftl: &str,
    env: &super::FtlEnv,
    options: &super::FtlOptions,
    mutant: Mutant,
) -> Result<Box<dyn super::Ftl>, String> {
    use super::{block, dftl, hybrid, optr, page, parse_options};
    Ok(match ftl {
        "page" => Box::new(page::PageFtl::with_mutant(env, page::PageOptions::parse("page", options)?, mutant)?),
        "dftl" => Box::new(dftl::DftlFtl::with_mutant(env, dftl::DftlOptions::parse("dftl", options)?, mutant)?),
        "hybrid" => Box::new(hybrid::HybridFtl::with_mutant(env, parse_options("hybrid", options)?, mutant)?),
        "block" => Box::new(block::BlockFtl::with_mutant(env, parse_options("block", options)?, mutant)?),
        "optr" => Box::new(optr::OptrFtl::with_mutant(env, parse_options("optr", options)?, mutant)?),
        other => return Err(format!("{other}: not a shipped FTL with mutants (page, dftl, hybrid, block, optr)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ftl_is_correct_without_a_mutant_and_refuses_another_ftls() {
        for ftl in ["page", "dftl", "hybrid", "block", "optr", "buggy"] {
            assert!(Mutant::None.check_breaks(ftl).is_ok());
        }
        assert!(Mutant::TrustsTornPage.check_breaks("hybrid").is_ok());
        let e = Mutant::LosesCacheOnFlush.check_breaks("page").unwrap_err();
        assert!(e.contains("LosesCacheOnFlush") && e.contains("optr"), "{e}");
    }
}
