//! The fielded BM25 index (tantivy): its schema and analyzers, shared by the build
//! (the bm25 stage) and the query side.
//!
//! - `atlas_prose` (text, title, heading): code-aware splitting, lowercase, English
//!   stemming.
//! - `atlas_code` (file_path, symbol): code-aware splitting and lowercase, no stemming.
//!
//! Code-aware splitting keeps every identifier whole and adds its parts:
//! `getApplication` → `getApplication`, `get`, `Application`; `dump_dict` →
//! `dump_dict`, `dump`, `dict`; `Foo::bar` and `self.x` → the path, then each segment.

use tantivy::schema::{FAST, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{Language, LowerCaser, Stemmer, TextAnalyzer, Token, TokenStream, Tokenizer};
use tantivy::{Index, TantivyDocument};

pub const PROSE: &str = "atlas_prose";
pub const CODE: &str = "atlas_code";

/// Field names, in the order the manifest lists their boosts.
pub const FIELDS: [&str; 5] = ["text", "title", "heading", "file_path", "symbol"];

/// The default field boosts (the bm25 stage's params; the runtime's fallback for a
/// manifest without boosts). The text counts most: a chunk's text already holds its
/// own heading line, and short fields weighted up let one common word in a page's
/// title outvote a chunk whose text holds several of the query's words (0.3 sits in
/// the middle of the development sets' plateau, 0 to 0.5; docs/decisions.md, "Field
/// boosts").
pub const DEFAULT_BOOSTS: [(&str, f32); 5] =
    [("text", 1.0), ("title", 0.3), ("heading", 0.3), ("file_path", 0.3), ("symbol", 0.3)];

/// The index document of chunk number `i`: the one definition of what each field holds.
pub fn document(schema: &Schema, i: usize, c: &crate::chunk_table::ChunkRecord) -> TantivyDocument {
    let f = |name: &str| schema.get_field(name).expect("field of the Atlas schema");
    let mut doc = TantivyDocument::default();
    doc.add_u64(f("chunk"), i as u64);
    doc.add_text(f("text"), &c.text);
    doc.add_text(f("title"), &c.title);
    doc.add_text(f("heading"), c.heading_path.join(" > "));
    doc.add_text(f("file_path"), path_text(&c.path));
    let symbols: Vec<&str> = c.symbol.iter().chain(&c.symbols).map(String::as_str).collect();
    doc.add_text(f("symbol"), symbols.join(" "));
    doc.add_text(f("kind"), c.kind.as_str());
    doc.add_text(f("section"), &c.section);
    doc.add_text(f("language"), c.language.as_deref().unwrap_or(""));
    doc
}

pub fn schema() -> Schema {
    let mut b = Schema::builder();
    let text = |tok: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(tok).set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
    };
    b.add_u64_field("chunk", INDEXED | STORED | FAST);
    b.add_text_field("text", text(PROSE));
    b.add_text_field("title", text(PROSE));
    b.add_text_field("heading", text(PROSE));
    b.add_text_field("file_path", text(CODE));
    b.add_text_field("symbol", text(CODE));
    b.add_text_field("kind", STRING | FAST);
    b.add_text_field("section", STRING | FAST);
    b.add_text_field("language", STRING | FAST);
    b.build()
}

/// Registers the analyzers the schema names. Call on every opened index.
pub fn register(index: &Index) {
    index.tokenizers().register(
        PROSE,
        TextAnalyzer::builder(CodeSplitter).filter(LowerCaser).filter(Stemmer::new(Language::English)).build(),
    );
    index.tokenizers().register(CODE, TextAnalyzer::builder(CodeSplitter).filter(LowerCaser).build());
}

/// `file_path` text: path segments, the `.md` extension dropped.
pub fn path_text(path: &str) -> String {
    path.strip_suffix(".md").unwrap_or(path).replace(['/', '-'], " ")
}

/// Splits text into words and identifiers; identifiers also yield their parts.
#[derive(Clone, Debug, Default)]
pub struct CodeSplitter;

