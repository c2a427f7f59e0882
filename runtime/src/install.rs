//! How this `atlas` was installed, read from where its executable lives, and what the
//! install carries with it.
//!
//! - A wheel (`pip`, `uvx`, `pipx`): the executable sits in a Python environment's
//!   scripts folder, beside a `site-packages` that holds `atlas_mcp_server-*.dist-info`.
//!   That environment also holds the wheel's dependencies, `onnxruntime` and the default
//!   model's two packages, and [`crate::model`] takes ONNX Runtime and the model files
//!   from there when ATLAS_HOME has none.
//! - npm: the executable sits in a `node_modules` package (`atlas-mcp-server-<platform>`).
//! - An archive through `install.sh`: a receipt at `<prefix>/share/atlas/install-receipt.json`
//!   next to `<prefix>/bin/atlas`.
//! - cargo: `~/.cargo/bin`, or a `target/<profile>/` folder of a checkout.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Python distribution name of the wheel (`atlas-mcp-server` on PyPI), as its
/// `.dist-info` folder spells it.
pub const WHEEL_DIST: &str = "atlas_mcp_server";
/// The npm launcher package; each platform's binaries are in `<NPM_PACKAGE>-<platform>`.
pub const NPM_PACKAGE: &str = "atlas-mcp-server";
/// The receipt `install.sh` writes, relative to the prefix.
pub const RECEIPT: &str = "share/atlas/install-receipt.json";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// From the wheel; the `site-packages` that holds it.
    Wheel { site_packages: PathBuf, version: String },
    /// From npm; the platform package's folder.
    Npm { package: PathBuf },
    /// From a release archive through `install.sh`; its receipt.
    Archive { receipt: PathBuf },
    /// Built with cargo (`cargo install`, or a checkout's `target/`).
    Cargo,
    /// None of those: a binary copied by hand.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Install {
    /// The executable, symlinks resolved.
    pub exe: Option<PathBuf>,
    pub method: Method,
}

impl Install {
    /// The wheel's Python environment, when installed from the wheel.
    pub fn site_packages(&self) -> Option<&Path> {
        match &self.method {
            Method::Wheel { site_packages, .. } => Some(site_packages),
            _ => None,
        }
    }

    /// One line for `atlas doctor`.
    pub fn describe(&self) -> String {
        let exe = self.exe.as_deref().map_or_else(|| "?".to_owned(), |p| p.display().to_string());
        match &self.method {
            Method::Wheel { site_packages, version } => {
                format!("wheel atlas-mcp-server {version} (pip, uvx or pipx) in {}", site_packages.display())
            }
            Method::Npm { package } => format!("npm package {}", package.display()),
            Method::Archive { receipt } => format!("release archive through install.sh ({})", receipt.display()),
            Method::Cargo => format!("built with cargo ({exe})"),
            Method::Unknown => format!("a copied binary ({exe})"),
        }
    }
}

/// This process's install, read once.
pub fn current() -> &'static Install {
    static CURRENT: OnceLock<Install> = OnceLock::new();
    CURRENT.get_or_init(|| {
        let exe = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok());
        let method = exe.as_deref().map_or(Method::Unknown, detect);
        Install { exe, method }
    })
}

/// How the executable at `exe` (symlinks resolved) was installed.
pub fn detect(exe: &Path) -> Method {
    let Some(bin) = exe.parent() else { return Method::Unknown };
    let prefix = bin.parent();
    if let Some(m) = prefix.and_then(wheel_env) {
        return m;
    }
    // node_modules/atlas-mcp-server-linux-x64-gnu/bin/atlas
    if let Some(pkg) = prefix
        && pkg.parent().is_some_and(|p| p.file_name().is_some_and(|n| n == "node_modules"))
        && pkg.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(NPM_PACKAGE))
    {
        return Method::Npm { package: pkg.to_owned() };
    }
    if let Some(receipt) = prefix.map(|p| p.join(RECEIPT)).filter(|r| r.is_file()) {
        return Method::Archive { receipt };
    }
    let cargo_bin = bin.ends_with(".cargo/bin");
    let target = prefix.is_some_and(|p| p.file_name().is_some_and(|n| n == "target"));
    if cargo_bin || target { Method::Cargo } else { Method::Unknown }
}

/// The Python environment at `prefix` (`bin/` or `Scripts/` below it) when it holds
/// the wheel: `lib/python3.X/site-packages` (or `dist-packages`, `lib64`), or
/// `Lib/site-packages` on Windows.
fn wheel_env(prefix: &Path) -> Option<Method> {
    let mut candidates = vec![prefix.join("Lib").join("site-packages")];
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else { continue };
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.starts_with("python")) {
                candidates.push(e.path().join("site-packages"));
                candidates.push(e.path().join("dist-packages"));
            }
        }
    }
    candidates.into_iter().find_map(|sp| {
        let entries = std::fs::read_dir(&sp).ok()?;
        let version = entries.flatten().find_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix(WHEEL_DIST)?.strip_prefix('-')?;
            rest.strip_suffix(".dist-info").map(str::to_owned)
        })?;
        Some(Method::Wheel { site_packages: sp, version })
    })
}

/// ONNX Runtime's shared library inside the `onnxruntime` package of `site_packages`
/// (`onnxruntime/capi/libonnxruntime.so.1.x`, `libonnxruntime.1.x.dylib`,
/// `onnxruntime.dll`), not its provider libraries.
pub fn wheel_onnxruntime(site_packages: &Path) -> Option<PathBuf> {
    let capi = site_packages.join("onnxruntime").join("capi");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&capi)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("libonnxruntime.so")
                    || (n.starts_with("libonnxruntime.") && n.ends_with(".dylib"))
                    || n == "onnxruntime.dll"
            })
        })
        .collect();
    // The versioned name over the bare symlink, when both are there.
    found.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wheel_an_npm_package_an_archive_and_cargo_are_told_apart() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        let sp = venv.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(sp.join("atlas_mcp_server-1.2.3.dist-info")).unwrap();
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        assert_eq!(
            detect(&venv.join("bin/atlas")),
            Method::Wheel { site_packages: sp.clone(), version: "1.2.3".into() }
        );
        let capi = sp.join("onnxruntime/capi");
        std::fs::create_dir_all(&capi).unwrap();
        for f in ["libonnxruntime.so.1.32.0", "libonnxruntime_providers_shared.so", "onnxruntime_pybind11_state.so"] {
            std::fs::write(capi.join(f), b"").unwrap();
        }
        assert_eq!(wheel_onnxruntime(&sp), Some(capi.join("libonnxruntime.so.1.32.0")));

        let npm = t.path().join("node_modules/atlas-mcp-server-linux-x64-gnu");
        assert_eq!(detect(&npm.join("bin/atlas")), Method::Npm { package: npm.clone() });

        let prefix = t.path().join("local");
        std::fs::create_dir_all(prefix.join("share/atlas")).unwrap();
        std::fs::write(prefix.join(RECEIPT), b"{}").unwrap();
        assert_eq!(detect(&prefix.join("bin/atlas")), Method::Archive { receipt: prefix.join(RECEIPT) });

        assert_eq!(detect(Path::new("/home/u/.cargo/bin/atlas")), Method::Cargo);
        assert_eq!(detect(Path::new("/src/atlas/target/release/atlas")), Method::Cargo);
        assert_eq!(detect(Path::new("/opt/tools/atlas")), Method::Unknown);
    }
}
