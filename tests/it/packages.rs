//! Package sources (`kind: package`): a crate at an exact version from the registry
//! cargo is configured for (here cargo's source replacement, pointing at a local sparse
//! registry serving the real `.crate` files of the local cargo cache), built into a
//! bundle and searched by symbol; and the bad inputs, each one line that leaves
//! nothing behind: an unknown crate, an unpublished version, a yanked one, a download
//! whose checksum differs.

use std::path::Path;
use std::process::Command;

use atlas_e2e::registry::{Published, cached_crate, cargo_home, sparse_registry};
use atlas_e2e::{bin, pipeline, run, skip};

fn pipeline_yaml(work: &Path, spec: &str) {
    std::fs::write(
        work.join("pipeline.yaml"),
        format!("name: dep\nsources:\n  itoa:\n    kind: package\n    spec: \"{spec}\"\n"),
    )
    .unwrap();
}

fn build(work: &Path, home: &Path) -> atlas_e2e::Run {
    run(pipeline().current_dir(work).env("CARGO_HOME", home).args(["run"]))
}

#[test]
fn a_crate_from_cargos_registry_is_built_at_its_exact_version_and_bad_specs_are_one_line() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let bytes = std::fs::read(&file).unwrap();
    let t = tempfile::tempdir().unwrap();
    let mut yanked = Published::real("itoa", "0.9.0", b"never served".to_vec());
    yanked.yanked = true;
    let older = Published { bytes: None, ..Published::real("itoa", "0.4.8", vec![]) };
    let registry = sparse_registry(vec![older, yanked, Published::real("itoa", &version, bytes.clone())], |_, b| b);
    let home = cargo_home(t.path(), &registry);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();

    pipeline_yaml(&work, &format!("crate:itoa@{version}"));
    let r = build(&work, &home).success();
    assert_eq!(registry.hits(&format!("/dl/itoa/{version}/download")), [200], "{}", r.stderr);
    let bundle = work.join(".atlas/build/bundle");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["sources"][0]["kind"], "package");
    assert_eq!(m["sources"][0]["url"], format!("crate:itoa@{version}"));
    // Its sources and README, not its tests or benches.
    let mirror = bundle.join("mirror/itoa");
    assert!(mirror.join("src/lib.rs").is_file() && mirror.join("README.md").is_file());
    assert!(!mirror.join("tests").exists() && !mirror.join("benches").exists());
    let s = run(Command::new(bin("atlas")).args(["search", "--symbol", "Buffer", "--json", "--bundle"]).arg(&bundle))
        .success();
    let v: serde_json::Value = serde_json::from_str(&s.stdout).unwrap();
    assert!(
        v["definitions"].as_array().unwrap().iter().any(|d| d["path"] == "itoa/src/lib.rs" && d["kind"] == "struct"),
        "{v}"
    );
    // A second run reuses the artifact: no second download; offline works too.
    build(&work, &home).success();
    run(pipeline().current_dir(&work).env("CARGO_HOME", &home).args(["run", "--offline"])).success();
    assert_eq!(registry.hits(&format!("/dl/itoa/{version}/download")).len(), 1);

    // Each bad spec: exit non-zero, one line that names the fix, and the bundle as it was.
    let before = std::fs::read(bundle.join("manifest.json")).unwrap();
    let fresh = |n: &str| {
        let w = t.path().join(n);
        std::fs::create_dir_all(&w).unwrap();
        w
    };
    for (name, spec, needle) in [
        ("unknown", "crate:itoa@9.9.9".to_owned(), "is not published; the nearest are"),
        ("yanked", "crate:itoa@0.9.0".to_owned(), "was yanked"),
        ("nocrate", format!("crate:nosuchcrate@{version}"), "no crate \"nosuchcrate\""),
        ("gem", "gem:rails@7.1.0".to_owned(), "unknown ecosystem"),
        ("range", "crate:itoa@^1".to_owned(), "not an exact version"),
    ] {
        let w = fresh(name);
        pipeline_yaml(&w, &spec);
        let r = build(&w, &home);
        assert_ne!(r.code, Some(0), "{name}: {r:?}");
        let last = r.stderr.trim().lines().last().unwrap_or_default();
        assert!(last.contains(needle), "{name}: {last}\n{}", r.stderr);
        assert!(!w.join(".atlas/build/bundle").exists(), "{name}: nothing built");
    }
    // A mirror that serves other bytes under the same checksum: refused, nothing used.
    let tampered = sparse_registry(vec![Published::real("itoa", &version, bytes)], |_, mut b| {
        let mid = b.len() / 2;
        b[mid] ^= 1;
        b
    });
    let w = fresh("tampered");
    pipeline_yaml(&w, &format!("crate:itoa@{version}"));
    let r = build(&w, &cargo_home(&w, &tampered));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("the download's sha256 is") && r.stderr.contains("nothing was used"), "{}", r.stderr);
    assert_eq!(std::fs::read(bundle.join("manifest.json")).unwrap(), before);
}

