//! A bundle that a running server can swap: `atlas serve rag|fs|web --bundle NAME`
//! follows `ATLAS_HOME/bundles/NAME/current`. It reopens on SIGHUP or when it sees the
//! link move (checked every second); calls in flight finish on the bundle they started
//! with, sessions stay open, and a new version that fails to open is logged and the
//! old one keeps serving. A version reinstalled in place (a keyword-first build
//! completed with its vectors) is a move too: the manifest file is another. The rag
//! server's [`Bundle`] and the fs server's mirror follow `current` the same way, so an
//! agent that searches with one and reads with the other reads the version it searched.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use atlas_runtime::{Bundle, OpenOptions};

/// What a server serves now, swapped whole when its origin moves.
#[derive(Debug)]
pub struct Live<T = Bundle>(Arc<RwLock<Arc<T>>>);

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        Live(self.0.clone())
    }
}

impl<T> Live<T> {
    pub fn new(b: Arc<T>) -> Live<T> {
        Live(Arc::new(RwLock::new(b)))
    }

    /// What serves now.
    pub fn get(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set(&self, b: Arc<T>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = b;
    }
}

/// Where a served bundle comes from: a fixed folder, an installed name, or the
/// version a project's library set names for it (`atlas sync` moves it).
#[derive(Debug, Clone)]
pub enum Origin {
    Folder(PathBuf),
    Installed { home: atlas_dist::home::Home, name: String },
    Project { home: atlas_dist::home::Home, project: PathBuf, name: String },
}

impl Origin {
    /// The folder to open now.
    pub fn folder(&self) -> Option<PathBuf> {
        match self {
            Origin::Folder(p) => Some(p.clone()),
            Origin::Installed { home, name } => home.resolve(name),
            Origin::Project { home, project, name } => {
                let set = atlas_dist::project::Set::read(project).ok().flatten()?;
                home.resolve_version(name, set.version_of(name)?)
            }
        }
    }
}

/// Wakes every follower of this process to look at its origin now, not at its next
/// second: what the process that rebuilt a working tree calls once it is installed.
pub fn nudge() {
    NUDGE.notify_waiters();
}

static NUDGE: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// The next look at an origin: a second from now, or sooner when nudged.
pub async fn tick() {
    tokio::select! {
        () = NUDGE.notified() => {}
        () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
    }
}

/// A working tree's files edited since the library serving it was built: a small
/// bundle of their new copies (keyword and symbols, built in a fraction of a second
/// by the same stages) served beside the library, whose view hides their old copies
/// and those of deleted files. Set whole ([`set_edits`]); a call holds the one it
/// started with.
#[derive(Debug)]
pub struct Edits {
    /// The library version (its folder's name, `0.0.N`) these edits complete: once a
    /// build of the whole tree holds some edits, they leave the fresh bundle, and the
    /// edits said before serve a server still on the older version. None: any.
    pub base: Option<String>,
    /// The edited files' new copies; none when every edited file was deleted.
    pub fresh: Option<Arc<Bundle>>,
    /// The chunk paths the library's view hides (one ending in `/` is a folder).
    pub hidden: Arc<std::collections::BTreeSet<String>>,
}

/// Edits said per library, oldest first: the newest that fits the version a server
/// serves is the one served beside it.
static EDITS: std::sync::Mutex<std::collections::BTreeMap<String, std::collections::VecDeque<Arc<Edits>>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// How many edits said are kept per library: enough for a server a few builds behind.
const EDITS_KEPT: usize = 8;

/// Serves `edits` beside the library labelled `library` (`project:app@live`), or
/// none (the writer went away: the library holds them all).
pub fn set_edits(library: &str, edits: Option<Edits>) {
    let mut m = EDITS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match edits {
        Some(e) => {
            let said = m.entry(library.to_owned()).or_default();
            said.push_back(Arc::new(e));
            while said.len() > EDITS_KEPT {
                said.pop_front();
            }
        }
        None => drop(m.remove(library)),
    }
}

/// What is served beside `library` while its version's folder is `version`: the
/// newest edits said for that version (or for any), else the newest.
pub fn edits(library: &str, version: &str) -> Option<Arc<Edits>> {
    let m = EDITS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if m.is_empty() {
        return None;
    }
    let said = m.get(library)?;
    let fits = said.iter().rev().find(|e| e.base.as_deref().is_none_or(|b| b == version));
    fits.or(said.back()).cloned()
}

/// Whether `b` is the fresh copy of a tree's edits.
pub fn is_fresh_edits(b: &Arc<Bundle>) -> bool {
    let m = EDITS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    m.get(&b.library()).is_some_and(|said| said.iter().any(|e| e.fresh.as_ref().is_some_and(|f| Arc::ptr_eq(f, b))))
}

/// The working trees this process serves, by library (stored name, `project+app`):
/// each one's folder. Their files are read from the tree as it is now (fs `read_file`
/// and `grep`), not from the copy the index was built from: an agent reads what it is
/// editing. Set by the one who knows the tree is the project's own (its set says so),
/// never from a bundle's manifest.
static TREES: std::sync::Mutex<std::collections::BTreeMap<String, PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Serves the library stored as `name` from the working tree at `root`.
pub fn set_tree_root(name: &str, root: PathBuf) {
    TREES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_owned(), root);
}

/// The working tree the library stored as `name` is read from, when it is one.
pub fn tree_root(name: &str) -> Option<PathBuf> {
    let m = TREES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if m.is_empty() {
        return None;
    }
    m.get(name).cloned()
}

