//! The per-interval time series of a perf run (default 1 s of simulated
//! time): throughput, latency, garbage collection and free blocks — what
//! FEMU's write-cliff figure plots — as JSON rows and CSV.
//!
//! Completions are recorded in time order (the run processes events in
//! simulated-time order), so one interval is open at a time and its p99
//! comes from a histogram reset at each boundary. Flash work (GC pages
//! moved, blocks erased, pages programmed) is binned by the time it
//! completes by the timing model and joined at the end.
//!
//! The series holds at most [`MAX_SERIES_BINS`] intervals, so its memory
//! does not depend on the simulated time or the `--interval`: when one
//! more would be needed the interval doubles and each pair of neighbouring
//! intervals merges into one (counts and sums add; a merged p99 is the
//! larger of the two, an upper bound, since the histograms are gone). The
//! report's `timeseries_interval_s` is the interval in the end; the flash
//! series does the same and is merged to the coarser of the two.

use crate::timing::{merge_neighbour_pairs, FlashInterval, MAX_SERIES_BINS};
use crate::workload::HostOp;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// One interval of the time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalRow {
    /// Start of the interval, seconds from the first arrival.
    pub start_s: f64,
    /// Length of the interval, s: the `--interval`, except for the last
    /// one, which ends at the last completion (its rates divide by this).
    pub length_s: f64,
    pub reads: u64,
    pub writes: u64,
    /// Completed requests of every kind per second.
    pub iops: f64,
    pub read_mbps: f64,
    pub write_mbps: f64,
    pub latency_mean_us: f64,
    pub latency_p99_us: f64,
    pub foreground_gc_pages_moved: u64,
    pub background_gc_pages_moved: u64,
    pub blocks_erased: u64,
    /// Pages programmed over host pages programmed in this interval (0: none).
    pub waf: f64,
    /// The FTL's free blocks at the end of the interval (when it reports them).
    pub free_blocks: Option<u64>,
    /// Pages programmed for any cause (host, GC, metadata).
    pub pages_programmed: u64,
    /// Cell reads of any kind (host, GC, OOB, metadata).
    pub pages_read: u64,
    /// Mean busy share of the dies in the interval.
    pub die_utilisation: f64,
    /// Sums kept to merge intervals (not reported): requests of every
    /// kind, bytes read and written, latencies.
    #[serde(skip)]
    sums: RowSums,
}

#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct RowSums {
    requests: u64,
    read_bytes: u64,
    write_bytes: u64,
    latency_ns: u128,
}

impl IntervalRow {
    /// The rates of an interval of `secs` seconds from its sums.
    fn set_rates(&mut self, secs: f64) {
        let n = self.sums.requests;
        self.length_s = secs;
        self.iops = n as f64 / secs;
        self.read_mbps = self.sums.read_bytes as f64 / 1e6 / secs;
        self.write_mbps = self.sums.write_bytes as f64 / 1e6 / secs;
        self.latency_mean_us = if n == 0 { 0.0 } else { self.sums.latency_ns as f64 / n as f64 / 1000.0 };
    }

    /// Merge the next interval into this one (before the flash work is joined).
    fn absorb(&mut self, next: &IntervalRow) {
        self.reads += next.reads;
        self.writes += next.writes;
        self.sums.requests += next.sums.requests;
        self.sums.read_bytes += next.sums.read_bytes;
        self.sums.write_bytes += next.sums.write_bytes;
        self.sums.latency_ns += next.sums.latency_ns;
        self.latency_p99_us = self.latency_p99_us.max(next.latency_p99_us);
        self.free_blocks = next.free_blocks;
        self.set_rates(self.length_s + next.length_s);
    }
}

/// Builds the series. See the module docs.
pub struct SeriesRecorder {
    interval_ns: u64,
    /// Simulated time of the first arrival: interval 0 starts here.
    origin_ns: u64,
    index: u64,
    hist: Histogram<u64>,
    reads: u64,
    writes: u64,
    requests: u64,
    read_bytes: u64,
    write_bytes: u64,
    latency_sum_ns: u128,
    rows: Vec<IntervalRow>,
}

