//! Content-addressed artifact store for the Atlas pipeline.
//!
//! Layout of a cache directory:
//!
//! ```text
//! <cache>/
//!   lock                      exclusive lock (OS file lock; released by the kernel when a process dies)
//!   objects/ab/cdef…          immutable blobs, named by the blake3 of their bytes
//!   refs/<namespace>/<key>    small files holding one object digest (stage and item memo entries)
//!   runs/<run-id>.json        one record per finished run: what it produced and referenced
//!   tmp/                      staging area for atomic writes
//! ```
//!
//! Every write goes to `tmp/`, is fsynced and atomically renamed into place, so a
//! crash leaves either the old state or the new one. Every read re-hashes the bytes:
//! a truncated, zero-byte or bit-flipped object is reported, evicted and treated as a
//! miss, never served.
//!
//! A [`Remote`] may sit behind the local store (a team's shared cache on object
//! storage): a local miss reads through it (objects and memo entries, each object
//! checked against its blake3 before it is stored or used), and every write is queued
//! to it behind the local one. The remote is an accelerator, never a dependency: the
//! first failure or timeout turns it off for the run with one warning, and a corrupt
//! remote object is reported and recomputed.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub mod trust;
pub use trust::{RefRecord, RemotePolicy};

/// Errors of the artifact store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The I/O error is part of the message, not a `source()`, so `{:#}` chains
    /// do not print it twice.
    #[error("cache I/O failed at {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error(
        "corrupt cache object at {path}: expected blake3 {expected}, found {actual}; it was evicted and will be recomputed"
    )]
    DataCorruption { path: PathBuf, expected: String, actual: String },
    #[error(
        "the cache at {path} is locked by another atlas-pipeline run ({holder}); wait for it to finish, or point --cache-dir elsewhere"
    )]
    Locked { path: PathBuf, holder: String },
    #[error("invalid digest {0:?}: expected 64 lowercase hex characters")]
    InvalidDigest(String),
    #[error("malformed cache record at {path}: {reason}")]
    BadRecord { path: PathBuf, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |error| Error::Io { path: path.to_owned(), error }
}

/// A blake3 digest, the name of an object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest([u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    pub fn to_hex(self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    pub fn short(self) -> String {
        self.to_hex()[..12].to_owned()
    }

    pub fn parse(s: &str) -> Result<Digest> {
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(Error::InvalidDigest(s.to_owned()));
        }
        blake3::Hash::from_hex(s).map(|h| Digest(*h.as_bytes())).map_err(|_| Error::InvalidDigest(s.to_owned()))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

impl TryFrom<String> for Digest {
    type Error = Error;
    fn try_from(s: String) -> Result<Digest> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.to_hex()
    }
}

/// Builds a key from labelled parts: `blake3(len(label) label len(value) value …)`.
/// Length prefixes make the encoding injective, so two different part lists never
/// collide by concatenation.
#[derive(Debug, Default)]
pub struct KeyBuilder(blake3::Hasher);

impl KeyBuilder {
    pub fn new(domain: &str) -> KeyBuilder {
        let mut k = KeyBuilder(blake3::Hasher::new());
        k.part("domain", domain.as_bytes());
        k
    }

    pub fn part(&mut self, label: &str, value: &[u8]) -> &mut Self {
        for chunk in [label.as_bytes(), value] {
            self.0.update(&(chunk.len() as u64).to_le_bytes());
            self.0.update(chunk);
        }
        self
    }

    pub fn str(&mut self, label: &str, value: &str) -> &mut Self {
        self.part(label, value.as_bytes())
    }

    pub fn digest(&mut self, label: &str, value: Digest) -> &mut Self {
        self.part(label, &value.0)
    }

    pub fn finish(&self) -> Digest {
        Digest(*self.0.finalize().as_bytes())
    }
}

