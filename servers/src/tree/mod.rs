//! A project's own working tree as a library, `project:NAME`, beside its locked
//! dependencies (`atlas init`).
//!
//! The tree is built by `atlas-pipeline`, as a package is ([`crate::deps`]): a
//! generated config with one `tree` source, the same stages and the same ranking as
//! any bundle, through a cache of the tree's own under `ATLAS_HOME/trees/`, so a
//! rebuild after an edit re-cleans, re-chunks and re-embeds only the files that
//! changed. Each build is installed as the next version of the library (`0.0.N`), by
//! the one atomic switch every install uses; a server follows `current` and swaps
//! whole, so a query sees the tree before or after a batch of changes, never half.
//! [`watch`] rebuilds on every batch of saves.

pub mod watch;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use atlas_dist::home::Home;

/// The kind a working tree's entry in a project's set carries; such an entry follows
/// the library's `current`, not the version it names.
pub use atlas_dist::project::TREE;

/// The version a tree's library is served as, whichever build serves: its labels and
/// paths (`project:app@live`, `project+app@live/src/lib.rs`) stay put across edits.
/// Each build is installed in its own folder (`0.0.N`) all the same.
pub use atlas_dist::project::LIVE;

/// The file under a tree's work folder holding the fingerprint of the tree the
/// installed copy was built from ([`Tree::fingerprint`]).
const FINGERPRINT: &str = "fingerprint";

/// The file under a tree's work folder that says which edits are served beside the
/// library ([`Tree::write_edits`]).
const EDITS: &str = "edits.json";

/// The file under a tree's work folder that says it is embedded.
const VECTORS_MARK: &str = "vectors";

/// The niceness of a whole-tree build running behind the fresh edits.
#[cfg(unix)]
const BACKGROUND_NICE: i32 = 10;

/// Versions of a tree's library kept installed: the one serving and the one before,
/// which calls in flight may still read.
const KEEP: usize = 2;

/// The tree of one project, as this home builds and serves it.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The project's folder, absolute.
    pub root: PathBuf,
    /// The library's stored name (`project+NAME`).
    pub name: String,
    /// Where its builds and cache live.
    pub work: PathBuf,
}

/// How one build came out.
#[derive(Debug)]
pub struct Built {
    pub version: String,
    pub took: Duration,
    /// Whether it carries vectors.
    pub vectors: bool,
    /// Whether it installed a new version (false: what serves already held it).
    pub changed: bool,
}

impl Tree {
    /// The tree at `root` in `home`: its library's name is the folder's, unless another
    /// folder took that name first (`project:app-2`).
    pub fn open(home: &Home, root: &Path) -> anyhow::Result<Tree> {
        let root = std::path::absolute(root)?;
        if !root.is_dir() {
            bail!(atlas_runtime::exit::UsageError(format!(
                "{} is not a folder; pass the project's folder",
                root.display()
            )));
        }
        let key = &atlas_runtime::hash::blake3_bytes(root.to_string_lossy().as_bytes())[..16];
        let work = home.atlas_home().join("trees").join(key);
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let name_file = work.join("name");
        if let Ok(name) = std::fs::read_to_string(&name_file)
            && atlas_runtime::safe_path::is_safe_name(name.trim())
        {
            return Ok(Tree { root, name: name.trim().to_owned(), work });
        }
        let base = library_base(&root);
        let taken = |n: &str| home.resolve(n).is_some() || home.dir(n).exists();
        let name = (1..)
            .map(|i| if i == 1 { base.clone() } else { format!("{base}-{i}") })
            .find(|n| !taken(n))
            .expect("an unbounded search finds a free name");
        std::fs::write(&name_file, &name).with_context(|| format!("writing {}", name_file.display()))?;
        Ok(Tree { root, name, work })
    }

    /// The library as agents name it (`project:NAME`).
    pub fn shown(&self) -> String {
        atlas_runtime::package::shown_name(&self.name)
    }

