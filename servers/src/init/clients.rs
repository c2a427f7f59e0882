//! The editors' MCP config that `atlas init` writes: each client's own project-scoped
//! file and format (Claude Code `.mcp.json`, Cursor `.cursor/mcp.json`, VS Code
//! `.vscode/mcp.json`, Zed `.zed/settings.json`, opencode `opencode.json`).
//!
//! Invariant: a file is merged, never rewritten. The user's other keys, servers,
//! comments, trailing commas and layout stay byte for byte where they were (the JSONC
//! concrete syntax tree of `jsonc-parser` is edited, not a parsed value re-printed); only
//! the fields of our own entries are added or changed, in place. A second run with
//! nothing changed writes nothing. [`plan`] reads and checks every file before
//! [`apply`] writes any, so a bad file leaves all of them as they were. Writes are
//! atomic, keep the file's permissions, and never go through a symbolic link
//! (tests: `init::clients::tests`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

/// The largest config file read, in bytes: these files are a few KB, and a project's
/// files are untrusted.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// What a backup's name adds to the file it copies (`.mcp.json.atlas-backup`).
pub const BACKUP_SUFFIX: &str = ".atlas-backup";

/// The permissions a config file that did not exist is created with (unix).
#[cfg_attr(not(unix), allow(dead_code))]
const NEW_FILE_MODE: u32 = 0o644;

/// A coding agent or editor whose project-scoped MCP config `atlas init` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    /// Claude Code: `.mcp.json`.
    ClaudeCode,
    /// Cursor: `.cursor/mcp.json`.
    Cursor,
    /// VS Code (Copilot's agent mode): `.vscode/mcp.json`.
    VsCode,
    /// Zed: `.zed/settings.json`.
    Zed,
    /// opencode: `opencode.json`.
    Opencode,
}

impl Client {
    /// Every client, in the order plans and reports list them.
    pub const ALL: [Client; 5] = [Client::ClaudeCode, Client::Cursor, Client::VsCode, Client::Zed, Client::Opencode];

    /// The client `--client NAME` names: its [`Client::name`], or a common other
    /// spelling (`claude`, `code`, `vs-code`), case-insensitive.
    pub fn parse(name: &str) -> Result<Client, ConfigError> {
        let n = name.trim().to_ascii_lowercase();
        Ok(match n.as_str() {
            "claude-code" | "claude" | "claudecode" | "claude_code" => Client::ClaudeCode,
            "cursor" => Client::Cursor,
            "vscode" | "vs-code" | "code" | "vs_code" => Client::VsCode,
            "zed" => Client::Zed,
            "opencode" | "open-code" => Client::Opencode,
            _ => return Err(ConfigError::UnknownClient { name: atlas_dist::short(name) }),
        })
    }

