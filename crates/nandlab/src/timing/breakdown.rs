//! Where a request's latency went: one component per stage of the data
//! path, summing exactly to the latency (arrival to completion).
//!
//! A request's stages run in sequence (queue, command, firmware, link …)
//! except its flash operations, which overlap. For those the breakdown
//! follows the *critical path*: the operation that completed last, and the
//! chain of operations it waited for (a program from a buffer waits for the
//! read that filled it; anything after a metadata read waits for that
//! read). This is SSDExplorer's per-component latency breakdown, per
//! request, so the report can name the bottleneck.

use serde::Serialize;

/// One latency component.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Component {
    /// Waiting for a submission-queue slot and for a controller core.
    Queue,
    /// Fixed per-command host-interface overhead.
    HostCommand,
    /// Controller firmware (FTL) time on a core.
    Cpu,
    /// Host link transfer, including waiting for the link.
    HostTransfer,
    /// Device DRAM copies (write cache), including waiting for the DRAM.
    Dram,
    /// Waiting for write-cache space (dirty data to be flushed).
    CacheWait,
    /// Waiting for a die or plane busy with other work (or a suspend).
    DieWait,
    /// Waiting for a die or plane busy with garbage collection.
    GcWait,
    /// Waiting for the channel bus.
    ChannelWait,
    /// Command and data transfer on the channel.
    FlashTransfer,
    /// Cell operation (tR, tPROG, tBERS; with the reliability model, a
    /// read's retries' tR and its ECC decode).
    Cell,
}

impl Component {
    pub const COUNT: usize = 11;
    pub const ALL: [Component; Self::COUNT] = [
        Component::Queue,
        Component::HostCommand,
        Component::Cpu,
        Component::HostTransfer,
        Component::Dram,
        Component::CacheWait,
        Component::DieWait,
        Component::GcWait,
        Component::ChannelWait,
        Component::FlashTransfer,
        Component::Cell,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::Queue => "queue",
            Component::HostCommand => "host_command",
            Component::Cpu => "controller_cpu",
            Component::HostTransfer => "host_transfer",
            Component::Dram => "dram",
            Component::CacheWait => "cache_wait",
            Component::DieWait => "die_wait",
            Component::GcWait => "gc_wait",
            Component::ChannelWait => "channel_wait",
            Component::FlashTransfer => "flash_transfer",
            Component::Cell => "cell",
        }
    }

    /// What it means when this component dominates.
    pub fn bottleneck(self) -> &'static str {
        match self {
            Component::Queue => "host queueing (submission queues or controller CPU saturated)",
            Component::HostCommand => "host command overhead",
            Component::Cpu => "controller firmware time",
            Component::HostTransfer => "host link bandwidth",
            Component::Dram => "device DRAM bandwidth",
            Component::CacheWait => "write cache full: flash cannot absorb the write rate",
            Component::DieWait => "die contention (requests queue behind each other on dies)",
            Component::GcWait => "garbage collection occupying dies",
            Component::ChannelWait => "channel bus contention",
            Component::FlashTransfer => "channel transfer time",
            Component::Cell => "NAND cell operations (tR / tPROG / tBERS)",
        }
    }
}

/// Nanoseconds per component. See the module docs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Breakdown(pub [u64; Component::COUNT]);

impl Breakdown {
    #[inline]
    pub fn add(&mut self, c: Component, ns: u64) {
        self.0[c as usize] += ns;
    }
    /// Move `ns` (at most what `from` holds) from `from` to `to`.
    pub fn shift(&mut self, from: Component, to: Component, ns: u64) {
        let ns = ns.min(self.0[from as usize]);
        self.0[from as usize] -= ns;
        self.0[to as usize] += ns;
    }
    pub fn get(&self, c: Component) -> u64 {
        self.0[c as usize]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    pub fn accumulate(&mut self, o: &Breakdown) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            *a += *b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_sum_to_the_total() {
        let mut b = Breakdown::default();
        b.add(Component::Cell, 75_000);
        b.add(Component::FlashTransfer, 12_301);
        b.add(Component::Queue, 10);
        assert_eq!(b.total(), 87_311);
        let mut all = Breakdown::default();
        all.accumulate(&b);
        all.accumulate(&b);
        assert_eq!(all.get(Component::Cell), 150_000);
        assert_eq!(Component::ALL.len(), Component::COUNT);
    }
}
