//! Text helpers shared by stages: markdown line scanning (headings, fences, code
//! spans), what kind of file a path is, and the time stamp format.

pub mod html;
pub mod page;

/// `(level, text)` of an ATX heading line.
pub fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &line[indent..];
    let level = t.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    Some((level, rest.trim()))
}

/// Tracks fenced code blocks across lines (``` and ~~~, any indentation, inside
/// blockquotes too).
#[derive(Debug, Default, Clone)]
pub struct Fence {
    open: Option<(u8, usize)>,
}

impl Fence {
    /// Feeds one line; returns true when the line is part of a fence (its opener,
    /// content or closer).
    pub fn step(&mut self, line: &str) -> bool {
        let t = line.trim_start_matches([' ', '\t', '>']);
        let marker = t.bytes().next().filter(|b| *b == b'`' || *b == b'~');
        let run = marker.map_or(0, |m| t.bytes().take_while(|&b| b == m).count());
        match self.open {
            Some((m, n)) => {
                if marker == Some(m) && run >= n && t[run..].trim().is_empty() {
                    self.open = None;
                }
                true
            }
            None => {
                if let Some(m) = marker
                    && run >= 3
                    && !(m == b'`' && t[run..].contains('`'))
                {
                    self.open = Some((m, run));
                    return true;
                }
                false
            }
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

/// Byte ranges of inline code spans (backtick runs matched by equal runs) on one line.
pub fn code_spans(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            let run = b[i..].iter().take_while(|&&c| c == b'`').count();
            let open_end = i + run;
            let mut j = open_end;
            let mut closed = None;
            while j < b.len() {
                if b[j] == b'`' {
                    let r = b[j..].iter().take_while(|&&c| c == b'`').count();
                    if r == run {
                        closed = Some(j + r);
                        break;
                    }
                    j += r;
                } else {
                    j += 1;
                }
            }
            match closed {
                Some(end) => {
                    spans.push((i, end));
                    i = end;
                }
                None => i = open_end,
            }
        } else {
            i += 1;
        }
    }
    spans
}

/// A documentation format: the clean stage turns each into markdown (the
/// [`crate::clean::formats`]) and the chunk stage chunks it as docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocFormat {
    /// `.md`, `.markdown`: the GitBook cleaner.
    Markdown,
    /// `.rst`, `.rest`: reStructuredText.
    Rst,
    /// `.adoc`, `.asciidoc` (not `.asc`: PGP signatures use it).
    AsciiDoc,
    /// `.mdx`: markdown with JSX.
    Mdx,
    /// `.ipynb`: a Jupyter notebook (JSON).
    Notebook,
    /// `.html`, `.htm`: a page through the HTML cleaner.
    Html,
}

/// The documentation format of a path, from its extension; None for code and other
/// text, which is mirrored verbatim and chunked as code.
pub fn doc_format(rel: &str) -> Option<DocFormat> {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    let ext = file.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "md" | "markdown" => DocFormat::Markdown,
        "rst" | "rest" => DocFormat::Rst,
        "adoc" | "asciidoc" => DocFormat::AsciiDoc,
        "mdx" => DocFormat::Mdx,
        "ipynb" => DocFormat::Notebook,
        "html" | "htm" => DocFormat::Html,
        _ => return None,
    })
}

/// The language of a code file, from its extension (None when unknown).
pub fn language_of(rel: &str) -> Option<&'static str> {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    let ext = file.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "mts" | "cts" | "tsx" => "typescript",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "cpp",
        "sh" | "bash" => "shell",
        "cs" => "csharp",
        "rb" => "ruby",
        "php" => "php",
        "kt" | "kts" => "kotlin",
        "swift" => "swift",
        "scala" | "sc" => "scala",
        "lua" => "lua",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "json" => "json",
        "md" | "markdown" => "markdown",
        _ => return None,
    })
}

/// RFC 3339 UTC time of now (seconds), as manifests and crawl records hold it.
pub fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