    /// The name `--client` takes and reports print.
    pub fn name(&self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::VsCode => "vscode",
            Client::Zed => "zed",
            Client::Opencode => "opencode",
        }
    }

    /// The client's project-scoped config file in `project`. For opencode, an
    /// existing `opencode.jsonc` when there is no `opencode.json`.
    pub fn config_path(&self, project: &Path) -> PathBuf {
        project.join(match self {
            Client::ClaudeCode => ".mcp.json",
            Client::Cursor => ".cursor/mcp.json",
            Client::VsCode => ".vscode/mcp.json",
            Client::Zed => ".zed/settings.json",
            Client::Opencode if !exists(&project.join("opencode.json")) && exists(&project.join("opencode.jsonc")) => {
                "opencode.jsonc"
            }
            Client::Opencode => "opencode.json",
        })
    }

    /// Whether the project shows signs of the client: its folder (`.cursor/`,
    /// `.vscode/`, `.zed/`, `.claude/`, `.opencode/`) or its config file
    /// (`.mcp.json`, `opencode.json`, `opencode.jsonc`).
    pub fn found(&self, project: &Path) -> bool {
        let marks: &[&str] = match self {
            Client::ClaudeCode => &[".mcp.json", ".claude"],
            Client::Cursor => &[".cursor"],
            Client::VsCode => &[".vscode"],
            Client::Zed => &[".zed"],
            Client::Opencode => &["opencode.json", "opencode.jsonc", ".opencode"],
        };
        marks.iter().any(|m| exists(&project.join(m)))
    }

    /// Where in the file's top-level object the servers live, and each entry's shape.
    fn layout(&self, root: &CstObject) -> Layout {
        match self {
            Client::ClaudeCode => Layout { path: &["mcpServers"], shape: Shape::ClaudeCode },
            Client::Cursor => Layout { path: &["mcpServers"], shape: Shape::Cursor },
            Client::VsCode => Layout { path: &["servers"], shape: Shape::VsCode },
            Client::Zed => Layout { path: &["context_servers"], shape: Shape::Zed },
            Client::Opencode => {
                // opencode V2's own shape puts servers under `mcp.servers`; where a file
                // already has it, we write there (a V1 entry there would be wrong).
                let v2 = root
                    .object_value("mcp")
                    .and_then(|m| m.object_value("servers"))
                    .is_some_and(|s| s.get("type").is_none());
                if v2 {
                    Layout { path: &["mcp", "servers"], shape: Shape::OpencodeV2 }
                } else {
                    Layout { path: &["mcp"], shape: Shape::OpencodeV1 }
                }
            }
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Client {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Client::parse(s)
    }
}

/// The clients found in `project` ([`Client::found`]), in [`Client::ALL`]'s order;
/// Claude Code alone when none is.
pub fn detect(project: &Path) -> Vec<Client> {
    let found: Vec<Client> = Client::ALL.into_iter().filter(|c| c.found(project)).collect();
    if found.is_empty() { vec![Client::ClaudeCode] } else { found }
}

/// One MCP server that runs over stdio, as a client starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// The entry's name in the client's servers object (`atlas`): entries with this
    /// name are ours, and are updated in place.
    pub key: String,
    /// The program to run.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// What a plan does to one server entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The entry was not there; it is added after the others.
    Added,
    /// The entry was there with other values; our fields are set in place.
    Updated,
    /// The entry is already as it should be.
    Unchanged,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Added => "added",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
        })
    }
}

/// One of our server entries in a plan, and what happens to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name ([`Server::key`]).
    pub key: String,
    /// What the plan does to it.
    pub action: Action,
}

/// What [`plan`] would write to one client's config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePlan {
    /// The client whose file this is.
    pub client: Client,
    /// The config file ([`Client::config_path`]).
    pub path: PathBuf,
    /// The file's bytes now; `None` when it does not exist.
    pub old: Option<Vec<u8>>,
    /// The file's bytes after the merge (equal to `old` when nothing changes).
    pub new: Vec<u8>,
    /// Whether `new` differs from the file now, so [`apply`] writes it.
    pub changed: bool,
    /// What happens to each server entry, by its key, in the order given.
    pub entries: Vec<Entry>,
}

/// A file [`apply`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The client whose file this is.
    pub client: Client,
    /// The file written.
    pub path: PathBuf,
    /// Where the file's previous bytes were copied (`<file>.atlas-backup`); `None` when
    /// the file is new.
    pub backup: Option<PathBuf>,
}

/// Why a config file cannot be planned or written. Each message is one line that
/// says what to do; nothing was written when [`plan`] returns one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--client` named no client we know.
    #[error("unknown client {name:?}; pass one of: claude-code, cursor, vscode, zed, opencode")]
    UnknownClient { name: String },
    /// The file is not JSON or JSONC (or not UTF-8, or too large).
    #[error("{}: {why}; fix the file (or move it aside) and run atlas init again", path.display())]
    Malformed { path: PathBuf, why: String },
    /// The file's top level, or the key its servers live under, is not an object.
    #[error(
        "{}: {what} is not an object; make it one ({{}}) or move the file aside, and run atlas init again",
        path.display()
    )]
    NotAnObject { path: PathBuf, what: String },
    /// The file, or a folder between the project and it, is a symbolic link.
    #[error(
        "{}: it is a symbolic link, or under one, and atlas init writes through no link; replace the link with the file, or pass --print and add the entry yourself",
        path.display()
    )]
    Link { path: PathBuf },
    /// The file changed between [`plan`] and [`apply`].
    #[error("{}: it changed while atlas init ran; run atlas init again", path.display())]
    Changed { path: PathBuf },
    /// Reading or writing failed.
    #[error("{}: {cause}", path.display())]
    Io { path: PathBuf, cause: std::io::Error },
}

impl ConfigError {
    /// Whether the fault is the user's input (a file or a name to fix), for exit code 2.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ConfigError::Io { .. })
    }
}

