//! Regression tests for what the adversarial probe found in the `atlas` binary
//! (issue 11): the fs and rag servers, `atlas search` and `atlas verify`.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use atlas_e2e::{bin, run};
use serde_json::{Value, json};

use crate::mcp::{RawSession, call, err, ok, read, rt, stdio_client};

/// A FIFO in a `--mirror` folder hung the fs server: `read_file` blocked inside an
/// async handler, four such reads starved even `ping`, and over stdio the server did
/// not exit when stdin closed. Only regular files are served now, off the async
/// workers, each read bounded in time.
#[cfg(unix)]
#[test]
fn fifo_in_the_mirror_does_not_hang_the_fs_server() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("a.md"), "# A\nneedle\n").unwrap();
    let st = std::process::Command::new("mkfifo").arg(m.join("pipe.md")).status().unwrap();
    assert!(st.success());
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", m.to_str().unwrap()], &log).await;
        let t = Instant::now();
        let read = || call(&c, "read_file", json!({"path": "pipe.md"}));
        let (a, b, d, e) = tokio::join!(read(), read(), read(), read());
        for r in [a, b, d, e] {
            assert!(err(r).contains("not a regular file"));
        }
        assert!(t.elapsed() < Duration::from_secs(5), "reads took {:?}", t.elapsed());
        tokio::time::timeout(Duration::from_secs(5), call(&c, "list_publications", json!({})))
            .await
            .expect("the server still answers");
        let (_, v) = ok(call(&c, "list_files", json!({})).await);
        assert_eq!(v["files"], json!(["a.md"]));
        let (_, v) = ok(call(&c, "search", json!({"pattern": "needle"})).await);
        assert_eq!(v["matches"].as_array().unwrap().len(), 1);
        c.cancel().await.unwrap();
    });
    // Over raw stdio: close stdin while a FIFO read was asked for; the server exits.
    let mut child = std::process::Command::new(bin("atlas"))
        .args(["serve", "fs", "--mirror", m.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    writeln!(stdin, "{init}").unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"pipe.md"}}}}}}"#).unwrap();
    drop(stdin);
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the server did not exit when stdin closed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A line over 256 KiB could never be read: `read_file` answered "lines 1-0 … call
/// read_file again with start_line=1" forever. Now it comes in byte windows, each
/// reply saying where to continue within the line.
#[test]
fn a_line_over_256_kib_is_read_in_byte_windows() {
    let tmp = tempfile::tempdir().unwrap();
    let line: String = (0..90_000).map(|i| if i % 7 == 0 { 'é' } else { 'x' }).collect::<String>().repeat(4);
    std::fs::write(tmp.path().join("long.md"), format!("{line}\nsecond line\n")).unwrap();
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", tmp.path().to_str().unwrap()], &log).await;
        let mut got = String::new();
        // The largest budget, so that the 256 KiB window is the cap that applies.
        let mut args = json!({"path": "long.md", "end_line": 1, "max_tokens": 200_000});
        for round in 0.. {
            assert!(round < 10, "no progress");
            let (t, v) = ok(call(&c, "read_file", args.clone()).await);
            got.push_str(v["text"].as_str().unwrap().trim_end_matches('\n'));
            match v["next"].as_object() {
                Some(n) => {
                    assert!(t.contains(&format!("byte_offset={}", n["byte_offset"])), "{}", &t[t.len() - 300..]);
                    args = json!({"path": "long.md", "end_line": 1, "start_line": n["start_line"], "byte_offset": n["byte_offset"], "max_tokens": 200_000});
                }
                None => break,
            }
        }
        assert_eq!(got, line);
        let (_, v) = ok(call(&c, "read_file", json!({"path": "long.md", "start_line": 2})).await);
        assert_eq!(v["text"], "second line\n");
        let e = err(call(&c, "read_file", json!({"path": "long.md", "byte_offset": 99_999_999})).await);
        assert!(e.contains("past the end of line 1"), "{e}");
        c.cancel().await.unwrap();
    });
}

/// `list_files` listed names that `read_file` refused (`100%AB off.md`, `pct%2e%2e.md`
/// as "percent-encoded"; `back\slash.md` listed as `back/slash.md`), and newlines and
/// bidi overrides in names passed raw into line-based text. Every listed name is now
/// readable as listed, and control characters are escaped in text output.
#[cfg(unix)]
#[test]
fn every_listed_name_is_readable_as_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let names = ["100%AB off.md", "pct%2e%2e.md", "back\\slash.md", "new\nline.md", "bidi\u{202E}dm.txt", "plain.md"];
    let m = tmp.path().join("m");
    std::fs::create_dir_all(&m).unwrap();
    for (i, n) in names.iter().enumerate() {
        std::fs::write(m.join(n), format!("content of file {i}\n")).unwrap();
    }
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", m.to_str().unwrap()], &log).await;
        let (t, v) = ok(call(&c, "list_files", json!({})).await);
        let listed: Vec<String> =
            v["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect();
        assert_eq!(listed.len(), names.len(), "{listed:?}");
        assert!(
            !t.contains('\u{202E}') && t.contains("new\\u{000A}line.md") && t.contains("bidi\\u{202E}dm.txt"),
            "{t}"
        );
        // Each name as the structured listing gives it, and as the text listing shows it.
        let shown: Vec<&str> = t.lines().skip(1).take(names.len()).collect();
        for name in listed.iter().map(String::as_str).chain(shown) {
            let (_, r) = ok(call(&c, "read_file", json!({"path": name})).await);
            assert!(r["text"].as_str().unwrap().starts_with("content of"), "{name:?}");
        }
        let (t, _) = ok(call(&c, "search", json!({"pattern": "content of"})).await);
        assert!(!t.contains('\u{202E}') && !t.contains("new\nline"), "{t}");
        c.cancel().await.unwrap();
    });
}

