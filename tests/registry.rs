//! A local package registry on 127.0.0.1 speaking the subset of cargo's sparse-index
//! protocol Atlas uses (`config.json`, index files, downloads), serving real artifacts:
//! the `.crate` files of the local cargo cache (`~/.cargo/registry/cache`, which every
//! build of this workspace fills). It records every request it receives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::http::{Response, Server};

/// The newest `.crate` of `name` in the local cargo cache, with its version.
pub fn cached_crate(name: &str) -> Option<(String, PathBuf)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut found: Vec<(Vec<u64>, String, PathBuf)> = Vec::new();
    for reg in std::fs::read_dir(home.join("registry/cache")).ok()?.flatten() {
        for f in std::fs::read_dir(reg.path()).into_iter().flatten().flatten() {
            let file = f.file_name().to_string_lossy().into_owned();
            let Some(version) = file.strip_prefix(&format!("{name}-")).and_then(|v| v.strip_suffix(".crate")) else {
                continue;
            };
            let Ok(key) = version.split('.').map(str::parse::<u64>).collect::<Result<Vec<_>, _>>() else { continue };
            found.push((key, version.to_owned(), f.path()));
        }
    }
    found.sort();
    found.pop().map(|(_, v, p)| (v, p))
}

/// One version a registry lists: its bytes (None: listed, never downloadable), and
/// whether it is yanked.
#[derive(Debug, Clone)]
pub struct Published {
    pub name: String,
    pub version: String,
    pub bytes: Option<Vec<u8>>,
    /// The checksum the index states (the bytes' sha256 unless a test lies).
    pub cksum: String,
    pub yanked: bool,
}

