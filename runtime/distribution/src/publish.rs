//! `atlas-pipeline publish`: the archive, its `.sha256`, `manifest.json` and (with a
//! key) its `.minisig`, to a GitHub release or to object storage. Republishing the
//! same bytes is a no-op; other bytes under a published version are refused unless
//! `replace`.

use std::path::{Path, PathBuf};

use crate::github::GitHub;
use crate::latest::Latest;
use crate::store::Store;
use crate::target::Target;
use atlas_runtime::hash::{sha256_bytes, sha256_file};

use crate::{Error, Result, io};

/// What is published: the archive and what travels beside it.
#[derive(Debug, Clone)]
pub struct Release {
    pub archive: PathBuf,
    pub file_name: String,
    pub name: String,
    pub version: String,
    pub created: String,
    pub sha256: String,
    pub size: u64,
    pub manifest: Vec<u8>,
    pub signature: Option<String>,
    /// The manifest's signature (a delta update checks it instead of the archive's).
    pub manifest_signature: Option<String>,
}

impl Release {
    /// Reads the archive's manifest from inside it and signs it with `key`, if given.
    pub fn prepare(archive: &Path, key: Option<&Path>) -> Result<Release> {
        let manifest = read_member(archive, "manifest.json", 64 << 20)?;
        let m: atlas_runtime::manifest::Manifest = serde_json::from_slice(&manifest)
            .map_err(|e| Error::DataCorruption(format!("{}: unreadable manifest.json ({e})", archive.display())))?;
        crate::check_component("bundle", &m.name)?;
        crate::check_component("version", &m.version)?;
        let file_name = format!("{}-{}.tar.zst", m.name, m.version);
        let sha256 = sha256_file(archive)?;
        let size = std::fs::metadata(archive).map_err(io(archive))?.len();
        let (signature, manifest_signature) = match key {
            Some(k) => {
                let bytes = std::fs::read(archive).map_err(io(archive))?;
                let comment = format!("atlas-bundle name={} version={} sha256={sha256}", m.name, m.version);
                let mcomment = format!("atlas-manifest name={} version={}", m.name, m.version);
                (Some(crate::sign::sign(&bytes, k, &comment)?), Some(crate::sign::sign(&manifest, k, &mcomment)?))
            }
            None => (None, None),
        };
        Ok(Release {
            archive: archive.to_owned(),
            file_name,
            name: m.name,
            version: m.version,
            created: m.created,
            sha256,
            size,
            manifest,
            signature,
            manifest_signature,
        })
    }

    fn sha_line(&self) -> String {
        format!("{}  {}\n", self.sha256, self.file_name)
    }
}

/// One file of the archive, read without unpacking anything to disk.
pub fn read_member(archive: &Path, rel: &str, max: u64) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let f = std::fs::File::open(archive).map_err(io(archive))?;
    let dec = zstd::stream::Decoder::new(f).map_err(io(archive))?;
    let mut tar = tar::Archive::new(dec);
    let corrupt = |e: std::io::Error| Error::DataCorruption(format!("{}: {e}", archive.display()));
    for entry in tar.entries().map_err(corrupt)? {
        let entry = entry.map_err(corrupt)?;
        let path = entry.path_bytes().into_owned();
        let path = String::from_utf8_lossy(&path);
        if path.split_once('/').is_some_and(|(_, r)| r == rel) {
            if entry.header().size().unwrap_or(u64::MAX) > max {
                return Err(Error::DataCorruption(format!("{}: {rel} is too large", archive.display())));
            }
            let mut out = Vec::new();
            entry.take(max).read_to_end(&mut out).map_err(corrupt)?;
            return Ok(out);
        }
    }
    Err(Error::DataCorruption(format!("{}: no {rel} inside", archive.display())))
}

/// What a publish did.
#[derive(Debug, Clone)]
pub struct Published {
    /// Where it went (a release page or a store URL).
    pub location: String,
    /// False when the same bytes were there already.
    pub uploaded: bool,
    /// The install source for users.
    pub install: String,
}

pub async fn publish(rel: &Release, target: &Target, replace: bool, github_api: &str) -> Result<Published> {
    match target {
        Target::GitHub { owner, repo, tag } => {
            let token = std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty()).ok_or_else(|| {
                Error::Usage("publishing to GitHub needs GITHUB_TOKEN (a token with contents: write)".into())
            })?;
            let gh = GitHub::new(github_api, owner, repo, Some(token))?;
            to_github(rel, &gh, tag, replace).await
        }
        Target::Store(url) => to_store(rel, &Store::open(url)?, replace).await,
    }
}

