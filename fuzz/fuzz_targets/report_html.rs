//! Fuzz the HTML report's reader and page: any text is either refused by
//! `read_report` with a message naming the file (and, for broken JSON, the
//! line and column), or drawn into a page — never a panic, whatever
//! fields are missing, mistyped, huge or non-finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::report::html::{labels, read_report, render, Run};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match read_report("fuzz.json", text) {
        Ok((kind, report)) => {
            let label = labels(&[("fuzz.json", &report)]).remove(0);
            let page = render(kind, &[Run { label, report }]);
            assert!(page.ends_with("</html>\n"));
        }
        Err(e) => assert!(e.starts_with("fuzz.json: "), "{e}"),
    }
});
