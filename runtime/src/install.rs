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
//!
//! And whether `uvx` or `npx` can start this version by its package name, offline
//! ([`Install::launches`]): what the editor config `atlas install` prints may offer
//! beside this binary's own path.

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

/// A launcher an editor's config can start atlas through by its package name:
/// `uvx` (the PyPI wheel) or `npx` (the npm package).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Uvx,
    Npx,
}

/// The most entries of npx's cache folder (`_npx/`) looked into.
const MAX_NPX_DIRS: usize = 1000;
/// The largest `package.json` of npx's cache read, in bytes.
const MAX_NPX_PACKAGE_JSON_BYTES: u64 = 64 << 10;

impl Install {
    /// The launcher whose cache this binary runs from (`uvx` unpacks the wheel into
    /// uv's cache, `npx` the npm package into npm's `_npx/`): started that way, so that
    /// way works here, and the cache may prune this copy.
    pub fn cached_by(&self) -> Option<Launcher> {
        let exe = self.exe.as_deref()?.to_string_lossy().replace('\\', "/");
        match &self.method {
            Method::Wheel { .. } if exe.contains("/archive-v") => Some(Launcher::Uvx),
            Method::Npm { .. } if exe.contains("/_npx/") => Some(Launcher::Npx),
            _ => None,
        }
    }

    /// Whether `launcher`, pinned to `version` and offline (`uvx --offline
    /// atlas-mcp-server@VERSION`, `npx --offline -y atlas-mcp-server@VERSION`), starts
    /// atlas on this machine: this binary was started through it, or the launcher's
    /// own folders hold the package at this version ([`uv_holds`], [`npx_holds`]).
    /// Nothing is run and nothing is asked of an index.
    pub fn launches(&self, launcher: Launcher, version: &str) -> bool {
        // Started through it: this binary is that package at this binary's version.
        if self.cached_by() == Some(launcher) && version == env!("CARGO_PKG_VERSION") {
            return true;
        }
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = env("HOME").or_else(|| env("USERPROFILE"));
        match launcher {
            Launcher::Uvx => {
                let cache = env("UV_CACHE_DIR")
                    .or_else(|| env("XDG_CACHE_HOME").map(|c| c.join("uv")))
                    .or_else(|| env("LOCALAPPDATA").filter(|_| cfg!(windows)).map(|l| l.join("uv").join("cache")))
                    .or_else(|| home.as_ref().map(|h| h.join(".cache").join("uv")));
                let tools = env("UV_TOOL_DIR")
                    .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("uv").join("tools")))
                    .or_else(|| {
                        env("APPDATA").filter(|_| cfg!(windows)).map(|a| a.join("uv").join("data").join("tools"))
                    })
                    .or_else(|| home.as_ref().map(|h| h.join(".local").join("share").join("uv").join("tools")));
                uv_holds(cache.as_deref(), tools.as_deref(), version)
            }
            Launcher::Npx => {
                let cache = env("npm_config_cache")
                    .or_else(|| env("NPM_CONFIG_CACHE"))
                    .or_else(|| env("LOCALAPPDATA").filter(|_| cfg!(windows)).map(|l| l.join("npm-cache")))
                    .or_else(|| home.as_ref().map(|h| h.join(".npm")));
                cache.is_some_and(|c| npx_holds(&c, version))
            }
        }
    }
}

/// Whether uv holds the wheel at `version` where `uvx --offline
/// atlas-mcp-server@VERSION` finds it: installed as a tool (`uv tool install`, in
/// `tools`), or downloaded from PyPI into the `cache` (`wheels-v*/pypi/`). A wheel
/// cached from another index does not count: uvx resolves the pinned name against
/// its default index, and offline that is PyPI's cached pages.
pub fn uv_holds(cache: Option<&Path>, tools: Option<&Path>, version: &str) -> bool {
    let tool = tools.map(|t| t.join(NPM_PACKAGE)).as_deref().and_then(wheel_env);
    if matches!(tool, Some(Method::Wheel { version: v, .. }) if v == version) {
        return true;
    }
    let Some(entries) = cache.and_then(|c| std::fs::read_dir(c).ok()) else { return false };
    let wanted = format!("{version}-");
    entries.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("wheels-v"))).any(|e| {
        std::fs::read_dir(e.path().join("pypi").join(NPM_PACKAGE))
            .is_ok_and(|d| d.flatten().any(|w| w.file_name().to_str().is_some_and(|n| n.starts_with(&wanted))))
    })
}

