//! The load: what each step of an export writes (the chunks and windows by COPY, each
//! field's postings in blocks best first), and the rows beside them (the manifest's,
//! the small files, the terms and the symbols).

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context as _;
use atlas_runtime::Bundle;
use atlas_runtime::manifest::Manifest;
use deadpool_postgres::Client;
use pgvector::HalfVector;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::{CHUNK_BATCH, POSTING_BATCH, Provenance, WINDOW_BATCH};
use crate::{BM25_B, BM25_K1, POSTING_BLOCK, pg};

/// Files that stay out of `files`: the database holds their contents as tables.
const AS_TABLES: [&str; 3] = ["embeddings.npy", "chunks.text", "hnsw/"];

/// What the load reads from.
pub(super) struct Source<'a> {
    pub(super) schema: &'a str,
    pub(super) bundle: &'a Bundle,
    pub(super) window_chunk: &'a [u32],
    pub(super) first: HashSet<u32>,
    pub(super) vectors: &'a atlas_runtime::vectors::MappedMatrix,
    pub(super) searcher: &'a atlas_runtime::text_index::Searcher,
    pub(super) stats: &'a [atlas_runtime::text_index::FieldStats],
}

/// One step of the load.
#[derive(Debug, Clone, Copy)]
pub(super) enum Load {
    /// The chunks from this one, [`CHUNK_BATCH`] of them.
    Chunks(usize),
    /// The windows from this row, [`WINDOW_BATCH`] of them.
    Windows(usize),
    /// One field's postings in one segment of the index.
    Postings { field: usize, seg: usize },
}

impl Load {
    /// The step's name in `progress`.
    pub(super) fn step(self, stats: &[atlas_runtime::text_index::FieldStats]) -> String {
        match self {
            Load::Chunks(start) => format!("chunks:{start}"),
            Load::Windows(start) => format!("windows:{start}"),
            Load::Postings { field, seg } => format!("postings:{}:{seg}", stats[field].field),
        }
    }
}

impl Source<'_> {
    pub(super) async fn load(&self, what: Load, c: &Client) -> anyhow::Result<()> {
        match what {
            Load::Chunks(start) => self.chunks(start, c).await,
            Load::Windows(start) => self.windows(start, c).await,
            Load::Postings { field, seg } => self.postings(field, seg, c).await,
        }
    }

    fn kind(&self, chunk: u32) -> &str {
        self.bundle.chunks().get(chunk as usize).map_or("", |c| c.kind.as_str())
    }

    async fn chunks(&self, start: usize, c: &Client) -> anyhow::Result<()> {
        let all = self.bundle.chunks();
        let end = (start + CHUNK_BATCH).min(all.len());
        let sink = c
            .copy_in(&format!(
                "COPY {}.chunks (idx, chunk_id, path, kind, section, language, repo, symbol_kind, title, heading, \
                 text) FROM STDIN BINARY",
                self.schema
            ))
            .await
            .map_err(pg)?;
        let mut types = vec![Type::INT4];
        types.resize(11, Type::TEXT);
        let w = BinaryCopyInWriter::new(sink, &types);
        let mut w = std::pin::pin!(w);
        for (i, ch) in all.iter().enumerate().take(end).skip(start) {
            let (idx, heading) = (i as i32, ch.heading_path.join(" > "));
            let kind = ch.kind.as_str();
            let row: [&(dyn ToSql + Sync); 11] = [
                &idx,
                &ch.chunk_id,
                &ch.path,
                &kind,
                &ch.section,
                &ch.language,
                &ch.repo,
                &ch.symbol_kind,
                &ch.title,
                &heading,
                &nul_free(self.bundle.text(i)),
            ];
            w.as_mut().write(&row).await.map_err(pg)?;
        }
        w.finish().await.map_err(pg)?;
        Ok(())
    }

    async fn windows(&self, start: usize, c: &Client) -> anyhow::Result<()> {
        let end = (start + WINDOW_BATCH).min(self.vectors.rows);
        let halfvec = halfvec_type(c).await?;
        let sink = c
            .copy_in(&format!("COPY {}.windows (row, chunk, first, kind, embedding) FROM STDIN BINARY", self.schema))
            .await
            .map_err(pg)?;
        let w = BinaryCopyInWriter::new(sink, &[Type::INT4, Type::INT4, Type::BOOL, Type::TEXT, halfvec]);
        let mut w = std::pin::pin!(w);
        for row in start..end {
            let chunk = self.window_chunk[row];
            let v = HalfVector::from_f32_slice(&self.vectors.row(row));
            let (r, ch, f) = (row as i32, chunk as i32, self.first.contains(&(row as u32)));
            w.as_mut().write(&[&r, &ch, &f, &self.kind(chunk), &v]).await.map_err(pg)?;
        }
        w.finish().await.map_err(pg)?;
        Ok(())
    }

    /// One field's postings in one segment, through one COPY, in blocks ([`blocks`]).
    async fn postings(&self, field: usize, seg: usize, c: &Client) -> anyhow::Result<()> {
        let sink = c
            .copy_in(&format!(
                "COPY {}.postings (field, term, kind, seg, block, chunks, impacts) FROM STDIN BINARY",
                self.schema
            ))
            .await
            .map_err(pg)?;
        let types = [Type::INT2, Type::TEXT, Type::TEXT, Type::INT2, Type::INT4, Type::INT4_ARRAY, Type::FLOAT4_ARRAY];
        let w = BinaryCopyInWriter::new(sink, &types);
        let mut w = std::pin::pin!(w);
        // The index is read on a blocking thread, a batch of terms at a time, while the
        // previous batch is written: memory stays at two batches.
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let (searcher, stats) = (self.searcher.clone(), self.stats[field]);
        let reader = tokio::task::spawn_blocking(move || {
            atlas_runtime::text_index::postings(&searcher, stats.field, seg, POSTING_BATCH, |b| {
                tx.blocking_send(b).map_err(|_| anyhow::anyhow!("the export stopped"))
            })
        });
        let (f, seg) = (field as i16, seg as i16);
        let avg = stats.tokens as f64 / stats.docs.max(1) as f64;
        while let Some(batch) = rx.recv().await {
            for t in batch {
                for (kind, blocks) in blocks(&t.docs, avg, |chunk| self.kind(chunk)) {
                    for (block, (chunks, impacts)) in blocks.into_iter().enumerate() {
                        let block = block as i32;
                        w.as_mut().write(&[&f, &t.term, &kind, &seg, &block, &chunks, &impacts]).await.map_err(pg)?;
                    }
                }
            }
        }
        reader.await.context("reading the bundle's index")??;
        w.finish().await.map_err(pg)?;
        Ok(())
    }
}

