//! The shared cache behind the local one: read-through, write-behind, off at the
//! first failure.

use std::fmt;
use std::sync::atomic::Ordering;

use crate::trust;
use crate::{Cache, Digest, RefRecord, RemotePolicy, Result};

/// Why a remote call failed, in one line (the remote is then off for the run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RemoteError(pub String);

impl From<String> for RemoteError {
    fn from(s: String) -> RemoteError {
        RemoteError(s)
    }
}

impl From<&str> for RemoteError {
    fn from(s: &str) -> RemoteError {
        RemoteError(s.to_owned())
    }
}

/// A shared cache behind the local one, named by paths relative to its root:
/// `objects/<hex>` and `refs/<namespace>/<hex>`. Implementations bound every call in
/// time; an `Err` is a reason in one line.
pub trait Remote: Send + Sync + fmt::Debug {
    /// The bytes at `name`; `Ok(None)` when it is not there.
    fn get(&self, name: &str) -> std::result::Result<Option<Vec<u8>>, RemoteError>;
    /// Several reads at once (in parallel where the remote allows), in order.
    fn get_many(&self, names: &[String]) -> Vec<std::result::Result<Option<Vec<u8>>, RemoteError>> {
        names.iter().map(|n| self.get(n)).collect()
    }
    /// Queues a write; failures come back from [`Remote::flush`].
    fn put(&self, name: &str, bytes: Vec<u8>);
    /// Waits for the queued writes; returns the first failure, if any.
    fn flush(&self) -> std::result::Result<(), RemoteError>;
}

impl Cache {
    /// Puts `remote` behind the local store (read-through, write-behind unless the
    /// policy is read-only), its refs trusted as `policy` says.
    pub fn with_remote(mut self, remote: Box<dyn Remote>, policy: RemotePolicy) -> Cache {
        self.remote = Some(remote);
        self.policy = policy;
        self
    }

    /// The remote, while it works.
    pub(crate) fn remote(&self) -> Option<&dyn Remote> {
        self.remote.as_deref().filter(|_| !self.remote_down.load(Ordering::Relaxed))
    }

    /// Turns the remote off for the rest of the run, with one warning.
    pub(crate) fn remote_failed(&self, why: &str) {
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
            self.remote_failed(&why.0);
        }
    }

    /// A remote object's bytes, stored locally when they hash to `d`. A corrupt one
    /// is reported and treated as a miss.
    pub(crate) fn accept_remote(&self, d: Digest, bytes: Vec<u8>) -> Result<bool> {
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
    pub(crate) fn fetch_remote(&self, d: Digest) -> Result<bool> {
        let Some(r) = self.remote() else { return Ok(false) };
        match r.get(&format!("objects/{d}")) {
            Ok(Some(bytes)) => self.accept_remote(d, bytes),
            Ok(None) => Ok(false),
            Err(why) => {
                self.remote_failed(&why.0);
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
                        self.remote_failed(&why.0);
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn queue_remote(&self, name: String, bytes: Vec<u8>) {
        if self.policy.read_only {
            return;
        }
        if let Some(r) = self.remote() {
            r.put(&name, bytes);
            self.stats.remote_puts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A memo entry from the remote, kept locally once its record is bound to this
    /// entry (and signed, where the policy asks) and its object is here and intact. A
    /// record that fails is reported and the entry is a miss (recomputed).
    pub(crate) fn remote_ref(&self, namespace: &str, key: Digest) -> Result<Option<Digest>> {
        let Some(r) = self.remote() else { return Ok(None) };
        let entry = Cache::ref_name(namespace, key);
        let bytes = match r.get(&format!("refs/{entry}")) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(None),
            Err(why) => {
                self.remote_failed(&why.0);
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
}
