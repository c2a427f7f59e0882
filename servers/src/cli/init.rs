//! `atlas init [DIR]`: from nothing to an agent that knows the project. It syncs the
//! locked dependencies by keyword first (as `atlas sync`), indexes the working tree as
//! `project:NAME` beside them, embeds both, and writes the MCP config of the editors
//! it finds, each in its own project-scoped file and format.

use std::path::PathBuf;

use atlas_dist::config::Config;
use atlas_dist::home::Home;
use atlas_runtime::exit::UsageError;

use crate::init::clients::{self, Client, Server};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The project (default: this folder).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The editors to write the config of, separated by commas: claude-code, cursor,
    /// vscode, zed, opencode. Default: those whose folder or file the project has
    /// (Claude Code's `.mcp.json` when it has none).
    #[arg(long, value_delimiter = ',', value_parser = |s: &str| Client::parse(s).map_err(|e| e.to_string()))]
    client: Vec<Client>,
    /// Print what each config file would become; write none of them.
    #[arg(long)]
    print: bool,
    /// Leave the dependencies out: index the working tree only.
    #[arg(long)]
    no_deps: bool,
    #[command(flatten)]
    build: super::sync::Build,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let project = std::path::absolute(&self.dir)?;
        if !project.is_dir() {
            anyhow::bail!(UsageError(format!("{} is not a folder; pass the project's folder", project.display())));
        }
        let home = Home::from_env();
        // Every config planned, and so checked, before anything is built or written.
        let clients = if self.client.is_empty() { clients::detect(&project) } else { self.client.clone() };
        let plans = clients::plan(&project, &clients, &servers(&project))
            .map_err(|e| if e.is_usage() { anyhow::Error::new(UsageError(e.to_string())) } else { e.into() })?;
        if self.print {
            for p in &plans {
                super::print(&format!("# {} ({})\n{}\n", p.path.display(), p.client, String::from_utf8_lossy(&p.new)))?;
            }
            return Ok(());
        }
        let opts = self.build.options(cfg);
        let deps = !self.no_deps && crate::deps::lockfiles::LOCKFILES.iter().any(|f| project.join(f).is_file());
        if deps {
            super::sync::for_init(&project, cfg, &self.build, true)?;
        } else if !self.no_deps {
            eprintln!("atlas: {} has no lockfile: its dependencies are not synced", project.display());
        }
        // The configs before the tree's first build, which then sees the tree as the
        // servers will (a config is a file of the tree, left out as a secret).
        let written = clients::apply(&plans)?;
        for p in &plans {
            let what = match (p.changed, written.iter().find(|w| w.path == p.path).and_then(|w| w.backup.as_ref())) {
                (false, _) => "already up to date".to_owned(),
                (true, Some(b)) => format!("written (the previous file is {})", b.display()),
                (true, None) => "written".to_owned(),
            };
            eprintln!("atlas: {} for {}: {what}", p.path.display(), p.client);
        }
        let tree = crate::tree::Tree::open(&home, &project)?;
        let built = tree.build(&home, false, false)?;
        tree.add_to_set(&home)?;
        eprintln!(
            "atlas: {}: the working tree is searchable by keyword and symbols ({:.1}s)",
            tree.shown(),
            built.took.as_secs_f64()
        );
        let embed = !opts.keyword_only && atlas_runtime::model::default_provisioned();
        tree.set_wants_vectors(embed)?;
        if embed {
            if deps {
                super::sync::for_init(&project, cfg, &self.build, false)?;
            }
            let built = tree.build(&home, true, false)?;
            eprintln!("atlas: {}: embedded ({:.1}s)", tree.shown(), built.took.as_secs_f64());
        } else if !opts.keyword_only {
            eprintln!("atlas: run `atlas setup` (ONNX Runtime and the model), then `atlas init` again, to embed them");
        }
        eprintln!("atlas: the servers follow every save; start your editor's agent in {}", project.display());
        Ok(())
    }
}

/// The two servers of a project, launched by this binary's absolute path.
fn servers(project: &std::path::Path) -> Vec<Server> {
    let exe = std::env::current_exe().map_or_else(|_| "atlas".to_owned(), |p| p.display().to_string());
    let key = super::sync::project_key(project).trim_end_matches("-deps").to_owned();
    let dir = project.display().to_string();
    vec![
        Server {
            key: format!("{key}-rag"),
            command: exe.clone(),
            args: ["serve", "rag", "--project", &dir, "--warm"].map(str::to_owned).to_vec(),
        },
        Server {
            key: format!("{key}-fs"),
            command: exe,
            args: ["serve", "fs", "--project", &dir].map(str::to_owned).to_vec(),
        },
    ]
}
