//! `atlas doctor`: every check, a bad config file among them (reported, not fatal).

use crate::doctor::Status;
use atlas_dist::config::Config;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    #[arg(long)]
    json: bool,
    /// Also check a project: that its library set serves what its lockfiles pin, and
    /// that each library of the set is installed (a line for each that is not).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

impl Args {
    pub(super) fn run(self, loaded: Result<(Config, Option<PathBuf>), atlas_dist::Error>) -> anyhow::Result<()> {
        let (cfg, found) = match loaded {
            Ok((c, p)) => (c, Ok(p)),
            Err(e) => (Config::default(), Err(e)),
        };
        atlas_runtime::model::configure(cfg.home, cfg.model_dir);
        let mut checks = crate::doctor::run(found);
        if let Some(dir) = &self.project {
            checks.extend(crate::doctor::project(dir));
        }
        let failed = checks.iter().any(|c| c.status == Status::Fail);
        let text = if self.json {
            format!("{}\n", serde_json::to_string_pretty(&serde_json::json!({ "ok": !failed, "checks": checks }))?)
        } else {
            crate::doctor::render(&checks)
        };
        super::print(&text)?;
        if failed {
            anyhow::bail!("doctor found a failing check (the lines marked FAIL say what to do)");
        }
        Ok(())
    }
}
