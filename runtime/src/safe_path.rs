//! Joining untrusted names onto a folder.
//!
//! Architecture invariant: a name that comes from untrusted bytes (an llms.txt link,
//! a page, a repository tree, an API answer, a bundle manifest, an archive entry, an
//! MCP request) becomes a path only through [`join_inside`], which refuses anything
//! that could leave `root`: absolute paths, `..`, empty or `.` components, NUL and
//! other control bytes, over-long names. Callers report the refusal and go on; they
//! never fall back to a plain `Path::join`.
//!
//! Paths that people and tools type (an MCP request's path, an archive entry) go
//! through [`components`], the lenient form of the same rule: `.` and empty
//! components are dropped, what could leave the root is refused with a
//! [`Refusal`] the caller can phrase. The fs server's mirror root and the archive
//! extractor are built on it.

use std::path::{Path, PathBuf};

/// The longest relative path accepted, in bytes.
pub const MAX_REL_BYTES: usize = 4096;
/// The longest single component accepted, in bytes (the common file-system limit).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsafe path {rel:?}: {why}")]
pub struct UnsafePath {
    pub rel: String,
    pub why: &'static str,
    pub kind: Refusal,
}

/// What was wrong with a refused name, for callers that word it their own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Empty,
    TooLong,
    Absolute,
    /// A NUL byte ([`components`]) or any control character ([`check`]).
    Control,
    EmptyComponent,
    /// A `.` or `..` component ([`check`]); [`components`] drops `.`.
    Dot,
    Parent,
    ComponentTooLong,
    /// `\\` or `:`, separators or drive prefixes on this system.
    Separator,
    NotPlain,
}

/// Checks that `rel` is a relative, `/`-separated path whose every component is a
/// plain name, so that `root.join(rel)` stays inside `root` whatever `root` is.
pub fn check(rel: &str) -> Result<(), UnsafePath> {
    let refuse = |kind, why| Err(UnsafePath { rel: rel.to_owned(), why, kind });
    if rel.is_empty() {
        return refuse(Refusal::Empty, "it is empty");
    }
    if rel.chars().any(char::is_control) {
        return refuse(Refusal::Control, "it holds a NUL or another control character");
    }
    for part in rel.split('/') {
        match part {
            "" if !rel.starts_with('/') => {
                return refuse(Refusal::EmptyComponent, "it has an empty component (`//` or a trailing `/`)");
            }
            "." => return refuse(Refusal::Dot, "it has a `.` or `..` component"),
            _ => {}
        }
    }
    components(rel).map(drop)
}

/// The plain components of `rel`, a `/`-separated relative path: `.` and empty
/// components dropped, NUL bytes, absolute paths, `..`, this system's separators and
/// over-long names refused. Control characters other than NUL pass (a served file
/// may be named with them; the fs tools show them escaped).
pub fn components(rel: &str) -> Result<Vec<&str>, UnsafePath> {
    let refuse = |kind, why| Err(UnsafePath { rel: rel.to_owned(), why, kind });
    if rel.len() > MAX_REL_BYTES {
        return refuse(Refusal::TooLong, "it is longer than 4096 bytes");
    }
    if rel.contains('\0') {
        return refuse(Refusal::Control, "it holds a NUL or another control character");
    }
    if rel.starts_with('/') || Path::new(rel).is_absolute() || (cfg!(windows) && rel.get(1..2) == Some(":")) {
        return refuse(Refusal::Absolute, "it is absolute");
    }
    let mut out = Vec::new();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => return refuse(Refusal::Parent, "it has a `.` or `..` component"),
            p if p.len() > MAX_COMPONENT_BYTES => {
                return refuse(Refusal::ComponentTooLong, "a component is longer than 255 bytes");
            }
            // On Windows these would be separators or drive prefixes.
            p if cfg!(windows) && (p.contains('\\') || p.contains(':')) => {
                return refuse(Refusal::Separator, "it holds `\\` or `:`, which are separators on this system");
            }
            p => out.push(p),
        }
    }
    // Belt and braces: what the platform's own parser makes of each component.
    if !out.iter().all(|p| matches!(Path::new(p).components().next(), Some(std::path::Component::Normal(_)))) {
        return refuse(Refusal::NotPlain, "it is not a plain relative path on this system");
    }
    Ok(out)
}

