//! What crush's values look like in ACP: a prompt's content blocks as the prompt text and its
//! attachments, tool calls as `tool_call` updates (kind, title, locations, content, diffs), a
//! stored session as the updates that replay it, and the `todos` tool's list as a plan.

use crate::llm::{Part, Role};
use crate::mcp::{ServerSpec, TransportSpec};
use crate::store::StoredMessage;
use crate::tools::common::{arg, shown_path, truncate_middle};
use crate::tools::write::FileChange;
use crate::tools::{CallView, LoopTool, RunMode, Tool, todos};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// A tool result longer than this is cut in the middle before it is shown in the editor (the
/// model and the store have it whole).
const SHOWN_RESULT: usize = 64 * 1024;

/// The `tool_call` update that announces a call, as its tool describes it (`view`).
pub(super) fn tool_call(id: &str, input: &Value, view: &CallView, status: &str) -> Value {
    let locations: Vec<Value> = view
        .locations
        .iter()
        .map(|l| {
            let mut loc = json!({"path": l.path.display().to_string()});
            if let Some(line) = l.line {
                loc["line"] = json!(line);
            }
            loc
        })
        .collect();
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": view.title,
        "kind": view.kind.acp_name(),
        "status": status,
        "locations": locations,
        "rawInput": input,
    })
}

/// `text` in a Markdown code block whose fence no line of it can close.
pub(super) fn fenced(text: &str, lang: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.strip_suffix('\n').unwrap_or(text);
    format!("{fence}{lang}\n{body}\n{fence}")
}

/// A text content block of a tool call.
pub(super) fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// What the editor shows of a finished call: the diffs of the files it changed (the content
/// crush wrote), else its result (cut when long; in a code block but for a sub-agent's prose).
pub(super) fn result_content(view: &CallView, content: &str, changes: &[FileChange]) -> Vec<Value> {
    if !changes.is_empty() {
        return changes
            .iter()
            .map(|c| {
                json!({"type": "diff", "path": c.path.display().to_string(),
                    "oldText": c.old, "newText": c.new})
            })
            .collect();
    }
    if content.trim().is_empty() {
        return Vec::new();
    }
    let shown = truncate_middle(content, SHOWN_RESULT, 0);
    let text = if view.runs == RunMode::Loop(LoopTool::SubAgent) {
        shown
    } else {
        fenced(&shown, "")
    };
    vec![text_content(&text)]
}

/// The `todos` tool's list as the editor's plan; None for any other call, or one that failed.
pub(super) fn plan(name: &str, input: &Value, is_error: bool) -> Option<Value> {
    if name != todos::NAME || is_error {
        return None;
    }
    // Some models send the array as a JSON string; the tool takes that too.
    let list = match input.get("todos")? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    let entries: Vec<Value> = list
        .as_array()?
        .iter()
        .filter_map(|t| {
            let content = arg(t, "content")?;
            let status = t
                .get("status")
                .and_then(Value::as_str)
                .filter(|s| matches!(*s, "pending" | "in_progress" | "completed"))
                .unwrap_or("pending");
            Some(json!({"content": content, "priority": "medium", "status": status}))
        })
        .collect();
    Some(json!({"sessionUpdate": "plan", "entries": entries}))
}

/// The command that lists the agent files (crush(1) ACP).
pub(super) const AGENTS_COMMAND: &str = "agents";

/// The commands the editor offers after `/` (`available_commands_update`): the custom
/// commands, user-invocable skills and MCP prompts (crush(1) SKILLS AND COMMANDS), and
/// `/agents` when `agents` (agent files were found) and no command has that name. Empty: no
/// update is sent.
pub(super) fn available_commands(
    cat: &crate::skills::catalog::Catalog,
    agents: bool,
) -> Vec<Value> {
    let ours = (agents && !cat.entries.iter().any(|e| e.name == AGENTS_COMMAND)).then(|| {
        json!({"name": AGENTS_COMMAND,
            "description": "List the custom sub-agents the agent tool may run, and the agent files not used"})
    });
    cat.entries
        .iter()
        .map(|e| {
            let mut c = json!({"name": e.name, "description": e.description()});
            // The arguments, shown where they are to be typed.
            let usage = e.usage();
            let args = usage
                .strip_prefix(&format!("/{}", e.name))
                .unwrap_or(&usage)
                .trim();
            if !args.is_empty() {
                c["input"] = json!({"hint": args});
            }
            c
        })
        .chain(ours)
        .collect()
}

