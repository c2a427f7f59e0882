//! The llms.txt crawler against a real HTTP server on 127.0.0.1, driven through the
//! real `atlas-pipeline` binary.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atlas_e2e::http::{Body, Request, Response, Server, serve_site};
use atlas_e2e::{pipeline, run};

/// Crawl params that keep the tests fast; `overrides` replace defaults by key.
pub(crate) fn crawl_params(overrides: &[(&str, &str)]) -> String {
    let mut p: Vec<(&str, String)> = vec![
        ("delay_ms", "[0, 0]".into()),
        ("read_timeout_s", "1.0".into()),
        ("total_timeout_s", "2.0".into()),
        ("backoff_base_ms", "10".into()),
        ("backoff_max_ms", "50".into()),
        ("retry_after_cap_s", "0.3".into()),
        ("max_retries", "2".into()),
        ("max_error_ratio", "1.0".into()),
    ];
    for (k, v) in overrides {
        match p.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = (*v).to_owned(),
            None => p.push((k, (*v).to_owned())),
        }
    }
    let mut s = String::from("stages:\n  crawl:\n");
    for (k, v) in p {
        s.push_str(&format!("    {k}: {v}\n"));
    }
    s
}

pub(crate) struct Crawl {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) cfg: PathBuf,
}

impl Crawl {
    pub(crate) fn new(llms_url: &str, source_extra: &str, params: &str) -> Crawl {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("pipeline.yaml");
        std::fs::write(
            &cfg,
            format!("name: t\nsources:\n  site:\n    kind: llms-txt\n    url: {llms_url}\n{source_extra}{params}"),
        )
        .unwrap();
        Crawl { dir, cfg }
    }
    pub(crate) fn run(&self) -> atlas_e2e::Run {
        run(pipeline().arg("-c").arg(&self.cfg).args(["run", "--until", "chunk"]))
    }
    pub(crate) fn meta(&self) -> serde_json::Value {
        let p = self.dir.path().join(".atlas/cache/sources/site/crawl_meta.json");
        serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
    }
    pub(crate) fn page(&self, rel: &str) -> serde_json::Value {
        self.meta()["pages"][rel].clone()
    }
    pub(crate) fn mirror(&self) -> PathBuf {
        self.dir.path().join(".atlas/cache/sources/site/markdown")
    }
}

type Special = Box<dyn Fn(&Request, usize) -> Option<Response> + Send + Sync>;

/// A three-page site (`/docs/a.md`, `/docs/b.md`, `/docs/c.md`) listed with relative,
/// root-relative and absolute links. `special(req, nth)` may override any answer;
/// `nth` counts earlier requests for the same path.
fn fixture(special: Special) -> Server {
    let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let port: Arc<AtomicUsize> = Arc::default();
    let port2 = port.clone();
    let server = Server::start(move |req| {
        let nth = {
            let mut h = hits.lock().unwrap();
            let n = h.entry(req.path.clone()).or_default();
            *n += 1;
            *n - 1
        };
        if let Some(r) = special(req, nth) {
            return r;
        }
        let port = port2.load(Ordering::SeqCst);
        match req.path.as_str() {
            "/docs/llms.txt" => Response::new(
                200,
                format!(
                    "# Fixture\n\n- [Alpha](a.md): the first page\n- [Beta \\(2.x\\)](/docs/b.md)\n\n## Guides <a id=\"guides\"></a>\n\n- [Gamma](http://127.0.0.1:{port}/docs/c.md)\n"
                ),
            ),
            "/docs/a.md" => Response::new(200, "# Alpha\n\n## Intro\n\nAlpha text.\n").header("ETag", "\"a1\""),
            "/docs/b.md" => {
                Response::new(200, "# Beta\n\nBeta text.\n").header("Last-Modified", "Mon, 02 Nov 2026 10:00:00 GMT")
            }
            "/docs/c.md" => Response::new(200, "# Gamma\n\n{% hint style=\"info\" %}\nGamma hint.\n{% endhint %}\n"),
            _ => Response::new(404, "not found"),
        }
    });
    port.store(server.addr.port() as usize, Ordering::SeqCst);
    server
}

