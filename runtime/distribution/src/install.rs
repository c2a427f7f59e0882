//! `atlas install` and `atlas update`: resolve a source to one archive and its sha256
//! (and signature), download it (resumable), check the hash and the signature, unpack
//! it safely into a staging folder, verify every manifest hash, then move it in and
//! switch `current`.

use std::path::{Path, PathBuf};

use minisign::PublicKey;

use crate::fetch::{self, Opened};
use crate::github::GitHub;
use crate::home::{Home, Record};
pub use crate::latest::{Latest, check_signed_comment, parse_latest};
pub use crate::outcome::{Options, Outcome};
use crate::store::Store;
use crate::target::Source;
use crate::{Error, Result, sign};

/// What a source resolves to before any download.
#[derive(Debug)]
struct Resolved {
    sha256: String,
    /// What identifies the remote bytes without downloading them: a release asset id
    /// or an ETag.
    remote_id: Option<String>,
    signature: Option<String>,
    how: How,
}

#[derive(Debug)]
enum How {
    Local(PathBuf),
    Http(reqwest::Client, url::Url),
    GitHub(GitHub, crate::github::Asset),
    /// The archive's path, and the bundle's folder with its `latest.json` (for a delta).
    Store(Store, object_store::path::Path, object_store::path::Path, Box<Latest>),
}

const SMALL: u64 = 1 << 20;
/// Bundle names looked at under one object store prefix.
const MAX_NAMES: usize = 1000;

/// What `source` holds now; None when it is what `known` (the current install from
/// the same source) already came from, found without downloading the archive.
async fn resolve(source: &Source, opts: &Options, known: Option<&Record>) -> Result<Option<Resolved>> {
    let unchanged = |id: &str| known.is_some_and(|r| r.remote_id.as_deref() == Some(id));
    match source {
        Source::File(path) => {
            let sha256 = match &opts.sha256 {
                Some(s) => s.to_ascii_lowercase(),
                None => {
                    let side = sibling(path, ".sha256");
                    let text = std::fs::read_to_string(&side).map_err(|_| {
                        Error::Usage(format!("no {} beside the archive: pass --sha256 HEX", side.display()))
                    })?;
                    fetch::parse_sha256_file(&text)?
                }
            };
            if known.is_some_and(|r| r.sha256 == sha256) {
                return Ok(None);
            }
            let signature = std::fs::read_to_string(sibling(path, ".minisig")).ok();
            Ok(Some(Resolved { sha256, remote_id: None, signature, how: How::Local(path.clone()) }))
        }
        Source::Url(url) => {
            let client = crate::http::client()?;
            let head = client.head(url.clone()).build().map_err(|e| Error::Usage(e.to_string()))?;
            let etag = crate::http::send(&client, head, None, crate::http::Redirects::Follow)
                .await
                .ok()
                .filter(|r| r.status().is_success())
                .and_then(|r| r.headers().get("etag").and_then(|v| v.to_str().ok()).map(|e| format!("etag:{e}")));
            if let Some(e) = &etag
                && unchanged(e)
            {
                return Ok(None);
            }
            let side = url::Url::parse(&format!("{url}.sha256")).map_err(|e| Error::Usage(e.to_string()))?;
            let sha256 = match &opts.sha256 {
                Some(s) => s.to_ascii_lowercase(),
                None => {
                    let text = get_small(&client, &side).await?.ok_or_else(|| {
                        Error::Remote(format!("{side}: not found; pass --sha256 HEX to install without it"))
                    })?;
                    fetch::parse_sha256_file(&String::from_utf8_lossy(&text))?
                }
            };
            let sig_url = url::Url::parse(&format!("{url}.minisig")).map_err(|e| Error::Usage(e.to_string()))?;
            if known.is_some_and(|r| r.sha256 == sha256) {
                return Ok(None);
            }
            let signature = get_small(&client, &sig_url).await?.map(|b| String::from_utf8_lossy(&b).into_owned());
            Ok(Some(Resolved { sha256, remote_id: etag, signature, how: How::Http(client, url.clone()) }))
        }
        Source::GitHub { owner, repo, tag } => {
            let token = std::env::var("GITHUB_TOKEN").ok();
            let gh = GitHub::new(&opts.github_api, owner, repo, token)?;
            let release = match tag {
                Some(t) => gh
                    .release_by_tag(t)
                    .await?
                    .ok_or_else(|| Error::Remote(format!("GitHub: {owner}/{repo} has no release {t}")))?,
                None => gh.latest_release().await?,
            };
            let archives: Vec<_> = release.assets.iter().filter(|a| a.name.ends_with(".tar.zst")).collect();
            let [archive] = archives.as_slice() else {
                return Err(Error::Remote(format!(
                    "GitHub: release {} of {owner}/{repo} has {} .tar.zst assets; expected one",
                    release.tag_name,
                    archives.len()
                )));
            };
            let remote_id = format!("github-asset:{}", archive.id);
            if unchanged(&remote_id) {
                return Ok(None);
            }
            let sha_asset = release.asset(&format!("{}.sha256", archive.name)).ok_or_else(|| {
                Error::Remote(format!(
                    "GitHub: release {} has no {}.sha256 (a publish did not finish?)",
                    release.tag_name, archive.name
                ))
            })?;
            let sha256 =
                fetch::parse_sha256_file(&String::from_utf8_lossy(&gh.download_small(sha_asset, SMALL).await?))?;
            let signature = match release.asset(&format!("{}.minisig", archive.name)) {
                Some(a) => Some(String::from_utf8_lossy(&gh.download_small(a, SMALL).await?).into_owned()),
                None => None,
            };
            Ok(Some(Resolved {
                sha256,
                remote_id: Some(remote_id),
                signature,
                how: How::GitHub(gh, (*archive).clone()),
            }))
        }
        Source::Store(url) => {
            let store = Store::open(url)?;
            let (latest, dir) = read_latest(&store).await?;
            if known.is_some_and(|r| r.sha256 == latest.sha256) {
                return Ok(None);
            }
            let path = dir.clone().join(latest.version.as_str()).join(latest.archive.as_str());
            Ok(Some(Resolved {
                sha256: latest.sha256.clone(),
                remote_id: None,
                signature: latest.signature.clone(),
                how: How::Store(store, path, dir, Box::new(latest)),
            }))
        }
    }
}

