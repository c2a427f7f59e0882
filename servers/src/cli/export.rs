//! `atlas export`: a bundle into PostgreSQL with pgvector, for `atlas serve rag
//! --backend` (docs/scaling.md); `--list` and `--drop` manage what is there.

use super::locate::locate;
use anyhow::Context as _;
use atlas_dist::config::Config;
use atlas_mcp::live::Origin;
use atlas_runtime::exit::UsageError;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// An installed bundle's name, NAME@VERSION, or a bundle folder.
    #[arg(env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
    /// The database: postgres://USER[:PASSWORD]@HOST:PORT/DB (pgvector installed there
    /// or installable by USER).
    #[arg(long, env = "ATLAS_DATABASE_URL", hide_env_values = true, value_name = "URL")]
    to: String,
    /// List the exported bundles instead.
    #[arg(long, conflicts_with_all = ["bundle", "drop"])]
    list: bool,
    /// Drop an exported bundle (its schema and catalog row) instead.
    #[arg(long, value_name = "NAME@VERSION", conflicts_with = "bundle")]
    drop: Option<String>,
    /// How the vectors are indexed in the database.
    #[arg(long, value_enum, default_value = "hnsw")]
    vector_index: atlas_pg::VectorIndex,
    /// `--list` as JSON.
    #[arg(long, requires = "list")]
    json: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        if self.list {
            let rows = atlas_pg::list(&self.to)?;
            if self.json {
                return super::print(&format!("{}\n", serde_json::to_string_pretty(&rows)?));
            }
            let mut out = String::new();
            if rows.is_empty() {
                out.push_str("no bundle is exported there\n");
            }
            for r in rows {
                let state = if r.complete { "complete" } else { "incomplete (rerun the export to finish it)" };
                out.push_str(&format!(
                    "{}  {}  {:.1} MB  {}  {state}\n",
                    r.library,
                    atlas_runtime::words::count(r.chunks, "chunk"),
                    r.bytes as f64 / 1e6,
                    r.at
                ));
            }
            return super::print(&out);
        }
        if let Some(library) = self.drop {
            if !library.contains('@') {
                anyhow::bail!(UsageError(format!(
                    "--drop takes NAME@VERSION (`atlas export --list` names them), not {library:?}"
                )));
            }
            return match atlas_pg::drop_bundle(&self.to, &library)? {
                true => super::print(&format!("dropped {library}\n")),
                false => {
                    Err(UsageError(format!("{library} is not exported there; `atlas export --list` names what is"))
                        .into())
                }
            };
        }
        let (dir, origin) = locate(self.bundle, cfg)?;
        let manifest =
            atlas_runtime::manifest::read_manifest(&dir).with_context(|| format!("reading {}", dir.display()))?;
        let mut provenance = atlas_pg::Provenance::default();
        if let Origin::Installed { home, name } = &origin
            && let Some(r) = home.record(name, &manifest.version)
        {
            provenance.source = Some(r.source);
            provenance.sha256 = Some(r.sha256);
            provenance.signed_by = r.signed_by;
            provenance.trusted_key = r.trust;
            provenance.installed = Some(r.installed);
        }
        let started = std::time::Instant::now();
        let e = atlas_pg::export(&dir, &self.to, provenance, self.vector_index)?;
        if e.already {
            return super::print(&format!("{} is already exported and complete; nothing to do\n", e.schema));
        }
        super::print(&format!(
            "exported {} ({}) to {}: {} run, {} already done, {:.1} MB, verified, {:.1} s\n",
            e.schema,
            atlas_runtime::words::count(manifest.chunk_count, "chunk"),
            atlas_pg::redact(&self.to),
            atlas_runtime::words::count(e.steps_run, "step"),
            e.steps_skipped,
            e.bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        ))
    }
}
