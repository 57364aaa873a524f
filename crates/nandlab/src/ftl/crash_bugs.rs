//! Deliberately broken crash-recovery variants of the shipped FTLs.
//!
//! They exist to prove that `crash` catches what it claims to: each test
//! builds an FTL with one of these bugs (through a factory, never from the
//! command line), runs a campaign and expects the rule that names the bug,
//! while the correct FTL passes the same campaign. Never use them for
//! anything else.

/// A bug in how an FTL persists or recovers its state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum CrashBug {
    /// Correct.
    #[default]
    None,
    /// `page`, `dftl`: recovery maps a page on its OOB alone, without
    /// checking that its data survived (a torn program's page is trusted).
    TrustsTornPage,
    /// `page`: recovery ignores program sequence numbers: the first copy of
    /// a logical page found in the scan wins, old or new. `dftl`: recovery
    /// ignores the sequence number a translation page was composed at: its
    /// entry wins over data pages written after it.
    IgnoresSequenceNumbers,
    /// `page`: recovery erases the blocks of the checkpoint it loaded before
    /// it has written a new one, so a cut during recovery loses the map.
    RecoveryNotCrashSafe,
    /// `page`: a flush does not make trims durable (no trim records).
    ForgetsTrimsOnFlush,
    /// `page`: a group's summary page is programmed as soon as its last
    /// entry is known, before that last data page itself: a cut between
    /// the two leaves a summary that vouches for a page never written.
    SummaryBeforeLastPage,
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
}