/// `<url>/latest.json`, else the one `<url>/*/latest.json`.
async fn read_latest(store: &Store) -> Result<(Latest, object_store::path::Path)> {
    let here = store.path(&["latest.json"]);
    if let Some(b) = store.get_small(&here, SMALL).await? {
        return Ok((parse_latest(&store.url, &b)?, store.prefix.clone()));
    }
    let mut names = Vec::new();
    let listing = store
        .store
        .list_with_delimiter(Some(&store.prefix))
        .await
        .map_err(|e| crate::remote(store.url.to_string(), e))?;
    // Only the first names are read: a listing is the store's to make as long as it likes.
    for dir in listing.common_prefixes.into_iter().take(MAX_NAMES) {
        if let Some(b) = store.get_small(&dir.clone().join("latest.json"), SMALL).await? {
            names.push((parse_latest(&store.url, &b)?, dir));
        }
    }
    match names.len() {
        1 => Ok(names.remove(0)),
        0 => Err(Error::Remote(format!("{}: no published bundle here (no latest.json)", store.url))),
        _ => Err(Error::Usage(format!(
            "{}: several bundles are published here ({}); add the name to the URL",
            store.url,
            names.iter().map(|(l, _)| l.name.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

async fn get_small(client: &reqwest::Client, url: &url::Url) -> Result<Option<Vec<u8>>> {
    let resp = crate::http::get(client, url.as_str()).await?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !resp.status().is_success() {
        return Err(Error::Remote(format!("{url}: HTTP {}", resp.status())));
    }
    Ok(Some(fetch::body_capped(resp, SMALL, url.as_str()).await?))
}

fn sibling(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

/// Installs (or updates to) what `source` holds now.
pub async fn install(home: &Home, source: &Source, opts: &Options) -> Result<Outcome> {
    let keys: Vec<PublicKey> = opts.trust.iter().map(|k| sign::parse_public_key(k)).collect::<Result<_>>()?;
    let src = source.to_string();
    let known = home.current_from_source(&src);
    let Some(r) = resolve(source, opts, known.as_ref()).await? else {
        return Ok(up_to_date(home, known.expect("unchanged means installed")));
    };
    // What the source says it holds, before anything is fetched: the name must be
    // the one updated, and the version no step back.
    if let How::Store(_, _, _, latest) = &r.how {
        check_name(opts, &latest.name, source)?;
        home.check_forward(&latest.name, &latest.version, &latest.created, opts.allow_downgrade)?;
    }
    // One install of a name at a time: a second waits, then finds the first's work.
    let early_name = match &r.how {
        How::Store(_, _, _, latest) => Some(latest.name.clone()),
        _ => opts.expect_name.clone(),
    };
    let lock = match &early_name {
        Some(n) => Some(home.lock(n)?),
        None => None,
    };
    if lock.is_some()
        && let Some(now) = home.current_from_source(&src).filter(|n| n.sha256 == r.sha256)
    {
        return Ok(up_to_date(home, now));
    }
    // An update from object storage: only the files that changed, when published so.
    if let (How::Store(store, _, dir, latest), Some(base), Some(lock)) = (&r.how, &known, &lock)
        && base.name == latest.name
        && let Some((out, transfer)) = crate::delta::update(&crate::delta::Request {
            home,
            lock,
            store,
            dir,
            latest,
            base,
            keys: &keys,
            source: &source.to_string(),
            opts,
        })
        .await?
    {
        return Ok(Outcome { transfer: Some(transfer), ..out });
    }
    if !keys.is_empty() && r.signature.is_none() {
        return Err(Error::Signature(format!(
            "{source} has no signature (.minisig) and a key is trusted; nothing was installed"
        )));
    }
    let label = format!("{source}");
    let archive = match &r.how {
        How::Local(p) => p.clone(),
        How::Http(client, url) => {
            fetch::download(&home.downloads(), &r.sha256, &label, |off| {
                let (client, url) = (client.clone(), url.clone());
                Box::pin(
                    async move { fetch::http_open(&client, client.get(url.clone()), None, off, url.as_str()).await },
                )
            })
            .await?
        }
        How::GitHub(gh, asset) => {
            fetch::download(&home.downloads(), &r.sha256, &label, |off| {
                let (req, gh) = (gh.download(asset), gh.clone());
                let what = format!("GitHub asset {}", asset.name);
                Box::pin(async move { fetch::http_open(&gh.client, req, gh.credential(), off, &what).await })
            })
            .await?
        }
        How::Store(store, path, ..) => {
            fetch::download(&home.downloads(), &r.sha256, &label, |off| {
                let (store, path) = (store.clone(), path.clone());
                Box::pin(async move { store_open(&store, &path, off).await })
            })
            .await?
        }
    };
    let downloaded = !matches!(r.how, How::Local(_));
    let got = atlas_runtime::hash::sha256_file(&archive)?;
    if got != r.sha256 {
        if downloaded {
            let _ = std::fs::remove_file(&archive);
        }
        return Err(Error::DataCorruption(format!(
            "{source}: the archive's sha256 is {got}, the published one is {}; nothing was installed",
            r.sha256
        )));
    }
    let mut signed = Signed::default();
    if !keys.is_empty() {
        let sig = r.signature.as_deref().unwrap_or_default();
        let mut last = None;
        for k in &keys {
            match sign::verify_file(k, sig, &archive) {
                Ok(comment) => {
                    signed = Signed { by: Some(sign::key_id(k)), key: Some(k.to_base64()), comment };
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if signed.by.is_none() {
            if downloaded {
                let _ = std::fs::remove_file(&archive);
            }
            return Err(last.unwrap_or_else(|| Error::Signature("no trusted key".into())));
        }
    }
    let staging = home.staging()?;
    let result = unpack_and_commit(home, lock, &archive, &staging, source, &r, opts, signed);
    let _ = std::fs::remove_dir_all(&staging);
    // A finished download goes, unless unpacking failed for a reason a rerun may not
    // meet (a full disk): then the rerun needs no second download.
    if downloaded && !matches!(result, Err(Error::Io { .. })) {
        let _ = std::fs::remove_file(&archive);
    }
    result
}

/// What the signature check established.
#[derive(Debug, Default)]
struct Signed {
    /// The key id.
    by: Option<String>,
    /// The trusted public key (base64), for `atlas update`.
    key: Option<String>,
    /// The signature's trusted comment (`atlas-bundle name=… version=… sha256=…`).
    comment: String,
}

/// The outcome of a source that has nothing new.
fn up_to_date(home: &Home, rec: Record) -> Outcome {
    Outcome {
        path: home.dir(&rec.name).join(&rec.version),
        name: rec.name,
        version: rec.version,
        changed: false,
        signed_by: rec.signed_by,
        previous: None,
        transfer: None,
    }
}

/// With `expect_name` (an update of NAME), the source must hold NAME.
fn check_name(opts: &Options, got: &str, source: &Source) -> Result<()> {
    match &opts.expect_name {
        Some(want) if want != got => Err(Error::DataCorruption(format!(
            "{source}: the source now holds bundle {}, not {want}; nothing was installed (reinstall {want} from its own source)",
            crate::short(got)
        ))),
        _ => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
fn unpack_and_commit(
    home: &Home,
    lock: Option<crate::home::NameLock>,
    archive: &Path,
    staging: &Path,
    source: &Source,
    r: &Resolved,
    opts: &Options,
    signed: Signed,
) -> Result<Outcome> {
    let x = crate::archive::extract(archive, staging, &opts.limits)?;
    let m = atlas_runtime::manifest::verify(&x.root).map_err(|e| {
        Error::DataCorruption(format!(
            "{source}: the unpacked bundle does not match its manifest ({e}); nothing was installed"
        ))
    })?;
    crate::check_component("bundle", &m.name)?;
    crate::check_component("version", &m.version)?;
    if m.name != x.top {
        return Err(Error::DataCorruption(format!(
            "{source}: the archive's folder {:?} is not the manifest's name {:?}",
            x.top, m.name
        )));
    }
    if signed.by.is_some() {
        check_signed_comment(&signed.comment, &m.name, &m.version, &source.to_string())?;
    }
    check_name(opts, &m.name, source)?;
    let lock = match lock {
        Some(l) => l,
        None => home.lock(&m.name)?,
    };
    // An update moves `current` forward only; a package version goes in beside the
    // others, and `current` stays on the newest.
    let switch = match opts.beside {
        true => home.check_forward(&m.name, &m.version, &m.created, opts.allow_downgrade).is_ok(),
        false => home.check_forward(&m.name, &m.version, &m.created, opts.allow_downgrade).map(|()| true)?,
    };
    let record = Record {
        name: m.name.clone(),
        version: m.version.clone(),
        source: source.to_string(),
        sha256: r.sha256.clone(),
        remote_id: r.remote_id.clone(),
        size: std::fs::metadata(archive).map(|m| m.len()).unwrap_or(0),
        installed: crate::home::now(),
        signed_by: signed.by.clone(),
        trust: signed.key,
        created: m.created.clone(),
    };
    let c = match switch {
        true => home.commit(&lock, &x.root, &record, opts.keep)?,
        false => home.commit_beside(&lock, &x.root, &record, opts.keep)?,
    };
    Ok(Outcome {
        changed: c.changed,
        name: m.name,
        version: m.version,
        path: c.path,
        signed_by: signed.by,
        previous: c.previous,
        transfer: None,
    })
}

async fn store_open(store: &Store, path: &object_store::path::Path, offset: u64) -> Result<Opened> {
    use futures_util::StreamExt as _;
    let opts = object_store::GetOptions {
        range: (offset > 0).then_some(object_store::GetRange::Offset(offset)),
        ..Default::default()
    };
    let r = store.store.get_opts(path, opts).await.map_err(|e| match e {
        object_store::Error::NotFound { .. } => Error::NotFound(format!(
            "{}/{path}: not found (latest.json names an archive the store does not hold)",
            store.url
        )),
        e => crate::remote(format!("{}/{path}", store.url), e),
    })?;
    let total = Some(r.meta.size);
    let start = r.range.start;
    let stream = r.into_stream().map(|b| b.map_err(fetch::StreamError::from));
    Ok(Opened { stream: Box::pin(stream), start, total })
}
