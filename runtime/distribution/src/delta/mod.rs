//! Delta updates from object storage. `publish` puts every file of a bundle beside the
//! archive, content-addressed and compressed: `<name>/files/<blake3>.zst`, shared by
//! all versions. `atlas update` then reads the new version's `manifest.json` (its
//! sha256 from `latest.json`, its signature when a key is trusted), hard-links each
//! file the installed version already holds with the same blake3, fetches only the
//! others (each checked against the manifest as it is written, and capped at its
//! listed size), verifies the whole folder, and switches `current` atomically: the
//! same commit as a full install. A source without the per-file layout, or missing a
//! file, falls back to the archive, and so does a delta that would move more bytes
//! than the archive.
//!
//! A file over [`PIECES_OVER`] bytes (64 KiB) is published as content-defined pieces (a gear
//! rolling hash cuts it where its content says, so an insertion moves the cuts of one
//! piece, not of every piece after it) with a recipe, `<blake3>.pieces.json`: an
//! update fetches the pieces its installed copy of the file lacks. `embeddings.npy`
//! gains a few rows when a page changes; its other rows are reused.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use atlas_runtime::manifest::Manifest;
use minisign::PublicKey;
use object_store::ObjectStoreExt as _;
use object_store::path::Path as ObjPath;

mod pieces;

pub use pieces::{PIECES_OVER, Piece, cut_points, parse_recipe};
use pieces::{pieces, recipe_name};

use crate::home::{Home, Record};
use crate::latest::Latest;
use crate::outcome::Outcome;
pub use crate::outcome::Transfer;
use crate::store::Store;
use crate::{Error, Result, io, sign};

/// The folder beside the versions that holds every published file.
pub const FILES: &str = "files";

/// The object of a file's (or a piece's) content.
pub fn object_name(blake3: &str) -> String {
    format!("{blake3}.zst")
}

/// Publishing: the archive's files not yet under `<name>/files/`, compressed, then
/// uploaded. Returns how many were uploaded.
pub async fn publish_files(store: &Store, name: &str, archive: &Path, manifest: &Manifest) -> Result<usize> {
    use futures_util::StreamExt as _;
    let files_dir = store.path(&[name, FILES]);
    let mut have = std::collections::HashSet::new();
    let mut listing = store.store.list(Some(&files_dir));
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| crate::remote(format!("{}: listing {files_dir}", store.url), e))?;
        if let Some(f) = meta.location.filename() {
            have.insert(f.to_owned());
        }
    }
    let want: HashMap<&str, &str> = manifest
        .artifacts
        .iter()
        .filter(|a| !have.contains(&object_name(&a.blake3)) && !have.contains(&recipe_name(&a.blake3)))
        .map(|a| (a.path.as_str(), a.blake3.as_str()))
        .collect();
    if want.is_empty() {
        return Ok(0);
    }
    // Compressed to a scratch folder first (the archive is read once, synchronously),
    // then uploaded.
    let scratch = tempfile::tempdir().map_err(io("a scratch folder"))?;
    let mut staged: Vec<(String, PathBuf)> = Vec::new();
    let mut stage = |obj: String, bytes: &[u8]| -> Result<()> {
        if have.contains(&obj) || staged.iter().any(|(o, _)| *o == obj) {
            return Ok(());
        }
        let out = scratch.path().join(&obj);
        let z = if obj.ends_with(".json") { bytes.to_vec() } else { zstd::encode_all(bytes, 3).map_err(io(&out))? };
        std::fs::write(&out, z).map_err(io(&out))?;
        staged.push((obj, out));
        Ok(())
    };
    {
        let f = std::fs::File::open(archive).map_err(io(archive))?;
        let dec = zstd::stream::Decoder::new(f).map_err(io(archive))?;
        let mut tar = tar::Archive::new(dec);
        let corrupt = |e: std::io::Error| Error::DataCorruption(format!("{}: {e}", archive.display()));
        for entry in tar.entries().map_err(corrupt)? {
            let mut entry = entry.map_err(corrupt)?;
            let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let Some(b3) = path.split_once('/').and_then(|(_, rel)| want.get(rel)) else { continue };
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).map_err(corrupt)?;
            if data.len() as u64 > PIECES_OVER {
                let ps = pieces(&data);
                for (piece, range) in &ps {
                    stage(object_name(&piece.blake3), &data[range.clone()])?;
                }
                let recipe: Vec<&Piece> = ps.iter().map(|(p, _)| p).collect();
                stage(recipe_name(b3), &serde_json::to_vec(&recipe).expect("plain data"))?;
            } else {
                stage(object_name(b3), &data)?;
            }
        }
    }
    // Pieces and small files first, recipes last: a recipe never names a missing piece.
    staged.sort_by_key(|(o, _)| o.ends_with(".json"));
    for (obj, file) in &staged {
        store.put_file(&store.path(&[name, FILES, obj]), file).await?;
    }
    Ok(staged.len())
}

