//! `atlas ask` against a local OpenAI-compatible server that streams SSE chunks and
//! records what it was sent: a good answer, a citation to a source not given, a
//! refusal that must not call the LLM, every way the LLM can fail (each falls back to
//! the extractive answer, within the timeout), and the extractive path with no LLM.
//! Needs the embedding model (retrieval is hybrid).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use atlas_e2e::http::{Body, Request, Response, Server, chat_stream};
use atlas_e2e::{HOSTILE_PAGE, Run, bin, build_fixture_bundle_with, run};
use serde_json::Value;

use crate::embed::model_ready;

/// The fixture bundle (docs, code and the hostile page), built once per test run.
pub(crate) fn fixture() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let work = tempfile::tempdir().unwrap();
        let b = build_fixture_bundle_with(work.path(), &[("guides/payload.md", HOSTILE_PAGE)]);
        (work, b)
    })
    .1
}

/// A fake LLM: answers every request with `respond` and keeps the requests.
fn llm(respond: impl Fn() -> Response + Send + Sync + 'static) -> (Server, Arc<Mutex<Vec<Request>>>) {
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let log = seen.clone();
    let server = Server::start(move |req| {
        log.lock().unwrap().push(req.clone());
        respond()
    });
    (server, seen)
}

fn ask(question: &str, extra: &[&str]) -> (Run, Value, Duration) {
    let started = Instant::now();
    let r = run(std::process::Command::new(bin("atlas"))
        .args(["ask", question, "--json", "--bundle"])
        .arg(fixture())
        .args(extra)
        .env_remove("ATLAS_LLM_API_KEY")
        .env("ATLAS_LLM_API_KEY", "sk-test"));
    let took = started.elapsed();
    let v = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {} / {}", r.stdout, r.stderr));
    (r, v, took)
}

const Q: &str = "How do I install with Helm?";

/// How a fake LLM answers.
type Responder = Box<dyn Fn() -> Response + Send + Sync>;

