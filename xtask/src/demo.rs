//! `cargo xtask demo`: the product on this project's own docs and source
//! (examples/self.yaml), shown through its own command line: build the bundle and its
//! archive (writing behind to a shared build cache, which a second machine with an
//! empty cache then builds from), say what it holds, verify it, rerun the eval it ships, search it, ask it a
//! question, serve the web page and fetch a search from it, install
//! the archive as a user would (`atlas install`), smoke-test both servers, run `atlas
//! doctor`, sync a project's dependencies and ask the agent over them, index this
//! repository's working tree with `atlas init` and find an edit as soon as it is
//! saved, and print the editor config that serves the installed bundle by name.

use std::process::Command;

use anyhow::Context as _;

use crate::{Profile, output, say, status};

const CONFIG: &str = "examples/self.yaml";
const BUNDLE: &str = "examples/.atlas/build/bundle";

pub fn run() -> anyhow::Result<()> {
    let release = Profile::Release;
    // One cargo invocation builds both binaries over one dependency build.
    release.build()?;
    crate::setup::run(release)?;
    let (pipeline, atlas) = (release.bin("atlas-pipeline"), release.bin("atlas"));
    let shown = |args: &[&str]| {
        say(&format!("\n$ {}", args.join(" ")));
    };
    // The build writes behind to a shared cache (a folder standing in for s3://…), so a
    // second machine can build from it below.
    // The refs this machine writes there are signed with a demo key, and both machines
    // use only refs signed by it (docs/pipeline.md, the shared cache's trust model).
    let remote = format!("file://{}", crate::project_root().join("target/demo-shared-cache").display());
    let config_home = shared_cache_config(&pipeline)?;
    let mut run = Command::new(&pipeline);
    run.args(["--config", CONFIG, "run", "--archive"])
        .env("ATLAS_CACHE_REMOTE", &remote)
        .env("XDG_CONFIG_HOME", &config_home);
    status(run)?;
    // A second machine: an empty local cache, the shared one behind it.
    let second = crate::project_root().join("target/demo-second-machine");
    let _ = std::fs::remove_dir_all(&second);
    shown(&[
        "ATLAS_CACHE_REMOTE=file://…/target/demo-shared-cache",
        "atlas-pipeline",
        "--config",
        CONFIG,
        "--cache-dir",
        "target/demo-second-machine",
        "run",
    ]);
    let mut again = Command::new(&pipeline);
    again
        .args(["--config", CONFIG, "--cache-dir"])
        .arg(&second)
        .arg("run")
        .env("ATLAS_CACHE_REMOTE", &remote)
        .env("XDG_CONFIG_HOME", &config_home);
    status(again)?;
    shown(&["atlas-pipeline", "--config", CONFIG, "status"]);
    let mut st = Command::new(&pipeline);
    st.args(["--config", CONFIG, "status"]);
    status(st)?;
    // `eval` reruns the golden set the bundle ships (examples/self-golden.jsonl) and
    // checks it against the figures stored at pack time.
    for args in [&["info", BUNDLE][..], &["verify", BUNDLE][..], &["eval", "--bundle", BUNDLE][..]] {
        shown(&[&["atlas"][..], args].concat());
        let mut cmd = Command::new(&atlas);
        cmd.args(args);
        status(cmd)?;
    }
    for (query, args) in [
        ("how does the cache stay consistent after a crash", &["--kind", "docs", "-k", "3"][..]),
        ("KeyBuilder", &["--kind", "code", "-k", "3"][..]),
        // Code intelligence from the bundle's symbol table (the rag server's
        // find_symbol and find_references).
        ("KeyBuilder", &["--symbol"][..]),
        ("KeyBuilder", &["--references"][..]),
    ] {
        say(&format!("\n$ atlas search {query:?} --bundle {BUNDLE} {}", args.join(" ")));
        let mut search = Command::new(&atlas);
        search.arg("search").arg(query).args(["--bundle", BUNDLE]).args(args);
        status(search)?;
    }
    // An answer with checked citations: extractive here (no LLM configured); `--llm URL`
    // takes any OpenAI-compatible endpoint.
    let question = "how does the cache stay consistent after a crash?";
    say(&format!("\n$ atlas ask {question:?} --bundle {BUNDLE}"));
    let mut ask = Command::new(&atlas);
    ask.args(["ask", question, "--bundle", BUNDLE]);
    status(ask)?;
    // The agent without an LLM: the question fanned out to both servers at once
    // (search, symbols, grep), the evidence merged and read verbatim through fs; then
    // one tool of the servers as a command.
    let question = "how is a stage's cache key built with `KeyBuilder`?";
    say(&format!("\n$ atlas agent {question:?} --bundle {BUNDLE} --budget 800 --trace"));
    let mut agent = Command::new(&atlas);
    agent.args(["agent", question, "--bundle", BUNDLE, "--budget", "800", "--trace"]);
    status(agent)?;
    let tool = ["tool", "find_symbol", "--arg", "name=KeyBuilder", "--bundle", BUNDLE];
    shown(&[&["atlas"][..], &tool[..]].concat());
    let mut cmd = Command::new(&atlas);
    cmd.args(tool);
    status(cmd)?;
    web(&atlas)?;
    let mut info = Command::new(&atlas);
    info.args(["info", "--json", BUNDLE]);
    let info: serde_json::Value = serde_json::from_str(&output(info)?).context("reading `atlas info --json`")?;
    let name = info["name"].as_str().context("the bundle has a name")?;
    let version = info["version"].as_str().context("the bundle has a version")?;
    // As a user who downloaded the archive: install it, smoke-test it, check the setup.
    let archive = format!("examples/.atlas/build/{name}-{version}.tar.zst");
    let mut install = Command::new(&atlas);
    install.args(["install", &archive, "--json"]);
    output(install)?;
    for args in [&["smoke", name][..], &["doctor"][..], &["bundles"][..]] {
        shown(&[&["atlas"][..], args].concat());
        let mut cmd = Command::new(&atlas);
        cmd.args(args);
        status(cmd)?;
    }
    dependencies(&atlas)?;
    // Last, so the editor config ends the demo: `atlas install` prints it.
    say(&format!(
        "\n$ atlas install {archive}\n(claude_desktop_config.json, Cursor's mcp.json; README.md has the Zed and opencode forms)"
    ));
    let mut install = Command::new(&atlas);
    install.args(["install", &archive]);
    status(install)?;
    eprintln!("xtask: run it again to see every stage cached");
    Ok(())
}

