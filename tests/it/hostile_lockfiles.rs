//! Lockfiles and project folders as a hostile or careless project writes them, through
//! the real `atlas sync` and `atlas serve --project` against local registries serving
//! real artifacts: a package comes from the index its lock names and matches its
//! lock's hashes, npm's lockfiles without `resolved` are registry packages, versions of
//! one package live side by side and are each served, a set file that is no regular
//! file is refused without waiting on it, `.atlas` never leads a write out of the
//! project, and no credential in a lockfile's URL is printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use atlas_e2e::registry::{Published, cached_crate, cargo_home, sparse_registry, tar_gz};
use atlas_e2e::{Run, run, skip};

/// `atlas` with home `h`, run in `cwd`, its registries' settings those given and no others.
pub(crate) fn atlas(h: &Path, cwd: &Path) -> Command {
    let mut c = crate::distribution::atlas(h);
    c.current_dir(cwd)
        .env_remove("ATLAS_CACHE_REMOTE")
        .env("NPM_CONFIG_USERCONFIG", cwd.join("no-user-npmrc"))
        .env_remove("NPM_CONFIG_REGISTRY")
        .env_remove("PIP_INDEX_URL")
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_DEFAULT_INDEX")
        .env("PIP_CONFIG_FILE", "/dev/null");
    c
}

fn dir(at: PathBuf) -> PathBuf {
    std::fs::create_dir_all(&at).unwrap();
    at
}

/// The set `atlas sync` wrote: `name@version` of each library.
fn set(project: &Path) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(project.join(".atlas/libraries.json")).unwrap()).unwrap();
    v["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}@{}", l["name"].as_str().unwrap(), l["version"].as_str().unwrap()))
        .collect()
}

/// Whether a file under `root` holds `needle`.
fn holds(root: &Path, needle: &str) -> bool {
    std::fs::read_dir(root).into_iter().flatten().flatten().any(|e| {
        let p = e.path();
        if p.is_dir() { holds(&p, needle) } else { std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) }
    })
}

/// Waits for `child` to exit: its run. A child still running after a minute has hung
/// (the bug these tests pin); it is killed and the test fails saying so.
fn finish(mut child: std::process::Child, what: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: still running after a minute (it waits on what it reads)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap().into()
}

fn one_error_line(r: &Run) -> &str {
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    errors[0]
}

/// uv.lock names a private index for a package; the index the user's settings name
/// (here PIP_INDEX_URL, a public one) serves an impostor of the same name and version.
/// The package comes from the lock's index, the public one is never asked, and an
/// artifact that is not the lock's hash, or a package whose lock gives no sdist hash,
/// is refused with a line that says why.
#[test]
fn a_uv_lock_package_comes_from_the_index_the_lock_names_and_must_match_the_locks_hash() {
    let t = tempfile::tempdir().unwrap();
    let sdist = |readme: &str| {
        tar_gz(&[
            ("tiny_units-0.3.1/README.md", readme),
            ("tiny_units-0.3.1/tiny_units/__init__.py", "def to_inches(cm):\n    return cm / 2.54\n"),
        ])
    };
    let good = sdist("# tiny-units\n\nBuilt by the private index's owners.\n");
    let evil = sdist("# tiny-units\n\nAn impostor on the public index.\n");
    let file = "tiny_units-0.3.1.tar.gz".to_owned();
    let private = atlas_e2e::registry::simple_index("tiny-units", vec![(file.clone(), good.clone(), false)]);
    let public = atlas_e2e::registry::simple_index("tiny-units", vec![(file, evil, false)]);
    let lock = |project: &Path, index: &str, sdist_hash: Option<&str>| {
        let sdist = sdist_hash.map_or_else(String::new, |h| {
            format!("sdist = {{ url = \"{index}/../files/tiny_units-0.3.1.tar.gz\", hash = \"sha256:{h}\" }}\n")
        });
        std::fs::write(
            project.join("uv.lock"),
            format!(
                "version = 1\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ editable = \".\" }}\n\
                 dependencies = [{{ name = \"tiny-units\" }}]\n\n[[package]]\nname = \"tiny-units\"\nversion = \"0.3.1\"\n\
                 source = {{ registry = \"{index}\" }}\n{sdist}\
                 wheels = [{{ url = \"{index}/../files/tiny_units-0.3.1-py3-none-any.whl\", hash = \"sha256:{}\" }}]\n",
                "e".repeat(64)
            ),
        )
        .unwrap();
    };
    let sync = |h: &Path, project: &Path| {
        let mut c = atlas(h, t.path());
        c.env("PIP_INDEX_URL", public.url("/simple/")).args(["sync", "--keyword-only"]).arg(project);
        run(&mut c)
    };
    let good_hash = atlas_runtime::hash::sha256_bytes(&good);

    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    lock(&project, &private.url("/simple"), Some(&good_hash));
    let r = sync(&h, &project);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("pypi:tiny-units@0.3.1: searchable by keyword"), "{}", r.stderr);
    assert!(!private.hits("/simple/tiny-units/").is_empty(), "the lock's index was not asked");
    assert!(public.all().is_empty(), "the configured index was asked: {:?}", public.all());
    let installed = h.join("bundles/pypi+tiny-units/0.3.1/mirror");
    assert!(holds(&installed, "private index's owners") && !holds(&installed, "impostor"));

    // The lock names the index that serves the impostor, with the real build's hash.
    let h = crate::distribution::home(&t.path().join("h2"));
    let project = dir(t.path().join("app2"));
    lock(&project, &public.url("/simple"), Some(&good_hash));
    let r = sync(&h, &project);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("not the one the lockfile names"), "{}", r.stderr);
    assert!(!h.join("bundles/pypi+tiny-units").exists(), "nothing installed");

    // A lock with wheels' hashes only: nothing could check the sdist Atlas would read.
    let project = dir(t.path().join("app3"));
    lock(&project, &private.url("/simple"), None);
    let asked = private.all().len();
    let r = sync(&h, &project);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("skipped uv.lock: tiny-units@0.3.1 has no sdist sha256"), "{}", r.stderr);
    assert_eq!(private.all().len(), asked, "nothing fetched");
    assert!(!h.join("bundles/pypi+tiny-units").exists(), "nothing installed");
}

