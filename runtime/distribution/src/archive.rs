//! The bundle archive, `<name>-<version>.tar.zst`: every file under `<name>/`, sorted,
//! with fixed metadata (so equal bundles give equal bytes), and its safe extractor.
//!
//! The extractor is written on the `tar` crate's entry API (never `unpack`): it accepts
//! regular files and folders only, refuses any path that is absolute, holds `..` or
//! would land outside the target, refuses duplicates, and stops at the first limit it
//! passes (total bytes, bytes per file, entries, compression ratio), so a zstd bomb
//! stops after a few megabytes, not after filling the disk. It checks the whole archive
//! before it writes the first file.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use atlas_runtime::failpoint;
use atlas_runtime::safe_path::{self, Refusal};

use crate::{Error, Result, io};

/// What one archive entry holds.
#[derive(Debug)]
pub enum Entry {
    /// These bytes.
    Bytes(Vec<u8>),
    /// The file at this path, streamed when its turn comes (never read whole): a
    /// backup of an installed bundle costs a buffer, whatever its files' sizes.
    File(PathBuf),
}

/// Writes the archive of `files` (bundle-relative path → what it holds, any order)
/// under `<name>/` to `out`.
pub fn write<W: Write>(out: W, name: &str, level: i32, mut files: Vec<(String, Entry)>) -> Result<W> {
    let enc = zstd::stream::Encoder::new(out, level).map_err(io("zstd"))?;
    let mut tar = tar::Builder::new(enc);
    tar.mode(tar::HeaderMode::Deterministic);
    files.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, entry) in files {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        let at = format!("{name}/{path}");
        match entry {
            Entry::Bytes(bytes) => {
                h.set_size(bytes.len() as u64);
                h.set_cksum();
                tar.append_data(&mut h, at, bytes.as_slice()).map_err(io(path))?;
            }
            Entry::File(file) => {
                let f = std::fs::File::open(&file).map_err(io(&file))?;
                let len = f.metadata().map_err(io(&file))?.len();
                h.set_size(len);
                h.set_cksum();
                // A file that shrinks while it is read fails the entry (the tar
                // crate checks the count); one that grows is cut at its size.
                tar.append_data(&mut h, at, f.take(len)).map_err(io(&file))?;
            }
        }
    }
    let enc = tar.into_inner().map_err(io("tar"))?;
    enc.finish().map_err(io("zstd"))
}

/// What the extractor allows. The defaults hold any real bundle with room to spare.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Bytes unpacked in all (file contents and tar headers).
    pub max_unpacked_bytes: u64,
    /// Bytes of one file.
    pub max_file_bytes: u64,
    /// Entries (files and folders).
    pub max_entries: u64,
    /// Unpacked bytes per compressed byte read, checked once past `ratio_floor_bytes`.
    pub max_ratio: u64,
    /// Bytes that may unpack before the ratio is checked.
    pub ratio_floor_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_unpacked_bytes: 32 << 30,
            max_file_bytes: 8 << 30,
            max_entries: 250_000,
            max_ratio: 100,
            ratio_floor_bytes: 32 << 20,
        }
    }
}

/// What an extraction produced: the archive's one top folder, unpacked under the target.
#[derive(Debug)]
pub struct Extracted {
    /// `target/<top>`: the bundle folder.
    pub root: PathBuf,
    pub top: String,
    pub files: u64,
    pub bytes: u64,
    /// The link entries left out, by their names in the archive (only with
    /// [`Links::Skip`]; with [`Links::Refuse`] a link fails the extraction).
    pub skipped_links: Vec<String>,
}

/// What the extractor does with a symlink or hard link entry. Neither is ever
/// followed nor made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// The archive is refused: a bundle holds regular files and folders only.
    Refuse,
    /// The entry is left out and named in [`Extracted::skipped_links`]; the rest is
    /// unpacked. For a published package, where one link (an sdist's `docs` link, say)
    /// must not cost the whole package.
    Skip,
}

