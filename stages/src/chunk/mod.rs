//! chunk: each cleaned document → chunks with their heading path and line range.
//! Markdown is split at headings ([`markdown`]); code by syntax tree into functions,
//! classes and their members ([`code`]), its documentation written in code (a
//! module's guide, long doc comments) chunked as docs; other text into line windows. Each document is
//! memoised on its cleaned content; then, across documents, `cluster_tags` and the
//! docs ↔ code cross-links are added ([`links`]) and the chunks are written as
//! `chunks.parquet` (its schema: `atlas_runtime::chunk_table`).

pub mod code;
pub mod links;
pub mod markdown;
pub mod origin;
pub mod symbols;

use atlas_runtime::ChunkKind;
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail};
use atlas_cache::{Digest, KeyBuilder};
use atlas_runtime::chunk_table::ChunkRecord;
use serde::{Deserialize, Serialize};

use crate::artifacts::{ChunkManifest, CleanManifest, Cleaned, DocEntry};
use crate::runner::{Ctx, Outputs, ParamError, Stage, StageOutput, check_range, load_json};
use crate::text::{doc_format, language_of};
pub use links::{cluster_tags, cross_link};
use markdown::{DocChunk, chunk_lines, chunk_markdown, first_h1};

/// `stages.chunk`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ChunkParams {
    /// Headings of this level or above start a chunk (2 = H1 and H2).
    pub split_level: u8,
    /// Characters of the previous section prepended as context.
    pub overlap_chars: usize,
    /// Sections longer than this are split at paragraph boundaries.
    pub max_chars: usize,
    /// Code chunks (and line windows of other text files) hold at most this many lines.
    pub code_max_lines: usize,
    /// Code items of at most this many lines count as tiny…
    pub code_tiny_lines: usize,
    /// …and runs of tiny items merge into one chunk up to this many lines.
    pub code_merge_max_lines: usize,
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams {
            split_level: 2,
            overlap_chars: 150,
            max_chars: 8000,
            code_max_lines: 80,
            code_tiny_lines: 5,
            code_merge_max_lines: 40,
        }
    }
}

#[derive(Debug, Default)]
pub struct Chunk;

/// A stable id: blake3(source, path, heading path, part), 128 bits in hex.
pub fn chunk_id(source: &str, path: &str, heading_path: &[String], part: u32) -> String {
    let mut k = KeyBuilder::new("chunk-id");
    k.str("source", source).str("path", path);
    for h in heading_path {
        k.str("heading", h);
    }
    k.part("part", &part.to_le_bytes());
    k.finish().to_hex()[..32].to_owned()
}

/// The chunks of one document, the lines it dropped (a licence header), and, for
/// code, the definitions and identifier uses its parse saw.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct DocChunks {
    pub chunks: Vec<ChunkRecord>,
    pub license_lines: u32,
    #[serde(default)]
    pub defs: Vec<code::CodeDef>,
    #[serde(default)]
    pub refs: Vec<(String, u32)>,
    /// Code nested deeper than the chunker follows ([`code::CodeChunks::too_deep`]).
    #[serde(default)]
    pub too_deep: bool,
}

/// Chunks of one cleaned document, without the cross-document fields (cluster_tags,
/// cross-links, repo, commit).
pub fn chunk_document(doc: &DocEntry, cleaned: &Cleaned, params: &ChunkParams) -> Vec<ChunkRecord> {
    chunk_document_full(doc, cleaned, params).chunks
}

/// The most bytes of text a chunk holds. Chunks are cut by lines (code) and
/// paragraphs (docs), so only a very long line gets here (minified code, a generated
/// table, a data file on one line): past this, its text is cut at a character
/// boundary. Well under the bundle's per-value limit, which a reader refuses past.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// `text`, cut at [`MAX_CHUNK_BYTES`].
fn capped(mut text: String) -> String {
    if text.len() > MAX_CHUNK_BYTES {
        text.truncate(atlas_runtime::utf8::floor_char_boundary(&text, MAX_CHUNK_BYTES));
    }
    text
}