/// npm's `omit-lockfile-registry-resolved` writes a registry package as a version and
/// an integrity without `resolved`: it is fetched from the registry `.npmrc` names and
/// installed when its tarball has the lock's integrity, refused when not.
#[test]
fn an_npm_lock_entry_without_resolved_is_installed_from_the_registry_and_checked_by_its_integrity() {
    let t = tempfile::tempdir().unwrap();
    let tarball = tar_gz(&[
        ("package/package.json", "{\"name\": \"tiny-pad\", \"version\": \"1.0.0\", \"main\": \"index.js\"}"),
        ("package/README.md", "# tiny-pad\n\nPads a string on the left.\n"),
        (
            "package/index.js",
            "/** Pads `s` on the left to `n`. */\nexport function padLeft(s, n) {\n  return s.padStart(n);\n}\n",
        ),
    ]);
    let seen = atlas_e2e::registry::Seen::default();
    let (registry, _) = atlas_e2e::registry::npm_registry("tiny-pad", "1.0.0", tarball.clone(), false, &seen);
    std::fs::write(t.path().join(".npmrc"), format!("registry={}\n", registry.url("/npm/"))).unwrap();
    let lock = |project: &Path, integrity: &str| {
        std::fs::write(
            project.join("package-lock.json"),
            serde_json::json!({"name": "app", "lockfileVersion": 3, "requires": true, "packages": {
                "": {"name": "app", "dependencies": {"tiny-pad": "^1.0.0"}},
                "node_modules/tiny-pad": {"version": "1.0.0", "integrity": integrity, "license": "MIT"}
            }})
            .to_string(),
        )
        .unwrap();
    };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    lock(&project, &atlas_runtime::hash::sri_sha512(&tarball));
    let r = run(atlas(&h, t.path()).args(["sync", "--keyword-only"]).arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("npm:tiny-pad@1.0.0: searchable by keyword"), "{}", r.stderr);
    assert!(!r.stderr.contains("not from a registry"), "{}", r.stderr);
    assert_eq!(set(&project), ["npm+tiny-pad@1.0.0"]);
    assert_eq!(registry.hits("/tarballs/tiny-pad-1.0.0.tgz"), [200]);

    let h = crate::distribution::home(&t.path().join("h2"));
    let project = dir(t.path().join("app2"));
    lock(&project, &atlas_runtime::hash::sri_sha512(b"another tarball"));
    let r = run(atlas(&h, t.path()).args(["sync", "--keyword-only"]).arg(&project));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("not the one the lockfile names"), "{}", r.stderr);
    assert!(!h.join("bundles/npm+tiny-pad").exists(), "nothing installed");
}

