//! A progress bar on stderr for long packs and verifies: only on a terminal, never with
//! `--quiet`, and only for inputs large enough to take a noticeable time.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_bundle::progress::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Global;

/// Below this many bytes an operation is quick enough not to need a bar.
const WORTH_A_BAR: u64 = 64 << 20;

pub struct Bar {
    bar: ProgressBar,
    enabled: bool,
    /// The bar is drawn: only then is it told of progress (a hidden `ProgressBar` still
    /// takes its lock and updates its rate estimate on every call, each block read of a
    /// verify: 0.2 % of its samples pinned to one CPU).
    shown: AtomicBool,
}

impl Bar {
    pub fn new(global: Global) -> Self {
        let enabled = !global.quiet && std::io::stderr().is_terminal();
        Bar { bar: ProgressBar::hidden(), enabled, shown: AtomicBool::new(false) }
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
        self.shown.store(true, Ordering::Relaxed);
    }

    fn advance(&self, bytes: u64) {
        if self.shown.load(Ordering::Relaxed) {
            self.bar.inc(bytes);
        }
    }

    fn end(&self) {
        self.bar.finish_and_clear();
    }
}
