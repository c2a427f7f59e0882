//! Fault injection for the crash tests, driven by `ATLAS_FAILPOINT`:
//!
//! - `crash-after:<stage>:<n>` aborts the process (no unwinding, no cleanup) after the
//!   stage has processed `n` items, as a kill would;
//! - `hold-lock:<ms>` sleeps that long right after taking the cache lock.
//!
//! Unset, each check is one environment lookup.

use std::sync::atomic::{AtomicU64, Ordering};

static PROCESSED: AtomicU64 = AtomicU64::new(0);

fn spec() -> Option<String> {
    std::env::var("ATLAS_FAILPOINT").ok()
}

/// Called after each item a stage computes (not for memo hits).
pub fn item_done(stage: &str) {
    let Some(s) = spec() else { return };
    let mut parts = s.split(':');
    if parts.next() != Some("crash-after") || parts.next() != Some(stage) {
        return;
    }
    let n: u64 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    if PROCESSED.fetch_add(1, Ordering::SeqCst) + 1 >= n {
        eprintln!("failpoint: aborting in {stage} after {n} items");
        std::process::abort();
    }
}

/// Called once the cache lock is held.
pub fn lock_taken() {
    if let Some(ms) = spec().and_then(|s| s.strip_prefix("hold-lock:").and_then(|m| m.parse::<u64>().ok())) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