/// The crates of the local cargo cache a test publishes: itoa at two versions (1.10.0
/// sorts before 1.9.0 as text), and fnv once. None when the cache lacks them.
pub(crate) fn two_itoas_and_fnv(t: &Path) -> Option<(atlas_e2e::http::Server, PathBuf, String, String)> {
    let (Some((_, itoa)), Some((fnv_version, fnv))) = (cached_crate("itoa"), cached_crate("fnv")) else {
        skip("no itoa or fnv .crate in the local cargo cache (build the workspace once)");
        return None;
    };
    let (itoa, fnv) = (std::fs::read(itoa).unwrap(), std::fs::read(fnv).unwrap());
    let lock = format!(
        "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n{}",
        [("itoa", "1.9.0", &itoa), ("itoa", "1.10.0", &itoa), ("fnv", fnv_version.as_str(), &fnv)]
            .iter()
            .map(|(n, v, b)| {
                format!(
                    "[[package]]\nname = \"{n}\"\nversion = \"{v}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{}\"\n\n",
                    atlas_runtime::hash::sha256_bytes(b)
                )
            })
            .collect::<String>()
    );
    let registry = sparse_registry(
        vec![
            Published::real("itoa", "1.9.0", itoa.clone()),
            Published::real("itoa", "1.10.0", itoa),
            Published::real("fnv", &fnv_version, fnv),
        ],
        |_, b| b,
    );
    let cargo = cargo_home(t, &registry);
    Some((registry, cargo, lock, fnv_version))
}

/// `atlas add` of an older version beside a newer one installs it (a package's
/// versions are not a bundle's updates) and `current` stays on the newer.
#[test]
fn an_older_package_version_is_added_beside_a_newer_one_and_the_newer_stays_current() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, ..)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    for v in ["1.10.0", "1.9.0"] {
        let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args([
            "add",
            "--keyword-only",
            &format!("crate:itoa@{v}"),
        ]));
        assert_eq!(r.code, Some(0), "{v}: {r:?}");
        assert!(r.stderr.contains(&format!("crate:itoa@{v}: searchable by keyword")), "{v}: {}", r.stderr);
    }
    assert_eq!(std::fs::read_link(h.join("bundles/crate+itoa/current")).unwrap(), Path::new("1.10.0"));
    assert!(h.join("bundles/crate+itoa/1.9.0/manifest.json").is_file());
    let r = run(atlas(&h, t.path()).args(["search", "--symbol", "Buffer", "--json", "--bundle", "crate:itoa@1.9.0"]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stdout.contains("crate:itoa@1.9.0"), "{}", r.stdout);
}

/// A Cargo.lock with two versions of one crate: `sync` installs both side by side (the
/// newer is built first, and the older is no rollback), and `serve rag --project`
/// serves each as its own `name@version`, a pin choosing one; the set file swapped for
/// a link to the server's own stdin is never read.
#[test]
fn two_locked_versions_of_one_crate_install_side_by_side_and_a_project_serves_each() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, lock, fnv_version)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\nfnv = \"1\"\n",
    )
    .unwrap();
    std::fs::write(project.join("Cargo.lock"), lock).unwrap();
    let r = run(atlas(&h, t.path())
        .env("CARGO_HOME", &cargo)
        .args(["sync", "--keyword-only", "--jobs", "1"])
        .arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("crate:itoa@1.9.0: searchable by keyword"), "{}", r.stderr);
    assert!(r.stderr.contains("crate:itoa@1.10.0: searchable by keyword"), "{}", r.stderr);
    let mut want = vec![format!("crate+fnv@{fnv_version}"), "crate+itoa@1.10.0".into(), "crate+itoa@1.9.0".into()];
    want.sort();
    assert_eq!(set(&project), want);
    assert_eq!(std::fs::read_link(h.join("bundles/crate+itoa/current")).unwrap(), Path::new("1.10.0"));

    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let p = project.to_str().unwrap();
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let libraries = async || {
            let r = tokio::time::timeout(
                Duration::from_secs(60),
                crate::mcp::call(&c, "list_libraries", serde_json::json!({})),
            )
            .await
            .unwrap_or_else(|_| panic!("list_libraries got no answer: {}", crate::mcp::read(&log)));
            let (_, v) = crate::mcp::ok(r);
            let mut l: Vec<String> =
                v["libraries"].as_array().unwrap().iter().map(|l| l["library"].as_str().unwrap().to_owned()).collect();
            l.sort();
            l
        };
        let served = vec![format!("crate:fnv@{fnv_version}"), "crate:itoa@1.10.0".into(), "crate:itoa@1.9.0".into()];
        assert_eq!(libraries().await, served);
        for (pin, version) in [("crate:itoa@1.9.0", "1.9.0"), ("itoa@1.10.0", "1.10.0"), ("itoa", "1.10.0")] {
            let r = crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "Buffer", "library": pin})).await;
            let (_, v) = crate::mcp::ok(r);
            let found: Vec<&str> =
                v["definitions"].as_array().unwrap().iter().map(|d| d["library"].as_str().unwrap()).collect();
            assert!(!found.is_empty() && found.iter().all(|l| *l == format!("crate:itoa@{version}")), "{pin}: {v}");
        }
        // A set file that becomes a link to the server's own stdin: the server, which
        // reads the set each second, never takes the client's messages for it.
        let file = project.join(".atlas/libraries.json");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/proc/self/fd/0", &file).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(libraries().await, served);
        c.cancel().await.unwrap();
    });
}

