//! Failpoints for the fault tests, read from `ATLAS_FAILPOINT` (inert when unset):
//! - `extract-abort:N`: the process aborts (as a kill -9 would leave it) after N files
//!   are unpacked;
//! - `extract-enospc:N`: a write fails with "no space left on device" once a file
//!   passes N bytes.

use std::sync::OnceLock;

fn point() -> Option<&'static (String, u64)> {
    static P: OnceLock<Option<(String, u64)>> = OnceLock::new();
    P.get_or_init(|| {
        let v = std::env::var("ATLAS_FAILPOINT").ok()?;
        let (name, n) = v.split_once(':')?;
        Some((name.to_owned(), n.parse().ok()?))
    })
    .as_ref()
}

pub(crate) fn extracting(files_done: u64) {
    if let Some((name, n)) = point()
        && name == "extract-abort"
        && files_done >= *n
    {
        eprintln!("failpoint extract-abort: aborting");
        std::process::abort();
    }
}

pub(crate) fn on_write(written: u64) -> crate::Result<()> {
    match point() {
        Some((name, n)) if name == "extract-enospc" && written > *n => Err(crate::Error::Io {
            path: "ATLAS_HOME/bundles".into(),
            error: std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device (failpoint)"),
        }),
        _ => Ok(()),
    }
}