/// How one file of the new version is obtained.
enum Get {
    /// The installed version holds it: a hard link.
    Link(PathBuf),
    /// One object.
    Whole(ObjPath),
    /// Pieces, each from the installed file at this path (its byte range) or fetched.
    Pieces(Vec<(Piece, Option<std::ops::Range<usize>>)>, Option<PathBuf>),
}

/// What an update is asked: move the installed `base` (the current version of
/// `latest.name`, its lock held) to `latest`, from the per-file layout under `dir`.
#[derive(Debug)]
pub struct Request<'a> {
    pub home: &'a Home,
    pub lock: &'a crate::home::NameLock,
    pub store: &'a Store,
    pub dir: &'a ObjPath,
    pub latest: &'a Latest,
    pub base: &'a Record,
    pub keys: &'a [PublicKey],
    /// The source as the user named it, for messages and the install record.
    pub source: &'a str,
    pub opts: &'a crate::outcome::Options,
}

/// The new version's manifest, checked against `latest.json` (and its signature).
struct Checked {
    bytes: Vec<u8>,
    manifest: Manifest,
    signed_by: Option<(String, String)>,
}

/// How each file of the new version is obtained, and what reading the plan cost.
struct Plan {
    gets: Vec<Get>,
    transfer: Transfer,
}

/// Updates the installed base to the new version in three phases: **plan** (the new
/// manifest, checked; what each file takes; the bytes to fetch), **fetch** (each file
/// into a staging folder, linked, pieced or downloaded, checked as it is written), and
/// **verify** (the whole folder against the manifest, then the same commit as a full
/// install). `Ok(None)`: the source cannot give a delta (an older publish, a file
/// missing, or more bytes than the archive); the caller downloads the archive instead.
pub async fn update(req: &Request<'_>) -> Result<Option<(Outcome, Transfer)>> {
    let Some(new) = checked_manifest(req).await? else { return Ok(None) };
    let Some(plan) = plan(req, &new).await? else { return Ok(None) };
    let staging = req.home.staging()?;
    let result = async {
        let root = staging.join(&new.manifest.name);
        let transfer = fetch(req, &new.manifest, plan, &root).await?;
        verify_and_commit(req, &new, &root, transfer).map(Some)
    }
    .await;
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// Plan, first step: the new version's manifest, when the source publishes files,
/// its sha256 that of `latest.json`, its signature good when a key is trusted.
async fn checked_manifest(req: &Request<'_>) -> Result<Option<Checked>> {
    let (latest, source) = (req.latest, req.source);
    let Some(manifest_sha) = latest.manifest_sha256.as_deref().filter(|_| latest.files) else { return Ok(None) };
    if !req.keys.is_empty() && latest.manifest_signature.is_none() {
        // Signed archive, unsigned manifest: the archive's signature is the check.
        return Ok(None);
    }
    let mpath = req.dir.clone().join(latest.version.as_str()).join("manifest.json");
    let Some(bytes) = req.store.get_small(&mpath, atlas_runtime::manifest::MAX_MANIFEST_BYTES).await? else {
        return Ok(None);
    };
    let got = atlas_runtime::hash::sha256_bytes(&bytes);
    if got != manifest_sha {
        return Err(Error::DataCorruption(format!(
            "{source}: manifest.json of {} has sha256 {got}, latest.json says {manifest_sha}; nothing was installed",
            latest.version
        )));
    }
    let signed_by = check_signature(req.keys, latest, &bytes, source)?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::DataCorruption(format!("{source}: unreadable manifest.json ({e})")))?;
    if manifest.name != latest.name || manifest.version != latest.version {
        return Err(Error::DataCorruption(format!(
            "{source}: manifest.json is {} {}, latest.json says {} {}",
            manifest.name, manifest.version, latest.name, latest.version
        )));
    }
    Ok(Some(Checked { bytes, manifest, signed_by }))
}

