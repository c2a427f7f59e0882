//! Following a working tree's edits: a `notify` watcher, debounced here, and a
//! polling watcher where events do not arrive (`ATLAS_WATCH=poll`, or when the
//! system's watcher cannot start). One process per tree writes (a lock under the
//! tree's work folder); the others follow. Changes under ignored paths (a build's
//! `target/`), `.git/` and `.atlas/` start nothing.
//!
//! Each batch of saves, creates, deletes and renames (a `git checkout` is one) goes
//! two ways at once:
//! - **fresh:** the files edited since the library was built are built alone, by
//!   keyword and symbols (a fraction of a second), and every server serves them beside
//!   the library, whose view hides their old copies ([`atlas_mcp::live::Edits`]);
//! - **settled:** the whole tree is built again through its cache (seconds, vectors
//!   included) and installed as the library's next version; the edits it holds then
//!   leave the fresh bundle.
//!
//! An edit of an ignore file changes which files the tree holds: that batch waits for
//! the whole build, and replies say how many files are pending meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
/// A batch that would make the fresh bundle larger than this many files waits for
/// the whole build instead (a large checkout): built alone, they would take about as
/// long (500 files took 4.9 s in `cargo xtask bench live`, the whole 408-file tree 4.7 s).
const FRESH_AT_MOST: usize = 200;

/// Files changed and in no index served yet ([`atlas_mcp::live::pending`]).
type Status = AtomicUsize;

/// Called after each build of the whole tree is installed and with each failure, and
/// after each batch of fresh edits is written (`None`): to look again at once.
pub type OnBuilt = Arc<dyn Fn(Option<Result<&super::Built, &anyhow::Error>>) + Send + Sync + 'static>;

/// The files edited since the library serving now was built, each with the batch
/// that last changed it (relative paths).
#[derive(Default)]
struct Edited {
    batch: u64,
    files: BTreeMap<String, u64>,
    /// The version of the library whose build last took edits out (none yet).
    base: Option<String>,
}

/// Starts following `tree` on threads of its own, for as long as the process runs.
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

fn run(home: &Home, tree: &Tree, status: &Arc<Status>, on_built: &OnBuilt) -> anyhow::Result<()> {
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
    // What changed while no watcher ran: one build now, whose cache makes it cheap;
    // edits a writer before this one served, that build holds.
    catch_up(home, tree, on_built);
    tree.clear_edits();
    let edited = Arc::new(Mutex::new(Edited::default()));
    let (settle_tx, settle_rx) = std::sync::mpsc::channel::<usize>();
    {
        let (home, tree, status, on_built, edited) =
            (home.clone(), tree.clone(), status.clone(), on_built.clone(), edited.clone());
        std::thread::Builder::new()
            .name("atlas-tree-settle".into())
            .spawn(move || settle(&home, &tree, &status, &on_built, &edited, &settle_rx))
            .expect("a thread starts");
    }
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
        let batch = ignored.relevant(changed);
        if batch.is_empty() {
            continue;
        }
        let n = batch.files.len() + usize::from(batch.rules);
        status.fetch_add(n, Ordering::SeqCst);
        // Which files an ignore file's edit hides or reveals, the whole build finds out.
        let large = edited.lock().unwrap_or_else(std::sync::PoisonError::into_inner).files.len() + batch.files.len()
            > FRESH_AT_MOST;
        let waiting = if batch.rules || large { n } else { fresh(tree, &edited, &batch.files, status, n, on_built) };
        if settle_tx.send(waiting).is_err() {
            break;
        }
    }
    Ok(())
}

/// Builds the files edited since the library was built (`files` the latest of them),
/// and says so to every server of the tree; how many files are still pending (all `n`
/// when the build failed: the whole build takes them).
fn fresh(
    tree: &Tree,
    edited: &Mutex<Edited>,
    files: &[String],
    status: &Status,
    n: usize,
    on_built: &OnBuilt,
) -> usize {
    let mut e = edited.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    e.batch += 1;
    let batch = e.batch;
    for f in files {
        e.files.insert(f.clone(), batch);
    }
    match publish(tree, &e) {
        Ok(()) => {
            drop(e);
            sub(status, n);
            on_built(None);
            0
        }
        Err(err) => {
            tracing::warn!(
                "{}: the edited files were not indexed at once: {err:#}; the whole tree is next",
                tree.shown()
            );
            n
        }
    }
}

/// Writes the fresh edits `e` holds (or none) for every server of the tree.
fn publish(tree: &Tree, e: &Edited) -> anyhow::Result<()> {
    let rels: Vec<String> = e.files.keys().cloned().collect();
    let t = std::time::Instant::now();
    let fresh = if rels.is_empty() { None } else { tree.build_edits(e.batch, &rels)? };
    // Each edited path hides its old copy; one that is not a file now (a folder
    // renamed or deleted) hides what was under it too.
    let mut hidden = BTreeSet::new();
    for r in &rels {
        hidden.insert(tree.chunk_path(r));
        if !tree.root.join(r).is_file() {
            hidden.insert(format!("{}/", tree.chunk_path(r)));
        }
    }
    tree.write_edits(&super::Edits { base: e.base.clone(), fresh, hidden })?;
    tracing::debug!(
        "{}: {} indexed at once in {:?}",
        tree.shown(),
        atlas_runtime::words::count(rels.len(), "edited file"),
        t.elapsed()
    );
    Ok(())
}