/// A set file that is a link to a FIFO, or to `/proc/self/fd/0` (the MCP client's own
/// messages), as a cloned repository can carry: `serve --project` refuses it at once
/// with one line, and never waits on it nor reads the client's messages.
#[test]
fn a_project_set_file_that_is_a_fifo_or_the_servers_stdin_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app/.atlas")).parent().unwrap().to_owned();
    let fifo = t.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let file = project.join(".atlas/libraries.json");
    for (target, what) in [(fifo.as_path(), "a FIFO"), (Path::new("/proc/self/fd/0"), "the server's stdin")] {
        let _ = std::fs::remove_file(&file);
        std::os::unix::fs::symlink(target, &file).unwrap();
        let mut child = atlas(&h, t.path())
            .args(["serve", "rag", "--project"])
            .arg(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The client's first message, which the server must not take for its set.
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(
            &mut stdin,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
        )
        .unwrap();
        let r = finish(child, what);
        drop(stdin);
        assert_eq!(r.code, Some(1), "{what}: {r:?}");
        let line = one_error_line(&r);
        assert!(line.contains("libraries.json") && line.contains("not a regular file"), "{what}: {line}");
    }
}

/// `.atlas` a link out of the project (a cloned repository can carry one): `sync`
/// refuses with one line before it builds anything and writes nothing there. A set
/// file that is a link is replaced, never written through.
#[test]
fn sync_never_writes_the_library_set_through_a_link_out_of_the_project() {
    let t = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    let outside = dir(t.path().join("outside"));
    let project = dir(t.path().join("app"));
    // A lockfile that pins nothing Atlas installs: nothing is built either way.
    std::fs::write(project.join("requirements.txt"), "requests>=2\n").unwrap();
    std::os::unix::fs::symlink(&outside, project.join(".atlas")).unwrap();
    let r = run(atlas(&h, t.path()).arg("sync").arg(&project));
    assert_eq!(r.code, Some(2), "{r:?}");
    let line = one_error_line(&r);
    assert!(line.contains("outside the project") && line.contains("remove the link"), "{line}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "written outside");

    std::fs::remove_file(project.join(".atlas")).unwrap();
    std::fs::create_dir(project.join(".atlas")).unwrap();
    let victim = outside.join("victim.json");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, project.join(".atlas/libraries.json")).unwrap();
    let r = run(atlas(&h, t.path()).arg("sync").arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    let meta = std::fs::symlink_metadata(project.join(".atlas/libraries.json")).unwrap();
    assert!(meta.file_type().is_file(), "the link was replaced by the set");
}

/// Lockfiles name git and tarball sources with their credentials
/// (`https://user:token@host/…`): `sync` says what it skipped, in its lines and in
/// `--json`, with the host and without the credentials.
#[test]
fn sync_never_prints_the_credentials_in_a_lockfiles_urls() {
    let t = tempfile::tempdir().unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(
        project.join("Cargo.lock"),
        "version = 4\n[[package]]\nname = \"priv\"\nversion = \"0.1.0\"\n\
         source = \"git+https://ci:s3cret-cargo-token@git.corp.test/priv.git?rev=main#0123abcd\"\n",
    )
    .unwrap();
    std::fs::write(
        project.join("package-lock.json"),
        serde_json::json!({"lockfileVersion": 3, "packages": {
            "": {"dependencies": {"priv": "*", "tgz": "*"}},
            "node_modules/priv": {"version": "1.0.0", "resolved": "git+https://ci:s3cret-npm-token@git.corp.test/priv.git#abc"},
            "node_modules/tgz": {"version": "1.0.0", "resolved": "file:../tgz.tgz"}
        }})
        .to_string(),
    )
    .unwrap();
    let r = run(atlas(&h, t.path()).args(["sync", "--all", "--json"]).arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    let both = format!("{}{}", r.stdout, r.stderr);
    assert!(!both.contains("s3cret") && !both.contains("ci:"), "{both}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let skipped: Vec<&str> = v["skipped"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(skipped.iter().filter(|s| s.contains("git.corp.test")).count() == 2, "{skipped:?}");
    assert_eq!(r.stderr.matches("atlas: skipped").count(), 3, "{}", r.stderr);
}

/// `serve fs --project` over two versions of itoa and fnv: `read_file` takes a path
/// that starts with the stored spelling or the shown one a hit carries, and a path at
/// a version not served is an error that names the versions served, not a generic
/// path error.
#[test]
fn read_file_at_a_version_not_served_names_the_versions_that_are() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, lock, fnv_version)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(project.join("Cargo.lock"), lock).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\nfnv = \"1\"\n",
    )
    .unwrap();
    run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only"]).arg(&project)).success();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("fs.log");
    let mut cmd = crate::mcp::atlas(&["serve", "fs", "--project", project.to_str().unwrap()], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let read = async |path: &str| {
            crate::mcp::call(&c, "read_file", serde_json::json!({"path": path, "start_line": 1, "end_line": 3})).await
        };
        let fnv_shown = format!("crate:fnv@{fnv_version}/fnv/lib.rs");
        for path in [
            "crate+itoa@1.9.0/itoa/src/lib.rs",
            "crate:itoa@1.9.0/itoa/src/lib.rs",
            fnv_shown.as_str(),
            "fnv/fnv/lib.rs",
        ] {
            let (_, v) = crate::mcp::ok(read(path).await);
            assert!(v["path"].as_str().unwrap().starts_with("crate+"), "{path}: {v}");
        }
        let e = crate::mcp::err(read("crate:itoa@1.8.0/itoa/src/lib.rs").await);
        assert!(
            e.contains("crate:itoa@1.8.0 is not served: the versions served are")
                && e.contains("1.9.0")
                && e.contains("1.10.0")
                && e.contains("crate+itoa@1.10.0/"),
            "{e}"
        );
        let e = crate::mcp::err(read("crate+fnv@0.0.1/fnv/lib.rs").await);
        assert!(e.contains(&format!("the version served is {fnv_version}")), "{e}");
        let e = crate::mcp::err(read("itoa/itoa/src/lib.rs").await);
        assert!(e.contains("names several versions"), "{e}");
        c.cancel().await.unwrap();
    });
}

