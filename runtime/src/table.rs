//! The one reader of a bundle's parquet tables (`chunks.parquet`, `symbols.parquet`,
//! `references.parquet`), bounded before and while it decodes.
//!
//! A table is untrusted bytes: dictionary and run-length encoding let a file of a few
//! kilobytes describe millions of rows of a 2 KB string, gigabytes once decoded. So
//! before anything is decoded the file's own metadata is checked (its row count, each
//! column chunk's uncompressed size), then it is decoded [`BATCH_ROWS`] rows at a time
//! and each batch's decoded size and longest string are checked as they come: the
//! first one over a limit stops the read with [`crate::Error::DataCorruption`].
//!
//! Invariant: no bundle table decodes to more than [`decoded_cap`] of its file's size.
//! *`table::tests` (a dictionary bomb, long strings), the readers' fuzz corpus
//! (`runtime/tests/it/readers.rs`), `tests/it/hostile_bundles.rs`.*

use arrow_array::{Array, LargeStringArray, RecordBatch, StringArray};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::{Error, Result};

/// Rows decoded at a time: one batch of a bomb stays small.
pub const BATCH_ROWS: usize = 1024;
/// The most rows a table may hold (row numbers are `u32` everywhere).
pub const MAX_ROWS: u64 = u32::MAX as u64;
/// The longest string one cell may hold once decoded, in bytes. A chunk's text is a
/// few kilobytes; a symbol's doc is cut at 400 characters.
pub const MAX_STRING_BYTES: usize = 1 << 20;
/// The largest table file a bundle may list, in bytes: checked before it is mapped or
/// read (`manifest::max_read_bytes`). The largest measured `chunks.parquet` is 78 MB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// Decoded bytes every table may reach whatever its size, and how many times its
/// file's size it may grow to beyond that. Real tables decode to 2–10× their file
/// (dictionary-encoded paths repeat); a bomb decodes to thousands of times.
pub const DECODED_FLOOR_BYTES: u64 = 64 << 20;
pub const DECODED_RATIO: u64 = 100;

/// The most bytes a table of `file_bytes` bytes may decode to.
pub fn decoded_cap(file_bytes: usize) -> u64 {
    DECODED_FLOOR_BYTES.saturating_add((file_bytes as u64).saturating_mul(DECODED_RATIO))
}

/// Why a table was refused: what [`read`] names in its error.
fn refused(what: &str, why: String) -> Error {
    Error::DataCorruption { path: what.into(), reason: format!("{why}; the bundle is damaged or hostile: rebuild it") }
}

/// Decodes the parquet table `bytes` (named `what` in errors), without the root
/// columns named in `skip`, within the limits above. A decoder panic on malformed
/// bytes is an error too.
pub fn read(bytes: &[u8], what: &str, skip: &[&str]) -> Result<Vec<RecordBatch>> {
    read_shared(bytes::Bytes::copy_from_slice(bytes), what, skip)
}

/// [`read`] of bytes held elsewhere (a bundle's mapped file): decoded in place, not
/// copied first.
pub fn read_shared(bytes: bytes::Bytes, what: &str, skip: &[&str]) -> Result<Vec<RecordBatch>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode(bytes, what, skip))).unwrap_or_else(|_| {
        Err(Error::Parquet(parquet::errors::ParquetError::General(format!(
            "{what}: the parquet decoder failed on malformed data"
        ))))
    })
}

