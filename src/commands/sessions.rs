//! `crush sessions list|show|export|delete|rename`, and the renderings the REPL shares.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::llm::Part;
use crate::store::{Session, Store, StoredMessage};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Characters of an id shown in lists; any unique prefix is accepted back.
pub const SHORT_ID: usize = 8;

/// The first characters of an id, for lists and messages.
pub fn short_id(id: &str) -> &str {
    id.get(..SHORT_ID).unwrap_or(id)
}

pub fn rfc3339(secs: i64) -> String {
    crate::time::rfc3339_secs(secs)
}

fn session_json(s: &Session) -> Value {
    json!({
        "id": s.id,
        "short_id": short_id(&s.id),
        "parent_session_id": s.parent_session_id,
        "title": s.title,
        "message_count": s.message_count,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "total_prompt_tokens": s.total_prompt_tokens,
        "total_completion_tokens": s.total_completion_tokens,
        "context_tokens": s.context_tokens,
        "cost": s.cost,
        "created": rfc3339(s.created_at),
        "modified": rfc3339(s.updated_at),
    })
}

pub fn list(global: &Global, json_out: bool) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let sessions = match app::open_existing_store(&loaded)? {
        Some(store) => store.list_sessions()?,
        None => Vec::new(),
    };
    if json_out {
        let v: Vec<Value> = sessions.iter().map(session_json).collect();
        return Ok(format!("{}\n", Value::Array(v)));
    }
    if sessions.is_empty() {
        eprintln!(
            "No sessions yet in {}. Start one with: crush run \"...\"",
            loaded.project_root.display()
        );
        return Ok(String::new());
    }
    Ok(list_text(&sessions, None))
}

/// One line per session: short id, last update, title; `current` is marked with `*`.
pub fn list_text(sessions: &[Session], current: Option<&str>) -> String {
    let mut out = String::new();
    for s in sessions {
        let mark = if current == Some(s.id.as_str()) {
            "* "
        } else if current.is_some() {
            "  "
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{mark}{}  {}  {}",
            short_id(&s.id),
            rfc3339(s.updated_at),
            s.title
        );
    }
    out
}

/// A finish that needs no mention: the end of a turn or step, or the "stop" Go Crush gives every
/// user and tool message.
fn ordinary_finish(reason: &str) -> bool {
    matches!(reason, "end_turn" | "tool_use" | "stop")
}

/// The session's running token totals, or, for a session only Go Crush ran (it keeps no
/// totals), its last call's figures as Go Crush recorded them.
fn tokens_text(s: &Session) -> String {
    let (total_in, total_out) = (s.total_prompt_tokens, s.total_completion_tokens);
    if total_in == 0 && total_out == 0 && (s.prompt_tokens > 0 || s.completion_tokens > 0) {
        format!(
            "tokens not itemized (Go Crush's last call: {} in, {} out)",
            s.prompt_tokens, s.completion_tokens
        )
    } else {
        format!("tokens in {total_in} out {total_out}")
    }
}

fn part_json(p: &Part) -> Value {
    match p {
        Part::Unknown { kind, data } => json!({"type": kind, "data": data}),
        p => serde_json::to_value(p).unwrap_or(Value::Null),
    }
}

/// One line standing for a part that is not text: an attachment, an image, a part of a type
/// this crush does not know.
fn placeholder(p: &Part) -> Option<String> {
    match p {
        Part::Binary {
            path,
            mime_type,
            data,
        } => Some(format!(
            "[attached {}]",
            crate::llm::attachment_label(path, mime_type, data)
        )),
        Part::ImageUrl { url, .. } => Some(format!("[image {url}]")),
        Part::Unknown { kind, .. } => Some(format!(
            "[a part of type {kind}, which this crush does not know]"
        )),
        _ => None,
    }
}