/// Three of this project's own small dependencies, as a project that depends on them
/// would get them: `atlas sync` of a lockfile pinning the versions this workspace's
/// Cargo.lock pins, offline (the crates come from cargo's own cache, checked against
/// the lockfile's sha256); then one searched by symbol and by question.
fn dependencies(atlas: &std::path::Path) -> anyhow::Result<()> {
    const CRATES: [&str; 3] = ["humantime", "httpdate", "fastrand"];
    let lock = std::fs::read_to_string(crate::project_root().join("Cargo.lock")).context("reading Cargo.lock")?;
    let project = crate::project_root().join("target/demo-deps");
    std::fs::create_dir_all(&project)?;
    let mut toml = "[package]\nname = \"demo-deps\"\nversion = \"0.1.0\"\n[dependencies]\n".to_owned();
    let mut locked = "version = 4\n[[package]]\nname = \"demo-deps\"\nversion = \"0.1.0\"\n".to_owned();
    for block in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            block.lines().find_map(|l| l.strip_prefix(&format!("{k} = \"")).and_then(|v| v.strip_suffix('"')))
        };
        let (Some(name), Some(version)) = (field("name"), field("version")) else { continue };
        if CRATES.contains(&name) && field("checksum").is_some() && !toml.contains(&format!("\n{name} =")) {
            toml.push_str(&format!("{name} = \"={version}\"\n"));
            locked.push_str(&format!("\n[[package]]{block}"));
        }
    }
    std::fs::write(project.join("Cargo.toml"), toml)?;
    std::fs::write(project.join("Cargo.lock"), locked)?;
    say("\n$ atlas sync target/demo-deps --offline   (a project depending on humantime, httpdate and fastrand)");
    let mut sync = Command::new(atlas);
    sync.arg("sync").arg(&project).args(["--offline", "--json"]);
    output(sync)?;
    for (query, args) in
        [("parse_duration", &["--symbol"][..]), ("how do I parse a duration like 2h 30m", &["-k", "2"][..])]
    {
        say(&format!("\n$ atlas search {query:?} --bundle crate:humantime {}", args.join(" ")));
        let mut search = Command::new(atlas);
        search.arg("search").arg(query).args(["--bundle", "crate:humantime"]).args(args);
        status(search)?;
    }
    // The agent over the project's whole set, without an LLM: the evidence, each
    // passage with its citation.
    let question = "how do I parse a duration like 2h 30m?";
    say(&format!("\n$ atlas agent {question:?} --project target/demo-deps --budget 1200"));
    let mut agent = Command::new(atlas);
    agent.arg("agent").arg(question).arg("--project").arg(&project).args(["--budget", "1200"]);
    status(agent)?;
    live(atlas)
}

