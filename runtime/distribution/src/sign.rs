//! minisign key pairs and signatures (Ed25519, prehashed), in the `minisign` CLI's
//! formats: `minisign -Vm ARCHIVE -P PUBKEY` checks what [`sign`] writes.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use minisign::{KeyPair, PublicKey, PublicKeyBox, SecretKey, SecretKeyBox, SignatureBox};

use crate::{Error, Result, io};

/// The environment variable that holds a secret key's password, for machines without
/// a terminal.
pub const PASSWORD_ENV: &str = "ATLAS_KEY_PASSWORD";

fn sig_err(e: impl std::fmt::Display) -> Error {
    Error::Signature(e.to_string())
}

/// A key's id as minisign prints it (16 upper-case hex digits).
pub fn key_id(pk: &PublicKey) -> String {
    let b = pk.to_bytes();
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[2..10]);
    format!("{:016X}", u64::from_le_bytes(n))
}

#[derive(Debug)]
pub struct Generated {
    pub public_path: PathBuf,
    pub secret_path: PathBuf,
    /// The public key in base64 (`RW…`), as `--trust` and `pipeline.yaml` take it.
    pub public_key: String,
    pub id: String,
}

/// Makes `<name>.pub` and `<name>.key` (mode 0600) in `dir`; never overwrites a key.
pub fn keygen(dir: &Path, name: &str, password: Option<String>) -> Result<Generated> {
    crate::check_component("the key name", name)?;
    let (public_path, secret_path) = (dir.join(format!("{name}.pub")), dir.join(format!("{name}.key")));
    for p in [&public_path, &secret_path] {
        if p.exists() {
            return Err(Error::Usage(format!("{} exists; remove it or choose another --name", p.display())));
        }
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let kp = match password {
        Some(p) => KeyPair::generate_encrypted_keypair(Some(p)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(sig_err)?;
    let id = key_id(&kp.pk);
    let secret = kp.sk.to_box(Some(&format!("atlas secret key {id}"))).map_err(sig_err)?.into_string();
    write_private(&secret_path, secret.as_bytes())?;
    let public = kp.pk.to_box().map_err(sig_err)?.into_string();
    std::fs::write(&public_path, public).map_err(io(&public_path))?;
    Ok(Generated { public_path, secret_path, public_key: kp.pk.to_base64(), id })
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(io(path))
}

/// Reads a password for a key: `ATLAS_KEY_PASSWORD`, else a prompt when stdin is a
/// terminal; never a prompt without one.
pub fn password(why: &str) -> Result<String> {
    if let Ok(p) = std::env::var(PASSWORD_ENV) {
        return Ok(p);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage(format!(
            "{why} needs a password and there is no terminal to ask: set {PASSWORD_ENV}"
        )));
    }
    rpassword::prompt_password(format!("{why}: password: ")).map_err(io("the terminal"))
}

/// Loads the secret key at `path`, asking for its password only if it has one.
pub fn load_secret(path: &Path) -> Result<SecretKey> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let bx = SecretKeyBox::from_string(&text).map_err(sig_err)?;
    match SecretKey::from_unencrypted_box(bx.clone()) {
        Ok(sk) => Ok(sk),
        Err(_) => {
            let p = password(&format!("the key {}", path.display()))?;
            SecretKey::from_box(bx, Some(p)).map_err(|e| Error::Signature(format!("{}: {e}", path.display())))
        }
    }
}

/// Signs `data` with the key at `key`; returns the `.minisig` text. The trusted
/// comment (signed too) names what is signed.
pub fn sign(data: &[u8], key: &Path, trusted_comment: &str) -> Result<String> {
    sign_with(&load_secret(key)?, data, trusted_comment)
}

/// Signs `data` with a loaded key; returns the `.minisig` text.
pub fn sign_with(sk: &SecretKey, data: &[u8], trusted_comment: &str) -> Result<String> {
    let sig = minisign::sign(None, sk, std::io::Cursor::new(data), Some(trusted_comment), None).map_err(sig_err)?;
    Ok(sig.into_string())
}

/// A public key from `RW…` base64 or a `.pub` file's path.
pub fn parse_public_key(s: &str) -> Result<PublicKey> {
    let s = s.trim();
    let path = Path::new(s);
    if !s.starts_with("RW") && path.is_file() {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        return PublicKeyBox::from_string(&text)
            .and_then(PublicKeyBox::into_public_key)
            .map_err(|e| Error::Usage(format!("{}: not a minisign public key ({e})", path.display())));
    }
    PublicKey::from_base64(s)
        .map_err(|e| Error::Usage(format!("{s:?} is not a minisign public key (RW… base64, or a .pub file) ({e})")))
}

/// The id of the key that made `sig` (a `.minisig` text), as [`key_id`] prints it.
pub fn signature_key_id(sig: &str) -> Option<String> {
    let bx = SignatureBox::from_string(sig).ok()?;
    let n: [u8; 8] = bx.keynum().try_into().ok()?;
    Some(format!("{:016X}", u64::from_le_bytes(n)))
}

/// Checks `sig` (a `.minisig` text) over `data` with `pk`; returns the trusted comment.
pub fn verify_bytes(pk: &PublicKey, sig: &str, data: &[u8]) -> Result<String> {
    let bx = SignatureBox::from_string(sig).map_err(|e| Error::Signature(format!("unreadable signature ({e})")))?;
    minisign::verify(pk, &bx, std::io::Cursor::new(data), true, false, false)
        .map_err(|e| Error::Signature(format!("the data is not signed by key {} ({e})", key_id(pk))))?;
    bx.trusted_comment().map_err(sig_err)
}

/// Checks `sig` (a `.minisig` text) over `file` with `pk`; returns the trusted comment.
pub fn verify_file(pk: &PublicKey, sig: &str, file: &Path) -> Result<String> {
    let bx = SignatureBox::from_string(sig).map_err(|e| Error::Signature(format!("unreadable signature ({e})")))?;
    let f = std::fs::File::open(file).map_err(io(file))?;
    minisign::verify(pk, &bx, std::io::BufReader::new(f), true, false, false)
        .map_err(|e| Error::Signature(format!("{} is not signed by key {} ({e})", file.display(), key_id(pk))))?;
    bx.trusted_comment().map_err(sig_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_a_flipped_byte_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let g = keygen(dir.path(), "k", None).unwrap();
        let data = dir.path().join("a.tar.zst");
        std::fs::write(&data, b"bundle bytes").unwrap();
        let sig = sign(b"bundle bytes", &g.secret_path, "atlas fixture 1").unwrap();
        let pk = parse_public_key(&g.public_key).unwrap();
        assert_eq!(verify_file(&pk, &sig, &data).unwrap(), "atlas fixture 1");
        assert_eq!(key_id(&parse_public_key(g.public_path.to_str().unwrap()).unwrap()), g.id);
        std::fs::write(&data, b"bundle bytez").unwrap();
        assert!(matches!(verify_file(&pk, &sig, &data), Err(Error::Signature(_))));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&g.secret_path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(matches!(keygen(dir.path(), "k", None), Err(Error::Usage(_))), "never overwrites a key");
    }
}
