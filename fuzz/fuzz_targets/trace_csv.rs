//! Fuzz the csv trace reader and its layouts (alibaba, tencent, vscsi):
//! arbitrary bytes, with a column mapping, units, op values, delimiter and
//! header rule drawn from the first two bytes, never panic.
#![no_main]

use nandlab_fuzz as common;

use libfuzzer_sys::fuzz_target;
use nandlab::workload::trace::csv::{Columns, CsvOptions};
use nandlab::workload::trace::{ReaderOptions, TimeUnit, TraceFormat};

fuzz_target!(|data: &[u8]| {
    let Some((&bits, rest)) = data.split_first() else {
        return;
    };
    match bits & 3 {
        // A named layout, options as for every reader.
        1 => return common::read_all(Some(TraceFormat::Alibaba), rest),
        2 => return common::read_all(Some(TraceFormat::Tencent), rest),
        3 => return common::read_all(Some(TraceFormat::Vscsi), rest),
        _ => {}
    }
    let Some((&more, text)) = rest.split_first() else {
        return;
    };
    // Columns 1..=8 for each field, distinct, time and device optional.
    let col = |shift: u32| usize::from((more >> shift) & 7);
    let mut used = [false; 8];
    let mut take = |c: usize| {
        let mut c = c;
        while used[c] {
            c = (c + 1) % 8;
        }
        used[c] = true;
        c
    };
    let op = take(col(0));
    let offset = take(col(3));
    let size = take(usize::from(bits >> 5));
    let time = (bits & 4 != 0).then(|| take(col(5)));
    let device = (bits & 8 != 0).then(|| take(usize::from(more >> 6) + 4));
    let spec = format!(
        "op={},offset={},size={}{}{}",
        op + 1,
        offset + 1,
        size + 1,
        time.map_or(String::new(), |t| format!(",time={}", t + 1)),
        device.map_or(String::new(), |d| format!(",device={}", d + 1)),
    );
    let columns: Columns = spec.parse().expect("distinct columns 1..=8 always parse");
    let options = ReaderOptions {
        time_unit: Some([TimeUnit::Ns, TimeUnit::Us, TimeUnit::Ms, TimeUnit::S][usize::from(more & 3)]),
        skip_bad_lines: bits & 16 != 0,
        csv: CsvOptions {
            columns: Some(columns),
            offset_unit: Some([1, 512, 4096, u64::MAX / 3][usize::from((more >> 2) & 3)]),
            size_unit: Some(if more & 16 != 0 { 512 } else { 1 }),
            ops: ["read=r,0,28", "write=w,1,2a", "trim=d", "flush=f", "ignore=x"]
                .iter()
                .map(|r| r.parse().expect("fixed op rules parse"))
                .collect(),
            delimiter: Some(if more & 32 != 0 { b';' } else { b',' }),
            skip_header: more & 128 != 0,
        },
        ..ReaderOptions::for_format(TraceFormat::Csv)
    };
    common::read_with(&options, text);
});
