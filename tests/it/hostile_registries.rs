//! Hardening, round 4: registry credentials. One place decides which credential goes
//! with which URL (`atlas_dist::http::Credential`, bound to the origin it was configured
//! for when the registry is read); these tests run the real `atlas-pipeline` against
//! registries on 127.0.0.1 that record every request, and check that no credential
//! reaches a host, a port or a registry it was not given for, and that none is printed.

use std::path::Path;

use atlas_e2e::http::{Response, Server};
use atlas_e2e::registry::{Published, Seen, cached_crate, cargo_home, recording, tar_gz};
use atlas_e2e::{pipeline, run, skip};

fn project(dir: &Path, spec: &str) -> std::path::PathBuf {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("pipeline.yaml"),
        format!("name: dep\nsources:\n  pkg:\n    kind: package\n    spec: \"{spec}\"\n"),
    )
    .unwrap();
    work
}

/// Item 1: a private index that lists its files on another host (a proxy that does
/// not rewrite upstream file URLs) gets its credentials; the file host never does.
#[test]
fn pypi_index_credentials_never_reach_the_host_its_files_are_on() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let sdist = tar_gz(&[
        ("tiny_units-0.3.1/README.md", "# tiny-units\n\nConverts between metric and imperial units.\n"),
        ("tiny_units-0.3.1/tiny_units/__init__.py", "def to_inches(cm):\n    return cm / 2.54\n"),
    ]);
    let sha: String = {
        use sha2::Digest as _;
        sha2::Sha256::digest(&sdist).iter().map(|b| format!("{b:02x}")).collect()
    };
    let (index_seen, files_seen) = (Seen::default(), Seen::default());
    let files = recording(&files_seen, move |req| match req.path.as_str() {
        "/files/tiny_units-0.3.1.tar.gz" => Response::new(200, sdist.clone()),
        _ => Response::new(404, ""),
    });
    let file_url = files.url("/files/tiny_units-0.3.1.tar.gz");
    let basic =
        format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "ci:s3cret-index"));
    let want = basic.clone();
    let index = recording(&index_seen, move |req| {
        if req.header("authorization") != Some(want.as_str()) {
            return Response::new(401, "Unauthorized");
        }
        let page = serde_json::json!({"meta": {"api-version": "1.1"}, "name": "tiny-units", "files": [
            {"filename": "tiny_units-0.3.1.tar.gz", "url": file_url, "hashes": {"sha256": sha}, "yanked": false},
        ]});
        match req.path.as_str() {
            "/simple/tiny-units/" => {
                Response::new(200, page.to_string()).header("Content-Type", "application/vnd.pypi.simple.v1+json")
            }
            _ => Response::new(404, ""),
        }
    });
    let work = project(t.path(), "pypi:tiny-units@0.3.1");
    let r = run(pipeline()
        .current_dir(&work)
        .env("PIP_INDEX_URL", index.url("/simple/").replacen("http://", "http://ci:s3cret-index@", 1))
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_DEFAULT_INDEX")
        .arg("run"));
    assert_eq!(r.code, Some(0), "{r:?}");
    let (index_seen, files_seen) = (index_seen.lock().unwrap().clone(), files_seen.lock().unwrap().clone());
    assert!(index_seen.iter().all(|(_, a)| a.as_deref() == Some(basic.as_str())), "{index_seen:?}");
    assert_eq!(files_seen.len(), 1, "{files_seen:?}");
    assert_eq!(files_seen[0].1, None, "the index's credentials went to the file host");
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("s3cret-index"));
}

/// Item 2: an `.npmrc` token for `//127.0.0.1:<port without its last digit>/`, or for
/// `//127.0.0.1/` (port 80), is for another registry than the one on `<port>`, though
/// its text prefixes the registry's.
#[test]
fn an_npm_token_for_one_port_never_reaches_another_port() {
    if !crate::embed::model_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let tarball = tar_gz(&[
        ("package/package.json", "{\"name\": \"pad\", \"version\": \"1.0.0\", \"main\": \"index.js\"}"),
        ("package/index.js", "/** Pads on the left. */\nexport function padLeft(s, n) { return s.padStart(n); }\n"),
    ]);
    let seen = Seen::default();
    let (registry, _) = atlas_e2e::registry::npm_registry("pad", "1.0.0", tarball, false, &seen);
    let port = registry.addr.port().to_string();
    assert!(port.len() >= 3, "an ephemeral port has digits to spare: {port}");
    let work = project(t.path(), "npm:pad@1.0.0");
    std::fs::write(
        work.join(".npmrc"),
        format!(
            "registry={}\n//127.0.0.1:{}/:_authToken=s3cret-other-port\n//127.0.0.1/:_authToken=s3cret-default-port\n",
            registry.url("/npm/"),
            &port[..port.len() - 1],
        ),
    )
    .unwrap();
    let r = run(pipeline()
        .current_dir(&work)
        .env("NPM_CONFIG_USERCONFIG", t.path().join("no-user-npmrc"))
        .env_remove("NPM_CONFIG_REGISTRY")
        .arg("run"));
    assert_eq!(r.code, Some(0), "{r:?}");
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty() && seen.iter().all(|(_, a)| a.is_none()), "a token went to the wrong registry: {seen:?}");
}

