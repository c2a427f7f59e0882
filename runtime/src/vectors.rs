//! Embedding matrices: row-major f16 with a `.npy` (version 1.0) header, so numpy
//! reads them as they are (`np.load` → float16, shape (rows, dims)).

use half::f16;

use crate::{Error, Result};

const MAGIC: &[u8] = b"\x93NUMPY\x01\x00";

/// Serialises `rows × dims` vectors as an f16 `.npy` file.
pub fn to_npy_f16(rows: usize, dims: usize, data: &[f16]) -> Vec<u8> {
    assert_eq!(data.len(), rows * dims, "matrix data matches its shape");
    let mut header = format!("{{'descr': '<f2', 'fortran_order': False, 'shape': ({rows}, {dims}), }}");
    // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
    let unpadded = MAGIC.len() + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 2 + header.len() + data.len() * 2);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Parses an f16 `.npy` written by [`to_npy_f16`]: `(rows, dims, values)`.
pub fn from_npy_f16(bytes: &[u8]) -> Result<(usize, usize, Vec<f16>)> {
    let bad = |reason: &str| Error::DataCorruption { path: "embeddings.npy".into(), reason: reason.to_owned() };
    if bytes.len() < 10 || &bytes[..8] != MAGIC {
        return Err(bad("not an .npy version 1.0 file"));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(bytes.get(10..10 + hlen).ok_or_else(|| bad("truncated header"))?)
        .map_err(|_| bad("header is not text"))?;
    if !header.contains("'descr': '<f2'") || header.contains("'fortran_order': True") {
        return Err(bad("expected little-endian f16 in C order"));
    }
    let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or_else(|| bad("no shape"))?;
    let dims: Vec<usize> = shape.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    let [rows, cols] = dims[..] else { return Err(bad("expected a 2-d shape")) };
    let data = &bytes[10 + hlen..];
    if data.len() != rows * cols * 2 {
        return Err(bad("data length does not match the shape"));
    }
    Ok((rows, cols, data.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_roundtrip_and_alignment() {
        let data: Vec<f16> = (0..6).map(|i| f16::from_f32(i as f32 / 4.0)).collect();
        let bytes = to_npy_f16(2, 3, &data);
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(from_npy_f16(&bytes).unwrap(), (2, 3, data));
        assert!(from_npy_f16(&bytes[..bytes.len() - 1]).is_err());
    }
}
