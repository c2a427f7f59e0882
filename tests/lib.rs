//! The one test-support library, shared by every crate's tests and the benchmarks:
//! locate and run the real binaries, write fixture sites and repositories, generate
//! deterministic data ([`XorShift`]), serve HTTP locally ([`http`]), and write a tiny
//! cross-encoder.

pub mod dist;
pub mod http;
pub mod layout;
pub mod pg;
pub mod registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of a workspace binary, building it if this test run did not.
/// The file `cargo xtask test` reads skips from (one `<kind>\t<test>\t<reason>` line
/// each), so its summary counts a skipped test as skipped, not passed.
pub const SKIP_LOG: &str = "ATLAS_SKIP_LOG";

/// Reports the running test as skipped (its caller returns at once): the reason on
/// stderr and in [`SKIP_LOG`].
pub fn skip(reason: &str) {
    log_skip("test", reason);
}

/// Reports one check of the running test as skipped (the test goes on without it).
pub fn skip_check(reason: &str) {
    log_skip("check", reason);
}

fn log_skip(kind: &str, reason: &str) {
    use std::io::Write as _;
    eprintln!("skipped: {reason}");
    let Some(log) = std::env::var_os(SKIP_LOG) else { return };
    let test = std::thread::current().name().unwrap_or("(unnamed)").to_owned();
    let line = format!("{kind}\t{test}\t{}\n", reason.replace(['\t', '\n'], " "));
    // One write of one short line with O_APPEND: lines of parallel tests do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = f.write_all(line.as_bytes());
    }
}

pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/it-<hash> → target/<profile>/<name>
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    if !path.exists() {
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--workspace", "--bin", name])
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

/// `atlas-pipeline` with a clean environment (no inherited cache dir, remote cache or
/// failpoint).
pub fn pipeline() -> Command {
    let mut c = Command::new(bin("atlas-pipeline"));
    c.env_remove("ATLAS_CACHE_DIR")
        .env_remove("ATLAS_FAILPOINT")
        .env_remove("ATLAS_CACHE_REMOTE")
        .env("ATLAS_NO_PROGRESS", "1");
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

/// A page whose text and headings carry script payloads: each one, if it ran,
/// would set `document.body.dataset.pwned`.
pub const HOSTILE_PAGE: &str = "# Payload <img src=x onerror=\"document.body.dataset.pwned=1\">\n\nThe payload page documents the escaping rules.\n\n<script>document.body.dataset.pwned=1</script>\n\n## Handler <svg onload=\"document.body.dataset.pwned=1\">\n\nAn <img src=x onerror=\"document.body.dataset.pwned=1\"> inline image, and a [link](javascript:document.body.dataset.pwned=1).\n";

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

/// Code files for the fixture: a Python module and a Rust file.
pub fn write_fixture_code(root: &Path) {
    let files: &[(&str, &str)] = &[
        (
            "billing/invoice.py",
            "\"\"\"Invoices.\"\"\"\n\n\nclass InvoiceBuilder:\n    \"\"\"Builds invoices line by line.\"\"\"\n\n    def __init__(self, currency):\n        self.currency = currency\n        self.lines = []\n\n    def add_line(self, amount, label):\n        \"\"\"Adds one priced line to the invoice.\"\"\"\n        self.lines.append((amount, label))\n        return self\n\n\ndef total_amount(lines):\n    \"\"\"Sums the amounts of invoice lines.\"\"\"\n    return sum(a for a, _ in lines)\n",
        ),
        (
            "net/retry.rs",
            "//! Retries.\n\n/// Exponential backoff between attempts.\npub struct Backoff {\n    pub base_ms: u64,\n}\n\nimpl Backoff {\n    /// Delay before attempt `n`, doubling each time.\n    pub fn delay_ms(&self, n: u32) -> u64 {\n        self.base_ms << n\n    }\n}\n\n/// Parses a Retry-After header value in seconds.\npub fn parse_retry_after(v: &str) -> Option<u64> {\n    v.trim().parse().ok()\n}\n\n/// How long to wait before attempt `n`: the server's Retry-After when it sent one, else the backoff.\npub fn wait_ms(b: &Backoff, retry_after: Option<&str>, n: u32) -> u64 {\n    retry_after.and_then(parse_retry_after).map_or_else(|| b.delay_ms(n), |s| s * 1000)\n}\n",
        ),
    ];
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write code");
    }
}

/// Builds a full bundle from the fixture site (source `site`) and fixture code
/// (source `code`) under `work`; returns the bundle folder.
pub fn build_fixture_bundle(work: &Path) -> PathBuf {
    build_fixture_bundle_with(work, &[])
}

/// [`build_fixture_bundle`] with more pages in the site (`(path, text)`).
pub fn build_fixture_bundle_with(work: &Path, pages: &[(&str, &str)]) -> PathBuf {
    let site = work.join("site");
    let code = work.join("code");
    write_fixture_site(&site);
    for (rel, text) in pages {
        let p = site.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write page");
    }
    write_fixture_code(&code);
    let cfg = work.join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "name: fixture\nsources:\n  site:\n    kind: local\n    path: site\n  code:\n    kind: local\n    path: code\n    include: [\"**/*.py\", \"**/*.rs\"]\nstages:\n  pack:\n    hnsw: true\n",
    )
    .expect("write config");
    run(pipeline().arg("-c").arg(&cfg).arg("run")).success();
    work.join(".atlas/build/bundle")
}

