//! `atlas add`: package versions as libraries, built from their published artifacts
//! and installed.

use atlas_dist::config::Config;
use atlas_runtime::exit::UsageError;
use atlas_runtime::package::PackageSpec;

use crate::deps::{Done, Pass, Wanted};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// crate:NAME@VERSION, npm:NAME@VERSION (npm:@scope/name@…) or pypi:NAME@VERSION.
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<String>,
    #[command(flatten)]
    build: super::sync::Build,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let wanted = self
            .specs
            .iter()
            .map(|s| s.parse::<PackageSpec>().map(|spec| Wanted { spec, checksums: Vec::new(), index: None }))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| UsageError(e.to_string()))?;
        let opts = self.build.options(cfg);
        let done = crate::deps::add(&wanted, Pass::Keyword, &opts);
        let embedded = crate::deps::vectors(&wanted, &done, &opts);
        let failed = done.iter().filter(|d| matches!(d, Done::Failed(_))).count();
        let unembedded = embedded.iter().filter(|d| matches!(d, Some(Done::Failed(_)))).count();
        let ok: Vec<&Wanted> =
            wanted.iter().zip(&done).filter(|(_, d)| !matches!(d, Done::Failed(_))).map(|(w, _)| w).collect();
        let home = atlas_dist::home::Home::from_env();
        for w in &ok {
            let name = w.spec.bundle_name();
            // The name serves its current version, the newest; an older one added
            // beside it is served by its version.
            let bundle = match home.current(&name).as_deref() == Some(w.spec.version.as_str()) {
                true => w.spec.shown_name(),
                false => w.spec.to_string(),
            };
            super::print(&crate::manage::editor_config(&name, &["--bundle", &bundle]))?;
        }
        if failed > 0 {
            anyhow::bail!(
                "{failed} of {} packages failed (each said why above); nothing of those was installed",
                done.len()
            );
        }
        if unembedded > 0 {
            anyhow::bail!(
                "{} {} not embedded (each said why above); they answer by keyword and symbols",
                atlas_runtime::words::count(unembedded, "package"),
                atlas_runtime::words::agree(unembedded, "was", "were")
            );
        }
        Ok(())
    }
}