/// The manifest's row: the manifest and where the bundle came from, as JSON.
pub(super) async fn bundle_row(
    c: &Client,
    schema: &str,
    library: &str,
    raw_manifest: &[u8],
    provenance: &Provenance,
) -> anyhow::Result<()> {
    let json: serde_json::Value = serde_json::from_slice(raw_manifest)?;
    let prov = serde_json::to_value(provenance)?;
    c.execute(
        &format!(
            "INSERT INTO {schema}.bundle (library, manifest, provenance) VALUES ($1, $2::text::jsonb, $3::text::jsonb)"
        ),
        &[&library, &json.to_string(), &prov.to_string()],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// The bundle's small files byte for byte (each read checked against the manifest),
/// and the manifest's own bytes; those held as tables stay out ([`AS_TABLES`]).
pub(super) async fn files(
    c: &Client,
    schema: &str,
    dir: &Path,
    manifest: &Manifest,
    raw_manifest: &[u8],
    digest: &str,
) -> anyhow::Result<()> {
    for a in &manifest.artifacts {
        if a.path.starts_with("tantivy/") || AS_TABLES.iter().any(|t| a.path == *t || a.path.starts_with(t)) {
            continue;
        }
        let bytes = atlas_runtime::manifest::read_checked(dir, manifest, &a.path)?;
        c.execute(
            &format!("INSERT INTO {schema}.files (name, bytes, blake3) VALUES ($1, $2, $3)"),
            &[&a.path, &bytes, &a.blake3],
        )
        .await
        .map_err(pg)?;
    }
    c.execute(
        &format!("INSERT INTO {schema}.files (name, bytes, blake3) VALUES ('manifest.json', $1, $2)"),
        &[&raw_manifest, &digest],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// The term table from the loaded postings (each term's document frequency), and
/// each field's statistics.
pub(super) async fn terms(
    c: &Client,
    schema: &str,
    stats: &[atlas_runtime::text_index::FieldStats],
) -> anyhow::Result<()> {
    c.batch_execute(&format!(
        "INSERT INTO {schema}.terms (field, term, df)
         SELECT field, term, sum(cardinality(chunks)) FROM {schema}.postings GROUP BY 1, 2"
    ))
    .await
    .map_err(pg)?;
    for (f, s) in stats.iter().enumerate() {
        let (field, docs, tokens) = (f as i16, s.docs as i64, s.tokens as i64);
        c.execute(
            &format!("INSERT INTO {schema}.fields (field, name, docs, tokens) VALUES ($1, $2, $3, $4)"),
            &[&field, &s.field, &docs, &tokens],
        )
        .await
        .map_err(pg)?;
    }
    Ok(())
}

/// The symbol table, a thousand definitions a statement.
pub(super) async fn symbols(c: &Client, schema: &str, bundle: &Bundle) -> anyhow::Result<()> {
    let defs = bundle.symbols().defs.clone();
    for chunk in defs.chunks(1_000) {
        let tx_sql = format!(
            "INSERT INTO {schema}.symbols (name, kind, path, language, start_line, end_line, chunk_id, signature) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], \
             $8::text[])"
        );
        let col = |f: fn(&atlas_runtime::symbols::Definition) -> String| chunk.iter().map(f).collect::<Vec<_>>();
        let lines =
            |f: fn(&atlas_runtime::symbols::Definition) -> u32| chunk.iter().map(|d| f(d) as i32).collect::<Vec<i32>>();
        let signature: Vec<Option<String>> = chunk.iter().map(|d| d.signature.clone()).collect();
        c.execute(
            &tx_sql,
            &[
                &col(|d| d.name.clone()),
                &col(|d| d.kind.clone()),
                &col(|d| d.path.clone()),
                &col(|d| d.language.clone()),
                &lines(|d| d.start_line),
                &lines(|d| d.end_line),
                &col(|d| d.chunk_id.clone()),
                &signature,
            ],
        )
        .await
        .map_err(pg)?;
    }
    Ok(())
}

/// A posting's BM25 factor besides the term's idf and weight, as tantivy computes it:
/// `(1 + k1) · tf / (tf + k1 · (1 − b + b · len / avg))`. Stored, so a query reads a
/// term's best postings first.
fn bm25_impact(tf: u32, norm: u32, avg: f64) -> f32 {
    let (tf, norm) = (f64::from(tf), f64::from(norm));
    ((1.0 + BM25_K1) * tf / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * norm / avg.max(f64::MIN_POSITIVE)))) as f32
}

/// One stored block: chunks and their BM25 factors, best first.
type Block = (Vec<i32>, Vec<f32>);

/// One term's postings in one segment as stored: per kind, the chunks and their BM25
/// factors best first (ties by chunk), in blocks of [`POSTING_BLOCK`]. A query reads a
/// term's first blocks: per kind and segment they hold its best postings, so their
/// union holds the best [`POSTING_BLOCK`] under any kind filter.
fn blocks<'k>(docs: &[(u32, u32, u32)], avg: f64, kind_of: impl Fn(u32) -> &'k str) -> Vec<(&'k str, Vec<Block>)> {
    let mut by_kind: Vec<(&str, Vec<(f32, u32)>)> = Vec::new();
    for &(chunk, tf, norm) in docs {
        let (kind, impact) = (kind_of(chunk), bm25_impact(tf, norm, avg));
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, v)) => v.push((impact, chunk)),
            None => by_kind.push((kind, vec![(impact, chunk)])),
        }
    }
    by_kind
        .into_iter()
        .map(|(kind, mut v)| {
            v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let blocks = v
                .chunks(POSTING_BLOCK)
                .map(|b| (b.iter().map(|p| p.1 as i32).collect(), b.iter().map(|p| p.0).collect()))
                .collect();
            (kind, blocks)
        })
        .collect()
}

