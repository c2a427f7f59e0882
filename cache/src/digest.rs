//! Names of bytes: an object's blake3 digest, and memo keys built field by field.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A blake3 digest, the name of an object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(pub(crate) [u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    /// The digest of everything `r` reads, 64 KiB at a time.
    pub fn of_reader(mut r: impl std::io::Read) -> std::io::Result<Digest> {
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                return Ok(Digest(*h.finalize().as_bytes()));
            }
            h.update(&buf[..n]);
        }
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
