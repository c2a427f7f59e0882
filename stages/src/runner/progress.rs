//! Progress reporting: indicatif bars on a TTY, plain log lines on stderr otherwise.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug)]
pub struct Progress {
    multi: Option<MultiProgress>,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            multi: atlas_runtime::progress::shown()
                .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
        }
    }

    /// Logs one line on stderr without tearing a bar.
    pub fn log(&self, msg: &str) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(msg);
            }
            None => eprintln!("{msg}"),
        }
    }

    pub fn stage(&self, name: &str, total: usize) -> StageBar {
        let bar = self.multi.as_ref().map(|m| {
            let b = m.add(ProgressBar::new(total as u64));
            b.set_style(
                ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} {rate} eta {eta} {msg}")
                    .expect("static template")
                    .with_key("rate", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0} items/s", s.per_sec());
                    })
                    .progress_chars("=> "),
            );
            b.set_prefix(name.to_owned());
            b
        });
        if bar.is_none() {
            eprintln!("{name}: {}", atlas_runtime::words::count(total, "item"));
        }
        StageBar {
            bar,
            name: name.to_owned(),
            total: total as u64,
            done: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            last_log: Mutex::new(Instant::now()),
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress::new()
    }
}

#[derive(Debug)]
pub struct StageBar {
    bar: Option<ProgressBar>,
    name: String,
    total: u64,
    done: AtomicU64,
    errors: AtomicU64,
    last_log: Mutex<Instant>,
}

impl StageBar {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Counts `n` items done at once (the memo hits of a stage).
    pub fn inc_by(&self, n: usize) {
        if n == 0 {
            return;
        }
        let done = self.done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        match &self.bar {
            Some(b) => b.inc(n as u64),
            None => {
                let mut last = self.last_log.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Duration::from_secs(2) && done < self.total {
                    let errors = self.errors.load(Ordering::Relaxed);
                    eprintln!(
                        "{}: {done}/{}, {}",
                        self.name,
                        atlas_runtime::words::count(self.total, "item"),
                        atlas_runtime::words::count(errors, "error")
                    );
                    *last = Instant::now();
                }
            }
        }
    }

    /// Counts a failed item; the bar shows the count.
    pub fn error(&self) {
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(b) = &self.bar {
            b.set_message(atlas_runtime::words::count(n, "error"));
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
