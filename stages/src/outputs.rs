//! Writes the build outputs a run reached into the out folder (default `.atlas/build`
//! beside the config): `mirror/` (the cleaned documents that chunk line ranges cite),
//! `clean-report.json` and `chunks.parquet`. Each file is written atomically and only
//! when its content changed; mirror files whose document is gone are removed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use atlas_cache::{Cache, Digest};

use crate::builtin::{ChunkManifest, CleanManifest};
use crate::clean::Cleaned;
use crate::dag::StageReport;

#[derive(Debug, Default)]
pub struct Written {
    /// The outputs to name in the log.
    pub paths: Vec<PathBuf>,
}

pub fn materialize(cache: &Cache, out_dir: &Path, stages: &[StageReport], archive: bool) -> anyhow::Result<Written> {
    let mut w = Written::default();
    let output = |name: &str| stages.iter().find(|s| s.name == name).map(|s| s.output);
    if let Some(d) = output("clean-gitbook") {
        let m: CleanManifest = serde_json::from_slice(&cache.get_required(d)?)?;
        let mirror = out_dir.join("mirror");
        let mut keep = BTreeSet::new();
        for doc in &m.docs {
            let c: Cleaned = serde_json::from_slice(&cache.get_required(doc.clean)?)?;
            let path = safe_join(&mirror, &doc.doc.path())?;
            write_if_changed(&path, c.text.as_bytes())?;
            keep.insert(path);
        }
        remove_stale(&mirror, &keep)?;
        let report = cache.get_required(m.report)?;
        let pretty = serde_json::to_vec_pretty(&serde_json::from_slice::<serde_json::Value>(&report)?)?;
        write_if_changed(&out_dir.join("clean-report.json"), &pretty)?;
        w.paths.push(out_dir.join("clean-report.json"));
    }
    if let Some(d) = output("chunk") {
        let m: ChunkManifest = serde_json::from_slice(&cache.get_required(d)?)?;
        let bytes = cache.get_required(m.chunks)?;
        write_if_changed(&out_dir.join("chunks.parquet"), &bytes)?;
        w.paths.push(out_dir.join("chunks.parquet"));
    }
    if let Some(d) = output("embed") {
        let m: crate::embed::EmbedManifest = serde_json::from_slice(&cache.get_required(d)?)?;
        write_if_changed(&out_dir.join("embeddings.npy"), &cache.get_required(m.embeddings)?)?;
        write_if_changed(&out_dir.join("embeddings.json"), &serde_json::to_vec_pretty(&m)?)?;
        w.paths.push(out_dir.join("embeddings.npy"));
    }
    if let Some(d) = output("bm25") {
        let m: crate::bm25::Bm25Manifest = serde_json::from_slice(&cache.get_required(d)?)?;
        let dir = out_dir.join("tantivy");
        write_tree(cache, &dir, &m.files)?;
        let boosts = serde_json::json!({ "boosts": m.boosts, "docs": m.docs });
        write_if_changed(&out_dir.join("bm25.json"), &serde_json::to_vec_pretty(&boosts)?)?;
        w.paths.push(dir);
    }
    if let Some(d) = output("pack") {
        let m: crate::pack::PackManifest = serde_json::from_slice(&cache.get_required(d)?)?;
        let dir = out_dir.join("bundle");
        write_tree(cache, &dir, &m.files)?;
        w.paths.push(dir);
        if archive {
            let name = format!("{}-{}.tar.zst", m.name, m.version);
            let bytes = archive_bytes(cache, &m)?;
            let sha: String = {
                use sha2::Digest as _;
                sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
            };
            write_if_changed(&out_dir.join(&name), &bytes)?;
            write_if_changed(&out_dir.join(format!("{name}.sha256")), format!("{sha}  {name}\n").as_bytes())?;
            w.paths.push(out_dir.join(name));
        }
    }
    Ok(w)
}

/// Writes a folder of cache objects (relative path → object) and removes what else
/// it held.
fn write_tree(cache: &Cache, dir: &Path, files: &std::collections::BTreeMap<String, Digest>) -> anyhow::Result<()> {
    let mut keep = BTreeSet::new();
    for (name, obj) in files {
        let path = safe_join(dir, name)?;
        write_if_changed(&path, &cache.get_required(*obj)?)?;
        keep.insert(path);
    }
    remove_stale(dir, &keep)
}

/// The bundle as a tar.zst: entries sorted, under `<name>/`, with fixed metadata, so
/// equal bundles give equal archives.
fn archive_bytes(cache: &Cache, m: &crate::pack::PackManifest) -> anyhow::Result<Vec<u8>> {
    let enc = zstd::stream::Encoder::new(Vec::new(), 19).context("starting zstd")?;
    let mut tar = tar::Builder::new(enc);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, obj) in &m.files {
        let bytes = cache.get_required(*obj)?;
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        tar.append_data(&mut h, format!("{}/{path}", m.name), bytes.as_slice()).context("adding to the archive")?;
    }
    let enc = tar.into_inner().context("finishing the tar")?;
    enc.finish().context("finishing zstd")
}

/// `root/rel`, refusing a path that would leave `root`.
fn safe_join(root: &Path, rel: &str) -> anyhow::Result<PathBuf> {
    atlas_runtime::safe_path::join_inside(root, rel).with_context(|| format!("writing into {}", root.display()))
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Ok(old) = std::fs::read(path)
        && Digest::of(&old) == Digest::of(bytes)
    {
        return Ok(());
    }
    atlas_cache::write_file_atomic(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn remove_stale(root: &Path, keep: &BTreeSet<PathBuf>) -> anyhow::Result<()> {
    if !root.exists() {
        return Ok(());
    }
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p.clone());
                dirs.push(p);
            } else if !keep.contains(&p) {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let _ = std::fs::remove_dir(&d); // only empty ones go
    }
    Ok(())
}
