//! The replay's progress bar: drawn on standard error, and only when that
//! is a terminal and the report is not JSON, so what goes to a pipe or a
//! file is the report alone.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::services::shadow::Progress;

/// A bar on standard error: a spinner while the journal is read, then
/// deliveries decided by both sets out of the total, and their rate.
pub(super) struct Bar(ProgressBar);

impl Bar {
    /// A bar, when one may be drawn: never with `json`, never when standard
    /// error is not a terminal.
    pub(super) fn on_stderr(json: bool) -> Option<Self> {
        if json || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar.set_message("reading the journal");
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Some(Self(bar))
    }

    /// Leaves the last state drawn: how many, how fast; where it stopped
    /// when the replay failed.
    pub(super) fn finish(&self, replayed: bool) {
        if replayed {
            self.0.finish();
        } else {
            self.0.abandon();
        }
    }
}

impl Progress for Bar {
    fn started(&self, total: usize) {
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} replaying {human_pos}/{human_len} deliveries {wide_bar} {per_sec:0} ({elapsed}, about {eta} left)",
        ) {
            self.0.set_style(style);
        }
        self.0.set_length(total as u64);
        // Time and rate from here: reading the journal is not replaying it.
        self.0.reset_elapsed();
        self.0.reset_eta();
    }

    fn decided(&self, done: usize) {
        self.0.set_position(done as u64);
    }
}
