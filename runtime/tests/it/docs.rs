//! The documented formats are the code's: docs/bundle-format.md against the writer's
//! schema and the manifest's fields.

use std::collections::BTreeSet;
use std::path::Path;

use arrow_schema::DataType;

fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bundle-format.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the first table after the heading that starts with `heading`: each
/// row's cells, trimmed.
fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let start = doc.lines().position(|l| l.starts_with(heading)).unwrap_or_else(|| panic!("no heading {heading:?}"));
    doc.lines()
        .skip(start + 1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and the separator
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect())
        .collect()
}

/// A column type as the doc writes it.
fn written(t: &DataType, nullable: bool) -> String {
    let base = match t {
        DataType::Utf8 => "utf8".to_owned(),
        DataType::UInt32 => "u32".to_owned(),
        DataType::Boolean => "bool".to_owned(),
        DataType::List(item) => format!("list<{}>", written(item.data_type(), false)),
        other => format!("{other:?}"),
    };
    if nullable { format!("{base}?") } else { base }
}

#[test]
fn docs_list_every_column_of_the_writer_schema() {
    let doc = doc();
    let mut documented = BTreeSet::new();
    for row in table(&doc, "## `chunks.parquet`") {
        for name in row[0].split(',') {
            documented.insert((name.trim().to_owned(), row[1].clone()));
        }
    }
    let schema = atlas_runtime::chunk_table::schema();
    let code: BTreeSet<(String, String)> =
        schema.fields().iter().map(|f| (f.name().clone(), written(f.data_type(), f.is_nullable()))).collect();
    assert_eq!(documented, code, "docs/bundle-format.md's chunks.parquet table and chunk_table::schema() differ");
    assert!(
        doc.contains(&format!("schema version {}", atlas_runtime::chunk_table::SCHEMA_VERSION)),
        "the doc names schema version {}",
        atlas_runtime::chunk_table::SCHEMA_VERSION
    );
}

#[test]
fn docs_list_every_field_of_the_manifest() {
    use atlas_runtime::manifest::{FORMAT_VERSION, Manifest, ModelInfo};
    let m = Manifest {
        format_version: FORMAT_VERSION,
        name: String::new(),
        version: String::new(),
        description: Some(String::new()),
        created: String::new(),
        config_digest: String::new(),
        sources: Vec::new(),
        model: ModelInfo {
            id: String::new(),
            sha256: String::new(),
            dims: 0,
            pooling: atlas_runtime::model::Pooling::Mean,
        },
        chunk_count: 0,
        embedding_rows: 0,
        bm25_boosts: [("text".to_owned(), 1.0)].into(),
        eval: Some(atlas_runtime::manifest::EvalInfo {
            golden: String::new(),
            results: String::new(),
            answerable: 0,
            negatives: 0,
            summary: Default::default(),
            threshold: None,
            calibration: None,
        }),
        tune: Some(atlas_runtime::manifest::TuneInfo {
            file: String::new(),
            rank: 0,
            pairs: Default::default(),
            held_out: 0,
            seed: 0,
            epochs: 0,
            held_out_mrr_before: 0.0,
            held_out_mrr_after: 0.0,
        }),
        artifacts: Vec::new(),
    };
    let value = serde_json::to_value(&m).unwrap();
    let code: BTreeSet<String> = value.as_object().unwrap().keys().cloned().collect();
    let doc = doc();
    let documented: BTreeSet<String> = table(&doc, "## `manifest.json`").into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(documented, code, "docs/bundle-format.md's manifest.json table and Manifest differ");
    assert!(doc.contains(&format!("# Bundle format (version {FORMAT_VERSION})")));
}

/// The exact-scan threshold as the docs write it (`64,000`) is the code's.
#[test]
fn docs_give_the_exact_scan_threshold_of_the_code() {
    let n = atlas_runtime::bundle::EXACT_MAX_ROWS;
    let written = format!("{},{:03}", n / 1000, n % 1000);
    for doc in ["search.md", "benchmarks.md"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(doc);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!("EXACT_MAX_ROWS`, {written} rows")) || text.contains(&format!("= {written} rows")),
            "docs/{doc} gives the threshold as {written}"
        );
    }
}
