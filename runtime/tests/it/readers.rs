//! The fuzz corpus of the bundle readers (a proptest corpus, run in every test run;
//! `ATLAS_FUZZ_CASES` sets its size): real tables and manifests with bytes flipped,
//! overwritten or cut, and noise. No reader may panic, and none may decode past
//! `atlas_runtime::table`'s caps.

/// A real table of each kind the bundle carries, a few rows each.
fn samples() -> Vec<Vec<u8>> {
    use atlas_runtime::symbols::{Definition, Reference};
    let d = Definition {
        name: "Backoff::delay_ms".into(),
        kind: "method".into(),
        path: "code/net/retry.rs".into(),
        language: "rust".into(),
        start_line: 10,
        end_line: 12,
        chunk_id: "c".repeat(32),
        signature: Some("pub fn delay_ms(&self, n: u32) -> u64".into()),
        doc: Some("Delay before attempt n.".into()),
        exported: Some(true),
    };
    let r = Reference {
        name: "delay_ms".into(),
        path: "code/net/retry.rs".into(),
        line: 20,
        chunk_id: "c".repeat(32),
        enclosing: Some("wait_ms".into()),
    };
    let c = atlas_runtime::chunk_table::ChunkRecord {
        chunk_id: "c".repeat(32),
        kind: atlas_runtime::ChunkKind::Docs,
        language: None,
        source: "site".into(),
        section: "guides".into(),
        path: "site/guides/a.md".into(),
        url: None,
        repo: None,
        commit: None,
        title: "A".into(),
        description: None,
        heading_path: vec!["A".into()],
        ordinal: 0,
        text: "Some text.".into(),
        overlap_chars: 0,
        is_code: false,
        cluster_tags: String::new(),
        start_line: 1,
        end_line: 3,
        symbol: None,
        symbol_kind: None,
        signature: None,
        symbols: vec![],
        mentions: vec![],
        mentioned_in: vec![],
        origin: None,
    };
    vec![
        atlas_runtime::symbols::definitions_to_parquet(&vec![d; 5]).unwrap(),
        atlas_runtime::symbols::references_to_parquet(&vec![r; 5]).unwrap(),
        atlas_runtime::chunk_table::to_parquet(&vec![c; 5]).unwrap(),
    ]
}

/// Every reader of a bundle table over `bytes`: none may panic, and what they
/// decode stays within the caps.
fn read_all(bytes: &[u8]) {
    let cap = atlas_runtime::table::decoded_cap(bytes.len());
    if let Ok(b) = atlas_runtime::table::read(bytes, "t", &[]) {
        let decoded: u64 = b.iter().map(|b| b.get_array_memory_size() as u64).sum();
        assert!(decoded <= cap + (1 << 20), "{decoded} > {cap}");
    }
    let _ = atlas_runtime::symbols::definitions_from_parquet(bytes);
    let _ = atlas_runtime::symbols::references_from_parquet(bytes);
    let _ = atlas_runtime::chunk_table::from_parquet(bytes);
    let _ = atlas_runtime::chunk_table::from_parquet_with(bytes, false);
}

fn cases() -> u32 {
    std::env::var("ATLAS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: cases(), failure_persistence: None, ..Default::default() })]

    /// The fuzz corpus of the table readers: each real table with bytes flipped,
    /// overwritten or cut, and noise. No panic, no decode past the caps.
    #[test]
    fn the_table_readers_survive_damaged_and_random_bytes(
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..16),
        cut in proptest::option::of(proptest::prelude::any::<usize>()),
        noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
    ) {
        for base in samples() {
            let mut b = base.clone();
            for (at, v) in &flips {
                let i = at % b.len();
                b[i] ^= v | 1;
            }
            if let Some(c) = cut {
                b.truncate(c % (b.len() + 1));
            }
            read_all(&b);
            // Noise with the file's magic at both ends reaches the footer parser.
            let mut framed = b"PAR1".to_vec();
            framed.extend_from_slice(&noise);
            framed.extend_from_slice(&(noise.len() as u32).to_le_bytes());
            framed.extend_from_slice(b"PAR1");
            read_all(&framed);
        }
        read_all(&noise);
    }

    /// Any strings round-trip through the symbol tables, within the caps.
    #[test]
    fn symbol_tables_round_trip_within_their_caps(
        names in proptest::collection::vec("\\PC{0,40}", 1..30),
        line in proptest::prelude::any::<u32>(),
    ) {
        let refs: Vec<atlas_runtime::symbols::Reference> = names
            .iter()
            .map(|n| atlas_runtime::symbols::Reference {
                name: n.clone(),
                path: format!("p/{n}"),
                line,
                chunk_id: n.clone(),
                enclosing: (!n.is_empty()).then(|| n.clone()),
            })
            .collect();
        let bytes = atlas_runtime::symbols::references_to_parquet(&refs).unwrap();
        proptest::prop_assert_eq!(atlas_runtime::symbols::references_from_parquet(&bytes).unwrap(), refs);
    }
}