/// An npm package from the registry `.npmrc` names (a scope's own registry, with its
/// token), checked against its sha512 integrity; the token reaches that registry's
/// origin only, never the other origin its tarball is served from.
#[test]
fn an_npm_package_is_read_from_its_scopes_registry_and_its_token_stays_there() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let tarball = atlas_e2e::registry::tar_gz(&[
        ("package/package.json", "{\"name\": \"@corp/strings\", \"version\": \"2.1.0\", \"main\": \"index.js\"}"),
        ("package/README.md", "# strings\n\nPads a string on the left to a given width.\n"),
        (
            "package/index.js",
            "/** Pads `s` on the left with `c` to `n` characters. */\nexport function padLeft(s, n, c) {\n  return String(s).padStart(n, c);\n}\n",
        ),
        ("package/test/pad.test.js", "import { padLeft } from '../index.js';\n"),
    ]);
    let seen = atlas_e2e::registry::Seen::default();
    let (registry, cdn) = atlas_e2e::registry::npm_registry("@corp/strings", "2.1.0", tarball, true, &seen);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join(".npmrc"),
        format!("@corp:registry={}\n//{}/npm/:_authToken=s3cret-npm-token\n", registry.url("/npm/"), registry.addr),
    )
    .unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        "name: dep\nsources:\n  strings:\n    kind: package\n    spec: \"npm:@corp/strings@2.1.0\"\n",
    )
    .unwrap();
    let r = run(pipeline()
        .current_dir(&work)
        .env("NPM_CONFIG_USERCONFIG", t.path().join("no-user-npmrc"))
        .env_remove("NPM_CONFIG_REGISTRY")
        .arg("run"));
    assert_eq!(r.code, Some(0), "{r:?}");
    let mirror = work.join(".atlas/build/bundle/mirror/strings");
    assert!(mirror.join("index.js").is_file() && mirror.join("README.md").is_file());
    assert!(!mirror.join("test").exists(), "a package's own tests are left out");
    let seen = seen.lock().unwrap().clone();
    let cdn = cdn.unwrap();
    let tarball_hits: Vec<_> = seen.iter().filter(|(p, _)| p.starts_with("/tarballs/")).collect();
    assert_eq!(tarball_hits.len(), 1, "{seen:?}");
    assert_eq!(tarball_hits[0].1, None, "the token went to the tarball's other origin ({})", cdn.url(""));
    let packument = seen.iter().find(|(p, _)| p.starts_with("/npm/")).unwrap();
    assert_eq!(packument.1.as_deref(), Some("Bearer s3cret-npm-token"), "{seen:?}");
    assert!(!r.stderr.contains("s3cret-npm-token"));
}