/// This repository's own working tree, live: `atlas init` on a copy of its tracked
/// files, a server that follows it, an edit, and how soon a search finds the edit.
fn live(atlas: &std::path::Path) -> anyhow::Result<()> {
    let root = crate::project_root();
    let copy = root.join("target/demo-live/atlas");
    let _ = std::fs::remove_dir_all(&copy);
    let files = output({
        let mut c = Command::new("git");
        c.arg("-C").arg(&root).args(["ls-files", "-z"]);
        c
    })?;
    for rel in files.split('\0').filter(|r| !r.is_empty()) {
        let to = copy.join(rel);
        std::fs::create_dir_all(to.parent().context("a file has a folder")?)?;
        // A file git tracks but the checkout lacks is left out, as git would show it.
        let _ = std::fs::copy(root.join(rel), &to);
    }
    say(
        "\n$ atlas init target/demo-live/atlas --keyword-only --client claude-code   (this repository's tracked files)",
    );
    let mut init = Command::new(atlas);
    init.arg("init").arg(&copy).args(["--keyword-only", "--client", "claude-code", "--no-deps"]);
    status(init)?;
    say("\n$ atlas serve rag --project target/demo-live/atlas   (follows every save), then an edit:");
    let mut serve = Command::new(atlas);
    serve
        .arg("serve")
        .arg("rag")
        .arg("--project")
        .arg(&copy)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut server = serve.spawn().context("starting atlas serve rag")?;
    // Give its watcher a moment to start: what it sees is what follows.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let edited = copy.join("cache/src/lib.rs");
    let mut text = std::fs::read_to_string(&edited).context("reading cache/src/lib.rs")?;
    text.push_str("\n/// Counts the gooseberries in a demo basket.\npub fn gooseberry_count() -> usize {\n    3\n}\n");
    let t = std::time::Instant::now();
    std::fs::write(&edited, text)?;
    let found = loop {
        let mut search = Command::new(atlas);
        search.arg("search").arg("--project").arg(&copy).args(["gooseberries basket", "--mode", "keyword", "-k", "1"]);
        let out = output(search).unwrap_or_default();
        if out.contains("gooseberry_count") {
            break Some(out);
        }
        if t.elapsed() > std::time::Duration::from_secs(30) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = t.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    match found {
        Some(out) => {
            say(&format!(
                "$ atlas search --project target/demo-live/atlas \"gooseberries basket\" --mode keyword -k 1\n{out}"
            ));
            say(&format!("(the edit to cache/src/lib.rs was found {:.2}s after the save)", took.as_secs_f64()));
            Ok(())
        }
        None => anyhow::bail!("the edit to cache/src/lib.rs was not searchable 30s after the save"),
    }
}

/// Starts the web page on a free port, fetches a search from it, and stops it.
fn web(atlas: &std::path::Path) -> anyhow::Result<()> {
    use std::io::{Read as _, Write as _};
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    say(&format!("\n$ atlas serve web --bundle {BUNDLE} --http {addr}"));
    let mut child = Command::new(atlas)
        .args(["serve", "web", "--bundle", BUNDLE, "--http", &addr])
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting atlas serve web")?;
    let fetched = (|| -> anyhow::Result<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut conn = loop {
            match std::net::TcpStream::connect(&addr) {
                Ok(c) => break c,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => anyhow::bail!("the web page did not start: {e}"),
            }
        };
        write!(conn, "GET /?q=KeyBuilder HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
        let mut page = String::new();
        conn.read_to_string(&mut page)?;
        Ok(page)
    })();
    let _ = child.kill();
    let _ = child.wait();
    let page = fetched?;
    anyhow::ensure!(page.starts_with("HTTP/1.1 200") && page.contains("class=\"hit\""), "the web page gave no hits");
    say(&format!(
        "GET http://{addr}/?q=KeyBuilder: {} hits, {} bytes of HTML (search, source view and Ask in a browser; /mcp beside them)",
        page.matches("class=\"hit\"").count(),
        page.len()
    ));
    Ok(())
}

/// A config home whose `[cache]` signs the refs written to the shared cache with a
/// demo key (made once, under target/) and trusts only refs signed by it.
fn shared_cache_config(pipeline: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    let root = crate::project_root().join("target/demo-cache-key");
    let (key, public) = (root.join("cache.key"), root.join("cache.pub"));
    if !key.is_file() {
        let mut keygen = Command::new(pipeline);
        keygen.args(["keygen", "--out"]).arg(&root).args(["--name", "cache"]);
        output(keygen)?;
    }
    let home = root.join("config");
    std::fs::create_dir_all(home.join("atlas")).context("creating the demo config home")?;
    let toml = format!(
        "[cache]\nsign = {:?}\ntrusted_keys = [{:?}]\n",
        key.display().to_string(),
        public.display().to_string()
    );
    std::fs::write(home.join("atlas/config.toml"), toml).context("writing the demo config")?;
    Ok(home)
}
