//! The tools MCP servers bring (crush(1) MCP SERVERS): each server tool as
//! `mcp_<server>_<tool>` with the server's schema, asking permission with action `execute`; and
//! `list_mcp_resources` and `read_mcp_resource` (actions `list` and `read`), as Go Crush offers
//! them. A tool's result becomes text (structured content, embedded resources and resource links
//! included), its first image travels with it, `isError` makes it an error.

use super::common::{req_str, truncate_middle};
use super::{Image, PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use crate::mcp::Manager;
use serde_json::{Value, json};

/// The most text an MCP result passes to the model, as for the bash tool.
pub(crate) const MAX_OUTPUT_CHARS: usize = super::bash::MAX_OUTPUT_CHARS;

pub(crate) const LIST_RESOURCES: &str = "list_mcp_resources";
pub(crate) const READ_RESOURCE: &str = "read_mcp_resource";

/// Claude Code's name (`mcp__<server>__<tool>`) for the tool crush names `full_name`
/// (`mcp_<server>_<tool>`), where only the name is known; a server tool itself knows both parts.
pub(crate) fn claude_name_of(full_name: &str) -> Option<String> {
    let rest = full_name.strip_prefix("mcp_")?;
    if rest.starts_with('_') {
        return None;
    }
    let (server, tool) = rest.split_once('_')?;
    Some(format!("mcp__{server}__{tool}"))
}

/// The MCP tools of a session, from its servers.
#[derive(Clone)]
pub(crate) struct Mcp {
    manager: Manager,
}

impl Mcp {
    pub(crate) fn new(manager: Manager) -> Mcp {
        Mcp { manager }
    }

    pub(crate) fn manager(&self) -> &Manager {
        &self.manager
    }

    /// The tools to offer now: every tool of the running servers, and the resource tools when
    /// any server is configured.
    pub(crate) fn tools(&self) -> Vec<Box<dyn Tool>> {
        let mut out: Vec<Box<dyn Tool>> = Vec::new();
        if self.manager.has_servers() {
            out.push(Box::new(ListResources {
                manager: self.manager.clone(),
            }));
            out.push(Box::new(ReadResource {
                manager: self.manager.clone(),
            }));
        }
        for tool in self.manager.tools() {
            out.push(Box::new(McpTool {
                manager: self.manager.clone(),
                tool,
            }));
        }
        out
    }
}

/// The permission an MCP call needs: the user decides for every server call (as in Go Crush).
fn ask(
    tool: &str,
    action: &'static str,
    ctx: &ToolCtx,
    description: String,
) -> Result<Option<PermissionRequest>, ToolError> {
    Ok(Some(PermissionRequest {
        tool: tool.to_string(),
        action,
        path: ctx.cwd.to_path_buf(),
        description,
        diff: None,
        ..Default::default()
    }))
}

struct McpTool {
    manager: Manager,
    tool: crate::mcp::Tool,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.tool.full_name
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Other
    }

    /// A server's tool may do anything.
    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some(format!("mcp__{}__{}", self.tool.server, self.tool.mcp_name))
    }

    fn description(&self) -> String {
        self.tool.description.clone()
    }

    fn schema(&self) -> Value {
        self.tool.schema.clone()
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        ask(
            &self.tool.full_name,
            "execute",
            ctx,
            format!(
                "execute {} with the following parameters: {input}",
                self.tool.full_name
            ),
        )
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let r = self
            .manager
            .call_tool(&self.tool, input, Some(&ctx.cancel))
            .map_err(|e| ToolError::RespondToModel(e.to_string()))?;
        let mut out = result_output(&r);
        out.metadata = json!({"mcp_server": self.tool.server, "mcp_tool": self.tool.mcp_name});
        // Hooks in Claude Code's shape get the server's result as it came.
        out.structured = r;
        Ok(out)
    }
}

/// The size of base64 `data` once decoded, if it is base64.
fn decoded_len(data: &str) -> Option<usize> {
    crate::llm::base64_decode(data).map(|b| b.len())
}

/// The text (and first image) of the content blocks of a tool result or a resource read.
struct Collected {
    texts: Vec<String>,
    image: Option<Image>,
}

impl Collected {
    fn new() -> Collected {
        Collected {
            texts: Vec::new(),
            image: None,
        }
    }

    /// An image (base64 `data`): the first one goes with the result, the others are named.
    fn image(&mut self, mime: &str, data: &str, what: &str) {
        let clean: String = data.chars().filter(|c| !c.is_whitespace()).collect();
        match decoded_len(&clean) {
            Some(_) if self.image.is_none() && mime.starts_with("image/") => {
                self.image = Some(Image {
                    mime_type: mime.to_string(),
                    data: clean,
                });
            }
            Some(n) => self.texts.push(format!(
                "[{what} ({mime}, {n} bytes) not shown: one image per result is passed on]"
            )),
            None => self
                .texts
                .push(format!("[{what} ({mime}) could not be decoded]")),
        }
    }

