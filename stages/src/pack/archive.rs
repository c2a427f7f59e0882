//! The bundle as one archive: `<name>-<version>.tar.zst`, deterministic, in the
//! format `atlas install` unpacks ([`atlas_dist::archive`]).

use atlas_cache::Cache;

use crate::artifacts::PackManifest;

/// The bundle as a tar.zst: entries sorted, under `<name>/`, with fixed metadata, so
/// equal bundles give equal archives.
pub fn tar_zst(cache: &Cache, m: &PackManifest) -> anyhow::Result<Vec<u8>> {
    let files = m
        .files
        .iter()
        .map(|(path, obj)| Ok((path.clone(), atlas_dist::archive::Entry::Bytes(cache.get_required(*obj)?))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(atlas_dist::archive::write(Vec::new(), &m.name, 19, files)?)
}
