//! `atlas doctor`: what works and what to do about what does not, one check per line.
//! The JSON (`--json`) is stable: `{"ok": bool, "checks": [{"check", "status", "detail",
//! "fix"}]}` with status `ok`, `warn` or `fail` (docs/distribution.md).

use serde::Serialize;

use atlas_dist::home::Home;

use atlas_runtime::manifest::age_days;
use atlas_runtime::model;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: String,
    pub status: Status,
    pub detail: String,
    /// What to do, in one line (empty when ok).
    pub fix: String,
}

fn check(check: impl Into<String>, status: Status, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check { check: check.into(), status, detail: detail.into(), fix: fix.into() }
}

/// `n days` (`1 day`), for an age.
fn days(d: i64) -> String {
    atlas_runtime::words::count(d, "day")
}

/// Days after which a bundle's build counts as old.
const OLD_DAYS: i64 = 90;
/// Free space below which ATLAS_HOME is a warning.
const LOW_DISK: u64 = 2 << 30;

pub fn run(config: Result<Option<std::path::PathBuf>, atlas_dist::Error>) -> Vec<Check> {
    let mut out = Vec::new();
    out.push(match config {
        Ok(Some(p)) => check("config", Status::Ok, format!("{} read", p.display()), ""),
        Ok(None) => check("config", Status::Ok, format!("no {} (defaults)", atlas_dist::config::path().display()), ""),
        Err(e) => check(
            "config",
            Status::Fail,
            e.to_string(),
            "fix the key the error names (docs/distribution.md lists them)",
        ),
    });
    out.push(check("install", Status::Ok, atlas_runtime::install::current().describe(), ""));
    let (lib, from) = model::ort_located();
    let ort = if !lib.is_file() {
        out.push(check(
            "onnxruntime",
            Status::Fail,
            format!("not found at {} ({})", lib.display(), from.describe()),
            if model::ORT.is_some() {
                "run `atlas setup`"
            } else {
                "PyPI has no ONNX Runtime for this platform: set ORT_DYLIB_PATH to a build of ONNX Runtime ≥ 1.32"
            },
        ));
        None
    } else {
        match atlas_runtime::encoder::ort_info(&lib) {
            Ok(info) => {
                // The version is in the library's name (libonnxruntime.so.1.32.0); the build
                // info names the commit.
                let name = lib.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let version = name.split_once(".so.").map_or(name, |(_, v)| v);
                let commit = info.build.split(',').find_map(|p| p.trim().strip_prefix("git-commit-id=")).unwrap_or("?");
                out.push(check(
                    "onnxruntime",
                    Status::Ok,
                    format!("{version} (commit {commit}) at {}, {}", lib.display(), from.describe()),
                    "",
                ));
                Some(info)
            }
            Err(e) => {
                out.push(check(
                    "onnxruntime",
                    Status::Fail,
                    format!("{e}"),
                    "run `atlas setup` (or set ORT_DYLIB_PATH)",
                ));
                None
            }
        }
    };
    for p in model::provisions().into_iter().filter(|p| p.default && p.owner != "onnxruntime") {
        let name = format!("model {} {}", p.owner, p.file);
        out.push(match (p.reads.is_file(), p.sha256) {
            (false, _) => check(name, Status::Fail, format!("missing at {}", p.reads.display()), "run `atlas setup`"),
            (true, Some(want)) => match atlas_runtime::hash::sha256_file(&p.reads) {
                Ok(got) if got == want => {
                    check(name, Status::Ok, format!("sha256 {}… at {}", &got[..12], p.reads.display()), "")
                }
                Ok(got) => check(
                    name,
                    Status::Fail,
                    format!("sha256 {}…, pinned {}…", &got[..12], &want[..12]),
                    format!("delete {} and run `atlas setup`", p.reads.display()),
                ),
                Err(e) => check(name, Status::Fail, e.to_string(), "check the file's permissions"),
            },
            (true, None) => check(name, Status::Ok, "present (no pin)", ""),
        });
    }
    if let Some(info) = &ort {
        let on: Vec<&str> = info.providers.iter().filter(|(_, a)| *a).map(|(n, _)| *n).collect();
        out.push(check("execution providers", Status::Ok, on.join(", "), ""));
    }
    let home = Home::from_env();
    for b in home.list() {
        let name = format!("bundle {}", b.name);
        let Some(cur) = b.current.clone() else {
            out.push(check(
                name,
                Status::Fail,
                "no current version",
                format!("`atlas restore {}` or install it again", b.name),
            ));
            continue;
        };
        let dir = home.dir(&b.name).join(&cur);
        let rec = home.record(&b.name, &cur);
        match atlas_runtime::manifest::verify(&dir) {
            Err(e) => out.push(check(
                name,
                Status::Fail,
                format!("{cur}: {e}"),
                format!(
                    "reinstall it (`atlas install {}`) or go back (`atlas restore {}`)",
                    rec.as_ref().map_or("SOURCE", |r| r.source.as_str()),
                    b.name
                ),
            )),
            Ok(m) => {
                let built_days = age_days(&m.created);
                // The oldest fetch of any source (crawled sites and repositories).
                let source_days = m.sources.iter().filter_map(|s| s.fetched_at.as_deref().and_then(age_days)).max();
                let signed = rec.as_ref().and_then(|r| r.signed_by.clone());
                // Installed from an archive on this machine (what `atlas-pipeline run
                // --archive` wrote): built here, so there is no publisher to check.
                let local = rec.as_ref().is_some_and(|r| !r.source.contains("://") && !r.source.starts_with("github:"));
                let provenance = match (&signed, local) {
                    (Some(k), _) => format!("signed by {k}"),
                    (None, true) => "built here (installed from a local archive)".to_owned(),
                    (None, false) => "signature not checked".to_owned(),
                };
                let detail = format!(
                    "{cur}: {} {} the manifest; {provenance}; built {}{}",
                    atlas_runtime::words::count(m.artifacts.len(), "file"),
                    atlas_runtime::words::agree(m.artifacts.len(), "matches", "match"),
                    built_days.map_or_else(|| m.created.clone(), |d| format!("{} ago", days(d))),
                    source_days.map(|d| format!(", sources fetched up to {} ago", days(d))).unwrap_or_default(),
                );
                let (status, fix) = match (signed.is_some() || local, built_days) {
                    (_, Some(d)) if d > OLD_DAYS => {
                        (Status::Warn, format!("`atlas update {}` for a newer build", b.name))
                    }
                    (false, _) => {
                        (Status::Warn, "install with --trust PUBKEY to check the publisher's signature".to_owned())
                    }
                    _ => (Status::Ok, String::new()),
                };
                out.push(check(name, status, detail, fix));
            }
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        let cwd = std::env::current_dir().unwrap_or_default();
        out.extend(editor_configs(std::path::Path::new(&home), &cwd));
    }
    let ah = model::atlas_home();
    let probe = std::iter::successors(Some(ah.as_path()), |p| p.parent()).find(|p| p.exists());
    out.push(match probe.map(fs4::available_space) {
        Some(Ok(free)) if free < LOW_DISK => check(
            "disk",
            Status::Warn,
            format!("{} free in {}", crate::manage::human_bytes(free), ah.display()),
            "free some space, or set ATLAS_HOME elsewhere",
        ),
        Some(Ok(free)) => {
            check("disk", Status::Ok, format!("{} free in {}", crate::manage::human_bytes(free), ah.display()), "")
        }
        Some(Err(e)) => check("disk", Status::Warn, format!("{}: {e}", ah.display()), "check ATLAS_HOME"),
        None => check("disk", Status::Warn, format!("{} does not exist", ah.display()), "run `atlas setup`"),
    });
    out
}

/// How a project's lockfiles and its library set (what `atlas sync DIR` wrote and
/// `serve --project DIR` serves) agree: one failing line for each locked version the
/// set does not serve, each set entry whose bundle is not installed, and each set entry
/// no lockfile pins any more, every one fixed by `atlas sync DIR`; one `ok` line when
/// they agree.
pub fn project(dir: &std::path::Path) -> Vec<Check> {
    const LABEL: &str = "project";
    let sync = format!("run `atlas sync {}`", dir.display());
    let fail = |detail: String, fix: &str| vec![check(LABEL, Status::Fail, detail, fix)];
    let project = match std::path::absolute(dir) {
        Ok(p) if p.is_dir() => p,
        _ => return fail(format!("{} is not a folder", dir.display()), "pass the project's folder"),
    };
    // What the last sync took (`--only`, `--all`): the lockfiles are read the same way.
    let select = match atlas_dist::project::Set::read(&project) {
        Ok(Some(set)) => crate::deps::lockfiles::Select { all: set.all, only: set.only },
        _ => crate::deps::lockfiles::Select::default(),
    };
    let read = match crate::deps::lockfiles::read(&project, &select) {
        // A project without dependencies that `atlas init` indexed: its tree alone.
        Ok(r)
            if r.found.is_empty()
                && let Ok(Some(set)) = atlas_dist::project::Set::read(&project)
                && let Some(tree) = set.libraries.iter().find(|p| crate::tree::is_tree(&p.kinds)) =>
        {
            let home = Home::from_env();
            let shown = atlas_runtime::package::shown_name(&tree.name);
            return match home.resolve(&tree.name) {
                Some(_) => vec![check(
                    LABEL,
                    Status::Ok,
                    format!("{}: {shown} serves its working tree", project.display()),
                    "",
                )],
                None => fail(
                    format!("{shown}, the working tree, is not indexed"),
                    &format!("run `atlas init {}`", project.display()),
                ),
            };
        }
        Ok(r) if r.found.is_empty() => {
            return fail(
                format!("{} has no lockfile ({})", project.display(), crate::deps::lockfiles::LOCKFILES.join(", ")),
                &format!("run your package manager once to write one, then {}", sync.trim_start_matches("run ")),
            );
        }
        Ok(r) => r,
        Err(e) => return fail(e.to_string(), &sync),
    };
    let set = match atlas_dist::project::Set::read(&project) {
        Ok(Some(set)) => set,
        Ok(None) => return fail(format!("{} has no library set: nothing is served", project.display()), &sync),
        Err(e) => return fail(e.to_string(), &sync),
    };
    let home = Home::from_env();
    let mut out = Vec::new();
    for l in &read.locked {
        let name = l.spec.bundle_name();
        if set.libraries.iter().any(|p| p.name == name && p.version == l.spec.version) {
            continue;
        }
        let served: Vec<&str> = set.libraries.iter().filter(|p| p.name == name).map(|p| p.version.as_str()).collect();
        let detail = match served.is_empty() {
            true => format!("{} is locked in {} but the set does not serve it", l.spec, l.lockfile),
            false => format!("{} is locked in {} but the set serves {}", l.spec, l.lockfile, served.join(", ")),
        };
        out.push(check(LABEL, Status::Fail, detail, &sync));
    }
    let every = crate::deps::lockfiles::read(&project, &crate::deps::lockfiles::Select::every())
        .map(|r| r.locked)
        .unwrap_or_default();
    for p in &set.libraries {
        let shown = format!("{}@{}", atlas_runtime::package::shown_name(&p.name), p.version);
        // The project's own tree (`atlas init`) follows its `current`; no lockfile names it.
        if crate::tree::is_tree(&p.kinds) {
            if home.resolve(&p.name).is_none() {
                out.push(check(
                    LABEL,
                    Status::Fail,
                    format!("{shown}, the working tree, is not indexed"),
                    format!("run `atlas init {}`", project.display()),
                ));
            }
            continue;
        }
        if home.resolve_version(&p.name, &p.version).is_none() {
            out.push(check(
                LABEL,
                Status::Fail,
                format!("{shown} is in the set but its bundle is not installed"),
                &sync,
            ));
        } else if !p.kinds.iter().any(|k| k == atlas_dist::project::ADDED)
            && !every.iter().any(|l| l.spec.bundle_name() == p.name && l.spec.version == p.version)
        {
            out.push(check(LABEL, Status::Fail, format!("{shown} is in the set but no lockfile pins it"), &sync));
        }
    }
    if out.is_empty() {
        out.push(check(
            LABEL,
            Status::Ok,
            format!(
                "{}: the set serves what {} {} ({})",
                project.display(),
                read.found.join(", "),
                atlas_runtime::words::agree(read.found.len(), "pins", "pin"),
                atlas_runtime::words::count(set.libraries.len(), "library")
            ),
            "",
        ));
    }
    out
}

/// The editors' MCP config files Atlas knows, under the user's home and the project
/// folder, with the key that holds their servers.
const EDITOR_CONFIGS: &[(bool, &str, &str)] = &[
    (true, ".config/Claude/claude_desktop_config.json", "mcpServers"),
    (true, "Library/Application Support/Claude/claude_desktop_config.json", "mcpServers"),
    (true, ".cursor/mcp.json", "mcpServers"),
    (true, ".codeium/windsurf/mcp_config.json", "mcpServers"),
    (true, ".claude.json", "mcpServers"),
    (false, ".cursor/mcp.json", "mcpServers"),
    (false, ".mcp.json", "mcpServers"),
    (false, ".vscode/mcp.json", "servers"),
];

/// One check per editor config that starts Atlas: a warning for each server that
/// runs it through `uvx` or `npx` without `--offline`, which asks the package index
/// at every start and does not start without it.
fn editor_configs(home: &std::path::Path, project: &std::path::Path) -> Vec<Check> {
    let mut out = Vec::new();
    for &(in_home, rel, key) in EDITOR_CONFIGS {
        let file = if in_home { home.join(rel) } else { project.join(rel) };
        let Ok(bytes) = atlas_runtime::safe_path::read_capped(&file, 4 << 20) else { continue };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else { continue };
        let Some(servers) = v.get(key).and_then(|s| s.as_object()) else { continue };
        let mut online = Vec::new();
        let mut ours = 0;
        for (name, s) in servers {
            let command = s.get("command").and_then(|c| c.as_str()).unwrap_or("");
            let args: Vec<&str> =
                s.get("args").and_then(|a| a.as_array()).into_iter().flatten().filter_map(|a| a.as_str()).collect();
            let tool = std::path::Path::new(command).file_stem().and_then(|f| f.to_str()).unwrap_or("");
            let atlas =
                args.iter().chain(std::iter::once(&command)).any(|a| a.contains("atlas-mcp-server")) || tool == "atlas";
            if !atlas {
                continue;
            }
            ours += 1;
            if matches!(tool, "uvx" | "npx") && !args.contains(&"--offline") {
                online.push(atlas_runtime::utf8::clip_chars(&atlas_runtime::utf8::printable(name), 60));
            }
        }
        let label = format!("editor config {}", file.display());
        out.push(match online.is_empty() {
            true if ours > 0 => check(label, Status::Ok, format!("{}, none needing the network to start", atlas_runtime::words::count(ours, "Atlas server")), ""),
            true => continue,
            false => check(
                label,
                Status::Warn,
                format!("{} start through uvx or npx without --offline: each start asks the package index, and fails without it", online.join(", ")),
                "add --offline before the package, as `atlas install` prints it, or run a binary that stays (`uv tool install atlas-mcp-server`)",
            ),
        });
    }
    out
}

pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        s.push_str(&format!("{tag}  {:<28} {}\n", c.check, c.detail));
        if !c.fix.is_empty() {
            s.push_str(&format!("      {:<28} → {}\n", "", c.fix));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_editor_config_that_starts_atlas_online_is_a_warning() {
        let t = tempfile::tempdir().unwrap();
        let (home, project) = (t.path().join("home"), t.path().join("project"));
        std::fs::create_dir_all(home.join(".cursor")).unwrap();
        std::fs::create_dir_all(project.join(".vscode")).unwrap();
        std::fs::write(
            home.join(".cursor/mcp.json"),
            r#"{"mcpServers": {
                "docs-rag": {"command": "uvx", "args": ["atlas-mcp-server@0.1.0", "serve", "rag", "--bundle", "docs"]},
                "docs-fs": {"command": "/usr/bin/npx", "args": ["--offline", "-y", "atlas-mcp-server@0.1.0", "serve", "fs"]},
                "other": {"command": "uvx", "args": ["some-other-server"]}
            }}"#,
        )
        .unwrap();
        std::fs::write(
            project.join(".vscode/mcp.json"),
            r#"{"servers": {"deps": {"command": "/home/u/.local/bin/atlas", "args": ["serve", "rag", "--project", "."]}}}"#,
        )
        .unwrap();
        let checks = editor_configs(&home, &project);
        assert_eq!(checks.len(), 2, "{checks:?}");
        assert_eq!(checks[0].status, Status::Warn);
        assert!(checks[0].detail.starts_with("docs-rag start") && checks[0].fix.contains("--offline"), "{checks:?}");
        assert_eq!(checks[1].status, Status::Ok, "{checks:?}");
        assert!(editor_configs(&t.path().join("none"), &t.path().join("none")).is_empty());
    }
}
