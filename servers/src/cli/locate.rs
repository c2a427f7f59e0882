//! Where a command's bundles are: `--bundle` as an installed name, NAME@VERSION or a
//! folder, and how servers open the ones they were given.

use anyhow::Context as _;
use atlas_dist::config::Config;
use atlas_mcp::library::{Broken, Libraries};
use atlas_mcp::live::{Live, Origin};
use atlas_runtime::exit::UsageError;
use atlas_runtime::{Bundle, OpenOptions};
use std::path::{Path, PathBuf};

/// Where `--bundle` points: an installed name (its current version) or a folder; the
/// config file's `bundle` when the flag and ATLAS_BUNDLE are absent.
pub(super) fn locate(arg: Option<String>, cfg: &Config) -> anyhow::Result<(PathBuf, Origin)> {
    let Some(arg) = arg.or_else(|| cfg.bundle.clone()) else {
        anyhow::bail!(UsageError(
            "no bundle: pass --bundle NAME|DIR, set ATLAS_BUNDLE, or `bundle` in the config file".into()
        ));
    };
    let home = atlas_dist::home::Home::from_env();
    let as_path = PathBuf::from(&arg);
    if as_path.join("manifest.json").is_file() {
        return Ok((as_path.clone(), Origin::Folder(as_path)));
    }
    // An installed name in either spelling (`crate:itoa`, `crate+itoa`), maybe with `@VERSION`.
    let stored = atlas_runtime::package::stored_name(&arg);
    if let Some(dir) = home.resolve(&stored) {
        return Ok((dir, Origin::Installed { home, name: stored }));
    }
    if let Some((name, version)) = atlas_runtime::package::split_version(&arg)
        && let Some(dir) = home.resolve_version(&atlas_runtime::package::stored_name(name), version)
    {
        return Ok((dir.clone(), Origin::Folder(dir)));
    }
    if as_path.is_dir() {
        return Ok((as_path.clone(), Origin::Folder(as_path)));
    }
    anyhow::bail!(UsageError(format!(
        "{arg:?} is neither a bundle folder nor an installed bundle (`atlas bundles` lists them; `atlas install` adds one)"
    )))
}

/// Opens the bundle a one-shot command was given.
pub(super) fn open(dir: &Path, opts: OpenOptions) -> anyhow::Result<Bundle> {
    Bundle::open(dir, opts).with_context(|| format!("opening the bundle {}", dir.display()))
}

/// The bundles a server was given: those found, and installed names whose `current`
/// is broken (half-installed, its folder gone).
#[derive(Default, Clone)]
pub(super) struct Located {
    pub(super) found: Vec<(PathBuf, Origin)>,
    pub(super) broken: Vec<Broken>,
}

/// Every `--bundle` (the config's one when none is given), or with `--all` every
/// installed bundle at its current version.
pub(super) fn locate_many(args: Vec<String>, all: bool, cfg: &Config) -> anyhow::Result<Located> {
    let home = atlas_dist::home::Home::from_env();
    let broken_install = |name: &str| {
        let v = home.current(name).unwrap_or_default();
        Broken::new(
            format!("{name}@{v}"),
            name.to_owned(),
            format!("its current version {v} has no readable bundle folder"),
            true,
        )
    };
    let mut located = Located::default();
    if all {
        for name in home.names() {
            match home.resolve(&name) {
                Some(dir) => located.found.push((dir, Origin::Installed { home: home.clone(), name })),
                None if home.current(&name).is_some() => located.broken.push(broken_install(&name)),
                None => {}
            }
        }
        if located.found.is_empty() && located.broken.is_empty() {
            anyhow::bail!(UsageError("--all: no bundle is installed; `atlas install` adds one".into()));
        }
        return Ok(located);
    }
    if args.is_empty() {
        located.found.push(locate(None, cfg)?);
        return Ok(located);
    }
    let several = args.len() > 1;
    for a in args {
        match locate(Some(a.clone()), cfg) {
            Ok(l) => located.found.push(l),
            // With several, an installed name whose install is broken does not stop the rest.
            Err(_) if several && atlas_dist::check_component("bundle", &a).is_ok() && home.current(&a).is_some() => {
                located.broken.push(broken_install(&a));
            }
            Err(e) => return Err(e),
        }
    }
    // Two of one name and version: refused before anything is opened.
    let mut seen = std::collections::BTreeSet::new();
    for (dir, _) in &located.found {
        let Ok(m) = atlas_runtime::manifest::read_manifest(dir) else { continue };
        if !seen.insert(format!("{}@{}", m.name, m.version)) {
            anyhow::bail!(UsageError(format!(
                "two bundles are {}@{}: serve each name and version once (drop one --bundle)",
                m.name, m.version
            )));
        }
    }
    Ok(located)
}

