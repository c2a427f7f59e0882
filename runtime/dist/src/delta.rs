//! Delta updates from object storage. `publish` puts every file of a bundle beside the
//! archive, content-addressed and compressed: `<name>/files/<blake3>.zst`, shared by
//! all versions. `atlas update` then reads the new version's `manifest.json` (its
//! sha256 from `latest.json`, its signature when a key is trusted), hard-links each
//! file the installed version already holds with the same blake3, fetches only the
//! others (each checked against the manifest as it is written, and capped at its
//! listed size), verifies the whole folder, and switches `current` atomically: the
//! same commit as a full install. A source without the per-file layout, or missing a
//! file, falls back to the archive.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use atlas_runtime::manifest::Manifest;
use minisign::PublicKey;
use object_store::ObjectStoreExt as _;
use object_store::path::Path as ObjPath;

use crate::home::{Home, Record};
use crate::install::{Latest, Outcome};
use crate::store::Store;
use crate::{Error, Result, io, sign};

/// The folder beside the versions that holds every published file.
pub const FILES: &str = "files";

/// The object of a file's content.
pub fn object_name(blake3: &str) -> String {
    format!("{blake3}.zst")
}

/// What a delta update moved.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Transfer {
    /// Bytes read from the remote (the manifest and the compressed files).
    pub fetched_bytes: u64,
    pub fetched_files: usize,
    /// Files hard-linked (or copied) from the installed version.
    pub reused_files: usize,
    /// The full archive's size, for comparison.
    pub archive_bytes: u64,
}

/// Publishing: the archive's files not yet under `<name>/files/`, compressed, then
/// uploaded. Returns how many were uploaded.
pub async fn publish_files(store: &Store, name: &str, archive: &Path, manifest: &Manifest) -> Result<usize> {
    use futures_util::StreamExt as _;
    let files_dir = store.path(&[name, FILES]);
    let mut have = std::collections::HashSet::new();
    let mut listing = store.store.list(Some(&files_dir));
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| Error::Remote(format!("{}: listing {files_dir}: {e}", store.url)))?;
        if let Some(f) = meta.location.filename() {
            have.insert(f.to_owned());
        }
    }
    let want: HashMap<&str, &str> = manifest
        .artifacts
        .iter()
        .filter(|a| !have.contains(&object_name(&a.blake3)))
        .map(|a| (a.path.as_str(), a.blake3.as_str()))
        .collect();
    if want.is_empty() {
        return Ok(0);
    }
    // Compressed to a scratch folder first (the archive is read once, synchronously),
    // then uploaded.
    let scratch = tempfile::tempdir().map_err(io("a scratch folder"))?;
    let mut staged = Vec::new();
    {
        let f = std::fs::File::open(archive).map_err(io(archive))?;
        let dec = zstd::stream::Decoder::new(f).map_err(io(archive))?;
        let mut tar = tar::Archive::new(dec);
        let corrupt = |e: std::io::Error| Error::DataCorruption(format!("{}: {e}", archive.display()));
        for entry in tar.entries().map_err(corrupt)? {
            let mut entry = entry.map_err(corrupt)?;
            let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let Some(b3) = path.split_once('/').and_then(|(_, rel)| want.get(rel)) else { continue };
            let obj = object_name(b3);
            if staged.iter().any(|(o, _)| *o == obj) {
                continue;
            }
            let out = scratch.path().join(&obj);
            let file = std::fs::File::create(&out).map_err(io(&out))?;
            let mut enc = zstd::stream::Encoder::new(file, 3).map_err(io(&out))?;
            std::io::copy(&mut entry, &mut enc).map_err(corrupt)?;
            enc.finish().map_err(io(&out))?.flush().map_err(io(&out))?;
            staged.push((obj, out));
        }
    }
    for (obj, file) in &staged {
        store.put_file(&store.path(&[name, FILES, obj]), file).await?;
    }
    Ok(staged.len())
}

