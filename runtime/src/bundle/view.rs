//! What a bundle shows of its chunks: a chunk with its neighbours, a chunk as a hit
//! (its citation, snippet and links), and the bundle's own description.

use super::*;

/// A chunk as `get_chunk` returns it: the hit's fields and the chunk's own text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkView {
    #[serde(flatten)]
    pub hit: Hit,
    pub text: String,
}

/// A chunk with its neighbours in the same file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkContext {
    pub before: Vec<ChunkView>,
    pub chunk: ChunkView,
    pub after: Vec<ChunkView>,
}

/// What a bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleInfo {
    pub name: String,
    pub version: String,
    pub created: String,
    pub model: String,
    pub dims: usize,
    pub chunks: usize,
    pub embedding_rows: usize,
    pub by_kind: BTreeMap<String, usize>,
    pub by_section: BTreeMap<String, usize>,
    /// Chunks whose file is not the package's own code, by [`crate::Origin`] (none
    /// listed: all its own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_origin: BTreeMap<String, usize>,
    pub sources: Vec<crate::manifest::SourceInfo>,
    pub modes: Vec<String>,
    pub vector_index: String,
    pub bm25_boosts: BTreeMap<String, f32>,
}

impl Bundle {
    /// The hit of the chunk that holds definition `i` (score 0): its citation, URL,
    /// repository and commit.
    pub fn definition_hit(&self, i: u32) -> Hit {
        self.hit(self.definition_chunk(i), 0.0)
    }

    /// A chunk by id with up to `neighbors` chunks before and after it in its file.
    pub fn get_chunk(&self, id: &str, neighbors: usize) -> Result<ChunkContext> {
        let &i = self
            .by_id
            .get(id.trim())
            .ok_or_else(|| Error::Query(format!("no chunk {id:?} in this bundle; use a chunk_id from a search hit")))?;
        let file = &self.by_file[&self.chunks[i as usize].path];
        let at = file.iter().position(|&j| j == i).unwrap_or(0);
        let view = |j: u32| {
            let c = &self.chunks[j as usize];
            ChunkView {
                hit: self.hit(j as usize, 0.0),
                text: self.text(j as usize).get(c.overlap_chars as usize..).unwrap_or(self.text(j as usize)).to_owned(),
            }
        };
        Ok(ChunkContext {
            before: file[at.saturating_sub(neighbors)..at].iter().map(|&j| view(j)).collect(),
            chunk: view(i),
            after: file[(at + 1).min(file.len())..(at + 1 + neighbors).min(file.len())]
                .iter()
                .map(|&j| view(j))
                .collect(),
        })
    }

    pub(crate) fn hit(&self, i: usize, score: f32) -> Hit {
        self.hit_for(i, score, &[])
    }

    /// [`Bundle::hit`] with its snippet the passage that holds the most of the query's
    /// word `stems` ([`snippet::matching`]).
    pub(crate) fn hit_for(&self, i: usize, score: f32, stems: &[String]) -> Hit {
        let c = &self.chunks[i];
        let (snippet, window) =
            if stems.is_empty() { (snippet(c, self.text(i)), None) } else { matching(c, self.text(i), stems) };
        // A docs chunk's own text is its file's lines from `start_line` on (a code
        // chunk may lead with context), so a window's lines are the file's.
        let snippet_lines = window.filter(|_| c.kind == ChunkKind::Docs).map(|(from, to)| {
            let first = c.start_line + from as u32;
            [first, (c.start_line + to as u32).saturating_sub(1).clamp(first, c.end_line.max(first))]
        });
        let mentioned_in = c
            .mentioned_in
            .iter()
            .filter_map(|id| self.by_id.get(id))
            .map(|&j| {
                let d = &self.chunks[j as usize];
                Link { chunk_id: d.chunk_id.clone(), path: d.path.clone(), heading: d.heading_path.join(" > ") }
            })
            .collect();
        Hit {
            score,
            chunk_id: c.chunk_id.clone(),
            library: self.library(),
            path: c.path.clone(),
            url: c.url.clone(),
            title: c.title.clone(),
            heading_path: c.heading_path.clone(),
            start_line: c.start_line,
            end_line: c.end_line,
            snippet,
            snippet_lines,
            kind: c.kind,
            language: c.language.clone(),
            section: c.section.clone(),
            repo: c.repo.clone(),
            commit: c.commit.clone(),
            symbol: c.symbol.clone(),
            symbol_kind: c.symbol_kind.clone(),
            mentions: c.mentions.clone(),
            mentioned_in,
            origin: c.origin,
        }
    }

    /// What the bundle holds, for `get_bundle_info`.
    pub fn info(&self) -> BundleInfo {
        let mut by_kind = BTreeMap::new();
        let mut by_section = BTreeMap::new();
        let mut by_origin = BTreeMap::new();
        for c in &self.chunks {
            if let Some(o) = c.origin {
                *by_origin.entry(o.as_str().to_owned()).or_insert(0) += 1;
            }
            *by_kind.entry(c.kind.as_str().to_owned()).or_insert(0) += 1;
            *by_section.entry(c.section.clone()).or_insert(0) += 1;
        }
        let mut modes = vec!["keyword".to_owned()];
        if !self.opts.keyword_only {
            modes.extend(["vector".to_owned(), "hybrid".to_owned()]);
        }
        let m = &self.manifest;
        BundleInfo {
            name: m.name.clone(),
            version: m.version.clone(),
            created: m.created.clone(),
            model: m.model.id.clone(),
            dims: m.model.dims,
            chunks: self.chunks.len(),
            embedding_rows: self.rows,
            by_kind,
            by_section,
            by_origin,
            sources: m.sources.clone(),
            modes,
            vector_index: self.vector_index(),
            bm25_boosts: self.text.fields.iter().map(|(_, n, b)| ((*n).to_owned(), *b)).collect(),
        }
    }
}