/// Plans the config of every client in `clients` (each once, in the order given) with
/// `servers`' entries merged in. Reads and checks every file first; writes nothing.
pub fn plan(project: &Path, clients: &[Client], servers: &[Server]) -> Result<Vec<FilePlan>, ConfigError> {
    let mut seen = Vec::new();
    let mut plans = Vec::new();
    for &client in clients {
        if seen.contains(&client) {
            continue;
        }
        seen.push(client);
        let path = client.config_path(project);
        refuse_links(project, &path)?;
        let old = read(&path)?;
        let (new, entries) = merge(client, &path, old.as_deref(), servers)?;
        let changed = old.as_deref() != Some(new.as_slice());
        plans.push(FilePlan { client, path, old, new, changed, entries });
    }
    Ok(plans)
}

/// Writes each changed plan: the file's previous bytes to `<file>.atlas-backup` beside
/// it (replacing an older backup), then the new bytes atomically, with the file's
/// permissions. A file that changed since [`plan`] read it is refused before anything
/// is written.
pub fn apply(plans: &[FilePlan]) -> Result<Vec<Written>, ConfigError> {
    let todo: Vec<&FilePlan> = plans.iter().filter(|p| p.changed).collect();
    for p in &todo {
        if read(&p.path)? != p.old {
            return Err(ConfigError::Changed { path: p.path.clone() });
        }
    }
    let mut written = Vec::new();
    for p in todo {
        let mode = mode_of(&p.path)?;
        let backup = match &p.old {
            Some(old) => {
                let backup = backup_path(&p.path);
                if is_link(&backup) {
                    return Err(ConfigError::Link { path: backup });
                }
                write_atomic(&backup, old, mode.clone())?;
                Some(backup)
            }
            None => None,
        };
        write_atomic(&p.path, &p.new, mode)?;
        written.push(Written { client: p.client, path: p.path.clone(), backup });
    }
    Ok(written)
}

/// Where [`apply`] copies a file before changing it.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(BACKUP_SUFFIX);
    path.with_file_name(name)
}

/// Where a client's servers live in the file, and the shape of an entry there.
struct Layout {
    path: &'static [&'static str],
    shape: Shape,
}

#[derive(Clone, Copy)]
enum Shape {
    /// Claude Code: `{"type": "stdio", "command", "args"}`.
    ClaudeCode,
    /// Cursor: `{"command", "args"}`.
    Cursor,
    /// VS Code: `{"type": "stdio", "command", "args"}`.
    VsCode,
    /// Zed: `{"command", "args"}`.
    Zed,
    /// opencode: `{"type": "local", "command": [cmd, args...], "enabled": true}`.
    OpencodeV1,
    /// opencode V2's `mcp.servers`: `{"type": "local", "command": [cmd, args...]}`.
    OpencodeV2,
}

/// The fields of our entry for `server`, in the order a new entry lists them.
fn fields(shape: Shape, server: &Server) -> Vec<(&'static str, Value)> {
    let args = Value::from(server.args.clone());
    let argv =
        || Value::from(std::iter::once(server.command.clone()).chain(server.args.iter().cloned()).collect::<Vec<_>>());
    match shape {
        Shape::Cursor | Shape::Zed => vec![("command", server.command.clone().into()), ("args", args)],
        Shape::ClaudeCode | Shape::VsCode => {
            vec![("type", "stdio".into()), ("command", server.command.clone().into()), ("args", args)]
        }
        Shape::OpencodeV1 => vec![("type", "local".into()), ("command", argv()), ("enabled", true.into())],
        Shape::OpencodeV2 => vec![("type", "local".into()), ("command", argv())],
    }
}