fn fixture_crawl(special: Special, overrides: &[(&str, &str)]) -> (Server, Crawl) {
    let server = fixture(special);
    let crawl = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(overrides));
    (server, crawl)
}

#[test]
fn crawls_every_listed_page_then_revalidates_with_304s() {
    let (server, c) = fixture_crawl(
        Box::new(|req, _| {
            // Conditional GETs: a matching validator gets a 304.
            let a = req.path == "/docs/a.md" && req.header("if-none-match") == Some("\"a1\"");
            let b = req.path == "/docs/b.md" && req.header("if-modified-since").is_some();
            (a || b).then(|| Response::new(304, ""))
        }),
        &[],
    );
    let first = c.run().success();
    let meta = c.meta();
    assert_eq!(meta["pages"].as_object().unwrap().len(), 3, "{meta:#}");
    assert_eq!(c.page("root/a.md")["status"], "fetched");
    assert_eq!(c.page("root/a.md")["etag"], "\"a1\"");
    assert_eq!(c.page("root/b.md")["title"], "Beta (2.x)");
    assert_eq!(c.page("guides/c.md")["section"], "guides");
    assert_eq!(c.page("root/a.md")["url"], server.url("/docs/a"));
    assert!(c.mirror().join("guides/c.md").is_file());
    assert_eq!(meta["sections"]["guides"]["fetched"], 1);
    assert_eq!(first.stage("chunk").0, "ran");
    let ua = server.all().len();
    assert!(ua >= 4);

    let second = c.run().success();
    assert_eq!(c.page("root/a.md")["status"], "not-modified");
    assert_eq!(c.page("root/b.md")["status"], "not-modified");
    assert_eq!(server.hits("/docs/a.md"), [200, 304]);
    for stage in ["clean-gitbook", "chunk"] {
        assert_eq!(second.stage(stage).0, "cached", "{stage}:\n{}", second.stderr);
    }
}

/// c.md has no validators, so every run downloads it again; the same bytes must keep
/// their first fetch time, or the source's `fetched_at` (and the bundle) would change
/// on every run.
#[test]
fn slow_refetched_unchanged_page_keeps_its_fetch_time_and_the_crawl_stays_cached() {
    let (server, c) = fixture_crawl(Box::new(|_, _| None), &[]);
    c.run().success();
    let first = c.page("guides/c.md")["fetched_at"].clone();
    assert!(first.as_str().is_some_and(|t| t.ends_with('Z')), "{first}");
    std::thread::sleep(Duration::from_millis(1100));
    let second = c.run().success();
    assert_eq!(server.hits("/docs/c.md"), [200, 200]);
    assert_eq!(c.page("guides/c.md")["fetched_at"], first);
    assert_eq!(second.stage("crawl").0, "cached", "{}", second.stderr);
}

#[test]
fn user_agent_names_atlas_version_and_contact() {
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let seen2 = seen.clone();
    let (_server, c) = fixture_crawl(
        Box::new(move |req, _| {
            if req.path == "/docs/a.md" {
                *seen2.lock().unwrap() = req.header("user-agent").map(str::to_owned);
            }
            None
        }),
        &[],
    );
    c.run().success();
    let ua = seen.lock().unwrap().clone().unwrap();
    assert!(ua.starts_with("atlas/") && ua.contains("(+https://"), "{ua}");
}

#[test]
fn retry_after_3600_is_capped() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, nth| {
            (req.path == "/docs/a.md" && nth == 0)
                .then(|| Response::new(429, "slow down").header("Retry-After", "3600"))
        }),
        &[],
    );
    c.run().success();
    let a = c.page("root/a.md");
    assert_eq!(a["status"], "fetched");
    assert!(a["retries"][0].as_str().unwrap().contains("Retry-After 3600 capped to 300ms"), "{a:#}");
}

#[test]
fn retry_after_in_the_past_falls_back_to_backoff() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, nth| {
            (req.path == "/docs/a.md" && nth == 0)
                .then(|| Response::new(503, "").header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"))
        }),
        &[],
    );
    c.run().success();
    let a = c.page("root/a.md");
    assert_eq!(a["status"], "fetched");
    assert!(a["retries"][0].as_str().unwrap().contains("is in the past; backoff"), "{a:#}");
}