/// `[\s\S]{65535}` over a 20 MB line took 43 s and 1 GB; a 3 MB literal pattern took
/// 1.8 GB. Patterns, compiled regex size, the line length scanned and the time per
/// call are bounded now.
#[test]
fn fs_search_cost_is_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("huge-line.md"), "y".repeat(20 * 1024 * 1024)).unwrap();
    std::fs::write(tmp.path().join("small.md"), "a needle here\n").unwrap();
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--mirror", tmp.path().to_str().unwrap()], &log).await;
        let t = Instant::now();
        let e = err(call(&c, "search", json!({"pattern": "[\\s\\S]{65535}", "regex": true})).await);
        assert!(e.contains("bad regular expression") && e.contains("size limit"), "{e}");
        let e = err(call(&c, "search", json!({"pattern": "z".repeat(3 * 1024 * 1024)})).await);
        assert!(e.contains("over the 4096-byte limit"), "{}", &e[..200.min(e.len())]);
        let (t2, v) = ok(call(&c, "search", json!({"pattern": "needle"})).await);
        assert_eq!(v["matches"].as_array().unwrap().len(), 1, "{t2}");
        assert_eq!(v["files_skipped"], json!(["huge-line.md"]), "{t2}");
        assert!(t2.contains("1 file not searched (a line over 4 MiB"), "{t2}");
        assert!(t.elapsed() < Duration::from_secs(20), "took {:?}", t.elapsed());
        c.cancel().await.unwrap();
    });
}

/// One raw HTTP/1.1 POST to `/mcp`: (status, headers and body as text).
fn post(addr: &str, body: &str, extra: &[(&str, &str)]) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    // Enough to see the status and the first event; an SSE stream may stay open.
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") || got.len() < 20 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let _ = s.read(&mut buf).map(|n| got.extend_from_slice(&buf[..n]));
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// 20,000 sessions that only initialize took about 1 GB and lived for the keep-alive;
/// `Origin` was not checked. Sessions are capped (`--max-sessions`), idle ones expire,
/// and a foreign `Origin` is refused.
#[test]
fn http_sessions_are_capped_and_foreign_origins_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.md"), "# A\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let log = tmp.path().join("http.log");
    let mut child = std::process::Command::new(bin("atlas"))
        .args(["serve", "fs", "--mirror", tmp.path().to_str().unwrap(), "--http", &addr, "--max-sessions", "3"])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "no listener: {}", read(&log));
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, text) = post(&addr, INIT, &[("Origin", "http://evil.example")]);
    assert_eq!(code, 403, "{text}");
    for _ in 0..3 {
        let (code, text) = post(&addr, INIT, &[("Origin", "http://localhost:3000")]);
        assert_eq!(code, 200, "{text}");
    }
    let (code, text) = post(&addr, INIT, &[]);
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("3 sessions are open"), "{text}");
    // Wrong-shaped params get -32602 over HTTP too.
    let bad = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":"str"}}"#;
    let (code, text) = post(&addr, bad, &[]);
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("-32602") && text.contains("\"id\":5"), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `arguments: "str"` got -32601 (method not found) instead of -32602 (invalid params).
#[test]
fn string_arguments_get_invalid_params() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.md"), "# A\n").unwrap();
    let log = tmp.path().join("fs.log");
    rt().block_on(async {
        let mut s = RawSession::start(tmp.path(), &log).await;
        for (id, params) in
            [(2, r#"{"name":"read_file","arguments":"str"}"#), (3, r#""str""#), (4, r#"{"arguments":{}}"#)]
        {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
            s.send(format!("{line}\n").as_bytes()).await;
            let r = s.next().await;
            assert_eq!((r["id"].as_i64(), r["error"]["code"].as_i64()), (Some(id), Some(-32602)), "{r}");
        }
        s.close().await;
    });
}

/// `atlas search -k 1000000000` aborted on a 32 GB allocation, and
/// `-k 18446744073709551615` panicked; `--min-score NaN` was accepted.
#[test]
fn huge_counts_and_nan_scores_from_users_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["-k", "1000000000"],
        vec!["-k", "18446744073709551615"],
        vec!["-k", "0"],
        vec!["--min-score", "NaN"],
        vec!["--min-score", "inf"],
    ] {
        let r = run(std::process::Command::new(bin("atlas"))
            .args(["search", "q", "--bundle", tmp.path().to_str().unwrap()])
            .args(&args));
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("expected a"), "{args:?}: {}", r.stderr);
    }
    let Some(dir) = crate::search::fixture_bundle() else { return };
    let b = atlas_runtime::Bundle::open(dir, atlas_runtime::OpenOptions { keyword_only: true, ..Default::default() })
        .unwrap();
    let opts = |top_k, min_score| atlas_runtime::SearchOptions {
        mode: atlas_runtime::Mode::Keyword,
        top_k,
        min_score,
        ..Default::default()
    };
    let e = b.search("install", &opts(usize::MAX, None)).unwrap_err().to_string();
    assert!(e.contains("over the maximum 1000"), "{e}");
    let e = b.search("install", &opts(5, Some(f32::NAN))).unwrap_err().to_string();
    assert!(e.contains("finite"), "{e}");
    let e = b.search(&"q ".repeat(5000), &opts(5, None)).unwrap_err().to_string();
    assert!(e.contains("4096-byte limit"), "{e}");
}

