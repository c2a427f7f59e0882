//! `chunks.text`: every chunk's text, in bundle order, memory-mapped at open so the
//! text stays in the page cache, not on the heap (a server touches only the pages of
//! the chunks it shows). `chunks.parquet` keeps the text too, for readers of the
//! table; the runtime reads the parquet without that column when this file is there.
//!
//! ```text
//! "ATLASTXT" | n: u64 LE | offsets: (n + 1) × u64 LE | UTF-8 bytes
//! ```
//!
//! Chunk `i` is `bytes[offsets[i]..offsets[i + 1]]`. The offsets are checked at open
//! (from 0, non-decreasing, ending at the length); each text's UTF-8 when it is read.

use std::path::Path;

use crate::{Result, corrupt};

/// The artifact's name in a bundle.
pub const FILE: &str = "chunks.text";
const MAGIC: &[u8; 8] = b"ATLASTXT";

/// The file's bytes for `texts`, in order.
pub fn write<'a>(texts: impl ExactSizeIterator<Item = &'a str>) -> Vec<u8> {
    let n = texts.len();
    let mut offsets = Vec::with_capacity(n + 1);
    let mut body = Vec::new();
    offsets.push(0u64);
    for t in texts {
        body.extend_from_slice(t.as_bytes());
        offsets.push(body.len() as u64);
    }
    let mut out = Vec::with_capacity(16 + offsets.len() * 8 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(n as u64).to_le_bytes());
    for o in offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    out.extend_from_slice(&body);
    out
}

/// The mapped file.
pub struct TextStore {
    map: memmap2::Mmap,
    n: usize,
    /// Where the text bytes start.
    base: usize,
}

impl std::fmt::Debug for TextStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextStore").field("chunks", &self.n).field("bytes", &self.map.len()).finish()
    }
}

impl TextStore {
    /// Maps `path` and checks its header against `chunks` texts.
    pub fn open(path: &Path, chunks: usize) -> Result<TextStore> {
        let f = std::fs::File::open(path).map_err(|error| crate::Error::Io { path: path.to_owned(), error })?;
        // SAFETY: bundles are read-only once installed (a new version is a new folder);
        // a file changed under the map is caught by `atlas verify`, and every access
        // below is bounds-checked, so changed bytes give wrong text, never UB in Rust.
        #[allow(unsafe_code)]
        let map =
            unsafe { memmap2::Mmap::map(&f) }.map_err(|error| crate::Error::Io { path: path.to_owned(), error })?;
        let bad = |why: String| corrupt(path.to_owned(), why);
        if map.len() < 16 || &map[..8] != MAGIC {
            return Err(bad("not a chunks.text file (no ATLASTXT header)".into()));
        }
        let n = u64::from_le_bytes(map[8..16].try_into().unwrap_or_default());
        if n != chunks as u64 {
            return Err(bad(format!("holds {n} texts, the bundle has {chunks} chunks")));
        }
        let base = (n as usize)
            .checked_add(1)
            .and_then(|k| k.checked_mul(8))
            .and_then(|k| k.checked_add(16))
            .filter(|&b| b <= map.len())
            .ok_or_else(|| bad("its offsets run past the end".into()))?;
        let store = TextStore { map, n: n as usize, base };
        let mut last = 0u64;
        for i in 0..=store.n {
            let o = store.offset(i);
            if (i == 0 && o != 0) || o < last {
                return Err(bad(format!("offset {i} is out of order")));
            }
            last = o;
        }
        if store.base as u64 + last != store.map.len() as u64 {
            return Err(bad("its last offset is not its length".into()));
        }
        Ok(store)
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.map.len() as u64
    }

    fn offset(&self, i: usize) -> u64 {
        let at = 16 + i * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().unwrap_or_default())
    }

    /// Chunk `i`'s text ("" past the end or for bytes that are not UTF-8).
    pub fn get(&self, i: usize) -> &str {
        if i >= self.n {
            return "";
        }
        let (a, b) = (self.base + self.offset(i) as usize, self.base + self.offset(i + 1) as usize);
        self.map.get(a..b).and_then(|s| std::str::from_utf8(s).ok()).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_round_trip_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        let texts = ["first", "", "dritte ü", "fourth\nline"];
        std::fs::write(&p, write(texts.iter().copied())).unwrap();
        let s = TextStore::open(&p, 4).unwrap();
        assert_eq!((0..5).map(|i| s.get(i)).collect::<Vec<_>>(), ["first", "", "dritte ü", "fourth\nline", ""]);
        let check = |bytes: Vec<u8>, n: usize, needle: &str| {
            std::fs::write(&p, bytes).unwrap();
            let e = TextStore::open(&p, n).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        };
        let good = write(texts.iter().copied());
        check(good.clone(), 5, "holds 4 texts");
        check(b"garbage".to_vec(), 4, "no ATLASTXT header");
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        check(huge, 0, "holds");
        let mut short = good.clone();
        short.truncate(good.len() - 1);
        check(short, 4, "last offset");
        let mut swapped = good;
        swapped[16 + 8..16 + 16].copy_from_slice(&100u64.to_le_bytes());
        check(swapped, 4, "out of order");
    }
}