/// `root/rel` for a name from the source's manifest or recipes.
fn inside(source: &str, root: &Path, rel: &str) -> Result<PathBuf> {
    atlas_runtime::safe_path::join_inside(root, rel).map_err(|e| Error::DataCorruption(format!("{source}: {e}")))
}

/// Plan, second step: per file a link to the installed copy, one object, or pieces
/// (each from the installed file or fetched); `None` when an object is not published
/// or the delta would move as many bytes as the archive.
async fn plan(req: &Request<'_>, new: &Checked) -> Result<Option<Plan>> {
    let (store, source) = (req.store, req.source);
    let mut transfer =
        Transfer { fetched_bytes: new.bytes.len() as u64, archive_bytes: req.latest.size, ..Transfer::default() };
    let old_dir = req.home.dir(&req.base.name).join(&req.base.version);
    let old = atlas_runtime::manifest::read_manifest(&old_dir)?;
    let by_hash: HashMap<&str, &str> = old.artifacts.iter().map(|a| (a.blake3.as_str(), a.path.as_str())).collect();
    let files = req.dir.clone().join(FILES);
    let mut gets = Vec::with_capacity(new.manifest.artifacts.len());
    let mut to_fetch: Vec<ObjPath> = Vec::new();
    for a in &new.manifest.artifacts {
        if let Some(from) = by_hash.get(a.blake3.as_str()) {
            gets.push(Get::Link(inside(source, &old_dir, from)?));
            continue;
        }
        let recipe = match a.size > PIECES_OVER {
            true => store.get_small(&files.clone().join(recipe_name(&a.blake3).as_str()), 64 << 20).await?,
            false => None,
        };
        let Some(recipe) = recipe else {
            let obj = files.clone().join(object_name(&a.blake3).as_str());
            to_fetch.push(obj.clone());
            gets.push(Get::Whole(obj));
            continue;
        };
        transfer.fetched_bytes = transfer.fetched_bytes.saturating_add(recipe.len() as u64);
        let listed = parse_recipe(&recipe, a.size)
            .map_err(|why| Error::DataCorruption(format!("{source}: the recipe of {} {why}", a.path)))?;
        // The installed file at the same path, cut the same way.
        let local_path = old.artifact(&a.path).map(|_| inside(source, &old_dir, &a.path)).transpose()?;
        let local: HashMap<String, std::ops::Range<usize>> = match &local_path {
            Some(p) => pieces(&std::fs::read(p).map_err(io(p))?).into_iter().map(|(p, r)| (p.blake3, r)).collect(),
            None => HashMap::new(),
        };
        let mut ps = Vec::with_capacity(listed.len());
        for p in listed {
            let have = local.get(&p.blake3).cloned();
            if have.is_none() {
                to_fetch.push(files.clone().join(object_name(&p.blake3).as_str()));
            }
            ps.push((p, have));
        }
        gets.push(Get::Pieces(ps, local_path));
    }
    to_fetch.sort();
    to_fetch.dedup();
    let mut planned = transfer.fetched_bytes;
    for obj in &to_fetch {
        match store.store.head(obj).await {
            Ok(meta) => planned = planned.saturating_add(meta.size),
            Err(object_store::Error::NotFound { .. }) => {
                eprintln!("atlas: {source}: {obj} is not published; downloading the archive");
                return Ok(None);
            }
            Err(e) => return Err(crate::remote(format!("{}/{obj}", store.url), e)),
        }
    }
    if planned >= req.latest.size {
        eprintln!(
            "atlas: {source}: the changed files come to {planned} bytes, the archive to {}; downloading the archive",
            req.latest.size
        );
        return Ok(None);
    }
    Ok(Some(Plan { gets, transfer }))
}

