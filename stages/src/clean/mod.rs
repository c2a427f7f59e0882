//! clean-gitbook: GitBook markup → plain CommonMark, keeping every word of content
//! (the cleaner itself is [`gitbook`]). Markdown documents are cleaned, other files
//! are mirrored verbatim; each document is memoised on its content. The stage also
//! writes `clean-report.json`: what was converted per file, and what remains.

pub mod gitbook;

use std::collections::BTreeMap;

use anyhow::Context as _;
use atlas_cache::Digest;
use serde::{Deserialize, Serialize};

use crate::artifacts::{CleanDoc, CleanManifest, Cleaned, CrawlManifest, Residual};
use crate::runner::{Ctx, Outputs, Stage, StageOutput, load_json};
use crate::text::is_markdown;
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
    /// GitBook tags and hint quotes.
    const VERSION: u32 = 3;
    const DEPS: &'static [&'static str] = &["crawl"];
    type Params = CleanParams;
    type Prepared = ();

    fn run(&self, params: &CleanParams, ctx: &Ctx<'_>, (): ()) -> anyhow::Result<StageOutput> {
        let crawl: CrawlManifest = ctx.input("crawl")?;
        let mut out = StageOutput::default();
        let digests = ctx.memoised(
            &crawl.docs,
            |doc| {
                let markdown = if is_markdown(&doc.rel) { "yes" } else { "no" };
                ctx.item_key(&[("markdown", markdown)], doc.digest)
            },
            |doc| {
                let bytes = ctx.cache.get_required(doc.digest)?;
                let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", doc.path()))?;
                let cleaned = if is_markdown(&doc.rel) {
                    clean(&text, params)
                } else {
                    Cleaned { text, ..Cleaned::default() } // code is mirrored verbatim
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