#[test]
fn garbage_retry_after_falls_back_to_backoff() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, nth| {
            (req.path == "/docs/a.md" && nth == 0).then(|| Response::new(429, "").header("Retry-After", "soon-ish"))
        }),
        &[],
    );
    c.run().success();
    let a = c.page("root/a.md");
    assert_eq!(a["status"], "fetched");
    assert!(a["retries"][0].as_str().unwrap().contains("neither seconds nor an HTTP date"), "{a:#}");
}

#[test]
fn server_error_then_success() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, nth| (req.path == "/docs/b.md" && nth == 0).then(|| Response::new(500, "oops"))),
        &[],
    );
    c.run().success();
    let b = c.page("root/b.md");
    assert_eq!(b["status"], "fetched");
    assert!(b["retries"][0].as_str().unwrap().contains("HTTP 500"), "{b:#}");
}

fn failed_with(c: &Crawl, rel: &str, needle: &str) {
    let p = c.page(rel);
    assert_eq!(p["status"], "error", "{p:#}");
    let why = p["error"].as_str().unwrap().to_lowercase();
    assert!(why.contains(needle), "{rel}: {needle:?} in {why:?}");
    let failures = c.meta()["failures"].to_string();
    let url_path = format!("/docs/{}", rel.rsplit('/').next().unwrap_or(rel).trim_end_matches(".md"));
    assert!(failures.contains(&url_path), "listed in failures: {failures}");
}

#[test]
fn slow_drip_hits_the_total_timeout() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| {
            (req.path == "/docs/a.md").then(|| Response {
                status: 200,
                headers: vec![],
                body: Body::Drip(vec![b'x'; 200], Duration::from_millis(40)),
            })
        }),
        &[("max_retries", "0")],
    );
    c.run().success();
    failed_with(&c, "root/a.md", "timed out");
}

#[test]
fn slow_a_stalled_response_times_out() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| {
            (req.path == "/docs/a.md").then(|| Response {
                status: 200,
                headers: vec![],
                body: Body::Stall(Duration::from_secs(5)),
            })
        }),
        &[("max_retries", "0")],
    );
    c.run().success();
    failed_with(&c, "root/a.md", "timed out");
}

#[test]
fn an_oversized_body_is_cut_off_and_reported() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| (req.path == "/docs/a.md").then(|| Response::new(200, vec![b'x'; 5000]))),
        &[("max_body_bytes", "1000")],
    );
    c.run().success();
    failed_with(&c, "root/a.md", "over the 1000-byte cap");
}

#[test]
fn a_redirect_loop_is_reported() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| match req.path.as_str() {
            "/docs/a.md" => Some(Response::new(302, "").header("Location", "/docs/a2.md")),
            "/docs/a2.md" => Some(Response::new(302, "").header("Location", "/docs/a.md")),
            _ => None,
        }),
        &[],
    );
    c.run().success();
    failed_with(&c, "root/a.md", "redirect");
}

#[test]
fn an_off_site_redirect_is_refused() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| {
            (req.path == "/docs/a.md")
                .then(|| Response::new(301, "").header("Location", "http://127.0.0.2:9/elsewhere.md"))
        }),
        &[],
    );
    c.run().success();
    failed_with(&c, "root/a.md", "off-site redirect to http://127.0.0.2:9/elsewhere.md");
}

#[test]
fn robots_5xx_disallows_everything() {
    let (server, c) =
        fixture_crawl(Box::new(|req, _| (req.path == "/robots.txt").then(|| Response::new(503, "down"))), &[]);
    // Nothing can be mirrored, so the run fails, saying why.
    let r = c.run();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(
        last.contains("0 of 3 listed pages could be mirrored") && last.contains("robots.txt unavailable"),
        "{last}"
    );
    for rel in ["root/a.md", "root/b.md", "guides/c.md"] {
        let p = c.page(rel);
        assert_eq!(p["status"], "skipped", "{p:#}");
        assert!(p["error"].as_str().unwrap().contains("robots.txt unavailable"));
    }
    assert!(server.hits("/docs/a.md").is_empty(), "no page is fetched");
}