/// `atlas doctor --project` and `atlas smoke --project` over a synced project: while
/// the lockfile and the set agree, doctor's project line is ok and smoke serves every
/// library of the set; once they disagree (a version locked that the set does not
/// serve, a set entry no lockfile pins, a set entry whose bundle is gone), doctor says
/// each on its own line with `atlas sync DIR` and exits non-zero, and smoke fails
/// naming the library not served.
#[test]
fn doctor_and_smoke_check_a_project_and_fail_while_its_lockfile_and_its_set_disagree() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, lock, fnv_version)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(project.join("Cargo.lock"), &lock).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\nfnv = \"1\"\n",
    )
    .unwrap();
    let p = project.to_str().unwrap();
    run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", p])).success();
    let doctor = || {
        let r = run(atlas(&h, t.path()).args(["doctor", "--json", "--project", p]));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
        let lines: Vec<serde_json::Value> =
            v["checks"].as_array().unwrap().iter().filter(|c| c["check"] == "project").cloned().collect();
        (r, lines)
    };
    let (_, lines) = doctor();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["status"], "ok", "{lines:?}");
    assert!(
        lines[0]["detail"].as_str().unwrap().contains("the set serves what Cargo.lock pins (3 libraries)"),
        "{lines:?}"
    );
    let r = run(atlas(&h, t.path()).args(["smoke", "--project", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stdout.contains("list_libraries: every library of the set (3) served"), "{}", r.stdout);
    let r = run(atlas(&h, t.path()).args(["smoke", "--project", t.path().to_str().unwrap()]));
    assert_eq!(r.code, Some(2), "no set: {r:?}");
    assert!(r.stderr.contains("has no library set; run `atlas sync"), "{}", r.stderr);

    // The lockfile moves itoa 1.9.0 to 1.8.0, and fnv's bundle is gone.
    std::fs::write(project.join("Cargo.lock"), lock.replace("\"1.9.0\"", "\"1.8.0\"")).unwrap();
    std::fs::remove_dir_all(h.join(format!("bundles/crate+fnv/{fnv_version}"))).unwrap();
    let (r, lines) = doctor();
    assert_eq!(r.code, Some(1), "{r:?}");
    let details: Vec<&str> = lines.iter().map(|l| l["detail"].as_str().unwrap()).collect();
    assert_eq!(
        details,
        [
            "crate:itoa@1.8.0 is locked in Cargo.lock but the set serves 1.10.0, 1.9.0".to_owned(),
            format!("crate:fnv@{fnv_version} is in the set but its bundle is not installed"),
            "crate:itoa@1.9.0 is in the set but no lockfile pins it".to_owned(),
        ],
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| l["status"] == "fail" && l["fix"] == format!("run `atlas sync {p}`")), "{lines:?}");
    let text = run(atlas(&h, t.path()).args(["doctor", "--project", p]));
    assert_eq!(text.code, Some(1), "{text:?}");
    assert!(text.stdout.contains(&format!("→ run `atlas sync {p}`")), "{}", text.stdout);
    let r = run(atlas(&h, t.path()).args(["smoke", "--project", p]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("the set names 3 libraries, 2 served, broken: crate:fnv@"), "{}", r.stderr);
}

/// A Python library is pinned by any spelling PEP 503 makes its name (`Tiny_Units`,
/// `tiny.units`, `pypi:TINY-units@0.3.1`), as the docs say: the pin resolves, never
/// "no library is served".
#[test]
fn a_python_pin_names_its_library_in_any_spelling_pep_503_makes_one() {
    let t = tempfile::tempdir().unwrap();
    let sdist = tar_gz(&[
        ("tiny_units-0.3.1/README.md", "# tiny-units\n\nConverts between metric and imperial units.\n"),
        ("tiny_units-0.3.1/tiny_units/__init__.py", "def to_inches(cm):\n    return cm / 2.54\n"),
    ]);
    let hash = atlas_runtime::hash::sha256_bytes(&sdist);
    let index = atlas_e2e::registry::simple_index("tiny-units", vec![("tiny_units-0.3.1.tar.gz".into(), sdist, false)]);
    let url = index.url("/simple");
    let project = dir(t.path().join("app"));
    std::fs::write(
        project.join("uv.lock"),
        format!(
            "version = 1\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\nsource = {{ editable = \".\" }}\n\
             dependencies = [{{ name = \"tiny-units\" }}]\n\n[[package]]\nname = \"tiny-units\"\nversion = \"0.3.1\"\n\
             source = {{ registry = \"{url}\" }}\n\
             sdist = {{ url = \"{url}/../files/tiny_units-0.3.1.tar.gz\", hash = \"sha256:{hash}\" }}\n"
        ),
    )
    .unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    run(atlas(&h, t.path()).args(["sync", "--keyword-only"]).arg(&project)).success();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", project.to_str().unwrap()], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        for pin in
            ["Tiny_Units", "tiny.units", "TINY--units", "pypi:Tiny_Units", "pypi:TINY-units@0.3.1", "pypi+Tiny_Units"]
        {
            let r = crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "to_inches", "library": pin})).await;
            let (_, v) = crate::mcp::ok(r);
            assert_eq!(v["definitions"][0]["library"], "pypi:tiny-units@0.3.1", "{pin}: {v}");
        }
        let e = crate::mcp::err(
            crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "to_inches", "library": "tinyunits"})).await,
        );
        assert!(e.contains("no library \"tinyunits\" is served"), "{e}");
        c.cancel().await.unwrap();
    });
}

