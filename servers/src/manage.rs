//! The installed bundles, for people: `atlas install`, `update`, `bundles`, `backup`,
//! `restore` and `setup`. The work is in `atlas_dist`; this module turns it into
//! lines on stderr (what happened) and data on stdout (the editor snippet, tables,
//! JSON).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use atlas_dist::config::Config;
use atlas_dist::edge;
use atlas_dist::home::{Home, Record};
use atlas_dist::install::{Options, Outcome};
use atlas_dist::target::Source;
use atlas_runtime::exit::{UsageError, print};

pub fn options(cfg: &Config, trust: &[String], keep: Option<usize>, sha256: Option<String>) -> Options {
    let mut trust = trust.to_vec();
    trust.extend(cfg.trusted_keys.iter().cloned());
    Options {
        trust,
        keep: keep.unwrap_or_else(|| cfg.keep()),
        limits: cfg.limits(),
        sha256,
        github_api: cfg
            .publish
            .api_url
            .clone()
            .filter(|_| std::env::var_os("GITHUB_API_URL").is_none())
            .unwrap_or_else(atlas_dist::github::api_from_env),
        allow_downgrade: false,
        expect_name: None,
        beside: false,
    }
}

pub fn install(source: &str, opts: &Options, json: bool) -> anyhow::Result<()> {
    let source = Source::parse(source).map_err(edge)?;
    let home = Home::from_env();
    let rt = atlas_dist::runtime().map_err(edge)?;
    let t = std::time::Instant::now();
    let out = rt.block_on(atlas_dist::install::install(&home, &source, opts)).map_err(edge)?;
    report(&out, &source.to_string(), t.elapsed());
    if !atlas_runtime::model::default_provisioned() {
        eprintln!(
            "atlas: keyword search works now; run `atlas setup` once for vector and hybrid search (ONNX Runtime and the model)"
        );
    }
    if json {
        return Ok(print(&format!("{}\n", serde_json::to_string_pretty(&out)?))?);
    }
    Ok(print(&editor_snippet(&out.name))?)
}

fn report(out: &Outcome, source: &str, took: std::time::Duration) {
    let signed =
        out.signed_by.as_deref().map_or_else(|| "signature not checked".to_owned(), |k| format!("signed by {k}"));
    if out.changed {
        let from = out.previous.as_deref().map(|p| format!(" (was {p})")).unwrap_or_default();
        eprintln!(
            "atlas: installed {} {}{from} from {source} in {:.1}s, {signed}; current → {}",
            out.name,
            out.version,
            took.as_secs_f64(),
            out.path.display()
        );
    } else {
        eprintln!("atlas: {} {} is up to date ({source}, {signed})", out.name, out.version);
    }
    if let Some(t) = &out.transfer {
        eprintln!(
            "atlas: delta update: fetched {}, {} bytes ({}), reused {} unchanged; the full archive is {} bytes ({})",
            atlas_runtime::words::count(t.fetched_files, "changed file"),
            t.fetched_bytes,
            human_bytes(t.fetched_bytes),
            t.reused_files,
            t.archive_bytes,
            human_bytes(t.archive_bytes)
        );
    }
}

/// The MCP servers block for an installed bundle, as editors take it: first the form
/// that works here, this binary's absolute path; then through `uvx` (the wheel) and
/// `npx` (the npm package), pinned to this version and offline, each only where that
/// launcher holds this version ([`atlas_runtime::install::Install::launches`]). A
/// binary that runs from uv's or npx's cache (which they may prune) leads with the
/// launcher that started it instead, and names the command that keeps a binary.
pub fn editor_snippet(name: &str) -> String {
    editor_config(name, &["--bundle", name])
}