#[test]
fn robots_404_allows_everything_and_rules_are_honoured() {
    let (_s, c) = fixture_crawl(Box::new(|_, _| None), &[]);
    c.run().success();
    assert_eq!(c.page("root/a.md")["status"], "fetched");
    let (server, c) = fixture_crawl(
        Box::new(|req, _| {
            (req.path == "/robots.txt").then(|| {
                Response::new(200, "User-agent: *\nDisallow: /docs/b\n\nUser-agent: atlas\nDisallow: /docs/c.md\n")
            })
        }),
        &[],
    );
    c.run().success();
    assert_eq!(c.page("root/a.md")["status"], "fetched");
    assert_eq!(c.page("root/b.md")["status"], "fetched", "the atlas group replaces the * group");
    assert_eq!(c.page("guides/c.md")["status"], "skipped");
    assert!(server.hits("/docs/c.md").is_empty());
}

#[test]
fn a_malformed_llms_txt_gets_a_clear_error() {
    for (body, needle) in [
        ("<!DOCTYPE html><html><body>Sign in</body></html>", "answered an HTML page"),
        ("Just some text\nwith no links at all\n", "no page links found"),
    ] {
        let body = body.to_owned();
        let (_s, c) = fixture_crawl(
            Box::new(move |req, _| (req.path == "/docs/llms.txt").then(|| Response::new(200, body.clone()))),
            &[],
        );
        let r = c.run();
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        let last = r.stderr.lines().last().unwrap();
        assert!(last.starts_with("error: ") && last.contains("llms.txt") && last.contains(needle), "{last}");
    }
}

#[test]
fn pages_removed_upstream_leave_the_mirror() {
    let gone = Arc::new(AtomicBool::new(false));
    let gone2 = gone.clone();
    let (_s, c) = fixture_crawl(
        Box::new(move |req, _| {
            let g = gone2.load(Ordering::SeqCst);
            match req.path.as_str() {
                "/docs/b.md" if g => Some(Response::new(410, "gone")),
                // The second llms.txt no longer lists c.md.
                "/docs/llms.txt" if g => Some(Response::new(200, "# Fixture\n\n- [Alpha](a.md)\n- [Beta](b.md)\n")),
                _ => None,
            }
        }),
        &[],
    );
    c.run().success();
    assert!(c.mirror().join("root/b.md").is_file() && c.mirror().join("guides/c.md").is_file());
    gone.store(true, Ordering::SeqCst);
    let r = c.run().success();
    assert!(!c.mirror().join("root/b.md").exists());
    assert!(!c.mirror().join("guides/c.md").exists());
    assert_eq!(c.page("root/b.md")["status"], "removed");
    assert_eq!(c.page("root/b.md")["error"], "HTTP 410 upstream");
    assert_eq!(c.page("guides/c.md")["error"], "no longer listed in llms.txt");
    assert!(r.stderr.contains("failed"), "removals are reported:\n{}", r.stderr);
    let chunks = atlas_runtime::chunk_table::read_file(&c.dir.path().join(".atlas/build/chunks.parquet")).unwrap();
    assert!(
        chunks.iter().all(|ch| ch.path == "site/root/a.md"),
        "{:?}",
        chunks.iter().map(|c| &c.path).collect::<Vec<_>>()
    );
}

#[test]
fn too_many_errors_fail_the_run_and_list_each_failure() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| (req.path == "/docs/b.md").then(|| Response::new(500, "always"))),
        &[("max_error_ratio", "0.05"), ("max_retries", "1")],
    );
    let r = c.run();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap();
    assert!(last.contains("1 of 3 pages failed") && last.contains("/docs/b") && last.contains("HTTP 500"), "{last}");
}

#[test]
fn sections_and_max_pages_are_honoured() {
    let server = fixture(Box::new(|_, _| None));
    let url = server.url("/docs/llms.txt");
    let params = crawl_params(&[]);
    let c = Crawl::new(&url, "    sections: [Guides]\n", &params);
    c.run().success();
    assert_eq!(c.meta()["pages"].as_object().unwrap().keys().collect::<Vec<_>>(), ["guides/c.md"]);

    let c = Crawl::new(&url, "    max_pages: 2\n", &params);
    c.run().success();
    assert_eq!(c.meta()["pages"].as_object().unwrap().len(), 2);

    let c = Crawl::new(&url, "    sections: [nope]\n", &params);
    let r = c.run();
    assert_eq!(r.code, Some(1));
    let last = r.stderr.lines().last().unwrap();
    assert!(
        last.contains("unknown section \"nope\"") && last.contains("available: ") && last.contains("guides"),
        "{last}"
    );
}

