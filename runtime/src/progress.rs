//! Whether progress bars are drawn: on a terminal, unless `ATLAS_NO_PROGRESS` is set.
//! Every bar in Atlas (the pipeline's stages, downloads, `atlas add`, the PostgreSQL
//! export) asks here, so one variable turns them all off.

use std::io::IsTerminal as _;

/// True when stderr is a terminal and `ATLAS_NO_PROGRESS` is unset.
pub fn shown() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("ATLAS_NO_PROGRESS").is_none()
}
