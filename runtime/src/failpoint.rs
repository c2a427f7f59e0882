//! Failpoints for the fault tests: `ATLAS_FAILPOINT=NAME[:SCOPE]:N`. Compiled in only
//! with the `failpoints` feature, which the test build turns on (`cargo xtask test`)
//! and release and dist builds leave out: there every check is a constant `None`.
//!
//! The points: `crash-after:<stage>:N` (the pipeline aborts after a stage computed N
//! items), `hold-lock:MS` (the pipeline sleeps with the cache lock held),
//! `extract-abort:N` (an install aborts after N files unpacked), `extract-enospc:N`
//! (an install's write fails as a full disk once a file passes N bytes),
//! `tool-panic:<tool>:N` (the servers' tool `<tool>` panics; N is ignored),
//! `slow-search:MS` (the fs server's search sleeps MS per file, so a test can cancel it),
//! `slow-tree-build:MS` (a build of a whole working tree sleeps MS first).

/// N, when `ATLAS_FAILPOINT` arms `point` (within `scope`, when given).
#[cfg(feature = "failpoints")]
pub fn armed(point: &str, scope: Option<&str>) -> Option<u64> {
    let spec = std::env::var("ATLAS_FAILPOINT").ok()?;
    let mut parts = spec.split(':');
    if parts.next() != Some(point) {
        return None;
    }
    if let Some(scope) = scope
        && parts.next() != Some(scope)
    {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Without the `failpoints` feature nothing is ever armed.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn armed(_point: &str, _scope: Option<&str>) -> Option<u64> {
    None
}

/// Aborts the process (no unwinding, no cleanup, as a kill -9 leaves it) once `done`
/// reaches the armed N.
pub fn abort_at(point: &str, scope: Option<&str>, done: u64) {
    if let Some(n) = armed(point, scope)
        && done >= n
    {
        match scope {
            Some(scope) => eprintln!("failpoint: aborting in {scope} after {n} items"),
            None => eprintln!("failpoint {point}: aborting"),
        }
        std::process::abort();
    }
}

/// Counts one more event of `point` (all scopes together) and aborts once the armed N
/// are counted.
pub fn count(point: &str, scope: Option<&str>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTED: AtomicU64 = AtomicU64::new(0);
    if armed(point, scope).is_some() {
        abort_at(point, scope, COUNTED.fetch_add(1, Ordering::SeqCst) + 1);
    }
}