pub fn chunk_document_full(doc: &DocEntry, cleaned: &Cleaned, params: &ChunkParams) -> DocChunks {
    let file = doc.rel.rsplit('/').next().unwrap_or(&doc.rel);
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let markdown = doc_format(&doc.rel).is_some(); // every doc format is markdown once cleaned
    let language = language_of(&doc.rel);
    let path = doc.path();
    let origin = origin::of_file(&doc.rel, &cleaned.text);
    let record = |c: DocChunk, i: usize, title: &str, kind: ChunkKind| ChunkRecord {
        chunk_id: chunk_id(&doc.source, &path, &c.heading_path, c.part),
        kind,
        language: language.map(str::to_owned),
        source: doc.source.clone(),
        section: doc.section.clone(),
        path: path.clone(),
        url: doc.url.clone(),
        repo: None, // set with cluster_tags, after the memo
        commit: None,
        title: title.to_owned(),
        description: cleaned.description.clone(),
        heading_path: c.heading_path,
        ordinal: i as u32,
        text: capped(c.text),
        overlap_chars: c.overlap_chars,
        is_code: c.is_code,
        cluster_tags: String::new(),
        start_line: c.start_line,
        end_line: c.end_line,
        symbol: None,
        symbol_kind: None,
        signature: None,
        symbols: Vec::new(),
        mentions: Vec::new(),
        mentioned_in: Vec::new(),
        origin,
    };
    if markdown {
        let title = cleaned.title.clone().or_else(|| first_h1(&cleaned.text)).unwrap_or_else(|| stem.to_owned());
        let chunks = chunk_markdown(&cleaned.text, params)
            .into_iter()
            .enumerate()
            .map(|(i, c)| record(c, i, &title, ChunkKind::Docs))
            .collect();
        return DocChunks { chunks, license_lines: 0, ..DocChunks::default() };
    }
    let code = language.and_then(|l| code::chunk_code(&cleaned.text, l, &doc.rel, params));
    let Some(code) = code else {
        let chunks = chunk_lines(&cleaned.text, params)
            .into_iter()
            .enumerate()
            .map(|(i, c)| record(c, i, file, ChunkKind::Code))
            .collect();
        return DocChunks { chunks, license_lines: 0, ..DocChunks::default() };
    };
    let license_lines = code.dropped_lines("license");
    let (defs, refs) = (code.defs, code.refs);
    // Parts count per heading path across the file's code and docs chunks alike, so an
    // item's docs chunk (heading path: its symbol) gets an id of its own.
    let mut seen: BTreeMap<Vec<String>, u32> = BTreeMap::new();
    let mut chunks: Vec<ChunkRecord> = code
        .chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let heading_path: Vec<String> = c.symbol.iter().cloned().collect();
            let part = seen.entry(heading_path.clone()).or_default();
            let dc = DocChunk {
                heading_path,
                part: *part,
                text: c.text,
                overlap_chars: c.overlap,
                is_code: true,
                start_line: c.start_line,
                end_line: c.end_line,
            };
            *part += 1;
            let mut r = record(dc, i, file, ChunkKind::Code);
            r.symbol = c.symbol;
            r.symbol_kind = Some(c.symbol_kind);
            r.signature = c.signature;
            r.symbols = c.symbols;
            r
        })
        .collect();
    // After the code, so that a code file's first chunk (ordinal 0) stays code: the
    // embedder gives a page's opening to a file whose first chunk is docs.
    for block in &code.docs {
        // A guide's title is its first H1, as a page's is.
        let title = block.symbol.is_none().then(|| first_h1(&block.text)).flatten();
        let title = title.as_deref().unwrap_or(file);
        for c in docs_in_code(block, params) {
            let part = seen.entry(c.heading_path.clone()).or_default();
            let c = DocChunk { part: *part, ..c };
            *part += 1;
            chunks.push(record(c, chunks.len(), title, ChunkKind::Docs));
        }
    }
    DocChunks { chunks, license_lines, defs, refs, too_deep: code.too_deep }
}