fn render_message(out: &mut String, m: &StoredMessage) {
    let who = match m.role {
        crate::llm::Role::User => "user".to_string(),
        crate::llm::Role::Assistant => format!(
            "assistant ({})",
            m.model.clone().unwrap_or_else(|| "?".into())
        ),
        crate::llm::Role::Tool => "tool".to_string(),
        crate::llm::Role::System => "system".to_string(),
    };
    let _ = writeln!(out, "## {who}");
    for p in &m.parts {
        match p {
            Part::Text { text } => {
                let _ = writeln!(out, "{}", text.trim_end());
            }
            Part::Reasoning { thinking, .. } => {
                let _ = writeln!(out, "(thinking) {}", thinking.trim_end());
            }
            Part::ToolCall { name, input, .. } => {
                let _ = writeln!(out, "→ {name} {input}");
            }
            Part::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let mark = if *is_error { " (error)" } else { "" };
                let _ = writeln!(out, "← {name}{mark}:\n{}", content.trim_end());
            }
            Part::Finish {
                reason, message, ..
            } => {
                if !ordinary_finish(reason) {
                    let _ = writeln!(
                        out,
                        "[finished: {reason}{}]",
                        message
                            .as_deref()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default()
                    );
                }
            }
            Part::ShellCommand {
                command,
                output,
                exit_code,
            } => {
                let _ = writeln!(
                    out,
                    "$ {command}  (exit {exit_code})\n{}",
                    output.trim_end()
                );
            }
            Part::Binary { .. } | Part::ImageUrl { .. } | Part::Unknown { .. } => {
                let _ = writeln!(out, "{}", placeholder(p).unwrap_or_default());
            }
        }
    }
    out.push('\n');
}

/// The project's store, which must exist for commands on sessions: opened read-only (never
/// migrated) unless `write`.
fn existing_store(global: &Global, write: bool) -> Result<Store, AppError> {
    let loaded = app::load_config(global)?;
    let store = if write {
        let db = loaded.data_dir.join("crush.db");
        db.is_file().then(|| Store::open(&db)).transpose()?
    } else {
        app::open_existing_store(&loaded)?
    };
    store.ok_or_else(|| {
        AppError::Usage(format!(
            "no sessions in {} (no {} yet)",
            loaded.project_root.display(),
            loaded.data_dir.join("crush.db").display()
        ))
    })
}

fn messages_json(msgs: &[StoredMessage]) -> Vec<Value> {
    msgs.iter()
        .map(|m| {
            json!({
                "id": m.id,
                "seq": m.seq,
                "role": m.role.as_str(),
                "created": rfc3339(m.created_at),
                "model": m.model,
                "provider": m.provider,
                "parts": m.parts.iter().map(part_json).collect::<Vec<_>>(),
            })
        })
        .collect()
}

pub fn show(global: &Global, id: &str, json_out: bool) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store.resolve_session(id)?;
    let msgs = store.messages(&s.id)?;
    if json_out {
        return Ok(format!(
            "{}\n",
            json!({"meta": session_json(&s), "messages": messages_json(&msgs)})
        ));
    }
    let mut out = format!(
        "# {}\nid {}  created {}  {}  cost ${:.4}\n\n",
        s.title,
        s.id,
        rfc3339(s.created_at),
        tokens_text(&s),
        s.cost
    );
    for m in &msgs {
        render_message(&mut out, m);
    }
    Ok(out)
}

/// Formats of `sessions export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Markdown,
    Json,
}

impl ExportFormat {
    pub fn parse(s: &str) -> Option<ExportFormat> {
        match s.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(ExportFormat::Markdown),
            "json" => Some(ExportFormat::Json),
            _ => None,
        }
    }
}

/// A code fence longer than any run of backticks in `body`.
fn fence(body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.max(2) + 1)
}

fn fenced(out: &mut String, info: &str, body: &str) {
    let f = fence(body);
    let _ = writeln!(out, "{f}{info}\n{}\n{f}", body.trim_end_matches('\n'));
}