/// A Python package's sdist from the index pip is configured for (PIP_INDEX_URL),
/// checked against its sha256; a yanked version and a wheel-only one are refused.
#[test]
fn a_python_sdist_is_read_from_the_configured_index() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let sdist = atlas_e2e::registry::tar_gz(&[
        ("tiny_units-0.3.1/README.md", "# tiny-units\n\nConverts between metric and imperial units.\n"),
        (
            "tiny_units-0.3.1/tiny_units/__init__.py",
            "def to_inches(cm):\n    \"\"\"Centimetres to inches.\"\"\"\n    return cm / 2.54\n",
        ),
        ("tiny_units-0.3.1/tests/test_units.py", "from tiny_units import to_inches\n"),
    ]);
    let index = atlas_e2e::registry::simple_index(
        "tiny-units",
        vec![
            ("tiny_units-0.3.1.tar.gz".into(), sdist, false),
            ("tiny_units-0.3.0.tar.gz".into(), b"old".to_vec(), true),
            ("tiny_units-0.4.0-py3-none-any.whl".into(), b"zip".to_vec(), false),
        ],
    );
    let build = |spec: &str, dir: &str| {
        let work = t.path().join(dir);
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("pipeline.yaml"),
            format!("name: dep\nsources:\n  units:\n    kind: package\n    spec: \"{spec}\"\n"),
        )
        .unwrap();
        let r = run(pipeline()
            .current_dir(&work)
            .env("PIP_INDEX_URL", index.url("/simple/"))
            .env_remove("UV_INDEX_URL")
            .env_remove("UV_DEFAULT_INDEX")
            .arg("run"));
        (work, r)
    };
    let (work, r) = build("pypi:tiny-units@0.3.1", "ok");
    assert_eq!(r.code, Some(0), "{r:?}");
    let mirror = work.join(".atlas/build/bundle/mirror/units");
    assert!(mirror.join("tiny_units/__init__.py").is_file() && !mirror.join("tests").exists());
    for (spec, needle) in [("pypi:tiny-units@0.3.0", "was yanked"), ("pypi:tiny-units@0.4.0", "wheels only")] {
        let (_, r) = build(spec, &spec.replace([':', '@', '.'], "_"));
        assert_ne!(r.code, Some(0), "{spec}: {r:?}");
        assert!(r.stderr.trim().lines().last().unwrap().contains(needle), "{spec}: {}", r.stderr);
    }

    // A private index named with its credentials in the URL, as pip and uv take them:
    // they go, as Basic auth, with every request to that index and appear nowhere.
    let seen = atlas_e2e::registry::Seen::default();
    let basic =
        format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ci@corp:s3cr/t"));
    let private = atlas_e2e::registry::private_simple_index(
        "tiny-units",
        vec![(
            "tiny_units-0.3.1.tar.gz".into(),
            atlas_e2e::registry::tar_gz(&[("tiny_units-0.3.1/README.md", "# units\n")]),
            false,
        )],
        basic.clone(),
        &seen,
    );
    let with_creds = private.url("/simple/").replacen("http://", "http://ci%40corp:s3cr%2Ft@", 1);
    let work = t.path().join("private");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        "name: dep\nsources:\n  units:\n    kind: package\n    spec: \"pypi:tiny-units@0.3.1\"\n",
    )
    .unwrap();
    let r = run(pipeline()
        .current_dir(&work)
        .env("PIP_INDEX_URL", &with_creds)
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_DEFAULT_INDEX")
        .arg("run"));
    assert_eq!(r.code, Some(0), "{r:?}");
    let requests = seen.lock().unwrap().clone();
    assert!(requests.len() >= 2 && requests.iter().all(|(_, a)| a.as_deref() == Some(basic.as_str())), "{requests:?}");
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("s3cr"), "the password was printed: {r:?}");
    let manifest = std::fs::read_to_string(work.join(".atlas/build/bundle/manifest.json")).unwrap();
    assert!(!manifest.contains("s3cr") && !manifest.contains("ci%40corp"), "{manifest}");
    // Without them: one line that says the index wants them.
    let work = t.path().join("private-none");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        "name: dep\nsources:\n  units:\n    kind: package\n    spec: \"pypi:tiny-units@0.3.1\"\n",
    )
    .unwrap();
    let r = run(pipeline()
        .current_dir(&work)
        .env("PIP_INDEX_URL", private.url("/simple/"))
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_DEFAULT_INDEX")
        .arg("run"));
    assert_ne!(r.code, Some(0), "{r:?}");
    let last = r.stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("HTTP 401 to a request without credentials") && last.contains("PIP_INDEX_URL"),
        "{}",
        r.stderr
    );
}