/// Fetch: every file of `manifest` under `root` as the plan says, each checked
/// against its size and blake3 as it is written.
async fn fetch(req: &Request<'_>, manifest: &Manifest, plan: Plan, root: &Path) -> Result<Transfer> {
    let Plan { gets, mut transfer } = plan;
    let files = req.dir.clone().join(FILES);
    for (a, get) in manifest.artifacts.iter().zip(gets) {
        let to = inside(req.source, root, &a.path)?;
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        match get {
            Get::Link(from) => {
                if std::fs::hard_link(&from, &to).is_err() {
                    std::fs::copy(&from, &to).map_err(io(&to))?;
                }
                transfer.reused_files += 1;
            }
            Get::Whole(obj) => {
                let mut out = Written::create(&to, a.size)?;
                let got = fetch_into(req.store, &obj, &mut out).await?;
                transfer.fetched_bytes = transfer.fetched_bytes.saturating_add(got);
                out.finish(a)?;
                transfer.fetched_files += 1;
            }
            Get::Pieces(ps, local) => {
                let local = match local {
                    Some(p) => std::fs::read(&p).map_err(io(&p))?,
                    None => Vec::new(),
                };
                let mut out = Written::create(&to, a.size)?;
                for (p, have) in ps {
                    match have {
                        Some(r) => out.put(&local[r])?,
                        None => {
                            // Streamed to the file as it comes, the piece hashed on the way.
                            let obj = files.clone().join(object_name(&p.blake3).as_str());
                            out.begin_piece(p.size);
                            let got = fetch_into(req.store, &obj, &mut out).await?;
                            transfer.fetched_bytes = transfer.fetched_bytes.saturating_add(got);
                            out.end_piece(&p.blake3, &obj)?;
                        }
                    }
                }
                out.finish(a)?;
                transfer.fetched_files += 1;
            }
        }
    }
    Ok(transfer)
}

/// Verify: the staged folder against the manifest (linked files too: an installed
/// file changed on disk is caught here), forward-only, then the commit.
fn verify_and_commit(req: &Request<'_>, new: &Checked, root: &Path, transfer: Transfer) -> Result<(Outcome, Transfer)> {
    let (m, source) = (&new.manifest, req.source);
    std::fs::write(root.join("manifest.json"), &new.bytes).map_err(io(root.join("manifest.json")))?;
    atlas_runtime::manifest::verify(root).map_err(|e| {
        Error::DataCorruption(format!(
            "{source}: the updated bundle does not match its manifest ({e}); nothing was installed"
        ))
    })?;
    let record = Record {
        name: m.name.clone(),
        version: m.version.clone(),
        source: source.to_owned(),
        sha256: req.latest.sha256.clone(),
        remote_id: None,
        size: req.latest.size,
        installed: crate::home::now(),
        signed_by: new.signed_by.as_ref().map(|(id, _)| id.clone()),
        trust: new.signed_by.as_ref().map(|(_, k)| k.clone()),
        created: m.created.clone(),
    };
    req.home.check_forward(&m.name, &m.version, &m.created, req.opts.allow_downgrade)?;
    let c = req.home.commit(req.lock, root, &record, req.opts.keep)?;
    let outcome = Outcome {
        name: m.name.clone(),
        version: m.version.clone(),
        path: c.path,
        changed: c.changed,
        signed_by: record.signed_by,
        previous: c.previous,
        transfer: None,
    };
    Ok((outcome, transfer))
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
            Ok(comment) => {
                crate::latest::check_signed_comment(&comment, &latest.name, &latest.version, source)?;
                return Ok(Some((sign::key_id(k), k.to_base64())));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::Signature("no trusted key".into())))
}