#[test]
fn html_pages_are_converted_and_offsite_links_reported() {
    let (server, c) = fixture_crawl(
        Box::new(|req, _| match req.path.as_str() {
            "/docs/llms.txt" => {
                Some(Response::new(200, "# F\n\n- [Page](page)\n- [Elsewhere](https://other.example/x.md)\n"))
            }
            "/docs/page" => Some(
                Response::new(
                    200,
                    "<html><body><nav>menu</nav><main><h1>Page</h1><p>Body <b>text</b>.</p></main></body></html>",
                )
                .header("Content-Type", "text/html"),
            ),
            _ => None,
        }),
        &[],
    );
    let r = c.run().success();
    assert_eq!(c.page("root/page.md")["from_html"], true);
    assert_eq!(std::fs::read_to_string(c.mirror().join("root/page.md")).unwrap(), "# Page\n\nBody **text**.\n");
    assert!(r.stderr.contains("not fetched (other host): Elsewhere <https://other.example/x.md>"), "{}", r.stderr);
    assert_eq!(c.meta()["offsite"][0][1], "https://other.example/x.md");
    assert!(server.all().iter().all(|(p, _, _)| !p.contains("x.md")));
}

#[test]
fn offline_uses_the_last_mirror_without_the_network() {
    let (server, c) = fixture_crawl(Box::new(|_, _| None), &[]);
    let r = run(pipeline().arg("-c").arg(&c.cfg).args(["run", "--until", "chunk", "--offline"]));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("has no mirror yet") && r.stderr.contains("without --offline"), "{}", r.stderr);
    c.run().success();
    let before = server.all().len();
    let r = run(pipeline().arg("-c").arg(&c.cfg).args(["run", "--until", "chunk", "--offline"])).success();
    assert_eq!(server.all().len(), before, "no request offline");
    assert_eq!(r.stage("chunk").0, "cached");
}

