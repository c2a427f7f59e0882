//! Regression tests for what an adversarial probe found (issue 11), each named after
//! the defect it pins, on the real binaries where the defect was seen through them.

use std::path::Path;

use atlas_e2e::http::{Response, Server};
use atlas_e2e::{pipeline, run};

use crate::crawl::{Crawl, crawl_params};

/// An llms.txt at the site root whose `##` group has no letter or digit made a page's
/// mirror key `/<url path>`: the crawler wrote the page there, and a 404 deleted the
/// file at that path. Now the group gets a `section-<hash>` folder, every key is
/// relative, and nothing outside the mirror is written or removed.
#[test]
fn hostile_llms_group_without_letters_cannot_write_or_delete_outside_the_mirror() {
    let victim = tempfile::tempdir().unwrap();
    let v2 = victim.path().display().to_string();
    std::fs::write(victim.path().join("delete_me.md"), "keep me").unwrap();
    let v3 = v2.clone();
    let server = Server::start(move |req| match req.path.as_str() {
        "/llms.txt" => Response::new(
            200,
            format!(
                "# Evil\n\n## !!!\n\n- [x]({v2}/pwned.md)\n- [y]({v2}/delete_me.md)\n\n## 🚀\n\n- [z](/docs/ok.md)\n"
            ),
        ),
        p if p == format!("{v3}/pwned.md") => Response::new(200, "# pwned\n"),
        "/docs/ok.md" => Response::new(200, "# Fine\n\nText.\n"),
        _ => Response::new(404, "not found"),
    });
    let c = Crawl::new(&server.url("/llms.txt"), "", &crawl_params(&[]));
    let r = c.run().success();
    assert!(!victim.path().join("pwned.md").exists(), "wrote outside the mirror:\n{}", r.stderr);
    assert_eq!(std::fs::read_to_string(victim.path().join("delete_me.md")).unwrap(), "keep me");
    let meta = c.meta();
    let keys: Vec<&String> = meta["pages"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3, "{meta:#}");
    for k in &keys {
        assert!(!k.starts_with('/') && k.starts_with("section-"), "{k}");
        assert!(atlas_runtime::safe_path::check(k).is_ok(), "{k}");
    }
    let pwned = keys.iter().find(|k| k.ends_with("/pwned.md")).unwrap();
    assert!(c.mirror().join(pwned).is_file());
}

/// A `crawl_meta.json` written by an older version may hold an absolute key. A page
/// that leaves llms.txt is removed from the mirror: that removal must never follow
/// such a key out of the mirror.
#[test]
fn absolute_key_in_an_old_crawl_meta_never_deletes_outside_the_mirror() {
    let victim = tempfile::tempdir().unwrap();
    let outside = victim.path().join("old.md");
    std::fs::write(&outside, "keep me").unwrap();
    let server = Server::start(|req| match req.path.as_str() {
        "/llms.txt" => Response::new(200, "# Site\n\n- [a](/docs/a.md)\n"),
        "/docs/a.md" => Response::new(200, "# A\n"),
        _ => Response::new(404, ""),
    });
    let c = Crawl::new(&server.url("/llms.txt"), "", &crawl_params(&[]));
    c.run().success();
    let meta_path = c.dir.path().join(".atlas/cache/sources/site/crawl_meta.json");
    let mut meta = c.meta();
    let mut page = meta["pages"]["docs/a.md"].clone();
    page["url"] = "http://gone.example/old".into();
    meta["pages"][outside.display().to_string()] = page;
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    c.run().success();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
}

/// robots.txt disallowing everything gave a zero-document build that failed in pack
/// with "building the HNSW index: I/O failed … unexpected error".
#[test]
fn robots_disallowing_everything_fails_the_crawl_with_one_clear_line() {
    let server = Server::start(|req| match req.path.as_str() {
        "/robots.txt" => Response::new(200, "User-agent: *\nDisallow: /\n"),
        "/docs/llms.txt" => Response::new(200, "# S\n\n- [a](a.md)\n- [b](b.md)\n"),
        _ => Response::new(200, "# page\n"),
    });
    let c = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(&[]));
    let r = run(pipeline().arg("-c").arg(&c.cfg).arg("run"));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.starts_with("error: "), "{last}");
    assert!(last.contains("0 of 2 listed pages could be mirrored") && last.contains("robots.txt"), "{last}");
    assert!(!last.contains("HNSW"), "{last}");
}

