//! What `atlas add` and `atlas sync` leave for the user, through the real binary with
//! local registries and keyword-only builds (no model): the editor config they print
//! (this binary first, a launcher only where it holds this version), each library's
//! description (its package's own summary), and `atlas gc` over the package builds.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use atlas_e2e::registry::tar_gz;
use atlas_e2e::{bin, run};

use crate::hostile_lockfiles::atlas;

/// `atlas` with home `h` in `cwd`, and uv's and npm's folders under `tools` (empty
/// unless a test fills them): what this machine's launchers hold is what `tools` holds.
fn atlas_with_tools(h: &Path, cwd: &Path, tools: &Path) -> std::process::Command {
    let mut c = atlas(h, cwd);
    c.env("HOME", tools.join("home"))
        .env("UV_CACHE_DIR", tools.join("uv-cache"))
        .env("UV_TOOL_DIR", tools.join("uv-tools"))
        .env("npm_config_cache", tools.join("npm"))
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("NPM_CONFIG_CACHE");
    c
}

/// The JSON blocks of an editor config and the comment line above each.
fn blocks(stdout: &str) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    let mut rest = stdout;
    while let Some(at) = rest.find("\n{") {
        let head = rest[..at].lines().last().unwrap_or_default().to_owned();
        let body = &rest[at + 1..];
        let end = body.find("\n}").map(|e| e + 2).unwrap_or(body.len());
        out.push((head, serde_json::from_str(&body[..end]).unwrap_or_else(|e| panic!("{e}: {body}"))));
        rest = &body[end..];
    }
    out
}

fn tiny_pad(description: Option<&str>) -> Vec<u8> {
    let mut manifest = serde_json::json!({"name": "tiny-pad", "version": "1.0.0", "main": "index.js"});
    if let Some(d) = description {
        manifest["description"] = d.into();
    }
    tar_gz(&[
        ("package/package.json", manifest.to_string().as_str()),
        ("package/README.md", "# tiny-pad\n\nPads a string on the left.\n"),
        (
            "package/index.js",
            "/** Pads `s` on the left to `n`. */\nexport function padLeft(s, n) {\n  return s.padStart(n);\n}\n",
        ),
    ])
}

/// A project locking `tiny-pad` 1.0.0 at `tarball`'s integrity, with the registry
/// serving `tarball` named in `t`'s `.npmrc`.
fn npm_project(t: &Path, tarball: Vec<u8>) -> (atlas_e2e::http::Server, PathBuf) {
    let seen = atlas_e2e::registry::Seen::default();
    let (registry, _) = atlas_e2e::registry::npm_registry("tiny-pad", "1.0.0", tarball.clone(), false, &seen);
    std::fs::write(t.join(".npmrc"), format!("registry={}\n", registry.url("/npm/"))).unwrap();
    let project = t.join("app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package-lock.json"),
        serde_json::json!({"name": "app", "lockfileVersion": 3, "requires": true, "packages": {
            "": {"name": "app", "dependencies": {"tiny-pad": "^1.0.0"}},
            "node_modules/tiny-pad": {"version": "1.0.0", "integrity": atlas_runtime::hash::sri_sha512(&tarball)}
        }})
        .to_string(),
    )
    .unwrap();
    (registry, project)
}