/// Where fetched bytes go: a file, hashed as written and capped at the size the
/// manifest lists; within it, a piece, hashed and capped at the recipe's size.
struct Written {
    file: std::fs::File,
    path: PathBuf,
    hasher: atlas_runtime::hash::Blake3,
    written: u64,
    cap: u64,
    /// The piece being fetched: its hasher, bytes so far, and listed size.
    piece: Option<(atlas_runtime::hash::Blake3, u64, u64)>,
}

impl Written {
    fn create(to: &Path, cap: u64) -> Result<Written> {
        let file = std::fs::File::create(to).map_err(io(to))?;
        Ok(Written {
            file,
            path: to.to_owned(),
            hasher: atlas_runtime::hash::Blake3::new(),
            written: 0,
            cap,
            piece: None,
        })
    }

    /// The bytes a fetch into this writer may still produce.
    fn room(&self) -> u64 {
        match &self.piece {
            Some((_, n, cap)) => cap - n,
            None => self.cap - self.written,
        }
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        let len = b.len() as u64;
        if len > self.room() {
            return Err(Error::DataCorruption(format!(
                "a fetched file unpacks past the {} bytes listed for it; nothing was installed",
                self.piece.as_ref().map_or(self.cap, |p| p.2)
            )));
        }
        self.written += len;
        self.hasher.update(b);
        if let Some((h, n, _)) = &mut self.piece {
            h.update(b);
            *n += len;
        }
        self.file.write_all(b).map_err(io(self.path.as_path()))
    }

    fn begin_piece(&mut self, size: u64) {
        self.piece = Some((atlas_runtime::hash::Blake3::new(), 0, size));
    }

    /// The piece just fetched is whole and hashes to `blake3`.
    fn end_piece(&mut self, blake3: &str, obj: &ObjPath) -> Result<()> {
        let Some((h, n, cap)) = self.piece.take() else { return Ok(()) };
        let got = h.hex();
        if n != cap || got != blake3 {
            return Err(Error::DataCorruption(format!(
                "{obj} does not match the manifest's recipe (blake3 {got}, listed {blake3}); nothing was installed"
            )));
        }
        Ok(())
    }

    /// The file is whole and matches the manifest.
    fn finish(self, a: &atlas_runtime::manifest::Artifact) -> Result<()> {
        let got = self.hasher.hex();
        if self.written != a.size || got != a.blake3 {
            return Err(Error::DataCorruption(format!(
                "{} does not match the manifest (blake3 {got}, listed {}); nothing was installed",
                a.path, a.blake3
            )));
        }
        self.file.sync_all().map_err(io(self.path))
    }
}

impl std::io::Write for Written {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.put(b).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Fetches one compressed object into `out`, decompressing as it streams in (never
/// whole in memory). Returns the compressed bytes read.
async fn fetch_into(store: &Store, obj: &ObjPath, out: &mut Written) -> Result<u64> {
    use futures_util::StreamExt as _;
    let url = &store.url;
    let r = store.store.get(obj).await.map_err(|e| crate::remote(format!("{url}/{obj}"), e))?;
    // A compressed object is never much larger than its content.
    let room = out.room();
    let limit = room.saturating_add(room / 64).saturating_add(1024);
    if r.meta.size > limit {
        return Err(Error::DataCorruption(format!("{url}/{obj}: {} bytes for {room} bytes of content", r.meta.size)));
    }
    let corrupt = |e: std::io::Error| Error::DataCorruption(format!("{url}/{obj}: {e}"));
    let mut stream = r.into_stream();
    let mut dec = zstd::stream::write::Decoder::new(&mut *out).map_err(corrupt)?;
    let mut read = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| crate::remote(format!("{url}/{obj}"), e))?;
        read = read.saturating_add(chunk.len() as u64);
        if read > limit {
            return Err(Error::DataCorruption(format!("{url}/{obj}: more bytes than the store listed")));
        }
        dec.write_all(&chunk).map_err(corrupt)?;
    }
    dec.flush().map_err(corrupt)?;
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::pieces::{PIECE_MAX, PIECE_MIN};
    use super::*;

