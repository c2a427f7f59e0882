//! bm25: a fielded tantivy index over the chunks (text, title, heading, file_path,
//! symbol), with the field boosts recorded in the output manifest so the runtime
//! queries with what the build chose.

use std::collections::BTreeMap;

use anyhow::Context as _;
use atlas_cache::Digest;
use atlas_runtime::text_index;
use serde::{Deserialize, Serialize};
use tantivy::{Index, TantivyDocument};

use crate::artifacts::{Bm25Manifest, ChunkManifest};
use crate::runner::{Ctx, Outputs, ParamError, Stage, StageOutput, check_range, load_json};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Bm25Params {
    /// Query-time weight of each field.
    pub boosts: BTreeMap<String, f32>,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { boosts: text_index::DEFAULT_BOOSTS.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect() }
    }
}

#[derive(Debug, Default)]
pub struct Bm25;

impl Stage for Bm25 {
    const NAME: &'static str = "bm25";
    /// 3: no background merges (a large index failed: its segments merged away).
    /// 2: canonical segment ids.
    const VERSION: u32 = 3;
    const DEPS: &'static [&'static str] = &["chunk"];
    type Params = Bm25Params;
    type Prepared = ();

    fn check(p: &Bm25Params) -> Result<(), ParamError> {
        for (field, b) in &p.boosts {
            if !text_index::FIELDS.contains(&field.as_str()) {
                return Err(ParamError::new(
                    field,
                    format!("stages.bm25.boosts: unknown field {field:?}; fields: {}", text_index::FIELDS.join(", ")),
                )
                .within("boosts"));
            }
            check_range(Self::NAME, field, f64::from(*b), 0.0, 100.0).map_err(|e| e.within("boosts"))?;
        }
        Ok(())
    }

    fn run(&self, p: &Bm25Params, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let manifest: ChunkManifest = ctx.input("chunk")?;
        let chunks = atlas_runtime::chunk_table::from_parquet(&ctx.cache.get_required(manifest.chunks)?)?;
        // Build in the cache's tmp/ (cleared when a run starts), then store each file.
        let dir = ctx.cache.root().join("tmp").join(format!("bm25-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let schema = text_index::schema();
        let index = Index::create_in_dir(&dir, schema.clone()).context("creating the index")?;
        text_index::register(&index);
        let bar = ctx.progress.stage("bm25", chunks.len());
        // One thread: documents keep chunk order, so equal inputs give equal postings.
        let mut writer =
            index.writer_with_num_threads::<TantivyDocument>(1, 64 * 1024 * 1024).context("opening the writer")?;
        // The one merge is ours, below: a background merge of a large index's segments
        // would take away the ones it names (and make the layout depend on timing).
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        for (i, c) in chunks.iter().enumerate() {
            let doc = text_index::document(&schema, i, c);
            writer.add_document(doc).context("indexing a chunk")?;
            bar.inc();
        }
        writer.commit().context("committing the index")?;
        let segments = index.searchable_segment_ids()?;
        if segments.len() > 1 {
            writer.merge(&segments).wait().context("merging segments")?;
        }
        writer.garbage_collect_files().wait().context("collecting old files")?;
        writer.wait_merging_threads().context("waiting for merges")?;
        canonical_segment_ids(&dir)?;
        bar.finish();
        let mut out = StageOutput { items: chunks.len(), ..StageOutput::default() };
        let mut files = BTreeMap::new();
        for e in std::fs::read_dir(&dir)? {
            let path = e?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if name.ends_with(".lock") {
                continue;
            }
            let d = ctx.cache.put(&std::fs::read(&path)?)?;
            out.objects.insert(d);
            files.insert(name, d);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let m = ctx.cache.put_json(&Bm25Manifest { files, boosts: p.boosts.clone(), docs: chunks.len() })?;
        out.objects.insert(m);
        out.output = Some(m);
        Ok(out)
    }

    /// `tantivy/` (the index) and `bm25.json` (the boosts it is queried with).
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: Bm25Manifest = load_json(out.cache, output, "the bm25 manifest")?;
        out.write_objects("tantivy", &m.files)?;
        out.write("bm25.json", &m.bm25_json()?, false)
    }
}

/// tantivy names segments with random UUIDs; everything else it writes is a function
/// of the documents. Renaming each segment after a hash of its files (and rewriting
/// meta.json and a sorted .managed.json) makes equal inputs give byte-equal indexes.
fn canonical_segment_ids(dir: &std::path::Path) -> anyhow::Result<()> {
    let meta_path = dir.join("meta.json");
    let mut meta = std::fs::read_to_string(&meta_path).context("reading meta.json")?;
    let parsed: serde_json::Value = serde_json::from_str(&meta)?;
    let ids: Vec<String> = parsed["segments"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["segment_id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut names: Vec<String> =
        std::fs::read_dir(dir)?.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for id in ids {
        let old = id.replace('-', "");
        let mut h = atlas_runtime::hash::Blake3::new();
        let segment_files: Vec<&String> = names.iter().filter(|n| n.starts_with(&old)).collect();
        for n in &segment_files {
            h.update(&n.as_bytes()[old.len()..]);
            h.update(&std::fs::read(dir.join(n))?);
        }
        let new = h.hex()[..32].to_owned();
        for n in &segment_files {
            std::fs::rename(dir.join(n), dir.join(format!("{new}{}", &n[old.len()..])))?;
        }
        let dashed = format!("{}-{}-{}-{}-{}", &new[..8], &new[8..12], &new[12..16], &new[16..20], &new[20..]);
        meta = meta.replace(&id, &dashed);
    }
    std::fs::write(&meta_path, &meta)?;
    let mut files: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    files.sort();
    std::fs::write(dir.join(".managed.json"), serde_json::to_vec(&files)?)?;
    Ok(())
}