/// A Cargo project with a runtime crate (itoa, at two versions) and a dev one (fnv):
/// `sync` takes both, each marked by its kind in the set and in `--json`; `--only
/// runtime` leaves fnv out and lists it with its reason, in its lines and in `--json`,
/// and the set records the selection, which `doctor --project` honours.
#[test]
fn sync_takes_dev_dependencies_too_marks_each_by_kind_and_only_lists_each_left_out_with_its_reason() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, lock, fnv_version)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(project.join("Cargo.lock"), &lock).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n[dev-dependencies]\nfnv = \"1\"\n",
    )
    .unwrap();
    let p = project.to_str().unwrap();
    let kinds = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|l| format!("{}@{} {}", l["name"].as_str().unwrap(), l["version"].as_str().unwrap(), l["kinds"]))
            .collect()
    };
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", "--json", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("atlas: by kind: 2 runtime, 1 dev"), "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let mut want = vec![
        format!("crate+fnv@{fnv_version} [\"dev\"]"),
        "crate+itoa@1.10.0 [\"runtime\"]".to_owned(),
        "crate+itoa@1.9.0 [\"runtime\"]".to_owned(),
    ];
    want.sort();
    assert_eq!(kinds(&v["libraries"]), want, "{v}");
    assert_eq!(v["left_out"], serde_json::json!([]), "{v}");

    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--only", "runtime", "--json", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["left_out"],
        serde_json::json!([{
            "package": format!("crate:fnv@{fnv_version}"),
            "kinds": ["dev"],
            "lockfile": "Cargo.lock",
            "reason": "--only runtime leaves dev out",
        }]),
        "{v}"
    );
    assert!(
        r.stderr.contains(&format!(
            "atlas: left out crate:fnv@{fnv_version} (dev, Cargo.lock): --only runtime leaves dev out"
        )),
        "{}",
        r.stderr
    );
    assert_eq!(set(&project), ["crate+itoa@1.10.0", "crate+itoa@1.9.0"]);
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(project.join(".atlas/libraries.json")).unwrap()).unwrap();
    assert_eq!(file["only"], serde_json::json!(["runtime"]), "{file}");
    let r = run(atlas(&h, t.path()).args(["doctor", "--json", "--project", p]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let project_checks: Vec<&serde_json::Value> =
        v["checks"].as_array().unwrap().iter().filter(|c| c["check"] == "project").collect();
    assert!(project_checks.len() == 1 && project_checks[0]["status"] == "ok", "{project_checks:?}");

    let r = run(atlas(&h, t.path()).args(["sync", "--only", "tests", p]));
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("\"tests\" is not a kind of dependency"), "{}", r.stderr);
}

