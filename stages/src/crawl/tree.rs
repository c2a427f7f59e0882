//! `tree` sources: a project's working tree as git would show it, uncommitted edits
//! and untracked files included. The walk follows `.gitignore` files (nested),
//! `.git/info/exclude`, the global excludes and `.atlasignore`, with or without git;
//! it never enters `.git/`, never follows a link, and leaves out binaries, files over
//! the size cap and well-known secret files (unless the config names them). A file
//! that cannot be read, or changes while it is read, is skipped with its reason: one
//! bad file never fails the tree.

use std::io::Read as _;
use std::path::Path;

use anyhow::Context as _;
use atlas_cache::Digest;

use super::local::{Globs, Scan, ScannedFile, not_text};

/// File names that hold credentials: left out unless a source's `include_secrets`
/// names them. Matched against the file's name, in any folder. Editors' MCP configs
/// (and the backups `atlas init` keeps of them) count: their servers' `env` often
/// holds an API key.
pub const SECRET_FILES: &[&str] = &[
    ".env*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "*.p12",
    "credentials*.json",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".mcp.json",
    "mcp.json",
    "opencode.json",
    "opencode.jsonc",
    "*.atlas-backup",
];

/// Paths that hold credentials whatever their name says: Zed's project settings carry
/// its context servers' `env`.
const SECRET_PATHS: &[&str] = &[".zed/settings.json"];

/// Whether `rel`'s file name is a well-known secret file.
pub fn is_secret(rel: &str) -> bool {
    static SET: std::sync::OnceLock<globset::GlobSet> = std::sync::OnceLock::new();
    let set = SET.get_or_init(|| {
        let mut b = globset::GlobSetBuilder::new();
        for g in SECRET_FILES {
            b.add(globset::Glob::new(g).expect("a fixed glob"));
        }
        b.build().expect("fixed globs")
    });
    set.is_match(rel.rsplit('/').next().unwrap_or(rel)) || SECRET_PATHS.contains(&rel)
}

/// Walks the working tree at `root`. `exclude` globs leave more out; `secrets` globs
/// name secret files to keep after all; a non-empty `only` keeps those files and the
/// files under those folders (relative paths), and walks no other folder.
pub fn scan_tree(
    root: &Path,
    exclude: &[String],
    secrets: &[String],
    only: &[String],
    max_bytes: u64,
) -> anyhow::Result<Scan> {
    let excluded = Globs::new(&["**".to_owned()], exclude)?;
    let kept_secrets = Globs::new(secrets, &[])?;
    let mut scan = Scan::default();
    let only: Vec<String> = only.iter().map(|o| o.trim_matches('/').to_owned()).collect();
    let wanted = move |rel: &str, dir: bool| {
        only.is_empty()
            || only.iter().any(|o| {
                rel == o
                    || rel.strip_prefix(o.as_str()).is_some_and(|r| r.starts_with('/'))
                    || (dir && o.strip_prefix(rel).is_some_and(|r| r.starts_with('/')))
            })
    };
    let (top, keep) = (root.to_owned(), wanted.clone());
    let walker = atlas_dist::project::tree_walker(root)
        // Replaces the walker's own filter, which it keeps.
        .filter_entry(move |e| {
            let rel = e.path().strip_prefix(&top).unwrap_or(e.path()).to_string_lossy().replace('\\', "/");
            atlas_dist::project::enters(e) && (rel.is_empty() || keep(&rel, e.file_type().is_some_and(|t| t.is_dir())))
        })
        .build();
    for entry in walker {
        // An unreadable folder or a loop is one skipped line, not the end of the walk.
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                scan.skipped.push((String::new(), atlas_runtime::utf8::printable(&e.to_string())));
                continue;
            }
        };
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else { continue };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let lossy = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        let Some(kind) = entry.file_type() else { continue };
        // A name that is not UTF-8 cannot be cited or read back by its name.
        if rel.to_str().is_none() {
            if !kind.is_dir() {
                scan.skipped.push((lossy.escape_debug().to_string(), "its name is not UTF-8".to_owned()));
            }
            continue;
        }
        let rel = lossy;
        if kind.is_dir() || !excluded.keep(&rel) || !wanted(&rel, false) {
            continue;
        }
        if let Err(e) = atlas_runtime::safe_path::check(&rel) {
            scan.skipped.push((rel.escape_debug().to_string(), e.why.to_owned()));
            continue;
        }
        if kind.is_symlink() {
            scan.skipped.push((rel, "a symlink (links are not followed)".to_owned()));
            continue;
        }
        if !kind.is_file() {
            scan.skipped.push((rel, "not a regular file".to_owned()));
            continue;
        }
        if is_secret(&rel) && !kept_secrets.keep(&rel) {
            scan.skipped.push((rel, "a secret file (name it in include_secrets to index it)".to_owned()));
            continue;
        }
        match read_file(path, max_bytes) {
            Ok(bytes) => {
                if let Some(why) = not_text(&bytes) {
                    scan.skipped.push((rel, why.to_owned()));
                    continue;
                }
                let digest = Digest::of(&bytes);
                scan.files.push(ScannedFile { rel, bytes, digest, url: None, section: None, repo: None, commit: None });
            }
            Err(why) => scan.skipped.push((rel, why)),
        }
    }
    scan.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(scan)
}