/// The docs chunks of documentation written in code ([`code::DocBlock`]), at the
/// file's lines: a module's guide chunked as a markdown page; an item's doc comment
/// whole (split only past `max_chars`) under its symbol's heading path. Their text is
/// markdown (rustdoc) or reST prose, whose underlined titles read as headings.
fn docs_in_code(block: &code::DocBlock, params: &ChunkParams) -> Vec<DocChunk> {
    let whole = ChunkParams { split_level: 0, ..params.clone() };
    let p = if block.symbol.is_some() { &whole } else { params };
    let offset = block.start_line - 1;
    chunk_markdown(&block.text, p)
        .into_iter()
        .map(|c| DocChunk {
            heading_path: block.symbol.iter().cloned().chain(c.heading_path).collect(),
            start_line: c.start_line + offset,
            end_line: c.end_line + offset,
            ..c
        })
        .collect()
}

impl Stage for Chunk {
    const NAME: &'static str = "chunk";
    /// 13: a chunk's text is cut at [`MAX_CHUNK_BYTES`] (a minified or generated line).
    /// 12: C, C++, C#, Ruby, PHP, Kotlin, Swift, Scala, Bash and Lua are parsed (issue 70).
    /// 11: rst, AsciiDoc, MDX, notebooks and HTML files are docs (issue 70).
    /// 10: a Rust guide runs from its first `//!` to its last, the attributes between
    ///    (`#![doc = include_str!(…)]`) kept as written.
    /// 9: an item's doc or a guide counts its prose only (not examples) against its
    ///    threshold.
    /// 8: chunks say when their file is not the package's own code (`origin`).
    /// 7: documentation written in code is docs: a module's guide (`//!`, a module
    ///    docstring) leaves the code for docs chunks; exported items' long doc
    ///    comments get a docs chunk too.
    /// 5: definitions say whether the package exports them.
    /// 4: the symbol table (definitions and references) beside the chunks.
    /// 3: containers nested past MAX_SCOPE_DEPTH are chunked as lines.
    /// 2: per-document items carry licence counts; code chunks.
    const VERSION: u32 = 13;
    const DEPS: &'static [&'static str] = &["clean-gitbook"];
    type Params = ChunkParams;
    type Prepared = ();

    fn check(c: &ChunkParams) -> Result<(), ParamError> {
        if !(1..=6).contains(&c.split_level) {
            return Err(ParamError::new("split_level", "stages.chunk.split_level must be 1 to 6"));
        }
        let range = |key: &str, v: usize, lo: f64, hi: f64| check_range(Self::NAME, key, v as f64, lo, hi);
        range("max_chars", c.max_chars, 200.0, 1_000_000.0)?;
        range("overlap_chars", c.overlap_chars, 0.0, c.max_chars as f64)?;
        range("code_max_lines", c.code_max_lines, 4.0, 10_000.0)?;
        range("code_tiny_lines", c.code_tiny_lines, 0.0, 10_000.0)?;
        range("code_merge_max_lines", c.code_merge_max_lines, 1.0, 10_000.0)
    }

    fn run(&self, params: &ChunkParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let cleaned: CleanManifest = ctx.input("clean-gitbook")?;
        let mut out = StageOutput::default();
        let digests = ctx.memoised(
            &cleaned.docs,
            |d| ctx.item_key(&[("source", &d.doc.source), ("rel", &d.doc.rel)], d.clean),
            |d| {
                let c: Cleaned = ctx.load(d.clean, "cleaned document")?;
                Ok(serde_json::to_vec(&chunk_document_full(&d.doc, &c, params))?)
            },
            &mut out,
        )?;
        let paths: Vec<String> = cleaned.docs.iter().map(|d| d.doc.path()).collect();
        let tags = cluster_tags(&paths);
        let mut all = Vec::new();
        let mut parsed: Vec<Parsed> = Vec::new();
        let (mut license_lines, mut license_files, mut deep) = (0u64, 0usize, Vec::new());
        for (doc, d) in cleaned.docs.iter().zip(digests) {
            let DocChunks { chunks: mut records, license_lines: dropped, defs, refs, too_deep } =
                ctx.load(d, "document chunks")?;
            deep.extend(too_deep.then(|| doc.doc.path()));
            if !defs.is_empty() || !refs.is_empty() {
                parsed.push(Parsed { first: all.len(), path: doc.doc.path(), defs, refs });
            }
            if dropped > 0 {
                license_lines += u64::from(dropped);
                license_files += 1;
            }
            let t = tags.get(&doc.doc.path()).cloned().unwrap_or_default();
            for r in &mut records {
                r.cluster_tags.clone_from(&t);
                // Not part of the per-document memo: a new commit re-chunks only changed files.
                r.repo.clone_from(&doc.doc.repo);
                r.commit.clone_from(&doc.doc.commit);
                r.url.clone_from(&doc.doc.url);
            }
            all.extend(records);
        }
        if license_lines > 0 {
            out.notes.push(format!(
                "dropped {} in {}",
                atlas_runtime::words::count(
                    usize::try_from(license_lines).unwrap_or(usize::MAX),
                    "licence-header line"
                ),
                atlas_runtime::words::count(license_files, "file")
            ));
        }
        out.notes.extend(code::deep_note(&deep));
        out.notes.extend(origin::mark_legacy(&mut all));
        cross_link(&mut all);
        let mut seen = BTreeSet::new();
        for c in &all {
            if !seen.insert(c.chunk_id.as_str()) {
                bail!("duplicate chunk id {} in {}", c.chunk_id, c.path);
            }
        }
        let parquet = atlas_runtime::chunk_table::to_parquet(&all).context("writing chunks.parquet")?;
        let pq = ctx.cache.put(&parquet)?;
        out.objects.insert(pq);
        let (defs, refs) = symbol_table(&all, &parsed);
        let sym = ctx.cache.put(&atlas_runtime::symbols::definitions_to_parquet(&defs).context("writing symbols")?)?;
        let rfs =
            ctx.cache.put(&atlas_runtime::symbols::references_to_parquet(&refs).context("writing references")?)?;
        out.objects.extend([sym, rfs]);
        if !defs.is_empty() {
            out.notes.push(format!(
                "symbol table: {}, {} by name",
                atlas_runtime::words::count(defs.len(), "definition"),
                atlas_runtime::words::count(refs.len(), "reference")
            ));
        }
        let manifest = ctx.cache.put_json(&ChunkManifest {
            chunks: pq,
            chunk_count: all.len(),
            doc_count: cleaned.docs.len(),
            license_lines_dropped: license_lines,
            symbols: sym,
            references: rfs,
            definition_count: defs.len(),
            reference_count: refs.len(),
        })?;
        out.objects.insert(manifest);
        out.output = Some(manifest);
        Ok(out)
    }

    /// `chunks.parquet`, `symbols.parquet`, `references.parquet`.
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: ChunkManifest = load_json(out.cache, output, "the chunk manifest")?;
        out.write("chunks.parquet", &out.cache.get_required(m.chunks)?, true)?;
        out.write(atlas_runtime::symbols::DEFINITIONS_FILE, &out.cache.get_required(m.symbols)?, true)?;
        out.write(atlas_runtime::symbols::REFERENCES_FILE, &out.cache.get_required(m.references)?, true)
    }
}

/// What one code document's parse saw, and where its chunks start in the stage's list.
struct Parsed {
    first: usize,
    path: String,
    defs: Vec<code::CodeDef>,
    refs: Vec<(String, u32)>,
}

/// The symbol table of the chunks `all`.
fn symbol_table(
    all: &[ChunkRecord],
    parsed: &[Parsed],
) -> (Vec<atlas_runtime::symbols::Definition>, Vec<atlas_runtime::symbols::Reference>) {
    let docs: Vec<symbols::DocSymbols<'_>> = parsed
        .iter()
        .filter_map(|p| {
            let mut chunks: Vec<&ChunkRecord> = all
                .get(p.first..)?
                .iter()
                .take_while(|c| c.path == p.path)
                .filter(|c| c.kind == ChunkKind::Code)
                .collect();
            let head = *chunks.first()?;
            chunks.sort_by_key(|c| c.start_line);
            Some(symbols::DocSymbols {
                path: &head.path,
                language: head.language.as_deref().unwrap_or(""),
                chunks,
                defs: &p.defs,
                refs: &p.refs,
            })
        })
        .collect();
    symbols::table(&docs)
}