/// A crawl whose links all point at another host fetched nothing and still ended
/// with exit 0 and an empty chunk table. Now it fails and says how to allow the host;
/// with `allow_hosts` the pages are fetched.
#[test]
fn crawl_that_fetches_nothing_fails_and_allow_hosts_widens_it_explicitly() {
    let port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let p2 = port.clone();
    let server = Server::start(move |req| {
        let port = p2.load(std::sync::atomic::Ordering::SeqCst);
        match req.path.as_str() {
            "/docs/llms.txt" => Response::new(
                200,
                format!("# S\n\n- [a](http://localhost:{port}/docs/a.md)\n- [b](http://localhost:{port}/docs/b.md)\n"),
            ),
            "/docs/a.md" | "/docs/b.md" => Response::new(200, "# Page\n\nText.\n"),
            _ => Response::new(404, ""),
        }
    });
    port.store(server.addr.port(), std::sync::atomic::Ordering::SeqCst);
    let c = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(&[]));
    let r = c.run();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.contains("0 of 2 listed pages could be mirrored"), "{last}");
    assert!(last.contains("2 on another host") && last.contains("allow_hosts: [localhost]"), "{last}");

    let c = Crawl::new(&server.url("/docs/llms.txt"), "    allow_hosts: [localhost]\n", &crawl_params(&[]));
    c.run().success();
    assert_eq!(c.page("root/a.md")["status"], "fetched", "{:#}", c.meta());
    assert!(c.mirror().join("root/b.md").is_file());
}

/// More than `max_error_ratio` of the pages skipped (here by robots.txt) fails the
/// run, as failures already did.
#[test]
fn skipped_share_over_max_error_ratio_fails_the_crawl() {
    let server = Server::start(|req| match req.path.as_str() {
        "/robots.txt" => Response::new(200, "User-agent: *\nDisallow: /docs/private/\n"),
        "/docs/llms.txt" => Response::new(200, "# S\n\n- [a](a.md)\n- [b](private/b.md)\n- [c](private/c.md)\n"),
        _ => Response::new(200, "# page\n"),
    });
    let c = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(&[("max_error_ratio", "0.5")]));
    let r = c.run();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.contains("2 of 3 pages were skipped") && last.contains("robots.txt"), "{last}");
}

/// A local source that yields nothing fails the run in one line, before any stage runs.
#[test]
fn source_with_no_documents_fails_with_one_line() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("notes.txt"), "not markdown").unwrap();
    let cfg = atlas_e2e::write_config(work.path(), &site, "");
    let r = run(pipeline().arg("-c").arg(&cfg).arg("run"));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.contains("source site (local) yielded no documents") && last.contains("**/*.md"), "{last}");
}

/// A `.md` full of NUL bytes was indexed with the NULs; symlinks were skipped
/// without a word. Both are now skipped and reported.
#[test]
fn nul_files_and_symlinks_in_local_sources_are_skipped_and_reported() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    atlas_e2e::write_fixture_site(&site);
    std::fs::write(site.join("nul.md"), b"# Title\n\0\0\0\0\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(site.join("README.md"), site.join("link.md")).unwrap();
    let cfg = atlas_e2e::write_config(work.path(), &site, "");
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    assert!(r.stderr.contains("nul.md: binary (it holds NUL bytes)"), "{}", r.stderr);
    #[cfg(unix)]
    assert!(r.stderr.contains("link.md: a symlink (links are not followed)"), "{}", r.stderr);
    let chunks = atlas_runtime::chunk_table::read_file(&work.path().join(".atlas/build/chunks.parquet")).unwrap();
    assert!(chunks.iter().all(|c| !c.text.contains('\0') && !c.path.ends_with("nul.md")));
}

