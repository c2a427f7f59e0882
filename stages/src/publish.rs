//! `atlas-pipeline publish` and `keygen`: the built archive to a GitHub release or
//! object storage (`atlas_dist::publish`), signed with a minisign key, and the install
//! line users need.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use atlas_dist::edge;
use atlas_dist::publish::Release;
use atlas_dist::target::{Target, parse_repo};
use atlas_runtime::exit::UsageError;

use crate::runner::Loaded;

/// What the flags say; each field falls back to pipeline.yaml's `publish:`, then to
/// the config file's `[publish]` (docs/distribution.md).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub github: Option<String>,
    pub tag: Option<String>,
    pub to: Option<String>,
    pub sign: Option<PathBuf>,
    pub replace: bool,
    pub archive: Option<PathBuf>,
    pub api_url: Option<String>,
}

/// Publishes the archive `run --archive` wrote in `out_dir` (or `--archive`); returns
/// the install instructions for stdout.
pub fn publish(cfg: &Loaded, out_dir: &Path, f: &Flags) -> anyhow::Result<String> {
    let p = &cfg.config.publish;
    if let Some(name) =
        cfg.config.sources.iter().find(|(_, s)| matches!(s, crate::runner::SourceConfig::Tree { .. })).map(|(n, _)| n)
    {
        anyhow::bail!(UsageError(format!(
            "source {name} is a working tree, whose index never leaves this machine: publish a bundle built from a git or local source instead"
        )));
    }
    // The maintainer's own defaults (`[publish]` in config.toml), below pipeline.yaml.
    let user = atlas_dist::config::load().map_err(edge)?.0.publish;
    let archive = match &f.archive {
        Some(a) => a.clone(),
        None => {
            let m = atlas_runtime::manifest::read_manifest(&out_dir.join("bundle")).map_err(|_| {
                UsageError(format!(
                    "no built bundle in {}: run `atlas-pipeline run --archive` first (or pass --archive FILE)",
                    out_dir.display()
                ))
            })?;
            out_dir.join(format!("{}-{}.tar.zst", m.name, m.version))
        }
    };
    if !archive.is_file() {
        anyhow::bail!(UsageError(format!(
            "{} does not exist: run `atlas-pipeline run --archive` first",
            archive.display()
        )));
    }
    let key = f.sign.clone().or_else(|| p.sign.as_ref().map(|k| cfg.resolve(k))).or(user.sign.clone());
    let rel = Release::prepare(&archive, key.as_deref()).map_err(edge)?;
    let public_key = match (&p.public_key, &key) {
        (Some(pk), _) => Some(pk.clone()),
        (None, Some(k)) => {
            std::fs::read_to_string(k.with_extension("pub")).ok().and_then(|t| t.lines().nth(1).map(str::to_owned))
        }
        (None, None) => None,
    };
    if let (Some(pk), Some(sig)) = (&public_key, &rel.signature) {
        let pk = atlas_dist::sign::parse_public_key(pk).map_err(edge)?;
        atlas_dist::sign::verify_file(&pk, sig, &archive).map_err(|e| {
            let key = key.as_deref().map(|k| k.display().to_string()).unwrap_or_default();
            UsageError(format!("publish.public_key does not verify the signature made with {key}: {e}"))
        })?;
    }
    let mut targets = Vec::new();
    let tag = f.tag.clone().or_else(|| p.tag.clone()).unwrap_or_else(|| format!("v{}", rel.version));
    if let Some(repo) = f.github.as_ref().or(p.github.as_ref()).or(user.github.as_ref()) {
        let (owner, repo) = parse_repo(repo).map_err(edge)?;
        targets.push(Target::GitHub { owner, repo, tag });
    }
    if let Some(to) = f.to.as_ref().or(p.to.as_ref()).or(user.to.as_ref()) {
        targets.push(Target::store(to).map_err(edge)?);
    }
    if targets.is_empty() {
        anyhow::bail!(UsageError(
            "nowhere to publish: pass --github OWNER/REPO [--tag TAG] or --to s3://…|gs://…|az://…|file://… (or set publish: in pipeline.yaml, or [publish] in the config file)".into()
        ));
    }
    let api = f
        .api_url
        .clone()
        .or_else(|| p.api_url.clone())
        .or(user.api_url)
        .unwrap_or_else(atlas_dist::github::api_from_env);
    let rt = atlas_dist::runtime().map_err(edge)?;
    let mut text = String::new();
    for t in &targets {
        let done = rt
            .block_on(atlas_dist::publish::publish(&rel, t, f.replace, &api))
            .map_err(edge)
            .with_context(|| format!("publishing {} {}", rel.name, rel.version))?;
        let what = if done.uploaded { "published" } else { "already published (same bytes)" };
        eprintln!(
            "{what}: {} {} ({} bytes, sha256 {}) to {}",
            rel.name, rel.version, rel.size, rel.sha256, done.location
        );
        let trust = public_key.as_deref().map(|k| format!(" --trust {k}")).unwrap_or_default();
        text.push_str(&format!("atlas install {}{trust}\n", done.install));
    }
    if rel.signature.is_none() {
        eprintln!("note: unsigned; pass --sign KEY (make one with `atlas-pipeline keygen`) so users can check it");
    }
    Ok(format!("# Install it with:\n{text}"))
}

/// `keygen`: a key pair in `dir`; returns what to tell the maintainer.
pub fn keygen(dir: &Path, name: &str, password: bool) -> anyhow::Result<String> {
    let password = if password { Some(atlas_dist::sign::password("the new key").map_err(edge)?) } else { None };
    let g = atlas_dist::sign::keygen(dir, name, password).map_err(edge)?;
    eprintln!("wrote {} and {} (mode 0600; keep it secret)", g.public_path.display(), g.secret_path.display());
    Ok(format!(
        "# key {}\n# sign with: atlas-pipeline publish --sign {}\n# in pipeline.yaml, so install lines carry it:\npublish:\n  public_key: {}\n",
        g.id,
        g.secret_path.display(),
        g.public_key
    ))
}
