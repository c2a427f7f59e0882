//! The bm25 stage: a fielded tantivy index the runtime can open and query with the
//! boosts the build recorded.

use atlas_e2e::{pipeline, run, write_config};
use atlas_runtime::text_index;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::Value as _;
use tantivy::{Index, TantivyDocument};

#[test]
fn fielded_index_with_code_aware_and_stemmed_fields() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("src")).unwrap();
    std::fs::write(
        site.path().join("assets.md"),
        "# Managing assets\n\n## Creating assets\n\nCreate an asset from the catalog.\n",
    )
    .unwrap();
    std::fs::write(site.path().join("other.md"), "# Other\n\n## Notes\n\nCall getApplication before anything else.\n")
        .unwrap();
    std::fs::write(
        site.path().join("src/store.py"),
        "class Store:\n    def dump_dict(self):\n        return {}\n\n    def load_dict(self, d):\n        return Store()\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), site.path(), "    include: [\"**/*.md\", \"**/*.py\"]\n");
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "bm25"])).success();
    assert_eq!(r.stage("bm25").0, "ran");
    let build = work.path().join(".atlas/build");
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(build.join("bm25.json")).unwrap()).unwrap();
    for (field, boost) in text_index::DEFAULT_BOOSTS {
        assert_eq!(meta["boosts"][field].as_f64().map(|b| b as f32), Some(boost), "{field}");
    }

    let index = Index::open_in_dir(build.join("tantivy")).unwrap();
    text_index::register(&index);
    let schema = index.schema();
    let fields: Vec<_> = text_index::FIELDS.iter().map(|f| schema.get_field(f).unwrap()).collect();
    let mut parser = QueryParser::for_index(&index, fields.clone());
    for (f, name) in fields.iter().zip(text_index::FIELDS) {
        parser.set_field_boost(*f, meta["boosts"][name].as_f64().unwrap() as f32);
    }
    let searcher = index.reader().unwrap().searcher();
    let chunks = atlas_runtime::chunk_table::read_file(&build.join("chunks.parquet")).unwrap();
    let top = |q: &str| -> String {
        let hits = searcher.search(&parser.parse_query(q).unwrap(), &TopDocs::with_limit(1).order_by_score()).unwrap();
        let (_, addr) = hits.first().unwrap_or_else(|| panic!("no hit for {q:?}"));
        let doc: TantivyDocument = searcher.doc(*addr).unwrap();
        let i = doc.get_first(schema.get_field("chunk").unwrap()).unwrap().as_u64().unwrap() as usize;
        chunks[i].path.clone()
    };
    assert_eq!(top("dump_dict"), "site/src/store.py", "the whole identifier");
    assert_eq!(top("dict"), "site/src/store.py", "a part of a snake_case identifier");
    assert_eq!(top("application"), "site/other.md", "a part of a camelCase identifier");
    assert_eq!(top("creating"), "site/assets.md", "stemmed prose");
    assert_eq!(top("store"), "site/src/store.py", "path and symbol");
    assert_eq!(searcher.num_docs() as usize, chunks.len());

    let again = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "bm25"])).success();
    assert_eq!(again.stage("bm25").0, "cached");
}