async fn to_github(rel: &Release, gh: &GitHub, tag: &str, replace: bool) -> Result<Published> {
    let release = match gh.release_by_tag(tag).await? {
        Some(r) => r,
        None => gh.create_release(tag, &format!("{} {}", rel.name, rel.version), &release_notes(rel)).await?,
    };
    let sha_name = format!("{}.sha256", rel.file_name);
    let install = format!("github:{}/{}@{tag}", gh.owner, gh.repo);
    if let Some(existing) = release.asset(&sha_name) {
        let theirs =
            crate::fetch::parse_sha256_file(&String::from_utf8_lossy(&gh.download_small(existing, 1 << 20).await?))?;
        if theirs == rel.sha256 && release.asset(&rel.file_name).is_some() {
            return Ok(Published { location: release.html_url.clone(), uploaded: false, install });
        }
        if theirs != rel.sha256 && !replace {
            return Err(Error::Usage(format!(
                "release {tag} already holds {} with sha256 {theirs}, not {}: pass --replace to overwrite it, or publish under a new tag",
                rel.file_name, rel.sha256
            )));
        }
    }
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (rel.file_name.clone(), std::fs::read(&rel.archive).map_err(io(&rel.archive))?),
        ("manifest.json".to_owned(), rel.manifest.clone()),
    ];
    if let Some(sig) = &rel.signature {
        files.push((format!("{}.minisig", rel.file_name), sig.clone().into_bytes()));
    }
    // The .sha256 goes last: an installer needs it, so a cut publish is never installed.
    files.push((sha_name, rel.sha_line().into_bytes()));
    for (name, bytes) in files {
        if let Some(old) = release.asset(&name) {
            gh.delete_asset(old).await?;
        }
        gh.upload(&release, &name, bytes).await?;
    }
    Ok(Published { location: release.html_url.clone(), uploaded: true, install })
}

async fn to_store(rel: &Release, store: &Store, replace: bool) -> Result<Published> {
    let dir = [rel.name.as_str(), rel.version.as_str()];
    let at = |file: &str| store.path(&[dir[0], dir[1], file]);
    let sha_name = format!("{}.sha256", rel.file_name);
    let install = format!("{}/{}", store.url.as_str().trim_end_matches('/'), rel.name);
    let latest = Latest {
        name: rel.name.clone(),
        version: rel.version.clone(),
        archive: rel.file_name.clone(),
        sha256: rel.sha256.clone(),
        size: rel.size,
        created: rel.created.clone(),
        signature: rel.signature.clone(),
        files: true,
        manifest_sha256: Some(sha256_bytes(&rel.manifest)),
        manifest_signature: rel.manifest_signature.clone(),
    };
    let latest_path = store.path(&[dir[0], "latest.json"]);
    if let Some(theirs) = store.get_small(&at(&sha_name), 1 << 20).await? {
        let theirs = crate::fetch::parse_sha256_file(&String::from_utf8_lossy(&theirs))?;
        if theirs == rel.sha256 {
            // The same bytes: nothing to upload; finish a publish cut before latest.json.
            let current: Option<Latest> =
                store.get_small(&latest_path, 1 << 20).await?.and_then(|b| serde_json::from_slice(&b).ok());
            if current.is_none() {
                publish_files(rel, store).await?;
                store.put(&latest_path, serde_json::to_vec_pretty(&latest).expect("plain data")).await?;
            }
            return Ok(Published { location: store.url.to_string(), uploaded: false, install });
        }
        if !replace {
            return Err(Error::Usage(format!(
                "{}/{}/{} already holds sha256 {theirs}, not {}: pass --replace to overwrite it, or bump the version",
                store.url, rel.name, rel.version, rel.sha256
            )));
        }
    }
    store.put_file(&at(&rel.file_name), &rel.archive).await?;
    store.put(&at("manifest.json"), rel.manifest.clone()).await?;
    if let Some(sig) = &rel.signature {
        store.put(&at(&format!("{}.minisig", rel.file_name)), sig.clone().into_bytes()).await?;
    }
    store.put(&at(&sha_name), rel.sha_line().into_bytes()).await?;
    publish_files(rel, store).await?;
    // Last: a reader never sees latest point at a partial upload.
    store.put(&latest_path, serde_json::to_vec_pretty(&latest).expect("plain data")).await?;
    Ok(Published { location: store.url.to_string(), uploaded: true, install })
}

/// The bundle's files, one object per content, for delta updates.
async fn publish_files(rel: &Release, store: &Store) -> Result<()> {
    let m: atlas_runtime::manifest::Manifest = serde_json::from_slice(&rel.manifest)
        .map_err(|e| Error::DataCorruption(format!("{}: unreadable manifest.json ({e})", rel.archive.display())))?;
    crate::delta::publish_files(store, &rel.name, &rel.archive, &m).await?;
    Ok(())
}

fn release_notes(rel: &Release) -> String {
    format!(
        "Atlas bundle {} {} (built {}).\n\nInstall: `atlas install github:OWNER/REPO@TAG`; sha256 `{}`.",
        rel.name, rel.version, rel.created, rel.sha256
    )
}
