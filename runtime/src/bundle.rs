//! The bundle on disk: `manifest.json` and the artifacts it lists.
//!
//! ```text
//! <bundle>/
//!   manifest.json      format version, name, version, created, config digest, sources,
//!                      model, counts, and every artifact with its size, blake3, sha256
//!   chunks.parquet
//!   embeddings.npy     f16, one row per window; embeddings.json maps rows to chunks
//!   hnsw/              the HNSW graph over the embeddings (hnsw_rs dump)
//!   tantivy/           the fielded BM25 index; bm25.json holds its field boosts
//!   mirror/            the cleaned markdown and source files the fs server serves
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::{Error, Result};

/// Bumped when the layout or a format changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub name: String,
    pub version: String,
    /// When the bundle was packed: the one field that differs between equal builds.
    pub created: String,
    /// blake3 of the pipeline's sources and stage params.
    pub config_digest: String,
    pub sources: Vec<SourceInfo>,
    pub model: ModelInfo,
    pub chunk_count: usize,
    pub embedding_rows: usize,
    /// BM25 field boosts the build chose; the runtime scores with these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bm25_boosts: BTreeMap<String, f32>,
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub name: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    pub files: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    pub sha256: String,
    pub dims: usize,
    pub pooling: crate::model::Pooling,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// `/`-separated, relative to the bundle folder.
    pub path: String,
    pub size: u64,
    pub blake3: String,
    pub sha256: String,
}

impl Artifact {
    pub fn of(path: &str, bytes: &[u8]) -> Artifact {
        Artifact {
            path: path.to_owned(),
            size: bytes.len() as u64,
            blake3: blake3_hex(bytes),
            sha256: sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Reads and checks a bundle's manifest: present, parseable, a format this build reads.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(|error| Error::Io { path: path.clone(), error })?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::DataCorruption { path: path.clone(), reason: format!("unreadable manifest: {e}") })?;
    if m.format_version > FORMAT_VERSION {
        return Err(Error::DataCorruption {
            path,
            reason: format!(
                "bundle format {} is newer than this build reads ({FORMAT_VERSION}); upgrade atlas",
                m.format_version
            ),
        });
    }
    Ok(m)
}

/// Checks every artifact against the manifest (size, blake3 and sha256).
pub fn verify(dir: &Path) -> Result<Manifest> {
    let m = read_manifest(dir)?;
    for a in &m.artifacts {
        let path: PathBuf = dir.join(&a.path);
        let bytes = std::fs::read(&path).map_err(|error| Error::Io { path: path.clone(), error })?;
        let got = Artifact::of(&a.path, &bytes);
        if got != *a {
            return Err(Error::DataCorruption {
                path,
                reason: format!("does not match the manifest (size {} vs {}, blake3 {})", got.size, a.size, got.blake3),
            });
        }
    }
    Ok(m)
}