/// `old` (the file's bytes, `None` when absent) with `servers` merged in, and what
/// happened to each entry.
fn merge(
    client: Client,
    path: &Path,
    old: Option<&[u8]>,
    servers: &[Server],
) -> Result<(Vec<u8>, Vec<Entry>), ConfigError> {
    let malformed = |why: String| ConfigError::Malformed { path: path.to_owned(), why };
    let text = match old {
        Some(bytes) => std::str::from_utf8(bytes).map_err(|e| malformed(format!("it is not UTF-8 text ({e})")))?,
        None => "",
    };
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let root = CstRootNode::parse(body, &ParseOptions::default())
        .map_err(|e| malformed(format!("it is not valid JSON or JSONC ({e})")))?;
    let fresh = root.value().is_none();
    let top = match root.value() {
        None => root.object_value_or_set(),
        Some(v) => v.as_object().ok_or_else(|| not_object(path, "its top level"))?,
    };
    if fresh && client == Client::Opencode {
        top.append("$schema", "https://opencode.ai/config.json".into());
    }
    let layout = client.layout(&top);
    let mut container = top;
    for (i, key) in layout.path.iter().enumerate() {
        container = match container.get(key) {
            None => container.append(key, CstInputValue::Object(Vec::new())).object_value_or_set(),
            Some(prop) => prop
                .value()
                .and_then(|v| v.as_object())
                .ok_or_else(|| not_object(path, &layout.path[..=i].join(".")))?,
        };
    }
    let mut entries = Vec::new();
    for server in servers {
        let fields = fields(layout.shape, server);
        let action = match container.get(&server.key) {
            None => {
                container.append(&server.key, object(&fields));
                Action::Added
            }
            Some(prop) => match prop.value().and_then(|v| v.as_object()) {
                None => {
                    prop.set_value(object(&fields));
                    Action::Updated
                }
                Some(entry) => {
                    let mut action = Action::Unchanged;
                    for (name, value) in &fields {
                        match entry.get(name) {
                            Some(f) if f.value().and_then(|v| v.to_serde_value()).as_ref() == Some(value) => {}
                            Some(f) => {
                                f.set_value(input(value));
                                action = Action::Updated;
                            }
                            None => {
                                entry.append(name, input(value));
                                action = Action::Updated;
                            }
                        }
                    }
                    action
                }
            },
        };
        entries.push(Entry { key: server.key.clone(), action });
    }
    let mut out = format!("{bom}{root}");
    if fresh && !out.ends_with('\n') {
        out.push('\n');
    }
    // Nothing to change: the bytes as they were, whatever the tree prints.
    if let Some(old) = old
        && entries.iter().all(|e| e.action == Action::Unchanged)
        && !fresh
    {
        return Ok((old.to_vec(), entries));
    }
    Ok((out.into_bytes(), entries))
}

fn not_object(path: &Path, what: &str) -> ConfigError {
    ConfigError::NotAnObject { path: path.to_owned(), what: what.to_owned() }
}

