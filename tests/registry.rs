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
    let server = Server::start(move |req| {
        if req.path == "/index/config.json" {
            let dl = format!("{}/dl", base.get().map_or("", String::as_str));
            return Response::new(200, serde_json::json!({ "dl": dl }).to_string());
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
