//! Memo entries: `refs/<namespace>/<key>` name an object; remote ones are records
//! checked by the trust policy.

use std::fs::{self};
use std::io::{self};
use std::path::PathBuf;

use crate::{Cache, Digest, RefRecord, Result, io_err};

impl Cache {
    pub(crate) fn ref_path(&self, namespace: &str, key: Digest) -> PathBuf {
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
}