/// `atlas add` and `atlas sync`: a crate version built from cargo's registry and
/// installed under its ecosystem's name; a project's Cargo.lock synced to exactly its
/// versions (a bump builds only the new one, a lockfile checksum that differs installs
/// nothing and keeps the set); `serve rag --project` serves the set, by any spelling of
/// the name, and a version it does not serve is an error naming the one it does.
#[test]
fn add_and_sync_install_exact_versions_and_a_project_serves_its_set() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let bytes = std::fs::read(&file).unwrap();
    let t = tempfile::tempdir().unwrap();
    // The real crate, and the same bytes published as two earlier versions.
    let registry = sparse_registry(
        vec![
            Published::real("itoa", "1.0.0", bytes.clone()),
            Published::real("itoa", "1.0.1", bytes.clone()),
            Published::real("itoa", &version, bytes.clone()),
        ],
        |_, b| b,
    );
    let cargo = cargo_home(t.path(), &registry);
    let h = crate::distribution::home(&t.path().join("h"));
    let atlas = |args: &[&str]| {
        let mut c = crate::distribution::atlas(&h);
        c.env("CARGO_HOME", &cargo).current_dir(t.path()).args(args);
        run(&mut c)
    };

    let r = atlas(&["add", "crate:itoa@1.0.0"]).success();
    // Keyword-first: searchable at once, then embedded in place.
    assert!(
        r.stdout.contains("\"crate:itoa\"") && r.stderr.contains("crate:itoa@1.0.0: searchable by keyword"),
        "{r:?}"
    );
    assert!(r.stderr.contains("crate:itoa@1.0.0: embedded in"), "{}", r.stderr);
    assert_eq!(registry.hits("/dl/itoa/1.0.0/download"), [200]);
    let r = atlas(&["add", "crate:itoa@1.0.0"]).success();
    assert!(r.stderr.contains("already installed"), "{}", r.stderr);
    // Offline, only what is cached: a version never fetched is named, nothing asked.
    let r = atlas(&["add", "crate:itoa@1.0.1", "--offline"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("crate:itoa@1.0.1 is not in the cache and --offline fetches nothing"), "{}", r.stderr);
    assert!(registry.hits("/dl/itoa/1.0.1/download").is_empty());
    // `info` names it by either spelling and says what it offers (vectors too).
    let info: serde_json::Value =
        serde_json::from_str(&atlas(&["info", "crate:itoa", "--json"]).success().stdout).unwrap();
    assert_eq!(
        (info["name"].as_str(), info["modes"].as_array().map(Vec::len)),
        (Some("crate+itoa"), Some(3)),
        "{info}"
    );
    assert_eq!(registry.hits("/dl/itoa/1.0.0/download").len(), 1, "nothing fetched again");
    let r = atlas(&["add", "crate:itoa@^1"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.trim().lines().count() == 1 && r.stderr.contains("not an exact version"), "{}", r.stderr);
    let r = atlas(&["add", "crate:itoa@9.9.9"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("is not published; the nearest are"), "{}", r.stderr);
    let r = atlas(&["update", "crate:itoa"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("is a package library: `atlas add crate:itoa@VERSION`"), "{}", r.stderr);

    // A project locked at 1.0.0: already installed, so sync builds nothing.
    let project = t.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
    )
    .unwrap();
    let lock = |v: &str, sum: &str| {
        let text = format!(
            "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"itoa\"\nversion = \"{v}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{sum}\"\n"
        );
        std::fs::write(project.join("Cargo.lock"), text).unwrap();
    };
    let sum = atlas_runtime::hash::sha256_bytes(&bytes);
    let set = || -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(project.join(".atlas/libraries.json")).unwrap()).unwrap();
        v["libraries"].as_array().unwrap().iter().map(|l| format!("{}@{}", l["name"], l["version"])).collect()
    };
    lock("1.0.0", &sum);
    let p = project.to_str().unwrap();
    let r = atlas(&["sync", p]).success();
    assert!(r.stderr.contains("crate:itoa@1.0.0: already installed"), "{}", r.stderr);
    assert!(r.stdout.contains("\"--project\""), "{}", r.stdout);
    assert_eq!(set(), ["\"crate+itoa\"@\"1.0.0\""]);
    // The bump: only the new version is built, first without vectors.
    lock(&version, &sum);
    let r = atlas(&["sync", p, "--keyword-only", "--json"]).success();
    assert!(r.stderr.contains(&format!("crate:itoa@{version}: searchable by keyword")), "{}", r.stderr);
    assert!(r.stderr.contains("without --keyword-only to embed them"), "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((v["without_vectors"].as_u64(), v["embedded_s"].is_null()), (Some(1), true), "{v}");
    assert_eq!(set(), [format!("\"crate+itoa\"@\"{version}\"")]);
    // 1.0.0 is now named by no project.
    let r = atlas(&["bundles", "--unused", "--json"]).success();
    let unused: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let versions: Vec<&str> =
        unused[0]["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["1.0.0"], "{unused}");
    // A lockfile whose checksum is not the artifact's: nothing installed, the set as it was.
    lock("1.0.1", &"0".repeat(64));
    let r = atlas(&["sync", p]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("not the one the lockfile names"), "{}", r.stderr);
    assert_eq!(set(), [format!("\"crate+itoa\"@\"{version}\"")]);
    assert!(atlas(&["bundles", "--json"]).success().stdout.matches("\"1.0.1\"").count() == 0);
    // A malformed lockfile: the file and its line.
    std::fs::write(project.join("Cargo.lock"), "version = 4\n[[package]\n").unwrap();
    let r = atlas(&["sync", p]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("Cargo.lock") && r.stderr.contains("line 2"), "{}", r.stderr);
    lock(&version, &sum);

    // The project's servers: the set, by any spelling; no other version substituted.
    // The library has no vectors yet: it answers by keyword and says so, and picks up
    // its vectors when sync embeds it, without a restart.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "list_libraries", serde_json::json!({})).await);
        assert_eq!(v["libraries"][0]["library"], format!("crate:itoa@{version}"), "{v}");
        for name in ["crate:itoa", "itoa", "crate+itoa", &format!("crate:itoa@{version}")] {
            let r = crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "Buffer", "library": name})).await;
            let (_, v) = crate::mcp::ok(r);
            let d = &v["definitions"][0];
            assert_eq!(d["library"], format!("crate:itoa@{version}"), "{name}: {v}");
            assert!(d["uri"].as_str().unwrap().starts_with(&format!("atlas://crate+itoa@{version}/")), "{v}");
        }
        let e = crate::mcp::err(
            crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "Buffer", "library": "crate:itoa@1.0.0"}))
                .await,
        );
        assert!(e.contains("is not served") && e.contains(&version), "{e}");
        let hybrid = || {
            crate::mcp::call(
                &c,
                "search_code",
                serde_json::json!({"query": "format an integer into a buffer", "mode": "hybrid"}),
            )
        };
        let (text, _) = crate::mcp::ok(hybrid().await);
        assert!(text.contains("searched by keyword only") && text.contains("no vectors yet"), "{text}");
        let mut sync = crate::distribution::atlas(&h);
        sync.env("CARGO_HOME", &cargo).current_dir(t.path()).args(["sync", p, "--json"]);
        let r = tokio::task::spawn_blocking(move || run(&mut sync)).await.unwrap().success();
        assert!(r.stderr.contains(&format!("crate:itoa@{version}: embedded in")), "{}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["without_vectors"].as_u64(), Some(0), "{v}");
        let mut text = String::new();
        for _ in 0..100 {
            text = crate::mcp::ok(hybrid().await).0;
            if !text.contains("searched by keyword only") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(!text.contains("keyword only") && text.contains("format"), "still keyword only: {text}");
        c.cancel().await.unwrap();
    });
}