/// A `/NAME` prompt whose command, skill or MCP prompt cannot take it: that command's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CommandError(pub String);

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CommandError {}

/// What a prompt becomes before the turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expanded {
    /// The text sent to the model.
    Text(String),
    /// A Claude Code command whose `` !`cmd` `` run first, each as the bash tool runs a
    /// command (its full name, its pieces; crush(1) SKILLS AND COMMANDS).
    Shell {
        name: String,
        segments: Vec<crate::skills::catalog::Segment>,
    },
}

/// A prompt whose first word names a command, skill or MCP prompt (`/NAME ARGS`, as in
/// `crush run`; `//` escapes a leading slash) becomes what that command sends; anything else
/// is the prompt as typed. With it, the fork of an entry whose frontmatter says
/// `context: fork` (crush(1) SKILLS AND COMMANDS, Forked skills).
pub(super) fn expand_command(
    text: &str,
    cat: &crate::skills::catalog::Catalog,
    mcp: Option<&crate::mcp::Manager>,
) -> Result<(Expanded, Option<crate::skills::fork::Fork>), CommandError> {
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix("//") {
        return Ok((Expanded::Text(format!("/{rest}")), None));
    }
    let Some(line) = trimmed.strip_prefix('/') else {
        return Ok((Expanded::Text(text.to_string()), None));
    };
    let (name, raw) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let words = crate::config::commands::split_words(raw)
        .unwrap_or_else(|_| raw.split_whitespace().map(str::to_string).collect());
    // What the skills say is wrong, as they say it.
    let found = crate::skills::catalog::for_run(cat, name, words, raw)
        .map_err(|e| CommandError(e.to_string()))?;
    let Some((entry, bound)) = found else {
        return Ok((Expanded::Text(text.to_string()), None));
    };
    let expanded = match entry.shell_segments(&bound) {
        Some(segments) => Expanded::Shell {
            name: entry.name.clone(),
            segments,
        },
        None => entry
            .render(&bound, mcp)
            .map(Expanded::Text)
            .map_err(|e| CommandError(e.to_string()))?,
    };
    Ok((expanded, entry.fork().cloned()))
}

/// Why the editor's `mcpServers` cannot be started as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum BadServers {
    NotArray,
    NoName,
    /// The server (its name) lacks a field (its key).
    Missing(String, String),
    /// An `env` or `headers` entry (which of them) without a name and a value.
    BadPair(&'static str),
    /// The server (its name) has a `type` crush does not know.
    UnknownType(String, String),
}

impl std::fmt::Display for BadServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadServers::NotArray => f.write_str("\"mcpServers\" must be an array"),
            BadServers::NoName => f.write_str("an MCP server needs a name"),
            BadServers::Missing(name, k) => write!(f, "MCP server '{name}' needs \"{k}\""),
            BadServers::BadPair(what) => write!(f, "each of {what} needs a name and a value"),
            BadServers::UnknownType(name, other) => write!(
                f,
                "MCP server '{name}': unknown type \"{other}\" (stdio, http or sse)"
            ),
        }
    }
}

impl std::error::Error for BadServers {}