/// A 165 KB page of 5,000 nested `<table>`s aborted clean-gitbook (SIGABRT, stack
/// overflow); 20,000 levels aborted even on the main thread. Now the page is converted
/// down to a depth limit, kept as text below it, and reported.
#[test]
fn deeply_nested_html_tables_do_not_overflow_the_stack() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    atlas_e2e::write_fixture_site(&site);
    for (name, depth) in [("nested-5k.md", 5_000), ("nested-20k.md", 20_000)] {
        let page = format!(
            "# Deep\n\n{}innermost words{}\n\nAfter the table.\n",
            "<table><tr><td>".repeat(depth),
            "</td></tr></table>".repeat(depth)
        );
        std::fs::write(site.join(name), page).unwrap();
    }
    let cfg = atlas_e2e::write_config(work.path(), &site, "");
    let r = run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    assert!(r.stderr.contains("2 pages hold HTML nested too deep to convert, kept as plain text"), "{}", r.stderr);
    let mirror = work.path().join(".atlas/build/mirror/site");
    for name in ["nested-5k.md", "nested-20k.md"] {
        let text = std::fs::read_to_string(mirror.join(name)).unwrap();
        assert!(text.contains("innermost words") && text.contains("After the table."), "{name}");
    }
}

/// `stages.crawl.read_timeout_s: -1`, `1e300` or `.nan` panicked ("cannot convert
/// float seconds to Duration", exit 101) after creating `.atlas/cache`.
#[test]
fn negative_nan_and_huge_timeouts_are_config_errors_and_nothing_is_written() {
    for bad in ["-1", "1e300", ".nan", ".inf"] {
        check_config_error(
            &format!("stages:\n  crawl:\n    read_timeout_s: {bad}\n"),
            &["pipeline.yaml:", "stages.crawl.read_timeout_s", "must be a number from"],
        );
    }
    check_config_error("stages:\n  crawl:\n    max_error_ratio: 2\n", &["stages.crawl.max_error_ratio"]);
    check_config_error("stages:\n  embed:\n    batch_size: 100000\n", &["stages.embed.batch_size"]);
    check_config_error("stages:\n  embed:\n    window_tokens: 8\n", &["stages.embed.window_tokens"]);
    check_config_error("stages:\n  bm25:\n    boosts:\n      text: .nan\n", &["stages.bm25.text"]);
}

/// A bundle `name: "../../escaped"` was accepted and failed only at `--archive`, after
/// a full run.
#[test]
fn bundle_name_that_is_a_path_is_a_config_error() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    atlas_e2e::write_fixture_site(&site);
    let cfg = work.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: \"../../escaped\"\nsources:\n  s:\n    kind: local\n    path: {}\n", site.display()),
    )
    .unwrap();
    expect_config_error(work.path(), &cfg, &["pipeline.yaml:1:", "name \"../../escaped\""]);
}

/// Runs `atlas-pipeline run` on the fixture site with `stages` appended to the
/// config, and checks the config-error contract: exit 2, one line, nothing written.
fn check_config_error(stages: &str, needles: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    atlas_e2e::write_fixture_site(&site);
    let cfg = atlas_e2e::write_config(work.path(), &site, stages);
    expect_config_error(work.path(), &cfg, needles);
}

fn expect_config_error(work: &Path, cfg: &Path, needles: &[&str]) {
    let r = run(pipeline().current_dir(work).arg("-c").arg(cfg).arg("run"));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} in {}", lines[0]);
    }
    assert!(!work.join(".atlas").exists(), "nothing may be written");
}

/// `atlas-pipeline status` waited 30 s on a running build's lock and then failed.
#[test]
fn status_says_at_once_that_a_run_is_in_progress() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    atlas_e2e::write_fixture_site(&site);
    let cfg = atlas_e2e::write_config(work.path(), &site, "");
    run(pipeline().arg("-c").arg(&cfg).args(["run", "--until", "chunk"])).success();
    // Hold the cache lock as a running build does.
    let cache =
        atlas_cache::Cache::open(&work.path().join(".atlas/cache"), atlas_cache::LockWait::NoWait, |_| {}).unwrap();
    let t = std::time::Instant::now();
    let r = run(pipeline().arg("-c").arg(&cfg).arg("status"));
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "status waited {:?}", t.elapsed());
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("a run is in progress (pid"), "{}", r.stderr);
    drop(cache);
    run(pipeline().arg("-c").arg(&cfg).arg("status")).success();
}
