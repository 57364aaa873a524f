//! Transforms between a trace reader and the device: filter, time-scale,
//! align, repeat with an LBA offset, map into the device, stop.
//!
//! They apply in this fixed order (each is optional):
//!
//! 1. **filter** by device (`--trace-device`, repeatable) and by operation
//!    (`--trace-op read,write,trim,flush`); dropped requests are counted.
//! 2. **time**: the first kept request arrives at 0 (`rebase_time`), and
//!    arrival times are divided by `--trace-speed` (2 = twice as fast,
//!    0.5 = half as fast) for open-loop replay. A time before the first
//!    request's is clamped to 0 in the stream ([`Transformed::next_timed`]
//!    gives it signed, for statistics).
//! 3. **align** to N bytes (`--trace-align 4k`): each read, write and trim
//!    is widened to the smallest N-aligned range covering it (start rounded
//!    down, end rounded up). Flushes are untouched.
//! 4. **repeat** (`--trace-repeat-until BYTES`, VST's method): when the
//!    trace ends before BYTES have been written, it is read again from the
//!    start, and pass k (k = 0, 1, 2, …) has `k × S` bytes added to every
//!    offset. **The offset rule:** S is `--trace-repeat-offset` if given,
//!    otherwise the highest end offset of pass 0 (after filtering and
//!    aligning) rounded up to a multiple of 1 MiB, so each pass lands just
//!    above the previous one and, with `wrap`, walks around the device.
//!    Pass k's times are shifted by k × (span of pass 0 + its mean gap).
//!    The run stops exactly at BYTES written: the write that crosses it is
//!    shortened to end there. A pass that writes nothing is an error (it
//!    would repeat forever).
//! 5. **map** into a device of C bytes (`--trace-map`), applied to the
//!    offset after the repeat shift. A request is *out of range* when it
//!    does not fit in [0, C); every out-of-range request is counted, and
//!    the rule decides what happens to it:
//!    - `wrap` (default): the offset is taken modulo C; a request that then
//!      runs past the end is split in two, the rest continuing at 0; a
//!      request longer than C is cut to C.
//!    - `scale`: offsets are multiplied by C / E, E being the trace's extent
//!      (highest end offset, measured by a first pass over the file unless
//!      `--trace-extent` gives it), rounded down to the grain; a request
//!      that would then end past C is moved back to end at C. The repeat
//!      shift is added after scaling, and the result wraps modulo C.
//!    - `skip`: out-of-range requests are dropped.
//!    - `reject`: the first out-of-range request is an error naming its line.
//! 6. **stop** after `--trace-requests N` requests (counted as emitted: a
//!    request split by `wrap` counts as two) or at the repeat target.
//!
//! A stream that hands out no request at all is legal but almost never
//! meant: [`Transformed::warnings`] says why (an empty trace, filters that
//! kept none of its requests, naming the devices and operations the trace
//! has, or a map that skipped them all), and every command shows it.
//! An alignment larger than the device is refused up front.

use super::trace::{TraceError, TraceReader, TraceRequest};
use super::HostOp;
use serde::Serialize;

/// What `--trace-map` does with the trace's addresses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MapRule {
    #[default]
    Wrap,
    Scale,
    Skip,
    Reject,
}

impl MapRule {
    pub fn name(self) -> &'static str {
        match self {
            MapRule::Wrap => "wrap",
            MapRule::Scale => "scale",
            MapRule::Skip => "skip",
            MapRule::Reject => "reject",
        }
    }
}

impl std::str::FromStr for MapRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wrap" => Ok(MapRule::Wrap),
            "scale" => Ok(MapRule::Scale),
            "skip" => Ok(MapRule::Skip),
            "reject" => Ok(MapRule::Reject),
            other => Err(format!("unknown mapping `{other}` (wrap, scale, skip, reject)")),
        }
    }
}