/// Item 3: a `.cargo/config.toml` in the project (or above it) that names its mirror
/// `crates-io` does not get the user's crates.io token (`CARGO_REGISTRY_TOKEN`,
/// `credentials.toml`'s `[registry]`), even when the mirror asks for one; the mirror's
/// own token still goes to it.
#[test]
fn the_crates_io_token_never_reaches_a_registry_a_config_names_crates_io() {
    if !crate::embed::model_ready() {
        return;
    }
    let Some((version, file)) = cached_crate("itoa") else {
        return skip("no itoa .crate in the local cargo cache (build the workspace once)");
    };
    let t = tempfile::tempdir().unwrap();
    let seen = Seen::default();
    let registry = atlas_e2e::registry::private_sparse_registry(
        vec![Published::real("itoa", &version, std::fs::read(&file).unwrap())],
        "s3cret-mirror-token",
        &seen,
    );
    // cargo_home replaces crates.io with the source named "mirror".
    let home = cargo_home(t.path(), &registry);
    std::fs::write(home.join("credentials.toml"), "[registry]\ntoken = \"s3cret-crates-io-file\"\n").unwrap();
    let work = project(t.path(), &format!("crate:itoa@{version}"));
    std::fs::create_dir_all(work.join(".cargo")).unwrap();
    std::fs::write(
        work.join(".cargo/config.toml"),
        format!("[registries.crates-io]\nindex = \"sparse+{}\"\n", registry.url("/index/")),
    )
    .unwrap();
    let build = |mirror_token: Option<&str>| {
        let mut c = pipeline();
        c.current_dir(&work).env("CARGO_HOME", &home).env("CARGO_REGISTRY_TOKEN", "s3cret-crates-io-env").arg("run");
        match mirror_token {
            Some(tok) => c.env("CARGO_REGISTRIES_MIRROR_TOKEN", tok),
            None => c.env_remove("CARGO_REGISTRIES_MIRROR_TOKEN"),
        };
        run(&mut c)
    };
    let r = build(None);
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("requires a token; set CARGO_REGISTRIES_MIRROR_TOKEN"), "{}", r.stderr);
    let r = build(Some("s3cret-mirror-token"));
    assert_eq!(r.code, Some(0), "{r:?}");
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().any(|(p, _)| p.starts_with("/dl/")), "{seen:?}");
    assert!(
        seen.iter().all(|(_, a)| a.as_deref().is_none_or(|a| a == "s3cret-mirror-token")),
        "the crates.io token went to the mirror: {seen:?}"
    );
}

/// Item 15: a registry URL's `user:password` (an `.npmrc` registry, a cargo source) is
/// never printed, in the error a failed fetch gives.
#[test]
fn a_registry_urls_password_is_never_printed_in_an_error() {
    let t = tempfile::tempdir().unwrap();
    let gone = Server::start(|_| Response::new(404, "Not Found"));
    let npm = project(&t.path().join("npm"), "npm:pad@1.0.0");
    std::fs::write(
        npm.join(".npmrc"),
        format!("registry={}\n", gone.url("/npm/").replacen("://", "://u:s3cret-npm@", 1)),
    )
    .unwrap();
    let r = run(pipeline()
        .current_dir(&npm)
        .env("NPM_CONFIG_USERCONFIG", t.path().join("no-user-npmrc"))
        .env_remove("NPM_CONFIG_REGISTRY")
        .arg("run"));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("no package"), "{}", r.stderr);
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("s3cret-npm"), "{}", r.stderr);

    let cargo = project(&t.path().join("cargo"), "crate:itoa@1.0.0");
    let home = t.path().join("cargo-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"mirror\"\n[source.mirror]\nregistry = \"sparse+{}\"\n",
            gone.url("/index/").replacen("://", "://u:s3cret-cargo@", 1)
        ),
    )
    .unwrap();
    let r = run(pipeline().current_dir(&cargo).env("CARGO_HOME", &home).arg("run"));
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("s3cret-cargo"), "{}", r.stderr);
}
