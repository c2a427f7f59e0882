//! Hooks the integration tests use to make timing deterministic. Inert unless the
//! variable is set.

/// `ATLAS_TEST_SLOW_SEARCH_MS=N`: the fs search sleeps N ms per file, so a test can
/// cancel it mid-way.
pub fn slow_search_ms() -> Option<u64> {
    std::env::var("ATLAS_TEST_SLOW_SEARCH_MS").ok().and_then(|v| v.parse().ok())
}