/// The real registries, one small package each: `atlas add` fetches it from crates.io,
/// the npm registry and PyPI, checks it against their checksums, and it answers a
/// search under its ecosystem's name. Skipped with the reason when a registry cannot
/// be reached.
#[test]
fn slow_atlas_add_reads_each_real_registry() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    for (spec, host, query, path) in [
        ("crate:itoa@1.0.15", "index.crates.io", "Buffer format integer", "itoa/src/lib.rs"),
        ("npm:is-number@7.0.0", "registry.npmjs.org", "is the value a number", "is-number/index.js"),
        ("pypi:six@1.16.0", "pypi.org", "add a metaclass to a class", "six/six.py"),
    ] {
        let reachable = std::net::ToSocketAddrs::to_socket_addrs(&(host, 443))
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(5)).is_ok());
        if !reachable {
            skip(&format!("{host} cannot be reached from here; {spec} not tried"));
            continue;
        }
        let mut add = crate::distribution::atlas(&h);
        add.current_dir(t.path())
            .env("CARGO_HOME", t.path().join("cargo-home"))
            .env("NPM_CONFIG_USERCONFIG", t.path().join("no-npmrc"))
            .env_remove("NPM_CONFIG_REGISTRY")
            .env_remove("PIP_INDEX_URL")
            .env_remove("UV_INDEX_URL")
            .env_remove("UV_DEFAULT_INDEX")
            .env("PIP_CONFIG_FILE", "/dev/null")
            .args(["add", spec]);
        let r = run(&mut add);
        assert_eq!(r.code, Some(0), "{spec}: {r:?}");
        let name = spec.rsplit_once('@').unwrap().0;
        let mut search = crate::distribution::atlas(&h);
        search.args(["search", query, "--json", "-k", "5", "--bundle", name]);
        let s = run(&mut search).success();
        let v: serde_json::Value = serde_json::from_str(&s.stdout).unwrap();
        let hits = v["hits"].as_array().unwrap();
        assert!(hits.iter().all(|h| h["library"] == spec), "{spec}: {v}");
        assert!(hits.iter().any(|h| h["path"] == path), "{spec}: {path} not among {v}");
    }
}

