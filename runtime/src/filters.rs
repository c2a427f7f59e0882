//! Which chunks a search keeps: the filters of `search_docs` and `search_code`,
//! applied in memory to a local bundle and pushed into SQL for one served from a
//! database (`remote`). Below both, so neither imports the other.

use serde::{Deserialize, Serialize};

use crate::chunk_table::{ChunkKind, ChunkRecord};

/// A search's filters (all optional; a chunk passes when it matches every one given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Filters {
    pub kind: Option<ChunkKind>,
    pub section: Option<String>,
    pub language: Option<String>,
    /// Matches the repository URL or its last path segment.
    pub repo: Option<String>,
    /// A prefix of the chunk's file path (`<source>/<path>`).
    pub path_prefix: Option<String>,
    pub symbol_kind: Option<String>,
    /// Chunk paths left out: the files a bundle view hides ([`crate::Bundle::hiding`]),
    /// set by the engine from the bundle, never by a caller. Local bundles only.
    #[serde(skip)]
    pub hidden: Option<std::sync::Arc<std::collections::BTreeSet<String>>>,
}

/// Whether `hidden` hides the chunk path `path`: it names the file, or a folder above
/// it (an entry ending in `/`).
pub fn is_hidden(hidden: &std::collections::BTreeSet<String>, path: &str) -> bool {
    hidden.contains(path) || path.match_indices('/').any(|(i, _)| hidden.contains(&path[..=i]))
}

impl Filters {
    pub fn keep(&self, c: &ChunkRecord) -> bool {
        let eq = |want: &Option<String>, got: Option<&str>| want.as_deref().is_none_or(|w| got == Some(w));
        self.kind.is_none_or(|k| k == c.kind)
            && eq(&self.section, Some(&c.section))
            && eq(&self.language, c.language.as_deref())
            && eq(&self.symbol_kind, c.symbol_kind.as_deref())
            && self.path_prefix.as_deref().is_none_or(|p| c.path.starts_with(p))
            && self.hidden.as_ref().is_none_or(|h| !is_hidden(h, &c.path))
            && self.repo.as_deref().is_none_or(|r| {
                c.repo.as_deref().is_some_and(|got| got == r || got.trim_end_matches('/').rsplit('/').next() == Some(r))
            })
    }
    pub(crate) fn is_empty(&self) -> bool {
        *self == Filters::default()
    }

    /// Whether a filter other than a view's hidden files is set: one that may keep few
    /// chunks (a view hides a few files of many, so it never does).
    pub(crate) fn narrows(&self) -> bool {
        !Filters { hidden: None, ..self.clone() }.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_set_hides_its_files_and_the_files_under_its_folders_only() {
        let hidden: std::collections::BTreeSet<String> =
            ["app/src/lib.rs", "app/old/"].into_iter().map(String::from).collect();
        assert!(is_hidden(&hidden, "app/src/lib.rs"));
        assert!(is_hidden(&hidden, "app/old/a.rs") && is_hidden(&hidden, "app/old/deep/b.rs"));
        assert!(!is_hidden(&hidden, "app/src/lib.rs.bak"), "a file is not a prefix");
        assert!(!is_hidden(&hidden, "app/older/a.rs"), "a folder hides its own files only");
        assert!(!is_hidden(&hidden, "app/src/main.rs"));
    }
}
