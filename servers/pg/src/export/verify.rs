//! The check of a finished export against its bundle, before the catalog marks it
//! complete.

use std::path::Path;

use atlas_runtime::Bundle;
use atlas_runtime::manifest::Manifest;
use deadpool_postgres::Client;
use pgvector::HalfVector;

use super::load::nul_free;
use crate::pg;

/// Vectors read back and compared after the load.
const VECTOR_SAMPLE: usize = 500;

/// The export against the bundle: row counts, every stored file's blake3, every text's
/// sha256 (in the database, against the bundle's), and a spread sample of vectors
/// read back bit for bit.
pub(super) async fn verify(
    c: &Client,
    schema: &str,
    dir: &Path,
    bundle: &Bundle,
    manifest: &Manifest,
    vectors: &atlas_runtime::vectors::MappedMatrix,
) -> anyhow::Result<()> {
    let bad = |what: String| {
        anyhow::anyhow!(
            "the export of {} does not match the bundle: {what}; drop it (`atlas export --drop`) and export again",
            dir.display()
        )
    };
    {
        let count = async |table: &str| -> anyhow::Result<i64> {
            Ok(c.query_one(&format!("SELECT count(*) FROM {schema}.{table}"), &[]).await.map_err(pg)?.get(0))
        };
        let (chunks, windows) = (count("chunks").await?, count("windows").await?);
        if chunks as usize != manifest.chunk_count || windows as usize != manifest.embedding_rows {
            return Err(bad(format!(
                "{chunks} chunks and {windows} windows, the manifest says {} and {}",
                manifest.chunk_count, manifest.embedding_rows
            )));
        }
        for r in c.query(&format!("SELECT name, bytes, blake3 FROM {schema}.files"), &[]).await.map_err(pg)? {
            let (name, bytes, want): (String, Vec<u8>, String) = (r.get(0), r.get(1), r.get(2));
            let listed = manifest.artifact(&name).map(|a| a.blake3.as_str()).unwrap_or(want.as_str());
            if atlas_runtime::hash::blake3_bytes(&bytes) != listed {
                return Err(bad(format!("file {name} differs")));
            }
        }
        let rows = c
            .query(
                &format!(
                    "SELECT idx, encode(sha256(convert_to(text, 'UTF8')), 'hex') FROM {schema}.chunks ORDER BY idx"
                ),
                &[],
            )
            .await
            .map_err(pg)?;
        for r in rows {
            let (i, got): (i32, String) = (r.get(0), r.get(1));
            if atlas_runtime::hash::sha256_bytes(nul_free(bundle.text(i as usize)).as_bytes()) != got {
                return Err(bad(format!("chunk {i}'s text differs")));
            }
        }
        let step = (vectors.rows / VECTOR_SAMPLE).max(1);
        let sample: Vec<i32> = (0..vectors.rows).step_by(step).map(|r| r as i32).collect();
        for r in c
            .query(&format!("SELECT row, embedding FROM {schema}.windows WHERE row = ANY($1)"), &[&sample])
            .await
            .map_err(pg)?
        {
            let (row, got): (i32, HalfVector) = (r.get(0), r.get(1));
            if HalfVector::from_f32_slice(&vectors.row(row as usize)).as_slice() != got.as_slice() {
                return Err(bad(format!("embedding row {row} differs")));
            }
        }
        Ok(())
    }
}