/// The printed editor config leads with this binary's absolute path, the one form that
/// works wherever atlas runs; the `uvx` and `npx` forms, pinned to this version and
/// offline, follow only once uv (a `uv tool install` of this version) and npx (its
/// install of exactly `atlas-mcp-server@VERSION`) hold it, never before.
#[test]
fn the_editor_config_leads_with_this_binary_and_offers_a_launcher_only_where_it_holds_this_version() {
    let t = tempfile::tempdir().unwrap();
    let tools = t.path().join("tools");
    let (_registry, project) = npm_project(t.path(), tiny_pad(None));
    let h = crate::distribution::home(&t.path().join("h"));
    let r = run(atlas_with_tools(&h, t.path(), &tools).args(["sync", "--keyword-only"]).arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    let printed = blocks(&r.stdout);
    assert_eq!(printed.len(), 1, "only this binary: no launcher holds this version\n{}", r.stdout);
    assert!(!r.stdout.contains("uvx") && !r.stdout.contains("npx"), "{}", r.stdout);
    let (head, config) = &printed[0];
    assert_eq!(head, "# With this binary:", "{}", r.stdout);
    let rag = &config["mcpServers"]["app-deps-rag"];
    let command = PathBuf::from(rag["command"].as_str().unwrap());
    assert!(command.is_absolute(), "{rag}");
    assert_eq!(command.canonicalize().unwrap(), bin("atlas").canonicalize().unwrap(), "{rag}");

    // uv holds this version as a tool, npx its own install of exactly the pinned spec.
    let version = env!("CARGO_PKG_VERSION");
    let sp = tools.join("uv-tools/atlas-mcp-server/lib/python3.12/site-packages");
    std::fs::create_dir_all(sp.join(format!("atlas_mcp_server-{version}.dist-info"))).unwrap();
    let npx = tools.join("npm/_npx/0123456789abcdef");
    std::fs::create_dir_all(npx.join("node_modules/atlas-mcp-server")).unwrap();
    let spec = format!("atlas-mcp-server@{version}");
    std::fs::write(npx.join("package.json"), serde_json::json!({"_npx": {"packages": [spec]}}).to_string()).unwrap();
    std::fs::write(
        npx.join("node_modules/atlas-mcp-server/package.json"),
        serde_json::json!({"name": "atlas-mcp-server", "version": version}).to_string(),
    )
    .unwrap();
    let r = run(atlas_with_tools(&h, t.path(), &tools).args(["sync", "--keyword-only"]).arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    let printed = blocks(&r.stdout);
    let heads: Vec<&str> = printed.iter().map(|(h, _)| h.split(" (").next().unwrap_or_default()).collect();
    assert_eq!(heads, ["# With this binary:", "# With uv", "# With Node"], "{}", r.stdout);
    for ((_, config), (command, lead)) in
        printed[1..].iter().zip([("uvx", vec!["--offline"]), ("npx", vec!["--offline", "-y"])])
    {
        let rag = &config["mcpServers"]["app-deps-rag"];
        assert_eq!(rag["command"], command, "{rag}");
        let args: Vec<&str> = rag["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(args[..lead.len()], lead[..], "{rag}");
        assert_eq!(args[lead.len()], spec, "{rag}");
    }
}

/// A package library is described by its package's own summary (package.json's
/// `description` here), made one inert line and cut short; a package that states none
/// keeps the generic line.
#[test]
fn a_package_library_is_described_by_its_packages_own_summary() {
    let description = |h: &Path| -> Option<String> {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(h.join("bundles/npm+tiny-pad/1.0.0/manifest.json")).unwrap())
                .unwrap();
        m["description"].as_str().map(str::to_owned)
    };
    for (stated, expected) in [
        (Some("Pads a string\n\u{1b}[2J on the left.\u{202e}"), "Pads a string [2J on the left.".to_owned()),
        (None, "npm tiny-pad 1.0.0, from its published package".to_owned()),
    ] {
        let t = tempfile::tempdir().unwrap();
        let (_registry, project) = npm_project(t.path(), tiny_pad(stated));
        let h = crate::distribution::home(&t.path().join("h"));
        let r = run(atlas(&h, t.path()).args(["sync", "--keyword-only"]).arg(&project));
        assert_eq!(r.code, Some(0), "{r:?}");
        assert_eq!(description(&h), Some(expected), "{stated:?}");
    }
    // A long summary is cut to fit a manifest's description, and still installs.
    let t = tempfile::tempdir().unwrap();
    let (_registry, project) = npm_project(t.path(), tiny_pad(Some(&"pad ".repeat(500))));
    let h = crate::distribution::home(&t.path().join("h"));
    let r = run(atlas(&h, t.path()).args(["sync", "--keyword-only"]).arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    let d = description(&h).unwrap();
    assert!(d.ends_with('…') && d.len() <= atlas_runtime::manifest::MAX_DESCRIPTION_BYTES, "{d}");
}

/// Sets `path`'s modification time `ago` into the past.
fn age(path: &Path, ago: Duration) {
    let f = std::fs::File::open(path).unwrap();
    f.set_modified(SystemTime::now() - ago).unwrap();
}

/// `atlas gc` removes a package no installed version or project names (a build that
/// failed), and the builds and artifacts of a version that failed beside one that is
/// installed, and the unpacked trees; it keeps what the installed version needs (its
/// build, its artifact: it is current and waits for its vectors), prints what it
/// freed, and the installed library still serves and still builds offline. A build
/// folder written in the last hour (a sync in progress) is kept.
#[test]
fn atlas_gc_frees_what_no_installed_or_named_version_needs() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, _, fnv_version)) = crate::hostile_lockfiles::two_itoas_and_fnv(t.path()) else {
        return;
    };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = t.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\nfnv = \"1\"\n",
    )
    .unwrap();
    let itoa = std::fs::read(atlas_e2e::registry::cached_crate("itoa").unwrap().1).unwrap();
    let lock = |pins: &[(&str, &str, String)]| {
        let mut text = "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n".to_owned();
        for (n, v, sum) in pins {
            text.push_str(&format!(
                "\n[[package]]\nname = \"{n}\"\nversion = \"{v}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{sum}\"\n"
            ));
        }
        std::fs::write(project.join("Cargo.lock"), text).unwrap();
    };
    let sync = || {
        let mut c = atlas(&h, t.path());
        c.env("CARGO_HOME", &cargo).args(["sync", "--keyword-only"]).arg(&project);
        run(&mut c)
    };
    let wrong = "0".repeat(64);
    // fnv never installs; itoa 1.9.0 does; itoa 1.10.0 then fails beside it.
    lock(&[("fnv", &fnv_version, wrong.clone())]);
    assert_eq!(sync().code, Some(1));
    lock(&[("itoa", "1.9.0", atlas_runtime::hash::sha256_bytes(&itoa))]);
    assert_eq!(sync().code, Some(0));
    lock(&[("itoa", "1.10.0", wrong)]);
    assert_eq!(sync().code, Some(1));
    let packages = h.join("packages");
    let artifacts = packages.join("crate+itoa/cache/sources/itoa/artifacts");
    assert!(artifacts.join("crate+itoa-1.10.0.crate").is_file() && packages.join("crate+fnv").is_dir());
    assert!(packages.join("crate+itoa/cache/sources/itoa/unpacked").is_dir());

    // Built just now: a sync may still be between its build and its install.
    let gc = || {
        let mut c = atlas(&h, t.path());
        c.args(["gc", "--json"]);
        let r = run(&mut c);
        assert_eq!(r.code, Some(0), "{r:?}");
        serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()
    };
    let v = gc();
    assert!(packages.join("crate+fnv").is_dir() && artifacts.join("crate+itoa-1.10.0.crate").is_file(), "{v}");

    for p in ["crate+fnv", "crate+itoa"] {
        for b in std::fs::read_dir(packages.join(p).join("builds")).unwrap().flatten() {
            age(&b.path().join("pipeline.yaml"), Duration::from_secs(7200));
            age(&b.path(), Duration::from_secs(7200));
        }
    }
    let mut c = atlas(&h, t.path());
    let r = run(c.arg("gc"));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(
        r.stdout.contains("crate:fnv: ") && r.stdout.contains("removed: no version of it needs its build"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("crate:itoa: ") && r.stdout.contains("removed the builds of 1.10.0"), "{}", r.stdout);
    assert!(r.stdout.lines().last().unwrap().contains(", freed "), "{}", r.stdout);
    assert!(!packages.join("crate+fnv").exists());
    assert!(!artifacts.join("crate+itoa-1.10.0.crate").exists() && !packages.join("crate+itoa/builds/1.10.0").exists());
    assert!(!packages.join("crate+itoa/cache/sources/itoa/unpacked").exists());
    // What the installed version needs stays, and it still serves.
    assert!(artifacts.join("crate+itoa-1.9.0.crate").is_file());
    assert!(packages.join("crate+itoa/builds/1.9.0/pipeline.yaml").is_file());
    let mut c = atlas(&h, t.path());
    let r = run(c.args(["search", "Buffer", "--bundle", "crate:itoa", "--mode", "keyword", "-k", "1"]));
    assert_eq!(r.code, Some(0), "{r:?}");
    // A second run finds nothing more to free.
    let v = gc();
    assert_eq!(v["before_bytes"], v["after_bytes"], "{v}");
    // The kept cache still builds the installed version (offline: from the kept artifact).
    if crate::embed::model_ready() {
        lock(&[("itoa", "1.9.0", atlas_runtime::hash::sha256_bytes(&itoa))]);
        let mut c = atlas(&h, t.path());
        let r = run(c.env("CARGO_HOME", &cargo).args(["sync", "--offline"]).arg(&project));
        assert_eq!(r.code, Some(0), "{r:?}");
        assert!(r.stderr.contains("crate:itoa@1.9.0: embedded in"), "{}", r.stderr);
    }
}