/// [`editor_snippet`] for servers named `key` that serve `what` (`--bundle NAME`,
/// `--project DIR`).
pub fn editor_config(key: &str, what: &[&str]) -> String {
    use atlas_runtime::install::Launcher;
    let install = atlas_runtime::install::current();
    let exe = std::env::current_exe().map_or_else(|_| "atlas".to_owned(), |p| p.display().to_string());
    let pkg = atlas_runtime::install::NPM_PACKAGE;
    let version = env!("CARGO_PKG_VERSION");
    let pinned = format!("{pkg}@{version}");
    let block = |command: &str, lead: &[&str]| {
        let args = |rest: &[&str]| lead.iter().chain(rest).map(|a| (*a).to_owned()).collect::<Vec<String>>();
        let v = serde_json::json!({
            "mcpServers": {
                format!("{key}-rag"): { "command": command, "args": args(&[&["serve", "rag"], what, &["--warm"]].concat()) },
                format!("{key}-fs"): { "command": command, "args": args(&[&["serve", "fs"], what].concat()) },
            }
        });
        serde_json::to_string_pretty(&v).expect("plain data")
    };
    let launcher = |l: Launcher| match l {
        Launcher::Uvx => format!(
            "# With uv (runs the PyPI wheel {pkg} {version} from uv's cache, offline):\n{}\n",
            block("uvx", &["--offline", &pinned])
        ),
        Launcher::Npx => format!(
            "# With Node (runs the npm package {pkg} {version} from npm's cache, offline):\n{}\n",
            block("npx", &["--offline", "-y", &pinned])
        ),
    };
    let mut out =
        "# Add one of these to your editor's MCP config (Claude Desktop, Cursor, Zed, opencode…).\n".to_owned();
    let cached = install.cached_by();
    match cached {
        Some(l) => out.push_str(&launcher(l)),
        None => out.push_str(&format!("# With this binary:\n{}\n", block(&exe, &[]))),
    }
    for l in [Launcher::Uvx, Launcher::Npx] {
        if cached != Some(l) && install.launches(l, version) {
            out.push_str(&launcher(l));
        }
    }
    if cached.is_some() {
        out.push_str(&format!(
            "# With a binary that stays (this one runs from a cache that may be pruned): `uv tool install {pkg}`,\n\
             # `pipx install {pkg}` or `npm install -g {pkg}`, then \"command\": \"atlas\".\n"
        ));
    }
    out
}

/// Re-resolves each installed bundle's source and installs what is newer.
pub fn update(name: Option<&str>, cfg: &Config, keep: Option<usize>, allow_downgrade: bool) -> anyhow::Result<()> {
    let home = Home::from_env();
    let names = match name {
        Some(n) => vec![n.to_owned()],
        None => home.names(),
    };
    if names.is_empty() {
        anyhow::bail!(UsageError("no bundle is installed; `atlas install SOURCE` installs one".into()));
    }
    let rt = atlas_dist::runtime().map_err(edge)?;
    for n in names {
        let n = atlas_runtime::package::stored_name(&n);
        if let Some(bare) = atlas_runtime::package::bare_name(&n) {
            // A package library has no newer release to fetch: its versions are the
            // registry's, and a lockfile or `atlas add` names the one wanted.
            let shown = atlas_runtime::package::shown_name(&n);
            match name {
                Some(_) => anyhow::bail!(UsageError(format!(
                    "{shown} is a package library: `atlas add {shown}@VERSION` installs another version of {bare}, \
                     and `atlas sync` installs what a project's lockfiles pin"
                ))),
                None => continue,
            }
        }
        let rec = current_record(&home, &n)?;
        let source = Source::parse(&rec.source).map_err(edge)?;
        // The newest release, whatever tag the first install named.
        let source = match source {
            Source::GitHub { owner, repo, .. } => Source::GitHub { owner, repo, tag: None },
            s => s,
        };
        let trust: Vec<String> = rec.trust.iter().cloned().collect();
        // The source must still hold this bundle, and by default a newer version of it.
        let opts = Options { allow_downgrade, expect_name: Some(n.clone()), ..options(cfg, &trust, keep, None) };
        let t = std::time::Instant::now();
        let out = rt.block_on(atlas_dist::install::install(&home, &source, &opts)).map_err(edge)?;
        report(&out, &rec.source, t.elapsed());
    }
    Ok(())
}

fn current_record(home: &Home, name: &str) -> anyhow::Result<Record> {
    atlas_dist::check_component("bundle", name).map_err(edge)?;
    let cur = home
        .current(name)
        .ok_or_else(|| UsageError(format!("{name} is not installed; `atlas bundles` lists what is")))?;
    home.record(name, &cur).with_context(|| format!("{name} {cur} has no install record"))
}