/// A private cargo registry (`auth-required` in its config.json): the token cargo would
/// send (CARGO_REGISTRIES_<NAME>_TOKEN) goes, as cargo sends it, with every index and
/// download request to that registry; without it, one line names the variable.
#[test]
fn a_private_cargo_registrys_token_goes_with_every_request_to_it() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let t = tempfile::tempdir().unwrap();
    let seen = atlas_e2e::registry::Seen::default();
    let registry = atlas_e2e::registry::private_sparse_registry(
        vec![Published::real("itoa", &version, std::fs::read(&file).unwrap())],
        "s3cret-cargo-token",
        &seen,
    );
    // cargo_home replaces crates.io with the source named "mirror".
    let home = cargo_home(t.path(), &registry);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    pipeline_yaml(&work, &format!("crate:itoa@{version}"));
    let r = run(pipeline()
        .current_dir(&work)
        .env("CARGO_HOME", &home)
        .env_remove("CARGO_REGISTRIES_MIRROR_TOKEN")
        .arg("run"));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("requires a token; set CARGO_REGISTRIES_MIRROR_TOKEN"), "{}", r.stderr);
    let r = run(pipeline()
        .current_dir(&work)
        .env("CARGO_HOME", &home)
        .env("CARGO_REGISTRIES_MIRROR_TOKEN", "s3cret-cargo-token")
        .arg("run"))
    .success();
    let seen = seen.lock().unwrap().clone();
    let private: Vec<_> = seen.iter().filter(|(p, _)| p != "/index/config.json").collect();
    assert!(private.iter().any(|(p, _)| p.starts_with("/dl/")), "{seen:?}");
    assert!(private.iter().all(|(_, a)| a.as_deref() == Some("s3cret-cargo-token")), "{seen:?}");
    assert!(!r.stderr.contains("s3cret-cargo-token"));
}

