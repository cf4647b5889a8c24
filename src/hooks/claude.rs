//! Claude Code's side of hooks declared in its nested shape (crush(1) HOOKS): a tool call's input
//! as Claude Code sends it (absolute paths, the `Agent` tool's fields), its `tool_response`
//! shapes, and the session as a Claude Code transcript (JSONL). Pure: the agent writes the file.

use crate::llm::{Part, Role};
use crate::store::StoredMessage;
use crate::tools::{Tool, ToolOutput};
use serde_json::{Map, Value, json};
use std::path::Path;

/// `subagent_type` and `agent_type` of crush's sub-agent: it only reads, like Claude Code's
/// Explore agent.
pub(crate) const SUB_AGENT_TYPE: &str = "Explore";

/// Input keys that hold a path; Claude Code sends them absolute.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

/// Claude Code's `description` of a sub-agent task: the prompt's first words.
fn describe(prompt: &str) -> String {
    let words: Vec<&str> = prompt.split_whitespace().take(5).collect();
    let mut d: String = words.join(" ").chars().take(60).collect();
    if d.is_empty() {
        d = "Sub-agent task".into();
    }
    d
}

/// The input of a call of the tool Claude Code names `tool` as a hook in Claude Code's shape
/// sees it: paths absolute (as the tools resolve them against `cwd`), the sub-agent's call with
/// `description`, `prompt` and `subagent_type`, the bash timeout in milliseconds. Other keys
/// are the model's own.
pub(crate) fn tool_input(tool: Option<&str>, input: &Value, cwd: &Path) -> Value {
    let Value::Object(m) = input else {
        return input.clone();
    };
    let mut out = m.clone();
    for k in PATH_KEYS {
        if let Some(Value::String(raw)) = m.get(*k)
            && !raw.trim().is_empty()
        {
            let abs = crate::paths::resolve_real(cwd, raw);
            out.insert(k.to_string(), json!(abs.display().to_string()));
        }
    }
    match tool {
        Some("Agent") => {
            let prompt = m.get("prompt").and_then(Value::as_str).unwrap_or("");
            out.entry("description")
                .or_insert_with(|| json!(describe(prompt)));
            out.entry("subagent_type")
                .or_insert_with(|| json!(SUB_AGENT_TYPE));
        }
        Some("Bash") => {
            // Seconds in crush (which reads values over 600 as milliseconds), milliseconds in
            // Claude Code: a hook that hands the input back keeps the same timeout.
            if let Some(t) = m.get("timeout").and_then(Value::as_u64)
                && t <= crate::tools::bash::MAX_TIMEOUT_SECS
            {
                out.insert("timeout".into(), json!(t * 1000));
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// A tool's result in Claude Code's `tool_response` shape: what the tool reported (Bash: stdout,
/// stderr, interrupted; Write, Edit, MultiEdit: filePath, structuredPatch, originalFile...;
/// Read: file.content...; Glob: filenames), else one built from the result. `tool` is Claude
/// Code's name for the tool.
pub(crate) fn tool_response(tool: Option<&str>, out: &ToolOutput) -> Value {
    if !out.structured.is_null() {
        return out.structured.clone();
    }
    let meta = &out.metadata;
    match tool {
        Some("Agent") => json!({
            "status": "completed",
            "agentId": meta.get("session_id"),
            "content": [{"type": "text", "text": out.content}],
        }),
        Some("WebFetch") => json!({
            "url": meta.get("url"),
            "result": out.content,
            "bytes": out.content.len(),
            "code": 200,
            "codeText": "OK",
        }),
        Some("Grep") => json!({
            "mode": "content",
            "content": out.content,
            "numLines": out.content.lines().count(),
        }),
        _ => json!(out.content),
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The content blocks of a stored message in Claude Code's terms, and the stop reason of an
/// assistant message.
fn blocks(m: &StoredMessage, at: &LineContext) -> (Vec<Value>, Option<String>) {
    let cwd = at.cwd;
    let mut out = Vec::new();
    let mut stop = None;
    for p in &m.parts {
        match p {
            Part::Text { text } if !text.is_empty() => out.push(text_block(text)),
            Part::Reasoning {
                thinking,
                signature,
                ..
            } => out.push(json!({"type": "thinking", "thinking": thinking, "signature": signature})),
            Part::ToolCall {
                id, name, input, ..
            } => {
                let parsed: Value = serde_json::from_str(input).unwrap_or_else(|_| json!({}));
                let claude = crate::tools::find(at.tools, name).and_then(|t| t.claude_name());
                out.push(json!({
                    "type": "tool_use",
                    "id": id,
                    "name": claude.clone().unwrap_or_else(|| name.clone()),
                    "input": tool_input(claude.as_deref(), &parsed, cwd),
                }));
            }
            Part::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => out.push(json!({
                "type": "tool_result",
                "tool_use_id": tool_call_id,
                "content": content,
                "is_error": is_error,
            })),
            Part::ShellCommand {
                command,
                output,
                exit_code,
            } => out.push(text_block(&format!(
                "<bash-input>{command}</bash-input>\n<bash-stdout>{output}</bash-stdout>\n<bash-exit-code>{exit_code}</bash-exit-code>"
            ))),
            Part::Binary { path, .. } => out.push(text_block(&format!("[attached file {path}]"))),
            Part::ImageUrl { url, .. } => out.push(text_block(&format!("[image {url}]"))),
            Part::Finish { reason, .. } => stop = Some(reason.clone()),
            _ => {}
        }
    }
    (out, stop)
}

/// Where a transcript line sits: its session and the message before it.
pub(crate) struct LineContext<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
    /// The id of the previous message (None for the first).
    pub parent: Option<&'a str>,
    /// A sub-agent's transcript.
    pub sidechain: bool,
    /// The session's tools, which name themselves in Claude Code's terms.
    pub tools: &'a [&'a dyn Tool],
}

/// One line of a Claude Code transcript for a stored message (None: nothing to show). Tool
/// results are user lines of `tool_result` blocks, as in Claude Code; a lone user text is a
/// string `content`.
pub(crate) fn transcript_line(m: &StoredMessage, at: &LineContext) -> Option<Value> {
    let (content, stop) = blocks(m, at);
    if content.is_empty() {
        return None;
    }
    let (kind, message) = match m.role {
        Role::Assistant => (
            "assistant",
            json!({
                "id": m.id,
                "type": "message",
                "role": "assistant",
                "model": m.model,
                "content": content,
                "stop_reason": stop,
            }),
        ),
        _ => {
            let content = match &content[..] {
                [only] if only["type"] == "text" => only["text"].clone(),
                _ => Value::Array(content),
            };
            ("user", json!({"role": "user", "content": content}))
        }
    };
    let mut line = Map::new();
    line.insert("parentUuid".into(), json!(at.parent));
    line.insert("isSidechain".into(), json!(at.sidechain));
    line.insert("userType".into(), json!("external"));
    line.insert("cwd".into(), json!(at.cwd.display().to_string()));
    line.insert("sessionId".into(), json!(at.session_id));
    line.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    line.insert("type".into(), json!(kind));
    line.insert("message".into(), message);
    line.insert("uuid".into(), json!(m.id));
    line.insert(
        "timestamp".into(),
        json!(crate::time::rfc3339_secs(m.created_at)),
    );
    Some(Value::Object(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_absolute_and_the_agent_call_gets_claude_fields() {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path().canonicalize().unwrap();
        let v = tool_input(
            Some("Write"),
            &json!({"file_path": "secrets/api.json", "content": "x"}),
            &cwd,
        );
        assert_eq!(
            v["file_path"],
            cwd.join("secrets/api.json").display().to_string()
        );
        assert_eq!(v["content"], "x");
        let v = tool_input(Some("LS"), &json!({"path": "/abs"}), &cwd);
        assert_eq!(v["path"], "/abs");
        let v = tool_input(
            Some("Agent"),
            &json!({"prompt": "find the parser entry point please"}),
            &cwd,
        );
        assert_eq!(v["description"], "find the parser entry point");
        assert_eq!(v["subagent_type"], SUB_AGENT_TYPE);
        assert_eq!(v["prompt"], "find the parser entry point please");
        assert_eq!(
            tool_input(Some("Bash"), &json!({"command": "ls", "timeout": 30}), &cwd)["timeout"],
            30_000
        );
    }

    #[test]
    fn responses_use_the_tools_structured_result_else_a_built_one() {
        let out = ToolOutput {
            content: "hi".into(),
            structured: json!({"stdout": "hi", "stderr": "", "interrupted": false}),
            ..Default::default()
        };
        assert_eq!(tool_response(Some("Bash"), &out)["stdout"], "hi");
        let out = ToolOutput {
            content: "found it".into(),
            metadata: json!({"session_id": "child"}),
            ..Default::default()
        };
        let r = tool_response(Some("Agent"), &out);
        assert_eq!(r["content"][0]["text"], "found it");
        assert_eq!(r["agentId"], "child");
        assert_eq!(tool_response(Some("LS"), &out), json!("found it"));
    }

    #[test]
    fn transcript_lines_follow_claude_codes_shape() {
        let msg = |role: Role, parts: Vec<Part>| StoredMessage {
            id: "m1".into(),
            session_id: "s".into(),
            seq: 1,
            role,
            parts,
            model: Some("fake".into()),
            provider: None,
            created_at: 0,
        };
        let view = crate::tools::view::View;
        let tools: [&dyn Tool; 1] = [&view];
        let at = LineContext {
            session_id: "s",
            cwd: Path::new("/p"),
            parent: None,
            sidechain: false,
            tools: &tools,
        };
        let l = transcript_line(
            &msg(Role::User, vec![Part::Text { text: "hi".into() }]),
            &at,
        )
        .unwrap();
        assert_eq!(
            (l["type"].as_str(), &l["message"]["content"]),
            (Some("user"), &json!("hi"))
        );
        assert_eq!(l["timestamp"], "1970-01-01T00:00:00Z");
        let a = msg(
            Role::Assistant,
            vec![
                Part::Text {
                    text: "done".into(),
                },
                Part::ToolCall {
                    id: "c1".into(),
                    name: "view".into(),
                    input: r#"{"file_path":"a.txt"}"#.into(),
                    provider_executed: false,
                    finished: true,
                },
                Part::Finish {
                    reason: "tool_use".into(),
                    time: 0,
                    message: None,
                    details: None,
                },
            ],
        );
        let l = transcript_line(
            &a,
            &LineContext {
                parent: Some("m0"),
                ..at
            },
        )
        .unwrap();
        assert_eq!(l["parentUuid"], "m0");
        let c = &l["message"]["content"];
        assert_eq!(c[0], json!({"type": "text", "text": "done"}));
        assert_eq!(c[1]["name"], "Read");
        assert_eq!(c[1]["input"]["file_path"], "/p/a.txt");
        assert_eq!(l["message"]["stop_reason"], "tool_use");
        let empty = msg(Role::Assistant, vec![]);
        assert!(transcript_line(&empty, &at).is_none());
    }
}