    /// One embedded resource (`{uri, mimeType, text | blob}`).
    fn resource(&mut self, r: &Value) {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
        let (uri, mime) = (s("uri"), s("mimeType"));
        if let Some(text) = r.get("text").and_then(Value::as_str) {
            self.texts.push(format!("[resource {uri}]\n{text}"));
        } else if let Some(blob) = r.get("blob").and_then(Value::as_str) {
            if mime.starts_with("image/") {
                self.image(mime, blob, &format!("image resource {uri}"));
            } else {
                match crate::llm::base64_decode(blob).map(String::from_utf8) {
                    Some(Ok(text)) if !super::common::looks_binary(text.as_bytes()) => {
                        self.texts.push(format!("[resource {uri}]\n{text}"))
                    }
                    Some(Ok(text)) => self.texts.push(format!(
                        "[resource {uri} ({}, {} bytes of binary data)]",
                        if mime.is_empty() { "binary" } else { mime },
                        text.len()
                    )),
                    Some(Err(e)) => self.texts.push(format!(
                        "[resource {uri} ({}, {} bytes of binary data)]",
                        if mime.is_empty() { "binary" } else { mime },
                        e.as_bytes().len()
                    )),
                    None => self
                        .texts
                        .push(format!("[resource {uri}: its data could not be decoded]")),
                }
            }
        } else {
            self.texts.push(format!("[resource {uri}]"));
        }
    }

    fn block(&mut self, b: &Value) {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("");
        match s("type") {
            "text" => self.texts.push(s("text").to_string()),
            "image" => self.image(s("mimeType"), s("data"), "image"),
            "audio" => {
                let n = decoded_len(s("data")).unwrap_or(0);
                self.texts
                    .push(format!("[audio ({}, {n} bytes) not shown]", s("mimeType")));
            }
            "resource" => {
                if let Some(r) = b.get("resource") {
                    self.resource(r);
                }
            }
            "resource_link" => {
                let mut line = format!("[resource link] {}", s("uri"));
                let name = b.get("title").and_then(Value::as_str).unwrap_or(s("name"));
                if !name.is_empty() {
                    line.push_str(&format!(" ({name})"));
                }
                if !s("mimeType").is_empty() {
                    line.push_str(&format!(" [{}]", s("mimeType")));
                }
                if !s("description").is_empty() {
                    line.push_str(&format!(": {}", s("description")));
                }
                self.texts.push(line);
            }
            _ => self.texts.push(b.to_string()),
        }
    }

    fn output(self, is_error: bool) -> ToolOutput {
        let text = self.texts.join("\n");
        ToolOutput {
            content: truncate_middle(&text, MAX_OUTPUT_CHARS, 0),
            is_error,
            image: self.image,
            ..Default::default()
        }
    }
}

/// A `CallToolResult` as a tool output.
pub(crate) fn result_output(r: &Value) -> ToolOutput {
    let mut c = Collected::new();
    for b in r
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        c.block(b);
    }
    // Structured content stands in for text a server did not send alongside it.
    if c.texts.iter().all(|t| t.trim().is_empty())
        && let Some(sc) = r.get("structuredContent").filter(|v| !v.is_null())
    {
        c.texts
            .push(serde_json::to_string_pretty(sc).unwrap_or_else(|_| sc.to_string()));
    }
    let is_error = r.get("isError").and_then(Value::as_bool).unwrap_or(false);
    c.output(is_error)
}

/// The configured server names, for the resource tools' schemas.
fn server_names(manager: &Manager) -> Vec<String> {
    manager.statuses().into_iter().map(|s| s.name).collect()
}

fn server_schema(manager: &Manager, extra: Option<(&str, &str)>) -> Value {
    let mut props = json!({
        "mcp_name": {"type": "string", "description": "The MCP server name",
                     "enum": server_names(manager)}
    });
    let mut required = vec!["mcp_name"];
    if let Some((k, d)) = extra {
        props[k] = json!({"type": "string", "description": d});
        required.push(k);
    }
    json!({"type": "object", "properties": props, "required": required})
}

struct ListResources {
    manager: Manager,
}

impl Tool for ListResources {
    fn name(&self) -> &str {
        LIST_RESOURCES
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Search
    }

    /// It asks the MCP servers, which may be remote.
    fn read_only(&self) -> bool {
        false
    }

    fn description(&self) -> String {
        "List available resource URIs from an MCP server by name; use before read_mcp_resource."
            .into()
    }

    fn schema(&self) -> Value {
        server_schema(&self.manager, None)
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let name = req_str(input, "mcp_name")?.trim();
        ask(
            LIST_RESOURCES,
            "list",
            ctx,
            format!("List MCP resources from {name}"),
        )
    }