impl SeriesRecorder {
    pub fn new(interval_ns: u64) -> Self {
        SeriesRecorder {
            interval_ns: interval_ns.max(1),
            origin_ns: 0,
            index: 0,
            hist: Histogram::new_with_bounds(1, 10_000_000_000_000, 2).expect("valid bounds"),
            reads: 0,
            writes: 0,
            requests: 0,
            read_bytes: 0,
            write_bytes: 0,
            latency_sum_ns: 0,
            rows: Vec::new(),
        }
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Count intervals from `origin_ns` (the first arrival) on; call before
    /// anything is recorded.
    pub fn set_origin(&mut self, origin_ns: u64) {
        self.origin_ns = origin_ns;
    }

    /// The start of the open interval, in simulated time (saturating: see
    /// [`crate::timing`] on the bounds of simulated time).
    fn open_start_ns(&self) -> u64 {
        self.origin_ns.saturating_add(self.index.saturating_mul(self.interval_ns))
    }

    /// The end of the open interval, in simulated time.
    fn open_end_ns(&self) -> u64 {
        self.open_start_ns().saturating_add(self.interval_ns)
    }

    /// Close every interval that ends at or before `t_ns` (simulated
    /// time); `free_blocks` samples the FTL at the first closing (nothing
    /// changes it before the next event).
    pub fn roll_to(&mut self, t_ns: u64, free_blocks: &mut dyn FnMut() -> Option<u64>) {
        let mut sample = None;
        while t_ns >= self.open_end_ns() && self.open_end_ns() < u64::MAX {
            let free = *sample.get_or_insert_with(&mut *free_blocks);
            self.close(self.interval_ns, free);
        }
    }

    /// Close the open interval, `length_ns` long; past [`MAX_SERIES_BINS`]
    /// intervals, double the interval (see the module docs).
    fn close(&mut self, length_ns: u64, free_blocks: Option<u64>) {
        let secs = length_ns.max(1) as f64 / 1e9;
        let n = self.requests;
        let mut row = IntervalRow {
            start_s: self.open_start_ns().saturating_sub(self.origin_ns) as f64 / 1e9,
            length_s: secs,
            reads: self.reads,
            writes: self.writes,
            iops: 0.0,
            read_mbps: 0.0,
            write_mbps: 0.0,
            latency_mean_us: 0.0,
            latency_p99_us: if n == 0 { 0.0 } else { self.hist.value_at_quantile(0.99) as f64 / 1000.0 },
            foreground_gc_pages_moved: 0,
            background_gc_pages_moved: 0,
            blocks_erased: 0,
            waf: 0.0,
            free_blocks,
            pages_programmed: 0,
            pages_read: 0,
            die_utilisation: 0.0,
            sums: RowSums {
                requests: n,
                read_bytes: self.read_bytes,
                write_bytes: self.write_bytes,
                latency_ns: self.latency_sum_ns,
            },
        };
        row.set_rates(secs);
        self.rows.push(row);
        self.index += 1;
        if self.rows.len() >= MAX_SERIES_BINS {
            // (The count is even: the open interval starts a merged one.)
            merge_neighbour_pairs(&mut self.rows, IntervalRow::absorb);
            self.index /= 2;
            self.interval_ns = self.interval_ns.saturating_mul(2);
        }
        if n > 0 {
            self.hist.reset();
        }
        self.reads = 0;
        self.writes = 0;
        self.requests = 0;
        self.read_bytes = 0;
        self.write_bytes = 0;
        self.latency_sum_ns = 0;
    }

    /// Record a request completed at `t_ns` (not earlier than the last).
    pub fn record(&mut self, op: HostOp, latency_ns: u64, bytes: u64) {
        self.hist.saturating_record(latency_ns);
        self.requests += 1;
        self.latency_sum_ns += u128::from(latency_ns);
        match op {
            HostOp::Read => {
                self.reads += 1;
                self.read_bytes += bytes;
            }
            HostOp::Write => {
                self.writes += 1;
                self.write_bytes += bytes;
            }
            _ => {}
        }
    }

    /// Close the last interval (if anything happened in it), dividing by
    /// its real length (it ends at `end_ns`, the last completion), and join
    /// the flash work binned per interval (`flash`, binned by
    /// `flash_interval_ns`: the two are merged to the coarser). Returns the
    /// rows and their interval, ns.
    pub fn finish(
        mut self,
        end_ns: u64,
        free_blocks: Option<u64>,
        flash: &[FlashInterval],
        flash_interval_ns: u64,
        dies: u32,
    ) -> (Vec<IntervalRow>, u64) {
        let mut sample = || free_blocks;
        self.roll_to(end_ns, &mut sample);
        let open_start = self.open_start_ns();
        if self.requests > 0 || end_ns > open_start {
            self.close(end_ns.saturating_sub(open_start), free_blocks);
        }
        let mut flash = flash.to_vec();
        let mut flash_interval_ns = flash_interval_ns.max(1);
        while flash_interval_ns < self.interval_ns {
            merge_neighbour_pairs(&mut flash, FlashInterval::absorb);
            flash_interval_ns = flash_interval_ns.saturating_mul(2);
        }
        while self.interval_ns < flash_interval_ns {
            merge_neighbour_pairs(&mut self.rows, IntervalRow::absorb);
            self.interval_ns = self.interval_ns.saturating_mul(2);
        }
        for (row, f) in self.rows.iter_mut().zip(&flash) {
            row.foreground_gc_pages_moved = f.foreground_gc_pages_moved;
            row.background_gc_pages_moved = f.background_gc_pages_moved;
            row.blocks_erased = f.blocks_erased;
            row.pages_programmed = f.pages_programmed;
            row.pages_read = f.pages_read;
            row.die_utilisation = f.die_busy_ns as f64 / (row.length_s * 1e9 * f64::from(dies.max(1)));
            row.waf = if f.host_pages_programmed == 0 {
                0.0
            } else {
                f.pages_programmed as f64 / f.host_pages_programmed as f64
            };
        }
        (self.rows, self.interval_ns)
    }
}

/// The series as CSV, one row per interval, with a header.
pub fn to_csv(rows: &[IntervalRow]) -> String {
    let mut s = String::from(
        "start_s,length_s,reads,writes,iops,read_mbps,write_mbps,latency_mean_us,latency_p99_us,foreground_gc_pages_moved,background_gc_pages_moved,blocks_erased,waf,free_blocks,pages_programmed,pages_read,die_utilisation\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.1},{:.3},{:.3},{:.2},{:.2},{},{},{},{:.4},{},{},{},{:.4}",
            r.start_s,
            r.length_s,
            r.reads,
            r.writes,
            r.iops,
            r.read_mbps,
            r.write_mbps,
            r.latency_mean_us,
            r.latency_p99_us,
            r.foreground_gc_pages_moved,
            r.background_gc_pages_moved,
            r.blocks_erased,
            r.waf,
            r.free_blocks.map_or(String::new(), |f| f.to_string()),
            r.pages_programmed,
            r.pages_read,
            r.die_utilisation
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_close_as_time_passes_and_join_flash_work() {
        let mut s = SeriesRecorder::new(1_000_000_000);
        let mut free = || Some(7);
        s.record(HostOp::Write, 1000, 4096);
        s.roll_to(500_000_000, &mut free);
        s.record(HostOp::Write, 3000, 4096);
        s.roll_to(2_500_000_000, &mut free);
        s.record(HostOp::Read, 2000, 8192);
        let flash = [
            FlashInterval { pages_programmed: 4, host_pages_programmed: 2, blocks_erased: 1, ..Default::default() },
            FlashInterval::default(),
        ];
        let (rows, _) = s.finish(2_600_000_000, Some(5), &flash, 1_000_000_000, 1);
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].writes, rows[1].writes, rows[2].reads), (2, 0, 1));
        assert_eq!(rows[0].latency_mean_us, 2.0);
        assert_eq!((rows[0].waf, rows[0].blocks_erased), (2.0, 1));
        assert_eq!(rows[0].free_blocks, Some(7));
        assert_eq!(rows[2].free_blocks, Some(5));
        let csv = to_csv(&rows);
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.lines().nth(1).unwrap().starts_with("0,1,0,2,2.0,"));
    }

    #[test]
    fn the_series_starts_at_the_first_arrival_and_the_last_interval_divides_by_its_length() {
        let mut s = SeriesRecorder::new(1_000_000_000);
        s.set_origin(5_000_000_000); // a trace whose first request arrives at 5 s
        let mut free = || None;
        s.roll_to(5_200_000_000, &mut free);
        s.record(HostOp::Write, 1000, 4096);
        s.roll_to(6_100_000_000, &mut free);
        s.record(HostOp::Write, 1000, 4096);
        s.record(HostOp::Write, 1000, 4096);
        let (rows, _) = s.finish(6_250_000_000, None, &[], 1_000_000_000, 1);
        assert_eq!(rows.len(), 2, "no empty rows for the 5 s before the trace");
        assert_eq!((rows[0].start_s, rows[0].length_s, rows[0].iops), (0.0, 1.0, 1.0));
        assert_eq!((rows[1].start_s, rows[1].length_s), (1.0, 0.25));
        assert_eq!(rows[1].iops, 8.0, "2 requests in the last 0.25 s");
    }

    #[test]
    fn the_series_stays_within_its_bin_cap_whatever_the_time_and_interval() {
        // 1 ns intervals over 2^62 ns (the end of simulated time): without
        // the cap, 2^62 rows.
        let mut s = SeriesRecorder::new(1);
        let mut free = || Some(3);
        s.record(HostOp::Write, 1000, 4096);
        s.roll_to(10, &mut free);
        s.record(HostOp::Read, 3000, 8192);
        s.roll_to(1 << 62, &mut free);
        s.record(HostOp::Write, 5000, 4096);
        assert!(s.rows.len() < MAX_SERIES_BINS);
        let flash = vec![FlashInterval { pages_programmed: 2, host_pages_programmed: 1, ..Default::default() }; 100];
        let (rows, interval) = s.finish((1 << 62) + 7, Some(3), &flash, 1, 1);
        assert!(rows.len() <= MAX_SERIES_BINS, "{} rows", rows.len());
        assert!(interval.saturating_mul(MAX_SERIES_BINS as u64) > 1 << 62, "interval {interval} ns");
        assert_eq!(rows.iter().map(|r| r.reads + r.writes).sum::<u64>(), 3, "no request lost in merging");
        assert_eq!(rows[0].reads + rows[0].writes, 2, "the first two share the first merged interval");
        assert_eq!(rows[0].latency_mean_us, 2.0);
        assert_eq!(rows[0].pages_programmed, 200, "the flash series merged to the same interval");
        assert_eq!(rows[0].start_s, 0.0);
        assert_eq!(rows[1].start_s, interval as f64 / 1e9);
    }

    #[test]
    fn merging_intervals_adds_counts_and_keeps_the_larger_p99() {
        let mut s = SeriesRecorder::new(1000);
        let mut free = || None;
        for i in 0..MAX_SERIES_BINS as u64 {
            s.record(HostOp::Write, 1000 * (i % 2 + 1), 4096);
            s.roll_to((i + 1) * 1000, &mut free);
        }
        assert_eq!(s.interval_ns(), 2000, "doubled once");
        assert_eq!(s.rows.len(), MAX_SERIES_BINS / 2);
        let r = &s.rows[0];
        assert_eq!((r.writes, r.latency_mean_us), (2, 1.5));
        assert!((r.length_s - 2e-6).abs() < 1e-15 && (r.iops - 1e6).abs() < 1e-3, "{r:?}");
        assert!((r.latency_p99_us - 2.0).abs() < 0.01, "{}", r.latency_p99_us);
    }
}
