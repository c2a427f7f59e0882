//! Helpers for the end-to-end tests: locate and run the real binaries, write fixture
//! sites, and read what they produced.

pub mod http;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of a workspace binary, building it if this test run did not.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/it-<hash> → target/<profile>/<name>
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    if !path.exists() {
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--bin", name])
            .status()
            .expect("running cargo build");
        assert!(status.success(), "building {name}");
    }
    path
}

#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    #[track_caller]
    pub fn success(self) -> Run {
        assert_eq!(self.code, Some(0), "command failed:\n{}", self.stderr);
        self
    }

    /// The summary row of a stage: `(outcome, processed, reused)`.
    pub fn stage(&self, name: &str) -> (String, usize, usize) {
        let row = self
            .stderr
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name) && l.split_whitespace().count() == 5)
            .unwrap_or_else(|| panic!("no summary row for {name} in:\n{}", self.stderr));
        let f: Vec<&str> = row.split_whitespace().collect();
        (f[1].to_owned(), f[2].parse().expect("processed"), f[3].parse().expect("reused"))
    }
}

/// `atlas-pipeline` with a clean environment (no inherited cache dir or failpoint).
pub fn pipeline() -> Command {
    let mut c = Command::new(bin("atlas-pipeline"));
    c.env_remove("ATLAS_CACHE_DIR").env_remove("ATLAS_FAILPOINT").env("ATLAS_NO_PROGRESS", "1");
    c
}

pub fn run(cmd: &mut Command) -> Run {
    cmd.output().expect("spawning the binary").into()
}

/// Copies a folder tree (a real site) into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("reading source tree") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// Writes a small GitBook-style site the project owns, for tests that must run
/// without the real corpora.
pub fn write_fixture_site(root: &Path) {
    let pages: &[(&str, &str)] = &[
        (
            "README.md",
            "---\ntitle: Fixture Docs\ndescription: A tiny site.\n---\n\n# Fixture Docs\n\nWelcome.\n\n## Getting started\n\nRead the guides.\n",
        ),
        (
            "guides/install.md",
            "# Install\n\n{% hint style=\"info\" %}\nYou need a cluster.\n{% endhint %}\n\n## With Helm\n\n```bash\n# add the repo\nhelm repo add x https://x.test\n```\n\n## With kubectl\n\n{% tabs %}\n{% tab title=\"Linux\" %}\nRun the script.\n{% endtab %}\n{% tab title=\"macOS \\(arm64\\)\" %}\nUse brew.\n{% endtab %}\n{% endtabs %}\n",
        ),
        (
            "guides/configure.md",
            "# Configure\n\n## Fields\n\n<table><tr><th>Field</th><th>Meaning</th></tr><tr><td><code>replicas</code></td><td>How many pods</td></tr></table>\n\n## Tokens\n\nUse {%~sdkver%} in rules.\n",
        ),
        (
            "reference/api.md",
            "# API\n\n## GET /apps <a id=\"get-apps\"></a>\n\nLists apps.\n\n## POST /apps\n\nCreates one.\n",
        ),
    ];
    for (rel, text) in pages {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write page");
    }
}

/// A config with one local source.
pub fn write_config(dir: &Path, source_path: &Path, extra: &str) -> PathBuf {
    let cfg = dir.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        format!("name: test\nsources:\n  site:\n    kind: local\n    path: {}\n{extra}", source_path.display()),
    )
    .expect("write config");
    cfg
}