impl Published {
    pub fn real(name: &str, version: &str, bytes: Vec<u8>) -> Published {
        let cksum = sha256_hex(&bytes);
        Published { name: name.into(), version: version.into(), bytes: Some(bytes), cksum, yanked: false }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A crate's path in a sparse index.
fn index_path(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// A sparse registry at `/index/` whose downloads are at `/dl/NAME/VERSION/download`;
/// `serve` may replace a download's bytes (a tampering mirror).
pub fn sparse_registry(versions: Vec<Published>, serve: fn(&str, Vec<u8>) -> Vec<u8>) -> Server {
    sparse_registry_with(versions, serve, None, &Seen::default())
}

/// A private sparse registry: its `config.json` (public) says `auth-required`, and
/// every index line and download wants `Authorization: <token>` (cargo's form; 401
/// without it). What it receives is recorded into `seen`.
pub fn private_sparse_registry(versions: Vec<Published>, token: &'static str, seen: &Seen) -> Server {
    sparse_registry_with(versions, |_, b| b, Some(token), seen)
}

fn sparse_registry_with(
    versions: Vec<Published>,
    serve: fn(&str, Vec<u8>) -> Vec<u8>,
    token: Option<&'static str>,
    seen: &Seen,
) -> Server {
    let mut index: HashMap<String, String> = HashMap::new();
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    for v in &versions {
        let line = serde_json::json!({
            "name": v.name, "vers": v.version, "deps": [], "cksum": v.cksum, "features": {}, "yanked": v.yanked,
        });
        let e = index.entry(format!("/index/{}", index_path(&v.name))).or_default();
        e.push_str(&line.to_string());
        e.push('\n');
        if let Some(b) = &v.bytes {
            files.insert(format!("/dl/{}/{}/download", v.name, v.version), serve(&v.name, b.clone()));
        }
    }
    let port = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let base = port.clone();
    let server = recording(seen, move |req| {
        if req.path == "/index/config.json" {
            let dl = format!("{}/dl", base.get().map_or("", String::as_str));
            return Response::new(200, serde_json::json!({ "dl": dl, "auth-required": token.is_some() }).to_string());
        }
        if token.is_some_and(|t| req.header("authorization") != Some(t)) {
            return Response::new(401, "Unauthorized");
        }
        if let Some(lines) = index.get(&req.path) {
            return Response::new(200, lines.clone());
        }
        match files.get(&req.path) {
            Some(b) => Response::new(200, b.clone()),
            None => Response::new(404, "Not Found"),
        }
    });
    let _ = port.set(server.url("").trim_end_matches('/').to_owned());
    server
}

/// A `CARGO_HOME` whose config.toml replaces crates.io with `registry` (cargo's source
/// replacement, as a company mirror does).
pub fn cargo_home(dir: &Path, registry: &Server) -> PathBuf {
    let home = dir.join("cargo-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"mirror\"\n\n[source.mirror]\nregistry = \"sparse+{}\"\n",
            registry.url("/index/")
        ),
    )
    .unwrap();
    home
}

/// What a registry server received: each request's path and its `Authorization`.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A server that records what it receives (path and `Authorization`) into `seen`.
pub fn recording(seen: &Seen, handler: impl Fn(&crate::http::Request) -> Response + Send + Sync + 'static) -> Server {
    let log = seen.clone();
    Server::start(move |req| {
        log.lock().unwrap().push((req.path.clone(), req.header("authorization").map(str::to_owned)));
        handler(req)
    })
}

/// A tar.gz of `files` (path → text) with fixed metadata, as `npm pack` makes one
/// (`package/…`) or an sdist (`name-version/…`).
pub fn tar_gz(files: &[(&str, &str)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        tar.append_data(&mut h, path, text.as_bytes()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn sri_sha512(bytes: &[u8]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(bytes)))
}

/// An npm registry at `/npm/` serving one package (`name`, scoped or not) at
/// `version`, its tarball on `cdn` when given (another origin), else beside the
/// packument; both record what they receive into `seen`.
pub fn npm_registry(
    name: &str,
    version: &str,
    tarball: Vec<u8>,
    other_origin: bool,
    seen: &Seen,
) -> (Server, Option<Server>) {
    let file = format!("{}-{version}.tgz", name.rsplit('/').next().unwrap());
    let integrity = sri_sha512(&tarball);
    let served = tarball.clone();
    let path = format!("/tarballs/{file}");
    let p2 = path.clone();
    let cdn = other_origin.then(|| {
        recording(
            seen,
            move |req| if req.path == p2 { Response::new(200, served.clone()) } else { Response::new(404, "") },
        )
    });
    let base = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let b2 = base.clone();
    let cdn_url = cdn.as_ref().map(|c| c.url(""));
    let (name, version) = (name.to_owned(), version.to_owned());
    let registry = recording(seen, move |req| {
        let home = cdn_url.clone().unwrap_or_else(|| b2.get().cloned().unwrap_or_default());
        if req.path == format!("/npm/{}", name.replace('/', "%2f")) {
            let doc = serde_json::json!({
                "name": name,
                "versions": { &version: { "dist": { "tarball": format!("{home}{path}"), "integrity": integrity } } },
                "time": {},
            });
            return Response::new(200, doc.to_string()).header("Content-Type", "application/json");
        }
        if req.path == path {
            return Response::new(200, tarball.clone());
        }
        Response::new(404, "")
    });
    let _ = base.set(registry.url(""));
    (registry, cdn)
}

/// A Python index speaking the JSON simple API (PEP 691) at `/simple/`, serving
/// `name`'s `files` (file name, bytes, yanked).
pub fn simple_index(name: &str, files: Vec<(String, Vec<u8>, bool)>) -> Server {
    simple_index_with(name, files, None, &Seen::default())
}

/// A private Python index: every request wants `Authorization: <auth>` (401 without
/// it); what it receives is recorded into `seen`.
pub fn private_simple_index(name: &str, files: Vec<(String, Vec<u8>, bool)>, auth: String, seen: &Seen) -> Server {
    simple_index_with(name, files, Some(auth), seen)
}

fn simple_index_with(name: &str, files: Vec<(String, Vec<u8>, bool)>, auth: Option<String>, seen: &Seen) -> Server {
    let normal = name.to_ascii_lowercase().replace(['_', '.'], "-");
    let listing: Vec<serde_json::Value> = files
        .iter()
        .map(|(f, b, yanked)| {
            use sha2::Digest as _;
            let sha: String = sha2::Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect();
            serde_json::json!({"filename": f, "url": format!("../../files/{f}"), "hashes": {"sha256": sha}, "yanked": yanked})
        })
        .collect();
    let page = serde_json::json!({"meta": {"api-version": "1.1"}, "name": normal, "files": listing}).to_string();
    let want = format!("/simple/{normal}/");
    recording(seen, move |req| {
        if auth.as_deref().is_some_and(|a| req.header("authorization") != Some(a)) {
            return Response::new(401, "Unauthorized");
        }
        if req.path == want {
            return Response::new(200, page.clone()).header("Content-Type", "application/vnd.pypi.simple.v1+json");
        }
        match files.iter().find(|(f, _, _)| req.path == format!("/files/{f}")) {
            Some((_, b, _)) => Response::new(200, b.clone()),
            None => Response::new(404, ""),
        }
    })
}

/// A tar (zstd for a bundle archive, gzip for a package artifact) written entry by
/// entry with raw names and sizes: the tar crate's checked setters would refuse the
/// hostile ones.
pub struct Evil<W: std::io::Write>(tar::Builder<W>);

impl<W: std::io::Write> std::fmt::Debug for Evil<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Evil(…)")
    }
}

impl Evil<zstd::stream::Encoder<'static, Vec<u8>>> {
    pub fn zstd() -> Self {
        Evil(tar::Builder::new(zstd::stream::Encoder::new(Vec::new(), 1).unwrap()))
    }

    pub fn finish(self) -> Vec<u8> {
        self.0.into_inner().unwrap().finish().unwrap()
    }
}

impl Evil<flate2::write::GzEncoder<Vec<u8>>> {
    pub fn gzip() -> Self {
        Evil(tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast())))
    }

    pub fn finish(self) -> Vec<u8> {
        self.0.into_inner().unwrap().finish().unwrap()
    }
}

impl<W: std::io::Write> Evil<W> {
    pub fn raw(mut self, name: &[u8], kind: tar::EntryType, link: &[u8], size: u64, data: impl std::io::Read) -> Self {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        h.as_gnu_mut().unwrap().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        self.0.append(&h, data).unwrap();
        self
    }

    pub fn file(self, name: &str, data: &[u8]) -> Self {
        self.raw(name.as_bytes(), tar::EntryType::Regular, b"", data.len() as u64, data)
    }

    /// A GNU long-name entry, then a file under that name.
    pub fn long_name(self, name: &str, data: &[u8]) -> Self {
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        self.raw(b"././@LongLink", tar::EntryType::GNULongName, b"", n.len() as u64, n.as_slice()).raw(
            b"fixture/short",
            tar::EntryType::Regular,
            b"",
            data.len() as u64,
            data,
        )
    }

    /// A header that says `size` bytes follow, and none do: what a multi-gigabyte
    /// file looks like to a reader that must refuse it before reading it.
    pub fn claimed(mut self, name: &str, size: u64) -> Self {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        std::io::Write::write_all(self.0.get_mut(), h.as_bytes()).unwrap();
        self
    }
}
