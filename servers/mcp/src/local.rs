//! Both servers in this process, for callers that are not MCP clients (`atlas tool`,
//! `atlas agent`): each server runs its real MCP session over an in-memory channel
//! of typed messages (no child process, no pipe, nothing serialised), so a tool
//! called here answers exactly as it answers an editor, with the same arguments,
//! budgets, fences and errors.
//!
//! The protocol stays in this crate: callers see [`ToolInfo`] and [`Reply`], plain
//! JSON and text.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::{ServerHandler, ServiceExt};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::fs::FsServer;
use crate::rag::RagServer;

/// Messages in flight on one in-memory session, each way.
const CHANNEL: usize = 64;
/// The longest one call may take before it is answered with an error (each tool
/// keeps its own shorter bounds; this one guards the session).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Which server offers a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    Fs,
    Rag,
}

/// A tool as `tools/list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    pub server: Server,
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The tool changes nothing (every Atlas tool; checked, not assumed).
    pub read_only: bool,
    /// The rag server lists the tool only while a served library holds code.
    pub needs_code: bool,
}

impl ToolInfo {
    fn new(server: Server, t: &rmcp::model::Tool) -> ToolInfo {
        ToolInfo {
            server,
            name: t.name.to_string(),
            title: t.title.clone(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: Value::Object((*t.input_schema).clone()),
            output_schema: t.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
            read_only: t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true),
            needs_code: server == Server::Rag && crate::rag::CODE_TOOLS.contains(&t.name.as_ref()),
        }
    }
}

/// Every tool the two servers have, with no library open: what they list once a served
/// library holds code, fs first (`atlas tool --list` without a library).
pub fn catalog() -> Vec<ToolInfo> {
    let fs = FsServer::router().list_all().into_iter().map(|t| ToolInfo::new(Server::Fs, &t));
    let rag = RagServer::router().list_all().into_iter().map(|t| ToolInfo::new(Server::Rag, &t));
    fs.chain(rag).collect()
}

/// A tool's answer: its text (what an agent reads), its structured result (what a
/// program reads), and whether it is a tool error.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reply {
    pub is_error: bool,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
}

impl Reply {
    /// A tool error made here (no such tool, a session that failed), as a server's
    /// tool error reads.
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply { is_error: true, text: msg.into(), structured: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the in-process {0:?} server did not start: {1}")]
    Start(Server, String),
}

/// The fs and rag servers, each behind its own in-process session.
pub struct Local {
    sessions: Vec<(Server, RunningService<RoleClient, ()>)>,
    tools: Vec<ToolInfo>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local").field("tools", &self.tools.len()).finish_non_exhaustive()
    }
}

impl Local {
    /// Starts both servers (on the current tokio runtime) and reads their tool lists.
    pub async fn start(fs: FsServer, rag: RagServer) -> Result<Local, Error> {
        let sessions =
            vec![(Server::Fs, session(fs, Server::Fs).await?), (Server::Rag, session(rag, Server::Rag).await?)];
        let mut tools = Vec::new();
        for (server, s) in &sessions {
            let listed = s.peer().list_all_tools().await.map_err(|e| Error::Start(*server, e.to_string()))?;
            tools.extend(listed.iter().map(|t| ToolInfo::new(*server, t)));
        }
        Ok(Local { sessions, tools })
    }

    /// Every tool both servers list, fs first, each in its server's order.
    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Calls `name` with `args` on the server that offers it. A tool no server offers,
    /// a protocol error or a call past [`CALL_TIMEOUT`] is a tool error, as an MCP
    /// client would see it.
    pub async fn call(&self, name: &str, args: Map<String, Value>) -> Reply {
        let Some(tool) = self.tool(name) else {
            return Reply::error(format!(
                "no tool is named {}; the tools are {}",
                crate::output::inert(&format!("{name:?}")),
                self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        };
        let Some((_, session)) = self.sessions.iter().find(|(s, _)| *s == tool.server) else {
            return Reply::error("the server of this tool is not running");
        };
        let params = CallToolRequestParams::new(tool.name.clone()).with_arguments(args);
        match tokio::time::timeout(CALL_TIMEOUT, session.peer().call_tool(params)).await {
            Err(_) => Reply::error(format!("{name} did not answer within {} s", CALL_TIMEOUT.as_secs())),
            Ok(Err(e)) => Reply::error(format!("{name} failed: {e}")),
            Ok(Ok(r)) => Reply {
                is_error: r.is_error == Some(true),
                text: r
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                structured: r.structured_content,
            },
        }
    }

    /// The rag server's prompt `name` with `args`, as the text of its messages; an
    /// unknown prompt or a bad argument is the server's error, one line.
    pub async fn prompt(&self, name: &str, args: Map<String, Value>) -> Result<String, String> {
        let Some((_, rag)) = self.sessions.iter().find(|(s, _)| *s == Server::Rag) else {
            return Err("the rag server is not running".into());
        };
        let params = rmcp::model::GetPromptRequestParams::new(name.to_owned()).with_arguments(args);
        let got = rag.get_prompt(params).await.map_err(|e| e.to_string())?;
        Ok(got
            .messages
            .iter()
            .filter_map(|m| match &m.content {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n"))
    }

    /// The rag server's prompts: each name with its arguments (name, required), in order.
    pub async fn prompts(&self) -> Vec<(String, Vec<(String, bool)>)> {
        let Some((_, rag)) = self.sessions.iter().find(|(s, _)| *s == Server::Rag) else { return Vec::new() };
        let listed = rag.peer().list_all_prompts().await.unwrap_or_default();
        listed
            .into_iter()
            .map(|p| {
                let args = p.arguments.unwrap_or_default();
                (p.name, args.into_iter().map(|a| (a.name, a.required == Some(true))).collect())
            })
            .collect()
    }

    /// Ends both sessions.
    pub async fn close(self) {
        for (_, s) in self.sessions {
            let _ = s.cancel().await;
        }
    }
}

/// One server on an in-memory session, and the client side of it.
async fn session<S: ServerHandler>(server: S, which: Server) -> Result<RunningService<RoleClient, ()>, Error> {
    let (to_server, server_rx) = futures_channel::mpsc::channel::<RxJsonRpcMessage<rmcp::RoleServer>>(CHANNEL);
    let (to_client, client_rx) = futures_channel::mpsc::channel::<TxJsonRpcMessage<rmcp::RoleServer>>(CHANNEL);
    tokio::spawn(async move {
        match server.serve((to_client, server_rx)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::warn!("the in-process server did not start: {e}"),
        }
    });
    ().serve((to_server, client_rx)).await.map_err(|e| Error::Start(which, e.to_string()))
}
