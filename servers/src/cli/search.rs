//! `atlas search`: ranked search over a bundle, as text for people or stable JSON.

use super::locate::{locate, open, open_options};
use super::{parse_fusion, parse_min_score, parse_mode, parse_top_k};
use atlas_dist::config::Config;
use atlas_runtime::ChunkKind;
use atlas_runtime::search::{Filters, Fusion, MAX_TOP_K, SearchRequest};
use atlas_runtime::{Hit, Mode, OpenOptions};
use clap::ValueEnum;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Docs,
    Code,
}

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// What to look for, in words or identifiers; with --symbol or --references, the
    /// name.
    query: String,
    /// Where QUERY is defined (bare, `Type::method`, `Class.method`, `module.function`),
    /// from the bundle's symbol table, instead of a ranked search.
    #[arg(long, conflicts_with = "references")]
    symbol: bool,
    /// Every place the code uses QUERY (by name, not by type), grouped by file.
    #[arg(long)]
    references: bool,
    /// An installed bundle's name or a bundle folder.
    #[arg(long, env = "ATLAS_BUNDLE")]
    bundle: Option<String>,
    /// A project's libraries instead: its dependencies (`atlas sync`) and its own
    /// working tree (`atlas init`), searched together.
    #[arg(long, value_name = "DIR", conflicts_with = "bundle")]
    project: Option<std::path::PathBuf>,
    #[arg(long, default_value = "hybrid", value_parser = parse_mode)]
    mode: Mode,
    /// How many hits (1 to 1000).
    #[arg(short = 'k', long = "top-k", default_value_t = 5, value_parser = parse_top_k)]
    top_k: usize,
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    #[arg(long)]
    section: Option<String>,
    #[arg(long)]
    language: Option<String>,
    #[arg(long)]
    repo: Option<String>,
    #[arg(long)]
    path_prefix: Option<String>,
    #[arg(long)]
    symbol_kind: Option<String>,
    #[arg(long, value_parser = parse_min_score)]
    min_score: Option<f32>,
    /// Hybrid fusion: score (normalised scores, keyword weighted by the query's shape)
    /// or rrf (reciprocal ranks).
    #[arg(long, default_value = "score", value_parser = parse_fusion)]
    fusion: Fusion,
    /// Rerank with the cross-encoder.
    #[arg(long)]
    rerank: bool,
    /// Print stable JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let keyword_only = (self.mode == Mode::Keyword && !self.rerank) || self.symbol || self.references;
        let bundles = match &self.project {
            Some(project) => {
                let located = super::locate::locate_project(project)?;
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                let opts = open_options(cfg, OpenOptions { keyword_only, ..OpenOptions::default() })?;
                super::locate::tree_as_it_is(project, &opts);
                super::locate::open_libraries(&rt, located, (Vec::new(), Vec::new()), &opts)?.bundles()
            }
            None => {
                let (dir, _) = locate(self.bundle.clone(), cfg)?;
                vec![std::sync::Arc::new(open(
                    &dir,
                    open_options(cfg, OpenOptions { keyword_only, ..OpenOptions::default() })?,
                )?)]
            }
        };
        if self.symbol || self.references {
            return code_lookup(
                &bundles,
                &self.query,
                self.symbol,
                self.symbol_kind.as_deref(),
                self.language.as_deref(),
                self.json,
            );
        }
        let kind = self.kind.map(|k| match k {
            Kind::Docs => ChunkKind::Docs,
            Kind::Code => ChunkKind::Code,
        });
        let filters = Filters {
            kind,
            section: self.section,
            language: self.language,
            repo: self.repo,
            path_prefix: self.path_prefix,
            symbol_kind: self.symbol_kind,
            hidden: None,
        };
        let opts = SearchRequest {
            mode: Some(self.mode),
            top_k: Some(self.top_k),
            min_score: self.min_score,
            fusion: Some(self.fusion),
            rerank: Some(self.rerank),
            filters,
            tuning: None,
        }
        .options(MAX_TOP_K);
        let hits = match bundles.as_slice() {
            [b] => b.search(&self.query, &opts)?,
            many => {
                let merged = atlas_runtime::search::search_all(many, &self.query, &opts)?;
                for s in &merged.skipped {
                    eprintln!("atlas: {} {}", s.library, s.why);
                }
                merged.searched.hits
            }
        };
        let text = if self.json {
            format!(
                "{}\n",
                serde_json::to_string_pretty(&atlas_mcp::output::search_json(&self.query, self.mode, &hits))?
            )
        } else {
            render(&hits)
        };
        super::print(&text)
    }
}