/// PostgreSQL's text type holds no NUL; a chunk's text never should either, but a
/// bundle is untrusted input.
pub(super) fn nul_free(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') { s.replace('\0', "\u{fffd}").into() } else { s.into() }
}

/// pgvector's `halfvec` type, as COPY needs it named.
async fn halfvec_type(c: &Client) -> anyhow::Result<Type> {
    let st = c.prepare("SELECT $1::halfvec").await.map_err(pg)?;
    Ok(st.params()[0].clone())
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_s_first_block_holds_its_best_postings_and_the_blocks_hold_them_all() {
        // Chunks 0..5000: even ones docs, odd ones code; tf rises with the chunk.
        let docs: Vec<(u32, u32, u32)> = (0..5_000).map(|c| (c, 1 + c % 97, 40)).collect();
        let kind_of = |c: u32| if c.is_multiple_of(2) { "docs" } else { "code" };
        let stored = blocks(&docs, 40.0, kind_of);
        assert_eq!(stored.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["docs", "code"]);
        for (kind, blocks) in &stored {
            let sizes: Vec<usize> = blocks.iter().map(|b| b.0.len()).collect();
            assert_eq!(sizes, [POSTING_BLOCK, 500], "{kind}");
            let impacts: Vec<f32> = blocks.iter().flat_map(|b| b.1.clone()).collect();
            assert!(impacts.is_sorted_by(|a, b| a >= b), "{kind}: best first");
            assert!(blocks.iter().flat_map(|b| &b.0).all(|&c| kind_of(c as u32) == *kind));
        }
        // The best POSTING_BLOCK of all kinds are in the first blocks.
        let mut all: Vec<(f32, u32)> = docs.iter().map(|&(c, tf, n)| (bm25_impact(tf, n, 40.0), c)).collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let first: HashSet<i32> = stored.iter().flat_map(|(_, b)| b[0].0.clone()).collect();
        assert!(all.iter().take(POSTING_BLOCK).all(|&(_, c)| first.contains(&(c as i32))));
    }
}