/// Unpacks the tar.zst `archive` into the empty folder `target`, entry by entry, under
/// `limits`. Every entry must sit under one top folder (the bundle's name).
///
/// Two passes: the first reads the whole stream and checks every entry (names, kinds,
/// duplicates, counts, sizes, ratio) writing nothing, so a hostile archive costs a read,
/// never a quarter of a million files on disk; the second writes.
pub fn extract(archive: &Path, target: &Path, limits: &Limits) -> Result<Extracted> {
    extract_as(archive, target, limits, Compression::Zstd)
}

/// How an archive's tar stream is compressed: a bundle's with zstd, a published
/// package's (`.crate`, an npm tarball, an sdist) with gzip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Gzip,
}

/// [`extract`] for an archive compressed as `compression`, with the same checks: one
/// top folder, regular files and folders only, every limit.
pub fn extract_as(archive: &Path, target: &Path, limits: &Limits, compression: Compression) -> Result<Extracted> {
    extract_with(archive, target, limits, compression, Links::Refuse)
}

/// [`extract_as`] with a choice of what a link entry does: refuse the archive, or be
/// left out and named ([`Links`]). Every other check is the same.
pub fn extract_with(
    archive: &Path,
    target: &Path,
    limits: &Limits,
    compression: Compression,
    links: Links,
) -> Result<Extracted> {
    walk(archive, limits, None, compression, links)?;
    walk(archive, limits, Some(target), compression, links)
}