/// Hostile packages, served by the registry as real `.crate` files with the registry's
/// own checksums: each is refused within the safe extractor's caps with one line, and
/// nothing is written outside the package's cache nor installed. (A link is left out,
/// not refused: `a_link_in_a_package_is_skipped_with_a_note_and_the_rest_is_built`.)
#[test]
fn hostile_package_artifacts_are_refused_within_the_caps() {
    use atlas_e2e::registry::Evil;
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let v = victim.display().to_string();
    let (reg, empty) = (tar::EntryType::Regular, b"".as_slice());
    let top = "evil-1.0.0";
    let mut many = Evil::gzip();
    for i in 0..1_000_000u32 {
        many = many.raw(format!("{top}/f{i}").as_bytes(), reg, b"", 0, empty);
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a ../ entry", Evil::gzip().file(&format!("{top}/../../escaped"), b"x").finish(), "'..'"),
        ("an absolute path", Evil::gzip().file(&format!("{v}/abs"), b"x").finish(), "absolute path"),
        (
            "a 200 MB gzip bomb (one file under the per-file cap)",
            Evil::gzip()
                .raw(
                    format!("{top}/zeros").as_bytes(),
                    reg,
                    b"",
                    200 << 20,
                    std::io::Read::take(std::io::repeat(0), 200 << 20),
                )
                .finish(),
            "compression bomb",
        ),
        ("a million empty files", many.finish(), "more than 100000 entries"),
        ("a 2 GB file", Evil::gzip().claimed(&format!("{top}/huge"), 2 << 30).finish(), "allowed per file"),
    ];
    let versions: Vec<String> = (0..cases.len()).map(|i| format!("1.0.{i}")).collect();
    let registry = sparse_registry(
        cases.iter().zip(&versions).map(|((_, bytes, _), v)| Published::real("evil", v, bytes.clone())).collect(),
        |_, b| b,
    );
    let cargo = cargo_home(t.path(), &registry);
    let h = crate::distribution::home(&t.path().join("h"));
    for ((what, _, needle), version) in cases.iter().zip(&versions) {
        let mut add = crate::distribution::atlas(&h);
        add.env("CARGO_HOME", &cargo).current_dir(t.path()).args(["add", &format!("crate:evil@{version}")]);
        let r = run(&mut add);
        assert_eq!(r.code, Some(1), "{what}: {r:?}");
        let line = r.stderr.lines().find(|l| l.contains("failed:")).unwrap_or_default();
        assert!(line.contains(needle), "{what}: {}", r.stderr);
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "{what}: wrote outside");
        assert!(!t.path().join("escaped").exists() && !h.join("escaped").exists(), "{what}: wrote outside");
        eprintln!("refused {what}: {line}");
    }
    let r = run(crate::distribution::atlas(&h).args(["bundles", "--json"])).success();
    assert!(!r.stdout.contains("evil"), "nothing installed: {}", r.stdout);
}

/// A package whose artifact holds links (a symlink out of the tree with a file "through"
/// it, a hard link), as mkdocstrings-python's sdist holds one: each link is left out and
/// named once in the build's notes, nothing is written through it, and the rest of the
/// package is built and served.
#[test]
fn a_link_in_a_package_is_skipped_with_a_note_and_the_rest_is_built() {
    use atlas_e2e::registry::Evil;
    let t = tempfile::tempdir().unwrap();
    let victim = t.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let top = "linky-1.0.0";
    let bytes = Evil::gzip()
        .file(&format!("{top}/Cargo.toml"), b"[package]\nname = \"linky\"\nversion = \"1.0.0\"\n")
        .file(
            &format!("{top}/src/lib.rs"),
            b"/// Adds one to a counter.\npub fn add_one(x: u32) -> u32 {\n    x + 1\n}\n",
        )
        .raw(
            format!("{top}/docs").as_bytes(),
            tar::EntryType::Symlink,
            victim.to_str().unwrap().as_bytes(),
            0,
            b"".as_slice(),
        )
        .file(&format!("{top}/docs/guide.md"), b"# Guide\n\nWritten beside the link, never through it.\n")
        .raw(
            format!("{top}/README.md").as_bytes(),
            tar::EntryType::Link,
            format!("{top}/src/lib.rs").as_bytes(),
            0,
            b"".as_slice(),
        )
        .finish();
    let registry = sparse_registry(vec![Published::real("linky", "1.0.0", bytes)], |_, b| b);
    let cargo = cargo_home(t.path(), &registry);
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        "name: dep\nsources:\n  linky:\n    kind: package\n    spec: \"crate:linky@1.0.0\"\nstages:\n  embed:\n    enabled: false\n",
    )
    .unwrap();
    let r = build(&work, &cargo);
    assert_eq!(r.code, Some(0), "{r:?}");
    for link in ["docs", "README.md"] {
        let note = format!("skipped linky/{link}: a link in crate:linky@1.0.0's artifact, left out");
        assert_eq!(r.stderr.matches(&note).count(), 1, "{link}: {}", r.stderr);
    }
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "nothing written through the link");
    let mirror = work.join(".atlas/build/bundle/mirror/linky");
    assert!(mirror.join("src/lib.rs").is_file() && mirror.join("docs/guide.md").is_file(), "the rest is built");
    assert!(!mirror.join("README.md").exists());
    let s = run(Command::new(bin("atlas"))
        .args(["search", "--symbol", "add_one", "--json", "--bundle"])
        .arg(work.join(".atlas/build/bundle")))
    .success();
    assert!(s.stdout.contains("linky/src/lib.rs"), "{}", s.stdout);
    // A second run with the artifact unpacked already still names the links.
    std::fs::remove_dir_all(work.join(".atlas/build")).unwrap();
    let again = run(pipeline().current_dir(&work).env("CARGO_HOME", &cargo).args(["run", "--force", "crawl"]));
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(again.stderr.contains("skipped linky/docs: a link"), "{}", again.stderr);
}

