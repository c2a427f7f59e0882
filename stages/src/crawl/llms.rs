//! `llms.txt` as sites really write it: markdown list links with an optional
//! `: description`, `##` groups (which may carry `<a id>` anchors), titles with
//! escapes such as `\(3.x\)`, absolute, root-relative and relative links, base URLs
//! with a path prefix, duplicate URLs, and links to other hosts.

use url::Url;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub title: String,
    pub url: Url,
    pub description: Option<String>,
    /// The `##` group the link is listed under.
    pub group: Option<String>,
    /// The page's path below the site's base, e.g. `setup/install.md`.
    pub rel: String,
    /// Where the page lives in the mirror: `<section>/<path>`. The section is the
    /// `##` group's slug (then the whole URL path follows), else the URL's first
    /// folder (which the path already starts with), else `root`.
    pub mirror: String,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Index {
    pub title: Option<String>,
    pub entries: Vec<Entry>,
    /// Groups in the order listed.
    pub groups: Vec<String>,
    /// `(title, url)` of links to other hosts: reported, never fetched.
    pub offsite: Vec<(String, String)>,
    /// `(title, url)` of links to a URL already listed under another title.
    pub duplicates: Vec<(String, String)>,
    /// `(title, url, why)` of links whose mirror path would not be a safe relative
    /// path: reported, never fetched.
    pub refused: Vec<(String, String, String)>,
}

/// Why a body is not an llms.txt index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotAnIndex {
    #[error("the llms.txt URL answered an HTML page, not an llms.txt index; check the url")]
    Html,
    #[error("no page links found (expected markdown list items such as `- [Title](url)`); is this an llms.txt?")]
    NoLinks,
}

/// The folder URL that page paths are relative to: the llms.txt URL's directory.
pub fn base_of(llms_url: &Url) -> Url {
    llms_url.join("./").unwrap_or_else(|_| llms_url.clone())
}

/// Parses an llms.txt body fetched from `llms_url`; links to other hosts are offsite.
pub fn parse(text: &str, llms_url: &Url) -> Result<Index, NotAnIndex> {
    parse_with(text, llms_url, &[])
}

/// Does `url` live on one of `allow` (`host` or `host:port`, as the config lists them)?
pub fn host_allowed(allow: &[String], url: &Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    allow.iter().any(|a| match a.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            h.eq_ignore_ascii_case(host) && url.port_or_known_default().is_some_and(|p| p.to_string() == port)
        }
        _ => a.eq_ignore_ascii_case(host),
    })
}

/// [`parse`], also taking links to the hosts in `allow_hosts` (a mirror, a staging
/// copy, a moved site). Their pages are mirrored by their path below the base's path
/// when they sit under it, else by their whole path.
pub fn parse_with(text: &str, llms_url: &Url, allow_hosts: &[String]) -> Result<Index, NotAnIndex> {
    let head = text.trim_start().get(..200).unwrap_or(text.trim_start()).to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return Err(NotAnIndex::Html);
    }
    let base = base_of(llms_url);
    let mut index = Index::default();
    let mut group: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(h) = t.strip_prefix("## ") {
            let name = unescape(&strip_anchors(h)).trim().to_owned();
            if !name.is_empty() {
                index.groups.push(name.clone());
                group = Some(name);
            }
            continue;
        }
        if let Some(h) = t.strip_prefix("# ") {
            index.title.get_or_insert_with(|| unescape(&strip_anchors(h)).trim().to_owned());
            continue;
        }
        let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")).or_else(|| t.strip_prefix("+ ")) else {
            continue;
        };
        let Some((title, href, rest)) = split_link(item.trim_start()) else { continue };
        let description = rest.trim().strip_prefix(':').map(|d| d.trim().to_owned()).filter(|d| !d.is_empty());
        let Ok(url) = llms_url.join(href.trim()) else { continue };
        let title = unescape(&title);
        let same_host =
            url.host_str() == base.host_str() && url.port_or_known_default() == base.port_or_known_default();
        if !matches!(url.scheme(), "http" | "https") || !(same_host || host_allowed(allow_hosts, &url)) {
            index.offsite.push((title, url.to_string()));
            continue;
        }
        let mut url = url;
        url.set_fragment(None);
        if !seen.insert(url.to_string()) {
            index.duplicates.push((title, url.to_string()));
            continue;
        }
        let rel = if same_host {
            rel_path(&base, &url)
        } else {
            let mut other = url.clone();
            other.set_path(base.path());
            rel_path(&other, &url).or_else(|| {
                other.set_path("/");
                rel_path(&other, &url)
            })
        };
        let Some(rel) = rel else {
            index.offsite.push((title, url.to_string()));
            continue;
        };
        let mirror = match &group {
            Some(g) => format!("{}/{rel}", section_slug(g)),
            None if rel.contains('/') => rel.clone(),
            None => format!("root/{rel}"),
        };
        // The mirror path is joined onto the mirror folder: it must stay inside it.
        if let Err(e) = atlas_runtime::safe_path::check(&mirror) {
            index.refused.push((title, url.to_string(), e.to_string()));
            continue;
        }
        index.entries.push(Entry { title, url, description, group: group.clone(), rel, mirror });
    }
    if index.entries.is_empty() && index.offsite.is_empty() && index.refused.is_empty() {
        return Err(NotAnIndex::NoLinks);
    }
    Ok(index)
}

