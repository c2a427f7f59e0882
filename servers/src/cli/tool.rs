//! `atlas tool`: every tool of the fs and rag servers as a command, for scripts, CI
//! jobs and sub-agents that cannot reach MCP. The servers run in this process; a call
//! takes the same arguments and gives the same reply, budgets and errors as over MCP.

use super::locate::Served;
use atlas_dist::config::Config;
use atlas_mcp::local::{Local, ToolInfo};
use atlas_runtime::exit::UsageError;
use serde_json::{Map, Value};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The tool (`atlas tool --list` names them).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// One argument as KEY=VALUE; repeat it. A value is taken as the tool's schema
    /// types it: text for a string argument, else JSON (`top_k=3`, `regex=true`).
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    args: Vec<String>,
    /// All arguments as one JSON object (KEY=VALUE pairs are added to it).
    #[arg(long, value_name = "JSON")]
    json_args: Option<String>,
    /// List the tools, with their servers and descriptions.
    #[arg(long)]
    list: bool,
    /// Print JSON: the reply (`is_error`, `text`, `structured`), or with --list the tools and their schemas.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    served: Served,
}

/// The most bytes of arguments a call takes.
pub const MAX_ARGUMENT_BYTES: usize = 256 << 10;

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        // Listing the tools needs no library: without one, every tool, marked where it
        // needs a library with code.
        if self.name.is_none() && !self.served.given(cfg) {
            return list(&atlas_mcp::local::catalog(), self.json);
        }
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let (local, _) = self.served.start(&rt, cfg)?;
        let r = rt.block_on(async {
            let r = match &self.name {
                None => list(local.tools(), self.json),
                Some(name) => call(&local, name, &self.args, self.json_args.as_deref(), self.json).await,
            };
            local.close().await;
            r
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
        r
    }
}

fn list(tools: &[ToolInfo], json: bool) -> anyhow::Result<()> {
    if json {
        return super::print(&format!("{}\n", serde_json::to_string_pretty(tools)?));
    }
    let mut out = String::new();
    for t in tools {
        let args: Vec<String> =
            t.input_schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
        out.push_str(&format!("{:<18} {:<4} {}\n", t.name, format!("{:?}", t.server).to_lowercase(), t.description));
        if !args.is_empty() {
            out.push_str(&format!("{:<23} args: {}\n", "", args.join(", ")));
        }
        if t.needs_code {
            out.push_str(&format!("{:<23} needs a library with code\n", ""));
        }
    }
    super::print(&out)
}

async fn call(local: &Local, name: &str, pairs: &[String], json_args: Option<&str>, json: bool) -> anyhow::Result<()> {
    let Some(tool) = local.tool(name) else {
        anyhow::bail!(UsageError(format!(
            "no tool is named {name:?}; `atlas tool --list` names them ({})",
            local.tools().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
        )));
    };
    let args = arguments(tool, pairs, json_args).map_err(UsageError)?;
    let reply = local.call(name, args).await;
    if json {
        super::print(&format!("{}\n", serde_json::to_string_pretty(&reply)?))?;
    } else if !reply.is_error {
        super::print(&format!("{}\n", reply.text.trim_end()))?;
    }
    if reply.is_error {
        let first = reply.text.lines().next().unwrap_or("the tool failed").to_owned();
        anyhow::bail!(ToolFailed(format!("{name}: {first}")));
    }
    Ok(())
}

/// A tool error: the reply says why; the command exits 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailed(pub String);

/// The arguments of a call: `json_args`, then each KEY=VALUE typed by the tool's
/// input schema.
pub fn arguments(tool: &ToolInfo, pairs: &[String], json_args: Option<&str>) -> Result<Map<String, Value>, String> {
    let mut args = match json_args {
        None => Map::new(),
        Some(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("--json-args takes a JSON object, e.g. '{\"query\": \"install\"}'".into()),
            Err(e) => return Err(format!("--json-args is not JSON ({e})")),
        },
    };
    let props = tool.input_schema["properties"].as_object();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("--arg {pair:?}: write KEY=VALUE, e.g. --arg query=install"));
        };
        let Some(schema) = props.and_then(|p| p.get(key)) else {
            let known: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
            return Err(format!("{} takes no argument {key:?}; it takes {}", tool.name, known.join(", ")));
        };
        let is_text = schema_types(schema).iter().any(|t| t == "string");
        let typed = if is_text { None } else { serde_json::from_str::<Value>(value).ok() };
        args.insert(key.to_owned(), typed.unwrap_or_else(|| Value::String(value.to_owned())));
    }
    let size = serde_json::to_string(&args).map_or(0, |s| s.len());
    if size > MAX_ARGUMENT_BYTES {
        return Err(format!("the arguments are {size} bytes, over the {MAX_ARGUMENT_BYTES}-byte limit"));
    }
    Ok(args)
}

/// The JSON types a property's schema allows (`type`, or each `anyOf` branch's).
fn schema_types(schema: &Value) -> Vec<String> {
    let mut out: Vec<String> = match &schema["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    };
    for branch in schema["anyOf"].as_array().into_iter().flatten() {
        out.extend(schema_types(branch));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> ToolInfo {
        ToolInfo {
            server: atlas_mcp::local::Server::Rag,
            name: "search_docs".into(),
            title: None,
            description: String::new(),
            input_schema: serde_json::json!({"properties": {
                "query": {"type": "string"},
                "top_k": {"type": ["integer", "null"]},
                "section": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            }}),
            output_schema: None,
            read_only: true,
            needs_code: false,
        }
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let pairs = ["query=42".to_owned(), "top_k=3".to_owned(), "section=true".to_owned()];
        let a = arguments(&tool(), &pairs, None).unwrap();
        assert_eq!(Value::Object(a), serde_json::json!({"query": "42", "top_k": 3, "section": "true"}));
        let a = arguments(&tool(), &["top_k=x".to_owned()], Some(r#"{"query": "q"}"#)).unwrap();
        assert_eq!(Value::Object(a), serde_json::json!({"query": "q", "top_k": "x"}));
        assert!(arguments(&tool(), &["nope=1".to_owned()], None).unwrap_err().contains("takes no argument"));
        assert!(arguments(&tool(), &["query".to_owned()], None).unwrap_err().contains("KEY=VALUE"));
        assert!(arguments(&tool(), &[], Some("[1]")).unwrap_err().contains("JSON object"));
    }
}
