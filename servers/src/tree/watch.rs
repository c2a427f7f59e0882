//! Following a working tree's edits: a `notify` watcher, debounced here, that rebuilds the
//! tree's library after each batch of saves, creates, deletes and renames (a `git
//! checkout` is one batch), and a polling watcher where events do not arrive
//! (`ATLAS_WATCH=poll`, or when the system's watcher cannot start). One process per
//! tree writes (a lock under the tree's work folder); the others follow `current`.
//! Changes under ignored paths (a build's `target/`), `.git/` and `.atlas/` start no
//! build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use atlas_dist::home::Home;
use notify::Watcher as _;

use super::Tree;

/// How long a burst of events may go quiet before it is one batch.
pub const DEBOUNCE: Duration = Duration::from_millis(60);
/// The polling watcher's interval.
pub const POLL: Duration = Duration::from_secs(1);
/// A batch of more files than this is built by keyword first, then with vectors.
const VECTORS_AT_ONCE: usize = 32;

/// Files changed since the library serving now was built
/// ([`atlas_mcp::live::pending`]).
type Status = AtomicUsize;

/// Called after each build is installed (to re-open at once) and with each failure.
pub type OnBuilt = Box<dyn Fn(Result<&super::Built, &anyhow::Error>) + Send + 'static>;

/// Starts following `tree` on a thread of its own, for as long as the process runs.
/// Returns at once; only the process that holds the tree's writer lock builds.
pub fn start(home: Home, tree: Tree, status: Arc<Status>, on_built: OnBuilt) {
    std::thread::Builder::new()
        .name("atlas-tree-watch".into())
        .spawn(move || {
            if let Err(e) = run(&home, &tree, &status, &on_built) {
                tracing::warn!(
                    "{}: the watcher stopped: {e:#}; restart the server to follow edits again",
                    tree.shown()
                );
            }
        })
        .expect("a thread starts");
}

fn run(home: &Home, tree: &Tree, status: &Status, on_built: &OnBuilt) -> anyhow::Result<()> {
    // One writer per tree: the others wait for the lock, and take over if it dies.
    let lock_path = tree.work.join("watch.lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
    while lock.try_lock().is_err() {
        std::thread::sleep(Duration::from_secs(2));
    }
    let (tx, rx) = std::sync::mpsc::channel::<Vec<PathBuf>>();
    // Reads (a build's own, an editor's) are no change: only what alters the tree.
    let handler = move |e: notify::Result<notify::Event>| match e {
        Ok(e) if !matches!(e.kind, notify::EventKind::Access(_)) => drop(tx.send(e.paths)),
        Ok(_) => {}
        Err(e) => tracing::debug!("watching: {e}"),
    };
    let poll = std::env::var("ATLAS_WATCH").is_ok_and(|v| v == "poll");
    // Kept alive while the loop runs: dropping a watcher stops it.
    let _watcher: Box<dyn notify::Watcher> = match (poll, notify::recommended_watcher(handler.clone())) {
        (false, Ok(mut w)) => match w.watch(&tree.root, notify::RecursiveMode::Recursive) {
            Ok(()) => Box::new(w),
            Err(e) => polling(tree, handler, &e.to_string())?,
        },
        (_, Err(e)) => polling(tree, handler, &e.to_string())?,
        (true, _) => polling(tree, handler, "ATLAS_WATCH=poll")?,
    };
    let mut ignored = Ignored::new(&tree.root, home.atlas_home());
    // What changed while no watcher ran: one build now, whose cache makes it cheap.
    catch_up(home, tree, status, on_built);
    while let Ok(first) = rx.recv() {
        // A batch: events until the tree is quiet for DEBOUNCE (a checkout is one).
        let mut changed = first;
        while let Ok(more) = rx.recv_timeout(DEBOUNCE) {
            changed.extend(more);
        }
        if !tree.root.is_dir() {
            tracing::warn!("{}: {} is gone; still serving its last index", tree.shown(), tree.root.display());
            continue;
        }
        let relevant = ignored.relevant(changed);
        if relevant == 0 {
            continue;
        }
        status.fetch_add(relevant, Ordering::SeqCst);
        // A tree built with vectors keeps them; one built by keyword only stays so.
        let embedded = tree.wants_vectors();
        let vectors = embedded && relevant <= VECTORS_AT_ONCE;
        build(home, tree, status, on_built, vectors);
        // A large batch was built by keyword first: its vectors follow once the tree
        // is quiet.
        if embedded && !vectors && rx_is_quiet(&rx) {
            build(home, tree, status, on_built, true);
        }
    }
    Ok(())
}

/// The polling watcher, said once in the log with why.
fn polling(tree: &Tree, handler: impl notify::EventHandler, why: &str) -> anyhow::Result<Box<dyn notify::Watcher>> {
    tracing::warn!("{}: following edits by polling every {}s ({why})", tree.shown(), POLL.as_secs());
    let mut w = notify::PollWatcher::new(handler, notify::Config::default().with_poll_interval(POLL))?;
    w.watch(&tree.root, notify::RecursiveMode::Recursive)?;
    Ok(Box::new(w))
}

/// Whether no event waits.
fn rx_is_quiet(rx: &std::sync::mpsc::Receiver<Vec<PathBuf>>) -> bool {
    matches!(rx.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty))
}

