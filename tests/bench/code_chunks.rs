//! Prints the code chunks of a file: `cargo run -p atlas-e2e --example code_chunks -- FILE`.

fn main() {
    let path = std::env::args().nth(1).expect("usage: code_chunks FILE");
    let src = std::fs::read_to_string(&path).expect("readable file");
    let lang = atlas_stages::text::language_of(&path).expect("a known language");
    let params = atlas_stages::chunk::ChunkParams::default();
    let out = atlas_stages::chunk::code::chunk_code(&src, lang, &path, &params).expect("a tree-sitter language");
    for c in &out.chunks {
        eprintln!(
            "{:>5}-{:<5} {:<8} {:<40} {:?}",
            c.start_line,
            c.end_line,
            c.symbol_kind,
            c.symbol.as_deref().unwrap_or("-"),
            c.symbols
        );
    }
    for d in &out.dropped {
        eprintln!("dropped {}-{} {}", d.0, d.1, d.2);
    }
}
