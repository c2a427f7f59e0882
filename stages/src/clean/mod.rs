//! clean-gitbook: GitBook markup → plain CommonMark, keeping every word of content
//! (the cleaner itself is [`gitbook`]). Markdown documents are cleaned, other files
//! are mirrored verbatim; the other doc formats (rst, AsciiDoc, MDX, notebooks, HTML)
//! become markdown first ([`formats`]). Each document is memoised on its content. The stage also
//! writes `clean-report.json`: what was converted per file, and what remains.

pub mod formats;
pub mod gitbook;

use std::collections::BTreeMap;

use anyhow::Context as _;
use atlas_cache::Digest;
use serde::{Deserialize, Serialize};

use crate::artifacts::{CleanDoc, CleanManifest, Cleaned, CrawlManifest, Residual};
use crate::runner::{Ctx, Outputs, Stage, StageOutput, load_json};
use crate::text::{DocFormat, doc_format};
pub use gitbook::{CleanParams, MAX_QUOTE_DEPTH, MAX_TAG_DEPTH, TAGS_TOO_DEEP, TOO_DEEP, clean};

/// The validation report: what was converted per file, and what remains.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CleanReport {
    pub files: usize,
    pub totals: BTreeMap<String, u64>,
    pub residual_gitbook: usize,
    pub residual_html: usize,
    pub per_file: BTreeMap<String, FileReport>,
}