/// One build at start when the tree moved while nothing watched (a walk of sizes and
/// modification times says so; nothing is read or hashed when it did not).
fn catch_up(home: &Home, tree: &Tree, status: &Status, on_built: &OnBuilt) {
    if tree.unchanged_since_built(home) && (!tree.wants_vectors() || tree.embedded(home)) {
        return;
    }
    build(home, tree, status, on_built, tree.wants_vectors());
}

fn build(home: &Home, tree: &Tree, status: &Status, on_built: &OnBuilt, vectors: bool) {
    let pending = status.load(Ordering::SeqCst);
    match tree.build(home, vectors) {
        Ok(b) => {
            status.fetch_sub(pending.min(status.load(Ordering::SeqCst)), Ordering::SeqCst);
            if b.changed {
                tracing::info!(
                    "{}: indexed as {} in {:.2}s{}",
                    tree.shown(),
                    b.version,
                    b.took.as_secs_f64(),
                    if b.vectors { ", with vectors" } else { ", by keyword and symbols" }
                );
            }
            on_built(Ok(&b));
        }
        Err(e) => {
            tracing::warn!("{}: indexing failed: {e:#}; still serving the previous index", tree.shown());
            on_built(Err(&e));
        }
    }
}

/// Which changed paths matter: inside the tree, not under `.git/`, `.atlas/` or
/// Atlas's home, and not ignored by a `.gitignore`, `.atlasignore`,
/// `.git/info/exclude` or the global excludes.
struct Ignored {
    root: PathBuf,
    home: PathBuf,
    /// Each folder's ignore files, read once, dropped when one of them changes.
    folders: BTreeMap<PathBuf, ignore::gitignore::Gitignore>,
    global: ignore::gitignore::Gitignore,
}

impl Ignored {
    fn new(root: &Path, home: &Path) -> Ignored {
        let (global, _) = ignore::gitignore::Gitignore::global();
        Ignored {
            root: root.to_owned(),
            home: std::path::absolute(home).unwrap_or_else(|_| home.to_owned()),
            folders: BTreeMap::new(),
            global,
        }
    }

    /// How many of `paths` are relevant changes (each counted once).
    fn relevant(&mut self, mut paths: Vec<PathBuf>) -> usize {
        paths.sort();
        paths.dedup();
        let mut n = 0;
        for p in paths {
            let Ok(rel) = p.strip_prefix(&self.root) else { continue };
            let first = rel.components().next().map(|c| c.as_os_str().to_owned());
            if first.as_deref().is_some_and(|f| f == ".git" || f == ".atlas") || p.starts_with(&self.home) {
                continue;
            }
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name == ".gitignore" || name == ATLASIGNORE {
                // What it hides or reveals is a change.
                if let Some(parent) = p.parent() {
                    self.folders.remove(parent);
                }
                n += 1;
                continue;
            }
            if !self.is_ignored(&p) {
                n += 1;
            }
        }
        n
    }

    fn is_ignored(&mut self, path: &Path) -> bool {
        let is_dir = path.is_dir();
        if self.global.matched_path_or_any_parents(path, is_dir).is_ignore() {
            return true;
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(&self.root) {
                break;
            }
            let gi = self.folders.entry(d.to_owned()).or_insert_with(|| folder_rules(&self.root, d));
            let m = gi.matched_path_or_any_parents(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
            dir = d.parent();
        }
        false
    }
}

use atlas_dist::project::IGNORE_FILE as ATLASIGNORE;

/// One folder's rules: its `.gitignore` and `.atlasignore`, and at the root
/// `.git/info/exclude` too.
fn folder_rules(root: &Path, dir: &Path) -> ignore::gitignore::Gitignore {
    let mut b = ignore::gitignore::GitignoreBuilder::new(dir);
    for f in [".gitignore", ATLASIGNORE] {
        let p = dir.join(f);
        if p.is_file() {
            let _ = b.add(p);
        }
    }
    if dir == root {
        let p = root.join(".git/info/exclude");
        if p.is_file() {
            let _ = b.add(p);
        }
    }
    b.build().unwrap_or_else(|_| ignore::gitignore::Gitignore::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_paths_git_and_atlas_folders_are_no_change_and_an_ignore_file_is() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("src/gen")).unwrap();
        std::fs::write(root.join("src/.gitignore"), "gen/\n").unwrap();
        let mut ig = Ignored::new(root, &root.join("home"));
        let p = |r: &str| root.join(r);
        assert_eq!(ig.relevant(vec![p("target/debug/x"), p("a.log"), p(".git/index"), p(".atlas/libraries.json")]), 0);
        assert_eq!(ig.relevant(vec![p("src/gen/x.rs"), p("home/bundles/x")]), 0);
        assert_eq!(ig.relevant(vec![p("src/lib.rs"), p("src/lib.rs"), p("README.md")]), 2);
        assert_eq!(ig.relevant(vec![p("src/.gitignore")]), 1);
    }
}
