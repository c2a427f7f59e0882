//! The shared build cache on object storage (`cache.remote: s3://bucket/prefix`, also
//! `gs://`, `az://`, `file://`): which one this machine uses and how far it trusts it
//! ([`RemoteCache::configured`]: the precedence of the environment, pipeline.yaml and
//! the user's config file), and an [`atlas_cache::Remote`] over object_store.
//!
//! One worker thread owns a tokio runtime and the store; callers (the runner's threads,
//! rayon's) send it requests over a channel, so no caller needs a runtime of its own.
//! Reads run concurrently and each is bounded by the timeout; writes are queued
//! (write-behind), run 16 at a time, and `flush` waits for them, bounded too.

use atlas_cache::RemoteError;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use atlas_dist::store::Store;

use super::SourceConfig;
use super::stage::Loaded;

/// The remote build cache as configured for this machine: where, how long a request
/// may take, and the trust policy (which refs are used, whether refs are written and
/// signed).
pub struct RemoteCache {
    pub url: String,
    pub timeout: Duration,
    pub policy: atlas_cache::RemotePolicy,
    /// How many keys the policy trusts.
    keys: usize,
}

impl std::fmt::Debug for RemoteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteCache({}, {})", self.url, self.describe())
    }
}

impl RemoteCache {
    /// Its trust and write policy, in words, for the run's log.
    pub fn describe(&self) -> String {
        let p = &self.policy;
        let reads = match (&p.verifier, self.keys) {
            (None, _) => "trusted: unsigned refs used".to_owned(),
            (Some(_), n) => format!("refs used only when signed by one of {n} trusted keys"),
        };
        let writes = match (p.read_only, &p.signer) {
            (true, _) => "read-only",
            (false, Some(_)) => "written behind, refs signed",
            (false, None) => "written behind, refs unsigned",
        };
        format!("{reads}; {writes}")
    }

    /// The remote build cache: `ATLAS_CACHE_REMOTE` (`off` for none) > pipeline.yaml's
    /// `cache.remote` > the config file's `[cache] remote`; its per-request timeout and
    /// trust policy (docs/pipeline.md: pipeline.yaml's fields, then the config file's;
    /// `ATLAS_CACHE_READ_ONLY=1` makes this machine a reader).
    pub fn configured(cfg: &Loaded) -> anyhow::Result<Option<RemoteCache>> {
        // A working tree's index never leaves the machine, whatever is configured.
        if cfg.config.sources.values().any(|s| matches!(s, SourceConfig::Tree { .. })) {
            return Ok(None);
        }
        let user = atlas_dist::config::load().map_err(atlas_dist::edge)?.0.cache;
        let team = &cfg.config.cache;
        let url = match std::env::var("ATLAS_CACHE_REMOTE").ok().filter(|v| !v.is_empty()) {
            Some(v) if v == "off" => None,
            Some(v) => Some(v),
            None => team.remote.clone().or(user.remote),
        };
        let Some(url) = url else { return Ok(None) };
        let secs = team.timeout_s.or(user.timeout_s).unwrap_or(10).max(1);
        let env_ro = std::env::var("ATLAS_CACHE_READ_ONLY").is_ok_and(|v| v == "1" || v == "true");
        let read_only = env_ro || user.read_only.or(team.read_only).unwrap_or(false);
        let trusted = user.trusted.or(team.trusted).unwrap_or(false);
        let mut keys = Vec::new();
        for k in team.trusted_keys.iter().map(|k| (k, true)).chain(user.trusted_keys.iter().map(|k| (k, false))) {
            let text = if k.1 && !k.0.starts_with("RW") {
                cfg.resolve(Path::new(k.0)).display().to_string()
            } else {
                k.0.clone()
            };
            keys.push(
                atlas_dist::sign::parse_public_key(&text)
                    .map_err(|e| super::ConfigError(format!("cache.trusted_keys: {e}")))?,
            );
        }
        let sign_path = team.sign.as_ref().map(|p| cfg.resolve(p)).or(user.sign);
        let signer: Option<atlas_cache::trust::Signer> = match (&sign_path, read_only) {
            (Some(p), false) => {
                let sk = atlas_dist::sign::load_secret(p).map_err(atlas_dist::edge)?;
                Some(Box::new(move |m: &[u8]| {
                    atlas_dist::sign::sign_with(&sk, m, "atlas-cache-ref").map_err(Into::into)
                }))
            }
            _ => None,
        };
        let n = keys.len();
        let verifier: Option<atlas_cache::trust::Verifier> = if trusted {
            None
        } else {
            Some(Box::new(move |m: &[u8], sig: &str| {
                use atlas_cache::trust::SigCheck;
                let by = atlas_dist::sign::signature_key_id(sig);
                match keys.iter().find(|k| by.as_deref() == Some(atlas_dist::sign::key_id(k).as_str())) {
                    None => SigCheck::UnknownKey,
                    Some(k) => match atlas_dist::sign::verify_bytes(k, sig, m) {
                        Ok(_) => SigCheck::Valid,
                        Err(e) => SigCheck::Invalid(e.to_string()),
                    },
                }
            }))
        };
        let policy = atlas_cache::RemotePolicy { read_only, verifier, signer };
        Ok(Some(RemoteCache { url, timeout: Duration::from_secs(secs), policy, keys: n }))
    }
}