/// Updates the installed `base` (the current version of `latest.name`) to `latest`
/// through the per-file layout. `Ok(None)`: the source cannot give a delta (an older
/// publish, a file missing); the caller downloads the archive instead.
pub async fn update(
    home: &Home,
    store: &Store,
    dir: &ObjPath,
    latest: &Latest,
    base: &Record,
    keys: &[PublicKey],
    source: &str,
    keep: usize,
) -> Result<Option<(Outcome, Transfer)>> {
    let Some(manifest_sha) = latest.manifest_sha256.as_deref().filter(|_| latest.files) else { return Ok(None) };
    if !keys.is_empty() && latest.manifest_signature.is_none() {
        // Signed archive, unsigned manifest: the archive's signature is the check.
        return Ok(None);
    }
    let mpath = dir.clone().join(latest.version.as_str()).join("manifest.json");
    let Some(bytes) = store.get_small(&mpath, atlas_runtime::manifest::MAX_MANIFEST_BYTES).await? else {
        return Ok(None);
    };
    let mut transfer = Transfer { fetched_bytes: bytes.len() as u64, archive_bytes: latest.size, ..Transfer::default() };
    let got = crate::publish::sha256_bytes(&bytes);
    if got != manifest_sha {
        return Err(Error::DataCorruption(format!(
            "{source}: manifest.json of {} has sha256 {got}, latest.json says {manifest_sha}; nothing was installed",
            latest.version
        )));
    }
    let signed_by = check_signature(keys, latest, &bytes, source)?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::DataCorruption(format!("{source}: unreadable manifest.json ({e})")))?;
    if m.name != latest.name || m.version != latest.version {
        return Err(Error::DataCorruption(format!(
            "{source}: manifest.json is {} {}, latest.json says {} {}",
            m.name, m.version, latest.name, latest.version
        )));
    }
    let old_dir = home.dir(&base.name).join(&base.version);
    let old = atlas_runtime::manifest::read_manifest(&old_dir)?;
    // What the installed version holds, by content.
    let by_hash: HashMap<&str, &str> = old.artifacts.iter().map(|a| (a.blake3.as_str(), a.path.as_str())).collect();
    let staging = home.staging()?;
    let result = async {
        let root = staging.join(&m.name);
        for a in &m.artifacts {
            let to = atlas_runtime::safe_path::join_inside(&root, &a.path)
                .map_err(|e| Error::DataCorruption(format!("{source}: manifest.json: {e}")))?;
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            if let Some(from) = by_hash.get(a.blake3.as_str()) {
                let from = atlas_runtime::safe_path::join_inside(&old_dir, from)
                    .map_err(|e| Error::DataCorruption(format!("the installed manifest: {e}")))?;
                if std::fs::hard_link(&from, &to).is_err() {
                    std::fs::copy(&from, &to).map_err(io(&to))?;
                }
                transfer.reused_files += 1;
                continue;
            }
            let obj = dir.clone().join(FILES).join(object_name(&a.blake3).as_str());
            match fetch_file(store, &obj, &to, a).await {
                Ok(n) => {
                    transfer.fetched_bytes += n;
                    transfer.fetched_files += 1;
                }
                Err(Error::Remote(why)) if why.contains("not found") || why.contains("NotFound") => {
                    eprintln!("atlas: {source}: {} is not published per file; downloading the archive", a.path);
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        std::fs::write(root.join("manifest.json"), &bytes).map_err(io(root.join("manifest.json")))?;
        // Linked files are checked too: an installed file changed on disk is caught here.
        atlas_runtime::manifest::verify(&root).map_err(|e| {
            Error::DataCorruption(format!("{source}: the updated bundle does not match its manifest ({e}); nothing was installed"))
        })?;
        let record = Record {
            name: m.name.clone(),
            version: m.version.clone(),
            source: source.to_owned(),
            sha256: latest.sha256.clone(),
            remote_id: None,
            size: latest.size,
            installed: crate::home::now(),
            signed_by: signed_by.as_ref().map(|(id, _)| id.clone()),
            trust: signed_by.as_ref().map(|(_, k)| k.clone()),
            created: m.created.clone(),
        };
        let previous = home.current(&m.name);
        let (path, _) = home.commit(&root, &record, keep)?;
        Ok(Some((
            Outcome {
                name: m.name.clone(),
                version: m.version.clone(),
                path,
                changed: true,
                signed_by: record.signed_by.clone(),
                previous,
                transfer: None,
            },
            transfer,
        )))
    }
    .await;
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// With trusted keys, the manifest's signature must verify with one of them and name
/// this version: `(key id, key)`.
fn check_signature(
    keys: &[PublicKey],
    latest: &Latest,
    manifest: &[u8],
    source: &str,
) -> Result<Option<(String, String)>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let sig = latest.manifest_signature.as_deref().ok_or_else(|| {
        Error::Signature(format!("{source}: the manifest has no signature and a key is trusted; nothing was installed"))
    })?;
    let mut last = None;
    for k in keys {
        match sign::verify_bytes(k, sig, manifest) {
            Ok(comment) if comment.split_whitespace().any(|w| w == format!("version={}", latest.version)) => {
                return Ok(Some((sign::key_id(k), k.to_base64())));
            }
            Ok(comment) => last = Some(Error::Signature(format!("{source}: the manifest's signature is for {comment:?}"))),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::Signature("no trusted key".into())))
}

/// Fetches one compressed file into `to`, decompressing as it comes, refusing more
/// bytes than the manifest lists and any content whose blake3 differs. Returns the
/// compressed bytes read.
async fn fetch_file(store: &Store, obj: &ObjPath, to: &PathBuf, a: &atlas_runtime::manifest::Artifact) -> Result<u64> {
    let r = store.store.get(obj).await.map_err(|e| match e {
        object_store::Error::NotFound { .. } => Error::Remote(format!("{obj}: not found")),
        e => Error::Remote(format!("{}/{obj}: {e}", store.url)),
    })?;
    // A compressed file is never larger than its content plus zstd's framing.
    if r.meta.size > a.size + a.size / 64 + 1024 {
        return Err(Error::DataCorruption(format!("{}/{obj}: {} bytes for a {}-byte file", store.url, r.meta.size, a.size)));
    }
    let compressed = r.bytes().await.map_err(|e| Error::Remote(format!("{}/{obj}: {e}", store.url)))?;
    let bad = |why: String| Error::DataCorruption(format!("{}/{obj}: {why}; nothing was installed", store.url));
    let mut dec = zstd::stream::Decoder::new(&compressed[..]).map_err(|e| bad(e.to_string()))?;
    let mut out = std::fs::File::create(to).map_err(io(to))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut written = 0u64;
    loop {
        let n = std::io::Read::read(&mut dec, &mut buf).map_err(|e| bad(format!("not zstd ({e})")))?;
        if n == 0 {
            break;
        }
        written += n as u64;
        if written > a.size {
            return Err(bad(format!("unpacks past the {} bytes the manifest lists for {}", a.size, a.path)));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io(to))?;
    }
    let got = hasher.finalize().to_hex();
    if written != a.size || got.as_str() != a.blake3 {
        return Err(bad(format!("{} does not match the manifest (blake3 {got}, listed {})", a.path, a.blake3)));
    }
    out.sync_all().map_err(io(to))?;
    Ok(compressed.len() as u64)
}