#[derive(Debug)]
pub struct VecTokenStream {
    tokens: Vec<Token>,
    at: usize,
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        if self.at < self.tokens.len() {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn token(&self) -> &Token {
        &self.tokens[self.at - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.at - 1]
    }
}

impl Tokenizer for CodeSplitter {
    type TokenStream<'a> = VecTokenStream;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        VecTokenStream { tokens: split(text), at: 0 }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of `text`: each word; for identifiers, the whole and its parts at the
/// same position.
pub fn split(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut position = 0;
    let mut push = |from: usize, to: usize, position: usize| {
        out.push(Token {
            offset_from: from,
            offset_to: to,
            position,
            text: text[from..to].to_owned(),
            position_length: 1,
        });
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let c = text[i..].chars().next().expect("in bounds");
        if !is_word(c) {
            i += c.len_utf8();
            continue;
        }
        // A path: word((::|.)word)*
        let start = i;
        let mut segments = Vec::new();
        loop {
            let seg_start = i;
            while i < text.len() && text[i..].starts_with(is_word) {
                i += text[i..].chars().next().map_or(1, char::len_utf8);
            }
            segments.push((seg_start, i));
            let sep = if text[i..].starts_with("::") {
                2
            } else if bytes.get(i) == Some(&b'.') && text[i + 1..].starts_with(|c: char| c.is_alphabetic() || c == '_')
            {
                1
            } else {
                0
            };
            if sep > 0 && text[i + sep..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
                i += sep;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            push(start, i, position);
        }
        for (a, b) in segments {
            let parts = parts(&text[a..b]);
            push(a, b, position);
            if parts.len() > 1 {
                for (pa, pb) in parts {
                    push(a + pa, a + pb, position);
                }
            }
            position += 1;
        }
    }
    out
}

/// Parts of one identifier: split at `_` and at lower→upper and letter↔digit
/// changes (`HTTPServer` → `HTTP`, `Server`). Byte ranges within the identifier.
fn parts(word: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for k in 0..chars.len() {
        let (i, c) = chars[k];
        if c == '_' {
            if let Some(s) = start.take() {
                out.push((s, i));
            }
            continue;
        }
        let boundary = match (k.checked_sub(1).map(|p| chars[p].1), chars.get(k + 1).map(|n| n.1)) {
            (Some(p), _) if p.is_lowercase() && c.is_uppercase() => true,
            (Some(p), Some(n)) if p.is_uppercase() && c.is_uppercase() && n.is_lowercase() => true,
            (Some(p), _) if p.is_alphabetic() != c.is_alphabetic() && p != '_' => true,
            _ => false,
        };
        if boundary && let Some(s) = start.take() {
            out.push((s, i));
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        out.push((s, word.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        split(text).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn identifiers_keep_the_whole_and_add_parts() {
        assert_eq!(words("getApplication"), ["getApplication", "get", "Application"]);
        assert_eq!(words("dump_dict()"), ["dump_dict", "dump", "dict"]);
        assert_eq!(words("Foo::bar_baz"), ["Foo::bar_baz", "Foo", "bar_baz", "bar", "baz"]);
        assert_eq!(words("HTTPServer v2"), ["HTTPServer", "HTTP", "Server", "v2", "v", "2"]);
        assert_eq!(words("Plain words. Next"), ["Plain", "words", "Next"]);
    }
}

/// A bundle's index opened for reading only: tantivy's mmap directory with every write
/// refused and locks that touch no file. Serving never writes into a bundle, so a
/// bundle on a read-only file system (a container image, a shared install) serves.
#[derive(Debug, Clone)]
pub struct ReadOnlyDir(tantivy::directory::MmapDirectory);

impl ReadOnlyDir {
    pub fn open(dir: &std::path::Path) -> tantivy::Result<ReadOnlyDir> {
        Ok(ReadOnlyDir(tantivy::directory::MmapDirectory::open(dir)?))
    }
}

fn read_only_error() -> std::sync::Arc<std::io::Error> {
    std::sync::Arc::new(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "a bundle's index is read-only"))
}

impl tantivy::Directory for ReadOnlyDir {
    fn get_file_handle(
        &self,
        path: &std::path::Path,
    ) -> Result<std::sync::Arc<dyn tantivy::directory::FileHandle>, tantivy::directory::error::OpenReadError> {
        self.0.get_file_handle(path)
    }

    fn delete(&self, path: &std::path::Path) -> Result<(), tantivy::directory::error::DeleteError> {
        Err(tantivy::directory::error::DeleteError::IoError { io_error: read_only_error(), filepath: path.to_owned() })
    }

    fn exists(&self, path: &std::path::Path) -> Result<bool, tantivy::directory::error::OpenReadError> {
        self.0.exists(path)
    }

    fn open_write(
        &self,
        path: &std::path::Path,
    ) -> Result<tantivy::directory::WritePtr, tantivy::directory::error::OpenWriteError> {
        Err(tantivy::directory::error::OpenWriteError::IoError {
            io_error: read_only_error(),
            filepath: path.to_owned(),
        })
    }

    fn atomic_read(&self, path: &std::path::Path) -> Result<Vec<u8>, tantivy::directory::error::OpenReadError> {
        self.0.atomic_read(path)
    }

    fn atomic_write(&self, _path: &std::path::Path, _data: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "a bundle's index is read-only"))
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        Ok(())
    }

    /// Nothing writes a read-only index, so a reader needs no lock file.
    fn acquire_lock(
        &self,
        _lock: &tantivy::directory::Lock,
    ) -> Result<tantivy::directory::DirectoryLock, tantivy::directory::error::LockError> {
        Ok(tantivy::directory::DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _cb: tantivy::directory::WatchCallback) -> tantivy::Result<tantivy::directory::WatchHandle> {
        Ok(tantivy::directory::WatchHandle::empty())
    }
}
/// A read-only view of a bundle's index (what [`field_stats`] opens, [`postings`] reads).
pub type Searcher = tantivy::Searcher;

/// One term's postings in one segment: a term, and each chunk it is in with its
/// frequency there and the field's length (tantivy's fieldnorm code decoded).
#[derive(Debug, Clone, PartialEq)]
pub struct TermPostings {
    pub term: String,
    /// `(chunk, tf, norm)` in document order.
    pub docs: Vec<(u32, u32, u32)>,
}

/// What BM25 needs of a field besides its postings: the documents and the tokens, over
/// every segment (tantivy's `Bm25StatisticsProvider`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldStats {
    pub field: &'static str,
    pub docs: u64,
    pub tokens: u64,
}

/// The index in `dir` (a bundle's `tantivy/`), opened read-only, with the statistics of
/// each scored field.
pub fn field_stats(dir: &std::path::Path) -> tantivy::Result<(tantivy::Searcher, Vec<FieldStats>)> {
    let index = Index::open(ReadOnlyDir::open(dir)?)?;
    let searcher = index.reader()?.searcher();
    let mut out = Vec::new();
    for field in FIELDS {
        let f = index.schema().get_field(field)?;
        let mut stats = FieldStats { field, docs: 0, tokens: 0 };
        for seg in searcher.segment_readers() {
            stats.docs += u64::from(seg.max_doc());
            stats.tokens += seg.inverted_index(f)?.total_num_tokens();
        }
        out.push(stats);
    }
    Ok((searcher, out))
}

/// Every term of `field` in segment `segment` of `searcher` with all its postings,
/// handed to `sink` in term order, in batches of whole terms holding about `batch`
/// postings (a term with more is a batch of its own).
pub fn postings<E: From<tantivy::TantivyError>>(
    searcher: &tantivy::Searcher,
    field: &str,
    segment: usize,
    batch: usize,
    mut sink: impl FnMut(Vec<TermPostings>) -> Result<(), E>,
) -> Result<(), E> {
    use tantivy::postings::Postings as _;
    use tantivy::{DocSet, TERMINATED};
    let f = searcher.schema().get_field(field)?;
    let seg = &searcher.segment_readers()[segment];
    let inverted = seg.inverted_index(f)?;
    let norms = seg.get_fieldnorms_reader(f)?;
    let chunk_of = seg.fast_fields().u64("chunk")?;
    let alive = seg.alive_bitset();
    let mut stream = inverted.terms().stream().map_err(tantivy::TantivyError::from)?;
    let (mut out, mut held) = (Vec::new(), 0usize);
    while stream.advance() {
        let term = String::from_utf8_lossy(stream.key()).into_owned();
        let mut postings = inverted
            .read_postings_from_terminfo(stream.value(), IndexRecordOption::WithFreqs)
            .map_err(tantivy::TantivyError::from)?;
        let mut docs = Vec::new();
        while postings.doc() != TERMINATED {
            let doc = postings.doc();
            if alive.is_none_or(|a| a.is_alive(doc)) {
                let chunk = chunk_of.first(doc).and_then(|c| u32::try_from(c).ok()).unwrap_or(u32::MAX);
                docs.push((chunk, postings.term_freq(), norms.fieldnorm(doc)));
            }
            postings.advance();
        }
        if docs.is_empty() {
            continue;
        }
        held += docs.len();
        out.push(TermPostings { term, docs });
        if held >= batch {
            sink(std::mem::take(&mut out))?;
            held = 0;
        }
    }
    if !out.is_empty() {
        sink(out)?;
    }
    Ok(())
}