/// `--symbol` and `--references`: the symbol table's answer, as text or JSON.
fn code_lookup(
    bundles: &[std::sync::Arc<atlas_runtime::Bundle>],
    name: &str,
    definitions: bool,
    kind: Option<&str>,
    language: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    if bundles.iter().all(|b| b.symbols().is_empty()) {
        anyhow::bail!(atlas_runtime::exit::UsageError(
            "the bundle has no symbol table (no code, or built before symbol tables); rebuild it with atlas-pipeline"
                .into()
        ));
    }
    let text = if definitions {
        let q = atlas_mcp::code::SymbolQuery { name, prefix: false, kind, language };
        let found: Vec<atlas_mcp::code::SymbolOut> =
            atlas_mcp::code::find_symbol(bundles, &q).iter().map(|(b, i)| atlas_mcp::code::symbol_out(b, *i)).collect();
        if json {
            format!("{}\n", serde_json::to_string_pretty(&serde_json::json!({ "name": name, "definitions": found }))?)
        } else if found.is_empty() {
            format!("no definition of {name:?}\n")
        } else {
            let mut s = String::new();
            for d in &found {
                let (name, path) = (atlas_mcp::output::inert(&d.name), atlas_mcp::output::inert(&d.path));
                let kind = atlas_mcp::code::kind_said(d);
                s.push_str(&format!("{kind} {name}  {path}:{}-{}\n    {}\n", d.start_line, d.end_line, d.citation));
                if let Some(sig) = &d.signature {
                    s.push_str(&format!("    │ {}\n", atlas_mcp::output::printable(sig)));
                }
            }
            s
        }
    } else {
        let (files, _) = atlas_mcp::code::find_references(bundles, name)?;
        let total: usize = files.iter().map(|f| f.references.len()).sum();
        if json {
            let v =
                serde_json::json!({ "name": name, "total": total, "files": files, "note": atlas_mcp::code::BY_NAME });
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        } else {
            let mut s = format!(
                "{} of {name:?} in {} ({}):\n",
                atlas_runtime::words::count(total, "use"),
                atlas_runtime::words::count(files.len(), "file"),
                atlas_mcp::code::BY_NAME
            );
            for f in &files {
                s.push_str(&format!("{}\n", atlas_mcp::output::inert(&f.path)));
                for r in &f.references {
                    let within = r
                        .enclosing
                        .as_deref()
                        .map_or_else(|| "module level".to_owned(), |e| atlas_mcp::output::inert(e).into());
                    s.push_str(&format!("  {}: in {within}\n", r.line));
                }
            }
            s
        }
    };
    super::print(&text)
}

/// Hits for people: rank, score, where, and the first lines of the snippet.
fn render(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "no hits\n".to_owned();
    }
    let mut s = String::new();
    for (i, h) in hits.iter().enumerate() {
        let place = h.place();
        let what = match (&h.symbol, &h.language) {
            (Some(sym), Some(lang)) => format!("{} {sym} ({lang})", h.symbol_kind.as_deref().unwrap_or("symbol")),
            _ => h.kind.to_string(),
        };
        let what = match h.origin {
            Some(o) => format!("{what}, {}", o.label()),
            None => what,
        };
        s.push_str(&format!("{:>2}. {:.4}  {place}  [{what}]\n    {}\n", i + 1, h.score, h.citation()));
        for line in h.snippet.lines().filter(|l| !l.trim().is_empty()).take(3) {
            s.push_str(&format!("    │ {}\n", atlas_mcp::output::printable(line)));
        }
    }
    s
}
