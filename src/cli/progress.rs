//! A progress bar on stderr for long packs and verifies: only on a terminal, never with
//! `--quiet`, and only for inputs large enough to take a noticeable time.

use std::io::IsTerminal;

use agent_bundle::progress::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Global;

/// Below this many bytes an operation is quick enough not to need a bar.
const WORTH_A_BAR: u64 = 64 << 20;

pub struct Bar {
    bar: ProgressBar,
    enabled: bool,
}

impl Bar {
    pub fn new(global: Global) -> Self {
        let enabled = !global.quiet && std::io::stderr().is_terminal();
        Bar { bar: ProgressBar::hidden(), enabled }
    }
}

impl Progress for Bar {
    fn begin(&self, what: &str, total: u64) {
        if !self.enabled || total < WORTH_A_BAR {
            return;
        }
        self.bar.set_length(total);
        self.bar.set_position(0);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>10} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_message(what.to_owned());
        self.bar.set_draw_target(ProgressDrawTarget::stderr());
    }

    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    fn end(&self) {
        self.bar.finish_and_clear();
    }
}