/// Concurrent requests to the store.
const PARALLEL: usize = 16;

enum Req {
    Get(String, mpsc::Sender<Result<Option<Vec<u8>>, RemoteError>>),
    Put(String, Vec<u8>),
    Flush(mpsc::Sender<Result<(), RemoteError>>),
}

/// The remote cache: a channel to its worker.
pub struct StoreRemote {
    tx: std::sync::Mutex<mpsc::Sender<Req>>,
    url: String,
    timeout: Duration,
}

impl std::fmt::Debug for StoreRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreRemote").field("url", &self.url).field("timeout", &self.timeout).finish()
    }
}

impl StoreRemote {
    /// Opens the store at `url` (no request is made yet) and starts its worker.
    pub fn open(url: &str, timeout: Duration) -> anyhow::Result<StoreRemote> {
        let parsed = url::Url::parse(url).map_err(|e| {
            crate::runner::ConfigError(format!("cache.remote {url:?} is not a URL ({e}); use s3://bucket/prefix"))
        })?;
        let store = Store::open(&parsed).map_err(|e| crate::runner::ConfigError(format!("cache.remote: {e}")))?;
        let (tx, rx) = mpsc::channel::<Req>();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        std::thread::Builder::new().name("remote-cache".into()).spawn(move || worker(rt, store, rx, timeout))?;
        Ok(StoreRemote { tx: std::sync::Mutex::new(tx), url: url.to_owned(), timeout })
    }

    fn send(&self, r: Req) -> Result<(), RemoteError> {
        self.tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(r)
            .map_err(|_| "the remote cache worker stopped".to_owned().into())
    }
}

fn worker(rt: tokio::runtime::Runtime, store: Store, rx: mpsc::Receiver<Req>, timeout: Duration) {
    let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut puts = tokio::task::JoinSet::new();
    let first_error: std::sync::Arc<std::sync::Mutex<Option<RemoteError>>> = Default::default();
    let url = store.url.to_string();
    while let Ok(req) = rx.recv() {
        match req {
            Req::Get(name, reply) => {
                let (store, limit, url) = (store.clone(), limit.clone(), url.clone());
                rt.spawn(async move {
                    let _permit = limit.acquire_owned().await;
                    let path = store.path(&name.split('/').collect::<Vec<_>>());
                    let r = match tokio::time::timeout(timeout, store.get_small(&path, 4 << 30)).await {
                        Ok(Ok(b)) => Ok(b),
                        Ok(Err(e)) => Err(RemoteError(e.to_string())),
                        Err(_) => Err(RemoteError(format!("{url}: no answer within {}s", timeout.as_secs_f32()))),
                    };
                    let _ = reply.send(r);
                });
            }
            Req::Put(name, bytes) => {
                let (store, limit, err, url) = (store.clone(), limit.clone(), first_error.clone(), url.clone());
                puts.spawn_on(
                    async move {
                        let _permit = limit.acquire_owned().await;
                        let path = store.path(&name.split('/').collect::<Vec<_>>());
                        let r = match tokio::time::timeout(timeout, store.put(&path, bytes)).await {
                            Ok(Ok(())) => return,
                            Ok(Err(e)) => RemoteError(e.to_string()),
                            Err(_) => RemoteError(format!("{url}: no answer within {}s", timeout.as_secs_f32())),
                        };
                        err.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(r);
                    },
                    rt.handle(),
                );
            }
            Req::Flush(reply) => {
                rt.block_on(async { while puts.join_next().await.is_some() {} });
                let e = first_error.lock().unwrap_or_else(|e| e.into_inner()).take();
                let _ = reply.send(e.map_or(Ok(()), Err));
            }
        }
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}

impl atlas_cache::Remote for StoreRemote {
    fn get(&self, name: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        self.get_many(&[name.to_owned()]).pop().unwrap_or(Ok(None))
    }

    fn get_many(&self, names: &[String]) -> Vec<Result<Option<Vec<u8>>, RemoteError>> {
        let replies: Vec<_> = names
            .iter()
            .map(|n| {
                let (tx, rx) = mpsc::channel();
                self.send(Req::Get(n.clone(), tx)).map(|()| rx)
            })
            .collect();
        // The worker bounds each read; this bounds a worker that is itself stuck.
        let wait = self.timeout + Duration::from_secs(5);
        replies
            .into_iter()
            .map(|r| {
                r.and_then(|rx| {
                    rx.recv_timeout(wait).unwrap_or_else(|_| Err("the remote cache did not answer".to_owned().into()))
                })
            })
            .collect()
    }

    fn put(&self, name: &str, bytes: Vec<u8>) {
        let _ = self.send(Req::Put(name.to_owned(), bytes));
    }

    fn flush(&self) -> Result<(), RemoteError> {
        let (tx, rx) = mpsc::channel();
        self.send(Req::Flush(tx))?;
        // Every write is bounded by the timeout; a long queue gets a minute more.
        rx.recv_timeout(self.timeout + Duration::from_secs(60))
            .unwrap_or_else(|_| Err("the remote cache's queued writes did not finish".to_owned().into()))
    }
}
