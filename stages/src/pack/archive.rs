//! The bundle as one archive: `<name>-<version>.tar.zst`, deterministic.

use anyhow::Context as _;
use atlas_cache::Cache;

use crate::artifacts::PackManifest;

/// The bundle as a tar.zst: entries sorted, under `<name>/`, with fixed metadata, so
/// equal bundles give equal archives.
pub fn tar_zst(cache: &Cache, m: &PackManifest) -> anyhow::Result<Vec<u8>> {
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
