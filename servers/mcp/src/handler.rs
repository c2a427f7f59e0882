//! What the fs and rag servers answer alike, in one place: their capabilities and
//! server info, and the calls whose answer does not depend on the server
//! ([`shared_calls!`]: resource templates, logging level).

use rmcp::model::{Implementation, ServerCapabilities, ServerConfig, Tool};

/// A server's config: every capability both servers have (tools, resources, prompts,
/// completions, logging), `list_changed` when its tool list can change, its name and
/// version, and its instructions with the tools it offers.
// Logging is deprecated in 2026-07-28 (SEP-2577) and still part of 2025-11-25.
#[allow(deprecated)]
pub(crate) fn server_config(name: String, list_changed: bool, instructions: &str, tools: &[Tool]) -> ServerConfig {
    let caps = ServerCapabilities::builder().enable_tools();
    let caps = if list_changed { caps.enable_tool_list_changed() } else { caps };
    ServerConfig::new(caps.enable_resources().enable_prompts().enable_completions().enable_logging().build())
        .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
        .with_instructions(crate::output::instructions(instructions, tools))
}

/// The `ServerHandler` calls both servers answer the same way, expanded inside each
/// `impl ServerHandler`.
macro_rules! shared_calls {
    () => {
        async fn list_resource_templates(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData> {
            Ok(crate::resources::templates(&context))
        }

        /// Atlas sends no log notifications (its logs go to stderr): any level is
        /// accepted, and none is sent at any level.
        #[allow(deprecated)]
        async fn set_level(
            &self,
            _request: rmcp::model::SetLevelRequestParams,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<(), rmcp::ErrorData> {
            Ok(())
        }
    };
}
pub(crate) use shared_calls;