/// A minimal protobuf writer, enough to write an ONNX model by hand.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) -> &mut Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.varint(u64::from(field) << 3).varint(v as u64)
    }
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.varint((u64::from(field) << 3) | 2).varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }
    fn msg(&mut self, field: u32, m: &Pb) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

/// An int64 [batch, seq] or float [batch, 1] tensor input/output.
fn value_info(name: &str, elem_type: i64, dims: &[&str]) -> Pb {
    let mut shape = Pb::default();
    for d in dims {
        let mut dim = Pb::default();
        match d.parse::<i64>() {
            Ok(v) => dim.int(1, v),
            Err(_) => dim.str(2, d),
        };
        shape.msg(1, &dim);
    }
    let mut tensor = Pb::default();
    tensor.int(1, elem_type).msg(2, &shape);
    let mut ty = Pb::default();
    ty.msg(1, &tensor);
    let mut vi = Pb::default();
    vi.str(1, name).msg(2, &ty);
    vi
}

fn node(op: &str, inputs: &[&str], output: &str, attrs: &[(&str, i64)]) -> Pb {
    let mut n = Pb::default();
    for i in inputs {
        n.str(1, i);
    }
    n.str(2, output).str(3, output).str(4, op);
    for (name, v) in attrs {
        let mut a = Pb::default();
        a.str(1, name).int(3, *v).int(20, 2);
        n.msg(5, &a);
    }
    n
}

/// Writes a tiny cross-encoder the tests can run for real: `model.onnx` scores a
/// (query, passage) pair as the sum of the passage's token ids (token type 1), and
/// `tokenizer.json` is a word-level BERT-style pair tokenizer whose vocabulary gives
/// `boosted` the id 1000 and every other known word a small id. A passage holding
/// `boosted` therefore outranks every passage without it.
pub fn write_tiny_cross_encoder(dir: &Path, boosted: &str) {
    std::fs::create_dir_all(dir).expect("mkdir");
    const INT64: i64 = 7;
    const FLOAT: i64 = 1;
    let mut graph = Pb::default();
    graph
        .msg(1, &node("Cast", &["input_ids"], "ids_f", &[("to", FLOAT)]))
        .msg(1, &node("Cast", &["attention_mask"], "mask_f", &[("to", FLOAT)]))
        .msg(1, &node("Cast", &["token_type_ids"], "types_f", &[("to", FLOAT)]))
        .msg(1, &node("Mul", &["ids_f", "mask_f"], "masked", &[]))
        .msg(1, &node("Mul", &["masked", "types_f"], "passage", &[]))
        .msg(1, &node("ReduceSum", &["passage", "axes"], "logits", &[("keepdims", 1)]))
        .str(2, "tiny-cross-encoder");
    let mut axes = Pb::default();
    axes.int(1, 1).int(2, INT64).bytes(7, &[1]).str(8, "axes");
    graph.msg(5, &axes);
    for input in ["input_ids", "attention_mask", "token_type_ids"] {
        graph.msg(11, &value_info(input, INT64, &["batch", "sequence"]));
    }
    graph.msg(12, &value_info("logits", FLOAT, &["batch", "1"]));
    let mut opset = Pb::default();
    opset.str(1, "").int(2, 13);
    let mut model = Pb::default();
    model.int(1, 8).str(2, "atlas-tests").msg(7, &graph).msg(8, &opset);
    std::fs::write(dir.join("model.onnx"), &model.0).expect("write model");

    let mut vocab = serde_json_free_vocab(boosted);
    vocab.sort();
    let vocab_json: Vec<String> = vocab.iter().map(|(w, id)| format!("\"{w}\": {id}")).collect();
    let special = |id: u32, t: &str| {
        format!(
            "{{\"id\": {id}, \"content\": \"{t}\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}}"
        )
    };
    let tokenizer = format!(
        r#"{{
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{}, {}, {}, {}],
  "normalizer": {{"type": "Lowercase"}},
  "pre_tokenizer": {{"type": "Whitespace"}},
  "post_processor": {{
    "type": "TemplateProcessing",
    "single": [{{"SpecialToken": {{"id": "[CLS]", "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"SpecialToken": {{"id": "[SEP]", "type_id": 0}}}}],
    "pair": [{{"SpecialToken": {{"id": "[CLS]", "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"SpecialToken": {{"id": "[SEP]", "type_id": 0}}}}, {{"Sequence": {{"id": "B", "type_id": 1}}}}, {{"SpecialToken": {{"id": "[SEP]", "type_id": 1}}}}],
    "special_tokens": {{
      "[CLS]": {{"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}},
      "[SEP]": {{"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}
    }}
  }},
  "decoder": null,
  "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "[UNK]"}}
}}"#,
        special(0, "[PAD]"),
        special(1, "[UNK]"),
        special(2, "[CLS]"),
        special(3, "[SEP]"),
        vocab_json.join(", ")
    );
    std::fs::write(dir.join("tokenizer.json"), tokenizer).expect("write tokenizer");
}

fn serde_json_free_vocab(boosted: &str) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> =
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]"].iter().enumerate().map(|(i, t)| ((*t).to_owned(), i as u32)).collect();
    v.push((boosted.to_lowercase(), 1000));
    v
}

/// xorshift64*: a small deterministic generator for test and benchmark data.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator started at `seed` (not zero).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1).
    pub fn signed_unit(&mut self) -> f32 {
        (self.next_u64() >> 11) as f32 / (1u64 << 52) as f32 * 2.0 - 1.0
    }
}
