//! How far a remote cache's memo entries are trusted (docs/pipeline.md, "The shared
//! cache's trust model").
//!
//! An object names itself (its blake3), so a replaced object is always caught. A memo
//! entry (a ref: "the output of this key is that object") does not: whoever can write
//! the remote could point any key at any intact object. So a ref on the remote is a
//! *record* that names its own entry (`<namespace>/<key>`) and its target, signed by
//! its writer when the remote has several:
//!
//! - a record that names another entry than the path it was read from (a copy of
//!   another page's or an older build's ref) is refused;
//! - with a [`RemotePolicy::verifier`] (the default for a remote written by several
//!   parties), a record is used only when its signature verifies with a trusted key;
//! - a remote marked trusted (one writer: your CI) needs no signature, but its records
//!   must still be bound to their entry;
//! - a read-only remote is never written.
//!
//! A refused record is reported and the entry recomputed, never used.
//!
//! Architecture invariant: nothing read from a remote cache is trusted beyond its
//! writers. *`cache/tests/it/main.rs`, `tests/it/remote_cache.rs`
//! (`a_poisoned_remote_ref_is_reported_and_recomputed`).*

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Digest;

/// Checks a record's signature over its message.
pub type Verifier = Box<dyn Fn(&[u8], &str) -> SigCheck + Send + Sync>;

/// What a [`Verifier`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigCheck {
    /// By a trusted key, over this message.
    Valid,
    /// By a key this machine does not trust (another team's writer, say).
    UnknownKey,
    /// Claims a trusted key but does not verify: a forgery or a replay.
    Invalid(String),
}
/// Signs a record's message; returns the signature's text.
pub type Signer = Box<dyn Fn(&[u8]) -> Result<String, Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// What this machine trusts of its remote, and what it writes there.
#[derive(Default)]
pub struct RemotePolicy {
    /// Never write to the remote (objects or refs).
    pub read_only: bool,
    /// `Some`: records are used only when signed by a trusted key. `None`: the remote
    /// is trusted (one writer); records still must be bound to their entry.
    pub verifier: Option<Verifier>,
    /// Signs the records this machine writes; `None` writes them unsigned.
    pub signer: Option<Signer>,
}

impl fmt::Debug for RemotePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemotePolicy")
            .field("read_only", &self.read_only)
            .field("signed_refs_only", &self.verifier.is_some())
            .field("signs", &self.signer.is_some())
            .finish()
    }
}

impl RemotePolicy {
    /// A remote with one trusted writer, read and written (tests, a private cache).
    pub fn trusted() -> RemotePolicy {
        RemotePolicy::default()
    }
}

/// A ref as stored on a remote: bound to its entry, optionally signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefRecord {
    /// The entry this record is for: `<namespace>/<key hex>`.
    #[serde(rename = "ref")]
    pub entry: String,
    pub target: Digest,
    /// A minisign signature over [`RefRecord::message`], by the writer's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The longest record read from a remote.
pub const MAX_RECORD_BYTES: usize = 4096;

impl RefRecord {
    /// What a signature covers: the entry and the target together, so a signed record
    /// cannot be replayed under another key.
    pub fn message(entry: &str, target: Digest) -> Vec<u8> {
        format!("atlas-cache-ref 1 {entry} {target}").into_bytes()
    }

    /// Why a record read at `entry` cannot be used under `policy`, if it cannot.
    pub fn check(bytes: &[u8], entry: &str, policy: &RemotePolicy) -> Result<Digest, Refused> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(Refused::Poisoned(format!("its record is {} bytes", bytes.len())));
        }
        let r: RefRecord = serde_json::from_slice(bytes)
            .map_err(|_| Refused::Poisoned("it is not a ref record bound to its entry".into()))?;
        if r.entry != entry {
            return Err(Refused::Poisoned(format!(
                "its record is for {}",
                r.entry.chars().take(120).collect::<String>()
            )));
        }
        if let Some(verify) = &policy.verifier {
            let Some(sig) = &r.signature else { return Err(Refused::Unsigned) };
            match verify(&RefRecord::message(entry, r.target), sig) {
                SigCheck::Valid => {}
                SigCheck::UnknownKey => return Err(Refused::Untrusted),
                SigCheck::Invalid(why) => {
                    return Err(Refused::Poisoned(format!("its signature does not verify ({why})")));
                }
            }
        }
        Ok(r.target)
    }
}

/// Why a remote record was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Unsigned where signatures are required: a remote written without a key.
    Unsigned,
    /// Signed by a key this machine does not trust.
    Untrusted,
    /// A record that lies about its entry, or whose signature does not verify.
    Poisoned(String),
}