    /// Builds the tree as it is now and installs it as the library's next version:
    /// without vectors when `vectors` is false (keyword and symbols at once), else
    /// with them (each unchanged file's vectors reused); at a lower priority when
    /// `background` (a watcher's build behind the fresh edits).
    pub fn build(&self, home: &Home, vectors: bool, background: bool) -> anyhow::Result<Built> {
        let t = Instant::now();
        // A test's slow build of the whole tree: edits must not wait for it.
        if let Some(ms) = atlas_runtime::failpoint::armed("slow-tree-build", None) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        // Taken before the build reads the tree: an edit made while it runs differs.
        let seen = self.fingerprint();
        // One build of a tree at a time, across processes: the name's lock.
        let lock = home.lock(&self.name).map_err(atlas_dist::edge)?;
        let version = next_version(home.current(&self.name).as_deref());
        let build = self.work.join("builds").join(&version);
        let _ = std::fs::remove_dir_all(&build);
        std::fs::create_dir_all(&build).with_context(|| format!("creating {}", build.display()))?;
        let config = build.join("pipeline.yaml");
        std::fs::write(&config, self.pipeline_yaml(vectors, &[]))
            .with_context(|| format!("writing {}", config.display()))?;
        let out = build.join("out");
        if let Err(e) = self.run_pipeline(&config, &self.work.join("cache"), &out, 600, background) {
            let _ = std::fs::remove_dir_all(&build);
            return Err(e);
        }
        let staged = out.join("bundle");
        let m = atlas_runtime::manifest::verify(&staged).with_context(|| format!("checking {}", staged.display()))?;
        // A build that changes nothing served (only ignored files moved, or a restart
        // with nothing changed) installs nothing.
        if let Some(now) = home.resolve(&self.name).and_then(|d| atlas_runtime::manifest::read_manifest(&d).ok())
            && same_but_created(&now, &m)
        {
            let _ = std::fs::remove_dir_all(&build);
            let _ = std::fs::write(self.work.join(FINGERPRINT), &seen);
            return Ok(Built {
                version: now_version(home, &self.name),
                took: t.elapsed(),
                vectors: now.embedding_rows > 0,
                changed: false,
            });
        }
        let record = atlas_dist::home::Record {
            name: self.name.clone(),
            version: version.clone(),
            source: format!("tree:{}", self.root.display()),
            sha256: String::new(),
            remote_id: None,
            size: atlas_dist::home::dir_size(&staged),
            installed: atlas_dist::home::now(),
            signed_by: None,
            trust: None,
            created: m.created.clone(),
        };
        home.commit(&lock, &staged, &record, KEEP).map_err(atlas_dist::edge)?;
        let _ = std::fs::remove_dir_all(&build);
        let _ = std::fs::write(self.work.join(FINGERPRINT), &seen);
        Ok(Built { version, took: t.elapsed(), vectors: m.embedding_rows > 0, changed: true })
    }