pub fn bundles(json: bool, unused: bool) -> anyhow::Result<()> {
    let home = Home::from_env();
    let mut list = home.list();
    if unused {
        // Versions that no project's library set names (`atlas sync` writes the sets).
        let named = atlas_dist::project::named(home.atlas_home());
        for b in &mut list {
            // A working tree's entry (`live`) names whichever copy serves it now.
            let live = named.contains(&(b.name.clone(), atlas_dist::project::LIVE.to_owned()));
            let current = b.current.clone();
            let serving = |v: &String| live && current.as_ref() == Some(v);
            b.versions.retain(|r| !named.contains(&(b.name.clone(), r.version.clone())) && !serving(&r.version));
        }
        list.retain(|b| !b.versions.is_empty());
    }
    if json {
        return Ok(print(&format!("{}\n", serde_json::to_string_pretty(&list)?))?);
    }
    if list.is_empty() {
        let what = if unused { "no installed version is unused by every project" } else { "no bundles installed" };
        return Ok(print(&format!("{what} in {}\n", home.root.display()))?);
    }
    let now = atlas_dist::home::now();
    let mut s = format!("{:<20} {:<14} {:>10} {:>8}  {:<18} SOURCE\n", "NAME", "VERSION", "SIZE", "AGE", "SIGNED BY");
    for b in &list {
        for r in b.versions.iter().rev() {
            let mark = if b.current.as_deref() == Some(r.version.as_str()) { "*" } else { " " };
            s.push_str(&format!(
                "{:<20} {mark}{:<13} {:>10} {:>8}  {:<18} {}\n",
                atlas_runtime::package::shown_name(&b.name),
                r.version,
                human_bytes(atlas_dist::home::dir_size(&home.dir(&b.name).join(&r.version))),
                age(now.saturating_sub(r.installed)),
                r.signed_by.as_deref().unwrap_or("-"),
                r.source
            ));
        }
    }
    s.push_str("* current\n");
    Ok(print(&s)?)
}

pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

pub fn age(secs: u64) -> String {
    match secs {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3_600 => format!("{}h", s / 3_600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Writes the current version of `name` as an archive (and `.sha256`) into `out`;
/// `atlas install` takes it back.
pub fn backup(name: &str, out: &Path) -> anyhow::Result<()> {
    let home = Home::from_env();
    let rec = current_record(&home, name)?;
    let dir = home.dir(name).join(&rec.version);
    let m = atlas_runtime::manifest::verify(&dir)
        .with_context(|| format!("{name} {} is damaged; not backed up", rec.version))?;
    let mut files: Vec<String> = m.artifacts.iter().map(|a| a.path.clone()).collect();
    files.push("manifest.json".to_owned());
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let file_name = format!("{name}-{}.tar.zst", rec.version);
    let path = out.join(&file_name);
    let tmp = atlas_dist::atomic::temp_in(out).with_context(|| format!("writing in {}", out.display()))?;
    let f = tmp.reopen()?;
    // Each file streamed from the verified folder: nothing is read whole.
    let entries = files
        .into_iter()
        .map(|rel| {
            let p = dir.join(&rel);
            (rel, atlas_dist::archive::Entry::File(p))
        })
        .collect();
    let f = atlas_dist::archive::write(std::io::BufWriter::new(f), name, 10, entries).map_err(edge)?;
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    atlas_dist::atomic::persist(tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    let sha = atlas_runtime::hash::sha256_file(&path)?;
    std::fs::write(out.join(format!("{file_name}.sha256")), format!("{sha}  {file_name}\n"))?;
    eprintln!("atlas: backed up {name} {} to {}", rec.version, path.display());
    Ok(print(&format!("{}\n", path.display()))?)
}

pub fn restore(name: &str, version: Option<&str>) -> anyhow::Result<()> {
    let home = Home::from_env();
    atlas_dist::check_component("bundle", name).map_err(edge)?;
    let target = home.restore_target(name, version).map_err(edge)?;
    let dir = home.dir(name).join(&target);
    atlas_runtime::manifest::verify(&dir)
        .with_context(|| format!("{name} {target} is damaged; `atlas install` it again"))?;
    let was = home.current(name);
    home.switch(name, &target).map_err(edge)?;
    eprintln!("atlas: {name} current → {target} (was {})", was.as_deref().unwrap_or("-"));
    Ok(())
}

pub fn setup(from: Option<&PathBuf>, save: Option<&PathBuf>) -> anyhow::Result<()> {
    let rt = atlas_dist::runtime().map_err(edge)?;
    let done =
        rt.block_on(atlas_dist::setup::setup(from.map(PathBuf::as_path), save.map(PathBuf::as_path))).map_err(edge)?;
    for d in &done {
        let what = if d.fetched { "installed" } else { "in place " };
        eprintln!("atlas: {what} {} {} at {}", d.owner, d.file, d.path.display());
    }
    Ok(print(&format!("ATLAS_HOME {}\n", atlas_runtime::model::atlas_home().display()))?)
}
