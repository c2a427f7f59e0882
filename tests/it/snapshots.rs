//! Where text output is the contract (what a person or an agent reads), insta
//! snapshots pin it whole; filters blank what varies between runs (paths, times,
//! versions, build dates, scores' last digits).

use std::path::Path;

use atlas_e2e::{bin, run};
use serde_json::json;

use crate::mcp::{call, ok, stdio_client};

/// What varies between runs and machines.
fn filters(dir: &Path) -> Vec<(String, String)> {
    vec![
        (regex_escape(&dir.display().to_string()), "[BUNDLE]".to_owned()),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z".to_owned(), "[TIME]".to_owned()),
        (r"\b\d+ days? ago\b".to_owned(), "[AGE]".to_owned()),
        (r"atlas \d+\.\d+\.\d+".to_owned(), "atlas [VERSION]".to_owned()),
    ]
}

fn regex_escape(s: &str) -> String {
    s.chars().flat_map(|c| if "\\.+*?()|[]{}^$#&-~".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}

fn atlas(args: &[&str]) -> String {
    run(std::process::Command::new(bin("atlas")).args(args)).success().stdout
}

/// The command list and the serve command's flags: what `--help` promises.
#[test]
fn the_command_line_help_is_stable() {
    insta::assert_snapshot!("atlas_help", atlas(&["--help"]));
    insta::assert_snapshot!("atlas_serve_help", atlas(&["serve", "--help"]));
    insta::assert_snapshot!("atlas_search_help", atlas(&["search", "--help"]));
}

/// `atlas info`, `verify` and a keyword `search` (deterministic: no model in the
/// ranking) of the fixture bundle, as people read them.
#[test]
fn bundle_commands_print_what_people_read() {
    let Some(dir) = crate::search::fixture_bundle() else { return };
    let d = dir.to_str().unwrap();
    let settings = {
        let mut s = insta::Settings::clone_current();
        for (from, to) in filters(dir) {
            s.add_filter(&from, to);
        }
        s
    };
    settings.bind(|| {
        insta::assert_snapshot!("atlas_info", atlas(&["info", d]));
        insta::assert_snapshot!("atlas_verify", atlas(&["verify", d]));
        insta::assert_snapshot!(
            "atlas_search_keyword",
            atlas(&["search", "install with helm", "--bundle", d, "--mode", "keyword", "-k", "3"])
        );
    });
}

/// The fs server's text answers over MCP, as an agent reads them: a listing, a read
/// window and a grep.
#[test]
fn fs_tool_answers_are_stable() {
    let Some(dir) = crate::search::fixture_bundle() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("fs.log");
    let d = dir.to_str().unwrap().to_owned();
    let rt = crate::mcp::rt();
    let (listing, window, grep) = rt.block_on(async {
        let c = stdio_client(&["serve", "fs", "--bundle", &d], &log).await;
        let (listing, _) = ok(call(&c, "list_files", json!({})).await);
        let (window, _) =
            ok(call(&c, "read_file", json!({"path": "site/guides/install.md", "start_line": 1, "end_line": 6})).await);
        let (grep, _) = ok(call(&c, "search", json!({"pattern": "helm", "max_results": 5})).await);
        c.cancel().await.unwrap();
        (listing, window, grep)
    });
    let mut settings = insta::Settings::clone_current();
    for (from, to) in filters(dir) {
        settings.add_filter(&from, to);
    }
    settings.bind(|| {
        insta::assert_snapshot!("fs_list_files", listing);
        insta::assert_snapshot!("fs_read_file", window);
        insta::assert_snapshot!("fs_search", grep);
    });
}