impl CleanReport {
    /// How many pages have a `key` count, and the first five of them, for a note.
    fn counted(&self, key: &str) -> Option<(usize, String)> {
        let pages: Vec<&str> =
            self.per_file.iter().filter(|(_, f)| f.counts.contains_key(key)).map(|(p, _)| p.as_str()).collect();
        (!pages.is_empty()).then(|| (pages.len(), pages[..pages.len().min(5)].join(", ")))
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FileReport {
    pub counts: BTreeMap<String, u32>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub residual: Vec<Residual>,
}

#[derive(Debug, Default)]
pub struct CleanGitbook;

impl Stage for CleanGitbook {
    const NAME: &'static str = "clean-gitbook";
    /// 2: depth-limited HTML; nested tables are text in their cell. 3: depth-limited
    /// GitBook tags and hint quotes. 4: rst, AsciiDoc, MDX, notebooks and HTML files
    /// become markdown (issue 70).
    const VERSION: u32 = 4;
    const DEPS: &'static [&'static str] = &["crawl"];
    type Params = CleanParams;
    type Prepared = ();

    fn run(&self, params: &CleanParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let crawl: CrawlManifest = ctx.input("crawl")?;
        let mut out = StageOutput::default();
        // What rst pages' `:ref:` and `:doc:` roles resolve against, per source; an rst
        // page's memo key holds its source's set.
        let mut sets: BTreeMap<&str, (formats::DocSet, String)> = BTreeMap::new();
        let rst_sources: std::collections::BTreeSet<&str> =
            crawl.docs.iter().filter(|d| is_rst(&d.rel)).map(|d| d.source.as_str()).collect();
        for source in rst_sources {
            let mut set = formats::DocSet::default();
            for d in crawl.docs.iter().filter(|d| d.source == source) {
                // Each rst page read once and let go: only its labels are kept.
                let bytes = if is_rst(&d.rel) { ctx.cache.get(d.digest)? } else { None };
                set.add(&d.rel, bytes.as_deref().and_then(|b| std::str::from_utf8(b).ok()));
            }
            let key = Digest::of(&serde_json::to_vec(&set)?).to_hex();
            sets.insert(source, (set, key));
        }
        let empty = (formats::DocSet::default(), String::new());
        let digests = ctx.memoised(
            &crawl.docs,
            |doc| {
                let format = doc_format(&doc.rel).map_or("none".to_owned(), |f| format!("{f:?}"));
                let links = if is_rst(&doc.rel) { sets.get(doc.source.as_str()).map_or("", |s| &s.1) } else { "" };
                ctx.item_key(&[("format", &format), ("links", links)], doc.digest)
            },
            |doc| {
                let bytes = ctx.cache.get_required(doc.digest)?;
                let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", doc.path()))?;
                let cleaned = match doc_format(&doc.rel) {
                    Some(format) => {
                        let set = &sets.get(doc.source.as_str()).unwrap_or(&empty).0;
                        formats::convert(format, &doc.rel, &text, set, params)
                    }
                    None => Cleaned { text, ..Cleaned::default() }, // code is mirrored verbatim
                };
                Ok(serde_json::to_vec(&cleaned)?)
            },
            &mut out,
        )?;
        let mut report = CleanReport { files: crawl.docs.len(), ..CleanReport::default() };
        let mut docs = Vec::with_capacity(crawl.docs.len());
        for (doc, d) in crawl.docs.into_iter().zip(digests) {
            let c: Cleaned = ctx.load(d, "cleaned document")?;
            for (k, v) in &c.counts {
                *report.totals.entry(k.clone()).or_default() += u64::from(*v);
            }
            report.residual_gitbook += c.residual.iter().filter(|r| r.kind == "gitbook").count();
            report.residual_html += c.residual.iter().filter(|r| r.kind == "html").count();
            report.per_file.insert(doc.path(), FileReport { counts: c.counts, residual: c.residual });
            docs.push(CleanDoc { doc, clean: d });
        }
        if let Some((n, pages)) = report.counted(TOO_DEEP) {
            out.notes.push(format!(
                "{} {} HTML nested too deep to convert, kept as plain text: {pages}",
                atlas_runtime::words::count(n, "page"),
                atlas_runtime::words::agree(n, "holds", "hold"),
            ));
        }
        if let Some((n, pages)) = report.counted(TAGS_TOO_DEEP) {
            out.notes.push(format!(
                "{} {} GitBook tags past {MAX_TAG_DEPTH} levels or hints past {MAX_QUOTE_DEPTH}, kept at that depth: \
                 {pages}",
                atlas_runtime::words::count(n, "page"),
                atlas_runtime::words::agree(n, "nests", "nest"),
            ));
        }
        for (key, what) in [
            (formats::BLOCKS_TOO_DEEP, format!("blocks nested past {} levels, kept as text", formats::MAX_BLOCK_DEPTH)),
            (formats::UNCLOSED_BLOCK, "a block left open to the end of the page".to_owned()),
            (formats::NOTEBOOK_INVALID, "not notebook JSON, left out".to_owned()),
            (formats::CELLS_DROPPED, format!("notebook cells past {} left out", formats::notebook::MAX_CELLS)),
        ] {
            if let Some((n, pages)) = report.counted(key) {
                out.notes.push(format!("{what}: {} ({pages})", atlas_runtime::words::count(n, "page")));
            }
        }
        if report.residual_gitbook > 0 {
            out.notes
                .push(format!("{} GitBook tags left unconverted (see clean-report.json)", report.residual_gitbook));
        }
        let report_digest = ctx.cache.put_json(&report)?;
        out.objects.insert(report_digest);
        let manifest = ctx.cache.put_json(&CleanManifest { docs, report: report_digest })?;
        out.objects.insert(manifest);
        out.output = Some(manifest);
        Ok(out)
    }

    /// `mirror/` (the cleaned documents that chunk line ranges cite) and
    /// `clean-report.json`.
    fn materialize(output: Digest, out: &mut Outputs<'_>) -> anyhow::Result<()> {
        let m: CleanManifest = load_json(out.cache, output, "the clean manifest")?;
        let cache = out.cache;
        let texts = m.docs.iter().map(|doc| {
            let c: Cleaned = load_json(cache, doc.clean, "cleaned document")?;
            Ok((doc.doc.path(), c.text.into_bytes()))
        });
        out.write_folder("mirror", texts, false)?;
        let report: serde_json::Value = load_json(out.cache, m.report, "the clean report")?;
        out.write("clean-report.json", &serde_json::to_vec_pretty(&report)?, true)
    }
}

fn is_rst(rel: &str) -> bool {
    doc_format(rel) == Some(DocFormat::Rst)
}