/// Whether npm's cache folder `npm_cache` holds an npx install of exactly
/// `atlas-mcp-server@VERSION` (`_npx/<hash>/`, whose `package.json` names that spec
/// and whose tree holds that version): the folder `npx atlas-mcp-server@VERSION` runs
/// from, offline. Bounded: [`MAX_NPX_DIRS`] folders, each `package.json` read capped.
pub fn npx_holds(npm_cache: &Path, version: &str) -> bool {
    let Ok(dirs) = std::fs::read_dir(npm_cache.join("_npx")) else { return false };
    let spec = format!("{NPM_PACKAGE}@{version}");
    let json = |p: &Path| -> Option<serde_json::Value> {
        let bytes = crate::safe_path::read_capped(p, MAX_NPX_PACKAGE_JSON_BYTES).ok()?;
        serde_json::from_slice(&bytes).ok()
    };
    dirs.flatten().take(MAX_NPX_DIRS).any(|d| {
        let asked = json(&d.path().join("package.json")).is_some_and(|v| {
            v["_npx"]["packages"].as_array().is_some_and(|a| a.iter().any(|p| p.as_str() == Some(spec.as_str())))
        });
        asked
            && json(&d.path().join("node_modules").join(NPM_PACKAGE).join("package.json"))
                .is_some_and(|v| v["version"].as_str() == Some(version))
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

    #[test]
    fn uv_and_npx_hold_this_version_only_where_their_pinned_offline_start_finds_it() {
        let t = tempfile::tempdir().unwrap();
        let (cache, tools, npm) = (t.path().join("uv-cache"), t.path().join("uv-tools"), t.path().join("npm"));
        assert!(!uv_holds(Some(&cache), Some(&tools), "1.2.3"));
        // A wheel cached from another index: uvx's pinned name resolves against PyPI.
        std::fs::create_dir_all(cache.join("wheels-v8/index/e0489/atlas-mcp-server/1.2.3-py3-none-any")).unwrap();
        assert!(!uv_holds(Some(&cache), Some(&tools), "1.2.3"));
        std::fs::create_dir_all(cache.join("wheels-v8/pypi/atlas-mcp-server/1.2.3-py3-none-any")).unwrap();
        assert!(uv_holds(Some(&cache), None, "1.2.3"));
        assert!(!uv_holds(Some(&cache), None, "1.2.4"));
        // `uv tool install atlas-mcp-server`, at another version, then at this one.
        let sp = tools.join("atlas-mcp-server/lib/python3.12/site-packages");
        std::fs::create_dir_all(sp.join("atlas_mcp_server-1.0.0.dist-info")).unwrap();
        assert!(!uv_holds(None, Some(&tools), "1.2.4"));
        std::fs::rename(sp.join("atlas_mcp_server-1.0.0.dist-info"), sp.join("atlas_mcp_server-1.2.4.dist-info"))
            .unwrap();
        assert!(uv_holds(None, Some(&tools), "1.2.4"));

        // npx: the install of exactly this spec, holding this version.
        let dir = npm.join("_npx/1cd12db47f285d41");
        std::fs::create_dir_all(dir.join("node_modules/atlas-mcp-server")).unwrap();
        let asked = |spec: &str| {
            std::fs::write(dir.join("package.json"), format!(r#"{{"_npx": {{"packages": ["{spec}"]}}}}"#)).unwrap();
        };
        std::fs::write(dir.join("node_modules/atlas-mcp-server/package.json"), r#"{"version": "1.2.3"}"#).unwrap();
        asked("/tmp/atlas-mcp-server-1.2.3.tgz");
        assert!(!npx_holds(&npm, "1.2.3"), "a local tarball's install is not what the pinned name finds");
        asked("atlas-mcp-server@1.2.3");
        assert!(npx_holds(&npm, "1.2.3"));
        assert!(!npx_holds(&npm, "1.2.4"));
        std::fs::write(dir.join("package.json"), "not json").unwrap();
        assert!(!npx_holds(&npm, "1.2.3"));

        // The binary a launcher started runs from its cache.
        let uvx = Install {
            exe: Some(PathBuf::from("/home/u/.cache/uv/archive-v0/khgITkkF/bin/atlas")),
            method: Method::Wheel { site_packages: PathBuf::from("/x"), version: "1.2.3".into() },
        };
        assert_eq!(uvx.cached_by(), Some(Launcher::Uvx));
        let npx = Install {
            exe: Some(PathBuf::from("/home/u/.npm/_npx/1cd1/node_modules/atlas-mcp-server-linux-x64-gnu/bin/atlas")),
            method: Method::Npm { package: PathBuf::from("/x") },
        };
        assert_eq!(npx.cached_by(), Some(Launcher::Npx));
        let tool =
            Install { exe: Some(PathBuf::from("/home/u/.local/share/uv/tools/atlas-mcp-server/bin/atlas")), ..uvx };
        assert_eq!(tool.cached_by(), None);
    }
}