/// The count of files changed in a working tree since the library serving it now was
/// built, by the library's label (`project:app@live`): the tree's watcher keeps it,
/// and replies say it while it is not zero.
pub fn pending(library: &str) -> Arc<std::sync::atomic::AtomicUsize> {
    static PENDING: std::sync::Mutex<std::collections::BTreeMap<String, Arc<std::sync::atomic::AtomicUsize>>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut m = PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    m.entry(library.to_owned()).or_default().clone()
}

/// The line a reply carries while `library`'s tree has edits not indexed yet.
pub fn pending_note(library: &str) -> Option<String> {
    let n = pending(library).load(std::sync::atomic::Ordering::SeqCst);
    (n > 0).then(|| {
        format!(
            "{library}: {} changed since it was indexed, indexing now; hits from {} may be stale",
            atlas_runtime::words::count(n, "file"),
            atlas_runtime::words::agree(n, "it", "them")
        )
    })
}

/// Follows `origin` with the rag server's bundle.
pub fn watch(live: Live, origin: Origin, opts: OpenOptions) {
    follow(
        live,
        origin,
        move |d| Bundle::open(d, opts.clone()).map_err(anyhow::Error::from),
        |b| format!("{} {}", b.manifest.name, b.manifest.version),
    );
}

/// Follows `origin` for as long as the runtime runs: `open` makes what serves from a
/// folder, `label` names it in the log.
pub fn follow<T: Send + Sync + 'static>(
    live: Live<T>,
    origin: Origin,
    open: impl Fn(&std::path::Path) -> anyhow::Result<T> + Clone + Send + Sync + 'static,
    label: impl Fn(&T) -> String + Send + 'static,
) {
    tokio::spawn(async move {
        let mut loaded = now_at(&origin).await;
        #[cfg(unix)]
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let forced = match hup.as_mut() {
                Some(h) => tokio::select! {
                    _ = h.recv() => true,
                    () = tick() => false,
                },
                None => {
                    tick().await;
                    false
                }
            };
            #[cfg(not(unix))]
            let forced = {
                tick().await;
                false
            };
            let now = now_at(&origin).await;
            if !forced && now == loaded {
                continue;
            }
            let Some((_, dir)) = now.clone() else { continue };
            let (d, open) = (dir.clone(), open.clone());
            match tokio::task::spawn_blocking(move || open(&d)).await {
                Ok(Ok(b)) => {
                    tracing::info!("now serving {} from {}", label(&b), dir.display());
                    live.set(Arc::new(b));
                    loaded = now;
                }
                Ok(Err(e)) => {
                    tracing::warn!("{} did not open ({e:#}); still serving the previous version", dir.display());
                    loaded = now;
                }
                Err(e) => tracing::warn!("reopening {}: {e}", dir.display()),
            }
        }
    });
}

/// The folder `origin` names now and its stamp, found off the async workers: a
/// project's set is a file read, and a file can be slow.
async fn now_at(origin: &Origin) -> Option<(Option<Stamp>, PathBuf)> {
    let origin = origin.clone();
    tokio::task::spawn_blocking(move || origin.folder().map(|d| (stamp(&d), d))).await.ok().flatten()
}

/// A manifest file's inode, length and time.
type Stamp = (u64, u64, Option<std::time::SystemTime>);

/// Which copy of a bundle a folder holds: its manifest file's identity, which a
/// reinstall of the same version in place (a keyword-first build completed with its
/// vectors) changes.
fn stamp(dir: &std::path::Path) -> Option<Stamp> {
    let m = std::fs::metadata(dir.join("manifest.json")).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((ino, m.len(), m.modified().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_still_on_the_version_before_keeps_the_edits_said_for_it() {
        let library = "project:edits-test@live";
        let said = |base: Option<&str>, hidden: &[&str]| Edits {
            base: base.map(str::to_owned),
            fresh: None,
            hidden: Arc::new(hidden.iter().map(|h| (*h).to_owned()).collect()),
        };
        assert!(edits(library, "0.0.1").is_none());
        set_edits(library, Some(said(None, &["a", "b"])));
        // 0.0.2 holds `a`: said for it, only `b` is still fresh.
        set_edits(library, Some(said(Some("0.0.2"), &["b"])));
        let hidden = |v: &str| edits(library, v).map(|e| e.hidden.iter().cloned().collect::<Vec<_>>());
        assert_eq!(hidden("0.0.1"), Some(vec!["a".to_owned(), "b".to_owned()]), "before its swap");
        assert_eq!(hidden("0.0.2"), Some(vec!["b".to_owned()]));
        // A version none was said for: the newest said for any (its fresh copies are
        // the newest of every file they hide).
        assert_eq!(hidden("0.0.9"), Some(vec!["a".to_owned(), "b".to_owned()]));
        set_edits(library, None);
        assert!(edits(library, "0.0.2").is_none());
    }

    #[test]
    fn a_tree_with_edits_not_indexed_says_how_many_until_they_are() {
        let library = "project:pending-test@live";
        assert_eq!(pending_note(library), None);
        pending(library).store(3, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            pending_note(library).as_deref(),
            Some(
                "project:pending-test@live: 3 files changed since it was indexed, indexing now; hits from them may be stale"
            )
        );
        pending(library).store(0, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(pending_note(library), None);
    }
}