/// Where the trace's addresses must land.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceMap {
    pub rule: MapRule,
    /// The device's logical capacity in bytes.
    pub capacity_bytes: u64,
    /// Granularity of mapped offsets (the sector size, or the alignment).
    pub grain_bytes: u64,
    /// `scale`: the trace's extent in bytes (required by [`Transformed::new`]).
    pub extent_bytes: Option<u64>,
}

impl DeviceMap {
    /// The map onto a device of `capacity_bytes` with `sector_bytes`
    /// sectors. Mapped offsets keep `--trace-align`'s alignment when it is
    /// a multiple of the sector dividing the capacity (so wrapping and
    /// scaling do not undo it); otherwise the grain is the sector.
    pub fn onto_device(
        rule: MapRule,
        capacity_bytes: u64,
        sector_bytes: u64,
        align_bytes: Option<u64>,
        extent_bytes: Option<u64>,
    ) -> DeviceMap {
        let grain_bytes = match align_bytes {
            Some(a) if a > sector_bytes && a % sector_bytes == 0 && capacity_bytes % a == 0 => a,
            _ => sector_bytes,
        };
        DeviceMap { rule, capacity_bytes, grain_bytes, extent_bytes }
    }
}

/// The transforms to apply (see the module docs for their order).
#[derive(Clone, Debug, PartialEq)]
pub struct TransformSpec {
    /// Keep only these devices (empty: all).
    pub devices: Vec<u32>,
    /// Keep only these operations (empty: all).
    pub ops: Vec<HostOp>,
    /// Make the first kept request arrive at time 0.
    pub rebase_time: bool,
    /// Arrival times are divided by this (> 0).
    pub speed: f64,
    pub align_bytes: Option<u64>,
    pub repeat_until_written_bytes: Option<u64>,
    pub repeat_offset_bytes: Option<u64>,
    pub map: Option<DeviceMap>,
    pub max_requests: Option<u64>,
}

impl Default for TransformSpec {
    fn default() -> Self {
        TransformSpec {
            devices: Vec::new(),
            ops: Vec::new(),
            rebase_time: true,
            speed: 1.0,
            align_bytes: None,
            repeat_until_written_bytes: None,
            repeat_offset_bytes: None,
            map: None,
            max_requests: None,
        }
    }
}

impl TransformSpec {
    /// Check values and combinations once, before reading.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.speed > 0.0 && self.speed.is_finite()) {
            return Err("--trace-speed must be a positive number".into());
        }
        if self.align_bytes == Some(0) {
            return Err("--trace-align must be positive".into());
        }
        if self.repeat_until_written_bytes == Some(0) {
            return Err("--trace-repeat-until must be positive".into());
        }
        if self.repeat_offset_bytes.is_some() && self.repeat_until_written_bytes.is_none() {
            return Err("--trace-repeat-offset needs --trace-repeat-until".into());
        }
        if self.max_requests == Some(0) {
            return Err("--trace-requests must be positive".into());
        }
        if let Some(m) = &self.map {
            if m.capacity_bytes == 0 || m.grain_bytes == 0 || m.capacity_bytes % m.grain_bytes != 0 {
                return Err(format!(
                    "the device capacity ({} bytes) must be a positive multiple of {} bytes",
                    m.capacity_bytes, m.grain_bytes
                ));
            }
            if let Some(a) = self.align_bytes.filter(|&a| a > m.capacity_bytes) {
                return Err(format!(
                    "--trace-align {a}: larger than the device's logical capacity ({} bytes)",
                    m.capacity_bytes
                ));
            }
            if m.rule == MapRule::Scale && m.extent_bytes.unwrap_or(0) == 0 {
                return Err("--trace-map scale needs the trace's extent (measured or --trace-extent)".into());
            }
        }
        Ok(())
    }

    /// Refuse, before reading anything, the transforms that read the trace
    /// twice when `trace` can be read only once (a pipe or FIFO: reopening
    /// it would wait forever for a writer).
    pub fn refuse_second_pass(&self, trace: &std::path::Path) -> Result<(), String> {
        if super::trace::source::rereadable(trace) {
            return Ok(());
        }
        let why = if self.map.is_some_and(|m| m.rule == MapRule::Scale && m.extent_bytes.is_none()) {
            "--trace-map scale measures the trace's extent in a first pass; give it with --trace-extent BYTES"
        } else if self.repeat_until_written_bytes.is_some() {
            "--trace-repeat-until reads the trace again for each pass; copy it to a file first"
        } else {
            return Ok(());
        };
        Err(format!("{}: not a regular file (a pipe or FIFO can be read only once): {why}", trace.display()))
    }

    /// Whether a request passes the filters.
    pub fn keeps(&self, r: &TraceRequest) -> bool {
        (self.devices.is_empty() || self.devices.contains(&r.device))
            && (self.ops.is_empty() || self.ops.contains(&r.op))
    }

    /// `offset, size` widened to the alignment (saturating at u64::MAX).
    pub fn aligned(&self, offset: u64, size: u64) -> (u64, u64) {
        match self.align_bytes {
            Some(a) if a > 1 => {
                let start = offset / a * a;
                let end = offset.saturating_add(size);
                let end = end.div_ceil(a).saturating_mul(a);
                (start, end - start)
            }
            _ => (offset, size),
        }
    }
}

