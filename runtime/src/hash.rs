//! The hashes Atlas names bytes by, in one place: sha256 (what publishers and PyPI
//! pin, what `atlas install` checks) and blake3 (what the manifest and the caches name
//! files by), of bytes or of a file streamed in 1 MiB reads, as lowercase hex.

use std::io::Read as _;
use std::path::Path;

use sha2::Digest as _;

use crate::{Error, Result};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of `bytes`, as hex.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&sha2::Sha256::digest(bytes))
}

/// An npm `integrity` string of `bytes`: `sha512-` and the base64 of their sha512.
pub fn sri_sha512(bytes: &[u8]) -> String {
    use base64::Engine as _;
    format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(bytes)))
}

/// blake3 of `bytes`, as hex.
pub fn blake3_bytes(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// A blake3 fed in parts: a file as it is written, a key made of several fields.
#[derive(Debug, Clone, Default)]
pub struct Blake3(blake3::Hasher);

impl Blake3 {
    pub fn new() -> Blake3 {
        Blake3::default()
    }

    pub fn update(&mut self, bytes: &[u8]) -> &mut Blake3 {
        self.0.update(bytes);
        self
    }

    /// The hash of what was fed so far.
    pub fn bytes(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }

    /// The hash of what was fed so far, as hex.
    pub fn hex(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// sha256 of the file at `path`, streamed.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut h = sha2::Sha256::new();
    stream(path, |b| h.update(b))?;
    Ok(hex(&h.finalize()))
}

/// blake3 and sha256 of the file at `path`, in one read.
pub fn blake3_and_sha256_file(path: &Path) -> Result<(String, String)> {
    let (mut b3, mut sha) = (blake3::Hasher::new(), sha2::Sha256::new());
    stream(path, |b| {
        b3.update(b);
        sha.update(b);
    })?;
    Ok((b3.finalize().to_hex().to_string(), hex(&sha.finalize())))
}

/// Feeds the file at `path` to `each`, 1 MiB at a time.
fn stream(path: &Path, mut each: impl FnMut(&[u8])) -> Result<()> {
    let io = |error| Error::Io { path: path.to_owned(), error };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            return Ok(());
        }
        each(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashes_of_bytes_and_of_files_agree() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(super::sha256_bytes(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(super::sha256_file(&p).unwrap(), super::sha256_bytes(b"abc"));
        assert_eq!(
            super::blake3_and_sha256_file(&p).unwrap(),
            (super::blake3_bytes(b"abc"), super::sha256_bytes(b"abc"))
        );
    }
}