#[test]
fn a_good_answer_streams_with_checked_citations_and_the_prompt_holds_the_sources() {
    if !model_ready() {
        return;
    }
    let (server, seen) =
        llm(|| chat_stream(&["Add the chart repository with ", "`helm repo add` [", "1]."], Duration::from_millis(30)));
    let url = server.url("/v1");
    let (r, v, _) = ask(Q, &["--llm", &url, "--model", "tiny"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(v["kind"], "generated", "{v:#}");
    assert_eq!(v["answer"], "Add the chart repository with `helm repo add` [1].");
    assert_eq!(v["cited"], serde_json::json!([1]));
    assert_eq!(v["removed_citations"], serde_json::json!([]));
    assert!(v["timings"]["first_token_ms"].as_f64().is_some(), "{v:#}");
    eprintln!(
        "ask, LLM test server: first token {:.1} ms, total {:.1} ms",
        v["timings"]["first_token_ms"].as_f64().unwrap(),
        v["timings"]["total_ms"].as_f64().unwrap()
    );
    let reqs = seen.lock().unwrap();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!((body["model"].as_str(), body["stream"].as_bool()), (Some("tiny"), Some(true)));
    let user = body["messages"][1]["content"].as_str().unwrap();
    let n = v["sources"].as_array().unwrap().len();
    assert!(n >= 2, "{v:#}");
    for i in 1..=n {
        let cite = v["sources"][i - 1]["citation"].as_str().unwrap();
        assert!(user.contains(&format!("[{i}] ")) && user.contains(cite), "source {i} in the prompt:\n{user}");
    }
    assert!(user.contains("<<<SOURCE") && user.ends_with(&format!("Question: {Q}\n")), "{user}");
    assert!(body["messages"][0]["content"].as_str().unwrap().contains("only the numbered sources"));
    drop(reqs);

    // Without --json the answer streams to stdout, then the sources.
    let r = run(std::process::Command::new(bin("atlas")).args(["ask", Q, "--llm", &url, "--bundle"]).arg(fixture()));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.starts_with("Add the chart repository with `helm repo add` [1].\n\nSources:\n[1] "),
        "{}",
        r.stdout
    );
}

#[test]
fn a_citation_to_a_source_not_given_is_removed_and_reported() {
    if !model_ready() {
        return;
    }
    let (server, _) = llm(|| chat_stream(&["Use Helm [1] or ", "brew [4", "2]."], Duration::from_millis(10)));
    let (r, v, _) = ask(Q, &["--llm", &server.url("/v1")]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(v["kind"], "generated");
    assert_eq!(v["removed_citations"], serde_json::json!([42]));
    assert_eq!(v["cited"], serde_json::json!([1]));
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.starts_with("Use Helm [1] or brew.\n"), "{answer}");
    assert!(answer.contains("Removed citations to sources that were not given: [42]"), "{answer}");
}

#[test]
fn a_question_the_corpus_cannot_answer_is_refused_without_calling_the_llm() {
    if !model_ready() {
        return;
    }
    let (server, seen) = llm(|| chat_stream(&["should not be asked"], Duration::ZERO));
    let (r, v, _) = ask("What oven temperature bakes a chocolate sponge cake?", &["--llm", &server.url("/v1")]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    eprintln!("refused: confidence {} below the threshold {}", v["confidence"], v["threshold"]);
    assert_eq!(v["kind"], "refused", "{v:#}");
    assert!(v["confidence"].as_f64().unwrap() < v["threshold"].as_f64().unwrap(), "{v:#}");
    assert!(v["answer"].as_str().unwrap().contains("nearest passages"), "{v:#}");
    assert!(seen.lock().unwrap().is_empty(), "the LLM was called");
}

#[test]
fn every_llm_failure_is_one_line_then_the_extractive_answer_never_a_hang() {
    if !model_ready() {
        return;
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let refused = format!("http://{closed}/v1");
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}/v1", silent.local_addr().unwrap());
    let cases: Vec<(&str, Responder, &str)> = vec![
        ("HTTP 500", Box::new(|| Response::new(500, "model crashed")), "HTTP 500"),
        ("HTTP 401", Box::new(|| Response::new(401, "{\"error\":\"bad key\"}")), "HTTP 401"),
        (
            "a malformed stream",
            Box::new(|| Response::new(200, "data: {oops\n\n").header("Content-Type", "text/event-stream")),
            "malformed stream",
        ),
        (
            "a stream cut short",
            Box::new(|| {
                let mut r = chat_stream(&["Half an ans"], Duration::ZERO);
                if let Body::Pieces(p, _) = &mut r.body {
                    p.pop(); // no [DONE]
                }
                r
            }),
            "ended before",
        ),
        (
            "a stream that stalls",
            Box::new(|| Response { status: 200, headers: vec![], body: Body::Stall(Duration::from_secs(8)) }),
            "stalled for 1 s",
        ),
    ];
    let mut servers = Vec::new();
    let mut urls = vec![
        ("connection refused", refused, "could not connect".to_owned()),
        ("a timeout", silent_url, "no reply within 1 s".to_owned()),
    ];
    for (name, respond, want) in cases {
        let (s, _) = llm(respond);
        urls.push((name, s.url("/v1"), want.to_owned()));
        servers.push(s);
    }
    for (name, url, want) in urls {
        let (r, v, took) = ask(Q, &["--llm", &url, "--timeout", "1"]);
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        assert!(took < Duration::from_secs(30), "{name}: took {took:?}");
        assert_eq!(v["kind"], "extractive", "{name}: {v:#}");
        let err = v["llm_error"].as_str().unwrap_or_default();
        let lines: Vec<&str> = r.stderr.lines().filter(|l| l.contains("failed")).collect();
        assert_eq!(lines.len(), 1, "{name}: one line: {}", r.stderr);
        assert!(lines[0].contains("extractive answer instead"), "{name}: {}", lines[0]);
        assert!(err.contains(&want), "{name}: {err:?} lacks {want:?}");
        assert!(!v["cited"].as_array().unwrap().is_empty(), "{name}: {v:#}");
    }
}

#[test]
fn with_no_llm_the_answer_is_extractive_and_cited() {
    if !model_ready() {
        return;
    }
    let (r, v, _) = ask(Q, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(v["kind"], "extractive", "{v:#}");
    assert!(v.get("llm_error").is_none());
    let answer = v["answer"].as_str().unwrap();
    let n = v["sources"].as_array().unwrap().len();
    for c in v["cited"].as_array().unwrap() {
        let c = c.as_u64().unwrap() as usize;
        assert!((1..=n).contains(&c) && answer.contains(&format!("[{c}]")), "{answer}");
    }
    assert!(answer.lines().count() >= 2, "{answer}");
    eprintln!("ask, extractive: first token {:.1} ms", v["timings"]["first_token_ms"].as_f64().unwrap());
}

#[test]
fn bad_ask_input_is_one_line_and_exit_2() {
    if !model_ready() {
        return;
    }
    let r = run(std::process::Command::new(bin("atlas")).args(["ask", "  ", "--bundle"]).arg(fixture()));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("the question is empty"), "{}", r.stderr);
    let r = run(std::process::Command::new(bin("atlas"))
        .args(["ask", "x", "--llm", "ftp://nowhere", "--bundle"])
        .arg(fixture()));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}