/// `root/rel`, when [`check`] accepts `rel`.
pub fn join_inside(root: &Path, rel: &str) -> Result<PathBuf, UnsafePath> {
    check(rel)?;
    Ok(root.join(rel))
}

/// Reads an untrusted file whole when it is a regular file ([`open_regular`]) of at
/// most `cap` bytes, reading no more than `cap + 1` whatever its size says (a file that
/// grows while read is still bounded); past the cap, an `InvalidData` error that names
/// it.
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    open_regular(path)?.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("it is over {cap} bytes")));
    }
    Ok(bytes)
}

/// Opens an untrusted path for reading when it is, links followed, a regular file;
/// anything else (a FIFO, a device, a socket, a folder, `/proc/self/fd/0`, which a
/// cloned repository's link can name) is an `InvalidData` error, and opening it never
/// waits: it is opened non-blocking, and the opened handle's own metadata is checked,
/// so nothing can swap the file between the check and the read.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NONBLOCK);
    let file = o.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not a regular file (a FIFO, a device, a socket or a folder), and only a regular file is read",
        ));
    }
    Ok(file)
}

/// A bundle name or version: it becomes a file name (`<name>-<version>.tar.zst`) and a
/// folder name (`ATLAS_HOME/bundles/<name>/<version>`), so one plain component of safe
/// characters: letters, digits, `.`, `-`, `_`, `+`, not starting with `.`, at most 100
/// bytes.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with('.')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_root_are_refused() {
        let ok = ["a.md", "a/b.md", "section/x y.md", "ünï/ço.md", "a..b.md", "...md", "100%AB off.md"];
        for rel in ok {
            assert_eq!(check(rel), Ok(()), "{rel}");
        }
        let bad = [
            ("", "empty"),
            ("/etc/passwd.md", "absolute"),
            ("/some/dir/pwned.md", "absolute"),
            ("a/../../x.md", "`..`"),
            ("..", "`..`"),
            ("./a.md", "`.`"),
            ("a//b.md", "empty component"),
            ("a/", "empty component"),
            ("a\0b.md", "control"),
            ("a\nb.md", "control"),
        ];
        for (rel, why) in bad {
            let e = check(rel).unwrap_err();
            assert!(e.to_string().contains(why), "{rel:?}: {e}");
        }
        assert!(check(&"a/".repeat(3000)).is_err());
        assert!(check(&"x".repeat(256)).is_err());
        let root = Path::new("/m");
        assert_eq!(join_inside(root, "a/b.md").unwrap(), Path::new("/m/a/b.md"));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_a_folder_or_a_link_to_one_is_refused_without_waiting_and_a_regular_file_is_read() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        // Nothing writes to the FIFO: a blocking open would wait here for ever.
        for p in [fifo.as_path(), link.as_path(), t.path()] {
            let e = read_capped(p, 10).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{p:?}");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let file = t.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_capped(&file, 5).unwrap(), b"12345");
        assert!(read_capped(&file, 4).unwrap_err().to_string().contains("over 4 bytes"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: std::env::var("ATLAS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024),
            failure_persistence: None,
            ..Default::default()
        })]

        /// Whatever is accepted stays beneath the root, component by component.
        #[test]
        fn accepted_names_stay_inside_the_root(rel in "(\\.{0,3}|/|\\\\|[a-z%]{0,3}|\\PC{0,3}){0,12}") {
            let root = Path::new("/root/mirror");
            if let Ok(p) = join_inside(root, &rel) {
                proptest::prop_assert!(p.starts_with(root));
                let tail = p.strip_prefix(root).unwrap();
                proptest::prop_assert!(tail.components().all(|c| matches!(c, std::path::Component::Normal(_))));
                proptest::prop_assert!(tail.components().count() >= 1);
            }
        }
    }
}
