//! Run records and the garbage collection that keeps what the kept runs name.

use std::collections::BTreeSet;
use std::fs::{self};

use serde::{Deserialize, Serialize};

use crate::store::read_dir_paths;
use crate::{Cache, Digest, Result, io_err};

/// What a finished run references; `gc` keeps everything the kept runs list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    /// Identifies the pipeline (its config file); gc keeps the newest runs per pipeline.
    pub pipeline: String,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    /// Free-form description of the run (stage keys, params, inputs) for `status`.
    pub detail: serde_json::Value,
    /// Every object the run produced or reused.
    pub objects: BTreeSet<Digest>,
    /// Every ref (`namespace/key`) the run used.
    pub refs: BTreeSet<String>,
}

/// Outcome of a garbage collection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    pub kept_runs: usize,
    pub removed_runs: usize,
    pub kept_objects: usize,
    pub removed_objects: usize,
    pub removed_refs: usize,
    pub freed_bytes: u64,
}

impl Cache {
    /// Saves a finished run's record.
    pub fn record_run(&self, run: &RunRecord) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(run).expect("run records serialise");
        self.write_atomic(&self.root.join("runs").join(format!("{}.json", run.id)), &bytes)
    }

    /// All run records, oldest first. Unreadable records are skipped and reported.
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        let dir = self.root.join("runs");
        let mut runs = Vec::new();
        for e in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let path = e.map_err(io_err(&dir))?.path();
            if path.extension().is_some_and(|x| x == "json") {
                let bytes = fs::read(&path).map_err(io_err(&path))?;
                match serde_json::from_slice::<RunRecord>(&bytes) {
                    Ok(r) => runs.push(r),
                    Err(e) => {
                        self.corruptions
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("unreadable run record {} ({e}); it is ignored", path.display()));
                    }
                }
            }
        }
        runs.sort_by(|a, b| (a.finished_unix_ms, &a.id).cmp(&(b.finished_unix_ms, &b.id)));
        Ok(runs)
    }

    /// The newest finished run of `pipeline`.
    pub fn latest_run(&self, pipeline: &str) -> Result<Option<RunRecord>> {
        Ok(self.runs()?.into_iter().rev().find(|r| r.pipeline == pipeline))
    }

    /// Keeps the newest `keep_per_pipeline` runs of each pipeline and removes every
    /// object and ref that none of them references.
    pub fn gc(&self, keep_per_pipeline: usize) -> Result<GcReport> {
        self.gc_forgetting(keep_per_pipeline, |_| false)
    }

    /// [`Cache::gc`], and first forgets every run `forget` names (a pipeline that is
    /// gone, whose objects no one will ask for again).
    pub fn gc_forgetting(&self, keep_per_pipeline: usize, forget: impl Fn(&RunRecord) -> bool) -> Result<GcReport> {
        let runs = self.runs()?;
        let mut report = GcReport::default();
        let mut kept: Vec<&RunRecord> = Vec::new();
        let mut seen = std::collections::HashMap::<&str, usize>::new();
        for r in runs.iter().rev() {
            let n = seen.entry(r.pipeline.as_str()).or_default();
            if *n < keep_per_pipeline.max(1) && !forget(r) {
                kept.push(r);
                *n += 1;
            } else {
                let p = self.root.join("runs").join(format!("{}.json", r.id));
                fs::remove_file(&p).map_err(io_err(&p))?;
                report.removed_runs += 1;
            }
        }
        report.kept_runs = kept.len();
        let live_objects: BTreeSet<Digest> = kept.iter().flat_map(|r| r.objects.iter().copied()).collect();
        let live_refs: BTreeSet<&str> = kept.iter().flat_map(|r| r.refs.iter().map(String::as_str)).collect();

        let objects = self.root.join("objects");
        for shard in read_dir_paths(&objects)? {
            for path in read_dir_paths(&shard)? {
                let name = format!(
                    "{}{}",
                    shard.file_name().unwrap_or_default().to_string_lossy(),
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                let live = Digest::parse(&name).is_ok_and(|d| live_objects.contains(&d));
                if live {
                    report.kept_objects += 1;
                } else {
                    report.freed_bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    fs::remove_file(&path).map_err(io_err(&path))?;
                    report.removed_objects += 1;
                }
            }
            let _ = fs::remove_dir(&shard); // only succeeds when empty
        }
        let refs = self.root.join("refs");
        for ns in read_dir_paths(&refs)? {
            let ns_name = ns.file_name().unwrap_or_default().to_string_lossy().into_owned();
            for shard in read_dir_paths(&ns)? {
                for path in read_dir_paths(&shard)? {
                    let name = format!(
                        "{ns_name}/{}{}",
                        shard.file_name().unwrap_or_default().to_string_lossy(),
                        path.file_name().unwrap_or_default().to_string_lossy()
                    );
                    if !live_refs.contains(name.as_str()) {
                        fs::remove_file(&path).map_err(io_err(&path))?;
                        report.removed_refs += 1;
                    }
                }
                let _ = fs::remove_dir(&shard);
            }
        }
        Ok(report)
    }
}