#[test]
fn slow_kill_mid_crawl_then_resume_refetches_nothing_stored() {
    let n = 24;
    let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let hits2 = hits.clone();
    let server = Server::start(move |req| {
        *hits2.lock().unwrap().entry(req.path.clone()).or_default() += 1;
        if req.path == "/llms.txt" {
            let list: String = (0..n).map(|i| format!("- [P{i}](p{i}.md)\n")).collect();
            return Response::new(200, format!("# Slow\n\n{list}"));
        }
        std::thread::sleep(Duration::from_millis(150));
        Response::new(200, format!("# {}\n\ntext\n", req.path))
    });
    let c = Crawl::new(&server.url("/llms.txt"), "", &crawl_params(&[("max_concurrent", "1")]));
    let mut child = pipeline()
        .arg("-c")
        .arg(&c.cfg)
        .args(["run", "--until", "chunk"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = c.dir.path().join(".atlas/cache/sources/site/journal.jsonl");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&journal).map_or(0, |j| j.lines().count()) < 4 {
        assert!(std::time::Instant::now() < deadline, "the crawl never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stored: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["rel"].as_str().unwrap().to_owned())
        .collect();
    assert!(stored.len() >= 4 && stored.len() < n, "killed mid-crawl: {}", stored.len());

    c.run().success();
    let hits = hits.lock().unwrap();
    for rel in &stored {
        let url_path = format!("/{}", rel.trim_start_matches("root/"));
        assert_eq!(hits.get(&url_path), Some(&1), "{rel} was fetched again after the resume");
    }
    assert_eq!(c.meta()["pages"].as_object().unwrap().len(), n);
    assert!(!journal.exists(), "the journal is folded into crawl_meta.json");
}

#[test]
fn slow_real_sites_over_real_http() {
    let Some(corpora) = std::env::var_os("ATLAS_CORPORA") else {
        atlas_e2e::skip("ATLAS_CORPORA is unset (set it to ../shared/corpora)");
        return;
    };
    let corpora = PathBuf::from(corpora);
    for (site, base, prefix, pages) in [
        ("devtron-docs/site", "https://docs.devtron.ai", "", 199),
        ("aep-sdks-docs/site", "https://aep-sdks.gitbook.io/docs", "/docs", 184),
    ] {
        let server = serve_site(&corpora, site, base, prefix);
        let c = Crawl::new(&server.url(&format!("{prefix}/llms.txt")), "", &crawl_params(&[("max_concurrent", "5")]));
        let cold = c.run().success();
        let meta = c.meta();
        let fetched = meta["pages"].as_object().unwrap().values().filter(|p| p["status"] == "fetched").count();
        assert_eq!(fetched, pages, "{site}: {}", meta["failures"]);
        assert_eq!(cold.stage("crawl").1, pages);

        let warm = c.run().success();
        let statuses: Vec<u16> =
            server.all().iter().filter(|(p, _, _)| p.ends_with(".md")).skip(pages).map(|(_, s, _)| *s).collect();
        assert_eq!(statuses.len(), pages, "{site}: one conditional GET per page");
        assert!(statuses.iter().all(|s| *s == 304), "{site}: only 304s");
        for stage in ["crawl", "clean-gitbook", "chunk"] {
            assert_eq!(warm.stage(stage).0, "cached", "{site} {stage}:\n{}", warm.stderr);
        }
    }

    // --sections and --max-pages on the aep site (grouped llms.txt).
    let server = serve_site(&corpora, "aep-sdks-docs/site", "https://aep-sdks.gitbook.io/docs", "/docs");
    let c = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(&[]));
    let r = run(pipeline().arg("-c").arg(&c.cfg).args(["run", "--until", "chunk", "--sections", "Getting Started"]));
    r.success();
    let pages = c.meta()["pages"].as_object().unwrap().clone();
    assert!(!pages.is_empty() && pages.keys().all(|k| k.starts_with("getting-started/")), "{:?}", pages.keys());
    let c = Crawl::new(&server.url("/docs/llms.txt"), "", &crawl_params(&[]));
    run(pipeline().arg("-c").arg(&c.cfg).args(["run", "--until", "chunk", "--max-pages", "10"])).success();
    assert_eq!(c.meta()["pages"].as_object().unwrap().len(), 10);
}

/// Hardening item 10: a server that answers 304 to a GET that carried no validator.
#[test]
fn a_304_to_an_unconditional_get_fails_that_page_not_the_crawl() {
    let special = || -> Special { Box::new(|req, _| (req.path == "/docs/b.md").then(|| Response::new(304, ""))) };
    let (_s, c) = fixture_crawl(special(), &[]);
    let r = c.run();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    failed_with(&c, "root/b.md", "304 not modified to an unconditional get");
    assert_eq!(c.page("root/a.md")["status"], "fetched");
    // Past max_error_ratio the run fails, in one line and without a panic.
    let (_s, c) = fixture_crawl(special(), &[("max_error_ratio", "0.05")]);
    let r = c.run();
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"), "{}", r.stderr);
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert!(errors.len() == 1 && errors[0].contains("1 of 3 pages failed"), "{}", r.stderr);
}

/// Hardening item 19: links to other hosts are out of scope, not failures; the run
/// sums them up and names the fix.
#[test]
fn links_to_other_hosts_do_not_count_as_failures_and_are_summed_up() {
    let (_s, c) = fixture_crawl(
        Box::new(|req, _| {
            (req.path == "/docs/llms.txt").then(|| {
                Response::new(
                    200,
                    "# F\n\n- [Alpha](a.md)\n- [Far](https://far.example/x.md)\n- [Farther](https://far.example/y.md)\n",
                )
            })
        }),
        &[("max_error_ratio", "0.05")],
    );
    let r = c.run().success();
    assert!(
        r.stderr.contains("2 of 3 listed pages are on other hosts and were not crawled (far.example); add them to the source's allow_hosts"),
        "{}",
        r.stderr
    );
    assert_eq!(c.page("root/a.md")["status"], "fetched");
}