/// requirements.txt installs the project itself with an extra (`-e .[full]`): the
/// extra's dependencies come from the project's pyproject.toml, at the version pinned
/// there, and are served; one nothing pins is named as staying unpinned.
#[test]
fn an_editable_install_of_the_project_with_an_extra_serves_the_extras_dependencies() {
    let t = tempfile::tempdir().unwrap();
    let sdist = tar_gz(&[
        ("tiny_units-0.3.1/README.md", "# tiny-units\n\nConverts between metric and imperial units.\n"),
        ("tiny_units-0.3.1/tiny_units/__init__.py", "def to_inches(cm):\n    return cm / 2.54\n"),
    ]);
    let index = atlas_e2e::registry::simple_index("tiny-units", vec![("tiny_units-0.3.1.tar.gz".into(), sdist, false)]);
    let project = dir(t.path().join("app"));
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = []\n[project.optional-dependencies]\n\
         full = [\"tiny-units==0.3.1\", \"loose-thing>=1\"]\ntest = [\"pytest\"]\n",
    )
    .unwrap();
    std::fs::write(project.join("requirements.txt"), "-e .[full]\n").unwrap();
    let h = crate::distribution::home(&t.path().join("h"));
    let r = run(atlas(&h, t.path())
        .env("PIP_INDEX_URL", index.url("/simple/"))
        .args(["sync", "--keyword-only", "--json"])
        .arg(&project));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("pypi:tiny-units@0.3.1: searchable by keyword"), "{}", r.stderr);
    assert_eq!(set(&project), ["pypi+tiny-units@0.3.1"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["libraries"][0]["kinds"], serde_json::json!(["runtime"]), "{v}");
    assert_eq!(v["libraries"][0]["lockfile"], "pyproject.toml", "{v}");
    let skipped: Vec<&str> = v["skipped"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].contains("loose-thing (from the extra full of pyproject.toml) stays unpinned"), "{skipped:?}");
    assert!(!r.stderr.contains("pytest"), "an extra not named is not read: {}", r.stderr);
}

/// A facade crate whose `src/lib.rs` re-exports another (`pub use inner::*;`, as clap
/// re-exports clap_builder): `sync` serves the inner crate at the version Cargo.lock
/// pins for the facade, says so, marks it with the facade's kinds and
/// `reexported:facade`, and a symbol defined only in the inner crate is found by a
/// search over the project. A crate the facade only uses privately is not served, and
/// `--only` that leaves the facade out leaves the crate it re-exports out too.
#[test]
fn a_facades_re_exported_crate_is_served_beside_it_and_its_symbols_are_found_in_the_project() {
    let t = tempfile::tempdir().unwrap();
    let krate = |name: &str, lib: &str| {
        tar_gz(&[
            (&format!("{name}-1.0.0/Cargo.toml"), &format!("[package]\nname = \"{name}\"\nversion = \"1.0.0\"\n")),
            (&format!("{name}-1.0.0/src/lib.rs"), lib),
        ])
    };
    let facade = krate("facade", "//! The facade.\n#[doc(inline)]\npub use inner::*;\nuse private_dep::Helper;\n");
    let inner = krate("inner", "/// Defined only here.\npub fn zebra_stripes_only_in_inner() -> u32 { 7 }\n");
    let private = krate("private_dep", "pub struct Helper;\n");
    let entry = |n: &str, b: &[u8], deps: &str| {
        format!(
            "[[package]]\nname = \"{n}\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"{}\"\n{deps}\n",
            atlas_runtime::hash::sha256_bytes(b)
        )
    };
    let lock = format!(
        "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\"facade\"]\n\n{}{}{}",
        entry("facade", &facade, "dependencies = [\n \"inner\",\n \"private_dep 1.0.0\",\n]\n"),
        entry("inner", &inner, ""),
        entry("private_dep", &private, "")
    );
    let registry = sparse_registry(
        vec![
            Published::real("facade", "1.0.0", facade),
            Published::real("inner", "1.0.0", inner),
            Published::real("private_dep", "1.0.0", private),
        ],
        |_, b| b,
    );
    let cargo = cargo_home(t.path(), &registry);
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(project.join("Cargo.lock"), lock).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dev-dependencies]\nfacade = \"1\"\n",
    )
    .unwrap();
    let p = project.to_str().unwrap();
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", "--json", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("atlas: serving crate:inner@1.0.0, re-exported by crate:facade@1.0.0"), "{}", r.stderr);
    assert!(r.stderr.contains("crate:inner@1.0.0: searchable by keyword"), "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["reexported"],
        serde_json::json!([{"package": "crate:inner@1.0.0", "by": "crate:facade@1.0.0", "kinds": ["dev", "reexported:facade"]}]),
        "{v}"
    );
    assert_eq!(set(&project), ["crate+facade@1.0.0", "crate+inner@1.0.0"], "never the private dependency");
    // The re-exported crate goes with its facade: `--only runtime` leaves both out.
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--only", "runtime", "--json", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["reexported"], serde_json::json!([]), "{v}");
    assert!(set(&project).is_empty(), "{:?}", set(&project));
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(set(&project), ["crate+facade@1.0.0", "crate+inner@1.0.0"], "already installed, still followed");

    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let r = tokio::time::timeout(
            Duration::from_secs(60),
            crate::mcp::call(&c, "find_symbol", serde_json::json!({"name": "zebra_stripes_only_in_inner"})),
        )
        .await
        .unwrap_or_else(|_| panic!("find_symbol got no answer: {}", crate::mcp::read(&log)));
        let (_, v) = crate::mcp::ok(r);
        let found: Vec<&str> =
            v["definitions"].as_array().unwrap().iter().map(|d| d["library"].as_str().unwrap()).collect();
        assert_eq!(found, ["crate:inner@1.0.0"], "{v}");
        c.cancel().await.unwrap();
    });
}

