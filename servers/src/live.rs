//! A bundle that a running server can swap: `atlas serve rag --bundle NAME` follows
//! `ATLAS_HOME/bundles/NAME/current`. It reopens on SIGHUP or when it sees the link
//! move (checked every second); calls in flight finish on the bundle they started
//! with, sessions stay open, and a new version that fails to open is logged and the
//! old one keeps serving.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use atlas_runtime::{Bundle, OpenOptions};

#[derive(Debug, Clone)]
pub struct Live(Arc<RwLock<Arc<Bundle>>>);

impl Live {
    pub fn new(b: Arc<Bundle>) -> Live {
        Live(Arc::new(RwLock::new(b)))
    }

    /// The bundle serving now.
    pub fn get(&self) -> Arc<Bundle> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set(&self, b: Arc<Bundle>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = b;
    }
}

/// Where a served bundle comes from: a fixed folder, or an installed name.
#[derive(Debug, Clone)]
pub enum Origin {
    Folder(PathBuf),
    Installed { home: atlas_dist::home::Home, name: String },
}

impl Origin {
    /// The folder to open now.
    pub fn folder(&self) -> Option<PathBuf> {
        match self {
            Origin::Folder(p) => Some(p.clone()),
            Origin::Installed { home, name } => home.resolve(name),
        }
    }
}

/// Follows `origin` for as long as the runtime runs.
pub fn watch(live: Live, origin: Origin, opts: OpenOptions) {
    tokio::spawn(async move {
        let mut loaded = origin.folder();
        #[cfg(unix)]
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let forced = match hup.as_mut() {
                Some(h) => tokio::select! {
                    _ = h.recv() => true,
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => false,
                },
                None => {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    false
                }
            };
            #[cfg(not(unix))]
            let forced = {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                false
            };
            let now = origin.folder();
            if !forced && now == loaded {
                continue;
            }
            let Some(dir) = now.clone() else { continue };
            let o = opts.clone();
            let d = dir.clone();
            match tokio::task::spawn_blocking(move || Bundle::open(&d, o)).await {
                Ok(Ok(b)) => {
                    tracing::info!("now serving {} {} from {}", b.manifest.name, b.manifest.version, dir.display());
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