/// A regular file's bytes, read through one handle and at most `max_bytes + 1` of
/// them: a file that is over the cap, grows past it while read, or stops being a
/// regular file is refused with why.
fn read_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let file = atlas_runtime::safe_path::open_regular(path).map_err(|e| format!("not read: {e}"))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max_bytes {
        return Err(format!("{len} bytes is over max_file_bytes ({max_bytes})"));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))
        .map_err(|e| format!("not read: {e:#}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("it grew past max_file_bytes ({max_bytes}) while it was read"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_tree_is_what_git_would_show_less_secrets_binaries_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "target/\n*.log\n");
        write(root, "src/lib.rs", "pub fn f() {}\n");
        write(root, "src/.gitignore", "gen.rs\n");
        write(root, "src/gen.rs", "// ignored by a nested .gitignore\n");
        write(root, "target/debug/x.rs", "fn built() {}\n");
        write(root, "run.log", "a log\n");
        write(root, ".github/workflows/ci.yml", "on: push\n");
        write(root, ".env", "AWS_SECRET_ACCESS_KEY=abc\n");
        write(root, ".env.local", "TOKEN=abc\n");
        write(root, "keys/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\n");
        write(root, "config/credentials-prod.json", "{}\n");
        write(root, "notes/private.md", "ignored by .atlasignore\n");
        write(root, ".atlasignore", "notes/\n");
        write(root, ".mcp.json", "{\"mcpServers\": {\"x\": {\"env\": {\"API_KEY\": \"k\"}}}}\n");
        write(root, ".cursor/mcp.json", "{}\n");
        write(root, ".zed/settings.json", "{}\n");
        write(root, ".mcp.json.atlas-backup", "{}\n");
        write(root, ".git/config", "[core]\n");
        std::fs::write(root.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 0, 1]).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
            std::os::unix::fs::symlink("src/lib.rs", root.join("lib.rs")).unwrap();
        }
        let scan = scan_tree(root, &[], &[], &[], 1 << 20).unwrap();
        let files: Vec<&str> = scan.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(files, [".atlasignore", ".github/workflows/ci.yml", ".gitignore", "src/.gitignore", "src/lib.rs"]);
        let skipped: Vec<&str> = scan.skipped.iter().map(|(r, _)| r.as_str()).collect();
        for s in [
            ".env",
            ".env.local",
            "keys/id_rsa",
            "config/credentials-prod.json",
            "logo.png",
            ".mcp.json",
            ".cursor/mcp.json",
            ".zed/settings.json",
            ".mcp.json.atlas-backup",
        ] {
            assert!(skipped.contains(&s), "{s} in {skipped:?}");
        }
        #[cfg(unix)]
        assert!(skipped.contains(&"out") && skipped.contains(&"lib.rs"), "{skipped:?}");
        assert!(!skipped.iter().any(|s| s.starts_with(".git/") || s.starts_with("target")), "{skipped:?}");
        // A secret the config names is kept; an exclude glob leaves more out.
        let scan = scan_tree(root, &[".github/**".into()], &[".env.local".into()], &[], 1 << 20).unwrap();
        let files: Vec<&str> = scan.files.iter().map(|f| f.rel.as_str()).collect();
        assert!(files.contains(&".env.local") && !files.contains(&".env"), "{files:?}");
        assert!(!files.iter().any(|f| f.starts_with(".github")), "{files:?}");
        // `only`: those files and folders, under the same rules (an ignored or secret
        // one named there stays out), and nothing else.
        let only = ["src/lib.rs", ".github", "target/debug/x.rs", ".env", "nope.rs"].map(String::from);
        let scan = scan_tree(root, &[], &[], &only, 1 << 20).unwrap();
        let files: Vec<&str> = scan.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(files, [".github/workflows/ci.yml", "src/lib.rs"]);
        let skipped: Vec<&str> = scan.skipped.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(skipped, [".env"]);
    }

    #[test]
    fn a_file_over_the_cap_a_fifo_and_an_unreadable_file_are_skipped_and_the_rest_scans() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "big.txt", &"x".repeat(2000));
        write(root, "ok.rs", "fn ok() {}\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            write(root, "locked.rs", "fn locked() {}\n");
            std::fs::set_permissions(root.join("locked.rs"), std::fs::Permissions::from_mode(0o000)).unwrap();
            assert!(std::process::Command::new("mkfifo").arg(root.join("pipe")).status().unwrap().success());
        }
        let scan = scan_tree(root, &[], &[], &[], 1000).unwrap();
        let files: Vec<&str> = scan.files.iter().map(|f| f.rel.as_str()).collect();
        let skipped: std::collections::BTreeMap<&str, &str> =
            scan.skipped.iter().map(|(r, w)| (r.as_str(), w.as_str())).collect();
        assert!(skipped["big.txt"].contains("over max_file_bytes"), "{skipped:?}");
        #[cfg(unix)]
        {
            assert!(skipped.contains_key("pipe"), "{skipped:?}");
            // Root reads every file: only an ordinary user sees the refusal.
            if !files.contains(&"locked.rs") {
                assert!(skipped["locked.rs"].starts_with("not read"), "{skipped:?}");
            }
        }
        assert!(files.contains(&"ok.rs"), "{files:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_2_gb_file_a_link_loop_and_hostile_names_are_one_note_each_and_the_rest_scans() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "ok.rs", "fn ok() {}\n");
        // Sparse: 2 GB on paper, nothing on disk; refused by its size before a read.
        std::fs::File::create(root.join("huge.log")).unwrap().set_len(2 << 30).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink("..", root.join("d/up")).unwrap();
        std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.rs")), "fn x() {}\n").unwrap();
        std::fs::write(root.join("ctl\u{1b}[2Jname.rs"), "fn y() {}\n").unwrap();
        let scan = scan_tree(root, &[], &[], &[], 4 << 20).unwrap();
        let files: Vec<&str> = scan.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(files, ["ok.rs"]);
        let skipped: Vec<String> = scan.skipped.iter().map(|(r, w)| format!("{r}: {w}")).collect();
        assert!(skipped.iter().any(|s| s.starts_with("huge.log: 2147483648 bytes")), "{skipped:?}");
        assert!(skipped.iter().any(|s| s.starts_with("loop: a symlink")), "{skipped:?}");
        assert!(skipped.iter().any(|s| s.starts_with("d/up: a symlink")), "{skipped:?}");
        // Names are printed escaped, never raw.
        assert_eq!(skipped.len(), 5, "{skipped:?}");
        assert!(skipped.iter().all(|s| !s.contains('\u{1b}')), "{skipped:?}");
    }
}
