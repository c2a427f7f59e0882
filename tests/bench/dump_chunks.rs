//! Prints a chunks.parquet as JSON lines: `cargo run -p atlas-e2e --example dump_chunks -- FILE`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: dump_chunks FILE")?;
    let chunks = atlas_runtime::chunk_table::read_file(std::path::Path::new(&path))?;
    for c in chunks {
        #[allow(clippy::print_stdout)]
        {
            println!("{}", serde_json::to_string(&c)?);
        }
    }
    Ok(())
}
