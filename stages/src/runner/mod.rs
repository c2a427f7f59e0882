//! The runner: everything that is not a stage. Stage modules use this API (and
//! [`crate::artifacts`], [`crate::text`]) and nothing else of the crate.
//!
//! - [`stage`]: the [`Stage`] trait a stage implements, the [`Ctx`] it runs with,
//!   per-item memoisation;
//! - [`config`]: `pipeline.yaml`, its sources, and each stage's params section;
//! - [`dag`]: plan, run, status and the summary, over the registry;
//! - [`outputs`]: the build folder, written through each stage's `materialize`;
//! - [`progress`]: bars and logs.

pub mod config;
pub mod dag;
pub mod outputs;
pub mod progress;
pub mod remote;
pub mod stage;

pub use atlas_runtime::package::{Ecosystem, PackageSpec};
pub use atlas_runtime::safe_path::is_safe_name;
pub use config::{ConfigError, SourceConfig, Versions};
pub use outputs::Outputs;
pub use progress::Progress;
pub use stage::{Configured, Ctx, DynStage, Loaded, ParamError, Stage, StageOutput, canonical, check_range, load_json};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Reads and validates a config against the stages of `registry`. Nothing is written
/// anywhere.
pub fn load(path: &Path, registry: &[Box<dyn DynStage>]) -> Result<Loaded, ConfigError> {
    let shown = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError(format!(
                "{shown}: config file not found; pass --config FILE or run from the folder that holds pipeline.yaml"
            )));
        }
        Err(e) => return Err(ConfigError(format!("{shown}: cannot read config: {e}"))),
    };
    let names: Vec<&str> = registry.iter().map(|s| s.name()).collect();
    let config = config::parse(&text, &names).map_err(|e| ConfigError(format!("{shown}:{}", e.0)))?;
    let abs = std::path::absolute(path).map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    let dir = abs.parent().map(Path::to_owned).unwrap_or_else(|| PathBuf::from("."));
    config::validate(&config, &dir, &text).map_err(|e| ConfigError(format!("{shown}:{}", e.0)))?;
    let stages = stage::configure_stages(&text, registry).map_err(|e| ConfigError(format!("{shown}:{}", e.0)))?;
    let mut loaded = Loaded { path: abs, dir, config, stages, canonical: BTreeMap::new() };
    for stage in registry {
        let configured = loaded.stage(stage.name())?;
        configured.check().map_err(|e| {
            let line = config::line_of(&text, Some(e.within.as_deref().unwrap_or(stage.name())), &e.key);
            ConfigError(format!("{shown}:{} {}", line.map(|n| format!("{n}:")).unwrap_or_default(), e.message))
        })?;
        let canonical = configured.canonical();
        loaded.canonical.insert(stage.name(), canonical);
    }
    Ok(loaded)
}