/// The libraries of a project's set (`atlas sync`), each following the version the
/// set names for it; one whose version is not installed is named, not served. A
/// package the set pins at several versions (a lockfile's `--all` often does) is
/// served at each, every one its own `name@version` at that version's folder.
pub(super) fn locate_project(dir: &Path) -> anyhow::Result<Located> {
    let project = std::path::absolute(dir)?;
    let set = atlas_dist::project::Set::read(&project).map_err(atlas_dist::edge)?.ok_or_else(|| {
        UsageError(format!("{} has no library set; run `atlas sync {}` first", project.display(), dir.display()))
    })?;
    let home = atlas_dist::home::Home::from_env();
    let mut located = Located::default();
    let pins = |name: &str| set.libraries.iter().filter(|p| p.name == name).count();
    for p in &set.libraries {
        let found = match pins(&p.name) {
            // The project's own tree follows `current`, which each batch of edits moves.
            _ if crate::tree::is_tree(&p.kinds) => {
                let origin = Origin::Installed { home: home.clone(), name: p.name.clone() };
                origin.folder().map(|f| (f, origin))
            }
            1 => {
                let origin = Origin::Project { home: home.clone(), project: project.clone(), name: p.name.clone() };
                origin.folder().map(|f| (f, origin))
            }
            _ => home.resolve_version(&p.name, &p.version).map(|f| (f.clone(), Origin::Folder(f))),
        };
        match found {
            Some(found) => located.found.push(found),
            None => located.broken.push(Broken::with_fix(
                format!("{}@{}", atlas_runtime::package::shown_name(&p.name), p.version),
                p.name.clone(),
                "that version is not installed".into(),
                format!("run `atlas sync {}` again", project.display()),
            )),
        }
    }
    if located.found.is_empty() && located.broken.is_empty() {
        anyhow::bail!(UsageError(format!("the library set of {} is empty; run `atlas sync` there", project.display())));
    }
    Ok(located)
}

/// A located bundle that did not open, as the server names it: by its library (or its
/// folder's name), never by this machine's paths, which the log line keeps.
fn broken(dir: &Path, origin: &Origin, e: &anyhow::Error) -> Broken {
    let folder = || dir.file_name().map_or_else(|| "bundle".to_owned(), |n| n.to_string_lossy().into_owned());
    let (library, name) = match atlas_runtime::manifest::read_manifest(dir) {
        Ok(m) => (format!("{}@{}", m.name, m.version), m.name),
        Err(_) => match origin {
            Origin::Installed { name, .. } | Origin::Project { name, .. } => (name.clone(), name.clone()),
            Origin::Folder(_) => (folder(), folder()),
        },
    };
    let full = format!("{e:#}");
    let error = atlas_mcp::output::without_paths(&full, dir, &library);
    let b = Broken::new(library, name, error, matches!(origin, Origin::Installed { .. }));
    // The log, on this machine, keeps the path and the whole error.
    tracing::warn!("{} [at {}: {full}]", b.line(), dir.display());
    b
}

