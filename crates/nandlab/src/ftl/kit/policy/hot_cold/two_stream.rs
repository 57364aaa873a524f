//! Two streams, hot and cold, chosen by a per-page write counter with
//! exponential decay: the exact-counter form of the counting scheme of
//! Hsieh, Kuo & Chang ("Efficient identification of hot data for flash
//! memory storage systems", ACM TOS 2(1), 2006), which hashes pages into
//! shared counters to save memory.
//!
//! Every host write of a page increments its 8-bit saturating counter; a
//! write whose counter reaches `threshold` goes to the hot stream (1),
//! others to the cold stream (0). After every `lpns` host page writes (one
//! logical capacity) all counters are halved, so heat is measured over a
//! sliding horizon of about one drive write and pages that stop being
//! updated cool down. A GC copy keeps its page's class (by the same
//! counter, without counting a write): moving a hot page that happened to
//! survive into the cold stream would mix the populations again, which
//! measurably costs write amplification. DRAM: one byte per logical page.
//!
//! With hot and cold pages in separate blocks and cost-benefit cleaning,
//! the write amplification of a two-level (80/20, 90/10) workload comes
//! within a few percent of Desnoyers' optimal split of the spare blocks
//! between two pools (see `tests/zoo_behaviour.rs`).
//! A mount restores a counter at `threshold` for pages found on the hot
//! stream and 0 otherwise.

use super::HotColdPolicy;

pub struct TwoStream {
    counters: Vec<u8>,
    threshold: u8,
    writes_until_decay: u64,
    decay_every: u64,
}

const COLD: u8 = 0;
const HOT: u8 = 1;

impl TwoStream {
    pub fn new(lpns: u32, threshold: u8) -> Self {
        let decay_every = u64::from(lpns.max(1));
        TwoStream {
            counters: crate::util::prefetch::large_vec(lpns as usize, 0),
            threshold: threshold.max(1),
            writes_until_decay: decay_every,
            decay_every,
        }
    }

    fn decay(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }
}

impl HotColdPolicy for TwoStream {
    fn streams(&self) -> u8 {
        2
    }

    fn gc_streams(&self) -> u8 {
        2
    }

    #[inline]
    fn host_stream(&mut self, lpn: u32, _current: Option<u8>) -> u8 {
        self.writes_until_decay -= 1;
        if self.writes_until_decay == 0 {
            self.writes_until_decay = self.decay_every;
            self.decay();
        }
        let c = &mut self.counters[lpn as usize];
        *c = c.saturating_add(1);
        if *c >= self.threshold {
            HOT
        } else {
            COLD
        }
    }

    fn gc_stream(&mut self, lpn: u32, _from: u8) -> u8 {
        if self.counters[lpn as usize] >= self.threshold {
            HOT
        } else {
            COLD
        }
    }

    fn trimmed(&mut self, lpn: u32) {
        self.counters[lpn as usize] = 0;
    }

    fn restore(&mut self, lpn: u32, stream: u8) {
        self.counters[lpn as usize] = if stream == HOT { self.threshold } else { 0 };
    }

    fn dram_bytes(&self) -> u64 {
        self.counters.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_written_often_run_hot_and_cool_down_when_they_stop() {
        let mut t = TwoStream::new(4, 2);
        assert_eq!(t.host_stream(0, None), COLD, "a first write is cold");
        assert_eq!(t.host_stream(0, None), HOT, "the second within the horizon is hot");
        assert_eq!(t.host_stream(1, None), COLD);
        // Two decays (8 more writes of other pages) cool page 0 down.
        for _ in 0..8 {
            t.host_stream(3, None);
        }
        assert_eq!(t.host_stream(0, None), COLD);
        t.restore(2, HOT);
        assert_eq!(t.host_stream(2, None), HOT, "a restored hot page stays hot");
        assert_eq!(t.gc_stream(2, COLD), HOT, "a GC copy keeps its page's class");
        assert_eq!(t.gc_stream(1, HOT), COLD);
    }
}