/// One pass over the archive: checks every entry, and writes it under `target` when
/// there is one.
fn walk(
    archive: &Path,
    limits: &Limits,
    target: Option<&Path>,
    compression: Compression,
    links: Links,
) -> Result<Extracted> {
    let file = std::fs::File::open(archive).map_err(io(archive))?;
    let counting = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let reader = CountingShared { inner: std::io::BufReader::new(file), read: counting.clone() };
    let decoder: Box<dyn Read> = match compression {
        Compression::Zstd => Box::new(zstd::stream::Decoder::new(reader).map_err(io(archive))?),
        Compression::Gzip => Box::new(flate2::bufread::GzDecoder::new(reader)),
    };
    // Every decompressed byte (headers, long names, PAX records, file data) passes the
    // guard, so no part of the stream can unpack past the limits, in memory or on disk.
    let unpacked = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let tripped = std::rc::Rc::new(std::cell::RefCell::new(None));
    let guard = Guard {
        inner: decoder,
        packed: counting,
        unpacked: unpacked.clone(),
        tripped: tripped.clone(),
        limits: *limits,
    };
    let mut tar = tar::Archive::new(guard);
    let corrupt = |e: std::io::Error| match tripped.borrow().clone() {
        Some(why) => Error::UnsafeArchive(why),
        None => Error::DataCorruption(format!("{}: the archive is truncated or corrupt ({e})", archive.display())),
    };
    let mut seen = BTreeSet::new();
    let mut top: Option<String> = None;
    let (mut entries, mut files) = (0u64, 0u64);
    let mut skipped_links = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    for entry in tar.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        entries += 1;
        if entries > limits.max_entries {
            return Err(Error::UnsafeArchive(format!("more than {} entries", limits.max_entries)));
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        let (top_name, rel) = entry_path(&raw).map_err(|why| Error::UnsafeArchive(format!("entry {shown:?} {why}")))?;
        match &top {
            None => top = Some(top_name.clone()),
            Some(t) if *t != top_name => {
                return Err(Error::UnsafeArchive(format!(
                    "entry {shown:?} is outside the bundle folder {t:?} (one top folder per archive)"
                )));
            }
            Some(_) => {}
        }
        if !seen.insert(rel.clone()) {
            return Err(Error::UnsafeArchive(format!("entry {shown:?} appears twice")));
        }
        let dest = target.map(|t| t.join(&top_name).join(&rel));
        match kind {
            tar::EntryType::Directory => {
                if let Some(dest) = &dest {
                    std::fs::create_dir_all(dest).map_err(io(dest))?;
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous if rel.as_os_str().is_empty() => {
                return Err(Error::UnsafeArchive(format!(
                    "entry {shown:?} is a file where the bundle folder should be"
                )));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(corrupt)?;
                if size > limits.max_file_bytes {
                    return Err(Error::UnsafeArchive(format!(
                        "entry {shown:?} is {size} bytes, more than the {} allowed per file",
                        limits.max_file_bytes
                    )));
                }
                if unpacked.get().saturating_add(size) > limits.max_unpacked_bytes {
                    return Err(Error::UnsafeArchive(format!(
                        "it unpacks to more than {} bytes",
                        limits.max_unpacked_bytes
                    )));
                }
                let mut out = match &dest {
                    Some(dest) => {
                        if let Some(parent) = dest.parent() {
                            std::fs::create_dir_all(parent).map_err(io(parent))?;
                        }
                        // create_new: a name seen twice under another spelling never overwrites.
                        Some(std::fs::OpenOptions::new().write(true).create_new(true).open(dest).map_err(io(dest))?)
                    }
                    None => None,
                };
                let mut written = 0u64;
                loop {
                    let n = entry.read(&mut buf).map_err(corrupt)?;
                    if n == 0 {
                        break;
                    }
                    written += n as u64;
                    if let (Some(out), Some(dest)) = (&mut out, &dest) {
                        if failpoint::armed("extract-enospc", None).is_some_and(|n| written > n) {
                            let full = std::io::Error::new(
                                std::io::ErrorKind::StorageFull,
                                "No space left on device (failpoint)",
                            );
                            return Err(Error::Io { path: "ATLAS_HOME/bundles".into(), error: full });
                        }
                        out.write_all(&buf[..n]).map_err(io(dest))?;
                        failpoint::abort_at("extract-abort", None, files);
                    }
                }
                if written != size {
                    return Err(corrupt(std::io::Error::other(format!("{shown}: {written} of {size} bytes"))));
                }
                if let (Some(out), Some(dest)) = (out, &dest) {
                    out.sync_all().map_err(io(dest))?;
                }
                files += 1;
            }
            tar::EntryType::Symlink | tar::EntryType::Link if links == Links::Skip => {
                skipped_links.push(shown);
            }
            other => {
                return Err(Error::UnsafeArchive(format!(
                    "entry {shown:?} is a {}; only regular files and folders are accepted",
                    kind_name(other)
                )));
            }
        }
    }
    // Trailing bytes after the tar's end blocks are read to the end of the zstd frame,
    // so a truncated frame is still caught.
    let mut rest = tar.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(corrupt)?;
    let top = top.ok_or_else(|| Error::DataCorruption(format!("{}: the archive is empty", archive.display())))?;
    let root = target.unwrap_or(Path::new("")).join(&top);
    Ok(Extracted { root, top, files, bytes: unpacked.get(), skipped_links })
}

/// Counts the decompressed bytes and fails the read that passes a limit: the total,
/// or the ratio to the compressed bytes read (past the floor). The reason is kept for
/// the error the caller reports.
struct Guard<R> {
    inner: R,
    packed: std::rc::Rc<std::cell::Cell<u64>>,
    unpacked: std::rc::Rc<std::cell::Cell<u64>>,
    tripped: std::rc::Rc<std::cell::RefCell<Option<String>>>,
    limits: Limits,
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let total = self.unpacked.get() + n as u64;
        self.unpacked.set(total);
        let l = &self.limits;
        let why = if total > l.max_unpacked_bytes {
            Some(format!("it unpacks to more than {} bytes", l.max_unpacked_bytes))
        } else if total > l.ratio_floor_bytes && total / self.packed.get().max(1) > l.max_ratio {
            Some(format!(
                "it unpacks more than {}× its compressed size (a compression bomb?); stopped after {total} bytes",
                l.max_ratio
            ))
        } else {
            None
        };
        match why {
            Some(why) => {
                *self.tripped.borrow_mut() = Some(why.clone());
                Err(std::io::Error::other(why))
            }
            None => Ok(n),
        }
    }
}

/// Counts the compressed bytes the decoder reads.
struct CountingShared<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for CountingShared<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for CountingShared<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.read.set(self.read.get() + amt as u64);
        self.inner.consume(amt);
    }
}