/// The editor's MCP servers (`mcpServers` of `session/new` and `session/load`) as crush starts
/// them: like configured ones, with their values as given (nothing is expanded).
pub(super) fn mcp_servers(list: &Value, cwd: &Path) -> Result<Vec<ServerSpec>, BadServers> {
    let Some(list) = list.as_array() else {
        return Err(BadServers::NotArray);
    };
    let pairs =
        |v: Option<&Value>, what: &'static str| -> Result<Vec<(String, String)>, BadServers> {
            let mut out = Vec::new();
            for p in v
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                match (
                    p.get("name").and_then(Value::as_str),
                    p.get("value").and_then(Value::as_str),
                ) {
                    (Some(n), Some(v)) => out.push((n.to_string(), v.to_string())),
                    _ => return Err(BadServers::BadPair(what)),
                }
            }
            Ok(out)
        };
    let mut out: Vec<ServerSpec> = Vec::new();
    for s in list {
        let name = s
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .ok_or(BadServers::NoName)?;
        let field = |k: &str| {
            s.get(k)
                .and_then(Value::as_str)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| BadServers::Missing(name.to_string(), k.to_string()))
        };
        let transport = match s.get("type").and_then(Value::as_str) {
            None | Some("stdio") => TransportSpec::Stdio(crate::mcp::Command {
                command: field("command")?.to_string(),
                args: s
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                env: pairs(s.get("env"), "env")?,
                cwd: cwd.to_path_buf(),
            }),
            Some(kind @ ("http" | "sse")) => {
                let url = field("url")?.to_string();
                let headers = pairs(s.get("headers"), "headers")?;
                if kind == "sse" {
                    TransportSpec::Sse { url, headers }
                } else {
                    TransportSpec::Http { url, headers }
                }
            }
            Some(other) => {
                return Err(BadServers::UnknownType(name.to_string(), other.to_string()));
            }
        };
        out.retain(|o| o.name != name);
        out.push(ServerSpec {
            name: name.to_string(),
            transport,
            timeout: crate::config::mcp::DEFAULT_TIMEOUT,
            enabled_tools: Vec::new(),
            disabled_tools: Vec::new(),
            disabled: false,
            oauth: false,
            oauth_client: Default::default(),
            check: Default::default(),
        });
    }
    Ok(out)
}