    /// The tree as a walk sees it, without reading a file: each path the tree source
    /// would consider (the same ignore files, `.git/` and `.atlas/` left out, links not
    /// followed), with its size and modification time, hashed.
    pub fn fingerprint(&self) -> String {
        let walker = atlas_dist::project::tree_walker(&self.root).build();
        let mut h = atlas_runtime::hash::Blake3::new();
        for e in walker.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                continue;
            }
            let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            h.update(e.path().as_os_str().as_encoded_bytes());
            h.update(&m.len().to_le_bytes());
            h.update(&modified.map_or(0, |d| d.as_nanos()).to_le_bytes());
        }
        h.hex()
    }

    /// Whether the tree is as it was when the installed copy was built (a restart with
    /// nothing changed builds nothing).
    pub fn unchanged_since_built(&self, home: &Home) -> bool {
        home.resolve(&self.name).is_some()
            && std::fs::read_to_string(self.work.join(FINGERPRINT)).is_ok_and(|f| f == self.fingerprint())
    }

    /// Whether the installed copy carries vectors (an empty tree needs none).
    pub fn embedded(&self, home: &Home) -> bool {
        home.resolve(&self.name)
            .and_then(|d| atlas_runtime::manifest::read_manifest(&d).ok())
            .is_some_and(|m| m.embedding_rows > 0 || m.chunk_count == 0)
    }

    /// Whether the tree is embedded: `atlas init` said so (not `--keyword-only`) with
    /// the model here. Edits keep it so; a large batch is built by keyword first.
    pub fn wants_vectors(&self) -> bool {
        self.work.join(VECTORS_MARK).is_file() && atlas_runtime::model::default_provisioned()
    }

    /// Records whether the tree is to be embedded ([`Tree::wants_vectors`]).
    pub fn set_wants_vectors(&self, yes: bool) -> anyhow::Result<()> {
        let mark = self.work.join(VECTORS_MARK);
        match yes {
            true => std::fs::write(&mark, b"").with_context(|| format!("writing {}", mark.display())),
            false => match std::fs::remove_file(&mark) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
        }
    }

    /// The chunk path of the tree's file `rel` (`app/src/lib.rs`): how its chunks,
    /// symbols and hits name it.
    pub fn chunk_path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.source())
    }

    /// The name of the tree's one source, which starts its chunk paths.
    fn source(&self) -> &str {
        self.name.trim_start_matches("project+")
    }

    /// Builds the files and folders at `rels` (relative paths) alone, by keyword and
    /// symbols, into a bundle of their own under the work folder (`edits/N/bundle`),
    /// through the same stages as [`Tree::build`]: the copies of the files just edited
    /// that a server serves beside the library until a build of the whole tree holds
    /// them ([`atlas_mcp::live::Edits`]). None when none of them is left to index.
    pub fn build_edits(&self, seq: u64, rels: &[String]) -> anyhow::Result<Option<PathBuf>> {
        let root = self.work.join("edits");
        let dir = root.join(seq.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        // The two builds before this one stay: calls in flight may read them.
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                let n = e.file_name().to_string_lossy().parse::<u64>().unwrap_or(0);
                if n.saturating_add(2) < seq {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        if !rels.iter().any(|r| self.root.join(r).exists()) {
            return Ok(None);
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let config = dir.join("pipeline.yaml");
        std::fs::write(&config, self.pipeline_yaml(false, rels))
            .with_context(|| format!("writing {}", config.display()))?;
        let cache = dir.join("cache");
        let out = dir.join("out");
        let result = self.run_pipeline(&config, &cache, &out, 30, false);
        let _ = std::fs::remove_dir_all(&cache);
        match result {
            Ok(()) => {}
            // Nothing indexable among them (all secret, ignored or binary): nothing to serve.
            Err(e) if format!("{e:#}").contains("yielded no documents") => return Ok(None),
            Err(e) => return Err(e),
        }
        let staged = out.join("bundle");
        atlas_runtime::manifest::verify(&staged).with_context(|| format!("checking {}", staged.display()))?;
        Ok(Some(staged))
    }

    /// Runs `atlas-pipeline` over `config` into `out`, the bundle alone, offline and
    /// with no remote cache: the one way a tree is built, whole or its edits. A
    /// `background` build (the whole tree, behind the fresh edits) runs at a lower
    /// priority, so the next edit's own build is not kept waiting for a core.
    fn run_pipeline(
        &self,
        config: &Path,
        cache: &Path,
        out: &Path,
        lock_wait_s: u32,
        background: bool,
    ) -> anyhow::Result<()> {
        let mut cmd = Command::new(crate::deps::pipeline_bin()?);
        cmd.arg("--config")
            .arg(config)
            .arg("--cache-dir")
            .arg(cache)
            .arg("--lock-wait")
            .arg(lock_wait_s.to_string())
            .args(["run", "--offline", "--bundle-only", "--out"])
            .arg(out)
            .env("ATLAS_HOME", atlas_runtime::model::atlas_home())
            .env("ATLAS_CACHE_REMOTE", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = cmd.spawn().context("starting atlas-pipeline")?;
        #[cfg(unix)]
        if background && let Some(pid) = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw) {
            // Before it starts its threads, which inherit it; a failure only costs speed.
            let _ = rustix::process::setpriority_process(Some(pid), BACKGROUND_NICE);
        }
        #[cfg(not(unix))]
        let _ = background;
        let output = child.wait_with_output()?;
        if !output.status.success() {
            let text = String::from_utf8_lossy(&output.stderr);
            let last = text.lines().rev().find(|l| crate::deps::tells_why(l)).unwrap_or_default();
            bail!(
                "{}",
                crate::deps::failure(&atlas_runtime::utf8::printable(last.trim()), crate::deps::signal(&output.status))
            );
        }
        Ok(())
    }

    /// Says which edits every server of this tree serves beside its library: the
    /// bundle of their fresh copies, and the chunk paths the library hides. Written
    /// whole (a rename over the last), read by [`Tree::read_edits`].
    pub fn write_edits(&self, edits: &Edits) -> anyhow::Result<()> {
        let path = self.work.join(EDITS);
        let tmp = self.work.join(format!("{EDITS}.tmp"));
        let body = serde_json::to_vec(edits)?;
        std::fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }

    /// No edits are served beside the library: it holds them all.
    pub fn clear_edits(&self) {
        let _ = std::fs::remove_file(self.work.join(EDITS));
    }

    /// The edits [`Tree::write_edits`] last said (none when it said none, or the file
    /// does not parse); a fresh bundle only from under this tree's own work folder.
    pub fn read_edits(&self) -> Option<Edits> {
        let bytes = std::fs::read(self.work.join(EDITS)).ok()?;
        let mut said: Edits = serde_json::from_slice(&bytes).ok()?;
        said.fresh = said.fresh.filter(|f| f.starts_with(self.work.join("edits")));
        Some(said)
    }

    /// The edits file's path, for a follower to watch.
    pub fn edits_file(&self) -> PathBuf {
        self.work.join(EDITS)
    }

    /// The pipeline config of one build: the whole tree, or the files `only` names.
    fn pipeline_yaml(&self, vectors: bool, only: &[String]) -> String {
        let q = |v: &str| serde_json::to_string(v).expect("a string");
        let mut y = format!(
            "# Written by `atlas init`: the working tree of {}.\nname: {}\nsources:\n  {}:\n    kind: tree\n    path: {}\n",
            self.shown(),
            q(&self.name),
            // Paths read as the project's: `app/src/lib.rs`.
            self.source(),
            q(&self.root.display().to_string()),
        );
        if !only.is_empty() {
            y.push_str("    only:\n");
            for o in only {
                y.push_str(&format!("      - {}\n", q(o)));
            }
        }
        y.push_str("stages:\n");
        if !vectors {
            y.push_str("  embed:\n    enabled: false\n");
        }
        y.push_str(&format!(
            "  pack:\n    version: {}\n    description: {}\n",
            q(LIVE),
            q(&format!("the working tree of {}, as it is on disk", self.shown()))
        ));
        y
    }

    /// Puts the tree in `project`'s set (kind [`TREE`]), keeping what is there.
    pub fn add_to_set(&self, home: &Home) -> anyhow::Result<PathBuf> {
        use atlas_dist::project::{Pinned, Set};
        let mut set = Set::read(&self.root).map_err(atlas_dist::edge)?.unwrap_or_default();
        set.libraries.retain(|p| p.name != self.name);
        set.libraries.push(Pinned {
            name: self.name.clone(),
            version: LIVE.into(),
            lockfile: None,
            kinds: vec![TREE.into()],
        });
        set.libraries.sort();
        set.write(&self.root, home.atlas_home()).map_err(atlas_dist::edge)
    }
}

/// What a tree's writer says its servers serve beside the library
/// ([`atlas_mcp::live::Edits`], as a file).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Edits {
    /// The library version these edits complete ([`atlas_mcp::live::Edits::base`]).
    pub base: Option<String>,
    /// The fresh bundle's folder.
    pub fresh: Option<PathBuf>,
    /// The chunk paths the library's view hides.
    pub hidden: std::collections::BTreeSet<String>,
}

/// Whether two manifests list the same bundle, whenever each was built.
fn same_but_created(a: &atlas_runtime::manifest::Manifest, b: &atlas_runtime::manifest::Manifest) -> bool {
    let plain = |m: &atlas_runtime::manifest::Manifest| {
        let mut v = serde_json::to_value(m).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("created");
        }
        v
    };
    plain(a) == plain(b)
}

