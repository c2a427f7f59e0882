//! `<name>/latest.json` on object storage: what the newest published version of a
//! bundle is, and what its signature must say. Read by `install` and `delta`, written
//! by `publish`.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// `<name>/latest.json` on object storage: what the newest published version is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latest {
    pub name: String,
    pub version: String,
    /// The archive's file name under `<name>/<version>/`.
    pub archive: String,
    pub sha256: String,
    pub size: u64,
    pub created: String,
    /// The `.minisig` text, when the archive is signed.
    #[serde(default)]
    pub signature: Option<String>,
    /// Every file of the bundle is published beside the archive, under
    /// `<name>/files/<blake3>.zst`: `atlas update` can fetch only what changed.
    #[serde(default)]
    pub files: bool,
    /// sha256 of `<name>/<version>/manifest.json` (for a delta update).
    #[serde(default)]
    pub manifest_sha256: Option<String>,
    /// The `.minisig` text of the manifest, when the release is signed.
    #[serde(default)]
    pub manifest_signature: Option<String>,
}

pub fn parse_latest(url: &url::Url, b: &[u8]) -> Result<Latest> {
    let l: Latest =
        serde_json::from_slice(b).map_err(|e| Error::DataCorruption(format!("{url}: unreadable latest.json ({e})")))?;
    crate::check_component("bundle", &l.name)?;
    crate::check_component("version", &l.version)?;
    // The hash names the download's file: 64 hex digits, nothing else, compared in
    // lower case (as every hash here is written).
    let mut l = l;
    l.sha256.make_ascii_lowercase();
    if let Some(m) = &mut l.manifest_sha256 {
        m.make_ascii_lowercase();
        if m.len() != 64 || !m.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::DataCorruption(format!(
                "{url}: latest.json's manifest_sha256 {:?} is not 64 hex digits",
                crate::short(m)
            )));
        }
    }
    if l.sha256.len() != 64 || !l.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::DataCorruption(format!(
            "{url}: latest.json's sha256 {:?} is not 64 hex digits",
            crate::short(&l.sha256)
        )));
    }
    if l.archive.contains('/') || !l.archive.ends_with(".tar.zst") {
        return Err(Error::DataCorruption(format!(
            "{url}: latest.json names an odd archive {:?}",
            crate::short(&l.archive)
        )));
    }
    Ok(l)
}

/// The `name=` and `version=` of a signature's trusted comment must both be the
/// bundle's: a signature for another bundle or version is no signature of this one.
pub fn check_signed_comment(comment: &str, name: &str, version: &str, what: &str) -> Result<()> {
    let field = |k: &str| comment.split_whitespace().find_map(|w| w.strip_prefix(k));
    if field("name=") == Some(name) && field("version=") == Some(version) {
        return Ok(());
    }
    Err(Error::Signature(format!(
        "{what}: the signature's trusted comment is {:?}, not for {name} {version}; nothing was installed",
        crate::short(comment)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> url::Url {
        url::Url::parse("s3://b/docs").unwrap()
    }

    #[test]
    fn a_latest_json_in_upper_case_hex_is_compared_in_lower_case() {
        let l = Latest {
            name: "docs".into(),
            version: "1.0.0".into(),
            archive: "docs-1.0.0.tar.zst".into(),
            sha256: "AB".repeat(32),
            size: 1,
            created: String::new(),
            signature: None,
            files: false,
            manifest_sha256: Some("CD".repeat(32)),
            manifest_signature: None,
        };
        let got = parse_latest(&url(), &serde_json::to_vec(&l).unwrap()).unwrap();
        assert_eq!(got.sha256, "ab".repeat(32));
        assert_eq!(got.manifest_sha256.as_deref(), Some("cd".repeat(32).as_str()));
    }

    #[test]
    fn a_signature_must_name_the_bundle_and_its_version() {
        let ok = "atlas-bundle name=docs version=1.0.0 sha256=x";
        assert!(check_signed_comment(ok, "docs", "1.0.0", "s").is_ok());
        assert!(check_signed_comment(ok, "other", "1.0.0", "s").is_err());
        assert!(check_signed_comment(ok, "docs", "0.9.0", "s").is_err());
        assert!(check_signed_comment("atlas-bundle name=docs", "docs", "1.0.0", "s").is_err(), "no version=");
        assert!(check_signed_comment("atlas-bundle version=1.0.0", "docs", "1.0.0", "s").is_err(), "no name=");
    }

    proptest::proptest! {
        /// Any bytes as latest.json: refused, or names that are folder names, a hash of
        /// 64 lowercase hex digits and a plain archive name.
        #[test]
        fn latest_json_from_a_store_is_safe_or_refused(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            name in "\\PC{0,20}",
            version in "\\PC{0,12}",
            sha in "[0-9a-fA-FxZ/.]{0,70}",
            archive in "\\PC{0,30}",
        ) {
            let v = serde_json::json!({
                "name": name, "version": version, "archive": archive, "sha256": sha, "size": 1, "created": ""
            });
            for b in [bytes, serde_json::to_vec(&v).unwrap()] {
                if let Ok(l) = parse_latest(&url(), &b) {
                    proptest::prop_assert!(crate::check_component("bundle", &l.name).is_ok());
                    proptest::prop_assert!(crate::check_component("version", &l.version).is_ok());
                    proptest::prop_assert!(l.sha256.len() == 64 && l.sha256.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
                    proptest::prop_assert!(!l.archive.contains('/') && l.archive.ends_with(".tar.zst"));
                }
            }
        }
    }
}