/// The local path of a `file://` URI (None for any other scheme).
pub(super) fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x`; a query or fragment (a selection) is not the path.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let path = rest.split(['?', '#']).next().unwrap_or(rest);
    // Not form encoding: a `+` in a path is a plus.
    let decoded = crate::mcp::percent_decode(&path.replace('+', "%2B"));
    decoded.starts_with('/').then(|| PathBuf::from(decoded))
}

/// How the prompt text names a resource: `@path` for a file (relative to `cwd` inside it),
/// else `[name](uri)`.
fn mention(uri: &str, name: &str, cwd: &Path) -> String {
    match file_path(uri) {
        Some(p) => format!("@{}", shown_path(cwd, &p.display().to_string())),
        None if name.is_empty() => format!("<{uri}>"),
        None => format!("[{name}]({uri})"),
    }
}

/// What an attachment is called: its path (relative inside `cwd`), else its URI.
fn attachment_name(uri: &str, cwd: &Path) -> String {
    match file_path(uri) {
        Some(p) => shown_path(cwd, &p.display().to_string()),
        None => uri.to_string(),
    }
}

/// Why an editor's prompt is not one crush can take; blocks are numbered from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum BadPrompt {
    NotArray,
    /// A block (its number) lacks a field (its key).
    Missing(usize, String),
    /// A `resource` block without a `uri`.
    NoUri(usize),
    /// A `resource` block with neither `text` nor `blob`.
    NoContent(usize),
    NotBase64(usize),
    Audio(usize),
    UnknownType(usize, String),
    NoType(usize),
    Empty,
}

impl std::fmt::Display for BadPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadPrompt::NotArray => f.write_str("\"prompt\" must be an array of content blocks"),
            BadPrompt::Missing(n, k) => write!(f, "prompt block {n}: \"{k}\" is missing"),
            BadPrompt::NoUri(n) => write!(f, "prompt block {n}: the resource has no \"uri\""),
            BadPrompt::NoContent(n) => write!(
                f,
                "prompt block {n}: the resource has neither \"text\" nor \"blob\""
            ),
            BadPrompt::NotBase64(n) => write!(f, "prompt block {n}: the image is not base64"),
            BadPrompt::Audio(n) => write!(
                f,
                "prompt block {n}: audio is not supported (the prompt capabilities say so)"
            ),
            BadPrompt::UnknownType(n, other) => {
                write!(f, "prompt block {n}: unknown content type \"{other}\"")
            }
            BadPrompt::NoType(n) => write!(f, "prompt block {n}: \"type\" is missing"),
            BadPrompt::Empty => f.write_str("the prompt is empty"),
        }
    }
}

impl std::error::Error for BadPrompt {}

/// A prompt's content blocks as the prompt text and its attachments: text as it is, a
/// resource link as a mention, an embedded resource as a mention and an attached file, an
/// image as an attached image. Err: the blocks are not a prompt crush can take.
pub(super) fn prompt(blocks: &Value, cwd: &Path) -> Result<(String, Vec<Part>), BadPrompt> {
    let Some(blocks) = blocks.as_array() else {
        return Err(BadPrompt::NotArray);
    };
    let mut text = String::new();
    let mut attachments = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let field = |k: &str| b.get(k).and_then(Value::as_str);
        let n = i + 1;
        let need = |k: &str| field(k).ok_or_else(|| BadPrompt::Missing(n, k.to_string()));
        match field("type") {
            Some("text") => text.push_str(need("text")?),
            Some("resource_link") => {
                text.push_str(&mention(need("uri")?, field("name").unwrap_or(""), cwd))
            }
            Some("resource") => {
                let r = b.get("resource").unwrap_or(&Value::Null);
                let rf = |k: &str| r.get(k).and_then(Value::as_str);
                let uri = rf("uri").ok_or(BadPrompt::NoUri(n))?;
                let (mime, data) = match (rf("text"), rf("blob")) {
                    (Some(t), _) => (
                        rf("mimeType").unwrap_or("text/plain"),
                        crate::mcp::base64(t.as_bytes()),
                    ),
                    (None, Some(blob)) => (
                        rf("mimeType").unwrap_or("application/octet-stream"),
                        blob.to_string(),
                    ),
                    (None, None) => {
                        return Err(BadPrompt::NoContent(n));
                    }
                };
                text.push_str(&mention(uri, "", cwd));
                attachments.push(Part::Binary {
                    path: attachment_name(uri, cwd),
                    mime_type: mime.to_string(),
                    data,
                });
            }
            Some("image") => {
                let data = need("data")?;
                if crate::llm::base64_decode(data).is_none() {
                    return Err(BadPrompt::NotBase64(n));
                }
                attachments.push(Part::Binary {
                    path: field("uri")
                        .map(|u| attachment_name(u, cwd))
                        .unwrap_or_else(|| format!("image-{}", attachments.len() + 1)),
                    mime_type: need("mimeType")?.to_string(),
                    data: data.to_string(),
                });
            }
            Some("audio") => {
                return Err(BadPrompt::Audio(n));
            }
            Some(other) => {
                return Err(BadPrompt::UnknownType(n, other.to_string()));
            }
            None => return Err(BadPrompt::NoType(n)),
        }
    }
    if text.trim().is_empty() && attachments.is_empty() {
        return Err(BadPrompt::Empty);
    }
    Ok((text, attachments))
}

/// A stored attachment as a content block.
fn attachment_block(path: &str, mime: &str, data: &str) -> Value {
    if mime.starts_with("image/") {
        return json!({"type": "image", "mimeType": mime, "data": data});
    }
    let uri = if path.starts_with('/') {
        format!("file://{path}")
    } else {
        path.to_string()
    };
    let text = crate::llm::base64_decode(data).and_then(|b| String::from_utf8(b).ok());
    match text {
        Some(t) if mime.starts_with("text/") => {
            json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": t}})
        }
        _ => json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": data}}),
    }
}

fn chunk(kind: &str, content: Value) -> Value {
    json!({"sessionUpdate": kind, "content": content})
}

fn text_chunk(kind: &str, text: &str) -> Value {
    chunk(kind, json!({"type": "text", "text": text}))
}

/// The updates that show a stored session as it went: the user's prompts and attachments, the
/// answers, thoughts and tool calls with their results.
pub(super) fn replay(messages: &[StoredMessage], cwd: &Path, tools: &[&dyn Tool]) -> Vec<Value> {
    // Each call's results by call id, in order: a provider may use one id in several steps.
    let mut results: HashMap<String, VecDeque<Value>> = HashMap::new();
    // The ids the editor was given, so that a reused one is told apart.
    let mut shown: HashMap<String, usize> = HashMap::new();
    for m in messages {
        for p in &m.parts {
            if let Part::ToolResult {
                tool_call_id,
                content,
                metadata,
                is_error,
                ..
            } = p
            {
                results.entry(tool_call_id.clone()).or_default().push_back(
                    json!({"content": content, "is_error": is_error,
                        "diff": serde_json::from_str::<Value>(metadata).ok()
                            .and_then(|m| m.get("diff").and_then(Value::as_str).map(str::to_string))}),
                );
            }
        }
    }
    let mut out = Vec::new();
    for m in messages {
        for p in &m.parts {
            match (m.role, p) {
                (Role::User, Part::Text { text })
                    if !text.trim().is_empty() && !text.starts_with("<hook-context>") =>
                {
                    out.push(text_chunk("user_message_chunk", text));
                }
                (
                    Role::User,
                    Part::Binary {
                        path,
                        mime_type,
                        data,
                    },
                ) => out.push(chunk(
                    "user_message_chunk",
                    attachment_block(path, mime_type, data),
                )),
                (
                    Role::User,
                    Part::ShellCommand {
                        command, output, ..
                    },
                ) => out.push(text_chunk(
                    "user_message_chunk",
                    &format!("!{command}\n{}", fenced(output, "")),
                )),
                (Role::Assistant, Part::Text { text }) if !text.is_empty() => {
                    out.push(text_chunk("agent_message_chunk", text));
                }
                (Role::Assistant, Part::Reasoning { thinking, .. }) if !thinking.is_empty() => {
                    out.push(text_chunk("agent_thought_chunk", thinking));
                }
                (
                    Role::Assistant,
                    Part::ToolCall {
                        id, name, input, ..
                    },
                ) => {
                    let input: Value = serde_json::from_str(input).unwrap_or(json!({}));
                    let r = results.get_mut(id).and_then(VecDeque::pop_front);
                    let r = r.as_ref();
                    let seen = shown.entry(id.clone()).or_default();
                    *seen += 1;
                    let id = &match *seen {
                        1 => id.clone(),
                        n => format!("{id}#{n}"),
                    };
                    let status = match r {
                        Some(r) if r["is_error"] == true => "failed",
                        Some(_) => "completed",
                        None => "failed",
                    };
                    let view = match crate::tools::find(tools, name) {
                        Some(t) => CallView::of(t, &input, cwd),
                        None => CallView::unknown(name),
                    };
                    let mut call = tool_call(id, &input, &view, status);
                    let content = r.map(|r| match r["diff"].as_str() {
                        Some(d) if r["is_error"] != true => vec![text_content(&fenced(d, "diff"))],
                        _ => result_content(&view, r["content"].as_str().unwrap_or(""), &[]),
                    });
                    call["content"] = json!(content.unwrap_or_default());
                    out.push(call);
                    if let Some(plan) = plan(name, &input, status == "failed") {
                        out.push(plan);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in tools, as a session has them.
    fn session_tools() -> Vec<&'static dyn Tool> {
        let tools: &'static [Box<dyn Tool>] = Box::leak(every_tool().into_boxed_slice());
        tools.iter().map(|t| t.as_ref()).collect()
    }

    /// Every tool a session may have, LSP ones included.
    fn every_tool() -> Vec<Box<dyn Tool>> {
        crate::agent::subagent::main_agent_tools(&[], None)
            .into_iter()
            .chain(crate::tools::lsp::Lsp::described())
            .collect()
    }

    fn view_of(name: &str, input: &Value, cwd: &Path) -> CallView {
        let tools = every_tool();
        let t = tools.iter().find(|t| t.name() == name).unwrap();
        CallView::of(t.as_ref(), input, cwd)
    }

    #[test]
    fn calls_are_named_for_the_editor() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let input = json!({"file_path": "src/a.rs", "offset": 9});
        let c = tool_call("t1", &input, &view_of("view", &input, &cwd), "pending");
        assert_eq!(c["title"], "Read src/a.rs");
        assert_eq!(c["kind"], "read");
        assert_eq!(
            c["locations"],
            json!([{"path": cwd.join("src/a.rs").display().to_string(), "line": 10}])
        );
        let title = |name: &str, input: Value| view_of(name, &input, &cwd).title;
        let kind = |name: &str| view_of(name, &json!({}), &cwd).kind.acp_name();
        assert_eq!(
            title("bash", json!({"command": "cargo test\necho done"})),
            "cargo test…"
        );
        assert_eq!(kind("bash"), "execute");
        assert_eq!(title("edit", json!({"file_path": "/etc/x"})), "Edit /etc/x");
        assert_eq!(CallView::unknown("mcp_fs_read").kind.acp_name(), "other");
        assert_eq!(title("ls", json!({})), "List .");
        assert!(
            view_of("bash", &json!({"command": "ls"}), &cwd)
                .locations
                .is_empty()
        );
    }

    #[test]
    fn lsp_rename_and_download_show_as_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let call = |id: &str, name: &str, input: &str| Part::ToolCall {
            id: id.into(),
            name: name.into(),
            input: input.into(),
            provider_executed: false,
            finished: true,
        };
        let msgs = vec![StoredMessage {
            id: String::new(),
            session_id: String::new(),
            seq: 0,
            role: Role::Assistant,
            parts: vec![
                call(
                    "r",
                    "lsp_rename",
                    r#"{"symbol":"old","new_name":"new","path":"src/a.rs"}"#,
                ),
                call(
                    "d",
                    "download",
                    r#"{"url":"http://h/x.tgz","file_path":"x.tgz"}"#,
                ),
            ],
            model: None,
            provider: None,
            created_at: 0,
        }];
        let tools = every_tool();
        let tools: Vec<&dyn Tool> = tools.iter().map(|t| t.as_ref()).collect();
        let u = replay(&msgs, &cwd, &tools);
        assert_eq!(u[0]["kind"], "edit");
        assert_eq!(u[0]["title"], "Rename old to new");
        assert_eq!(
            u[0]["locations"][0]["path"],
            cwd.join("src/a.rs").display().to_string()
        );
        assert_eq!(u[1]["kind"], "fetch");
        assert_eq!(u[1]["title"], "Download http://h/x.tgz to x.tgz");
        // Without the session's tools, a call is only its name.
        let u = replay(&msgs, &cwd, &[]);
        assert_eq!(
            (u[0]["kind"].as_str(), u[0]["title"].as_str()),
            (Some("other"), Some("lsp_rename"))
        );
    }

    #[test]
    fn a_fence_is_never_closed_by_the_text() {
        assert_eq!(fenced("a\n", ""), "```\na\n```");
        assert_eq!(fenced("x ``` y", "diff"), "````diff\nx ``` y\n````");
    }

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_path("file:///a%20b/c+d.rs#L3"),
            Some(PathBuf::from("/a b/c+d.rs"))
        );
        assert_eq!(file_path("file://localhost/x"), Some(PathBuf::from("/x")));
        assert_eq!(file_path("https://x/y"), None);
        assert_eq!(file_path("file://relative"), None);
    }

    #[test]
    fn prompt_blocks_become_text_and_attachments() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let uri = format!("file://{}/src/main.rs", cwd.display());
        let blocks = json!([
            {"type": "text", "text": "look at "},
            {"type": "resource", "resource": {"uri": uri, "text": "fn main() {}"}},
            {"type": "text", "text": " and "},
            {"type": "resource_link", "uri": "file:///etc/hosts", "name": "hosts"},
            {"type": "resource_link", "uri": "https://x.org/a", "name": "a"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        ]);
        let (text, att) = prompt(&blocks, &cwd).unwrap();
        assert_eq!(
            text,
            "look at @src/main.rs and @/etc/hosts[a](https://x.org/a)"
        );
        assert_eq!(att.len(), 2);
        assert_eq!(
            att[0],
            Part::Binary {
                path: "src/main.rs".into(),
                mime_type: "text/plain".into(),
                data: crate::mcp::base64(b"fn main() {}")
            }
        );
        assert!(
            matches!(&att[1], Part::Binary { mime_type, path, .. } if mime_type == "image/png" && path == "image-2")
        );
        for bad in [
            json!([]),
            json!([{"type": "text", "text": "  "}]),
            json!([{"type": "audio", "mimeType": "audio/wav", "data": ""}]),
            json!([{"type": "video"}]),
            json!([{"text": "x"}]),
            json!([{"type": "image", "mimeType": "image/png", "data": "***"}]),
            json!({"type": "text"}),
        ] {
            assert!(prompt(&bad, &cwd).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_editors_mcp_servers_are_taken_as_given() {
        let cwd = Path::new("/p");
        let s = mcp_servers(
            &json!([
                {"name": "fs", "command": "npx", "args": ["-y", "$HOME"],
                 "env": [{"name": "ROOT", "value": "$(x)"}]},
                {"type": "http", "name": "web", "url": "https://x/mcp",
                 "headers": [{"name": "Authorization", "value": "Bearer t"}]},
                {"type": "sse", "name": "old", "url": "https://x/sse", "headers": []}
            ]),
            cwd,
        )
        .unwrap();
        assert_eq!(
            s[0].transport,
            TransportSpec::Stdio(crate::mcp::Command {
                command: "npx".into(),
                args: vec!["-y".into(), "$HOME".into()],
                env: vec![("ROOT".into(), "$(x)".into())],
                cwd: cwd.into()
            })
        );
        assert!(
            matches!(&s[1].transport, TransportSpec::Http { headers, .. } if headers[0].1 == "Bearer t")
        );
        assert!(matches!(&s[2].transport, TransportSpec::Sse { .. }));
        for bad in [
            json!({}),
            json!([{"command": "x"}]),
            json!([{"name": "x"}]),
            json!([{"name": "x", "type": "ws", "url": "u"}]),
            json!([{"name": "x", "command": "c", "env": [{"name": "A"}]}]),
        ] {
            assert!(mcp_servers(&bad, cwd).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_todos_list_is_a_plan() {
        let input = json!({"todos": [
            {"content": "write tests", "status": "completed", "active_form": "Writing tests"},
            {"content": "fix bug", "status": "in_progress"},
            {"content": "", "status": "pending"},
            {"content": "ship", "status": "odd"}
        ]});
        let p = plan("todos", &input, false).unwrap();
        assert_eq!(
            p["entries"],
            json!([
                {"content": "write tests", "priority": "medium", "status": "completed"},
                {"content": "fix bug", "priority": "medium", "status": "in_progress"},
                {"content": "ship", "priority": "medium", "status": "pending"}
            ])
        );
        let as_text = json!({"todos": input["todos"].to_string()});
        assert_eq!(plan("todos", &as_text, false), Some(p));
        assert!(plan("todos", &input, true).is_none());
        assert!(plan("bash", &input, false).is_none());
    }

    #[test]
    fn a_stored_session_replays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let msg = |role: Role, parts: Vec<Part>| StoredMessage {
            id: String::new(),
            session_id: String::new(),
            seq: 0,
            role,
            parts,
            model: None,
            provider: None,
            created_at: 0,
        };
        let msgs = vec![
            msg(
                Role::User,
                vec![
                    Part::Text { text: "hi".into() },
                    Part::Text {
                        text: "<hook-context>\nx\n</hook-context>".into(),
                    },
                    Part::Binary {
                        path: "/p/a.txt".into(),
                        mime_type: "text/plain".into(),
                        data: crate::mcp::base64(b"A"),
                    },
                ],
            ),
            msg(
                Role::Assistant,
                vec![
                    Part::reasoning("hmm".into(), String::new()),
                    Part::Text { text: "ok".into() },
                    Part::ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: r#"{"command":"ls"}"#.into(),
                        provider_executed: false,
                        finished: true,
                    },
                    Part::ToolCall {
                        id: "c2".into(),
                        name: "edit".into(),
                        input: r#"{"file_path":"a.txt"}"#.into(),
                        provider_executed: false,
                        finished: true,
                    },
                ],
            ),
            msg(
                Role::Tool,
                vec![
                    Part::ToolResult {
                        tool_call_id: "c1".into(),
                        name: "bash".into(),
                        content: "a.txt".into(),
                        data: String::new(),
                        mime_type: String::new(),
                        metadata: String::new(),
                        is_error: false,
                    },
                    Part::ToolResult {
                        tool_call_id: "c2".into(),
                        name: "edit".into(),
                        content: "Edited".into(),
                        data: String::new(),
                        mime_type: String::new(),
                        metadata: r#"{"diff":"-a\n+b\n"}"#.into(),
                        is_error: false,
                    },
                ],
            ),
        ];
        let u = replay(&msgs, &cwd, &session_tools());
        let kinds: Vec<&str> = u
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "user_message_chunk",
                "agent_thought_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call"
            ]
        );
        assert_eq!(u[1]["content"]["resource"]["text"], "A");
        assert_eq!(u[1]["content"]["resource"]["uri"], "file:///p/a.txt");
        assert_eq!(u[4]["status"], "completed");
        assert_eq!(u[4]["content"][0]["content"]["text"], "```\na.txt\n```");
        assert_eq!(
            u[5]["content"][0]["content"]["text"],
            "```diff\n-a\n+b\n```"
        );
    }

    #[test]
    fn a_call_id_used_again_replays_with_its_own_result() {
        let dir = tempfile::tempdir().unwrap();
        let msg = |role: Role, part: Part| StoredMessage {
            id: String::new(),
            session_id: String::new(),
            seq: 0,
            role,
            parts: vec![part],
            model: None,
            provider: None,
            created_at: 0,
        };
        let mut msgs = Vec::new();
        for (text, is_error) in [("first", false), ("second", true)] {
            msgs.push(msg(
                Role::Assistant,
                Part::ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    input: r#"{"command":"ls"}"#.into(),
                    provider_executed: false,
                    finished: true,
                },
            ));
            msgs.push(msg(
                Role::Tool,
                Part::ToolResult {
                    tool_call_id: "call_1".into(),
                    name: "bash".into(),
                    content: text.into(),
                    data: String::new(),
                    mime_type: String::new(),
                    metadata: String::new(),
                    is_error,
                },
            ));
        }
        let u = replay(&msgs, dir.path(), &session_tools());
        assert_eq!(u.len(), 2);
        assert_eq!(u[0]["status"], "completed");
        assert_eq!(u[0]["content"][0]["content"]["text"], "```\nfirst\n```");
        assert_eq!(u[1]["status"], "failed");
        assert_eq!(u[1]["content"][0]["content"]["text"], "```\nsecond\n```");
        // The editor keeps a call per id: the second one is not an update of the first.
        assert_ne!(u[0]["toolCallId"], u[1]["toolCallId"]);
    }
}