fn object(fields: &[(&'static str, Value)]) -> CstInputValue {
    CstInputValue::Object(fields.iter().map(|(k, v)| ((*k).to_owned(), input(v))).collect())
}

/// A JSON value as the tree's input.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

/// The file's bytes, `None` when it does not exist; a FIFO, a folder or a file over
/// [`MAX_CONFIG_BYTES`] is malformed.
fn read(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    match atlas_runtime::safe_path::read_capped(path, MAX_CONFIG_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(ConfigError::Malformed { path: path.to_owned(), why: e.to_string() })
        }
        Err(cause) => Err(ConfigError::Io { path: path.to_owned(), cause }),
    }
}

/// Refuses `path` when it, or a folder between `project` and it, is a symbolic link:
/// a link could lead the write out of the project.
fn refuse_links(project: &Path, path: &Path) -> Result<(), ConfigError> {
    let rel = path.strip_prefix(project).unwrap_or(path);
    let mut at = project.to_path_buf();
    for part in rel.components() {
        at.push(part);
        if is_link(&at) {
            return Err(ConfigError::Link { path: path.to_owned() });
        }
    }
    Ok(())
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// The file's permissions; `None` when it does not exist.
fn mode_of(path: &Path) -> Result<Option<std::fs::Permissions>, ConfigError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.permissions())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(cause) => Err(ConfigError::Io { path: path.to_owned(), cause }),
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place,
/// with `mode` (a new file's [`NEW_FILE_MODE`] when `None`); makes the file's folder
/// when missing.
fn write_atomic(path: &Path, bytes: &[u8], mode: Option<std::fs::Permissions>) -> Result<(), ConfigError> {
    use std::io::Write as _;
    let io = |cause| ConfigError::Io { path: path.to_owned(), cause };
    let dir = path.parent().ok_or_else(|| io(std::io::Error::other("the file has no folder")))?;
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = atlas_dist::atomic::temp_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    #[cfg(unix)]
    let mode = mode.or_else(|| Some(std::os::unix::fs::PermissionsExt::from_mode(NEW_FILE_MODE)));
    if let Some(mode) = mode {
        tmp.as_file().set_permissions(mode).map_err(io)?;
    }
    atlas_dist::atomic::persist(tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atlas() -> Vec<Server> {
        vec![Server { key: "atlas".into(), command: "atlas".into(), args: vec!["serve".into(), "rag".into()] }]
    }

    fn text(p: &FilePlan) -> &str {
        std::str::from_utf8(&p.new).unwrap()
    }

    /// Plans and applies one client's file in `dir`, returning the plan.
    fn run(dir: &Path, client: Client, servers: &[Server]) -> FilePlan {
        let plans = plan(dir, &[client], servers).unwrap();
        apply(&plans).unwrap();
        plans.into_iter().next().unwrap()
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_fresh_claude_code_file_is_mcp_servers_with_a_stdio_entry() {
        let dir = tempfile::tempdir().unwrap();
        let p = run(dir.path(), Client::ClaudeCode, &atlas());
        assert_eq!(p.path, dir.path().join(".mcp.json"));
        assert_eq!(p.entries, vec![Entry { key: "atlas".into(), action: Action::Added }]);
        assert_eq!(
            text(&p),
            "{\n  \"mcpServers\": {\n    \"atlas\": {\n      \"type\": \"stdio\",\n      \"command\": \"atlas\",\n      \"args\": [\"serve\", \"rag\"]\n    }\n  }\n}\n"
        );
        assert_eq!(std::fs::read(&p.path).unwrap(), p.new);
    }

    #[test]
    fn a_fresh_cursor_file_is_mcp_servers_with_command_and_args() {
        let dir = tempfile::tempdir().unwrap();
        let p = run(dir.path(), Client::Cursor, &atlas());
        assert_eq!(p.path, dir.path().join(".cursor/mcp.json"));
        assert_eq!(
            text(&p),
            "{\n  \"mcpServers\": {\n    \"atlas\": {\n      \"command\": \"atlas\",\n      \"args\": [\"serve\", \"rag\"]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn a_fresh_vscode_file_is_servers_with_a_stdio_entry() {
        let dir = tempfile::tempdir().unwrap();
        let p = run(dir.path(), Client::VsCode, &atlas());
        assert_eq!(p.path, dir.path().join(".vscode/mcp.json"));
        assert_eq!(
            text(&p),
            "{\n  \"servers\": {\n    \"atlas\": {\n      \"type\": \"stdio\",\n      \"command\": \"atlas\",\n      \"args\": [\"serve\", \"rag\"]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn a_fresh_zed_file_is_context_servers_with_command_and_args() {
        let dir = tempfile::tempdir().unwrap();
        let p = run(dir.path(), Client::Zed, &atlas());
        assert_eq!(p.path, dir.path().join(".zed/settings.json"));
        assert_eq!(
            text(&p),
            "{\n  \"context_servers\": {\n    \"atlas\": {\n      \"command\": \"atlas\",\n      \"args\": [\"serve\", \"rag\"]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn a_fresh_opencode_file_has_its_schema_and_a_local_entry_with_the_whole_command() {
        let dir = tempfile::tempdir().unwrap();
        let p = run(dir.path(), Client::Opencode, &atlas());
        assert_eq!(p.path, dir.path().join("opencode.json"));
        assert_eq!(
            text(&p),
            "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {\n    \"atlas\": {\n      \"type\": \"local\",\n      \"command\": [\"atlas\", \"serve\", \"rag\"],\n      \"enabled\": true\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn an_opencode_file_in_the_v2_shape_gets_its_entry_under_mcp_servers() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "opencode.jsonc",
            "{\n  \"mcp\": {\n    \"servers\": {\n      \"other\": { \"type\": \"remote\", \"url\": \"https://x\" },\n    },\n  },\n}\n",
        );
        let p = run(dir.path(), Client::Opencode, &atlas());
        assert_eq!(p.path, dir.path().join("opencode.jsonc"));
        assert!(
            text(&p).contains("\"other\": { \"type\": \"remote\", \"url\": \"https://x\" },\n      \"atlas\": {"),
            "{}",
            text(&p)
        );
        assert!(text(&p).contains("\"command\": [\"atlas\", \"serve\", \"rag\"]"));
        assert!(!text(&p).contains("enabled"));
    }

    /// Every client: the user's other servers and keys stay, in order, and ours comes last.
    #[test]
    fn a_merge_keeps_the_other_servers_and_keys_in_their_order() {
        let cases = [
            (Client::ClaudeCode, ".mcp.json", "mcpServers"),
            (Client::Cursor, ".cursor/mcp.json", "mcpServers"),
            (Client::VsCode, ".vscode/mcp.json", "servers"),
            (Client::Zed, ".zed/settings.json", "context_servers"),
            (Client::Opencode, "opencode.json", "mcp"),
        ];
        for (client, rel, key) in cases {
            let dir = tempfile::tempdir().unwrap();
            let before = format!(
                "{{\n  \"zeta\": 1,\n  \"{key}\": {{\n    \"b-server\": {{\"command\": \"b\"}},\n    \"a-server\": {{\"command\": \"a\"}}\n  }},\n  \"alpha\": [1, 2]\n}}\n"
            );
            write(dir.path(), rel, &before);
            let p = run(dir.path(), client, &atlas());
            let after = text(&p);
            let v: Value = serde_json::from_str(after).unwrap();
            assert_eq!(v[key].as_object().unwrap().len(), 3, "{client}");
            let at = |k: &str| after.find(&format!("\"{k}\"")).unwrap();
            assert!(at("zeta") < at(key) && at(key) < at("alpha"), "{client}: {after}");
            assert!(at("b-server") < at("a-server") && at("a-server") < at("atlas"), "{client}: {after}");
            assert!(
                after.starts_with("{\n  \"zeta\": 1,\n  \"") && after.contains("    \"b-server\": {\"command\": \"b\"},\n    \"a-server\": {\"command\": \"a\"},\n    \"atlas\": {"),
                "{client}: {after}"
            );
            assert!(after.ends_with("  },\n  \"alpha\": [1, 2]\n}\n"), "{client}: {after}");
        }
    }

    #[test]
    fn a_strict_json_file_stays_strict_json_in_its_own_line_endings() {
        for before in [
            "{}",
            "{\"mcpServers\": {\"x\": {\"command\": \"x\"}}}",
            "{\r\n  \"mcpServers\": {\r\n    \"x\": {}\r\n  }\r\n}\r\n",
        ] {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), ".mcp.json", before);
            let p = run(dir.path(), Client::ClaudeCode, &atlas());
            let v: Value = serde_json::from_str(text(&p)).unwrap_or_else(|e| panic!("{e}: {}", text(&p)));
            assert_eq!(v["mcpServers"]["atlas"]["args"][1], "rag");
            let crlf = text(&p).matches("\r\n").count();
            let expected = if before.contains('\r') { text(&p).matches('\n').count() } else { 0 };
            assert_eq!(crlf, expected, "{:?}", text(&p));
        }
    }

    #[test]
    fn zed_settings_keep_their_comments_and_trailing_commas() {
        let dir = tempfile::tempdir().unwrap();
        let before = "// Zed settings\n{\n  \"theme\": \"One Dark\", // my theme\n  /* servers */\n  \"context_servers\": {\n    // the old one\n    \"other\": {\n      \"command\": \"other\",\n      \"args\": [],\n    },\n  },\n}\n";
        write(dir.path(), ".zed/settings.json", before);
        let p = run(dir.path(), Client::Zed, &atlas());
        assert_eq!(
            text(&p),
            "// Zed settings\n{\n  \"theme\": \"One Dark\", // my theme\n  /* servers */\n  \"context_servers\": {\n    // the old one\n    \"other\": {\n      \"command\": \"other\",\n      \"args\": [],\n    },\n    \"atlas\": {\n      \"command\": \"atlas\",\n      \"args\": [\"serve\", \"rag\"],\n    },\n  },\n}\n"
        );
    }

    #[test]
    fn a_second_run_with_nothing_changed_changes_no_byte_and_writes_no_backup() {
        for client in Client::ALL {
            let dir = tempfile::tempdir().unwrap();
            let rel = client.config_path(dir.path());
            write(dir.path(), rel.strip_prefix(dir.path()).unwrap().to_str().unwrap(), "{ \"keep\": true }");
            let first = run(dir.path(), client, &atlas());
            assert!(first.changed);
            let bytes = std::fs::read(&first.path).unwrap();
            let backup = backup_path(&first.path);
            assert_eq!(std::fs::read(&backup).unwrap(), b"{ \"keep\": true }", "{client}");
            std::fs::remove_file(&backup).unwrap();
            let plans = plan(dir.path(), &[client], &atlas()).unwrap();
            assert!(!plans[0].changed, "{client}");
            assert_eq!(plans[0].entries, vec![Entry { key: "atlas".into(), action: Action::Unchanged }]);
            assert!(apply(&plans).unwrap().is_empty());
            assert_eq!(std::fs::read(&first.path).unwrap(), bytes, "{client}");
            assert!(!backup.exists(), "{client}: a run that changes nothing writes no backup");
        }
    }

    #[test]
    fn our_entry_is_updated_in_place_when_its_command_changes_and_the_users_fields_stay() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            ".cursor/mcp.json",
            "{\n  \"mcpServers\": {\n    \"atlas\": {\"command\": \"/old/atlas\", \"args\": [\"serve\"], \"env\": {\"A\": \"1\"}},\n    \"z\": {\"command\": \"z\"}\n  }\n}\n",
        );
        let p = run(dir.path(), Client::Cursor, &atlas());
        assert_eq!(p.entries, vec![Entry { key: "atlas".into(), action: Action::Updated }]);
        assert_eq!(
            text(&p),
            "{\n  \"mcpServers\": {\n    \"atlas\": {\"command\": \"atlas\", \"args\": [\"serve\", \"rag\"], \"env\": {\"A\": \"1\"}},\n    \"z\": {\"command\": \"z\"}\n  }\n}\n"
        );
    }

    #[test]
    fn an_invalid_file_is_refused_and_nothing_is_written_to_any_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".vscode/mcp.json", "{ \"servers\": { \"a\": ");
        let err = plan(dir.path(), &[Client::ClaudeCode, Client::VsCode], &atlas()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::Malformed { .. }), "{msg}");
        assert!(
            msg.contains(".vscode/mcp.json") && msg.contains("run atlas init again") && !msg.contains('\n'),
            "{msg}"
        );
        assert!(!dir.path().join(".mcp.json").exists(), "the good file is not written either");
        assert_eq!(std::fs::read_to_string(dir.path().join(".vscode/mcp.json")).unwrap(), "{ \"servers\": { \"a\": ");
    }

    #[test]
    fn a_servers_key_that_is_not_an_object_is_refused_with_its_name() {
        for (text, what) in
            [("{\"mcpServers\": []}", "mcpServers"), ("[1]", "its top level"), ("{\"mcpServers\": null}", "mcpServers")]
        {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), ".mcp.json", text);
            let err = plan(dir.path(), &[Client::ClaudeCode], &atlas()).unwrap_err();
            assert!(matches!(&err, ConfigError::NotAnObject { what: w, .. } if w == what), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "opencode.json", "{\"mcp\": {\"servers\": 3}}");
        // `mcp.servers` that is not an object is a V1 server named "servers": ours goes beside it.
        assert!(plan(dir.path(), &[Client::Opencode], &atlas()).is_ok());
    }

    #[test]
    fn a_backup_holds_the_bytes_before_the_change_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let before = "{\n  // mine\n  \"mcpServers\": {}\n}\n";
        write(dir.path(), ".mcp.json", before);
        let plans = plan(dir.path(), &[Client::ClaudeCode], &atlas()).unwrap();
        let written = apply(&plans).unwrap();
        let backup = dir.path().join(".mcp.json.atlas-backup");
        assert_eq!(
            written,
            vec![Written {
                client: Client::ClaudeCode,
                path: dir.path().join(".mcp.json"),
                backup: Some(backup.clone())
            }]
        );
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), before);
        let modified = std::fs::metadata(&backup).unwrap().modified().unwrap();
        assert!(apply(&plan(dir.path(), &[Client::ClaudeCode], &atlas()).unwrap()).unwrap().is_empty());
        assert_eq!(std::fs::metadata(&backup).unwrap().modified().unwrap(), modified);
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), before);
    }

    #[test]
    fn a_new_file_has_no_backup() {
        let dir = tempfile::tempdir().unwrap();
        let written = apply(&plan(dir.path(), &[Client::Zed], &atlas()).unwrap()).unwrap();
        assert_eq!(written[0].backup, None);
        assert!(!dir.path().join(".zed/settings.json.atlas-backup").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_write_keeps_the_files_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".mcp.json", "{}");
        let path = dir.path().join(".mcp.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        run(dir.path(), Client::ClaudeCode, &atlas());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(backup_path(&path)).unwrap().permissions().mode() & 0o777, 0o600);
        let fresh = tempfile::tempdir().unwrap();
        let p = run(fresh.path(), Client::Cursor, &atlas());
        assert_eq!(std::fs::metadata(&p.path).unwrap().permissions().mode() & 0o777, 0o644);
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_file_or_folder_is_refused_and_nothing_is_written_outside() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".cursor")).unwrap();
        let err = plan(dir.path(), &[Client::Cursor], &atlas()).unwrap_err();
        assert!(matches!(err, ConfigError::Link { .. }), "{err}");
        write(outside.path(), "settings.json", "{}");
        std::fs::create_dir(dir.path().join(".zed")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("settings.json"), dir.path().join(".zed/settings.json"))
            .unwrap();
        let err = plan(dir.path(), &[Client::Zed], &atlas()).unwrap_err();
        assert!(matches!(err, ConfigError::Link { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(outside.path().join("settings.json")).unwrap(), "{}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_file_changed_after_the_plan_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".mcp.json", "{}");
        let plans = plan(dir.path(), &[Client::ClaudeCode], &atlas()).unwrap();
        write(dir.path(), ".mcp.json", "{\"edited\": 1}");
        assert!(matches!(apply(&plans), Err(ConfigError::Changed { .. })));
        assert_eq!(std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap(), "{\"edited\": 1}");
    }

    #[test]
    fn clients_are_found_by_their_folders_and_claude_code_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(detect(dir.path()), vec![Client::ClaudeCode]);
        std::fs::create_dir(dir.path().join(".vscode")).unwrap();
        std::fs::create_dir(dir.path().join(".zed")).unwrap();
        assert_eq!(detect(dir.path()), vec![Client::VsCode, Client::Zed]);
        write(dir.path(), "opencode.json", "{}");
        write(dir.path(), ".mcp.json", "{}");
        assert_eq!(detect(dir.path()), vec![Client::ClaudeCode, Client::VsCode, Client::Zed, Client::Opencode]);
    }

    #[test]
    fn client_names_parse_and_an_unknown_one_lists_the_known() {
        for c in Client::ALL {
            assert_eq!(Client::parse(c.name()).unwrap(), c);
            assert_eq!(c.name().parse::<Client>().unwrap(), c);
        }
        assert_eq!(Client::parse("Claude").unwrap(), Client::ClaudeCode);
        assert_eq!(Client::parse("code").unwrap(), Client::VsCode);
        let msg = Client::parse("emacs").unwrap_err().to_string();
        assert_eq!(msg, "unknown client \"emacs\"; pass one of: claude-code, cursor, vscode, zed, opencode");
    }

    #[test]
    fn a_bom_and_comment_only_file_and_odd_names_are_handled() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".mcp.json", "\u{feff}{\"mcpServers\": {}}");
        let p = run(
            dir.path(),
            Client::ClaudeCode,
            &[Server { key: "a\"b".into(), command: "c:\\x\n".into(), args: vec![] }],
        );
        assert!(text(&p).starts_with('\u{feff}'));
        let v: Value = serde_json::from_str(text(&p).trim_start_matches('\u{feff}')).unwrap();
        assert_eq!(v["mcpServers"]["a\"b"]["command"], "c:\\x\n");
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".vscode/mcp.json", "// nothing yet\n");
        let p = run(dir.path(), Client::VsCode, &atlas());
        assert!(text(&p).starts_with("// nothing yet\n"), "{}", text(&p));
        assert!(text(&p).contains("\"servers\""));
    }

    #[test]
    fn a_file_that_is_not_utf8_or_too_large_or_a_folder_is_malformed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".mcp.json"), b"{\"a\": \"\xff\"}").unwrap();
        assert!(matches!(plan(dir.path(), &[Client::ClaudeCode], &atlas()), Err(ConfigError::Malformed { .. })));
        std::fs::write(dir.path().join(".mcp.json"), vec![b' '; MAX_CONFIG_BYTES as usize + 1]).unwrap();
        assert!(matches!(plan(dir.path(), &[Client::ClaudeCode], &atlas()), Err(ConfigError::Malformed { .. })));
        std::fs::create_dir_all(dir.path().join(".cursor/mcp.json")).unwrap();
        assert!(matches!(plan(dir.path(), &[Client::Cursor], &atlas()), Err(ConfigError::Malformed { .. })));
        let deep = "[".repeat(100_000);
        std::fs::write(dir.path().join(".mcp.json"), deep).unwrap();
        assert!(matches!(plan(dir.path(), &[Client::ClaudeCode], &atlas()), Err(ConfigError::Malformed { .. })));
    }
}