/// What the transforms did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TransformCounts {
    /// Requests dropped by the device and operation filters.
    pub filtered_out: u64,
    /// Requests widened by `--trace-align`.
    pub aligned: u64,
    /// Requests that did not fit in the device before mapping.
    pub out_of_range: u64,
    /// Of those, dropped (`skip`).
    pub skipped_out_of_range: u64,
    /// Requests split at the end of the device (`wrap`).
    pub split_at_end: u64,
    /// Requests longer than the device, cut to its capacity.
    pub cut_to_capacity: u64,
    /// Passes over the file (more than 1 when repeating).
    pub passes: u64,
    /// The repeat offset S in bytes (0 when not repeating).
    pub repeat_offset_bytes: u64,
    /// The extent used by `scale`, bytes.
    pub scale_extent_bytes: Option<u64>,
    /// Requests handed on, and the bytes written among them.
    pub emitted: u64,
    pub written_bytes: u64,
    /// The last write was shortened to stop exactly at the repeat target.
    pub last_write_shortened: bool,
}

/// A trace reader with transforms applied: a stream of [`TraceRequest`]s.
pub struct Transformed {
    reader: TraceReader,
    spec: TransformSpec,
    counts: TransformCounts,
    split_rest: Option<TraceRequest>,
    pass: u64,
    pass_written: u64,
    time_origin: Option<u64>,
    /// The time of the request last read, transformed but not clamped at 0
    /// (see [`Transformed::next_timed`]).
    signed_time_ns: i128,
    // Pass 0's figures, for the repeat offset and time shift.
    pass0_max_end: u64,
    pass0_requests: u64,
    pass0_last_time: u64,
    time_shift_ns: u64,
    done: bool,
    /// Requests that passed the filters.
    kept: u64,
    /// What the filters dropped while none was kept, for the warning.
    dropped_devices: Vec<u32>,
    /// More distinct devices were dropped than are listed.
    dropped_devices_more: bool,
    dropped_ops: [bool; 4],
}

/// Devices listed in the "filters kept nothing" warning.
const WARN_DEVICES: usize = 16;

impl Transformed {
    pub fn new(reader: TraceReader, spec: TransformSpec) -> Result<Transformed, String> {
        spec.validate()?;
        let counts = TransformCounts {
            passes: 1,
            scale_extent_bytes: spec.map.and_then(|m| m.extent_bytes),
            ..Default::default()
        };
        Ok(Transformed {
            reader,
            spec,
            counts,
            split_rest: None,
            pass: 0,
            pass_written: 0,
            time_origin: None,
            signed_time_ns: 0,
            pass0_max_end: 0,
            pass0_requests: 0,
            pass0_last_time: 0,
            time_shift_ns: 0,
            done: false,
            kept: 0,
            dropped_devices: Vec::new(),
            dropped_devices_more: false,
            dropped_ops: [false; 4],
        })
    }