/// `atlas add NAME --project DIR` puts a package beside what the lockfiles pin, marked
/// `added`: a running `serve rag --project` follows at once, a later `sync` keeps it,
/// and doctor finds the set and the lockfiles in agreement.
#[test]
fn a_package_added_to_a_project_is_served_by_its_running_server_and_kept_by_the_next_sync() {
    let t = tempfile::tempdir().unwrap();
    let Some((_registry, cargo, lock, fnv_version)) = two_itoas_and_fnv(t.path()) else { return };
    let h = crate::distribution::home(&t.path().join("h"));
    let project = dir(t.path().join("app"));
    std::fs::write(project.join("Cargo.lock"), &lock).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
    )
    .unwrap();
    let p = project.to_str().unwrap();
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    let fnv = format!("crate+fnv@{fnv_version}");
    assert!(!set(&project).contains(&fnv));

    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rag.log");
    let mut cmd = crate::mcp::atlas(&["serve", "rag", "--project", p], &log);
    cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    let fs_log = logs.path().join("fs.log");
    let mut fs_cmd = crate::mcp::atlas(&["serve", "fs", "--project", p], &fs_log);
    fs_cmd.env("ATLAS_HOME", &h).env("XDG_CONFIG_HOME", h.join("config")).env_remove("ATLAS_BUNDLE");
    crate::mcp::rt().block_on(async {
        let c = rmcp::ServiceExt::serve((), crate::mcp::child_transport(cmd, &log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&log)));
        let fs = rmcp::ServiceExt::serve((), crate::mcp::child_transport(fs_cmd, &fs_log))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", crate::mcp::read(&fs_log)));
        let libraries = async || {
            let (_, v) = crate::mcp::ok(crate::mcp::call(&c, "list_libraries", serde_json::json!({})).await);
            v["libraries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["library"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert!(!libraries().await.iter().any(|l| l.starts_with("crate:fnv")));
        let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args([
            "add",
            "--keyword-only",
            "--project",
            p,
            &format!("crate:fnv@{fnv_version}"),
        ]));
        assert_eq!(r.code, Some(0), "{r:?}");
        assert!(r.stderr.contains(&format!("atlas: crate:fnv@{fnv_version} is in the set of {p}")), "{}", r.stderr);
        assert!(r.stdout.contains("--project"), "the project's editor config: {}", r.stdout);
        let want = format!("crate:fnv@{fnv_version}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !libraries().await.contains(&want) {
            assert!(Instant::now() < deadline, "the server never followed the set: {}", crate::mcp::read(&log));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The fs server follows too: the added library's files are read by its name.
        let path = format!("crate:fnv@{fnv_version}/fnv/lib.rs");
        loop {
            let r = crate::mcp::call(&fs, "read_file", serde_json::json!({"path": path})).await;
            if r.is_error != Some(true) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the fs server never followed the set: {r:?} {}",
                crate::mcp::read(&fs_log)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        c.cancel().await.unwrap();
        fs.cancel().await.unwrap();
    });
    for l in [&log, &fs_log] {
        let gained = crate::mcp::read(l).matches("which the project's set gained").count();
        assert_eq!(gained, 1, "the one library added is opened once: {}", crate::mcp::read(l));
    }
    let r = run(atlas(&h, t.path()).env("CARGO_HOME", &cargo).args(["sync", "--keyword-only", p]));
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(set(&project).contains(&fnv), "{:?}", set(&project));
    let file = std::fs::read_to_string(project.join(".atlas/libraries.json")).unwrap();
    assert!(file.contains("\"added\""), "{file}");
    let r = run(atlas(&h, t.path()).args(["doctor", "--json", "--project", p]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let checks: Vec<&serde_json::Value> =
        v["checks"].as_array().unwrap().iter().filter(|c| c["check"] == "project").collect();
    assert!(checks.len() == 1 && checks[0]["status"] == "ok", "{checks:?}");
}