/// `[title](href) rest` → (title, href, rest), honouring `\]` escapes in the title and
/// balanced parentheses in the href.
fn split_link(s: &str) -> Option<(String, &str, &str)> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '[' {
        return None;
    }
    let mut title = String::new();
    let mut close = None;
    let mut escaped = false;
    let mut depth = 0usize;
    for (i, c) in chars.by_ref() {
        if escaped {
            title.push('\\');
            title.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '[' => {
                depth += 1;
                title.push(c);
            }
            ']' if depth > 0 => {
                depth -= 1;
                title.push(c);
            }
            ']' => {
                close = Some(i);
                break;
            }
            _ => title.push(c),
        }
    }
    let after = &s[close? + 1..];
    let inner = after.strip_prefix('(')?;
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            ')' => {
                let href = inner[..i].split_whitespace().next().unwrap_or_default();
                let href = href.trim_start_matches('<').trim_end_matches('>');
                return Some((title, href, &inner[i + 1..]));
            }
            _ => {}
        }
    }
    None
}

/// Removes markdown backslash escapes: `\(3.x\)` → `(3.x)`.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(char::is_ascii_punctuation) {
            out.push(chars.next().expect("peeked"));
        } else {
            out.push(c);
        }
    }
    out
}

fn strip_anchors(s: &str) -> String {
    let mut out = s.to_owned();
    while let Some(start) = out.find("<a ") {
        let end =
            out[start..].find("</a>").map(|e| start + e + 4).or_else(|| out[start..].find('>').map(|e| start + e + 1));
        match end {
            Some(e) => out.replace_range(start..e, ""),
            None => break,
        }
    }
    out
}

/// The page's path below `base` (percent-decoded), as a mirror file name ending in
/// `.md`; None when the URL is not below the base.
pub fn rel_path(base: &Url, url: &Url) -> Option<String> {
    let path = url.path();
    let rest = path.strip_prefix(base.path())?;
    let decoded = percent_decode(rest);
    let mut rel = decoded.trim_matches('/').to_owned();
    if rel.is_empty() {
        rel = "README".to_owned();
    } else if path.ends_with('/') {
        rel.push_str("/README");
    }
    if rel.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..") {
        return None;
    }
    if !rel.to_ascii_lowercase().ends_with(".md") {
        rel.push_str(".md");
    }
    Some(rel)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A section name as a folder-safe slug: lowercase, `-` between words.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// The mirror folder of a `##` group: its slug, or, when the name has no letter or
/// digit (`## !!!`, `## 🚀`), `section-` and a short hash of the name, so that no
/// group ever maps to an empty folder name.
pub fn section_slug(group: &str) -> String {
    let s = slug(group);
    if s.is_empty() { format!("section-{}", &atlas_runtime::hash::blake3_bytes(group.as_bytes())[..8]) } else { s }
}

/// The section of an entry: its `##` group, or else the first folder of its path.
pub fn section_of(entry: &Entry) -> String {
    crate::artifacts::section_of(&entry.mirror)
}