    pub fn reader(&self) -> &TraceReader {
        &self.reader
    }
    pub fn spec(&self) -> &TransformSpec {
        &self.spec
    }
    pub fn counts(&self) -> &TransformCounts {
        &self.counts
    }

    /// The next transformed request with its signed time: what `time_ns`
    /// would be if it could go below 0. A trace whose times go back before
    /// its first request's has them clamped to 0 in `time_ns` (an arrival
    /// cannot precede the replay's start); statistics need the true order
    /// and distances, so they read this one.
    pub fn next_timed(&mut self) -> Result<Option<(TraceRequest, i128)>, TraceError> {
        Ok(self.next_request()?.map(|r| (r, self.signed_time_ns)))
    }

    /// The next transformed request, `None` when the stream is over.
    pub fn next_request(&mut self) -> Result<Option<TraceRequest>, TraceError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if let Some(rest) = self.split_rest.take() {
                return Ok(Some(self.emit(rest)));
            }
            let Some(mut r) = self.reader.next_request()? else {
                if self.start_next_pass()? {
                    continue;
                }
                self.done = true;
                return Ok(None);
            };
            if !self.spec.keeps(&r) {
                self.counts.filtered_out += 1;
                if self.kept == 0 {
                    self.note_dropped(&r);
                }
                continue;
            }
            self.kept += 1;
            let t = self.time_of(r.time_ns);
            self.signed_time_ns = t;
            r.time_ns = t.clamp(0, i128::from(u64::MAX)) as u64;
            if r.op != HostOp::Flush {
                let (o, s) = self.spec.aligned(r.offset_bytes, r.size_bytes);
                if (o, s) != (r.offset_bytes, r.size_bytes) {
                    self.counts.aligned += 1;
                }
                r.offset_bytes = o;
                r.size_bytes = s;
            }
            if self.pass == 0 {
                self.pass0_requests += 1;
                self.pass0_last_time = self.pass0_last_time.max(r.time_ns);
                if r.op != HostOp::Flush {
                    self.pass0_max_end = self.pass0_max_end.max(r.end_bytes());
                }
            }
            if r.op == HostOp::Flush {
                return Ok(Some(self.emit(r)));
            }
            if let Some(placed) = self.place(r)? {
                return Ok(Some(self.emit(placed)));
            }
        }
    }

    /// Remember a filtered-out request's device and operation (cheap: only
    /// while nothing has been kept, at most [`WARN_DEVICES`] devices).
    fn note_dropped(&mut self, r: &TraceRequest) {
        self.dropped_ops[r.op.index()] = true;
        if !self.dropped_devices.contains(&r.device) {
            if self.dropped_devices.len() < WARN_DEVICES {
                self.dropped_devices.push(r.device);
            } else {
                self.dropped_devices_more = true;
            }
        }
    }

    /// Why the stream handed out no request, if it did not (call at the end).
    pub fn warnings(&self) -> Vec<String> {
        if self.counts.emitted > 0 {
            return Vec::new();
        }
        let read = self.reader.counts();
        let requests = read.requests;
        let warning = if requests == 0 {
            format!(
                "the trace has no request ({} lines: {} ignored, {} bad lines skipped)",
                read.lines, read.ignored_lines, read.skipped_bad_lines
            )
        } else if self.kept == 0 {
            format!(
                "the filters ({}) kept none of the trace's {requests} requests; it has device(s) {} and operation(s) {}",
                self.filter_flags(),
                self.dropped_device_list(),
                HostOp::ALL
                    .iter()
                    .filter(|o| self.dropped_ops[o.index()])
                    .map(|o| o.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "none of the {} requests the filters kept fits the device: {} out of range and skipped (--trace-map skip)",
                self.kept, self.counts.skipped_out_of_range
            )
        };
        vec![format!("no request replayed: {warning}")]
    }

    fn filter_flags(&self) -> String {
        let mut f = Vec::new();
        if !self.spec.devices.is_empty() {
            let d: Vec<String> = self.spec.devices.iter().map(|&d| self.show_device(d)).collect();
            f.push(format!("--trace-device {}", d.join(" ")));
        }
        if !self.spec.ops.is_empty() {
            let o: Vec<&str> = self.spec.ops.iter().map(|o| o.name()).collect();
            f.push(format!("--trace-op {}", o.join(",")));
        }
        f.join(", ")
    }

    fn dropped_device_list(&self) -> String {
        let mut d: Vec<String> = self.dropped_devices.iter().map(|&d| self.show_device(d)).collect();
        if self.dropped_devices_more {
            d.push("…".into());
        }
        d.join(", ")
    }

    /// A device number as the user writes it (blkparse: `MAJOR,MINOR`).
    fn show_device(&self, d: u32) -> String {
        if self.reader.format() == super::trace::TraceFormat::Blkparse {
            format!("{},{}", d >> 20, d & ((1 << 20) - 1))
        } else {
            d.to_string()
        }
    }

    /// Rebased, scaled, shifted time; negative when before the origin.
    fn time_of(&mut self, t: u64) -> i128 {
        let t = if self.spec.rebase_time {
            let origin = *self.time_origin.get_or_insert(t);
            i128::from(t) - i128::from(origin)
        } else {
            i128::from(t)
        };
        let t = if self.spec.speed == 1.0 { t } else { (t as f64 / self.spec.speed) as i128 };
        t + i128::from(self.time_shift_ns)
    }

    /// At the end of a pass: start another if the repeat target is not met.
    fn start_next_pass(&mut self) -> Result<bool, TraceError> {
        let Some(target) = self.spec.repeat_until_written_bytes else {
            return Ok(false);
        };
        if self.counts.written_bytes >= target {
            return Ok(false);
        }
        if self.pass_written == 0 {
            return Err(TraceError::File {
                file: self.reader.name().to_string(),
                message: format!(
                    "pass {} wrote nothing, so --trace-repeat-until {target} can never be reached (check the filters)",
                    self.pass + 1
                ),
            });
        }
        if self.pass == 0 {
            self.counts.repeat_offset_bytes =
                self.spec.repeat_offset_bytes.unwrap_or_else(|| self.pass0_max_end.div_ceil(1 << 20).max(1) << 20);
        }
        self.pass += 1;
        self.pass_written = 0;
        self.counts.passes += 1;
        let mean_gap = self.pass0_last_time / self.pass0_requests.max(2).saturating_sub(1);
        let span = self.pass0_last_time.saturating_add(mean_gap);
        self.time_shift_ns = span.saturating_mul(self.pass);
        // The origin stays: pass k's times are its own, rebased by pass 0's origin.
        self.reader.rewind()?;
        Ok(true)
    }

    /// Apply the repeat shift and the device map. `None`: skipped.
    fn place(&mut self, mut r: TraceRequest) -> Result<Option<TraceRequest>, TraceError> {
        let shift = u128::from(self.pass) * u128::from(self.counts.repeat_offset_bytes);
        let Some(m) = self.spec.map else {
            r.offset_bytes = u64::try_from(u128::from(r.offset_bytes) + shift)
                .map_err(|_| self.request_error(&r, "the repeat offset takes the request beyond 2^64 bytes"))?;
            return Ok(Some(r));
        };
        let cap = m.capacity_bytes;
        let mut offset = u128::from(r.offset_bytes);
        // Out of range: the request as the trace (and the repeat) placed it does not fit.
        if offset + shift + u128::from(r.size_bytes) > u128::from(cap) {
            self.counts.out_of_range += 1;
        }
        if m.rule == MapRule::Scale {
            let extent = u128::from(m.extent_bytes.unwrap_or(cap).max(1));
            let grain = u128::from(m.grain_bytes);
            let mut o = offset * u128::from(cap) / extent / grain * grain;
            let size = u128::from(r.size_bytes.min(cap));
            if o + size > u128::from(cap) {
                o = (u128::from(cap) - size) / grain * grain;
            }
            offset = o;
        }
        offset += shift;
        let fits = offset + u128::from(r.size_bytes) <= u128::from(cap);
        if fits {
            r.offset_bytes = offset as u64;
            return Ok(Some(r));
        }
        match m.rule {
            MapRule::Skip => {
                self.counts.skipped_out_of_range += 1;
                Ok(None)
            }
            MapRule::Reject => Err(self.request_error(
                &r,
                &format!(
                    "offset {offset} + size {} bytes is beyond the device's {cap} bytes (--trace-map reject; try wrap, scale or skip)",
                    r.size_bytes
                ),
            )),
            MapRule::Wrap | MapRule::Scale => {
                if r.size_bytes > cap {
                    r.size_bytes = cap;
                    self.counts.cut_to_capacity += 1;
                }
                let o = (offset % u128::from(cap)) as u64;
                r.offset_bytes = o;
                if o + r.size_bytes > cap {
                    let first = cap - o;
                    self.split_rest = Some(TraceRequest {
                        offset_bytes: 0,
                        size_bytes: r.size_bytes - first,
                        ..r
                    });
                    r.size_bytes = first;
                    self.counts.split_at_end += 1;
                }
                Ok(Some(r))
            }
        }
    }

    fn request_error(&self, r: &TraceRequest, message: &str) -> TraceError {
        TraceError::Request { file: self.reader.name().to_string(), line: r.line, message: message.to_string() }
    }

    /// Count a request on its way out and apply the stop conditions.
    fn emit(&mut self, mut r: TraceRequest) -> TraceRequest {
        if r.op == HostOp::Write {
            if let Some(target) = self.spec.repeat_until_written_bytes {
                let left = target - self.counts.written_bytes;
                if r.size_bytes >= left {
                    if r.size_bytes > left {
                        r.size_bytes = left;
                        self.counts.last_write_shortened = true;
                    }
                    self.done = true;
                }
            }
            // Saturating: a trace may write more than 2^64 bytes in total.
            self.counts.written_bytes = self.counts.written_bytes.saturating_add(r.size_bytes);
            self.pass_written = self.pass_written.saturating_add(r.size_bytes);
        }
        self.counts.emitted += 1;
        if self.spec.max_requests == Some(self.counts.emitted) {
            self.done = true;
        }
        r
    }
}