/// Opens every located bundle with one set of options (so bundles of one model share
/// it), each following its origin. With several, one that does not open is named and
/// left out; the others serve.
/// An export in PostgreSQL that did not open, as the servers name a broken library.
pub(super) fn unopened(u: atlas_pg::Unopened) -> Broken {
    Broken::with_fix(u.library, u.name, u.error, atlas_pg::Unopened::FIX.to_owned())
}

pub(super) fn open_libraries(
    rt: &tokio::runtime::Runtime,
    located: Located,
    (exported, broken_exports): (Vec<Bundle>, Vec<atlas_pg::Unopened>),
    opts: &OpenOptions,
) -> anyhow::Result<Libraries> {
    let single = located.found.len() + located.broken.len() + exported.len() + broken_exports.len() == 1;
    let mut lives = Vec::new();
    for b in exported {
        tracing::info!(
            "serving {} ({}) from {}",
            b.library(),
            atlas_runtime::words::count(b.chunk_count(), "chunk"),
            b.dir.display()
        );
        lives.push(Live::new(std::sync::Arc::new(b)));
    }
    let mut broken_libs = located.broken;
    broken_libs.extend(broken_exports.into_iter().map(unopened));
    for (dir, origin) in located.found {
        let b = match open_or_keyword_only(&dir, opts).with_context(|| format!("opening the bundle {}", dir.display()))
        {
            Ok(b) => b,
            Err(e) if !single => {
                broken_libs.push(broken(&dir, &origin, &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        tracing::info!(
            "serving {} ({}) from {}",
            b.library(),
            atlas_runtime::words::count(b.chunk_count(), "chunk"),
            dir.display()
        );
        let live = Live::new(std::sync::Arc::new(b));
        let _guard = rt.enter();
        atlas_mcp::live::watch(live.clone(), origin, opts.clone());
        lives.push(live);
    }
    Libraries::new(lives, broken_libs).map_err(|e| UsageError(e.to_string()).into())
}

/// How often a project's server looks for libraries its set gained.
const SET_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// A server that can serve one more library while it runs: the rag server's
/// [`Libraries`] or the fs server's mirrors.
pub(super) trait Grows: Clone + Send + Sync + 'static {
    /// Whether the library stored as `name` serves now at `version`.
    fn serves(&self, name: &str, version: &str) -> bool;
    /// Opens the bundle in `dir`, adds it, and has it follow `origin`.
    fn open_and_add(&self, dir: &Path, origin: Origin) -> anyhow::Result<()>;
    /// How it opens bundles, when it serves a working tree's fresh edits (rag).
    fn open_options(&self) -> Option<OpenOptions> {
        None
    }
}

impl Grows for (Libraries, OpenOptions) {
    fn serves(&self, name: &str, version: &str) -> bool {
        self.0.serves(&format!("{}@{version}", atlas_runtime::package::shown_name(name)))
    }

    fn open_and_add(&self, dir: &Path, origin: Origin) -> anyhow::Result<()> {
        let live = Live::new(std::sync::Arc::new(open_or_keyword_only(dir, &self.1)?));
        if self.0.add(live.clone()) {
            atlas_mcp::live::watch(live, origin, self.1.clone());
        }
        Ok(())
    }

    fn open_options(&self) -> Option<OpenOptions> {
        Some(self.1.clone())
    }
}

impl Grows for atlas_mcp::fs::FsServer {
    fn serves(&self, name: &str, version: &str) -> bool {
        // A mirror is labelled by its stored name.
        atlas_mcp::fs::FsServer::serves(self, &format!("{name}@{version}"))
    }

    fn open_and_add(&self, dir: &Path, origin: Origin) -> anyhow::Result<()> {
        let live = Live::new(std::sync::Arc::new(atlas_mcp::mirror::Fs::bundle(dir)?));
        if self.add(live.clone()) {
            atlas_mcp::live::follow(live, origin, atlas_mcp::mirror::Fs::bundle, |fs| fs.label());
        }
        Ok(())
    }
}

/// Serves, as they come, the libraries `project`'s set gains while `server` serves it
/// (`atlas add --project`, a sync that adds a dependency): each installed one is
/// opened and added, following its version as [`locate_project`]'s do. Checked every
/// [`SET_POLL`], off the async workers; one that does not open is logged once and
/// tried again only once the set stops naming it.
pub(super) fn follow_project(rt: &tokio::runtime::Runtime, project: &Path, server: impl Grows) {
    let Ok(project) = std::path::absolute(project) else { return };
    watch_tree(rt, &project, server.open_options());
    rt.spawn(async move {
        let mut tried = std::collections::BTreeSet::new();
        loop {
            tokio::time::sleep(SET_POLL).await;
            let (project, server) = (project.clone(), server.clone());
            let now = std::mem::take(&mut tried);
            if let Ok(t) = tokio::task::spawn_blocking(move || add_from_set(&project, &server, now)).await {
                tried = t;
            }
        }
    });
}

/// Follows the project's own tree when its set has one (`atlas init`): each batch of
/// edits built (in the one process that holds the tree's writer lock), this process's
/// servers nudged to look at once, and, with `opts` (a rag server), the fresh copies
/// of the files edited since the library was built served beside it.
fn watch_tree(rt: &tokio::runtime::Runtime, project: &Path, opts: Option<OpenOptions>) {
    let Some(tree) = project_tree(project) else { return };
    let home = atlas_dist::home::Home::from_env();
    atlas_mcp::live::set_tree_root(&tree.name, tree.root.clone());
    let label = format!("{}@{}", tree.shown(), crate::tree::LIVE);
    if let Some(opts) = opts {
        let _guard = rt.enter();
        follow_edits(tree.clone(), label.clone(), opts);
    }
    let handle = rt.handle().clone();
    let status = atlas_mcp::live::pending(&label);
    crate::tree::watch::start(
        home,
        tree,
        status,
        std::sync::Arc::new(move |built| {
            if built.is_none_or(|b| b.is_ok_and(|b| b.changed)) {
                let _guard = handle.enter();
                atlas_mcp::live::nudge();
            }
        }),
    );
}

/// The project's own tree, when its set has one (`atlas init`).
fn project_tree(project: &Path) -> Option<crate::tree::Tree> {
    let set = atlas_dist::project::Set::read(project).ok().flatten()?;
    if !set.libraries.iter().any(|p| crate::tree::is_tree(&p.kinds)) {
        return None;
    }
    crate::tree::Tree::open(&atlas_dist::home::Home::from_env(), project)
        .map_err(|e| tracing::warn!("{}: not following its edits: {e:#}", project.display()))
        .ok()
}

/// For a command that answers once (`search`, `tool`, `agent --project`): the
/// project's tree read as it is now (its files live, the fresh edits its server last
/// said served beside its library), without following it.
pub(super) fn tree_as_it_is(project: &Path, opts: &OpenOptions) {
    let Some(tree) = project_tree(project) else { return };
    atlas_mcp::live::set_tree_root(&tree.name, tree.root.clone());
    let label = format!("{}@{}", tree.shown(), crate::tree::LIVE);
    // Edits said before the library was last installed (a writer gone, `init` run
    // since) may be older than it: then the library alone is the tree.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let installed =
        atlas_dist::home::Home::from_env().resolve(&tree.name).and_then(|d| modified(&d.join("manifest.json")));
    if installed > modified(&tree.edits_file()) {
        return;
    }
    if let Ok(edits) = said_edits(&tree, &label, opts) {
        atlas_mcp::live::set_edits(&label, edits);
    }
}

/// The edits the tree's writer last said ([`crate::tree::Tree::write_edits`]), their
/// fresh bundle opened; an error (logged) when it does not open.
fn said_edits(tree: &crate::tree::Tree, label: &str, opts: &OpenOptions) -> Result<Option<atlas_mcp::live::Edits>, ()> {
    let Some(said) = tree.read_edits() else { return Ok(None) };
    let fresh = match said.fresh.map(|d| Bundle::open(&d, opts.clone())).transpose() {
        Ok(f) => f.map(std::sync::Arc::new),
        Err(e) => {
            tracing::warn!("{label}: the fresh edits did not open ({e}); serving the last ones");
            return Err(());
        }
    };
    Ok(Some(atlas_mcp::live::Edits { base: said.base, fresh, hidden: std::sync::Arc::new(said.hidden) }))
}

/// Serves beside the tree's library the fresh edits its writer last said, looked at
/// on each nudge and every second; a bundle that does not open leaves the last edits
/// served, logged.
fn follow_edits(tree: crate::tree::Tree, label: String, opts: OpenOptions) {
    tokio::spawn(async move {
        let mut seen = None;
        loop {
            atlas_mcp::live::tick().await;
            let (tree, label, opts) = (tree.clone(), label.clone(), opts.clone());
            let was = seen;
            let now = tokio::task::spawn_blocking(move || {
                let stamp = std::fs::metadata(tree.edits_file()).ok().map(|m| (m.len(), m.modified().ok()));
                if stamp == was {
                    return stamp;
                }
                match said_edits(&tree, &label, &opts) {
                    Ok(edits) => atlas_mcp::live::set_edits(&label, edits),
                    Err(()) => return was,
                }
                stamp
            })
            .await;
            if let Ok(s) = now {
                seen = s;
            }
        }
    });
}

/// One look at the set: each library it names that is not served yet, opened and
/// added; the labels that did not open, not tried again while the set names them.
fn add_from_set(
    project: &Path,
    server: &impl Grows,
    tried: std::collections::BTreeSet<String>,
) -> std::collections::BTreeSet<String> {
    let Ok(Some(set)) = atlas_dist::project::Set::read(project) else { return tried };
    let home = atlas_dist::home::Home::from_env();
    let mut failed = std::collections::BTreeSet::new();
    for p in &set.libraries {
        let label = format!("{}@{}", atlas_runtime::package::shown_name(&p.name), p.version);
        if server.serves(&p.name, &p.version) {
            continue;
        }
        if tried.contains(&label) {
            failed.insert(label);
            continue;
        }
        let Some(dir) = home.resolve_version(&p.name, &p.version) else { continue };
        let origin = match set.libraries.iter().filter(|q| q.name == p.name).count() {
            _ if crate::tree::is_tree(&p.kinds) => Origin::Installed { home: home.clone(), name: p.name.clone() },
            1 => Origin::Project { home: home.clone(), project: project.to_owned(), name: p.name.clone() },
            _ => Origin::Folder(dir.clone()),
        };
        match server.open_and_add(&dir, origin) {
            Ok(()) => tracing::info!("now serving {label} too, which the project's set gained, from {}", dir.display()),
            Err(e) => {
                tracing::warn!("{label}, which the project's set gained, did not open: {e:#}");
                failed.insert(label);
            }
        }
    }
    failed
}

/// Opens the bundle in `dir`; when its model cannot be had here (not provisioned, or
/// another than this build knows), keyword-only, said once in the log: a server
/// always starts, and its replies say what is off and how to fix it.
pub(super) fn open_or_keyword_only(dir: &Path, opts: &OpenOptions) -> atlas_runtime::Result<Bundle> {
    match Bundle::open(dir, opts.clone()) {
        Err(atlas_runtime::Error::Model(why)) if !opts.keyword_only => {
            let o = OpenOptions { keyword_only: true, why_keyword_only: Some(why.to_string()), ..opts.clone() };
            let b = Bundle::open(dir, o)?;
            tracing::warn!("serving {} by keyword only: {why}", b.library());
            Ok(b)
        }
        r => r,
    }
}

/// The fs view of every located bundle, each following its origin like the rag
/// server's; with several, one that does not open is named and left out.
pub(super) fn open_mirrors(rt: &tokio::runtime::Runtime, located: Located) -> anyhow::Result<atlas_mcp::fs::FsServer> {
    let single = located.found.len() + located.broken.len() == 1;
    let mut lives = Vec::new();
    let mut broken_libs = located.broken;
    for (dir, origin) in located.found {
        let fs = match atlas_mcp::mirror::Fs::bundle(&dir)
            .with_context(|| format!("opening the bundle {}", dir.display()))
        {
            Ok(fs) => fs,
            Err(e) if !single => {
                broken_libs.push(broken(&dir, &origin, &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let live = Live::new(std::sync::Arc::new(fs));
        let _guard = rt.enter();
        atlas_mcp::live::follow(live.clone(), origin, atlas_mcp::mirror::Fs::bundle, |fs| fs.label());
        lives.push(live);
    }
    atlas_mcp::fs::FsServer::libraries(lives, broken_libs).map_err(|e| UsageError(e.to_string()).into())
}

/// Bundle opening options with the query backend from ATLAS_EMBED_BACKEND or the config.
pub(super) fn open_options(cfg: &Config, base: OpenOptions) -> anyhow::Result<OpenOptions> {
    let mut o = base;
    if let Some(b) = cfg.embed_backend() {
        o.embed.backend = b.parse().map_err(|e: String| UsageError(format!("ATLAS_EMBED_BACKEND: {e}")))?;
    }
    Ok(o)
}

/// The libraries a command serves to itself (`atlas tool`, `atlas agent`), chosen as
/// `atlas serve` chooses them.
#[derive(Debug, clap::Args)]
pub(super) struct Served {
    /// An installed bundle's name, NAME@VERSION or a bundle folder; repeat it for several.
    #[arg(long, env = "ATLAS_BUNDLE", value_delimiter = ',')]
    bundle: Vec<String>,
    /// Every installed bundle (each at its current version).
    #[arg(long, conflicts_with = "bundle")]
    all: bool,
    /// A project's library set, the versions `atlas sync DIR` pinned.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "all"])]
    project: Option<PathBuf>,
}

impl Served {
    /// Whether any library is named: a flag, ATLAS_BUNDLE or the config file's `bundle`.
    pub(super) fn given(&self, cfg: &Config) -> bool {
        !self.bundle.is_empty() || self.all || self.project.is_some() || cfg.bundle.is_some()
    }

    /// Both servers over the libraries chosen, in this process ([`start_local`]).
    pub(super) fn start(
        self,
        rt: &tokio::runtime::Runtime,
        cfg: &Config,
    ) -> anyhow::Result<(atlas_mcp::local::Local, Libraries)> {
        let located = match &self.project {
            Some(dir) => {
                tree_as_it_is(dir, &open_options(cfg, OpenOptions::default())?);
                locate_project(dir)?
            }
            None => locate_many(self.bundle, self.all, cfg)?,
        };
        start_local(rt, located, cfg)
    }
}

/// Both servers over `located`, in this process, and the rag server's libraries (for
/// their thresholds and count).
pub(super) fn start_local(
    rt: &tokio::runtime::Runtime,
    located: Located,
    cfg: &Config,
) -> anyhow::Result<(atlas_mcp::local::Local, Libraries)> {
    let fs = open_mirrors(rt, located.clone())?;
    let opts = open_options(cfg, OpenOptions::default())?;
    let libs = open_libraries(rt, located, (Vec::new(), Vec::new()), &opts)?;
    let rag = atlas_mcp::rag::RagServer::libraries(libs.clone(), false);
    Ok((rt.block_on(atlas_mcp::local::Local::start(fs, rag))?, libs))
}