/// The installed version serving `name` now.
fn now_version(home: &Home, name: &str) -> String {
    home.current(name).unwrap_or_default()
}

/// The tree's entry in a set: the library that follows `current`.
pub fn is_tree(kinds: &[String]) -> bool {
    kinds.iter().any(|k| k == TREE)
}

/// `project+NAME` from the folder's name: ASCII letters, digits, `-` and `_`.
fn library_base(root: &Path) -> String {
    let name = root.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let plain: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '-' }).collect();
    let plain = plain.trim_matches('-');
    let plain = if plain.is_empty() { "project" } else { plain };
    format!("project+{}", atlas_runtime::utf8::clip_chars(plain, 60))
}

/// The version after `current`: `0.0.N+1`.
fn next_version(current: Option<&str>) -> String {
    let n = current.and_then(|v| v.strip_prefix("0.0.")).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    format!("0.0.{}", n.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trees_library_is_named_by_its_folder_and_its_versions_only_go_up() {
        assert_eq!(library_base(Path::new("/w/my app!")), "project+my-app");
        assert_eq!(library_base(Path::new("/")), "project+project");
        assert_eq!(next_version(None), "0.0.1");
        assert_eq!(next_version(Some("0.0.41")), "0.0.42");
        assert!(
            semver::Version::parse(&next_version(Some("0.0.9"))).unwrap() > semver::Version::parse("0.0.9").unwrap()
        );
        assert_eq!(atlas_runtime::package::shown_name("project+my-app"), "project:my-app");
        assert_eq!(atlas_runtime::package::stored_name("project:my-app"), "project+my-app");
    }

    #[test]
    fn two_folders_of_one_name_get_two_libraries() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(&t.path().join("home"));
        for p in ["a/app", "b/app"] {
            std::fs::create_dir_all(t.path().join(p)).unwrap();
        }
        let a = Tree::open(&home, &t.path().join("a/app")).unwrap();
        std::fs::create_dir_all(home.dir(&a.name)).unwrap();
        let b = Tree::open(&home, &t.path().join("b/app")).unwrap();
        assert_eq!((a.name.as_str(), b.name.as_str()), ("project+app", "project+app-2"));
        // The same folder keeps its name.
        assert_eq!(Tree::open(&home, &t.path().join("a/app")).unwrap().name, "project+app");
    }
}