fn kind_name(t: tar::EntryType) -> &'static str {
    match t {
        tar::EntryType::Symlink => "symlink",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char => "character device",
        tar::EntryType::Block => "block device",
        tar::EntryType::Fifo => "FIFO",
        _ => "special entry",
    }
}

/// Splits an entry's raw path into its top folder and the path under it, refusing
/// anything that is not plain relative names.
fn entry_path(raw: &[u8]) -> Result<(String, PathBuf), &'static str> {
    let s = std::str::from_utf8(raw).map_err(|_| "is not UTF-8")?;
    // A tar path never holds a backslash; on Windows it would be a separator.
    if s.contains('\\') || s.contains('\0') {
        return Err("holds a backslash or NUL");
    }
    let parts = safe_path::components(s).map_err(|e| match e.kind {
        Refusal::Absolute => "is an absolute path",
        Refusal::Parent => "holds a '..' component",
        _ => "is not a plain relative path",
    })?;
    let Some((top, rest)) = parts.split_first() else { return Err("is empty") };
    crate::check_component("the bundle folder", top).map_err(|_| "has a top folder that is not a bundle name")?;
    Ok(((*top).to_owned(), rest.iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(dir: &Path, files: &[(&str, Vec<u8>)]) -> PathBuf {
        let entries = files.iter().map(|(p, b)| ((*p).to_owned(), Entry::Bytes(b.clone()))).collect();
        let bytes = write(Vec::new(), "b", 3, entries).unwrap();
        let path = dir.join("b.tar.zst");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_file_entry_is_streamed_and_archives_as_its_bytes_would() {
        let t = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..300_000u32).flat_map(u32::to_le_bytes).collect();
        std::fs::write(t.path().join("big.bin"), &body).unwrap();
        let from_file = write(
            Vec::new(),
            "b",
            3,
            vec![
                ("x.txt".into(), Entry::Bytes(b"x".to_vec())),
                ("big.bin".into(), Entry::File(t.path().join("big.bin"))),
            ],
        )
        .unwrap();
        let from_bytes = write(
            Vec::new(),
            "b",
            3,
            vec![("big.bin".into(), Entry::Bytes(body)), ("x.txt".into(), Entry::Bytes(b"x".to_vec()))],
        )
        .unwrap();
        assert_eq!(from_file, from_bytes, "the same archive, byte for byte");
        let missing = write(Vec::new(), "b", 3, vec![("gone".into(), Entry::File(t.path().join("gone")))]);
        assert!(missing.unwrap_err().to_string().contains("gone"));
    }

    #[test]
    fn each_limit_stops_extraction() {
        let dir = tempfile::tempdir().unwrap();
        let files = [("a.txt", b"hello".to_vec()), ("sub/b.bin", vec![7u8; 4096]), ("c.txt", b"x".to_vec())];
        let a = archive(dir.path(), &files);
        let x = extract(&a, &dir.path().join("ok"), &Limits::default()).unwrap();
        assert_eq!((x.top.as_str(), x.files), ("b", 3));
        assert_eq!(std::fs::read(x.root.join("sub/b.bin")).unwrap(), vec![7u8; 4096]);
        let check = |limits: Limits, needle: &str| {
            let target = dir.path().join(format!("t{}", needle.len()));
            let e = extract(&a, &target, &limits).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle:?} not in {e}");
            assert!(!target.exists(), "{needle}: a refused archive wrote nothing");
        };
        check(Limits { max_entries: 2, ..Limits::default() }, "more than 2 entries");
        check(Limits { max_file_bytes: 1000, ..Limits::default() }, "more than the 1000 allowed per file");
        check(Limits { max_unpacked_bytes: 2000, ..Limits::default() }, "unpacks to more than 2000 bytes");
        check(Limits { max_ratio: 1, ratio_floor_bytes: 100, ..Limits::default() }, "compression bomb");
    }

    #[test]
    fn a_huge_gnu_long_name_stops_at_the_limit_not_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = tar::Builder::new(zstd::stream::Encoder::new(Vec::new(), 1).unwrap());
        let size = 64u64 << 20;
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(size);
        h.set_cksum();
        tar.append(&h, Read::take(std::io::repeat(b'a'), size)).unwrap();
        let path = dir.path().join("long.tar.zst");
        std::fs::write(&path, tar.into_inner().unwrap().finish().unwrap()).unwrap();
        let limits = Limits { ratio_floor_bytes: 1 << 20, ..Limits::default() };
        let e = extract(&path, &dir.path().join("t"), &limits).unwrap_err();
        assert!(matches!(e, Error::UnsafeArchive(_)) && e.to_string().contains("compression bomb"), "{e}");
    }

    #[test]
    fn a_package_skips_its_links_and_names_them_while_a_bundle_refuses_them() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut add = |path: &str, kind: tar::EntryType, link: &str, body: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            if !link.is_empty() {
                h.set_link_name(link).unwrap();
            }
            tar.append_data(&mut h, path, body).unwrap();
        };
        add("pkg-1.0/README.md", tar::EntryType::Regular, "", b"# pkg\n");
        add("pkg-1.0/docs", tar::EntryType::Symlink, victim.to_str().unwrap(), b"");
        add("pkg-1.0/docs/through.md", tar::EntryType::Regular, "", b"not through the link\n");
        add("pkg-1.0/again.md", tar::EntryType::Link, "pkg-1.0/README.md", b"");
        add("pkg-1.0/src/lib.py", tar::EntryType::Regular, "", b"x = 1\n");
        let path = dir.path().join("pkg-1.0.tar.gz");
        std::fs::write(&path, tar.into_inner().unwrap().finish().unwrap()).unwrap();

        let refused = dir.path().join("refused");
        let e = extract_as(&path, &refused, &Limits::default(), Compression::Gzip).unwrap_err();
        assert!(e.to_string().contains("is a symlink; only regular files and folders"), "{e}");
        assert!(!refused.exists(), "a refused archive wrote nothing");

        let x =
            extract_with(&path, &dir.path().join("ok"), &Limits::default(), Compression::Gzip, Links::Skip).unwrap();
        assert_eq!(x.skipped_links, ["pkg-1.0/docs", "pkg-1.0/again.md"]);
        assert_eq!(x.files, 3);
        assert_eq!(std::fs::read_to_string(x.root.join("src/lib.py")).unwrap(), "x = 1\n");
        let docs = std::fs::symlink_metadata(x.root.join("docs")).unwrap();
        assert!(docs.is_dir() && !docs.file_type().is_symlink(), "a link is never made");
        assert!(!x.root.join("again.md").exists());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "nothing written through the link");
    }

    #[test]
    fn entry_paths_are_checked() {
        let check = |raw: &str, expected: Result<(&str, &str), &str>| {
            let got = entry_path(raw.as_bytes());
            let got = got.as_ref().map(|(t, r)| (t.as_str(), r.to_str().unwrap())).map_err(|e| *e);
            assert_eq!(got, expected, "{raw}");
        };
        check("b/manifest.json", Ok(("b", "manifest.json")));
        check("b/./mirror/x.md", Ok(("b", "mirror/x.md")));
        check("b/", Ok(("b", "")));
        check("/etc/passwd", Err("is an absolute path"));
        check("b/../../x", Err("holds a '..' component"));
        check("../x", Err("holds a '..' component"));
        check("b\\..\\x", Err("holds a backslash or NUL"));
        check(".hidden/x", Err("has a top folder that is not a bundle name"));
        check("", Err("is empty"));
    }
}