fn decode(bytes: bytes::Bytes, what: &str, skip: &[&str]) -> Result<Vec<RecordBatch>> {
    let (cap, file_bytes) = (decoded_cap(bytes.len()), bytes.len());
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let meta = builder.metadata().clone();
    let rows = meta.file_metadata().num_rows();
    if rows < 0 || rows as u64 > MAX_ROWS {
        return Err(refused(what, format!("it claims {rows} rows")));
    }
    // Before decoding: what each column chunk says it holds uncompressed.
    let mut stated: u64 = 0;
    for rg in meta.row_groups() {
        for c in rg.columns() {
            stated = stated.saturating_add(u64::try_from(c.uncompressed_size()).unwrap_or(u64::MAX));
        }
    }
    if stated > cap {
        return Err(refused(what, format!("its columns hold {stated} bytes uncompressed, over the {cap}-byte limit")));
    }
    let builder = if skip.is_empty() {
        builder
    } else {
        let roots = builder.parquet_schema().root_schema().get_fields().len();
        let keep = (0..roots).filter(|&i| !skip.contains(&builder.schema().field(i).name().as_str()));
        let mask = ProjectionMask::roots(builder.parquet_schema(), keep);
        builder.with_projection(mask)
    };
    let reader = builder.with_batch_size(BATCH_ROWS).build()?;
    let mut out = Vec::new();
    let mut decoded: u64 = 0;
    for batch in reader {
        let b = batch?;
        decoded = decoded.saturating_add(b.get_array_memory_size() as u64);
        if decoded > cap {
            return Err(refused(what, format!("it decodes to over {cap} bytes ({file_bytes} bytes of file)")));
        }
        if let Some(n) = longest_string(&b)
            && n > MAX_STRING_BYTES
        {
            return Err(refused(what, format!("one value is {n} bytes, over the {MAX_STRING_BYTES}-byte limit")));
        }
        out.push(b);
    }
    Ok(out)
}

/// The longest string of any string column of `b` (lists' items included), in bytes.
fn longest_string(b: &RecordBatch) -> Option<usize> {
    b.columns().iter().filter_map(|c| longest_in(c.as_ref())).max()
}

fn longest_in(a: &dyn Array) -> Option<usize> {
    if let Some(s) = a.as_any().downcast_ref::<StringArray>() {
        return s.offsets().windows(2).map(|w| (w[1] - w[0]).max(0) as usize).max();
    }
    if let Some(s) = a.as_any().downcast_ref::<LargeStringArray>() {
        return s.offsets().windows(2).map(|w| (w[1] - w[0]).max(0) as usize).max();
    }
    if let Some(l) = a.as_any().downcast_ref::<arrow_array::ListArray>() {
        return longest_in(l.values().as_ref());
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// One string column of `rows` copies of `value`, dictionary and RLE encoded.
    pub(crate) fn repeated(value: &str, rows: usize) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new("name", DataType::Utf8, false)]));
        let props = WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .set_dictionary_enabled(true)
            .build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, schema.clone(), Some(props)).unwrap();
        let mut left = rows;
        while left > 0 {
            let n = left.min(65_536);
            let col = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(value, n)));
            w.write(&RecordBatch::try_new(schema.clone(), vec![col]).unwrap()).unwrap();
            left -= n;
        }
        w.close().unwrap();
        buf
    }

    #[test]
    fn a_dictionary_bomb_is_refused_before_it_is_decoded_whole() {
        let value = "x".repeat(2048);
        let bomb = repeated(&value, 2_000_000);
        assert!(bomb.len() < 2 << 20, "the bomb is small: {} bytes", bomb.len());
        let e = super::read(&bomb, "references.parquet", &[]).unwrap_err().to_string();
        assert!(e.contains("references.parquet") && e.contains("decodes to over"), "{e}");
        // The same shape at a real size reads.
        let fine = repeated("crate::module::name", 10_000);
        let b = super::read(&fine, "symbols.parquet", &[]).unwrap();
        assert_eq!(b.iter().map(RecordBatch::num_rows).sum::<usize>(), 10_000);
    }

    #[test]
    fn a_value_over_the_string_limit_is_refused() {
        let long = "y".repeat(super::MAX_STRING_BYTES + 1);
        let e = super::read(&repeated(&long, 1), "symbols.parquet", &[]).unwrap_err().to_string();
        assert!(e.contains("over the 1048576-byte limit"), "{e}");
        assert!(super::read(b"PAR1 not parquet", "x", &[]).is_err());
    }
}