/// What a finished run references; `gc` keeps everything the kept runs list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    /// Identifies the pipeline (its config file); gc keeps the newest runs per pipeline.
    pub pipeline: String,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    /// Free-form description of the run (stage keys, params, inputs) for `status`.
    pub detail: serde_json::Value,
    /// Every object the run produced or reused.
    pub objects: BTreeSet<Digest>,
    /// Every ref (`namespace/key`) the run used.
    pub refs: BTreeSet<String>,
}

/// Outcome of a garbage collection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    pub kept_runs: usize,
    pub removed_runs: usize,
    pub kept_objects: usize,
    pub removed_objects: usize,
    pub removed_refs: usize,
    pub freed_bytes: u64,
}

/// Counters that tests and the summary read.
#[derive(Debug, Default)]
pub struct Stats {
    pub objects_written: AtomicU64,
    /// Objects and memo entries read from the remote.
    pub remote_hits: AtomicU64,
    /// Objects and memo entries queued to the remote.
    pub remote_puts: AtomicU64,
}

/// A shared cache behind the local one, named by paths relative to its root:
/// `objects/<hex>` and `refs/<namespace>/<hex>`. Implementations bound every call in
/// time; an `Err` is a reason in one line.
pub trait Remote: Send + Sync + fmt::Debug {
    /// The bytes at `name`; `Ok(None)` when it is not there.
    fn get(&self, name: &str) -> std::result::Result<Option<Vec<u8>>, String>;
    /// Several reads at once (in parallel where the remote allows), in order.
    fn get_many(&self, names: &[String]) -> Vec<std::result::Result<Option<Vec<u8>>, String>> {
        names.iter().map(|n| self.get(n)).collect()
    }
    /// Queues a write; failures come back from [`Remote::flush`].
    fn put(&self, name: &str, bytes: Vec<u8>);
    /// Waits for the queued writes; returns the first failure, if any.
    fn flush(&self) -> std::result::Result<(), String>;
}

/// An open, locked cache directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct Cache {
    root: PathBuf,
    _lock: File,
    tmp_counter: AtomicU64,
    /// Corruption events, kept so the caller can report them.
    corruptions: Mutex<Vec<String>>,
    pub stats: Stats,
    remote: Option<Box<dyn Remote>>,
    policy: RemotePolicy,
    /// Set once the first unsigned remote ref was refused (one warning a run).
    unsigned_told: std::sync::atomic::AtomicBool,
    /// Set at the remote's first failure: the rest of the run is local.
    remote_down: std::sync::atomic::AtomicBool,
    warnings: Mutex<Vec<String>>,
}

/// How long `Cache::open` waits for a lock held by another process.
#[derive(Debug, Clone, Copy)]
pub enum LockWait {
    /// Fail at once with `Error::Locked`.
    NoWait,
    /// Poll until the lock is free or the duration passes; `on_wait` is told once.
    Up(Duration),
}

impl Cache {
    /// Opens (creating if needed) the cache at `root` and takes its exclusive lock.
    pub fn open(root: &Path, wait: LockWait, mut on_wait: impl FnMut(&str)) -> Result<Cache> {
        for sub in ["objects", "refs", "runs", "tmp"] {
            let p = root.join(sub);
            fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        let lock_path = root.join("lock");
        let mut lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        let deadline = match wait {
            LockWait::NoWait => Instant::now(),
            LockWait::Up(d) => Instant::now() + d,
        };
        let mut told = false;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&lock_path);
                    if Instant::now() >= deadline {
                        return Err(Error::Locked { path: root.to_owned(), holder });
                    }
                    if !told {
                        on_wait(&holder);
                        told = true;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
            }
        }
        // We hold the lock. Any previous holder is gone (the kernel released its lock when
        // it died), so whatever it left in tmp/ is garbage from an interrupted write.
        let holder = format!("pid {} since unix {}", std::process::id(), now_unix_ms() / 1000);
        lock.set_len(0)
            .and_then(|()| lock.write_all(holder.as_bytes()))
            .and_then(|()| lock.sync_data())
            .map_err(io_err(&lock_path))?;
        let tmp = root.join("tmp");
        if let Ok(entries) = fs::read_dir(&tmp) {
            for e in entries.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(Cache {
            root: root.to_owned(),
            _lock: lock,
            tmp_counter: AtomicU64::new(0),
            corruptions: Mutex::new(Vec::new()),
            stats: Stats::default(),
            remote: None,
            policy: RemotePolicy::default(),
            unsigned_told: std::sync::atomic::AtomicBool::new(false),
            remote_down: std::sync::atomic::AtomicBool::new(false),
            warnings: Mutex::new(Vec::new()),
        })
    }