/// Two teammates with the same lockfile in different folders and homes, behind one
/// shared build cache (a `file://` remote their config files name): the second's sync
/// embeds nothing and installs the very bundle the first built.
#[test]
fn a_teammates_sync_of_the_same_lockfile_reuses_every_bundle_through_the_shared_cache() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let bytes = std::fs::read(&file).unwrap();
    let t = tempfile::tempdir().unwrap();
    let registry = sparse_registry(vec![Published::real("itoa", &version, bytes.clone())], |_, b| b);
    let cargo = cargo_home(t.path(), &registry);
    let remote = t.path().join("team-cache");
    std::fs::create_dir_all(&remote).unwrap();
    let sum = atlas_runtime::hash::sha256_bytes(&bytes);
    let mut manifests = Vec::new();
    let mut embed = Vec::new();
    for who in ["alice", "bob"] {
        let h = crate::distribution::home(&t.path().join(who).join("home"));
        std::fs::create_dir_all(h.join("config/atlas")).unwrap();
        std::fs::write(
            h.join("config/atlas/config.toml"),
            format!("[cache]\nremote = \"file://{}\"\ntrusted = true\n", remote.display()),
        )
        .unwrap();
        let project = t.path().join(who).join("src/app");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
        )
        .unwrap();
        std::fs::write(
            project.join("Cargo.lock"),
            format!(
                "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"itoa\"\nversion = \"{version}\"\n\
                 source = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{sum}\"\n"
            ),
        )
        .unwrap();
        let mut sync = crate::distribution::atlas(&h);
        sync.env("CARGO_HOME", &cargo).env_remove("ATLAS_CACHE_REMOTE").current_dir(&project).arg("sync");
        let r = run(&mut sync).success();
        assert!(r.stderr.contains(&format!("crate:itoa@{version}: embedded in")), "{who}: {}", r.stderr);
        manifests.push(std::fs::read_to_string(h.join(format!("bundles/crate+itoa/{version}/manifest.json"))).unwrap());
        // The vectors pass's run: its embed stage.
        let runs = h.join("packages/crate+itoa/cache/runs");
        let newest = std::fs::read_dir(&runs)
            .unwrap()
            .flatten()
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).unwrap())
            .unwrap();
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(newest.path()).unwrap()).unwrap();
        let stage = record["detail"].as_array().unwrap().iter().find(|s| s["name"] == "embed").unwrap().clone();
        embed.push(stage);
    }
    assert_ne!(embed[0]["outcome"], "cached", "alice embeds: {}", embed[0]);
    assert_eq!(embed[1]["outcome"], "cached", "bob embeds nothing: {}", embed[1]);
    assert_eq!(manifests[0], manifests[1], "bob installs the bundle alice built");
}