/// The whole session as a document: Markdown for people, JSON (meta, messages, usage rows) for
/// programs.
pub fn export_text(store: &Store, s: &Session, format: ExportFormat) -> Result<String, AppError> {
    let msgs = store.messages(&s.id)?;
    if format == ExportFormat::Json {
        let usage: Vec<Value> = store
            .usage_rows(&s.id)?
            .iter()
            .map(|u| {
                json!({
                    "message_id": u.message_id,
                    "provider": u.provider,
                    "model": u.model,
                    "input_tokens": u.usage.map(|x| x.input),
                    "output_tokens": u.usage.map(|x| x.output),
                    "cache_read_tokens": u.usage.map(|x| x.cache_read),
                    "cache_write_tokens": u.usage.map(|x| x.cache_write),
                    "cost": u.cost,
                    "price_source": u.price_source,
                    "created": rfc3339(u.created_at),
                })
            })
            .collect();
        let doc =
            json!({"meta": session_json(s), "messages": messages_json(&msgs), "usage": usage});
        return serde_json::to_string_pretty(&doc)
            .map(|t| format!("{t}\n"))
            .map_err(|e| AppError::Runtime(format!("cannot encode the session as JSON: {e}")));
    }
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", s.title);
    let _ = writeln!(out, "- Session: `{}`", s.id);
    let _ = writeln!(out, "- Created: {}", rfc3339(s.created_at));
    let _ = writeln!(out, "- Updated: {}", rfc3339(s.updated_at));
    let _ = writeln!(out, "- Tokens: {}; cost ${:.4}\n", tokens_text(s), s.cost);
    for m in &msgs {
        let who = match m.role {
            crate::llm::Role::User => "User".to_string(),
            crate::llm::Role::Assistant => match &m.model {
                Some(model) => format!("Assistant ({model})"),
                None => "Assistant".to_string(),
            },
            crate::llm::Role::Tool => "Tool results".to_string(),
            crate::llm::Role::System => "System".to_string(),
        };
        let mut body = String::new();
        for p in &m.parts {
            match p {
                Part::Text { text } if !text.trim().is_empty() => {
                    let _ = writeln!(body, "{}\n", text.trim_end());
                }
                Part::Text { .. } => {}
                Part::Reasoning { thinking, .. } if !thinking.trim().is_empty() => {
                    for l in thinking.trim_end().lines() {
                        let _ = writeln!(body, "> {l}");
                    }
                    body.push('\n');
                }
                Part::Reasoning { .. } => {}
                Part::ToolCall { name, input, .. } => {
                    let _ = writeln!(body, "**Tool call:** `{name}`\n");
                    let pretty = serde_json::from_str::<Value>(input)
                        .ok()
                        .and_then(|v| serde_json::to_string_pretty(&v).ok())
                        .unwrap_or_else(|| input.clone());
                    fenced(&mut body, "json", &pretty);
                    body.push('\n');
                }
                Part::ToolResult {
                    name,
                    content,
                    is_error,
                    ..
                } => {
                    let mark = if *is_error { " (error)" } else { "" };
                    let _ = writeln!(body, "**Result of `{name}`{mark}:**\n");
                    fenced(&mut body, "", content);
                    body.push('\n');
                }
                Part::Finish {
                    reason, message, ..
                } => {
                    if !ordinary_finish(reason) {
                        let why = message
                            .as_deref()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default();
                        let _ = writeln!(body, "*[finished: {reason}{why}]*\n");
                    }
                }
                Part::ShellCommand {
                    command,
                    output,
                    exit_code,
                } => {
                    let _ = writeln!(body, "**Shell:** `!{command}` (exit {exit_code})\n");
                    fenced(&mut body, "", output);
                    body.push('\n');
                }
                Part::Binary { .. } | Part::ImageUrl { .. } | Part::Unknown { .. } => {
                    let _ = writeln!(body, "*{}*\n", placeholder(p).unwrap_or_default());
                }
            }
        }
        if body.trim().is_empty() {
            continue;
        }
        let _ = writeln!(out, "## {who}\n\n{}", body.trim_end());
        out.push('\n');
    }
    Ok(out)
}

pub fn export(global: &Global, id: &str, format: ExportFormat) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store.resolve_session(id)?;
    export_text(&store, &s, format)
}

pub fn delete(global: &Global, id: &str) -> Result<String, AppError> {
    let store = existing_store(global, true)?;
    let s = store.resolve_session(id)?;
    if let Some(parent) = &s.parent_session_id {
        // Its usage is part of the parent's totals: deleting it alone would break them.
        return Err(AppError::Usage(format!(
            "session {} is a sub-agent's session; its usage counts in its parent's totals, so it \
             goes with the parent: crush sessions delete {}",
            s.id,
            short_id(parent)
        )));
    }
    store.delete_session(&s.id)?;
    Ok(format!(
        "Deleted session {} ({})\n",
        short_id(&s.id),
        s.title
    ))
}

pub fn rename(global: &Global, id: &str, title: &str) -> Result<String, AppError> {
    let title = title.trim();
    if title.is_empty() {
        return Err(AppError::Usage(
            "the new title is empty; usage: crush sessions rename ID TITLE".into(),
        ));
    }
    let store = existing_store(global, true)?;
    let s = store.resolve_session(id)?;
    store.set_title(&s.id, title)?;
    Ok(format!("Renamed session {} to {title}\n", short_id(&s.id)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn fences_outgrow_backticks() {
        assert_eq!(super::fence("plain"), "```");
        assert_eq!(super::fence("has ``` inside"), "````");
    }

    #[test]
    fn rfc3339_format() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_029_607), "2026-11-30T09:06:47Z");
    }
}