/// The trace's extent for `--trace-map scale`: the highest end offset of a
/// kept read, write or trim, after alignment (one full pass over `reader`).
pub fn measure_extent(mut reader: TraceReader, spec: &TransformSpec) -> Result<u64, TraceError> {
    let mut extent = 0;
    while let Some(r) = reader.next_request()? {
        if r.op != HostOp::Flush && spec.keeps(&r) {
            let (o, s) = spec.aligned(r.offset_bytes, r.size_bytes);
            extent = extent.max(o.saturating_add(s));
        }
    }
    Ok(extent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::{ReaderOptions, TraceFormat};

    #[test]
    fn the_device_grain_keeps_an_alignment_that_divides_the_device() {
        let grain = |align, capacity| DeviceMap::onto_device(MapRule::Wrap, capacity, 512, align, None).grain_bytes;
        assert_eq!(grain(Some(4096), 64 * 4096), 4096);
        assert_eq!(grain(Some(4096), 64 * 4096 + 512), 512, "an alignment not dividing the device");
        assert_eq!(grain(Some(1000), 64 * 4096), 512, "not a multiple of the sector");
        assert_eq!(grain(Some(256), 64 * 4096), 512, "finer than the sector");
        assert_eq!(grain(None, 64 * 4096), 512);
    }

    #[test]
    fn a_second_pass_is_refused_only_for_what_cannot_be_read_twice() {
        let file = std::env::temp_dir().join(format!("nandlab-refuse-{}.trace", std::process::id()));
        std::fs::write(&file, "").unwrap();
        let repeat = TransformSpec { repeat_until_written_bytes: Some(1 << 20), ..Default::default() };
        assert_eq!(repeat.refuse_second_pass(&file), Ok(()), "a regular file is read again");
        let _ = std::fs::remove_file(&file);
        #[cfg(unix)]
        {
            let device = std::path::Path::new("/dev/null");
            // /dev/null is a character device: read once, like a pipe.
            let e = repeat.refuse_second_pass(device).unwrap_err();
            assert!(e.starts_with("/dev/null: not a regular file") && e.contains("--trace-repeat-until"), "{e}");
            assert_eq!(TransformSpec::default().refuse_second_pass(device), Ok(()), "one pass is fine");
        }
    }

    fn stream(text: &str, spec: TransformSpec) -> Vec<TraceRequest> {
        let r = TraceReader::from_bytes("t", text.as_bytes().to_vec(), &ReaderOptions::for_format(TraceFormat::Mqsim))
            .unwrap();
        let mut t = Transformed::new(r, spec).unwrap();
        let mut v = Vec::new();
        while let Some(x) = t.next_request().unwrap() {
            v.push(x);
        }
        v
    }

    fn spans(v: &[TraceRequest]) -> Vec<(u64, u64)> {
        v.iter().map(|r| (r.offset_bytes, r.size_bytes)).collect()
    }

    fn device(rule: MapRule, capacity: u64) -> Option<DeviceMap> {
        Some(DeviceMap { rule, capacity_bytes: capacity, grain_bytes: 512, extent_bytes: None })
    }

    const TEXT: &str = "100 0 0 8 0\n200 1 16 8 1\n300 0 100 8 0\n";

    #[test]
    fn filters_drop_other_devices_and_operations() {
        let v = stream(TEXT, TransformSpec { devices: vec![0], ..Default::default() });
        assert_eq!(v.len(), 2);
        let v = stream(TEXT, TransformSpec { ops: vec![HostOp::Read], ..Default::default() });
        assert_eq!(spans(&v), vec![(16 * 512, 4096)]);
    }

    #[test]
    fn times_are_rebased_and_scaled() {
        let v = stream(TEXT, TransformSpec { speed: 2.0, ..Default::default() });
        let t: Vec<u64> = v.iter().map(|r| r.time_ns).collect();
        assert_eq!(t, vec![0, 50, 100]);
    }

    #[test]
    fn align_widens_to_cover() {
        let v = stream("0 0 1 2 0\n", TransformSpec { align_bytes: Some(4096), ..Default::default() });
        assert_eq!(spans(&v), vec![(0, 4096)]);
    }

    #[test]
    fn wrap_takes_offsets_modulo_capacity_and_splits_at_the_end() {
        // Capacity 64 sectors; the third request (100..108) lands at 36..44;
        // one at 60..68 splits into 60..64 and 0..4.
        let text = format!("{TEXT}400 0 60 8 0\n");
        let v = stream(&text, TransformSpec { map: device(MapRule::Wrap, 64 * 512), ..Default::default() });
        assert_eq!(spans(&v), vec![(0, 4096), (16 * 512, 4096), (36 * 512, 4096), (60 * 512, 2048), (0, 2048)]);
    }

    #[test]
    fn skip_drops_and_reject_refuses_out_of_range_requests() {
        let v = stream(TEXT, TransformSpec { map: device(MapRule::Skip, 64 * 512), ..Default::default() });
        assert_eq!(v.len(), 2);
        let r = TraceReader::from_bytes("t", TEXT.as_bytes().to_vec(), &ReaderOptions::for_format(TraceFormat::Mqsim))
            .unwrap();
        let mut t = Transformed::new(r, TransformSpec { map: device(MapRule::Reject, 64 * 512), ..Default::default() })
            .unwrap();
        t.next_request().unwrap();
        t.next_request().unwrap();
        let e = t.next_request().unwrap_err().to_string();
        assert!(e.starts_with("t:3: offset 51200"), "{e}");
    }

    #[test]
    fn scale_maps_the_extent_onto_the_device() {
        let v = stream(
            TEXT,
            TransformSpec {
                map: Some(DeviceMap {
                    rule: MapRule::Scale,
                    capacity_bytes: 54 * 512,
                    grain_bytes: 512,
                    extent_bytes: Some(108 * 512),
                }),
                ..Default::default()
            },
        );
        assert_eq!(spans(&v), vec![(0, 4096), (8 * 512, 4096), (46 * 512, 4096)]);
    }

    #[test]
    fn the_first_n_requests_are_taken() {
        let v = stream(TEXT, TransformSpec { max_requests: Some(2), ..Default::default() });
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn invalid_combinations_are_refused_up_front() {
        let bad = |s: TransformSpec, what: &str| {
            let e = s.validate().unwrap_err();
            assert!(e.contains(what), "{e}");
        };
        bad(TransformSpec { speed: 0.0, ..Default::default() }, "--trace-speed");
        bad(TransformSpec { repeat_offset_bytes: Some(4096), ..Default::default() }, "--trace-repeat-until");
        bad(TransformSpec { map: device(MapRule::Scale, 4096), ..Default::default() }, "extent");
        bad(
            TransformSpec { align_bytes: Some(8192), map: device(MapRule::Wrap, 4096), ..Default::default() },
            "--trace-align 8192: larger than the device's logical capacity (4096 bytes)",
        );
        assert!(TransformSpec { align_bytes: Some(4096), map: device(MapRule::Wrap, 4096), ..Default::default() }
            .validate()
            .is_ok());
    }

    #[test]
    fn written_bytes_saturate_instead_of_overflowing() {
        // Two writes of 2^63 bytes each.
        let r = TraceReader::from_bytes(
            "t",
            b"0 0 0 18014398509481984 0\n1 0 0 18014398509481984 0\n".to_vec(),
            &ReaderOptions::for_format(TraceFormat::Mqsim),
        )
        .unwrap();
        let mut t = Transformed::new(r, TransformSpec::default()).unwrap();
        while t.next_request().unwrap().is_some() {}
        assert_eq!(t.counts().written_bytes, u64::MAX);
    }

    fn warnings_after(text: &str, spec: TransformSpec) -> Vec<String> {
        let r = TraceReader::from_bytes("t", text.as_bytes().to_vec(), &ReaderOptions::for_format(TraceFormat::Mqsim))
            .unwrap();
        let mut t = Transformed::new(r, spec).unwrap();
        while t.next_request().unwrap().is_some() {}
        t.warnings()
    }

    #[test]
    fn a_stream_that_replays_nothing_says_why() {
        assert!(warnings_after(TEXT, TransformSpec::default()).is_empty());
        let w = warnings_after(TEXT, TransformSpec { devices: vec![7], ops: vec![HostOp::Trim], ..Default::default() });
        assert_eq!(
            w,
            vec!["no request replayed: the filters (--trace-device 7, --trace-op trim) kept none of the trace's 3 requests; it has device(s) 0, 1 and operation(s) read, write"]
        );
        let sixteen: String = (0..16).map(|d| format!("{d} {d} 0 8 0\n")).collect();
        let w = warnings_after(&sixteen, TransformSpec { devices: vec![99], ..Default::default() });
        assert!(w[0].contains("device(s) 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and"), "{w:?}");
        let w = warnings_after(
            &format!("{sixteen}16 16 0 8 0\n"),
            TransformSpec { devices: vec![99], ..Default::default() },
        );
        assert!(w[0].contains("14, 15, … and"), "{w:?}");
        let w = warnings_after("# nothing\n", TransformSpec::default());
        assert!(w[0].contains("the trace has no request (1 lines: 1 ignored"), "{w:?}");
        let w =
            warnings_after("0 0 100 8 0\n", TransformSpec { map: device(MapRule::Skip, 4096), ..Default::default() });
        assert!(w[0].contains("1 out of range and skipped"), "{w:?}");
    }
}
