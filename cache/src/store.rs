//! The locked cache folder and its objects: every write atomic, every read re-hashed.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{Digest, Error, Remote, RemotePolicy, Result, io_err, now_unix_ms};
use std::fs::{OpenOptions, TryLockError};
use std::sync::Mutex;

/// Counters that tests and the summary read.
#[derive(Debug, Default)]
pub struct Stats {
    pub objects_written: AtomicU64,
    /// Objects and memo entries read from the remote.
    pub remote_hits: AtomicU64,
    /// Objects and memo entries queued to the remote.
    pub remote_puts: AtomicU64,
}

/// An open, locked cache directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct Cache {
    pub(crate) root: PathBuf,
    pub(crate) _lock: File,
    /// Corruption events, kept so the caller can report them.
    pub(crate) corruptions: Mutex<Vec<String>>,
    pub stats: Stats,
    pub(crate) remote: Option<Box<dyn Remote>>,
    pub(crate) policy: RemotePolicy,
    /// Set once the first unsigned remote ref was refused (one warning a run).
    pub(crate) unsigned_told: AtomicBool,
    /// Set at the remote's first failure: the rest of the run is local.
    pub(crate) remote_down: AtomicBool,
    pub(crate) warnings: Mutex<Vec<String>>,
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
            corruptions: Mutex::new(Vec::new()),
            stats: Stats::default(),
            remote: None,
            policy: RemotePolicy::default(),
            unsigned_told: AtomicBool::new(false),
            remote_down: AtomicBool::new(false),
            warnings: Mutex::new(Vec::new()),
        })
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
    pub(crate) fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        crate::atomic::write_staged(&self.root.join("tmp"), path, bytes).map_err(io_err(path))
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

    pub(crate) fn verify_local(&self, d: Digest) -> Result<bool> {
        let path = self.object_path(d);
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let actual = Digest::of_reader(f).map_err(io_err(&path))?;
        if actual != d {
            self.evict(&path, d, actual);
            return Ok(false);
        }
        Ok(true)
    }

    pub(crate) fn evict(&self, path: &Path, expected: Digest, actual: Digest) {
        let _ = fs::remove_file(path);
        let msg = Error::DataCorruption { path: path.to_owned(), expected: expected.to_hex(), actual: actual.to_hex() }
            .to_string();
        self.corruptions.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }

    /// Corruption events since the last call.
    pub fn take_corruptions(&self) -> Vec<String> {
        std::mem::take(&mut *self.corruptions.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

pub(crate) fn read_dir_paths(dir: &Path) -> Result<Vec<PathBuf>> {
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
