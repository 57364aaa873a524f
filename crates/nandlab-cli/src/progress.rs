//! The progress bar of a run on a terminal.

use std::io::IsTerminal;

/// A bar on stderr, unless disabled or stderr is not a terminal.
pub fn progress_bar(disabled: bool) -> Option<indicatif::ProgressBar> {
    if disabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .expect("valid template"),
    );
    Some(bar)
}