    fn run(&self, input: &Value, _ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let name = req_str(input, "mcp_name")?.trim();
        let resources = self
            .manager
            .list_resources(name)
            .map_err(|e| ToolError::RespondToModel(e.to_string()))?;
        if resources.is_empty() {
            return Ok(ToolOutput {
                content: "No resources found".into(),
                ..Default::default()
            });
        }
        let mut lines: Vec<String> = resources
            .iter()
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                let title = [s("title"), s("name"), s("uri")]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or("");
                let mut line = format!("- {title}");
                if !s("uri").is_empty() {
                    line.push_str(&format!(" ({})", s("uri")));
                }
                if !s("description").is_empty() {
                    line.push_str(&format!(": {}", s("description")));
                }
                if !s("mimeType").is_empty() {
                    line.push_str(&format!(" [mime: {}]", s("mimeType")));
                }
                if let Some(n) = r.get("size").and_then(Value::as_u64).filter(|n| *n > 0) {
                    line.push_str(&format!(" [size: {n}]"));
                }
                line
            })
            .collect();
        lines.sort();
        Ok(ToolOutput {
            content: truncate_middle(&lines.join("\n"), MAX_OUTPUT_CHARS, 0),
            ..Default::default()
        })
    }
}

struct ReadResource {
    manager: Manager,
}

impl Tool for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    /// It asks the MCP servers, which may be remote.
    fn read_only(&self) -> bool {
        false
    }

    fn description(&self) -> String {
        "Read a resource by URI from an MCP server; returns text content.".into()
    }

    fn schema(&self) -> Value {
        server_schema(&self.manager, Some(("uri", "The resource URI to read")))
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let name = req_str(input, "mcp_name")?.trim();
        let uri = req_str(input, "uri")?.trim();
        ask(
            READ_RESOURCE,
            "read",
            ctx,
            format!("Read MCP resource {uri} from {name}"),
        )
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let name = req_str(input, "mcp_name")?.trim();
        let uri = req_str(input, "uri")?.trim();
        let contents = self
            .manager
            .read_resource(name, uri, Some(&ctx.cancel))
            .map_err(|e| ToolError::RespondToModel(e.to_string()))?;
        let mut c = Collected::new();
        for r in &contents {
            // Read contents carry no `[resource uri]` header when there is only one.
            match (contents.len(), r.get("text").and_then(Value::as_str)) {
                (1, Some(text)) => c.texts.push(text.to_string()),
                _ => c.resource(r),
            }
        }
        Ok(c.output(false))
    }
}

/// The MCP tools as a session with one server and its `tool` has them, over no running server.
#[cfg(test)]
pub(crate) fn described(tool: crate::mcp::Tool) -> Vec<Box<dyn Tool>> {
    struct NoTokens;
    impl crate::mcp::TokenStore for NoTokens {
        fn load(&self, _: &str) -> Option<Value> {
            None
        }
        fn save(&self, _: &str, _: Option<&Value>) {}
    }
    let manager = Manager::new(
        "/".into(),
        std::sync::Arc::new(NoTokens),
        Default::default(),
    );
    vec![
        Box::new(ListResources {
            manager: manager.clone(),
        }),
        Box::new(ReadResource {
            manager: manager.clone(),
        }),
        Box::new(McpTool { manager, tool }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    #[test]
    fn results_become_text_and_one_image() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": PNG},
            {"type": "image", "mimeType": "image/png", "data": PNG},
            {"type": "image", "mimeType": "image/png", "data": "***"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAEC"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "the c file"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}
        ]});
        let out = result_output(&r);
        assert!(!out.is_error);
        let img = out.image.unwrap();
        assert_eq!(img.mime_type, "image/png");
        assert_eq!(img.data, PNG);
        let t = out.content;
        assert!(t.starts_with("hello\n"), "{t}");
        assert!(t.contains("[image (image/png, 70 bytes) not shown"), "{t}");
        assert!(
            t.contains("[image (image/png) could not be decoded]"),
            "{t}"
        );
        assert!(t.contains("[resource file:///a.txt]\nA"), "{t}");
        assert!(
            t.contains("[resource file:///b.bin (binary, 3 bytes of binary data)]"),
            "{t}"
        );
        assert!(
            t.contains("[resource link] file:///c (c): the c file"),
            "{t}"
        );
        assert!(t.contains("[audio (audio/wav, 3 bytes) not shown]"), "{t}");
    }

    #[test]
    fn structured_content_errors_and_caps() {
        let out = result_output(&json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(out.content, "{\n  \"sum\": 3\n}");
        let out = result_output(&json!({"content": [{"type": "text", "text": "7"}],
            "structuredContent": {"sum": 7}}));
        assert_eq!(out.content, "7");
        let out =
            result_output(&json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert!(out.is_error);
        let big = "x".repeat(MAX_OUTPUT_CHARS * 2);
        let out = result_output(&json!({"content": [{"type": "text", "text": big}]}));
        assert!(out.content.len() < MAX_OUTPUT_CHARS + 100);
        assert!(out.content.contains("characters truncated"));
    }
}
