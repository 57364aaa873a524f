//! A flash transaction: one flash operation as the timing core
//! ([`super::event_core`]) queues, schedules and dispatches it.
//!
//! A transaction carries what a controller's transaction scheduling unit
//! knows of a command (MQSim's `NVM_Transaction_Flash`: Tavakkol et al.,
//! FAST 2018): where it goes (die, planes, page, block), what it is (kind
//! and class, the class choosing its queue under [`super::scheduler`]), how
//! long each phase takes (channel phases and cell time, computed by the
//! caller from the device's `[timing]`), when it may start, and at most one
//! transaction it must wait for (a program after the read that filled its
//! buffer; everything after a metadata read).

/// Identifies a submitted transaction (its index in submission order).
pub type TxId = u32;

/// What the operation does on the die.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// Command, tR, then data-out over the channel.
    Read,
    /// Command and data-in over the channel, then tPROG.
    Program,
    /// Command, then tBERS.
    Erase,
    /// Command, then tR + tPROG inside the die (no data on the channel).
    Copyback,
}

impl TxKind {
    /// Programs, erases and copybacks change the array: they keep their
    /// issue order per plane, and a read of their page or block may not
    /// overtake them.
    pub fn writes_array(self) -> bool {
        !matches!(self, TxKind::Read)
    }
}

/// Who issued the transaction: the scheduler's queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TxClass {
    /// Host data (a host read, or a write-back eviction or host write).
    User,
    /// FTL metadata: translation pages, summaries, checkpoints.
    Mapping,
    /// Garbage collection or wear leveling. `urgent`: inside a host request
    /// (the FTL had to collect before it could serve it), as opposed to
    /// background work in idle time.
    Gc { urgent: bool },
}

/// One transaction as submitted. Times in ns.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transaction {
    pub kind: TxKind,
    pub class: TxClass,
    /// Global die index.
    pub die: u32,
    /// Channel the die is on.
    pub channel: u32,
    /// The planes it occupies, as bits of plane-within-die.
    pub planes_mask: u64,
    /// Global page address (programs, reads, copyback destinations); for an
    /// erase, unused.
    pub page: u64,
    /// Global block index of `page` (or of the erased block).
    pub block: u64,
    /// Channel time before the cell phase: command (and, for a program,
    /// its data-in).
    pub channel_in_ns: u64,
    /// Cell time: tR, tPROG, tBERS, or tR + tPROG.
    pub cell_ns: u64,
    /// Channel time after the cell phase (a read's data-out).
    pub channel_out_ns: u64,
    /// Earliest start.
    pub ready_ns: u64,
    /// A transaction that must complete first.
    pub after: Option<TxId>,
    /// The caller's tag (a request or an epoch), returned with the completion.
    pub tag: u64,
}

impl Transaction {
    pub fn is_read(&self) -> bool {
        self.kind == TxKind::Read
    }

    /// How long it holds its die with nothing else in the way: its channel
    /// phases and its cell time, ns.
    pub fn occupancy_ns(&self) -> u64 {
        self.channel_in_ns + self.cell_ns + self.channel_out_ns
    }
}

/// A transaction's completion, as the core reports it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TxDone {
    pub id: TxId,
    pub tag: u64,
    /// When its first channel phase started (the command was on the bus).
    pub start_ns: u64,
    /// When it completed: the end of its data-out (reads) or cell phase.
    pub end_ns: u64,
    /// Whether this read suspended the program or erase running on its die.
    pub suspended_other: bool,
}