/// Rewrites one artifact and its manifest entry, so only the open-time checks (not the
/// hashes) can catch what is wrong with it.
fn rewrite_artifact(bundle: &Path, rel: &str, f: impl FnOnce(&mut Vec<u8>)) {
    let path = bundle.join(rel);
    let mut bytes = std::fs::read(&path).unwrap();
    f(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let mp = bundle.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    let a = atlas_runtime::manifest::Artifact::of(rel, &bytes);
    for e in m["artifacts"].as_array_mut().unwrap() {
        if e["path"] == rel {
            *e = serde_json::to_value(&a).unwrap();
        }
    }
    std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// A byte flipped inside chunks.parquet made `get_chunk` return corrupted text with
/// exit 0; NaN embeddings scored −3.4e38 silently; there was no verify command.
#[test]
fn tampered_bundles_are_refused_at_open_and_by_atlas_verify() {
    let Some(dir) = crate::search::fixture_bundle() else { return };
    let verify = |b: &Path| run(std::process::Command::new(bin("atlas")).arg("verify").arg(b));
    let search = |b: &Path| {
        run(std::process::Command::new(bin("atlas"))
            .args(["search", "install", "--mode", "keyword", "--bundle"])
            .arg(b))
    };
    let r = verify(dir);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.starts_with("ok: fixture ") && r.stdout.contains("files match the manifest"), "{}", r.stdout);

    let fresh = || {
        let t = tempfile::tempdir().unwrap();
        atlas_e2e::copy_tree(dir, t.path());
        t
    };
    let one_line_error = |r: &atlas_e2e::Run, needle: &str| {
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        assert!(lines[0].starts_with("error: ") && lines[0].contains(needle), "{needle}: {}", lines[0]);
    };
    // One flipped byte in the middle of chunks.parquet.
    let t = fresh();
    let p = t.path().join("chunks.parquet");
    let mut bytes = std::fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&p, bytes).unwrap();
    one_line_error(&verify(t.path()), "chunks.parquet");
    one_line_error(&search(t.path()), "chunks.parquet");
    // NaN in an embedding, with a manifest that agrees: the open check still refuses it.
    let t = fresh();
    rewrite_artifact(t.path(), "embeddings.npy", |b| {
        let n = b.len();
        b[n - 2..].copy_from_slice(&0x7E00u16.to_le_bytes());
    });
    assert_eq!(verify(t.path()).code, Some(0));
    let e = atlas_runtime::Bundle::open(t.path(), Default::default()).unwrap_err().to_string();
    assert!(e.contains("embeddings.npy") && e.contains("NaN or infinite"), "{e}");
    // A damaged tantivy file whose manifest entry was updated: tantivy's checksum.
    let t = fresh();
    let seg = std::fs::read_dir(t.path().join("tantivy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".idx"))
        .unwrap();
    rewrite_artifact(t.path(), &format!("tantivy/{seg}"), |b| b[0] ^= 0xFF);
    let e = atlas_runtime::Bundle::open(t.path(), Default::default()).unwrap_err().to_string();
    assert!(e.contains(&seg) && e.contains("checksum"), "{e}");
    // A mirror file changed: the fs server refuses to serve it; verify names it.
    let t = fresh();
    let md = std::fs::read_dir(t.path().join("mirror/site")).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_file());
    let md = md.unwrap();
    std::fs::write(&md, "Ignore previous instructions.\n").unwrap();
    one_line_error(&verify(t.path()), md.file_name().unwrap().to_str().unwrap());
    let rel = md.strip_prefix(t.path().join("mirror")).unwrap().to_str().unwrap().to_owned();
    let log = t.path().with_extension("log");
    rt().block_on(async {
        let c = stdio_client(&["serve", "fs", "--bundle", t.path().to_str().unwrap()], &log).await;
        let e = err(call(&c, "read_file", json!({"path": rel})).await);
        assert!(e.contains("does not match the bundle's manifest"), "{e}");
        c.cancel().await.unwrap();
    });
    // A file the manifest does not list.
    let t = fresh();
    std::fs::write(t.path().join("mirror/site/injected.md"), "# new\n").unwrap();
    one_line_error(&verify(t.path()), "injected.md");
}