    #[test]
    fn a_recipe_whose_sizes_wrap_or_pass_the_piece_maximum_is_refused() {
        let h = "a".repeat(64);
        let recipe = |sizes: &[u64]| {
            serde_json::to_vec(&sizes.iter().map(|&size| Piece { blake3: h.clone(), size }).collect::<Vec<_>>())
                .unwrap()
        };
        assert!(parse_recipe(&recipe(&[u64::MAX, 100_001]), 100_000).is_err(), "the wrapping sum");
        assert!(parse_recipe(&recipe(&[PIECE_MAX as u64 + 1]), PIECE_MAX as u64 + 1).is_err());
        assert!(parse_recipe(&recipe(&[0, 10]), 10).is_err());
        assert!(parse_recipe(&recipe(&[60_000, 40_000]), 100_000).is_ok());
        let bad_name = serde_json::to_vec(&[Piece { blake3: "../x".into(), size: 10 }]).unwrap();
        assert!(parse_recipe(&bad_name, 10).is_err());
    }

    proptest::proptest! {
        /// Any bytes and any claimed size: refused or a recipe that adds up exactly,
        /// every piece within the maximum, never a panic.
        #[test]
        fn recipes_from_the_store_add_up_or_are_refused(
            sizes in proptest::collection::vec(proptest::num::u64::ANY, 0..8),
            size in proptest::num::u64::ANY,
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let h = "b".repeat(64);
            let pieces: Vec<Piece> = sizes.iter().map(|&size| Piece { blake3: h.clone(), size }).collect();
            for bytes in [serde_json::to_vec(&pieces).unwrap(), junk] {
                if let Ok(ps) = parse_recipe(&bytes, size) {
                    proptest::prop_assert!(ps.iter().all(|p| p.size >= 1 && p.size <= PIECE_MAX as u64));
                    proptest::prop_assert_eq!(ps.iter().map(|p| u128::from(p.size)).sum::<u128>(), u128::from(size));
                }
            }
        }
    }

    #[test]
    fn cuts_follow_content_so_an_insertion_moves_few_pieces() {
        let mut rng = 7u64;
        let data: Vec<u8> = (0..2_000_000)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        let a = pieces(&data);
        assert!(a.iter().all(|(p, _)| p.size as usize <= PIECE_MAX));
        assert!(a.iter().rev().skip(1).all(|(p, _)| p.size as usize >= PIECE_MIN));
        assert_eq!(a.iter().map(|(p, _)| p.size).sum::<u64>(), data.len() as u64);
        let avg = data.len() / a.len();
        assert!((16 << 10..64 << 10).contains(&avg), "average piece {avg}");
        // 1,000 bytes inserted a third of the way in.
        let mut edited = data[..700_000].to_vec();
        edited.extend(std::iter::repeat_n(9u8, 1000));
        edited.extend_from_slice(&data[700_000..]);
        let b = pieces(&edited);
        let old: std::collections::HashSet<&str> = a.iter().map(|(p, _)| p.blake3.as_str()).collect();
        let new = b.iter().filter(|(p, _)| !old.contains(p.blake3.as_str())).count();
        assert!(new <= 2, "{new} of {} pieces changed", b.len());
    }
}