    /// Puts `remote` behind the local store (read-through, write-behind unless the
    /// policy is read-only), its refs trusted as `policy` says.
    pub fn with_remote(mut self, remote: Box<dyn Remote>, policy: RemotePolicy) -> Cache {
        self.remote = Some(remote);
        self.policy = policy;
        self
    }

    /// The remote, while it works.
    fn remote(&self) -> Option<&dyn Remote> {
        self.remote.as_deref().filter(|_| !self.remote_down.load(Ordering::Relaxed))
    }

    /// Turns the remote off for the rest of the run, with one warning.
    fn remote_failed(&self, why: &str) {
        if !self.remote_down.swap(true, Ordering::Relaxed) {
            self.warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("the remote cache failed ({why}); building locally from here on"));
        }
    }

    /// Warnings since the last call (a remote that failed, its queued writes lost).
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits for the writes queued to the remote (end of a run).
    pub fn flush_remote(&self) {
        if let Some(r) = self.remote()
            && let Err(why) = r.flush()
        {
            self.remote_failed(&why);
        }
    }

    /// A remote object's bytes, stored locally when they hash to `d`. A corrupt one
    /// is reported and treated as a miss.
    fn accept_remote(&self, d: Digest, bytes: Vec<u8>) -> Result<bool> {
        let actual = Digest::of(&bytes);
        if actual != d {
            let msg = format!(
                "corrupt remote cache object objects/{d}: its blake3 is {actual}; it was not used and will be recomputed"
            );
            self.corruptions.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
            return Ok(false);
        }
        self.write_atomic(&self.object_path(d), &bytes)?;
        self.stats.remote_hits.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Reads a missing object through the remote; true when it is now local and intact.
    fn fetch_remote(&self, d: Digest) -> Result<bool> {
        let Some(r) = self.remote() else { return Ok(false) };
        match r.get(&format!("objects/{d}")) {
            Ok(Some(bytes)) => self.accept_remote(d, bytes),
            Ok(None) => Ok(false),
            Err(why) => {
                self.remote_failed(&why);
                Ok(false)
            }
        }
    }

    /// Fetches, in parallel where the remote allows, every object of `ds` that is not
    /// local (a stage hit about to be verified object by object).
    pub fn prefetch(&self, ds: &[Digest]) -> Result<()> {
        let Some(r) = self.remote() else { return Ok(()) };
        let missing: Vec<Digest> = ds.iter().copied().filter(|d| !self.object_path(*d).exists()).collect();
        for batch in missing.chunks(256) {
            let names: Vec<String> = batch.iter().map(|d| format!("objects/{d}")).collect();
            for (d, got) in batch.iter().zip(r.get_many(&names)) {
                match got {
                    Ok(Some(bytes)) => {
                        self.accept_remote(*d, bytes)?;
                    }
                    Ok(None) => {}
                    Err(why) => {
                        self.remote_failed(&why);
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    fn queue_remote(&self, name: String, bytes: Vec<u8>) {
        if self.policy.read_only {
            return;
        }
        if let Some(r) = self.remote() {
            r.put(&name, bytes);
            self.stats.remote_puts.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn object_path(&self, d: Digest) -> PathBuf {
        let hex = d.to_hex();
        self.root.join("objects").join(&hex[..2]).join(&hex[2..])
    }

    /// Writes `bytes` atomically at `path`, staging in `tmp/` (cleared on open, so a
    /// killed writer leaves nothing behind).
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        let tmp = self.root.join("tmp").join(format!("{}-{n}", std::process::id()));
        write_via(&tmp, path, bytes).map_err(io_err(path))
    }

    /// Stores `bytes` and returns their digest. An intact existing object is kept as is.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest> {
        let d = Digest::of(bytes);
        let path = self.object_path(d);
        if self.verify_local(d)? {
            return Ok(d);
        }
        self.write_atomic(&path, bytes)?;
        self.stats.objects_written.fetch_add(1, Ordering::Relaxed);
        self.queue_remote(format!("objects/{d}"), bytes.to_vec());
        Ok(d)
    }

    pub fn put_json<T: Serialize>(&self, value: &T) -> Result<Digest> {
        let bytes = serde_json::to_vec(value).expect("serialising plain data to JSON cannot fail");
        self.put(&bytes)
    }

    /// Reads an object, verifying its digest. `Ok(None)` when it is missing or was
    /// corrupt (then it is evicted and the event recorded).
    pub fn get(&self, d: Digest) -> Result<Option<Vec<u8>>> {
        let path = self.object_path(d);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.fetch_remote(d)? {
                    return Ok(None);
                }
                fs::read(&path).map_err(io_err(&path))?
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        let actual = Digest::of(&bytes);
        if actual != d {
            self.evict(&path, d, actual);
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Like [`Cache::get`], but a missing or corrupt object is an error.
    pub fn get_required(&self, d: Digest) -> Result<Vec<u8>> {
        let path = self.object_path(d);
        self.get(d)?.ok_or_else(|| Error::DataCorruption {
            path,
            expected: d.to_hex(),
            actual: "missing object".to_owned(),
        })
    }

    pub fn get_json<T: for<'de> Deserialize<'de>>(&self, d: Digest) -> Result<Option<T>> {
        let Some(bytes) = self.get(d)? else { return Ok(None) };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::BadRecord { path: self.object_path(d), reason: e.to_string() })
    }

    /// True when the object exists (locally, or fetched from the remote) and hashes to
    /// its name. Corrupt objects are evicted.
    pub fn verify(&self, d: Digest) -> Result<bool> {
        // Fetched objects were checked as they arrived.
        Ok(self.verify_local(d)? || self.fetch_remote(d)?)
    }

    fn verify_local(&self, d: Digest) -> Result<bool> {
        let path = self.object_path(d);
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(io_err(&path))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        let actual = Digest(*h.finalize().as_bytes());
        if actual != d {
            self.evict(&path, d, actual);
            return Ok(false);
        }
        Ok(true)
    }

    fn evict(&self, path: &Path, expected: Digest, actual: Digest) {
        let _ = fs::remove_file(path);
        let msg = Error::DataCorruption { path: path.to_owned(), expected: expected.to_hex(), actual: actual.to_hex() }
            .to_string();
        self.corruptions.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }

    /// Corruption events since the last call.
    pub fn take_corruptions(&self) -> Vec<String> {
        std::mem::take(&mut *self.corruptions.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn ref_path(&self, namespace: &str, key: Digest) -> PathBuf {
        let hex = key.to_hex();
        self.root.join("refs").join(namespace).join(&hex[..2]).join(&hex[2..])
    }

    /// Looks up a memo entry. It is a hit only when the object it names is intact.
    pub fn get_ref(&self, namespace: &str, key: Digest) -> Result<Option<Digest>> {
        let path = self.ref_path(namespace, key);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.remote_ref(namespace, key),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let Ok(target) = Digest::parse(text.trim()) else {
            // A torn or garbled ref is just a miss; the next set_ref rewrites it.
            let _ = fs::remove_file(&path);
            return Ok(None);
        };
        Ok(if self.verify(target)? { Some(target) } else { None })
    }

    /// A memo entry from the remote, kept locally once its record is bound to this
    /// entry (and signed, where the policy asks) and its object is here and intact. A
    /// record that fails is reported and the entry is a miss (recomputed).
    fn remote_ref(&self, namespace: &str, key: Digest) -> Result<Option<Digest>> {
        let Some(r) = self.remote() else { return Ok(None) };
        let entry = Cache::ref_name(namespace, key);
        let bytes = match r.get(&format!("refs/{entry}")) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(None),
            Err(why) => {
                self.remote_failed(&why);
                return Ok(None);
            }
        };
        let target = match RefRecord::check(&bytes, &entry, &self.policy) {
            Ok(t) => t,
            Err(refused @ (trust::Refused::Unsigned | trust::Refused::Untrusted)) => {
                if !self.unsigned_told.swap(true, Ordering::Relaxed) {
                    let what = match refused {
                        trust::Refused::Unsigned => "unsigned refs",
                        _ => "refs signed by keys this machine does not trust",
                    };
                    self.warnings.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                        "the remote cache holds {what}, and only refs signed by a trusted key are used: set \
                         cache.trusted_keys to the writers' public keys, or cache.trusted: true for a remote only \
                         you write; building those stages locally"
                    ));
                }
                return Ok(None);
            }
            Err(trust::Refused::Poisoned(why)) => {
                let msg =
                    format!("remote cache ref refs/{entry} refused: {why}; it was not used and will be recomputed");
                self.corruptions.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
                return Ok(None);
            }
        };
        if !self.verify(target)? {
            return Ok(None);
        }
        self.write_atomic(&self.ref_path(namespace, key), target.to_hex().as_bytes())?;
        self.stats.remote_hits.fetch_add(1, Ordering::Relaxed);
        Ok(Some(target))
    }

    /// Records a memo entry. Call only after the target object is stored. The remote
    /// gets a record bound to the entry, signed when the policy has a signer.
    pub fn set_ref(&self, namespace: &str, key: Digest, target: Digest) -> Result<()> {
        self.write_atomic(&self.ref_path(namespace, key), target.to_hex().as_bytes())?;
        if self.policy.read_only || self.remote().is_none() {
            return Ok(());
        }
        let entry = Cache::ref_name(namespace, key);
        let signature = match &self.policy.signer {
            Some(sign) => match sign(&RefRecord::message(&entry, target)) {
                Ok(s) => Some(s),
                Err(why) => {
                    self.remote_failed(&format!("signing a ref: {why}"));
                    return Ok(());
                }
            },
            None => None,
        };
        let record = RefRecord { entry: entry.clone(), target, signature };
        let bytes = serde_json::to_vec(&record).expect("a ref record serialises");
        self.queue_remote(format!("refs/{entry}"), bytes);
        Ok(())
    }

    pub fn ref_name(namespace: &str, key: Digest) -> String {
        format!("{namespace}/{}", key.to_hex())
    }

    /// Saves a finished run's record.
    pub fn record_run(&self, run: &RunRecord) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(run).expect("run records serialise");
        self.write_atomic(&self.root.join("runs").join(format!("{}.json", run.id)), &bytes)
    }

    /// All run records, oldest first. Unreadable records are skipped and reported.
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        let dir = self.root.join("runs");
        let mut runs = Vec::new();
        for e in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let path = e.map_err(io_err(&dir))?.path();
            if path.extension().is_some_and(|x| x == "json") {
                let bytes = fs::read(&path).map_err(io_err(&path))?;
                match serde_json::from_slice::<RunRecord>(&bytes) {
                    Ok(r) => runs.push(r),
                    Err(e) => {
                        self.corruptions
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("unreadable run record {} ({e}); it is ignored", path.display()));
                    }
                }
            }
        }
        runs.sort_by(|a, b| (a.finished_unix_ms, &a.id).cmp(&(b.finished_unix_ms, &b.id)));
        Ok(runs)
    }

    /// The newest finished run of `pipeline`.
    pub fn latest_run(&self, pipeline: &str) -> Result<Option<RunRecord>> {
        Ok(self.runs()?.into_iter().rev().find(|r| r.pipeline == pipeline))
    }

    /// Keeps the newest `keep_per_pipeline` runs of each pipeline and removes every
    /// object and ref that none of them references.
    pub fn gc(&self, keep_per_pipeline: usize) -> Result<GcReport> {
        let runs = self.runs()?;
        let mut report = GcReport::default();
        let mut kept: Vec<&RunRecord> = Vec::new();
        let mut seen = std::collections::HashMap::<&str, usize>::new();
        for r in runs.iter().rev() {
            let n = seen.entry(r.pipeline.as_str()).or_default();
            if *n < keep_per_pipeline.max(1) {
                kept.push(r);
                *n += 1;
            } else {
                let p = self.root.join("runs").join(format!("{}.json", r.id));
                fs::remove_file(&p).map_err(io_err(&p))?;
                report.removed_runs += 1;
            }
        }
        report.kept_runs = kept.len();
        let live_objects: BTreeSet<Digest> = kept.iter().flat_map(|r| r.objects.iter().copied()).collect();
        let live_refs: BTreeSet<&str> = kept.iter().flat_map(|r| r.refs.iter().map(String::as_str)).collect();

        let objects = self.root.join("objects");
        for shard in read_dir_paths(&objects)? {
            for path in read_dir_paths(&shard)? {
                let name = format!(
                    "{}{}",
                    shard.file_name().unwrap_or_default().to_string_lossy(),
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                let live = Digest::parse(&name).is_ok_and(|d| live_objects.contains(&d));
                if live {
                    report.kept_objects += 1;
                } else {
                    report.freed_bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    fs::remove_file(&path).map_err(io_err(&path))?;
                    report.removed_objects += 1;
                }
            }
            let _ = fs::remove_dir(&shard); // only succeeds when empty
        }
        let refs = self.root.join("refs");
        for ns in read_dir_paths(&refs)? {
            let ns_name = ns.file_name().unwrap_or_default().to_string_lossy().into_owned();
            for shard in read_dir_paths(&ns)? {
                for path in read_dir_paths(&shard)? {
                    let name = format!(
                        "{ns_name}/{}{}",
                        shard.file_name().unwrap_or_default().to_string_lossy(),
                        path.file_name().unwrap_or_default().to_string_lossy()
                    );
                    if !live_refs.contains(name.as_str()) {
                        fs::remove_file(&path).map_err(io_err(&path))?;
                        report.removed_refs += 1;
                    }
                }
                let _ = fs::remove_dir(&shard);
            }
        }
        Ok(report)
    }
}

fn read_dir_paths(dir: &Path) -> Result<Vec<PathBuf>> {
    match fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.map(|e| e.path()).map_err(io_err(dir))).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(dir)(e)),
    }
}

fn read_holder(lock_path: &Path) -> String {
    match fs::read_to_string(lock_path) {
        Ok(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => "holder unknown".to_owned(),
    }
}

/// Writes `bytes` to `path` atomically: a temp file beside it, fsynced, renamed into
/// place, and the folder fsynced. Readers see the old file or the new one, never half.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    write_via(&dir.join(format!(".{name}.tmp-{}-{n}", std::process::id())), path, bytes)
}

/// Writes `bytes` to `tmp`, fsyncs, renames it to `path` and fsyncs the folder.
fn write_via(tmp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let res = (|| {
        let mut f = File::create(tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(tmp, path)?;
        if let Some(dir) = path.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = fs::remove_file(tmp);
    }
    res
}

pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