/// Takes `n` from the pending count, never below zero.
fn sub(status: &Status, n: usize) {
    let _ = status.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(v.saturating_sub(n)));
}

/// The whole tree built after each batch (batches that come during a build wait and
/// are one): installed as the library's next version, then the edits it holds taken
/// out of the fresh bundle, said for that version (a server still on the version
/// before keeps the edits said for it until it swaps).
fn settle(
    home: &Home,
    tree: &Tree,
    status: &Status,
    on_built: &OnBuilt,
    edited: &Mutex<Edited>,
    rx: &std::sync::mpsc::Receiver<usize>,
) {
    // A batch taken while looking whether the tree is quiet: the next round's first.
    let mut carried = None;
    loop {
        let Some(first) = carried.take().or_else(|| rx.recv().ok()) else { return };
        let mut waiting = first;
        while let Ok(more) = rx.try_recv() {
            waiting += more;
        }
        // The edits this build will hold (every batch up to now), and its size.
        let (held, size) = {
            let e = edited.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (e.batch, e.files.len() + waiting)
        };
        // A tree built with vectors keeps them; one built by keyword only stays so.
        let embedded = tree.wants_vectors();
        let vectors = embedded && size <= VECTORS_AT_ONCE;
        let mut built = build(home, tree, on_built, vectors);
        if built.is_some() {
            sub(status, waiting);
        }
        // A large batch was built by keyword first: its vectors follow once the tree
        // is quiet.
        if built.is_some() && embedded && !vectors {
            match rx.try_recv() {
                Ok(next) => carried = Some(next),
                Err(std::sync::mpsc::TryRecvError::Empty) => built = build(home, tree, on_built, true),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
            }
        }
        let Some(version) = built else { continue };
        let mut e = edited.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = (e.files.len(), e.base.clone());
        e.files.retain(|_, b| *b > held);
        e.base = Some(version);
        if (e.files.len(), e.base.clone()) != before {
            // A folder of its own: the last one may still be open.
            e.batch += 1;
            if let Err(err) = publish(tree, &e) {
                tracing::warn!("{}: the edited files were not indexed at once: {err:#}", tree.shown());
            }
            drop(e);
            on_built(None);
        }
    }
}

/// The polling watcher, said once in the log with why.
fn polling(tree: &Tree, handler: impl notify::EventHandler, why: &str) -> anyhow::Result<Box<dyn notify::Watcher>> {
    tracing::warn!("{}: following edits by polling every {}s ({why})", tree.shown(), POLL.as_secs());
    let mut w = notify::PollWatcher::new(handler, notify::Config::default().with_poll_interval(POLL))?;
    w.watch(&tree.root, notify::RecursiveMode::Recursive)?;
    Ok(Box::new(w))
}

/// One build at start when the tree moved while nothing watched (a walk of sizes and
/// modification times says so; nothing is read or hashed when it did not).
fn catch_up(home: &Home, tree: &Tree, on_built: &OnBuilt) {
    if tree.unchanged_since_built(home) && (!tree.wants_vectors() || tree.embedded(home)) {
        return;
    }
    let _ = build(home, tree, on_built, tree.wants_vectors());
}

/// One build of the whole tree; the version serving after it (none: it failed).
fn build(home: &Home, tree: &Tree, on_built: &OnBuilt, vectors: bool) -> Option<String> {
    match tree.build(home, vectors, true) {
        Ok(b) => {
            if b.changed {
                tracing::info!(
                    "{}: indexed as {} in {:.2}s{}",
                    tree.shown(),
                    b.version,
                    b.took.as_secs_f64(),
                    if b.vectors { ", with vectors" } else { ", by keyword and symbols" }
                );
            }
            on_built(Some(Ok(&b)));
            Some(b.version)
        }
        Err(e) => {
            tracing::warn!("{}: indexing failed: {e:#}; still serving the previous index", tree.shown());
            on_built(Some(Err(&e)));
            None
        }
    }
}

/// A batch's relevant changes: the files (relative paths, each once) and whether an
/// ignore file changed.
#[derive(Debug, Default, PartialEq)]
struct Batch {
    files: Vec<String>,
    rules: bool,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.files.is_empty() && !self.rules
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

    /// Which of `paths` are relevant changes.
    fn relevant(&mut self, mut paths: Vec<PathBuf>) -> Batch {
        paths.sort();
        paths.dedup();
        let mut batch = Batch::default();
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
                batch.rules = true;
                continue;
            }
            if self.is_ignored(&p) || rel.as_os_str().is_empty() {
                continue;
            }
            // A name that is not UTF-8 is not indexed, and its change is no edit.
            if let Some(r) = rel.to_str() {
                batch.files.push(r.replace('\\', "/"));
            }
        }
        batch
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
        let files = |b: Batch| (b.files, b.rules);
        let none: Vec<String> = Vec::new();
        assert_eq!(
            files(ig.relevant(vec![p("target/debug/x"), p("a.log"), p(".git/index"), p(".atlas/libraries.json")])),
            (none.clone(), false)
        );
        assert_eq!(files(ig.relevant(vec![p("src/gen/x.rs"), p("home/bundles/x")])), (none.clone(), false));
        assert_eq!(
            files(ig.relevant(vec![p("src/lib.rs"), p("src/lib.rs"), p("README.md")])),
            (vec!["README.md".to_owned(), "src/lib.rs".to_owned()], false)
        );
        assert_eq!(files(ig.relevant(vec![p("src/.gitignore")])), (none, true));
    }
}
