//! The steps of an export: each one transaction that records itself in `progress`,
//! run [`LANES`] at a time, and the progress they show.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use deadpool_postgres::Client;

use super::LANES;
use crate::{Db, pg};

/// The steps of one export: each runs in a transaction with its own progress row, and
/// is skipped when a previous run committed it.
pub(super) struct Steps<'a> {
    db: &'a Arc<Db>,
    schema: &'a str,
    done: HashSet<String>,
    pub(super) run: Cell<usize>,
    pub(super) skipped: Cell<usize>,
    pub(super) progress: Progress,
    /// Per kind of step (a load step's name before `:`) in the current call: steps
    /// run and the time they took, summed over lanes.
    work: RefCell<Vec<(String, usize, Duration)>>,
}

impl<'a> Steps<'a> {
    pub(super) fn new(db: &'a Arc<Db>, schema: &'a str, done: HashSet<String>) -> Self {
        let progress = Progress::new();
        Steps { db, schema, done, run: Cell::new(0), skipped: Cell::new(0), progress, work: RefCell::default() }
    }

    /// Each of `steps`, [`LANES`] at a time (one connection and one server process
    /// each); the first error stops the others (their transactions roll back).
    pub(super) fn all<F: AsyncFnOnce(&Client) -> anyhow::Result<()>>(
        &self,
        phase: &str,
        steps: impl ExactSizeIterator<Item = (String, F)>,
    ) -> anyhow::Result<()> {
        let n = steps.len();
        self.phase(phase, n, self.par(steps, LANES))
    }

    /// `work`, made of `steps` steps, reported as one phase.
    pub(super) fn phase<T>(
        &self,
        phase: &str,
        steps: usize,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<()> {
        self.progress.more(steps);
        let t = Instant::now();
        self.db.block_on(work)?;
        self.report(phase, t);
        Ok(())
    }

    /// Each of `steps`, `lanes` at a time.
    pub(super) async fn par<F: AsyncFnOnce(&Client) -> anyhow::Result<()>>(
        &self,
        steps: impl Iterator<Item = (String, F)>,
        lanes: usize,
    ) -> anyhow::Result<()> {
        use futures_util::{StreamExt as _, TryStreamExt as _};
        futures_util::stream::iter(steps.map(|(step, f)| self.step(step, f)))
            .buffer_unordered(lanes)
            .try_collect()
            .await
    }

    /// One line for the call that began at `t`: its wall time and, per kind of step
    /// when there are several, the steps' own time.
    fn report(&self, phase: &str, t: Instant) {
        let work = self.work.take();
        let mut line = format!("{phase}: {:.1} s", t.elapsed().as_secs_f64());
        if work.len() > 1 || work.first().is_some_and(|w| w.1 > 1) {
            let parts: Vec<String> =
                work.iter().map(|(k, n, d)| format!("{k} {n} × {:.1} s", d.as_secs_f64())).collect();
            line.push_str(&format!(" ({})", parts.join(", ")));
        }
        if work.is_empty() {
            line.push_str(" (done before)");
        }
        self.progress.line(&line);
    }

    pub(super) async fn step(
        &self,
        step: String,
        f: impl AsyncFnOnce(&Client) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if self.done.contains(&step) {
            self.skipped.set(self.skipped.get() + 1);
            self.progress.done(&step);
            return Ok(());
        }
        let schema = self.schema;
        let started = Instant::now();
        let c = self.db.client().await?;
        async {
            c.batch_execute("BEGIN").await.map_err(pg)?;
            let result = async {
                f(&c).await?;
                c.execute(&format!("INSERT INTO {schema}.progress (step) VALUES ($1)"), &[&step]).await.map_err(pg)?;
                c.batch_execute("COMMIT").await.map_err(pg)
            }
            .await;
            if result.is_err() {
                let _ = c.batch_execute("ROLLBACK").await;
            }
            result
        }
        .await
        .with_context(|| format!("export step {step}"))?;
        // The fault tests' kill: the process dies between two committed steps.
        atlas_runtime::failpoint::count("export-abort", None);
        self.run.set(self.run.get() + 1);
        let kind = match step.split_once(':') {
            Some((k, _)) if k != "index" => k.to_owned(),
            _ => step.clone(),
        };
        let mut work = self.work.borrow_mut();
        match work.iter_mut().find(|w| w.0 == kind) {
            Some(w) => (w.1, w.2) = (w.1 + 1, w.2 + started.elapsed()),
            None => work.push((kind, 1, started.elapsed())),
        }
        drop(work);
        self.progress.done(&step);
        Ok(())
    }
}

/// The export's progress on stderr: a bar over its steps on a terminal, and in any
/// case one line per phase with its time.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        let bar = atlas_runtime::progress::shown().then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template("export [{bar:30}] {pos}/{len} steps {elapsed} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        Progress { bar }
    }

    fn more(&self, steps: usize) {
        if let Some(b) = &self.bar {
            b.inc_length(steps as u64);
        }
    }

    fn done(&self, step: &str) {
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(step.to_owned());
        }
    }

    pub(super) fn line(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(format!("export: {msg}")),
            None => eprintln!("export: {msg}"),
        }
    }

    pub(super) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
