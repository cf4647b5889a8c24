//! `crush sessions list|show|last|export|delete|rename`, and the renderings the REPL shares.
//!
//! Sessions are named as Go Crush names them: by the hash id of their UUID (16 hex digits; lists
//! show the first 7), and any prefix of it, the UUID or a prefix of the UUID is accepted back.
//! The `--json` documents have Go Crush's shapes and field names; crush's own fields are extra.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::llm::Part;
use crate::store::{Session, Store, StoredMessage};
use serde_json::{Value, json};
use std::fmt::Write as _;

pub(crate) use crate::store::hashid::short_id;

/// The longer form Go Crush prints after a delete or rename.
fn long_id(id: &str) -> String {
    crate::store::hashid::hash_id(id)[..12].to_string()
}

pub(crate) fn rfc3339(secs: i64) -> String {
    crate::time::rfc3339_secs(secs)
}

/// Go Crush's `{id, uuid, title, created, modified}` (id: the hash id), then crush's own fields.
fn session_json(s: &Session) -> Value {
    json!({
        "id": crate::store::hashid::hash_id(&s.id),
        "uuid": s.id,
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

pub(crate) fn list(global: &Global, json_out: bool) -> Result<String, AppError> {
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
        crate::ewriteln!(
            "No sessions yet in {}. Start one with: crush run \"...\"",
            loaded.project_root.display()
        );
        return Ok(String::new());
    }
    Ok(list_text(&sessions, None))
}

/// One line per session as Go Crush prints it: short hash id, creation time, title; `current` is
/// marked with `*`.
pub(crate) fn list_text(sessions: &[Session], current: Option<&str>) -> String {
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
            "{mark}{} {} {}",
            short_id(&s.id),
            rfc3339(s.created_at),
            s.title.replace('\n', " ")
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

/// A part as Go Crush's `session show --json` gives it (`type` and flat fields: `text`,
/// `thinking`, `tool_call_id`, `name`, `input`, `content`, `is_error`, `mime_type`, `size`,
/// `url`, `detail`, `reason`, `time`; empty ones left out), with the stored `data` as an extra.
fn part_json(p: &Part) -> Value {
    let stored = match p {
        Part::Unknown { kind, data } => json!({"type": kind, "data": data}),
        p => serde_json::to_value(p).unwrap_or(Value::Null),
    };
    let data = &stored["data"];
    let mut flat = serde_json::Map::new();
    flat.insert("type".into(), stored["type"].clone());
    let mut put = |key: &str, v: Value| {
        let empty = match &v {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            _ => false,
        };
        if !empty {
            flat.insert(key.into(), v);
        }
    };
    match p {
        Part::Text { text } => put("text", json!(text)),
        Part::Reasoning { thinking, .. } => {
            put("thinking", json!(thinking));
            put("started_at", data["started_at"].clone());
            put("finished_at", data["finished_at"].clone());
        }
        Part::ToolCall {
            id, name, input, ..
        } => {
            put("tool_call_id", json!(id));
            put("name", json!(name));
            put("input", json!(input));
        }
        Part::ToolResult {
            tool_call_id,
            name,
            content,
            mime_type,
            is_error,
            ..
        } => {
            put("tool_call_id", json!(tool_call_id));
            put("name", json!(name));
            put("content", json!(content));
            put("is_error", json!(is_error));
            put("mime_type", json!(mime_type));
        }
        Part::Binary {
            mime_type, data, ..
        } => {
            put("mime_type", json!(mime_type));
            // Go Crush reports the size of the decoded content.
            put("size", json!(data.trim_end_matches('=').len() * 3 / 4));
        }
        Part::ImageUrl { url, detail } => {
            put("url", json!(url));
            put("detail", json!(detail));
        }
        Part::Finish { reason, time, .. } => {
            put("reason", json!(reason));
            put("time", json!(time));
        }
        Part::ShellCommand { .. } | Part::Unknown { .. } => {}
    }
    flat.insert("data".into(), data.clone());
    Value::Object(flat)
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

/// Go Crush's `session show --json` document: `meta` (the session, its tokens and cost) and
/// `messages` (`id`, `role`, `created`, `model`, `provider`, `parts`).
fn show_json(s: &Session, msgs: &[StoredMessage]) -> Value {
    let mut meta = session_json(s);
    meta["total_tokens"] = json!(s.prompt_tokens + s.completion_tokens);
    json!({"meta": meta, "messages": messages_json(msgs)})
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

pub(crate) fn show(global: &Global, id: &str, json_out: bool) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store.resolve_session(id)?;
    show_session(&store, &s, json_out)
}

/// `crush session last`: the most recently updated session, as `show` shows it.
pub(crate) fn last(global: &Global, json_out: bool) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store
        .latest_session()?
        .ok_or_else(|| AppError::Usage("no sessions found".into()))?;
    show_session(&store, &s, json_out)
}

fn show_session(store: &Store, s: &Session, json_out: bool) -> Result<String, AppError> {
    let msgs = store.messages(&s.id)?;
    if json_out {
        return Ok(format!("{}\n", show_json(s, &msgs)));
    }
    let mut out = format!(
        "# {}\nid {}  uuid {}  created {}  {}  cost ${:.4}\n\n",
        s.title,
        long_id(&s.id),
        s.id,
        rfc3339(s.created_at),
        tokens_text(s),
        s.cost
    );
    for m in &msgs {
        render_message(&mut out, m);
    }
    // The plans of plan mode, the last one last (crush(1) PLAN MODE).
    for plan in crate::agent::plan::plans(&msgs) {
        out.push_str(&format!("## Plan\n\n{plan}\n\n"));
    }
    Ok(out)
}

/// Formats of `sessions export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExportFormat {
    Markdown,
    Json,
}

impl ExportFormat {
    pub(crate) fn parse(s: &str) -> Option<ExportFormat> {
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
pub(crate) fn export_text(
    store: &Store,
    s: &Session,
    format: ExportFormat,
) -> Result<String, AppError> {
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
                    "price_source": u.price_source.as_str(),
                    "created": rfc3339(u.created_at),
                })
            })
            .collect();
        let mut doc = show_json(s, &msgs);
        doc["usage"] = Value::Array(usage);
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

pub(crate) fn export(global: &Global, id: &str, format: ExportFormat) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store.resolve_session(id)?;
    export_text(&store, &s, format)
}

/// `crush sessions diff ID`: what the session's tools changed in files, as a unified diff.
pub(crate) fn diff(global: &Global, id: &str) -> Result<String, AppError> {
    let store = existing_store(global, false)?;
    let s = store.resolve_session(id)?;
    let cwd = app::working_dir(global)?;
    super::files::diff(&store, &s.id, &cwd).map_err(|e| AppError::Runtime(e.to_string()))
}

/// Go Crush's `--json` answer to a delete or rename: `{id, uuid, title, deleted|renamed}`.
fn mutation_json(s: &Session, title: &str, what: &str) -> String {
    let mut v = json!({
        "id": crate::store::hashid::hash_id(&s.id),
        "uuid": s.id,
        "title": title,
    });
    v[what] = json!(true);
    format!("{v}\n")
}

pub(crate) fn delete(global: &Global, id: &str, json_out: bool) -> Result<String, AppError> {
    let store = existing_store(global, true)?;
    let s = store.resolve_session(id)?;
    if let Some(parent) = &s.parent_session_id {
        // Its usage is part of the parent's totals: deleting it alone would break them.
        return Err(AppError::Usage(format!(
            "session {} is a sub-agent's session; its usage counts in its parent's totals, so it \
             goes with the parent: crush sessions delete {}",
            short_id(&s.id),
            short_id(parent)
        )));
    }
    store.delete_session(&s.id)?;
    if json_out {
        return Ok(mutation_json(&s, &s.title, "deleted"));
    }
    Ok(format!(
        "Deleted session {} ({})\n",
        long_id(&s.id),
        s.title
    ))
}

pub(crate) fn rename(
    global: &Global,
    id: &str,
    title: &str,
    json_out: bool,
) -> Result<String, AppError> {
    let title = title.trim();
    if title.is_empty() {
        return Err(AppError::Usage(
            "the new title is empty; usage: crush sessions rename ID TITLE".into(),
        ));
    }
    let store = existing_store(global, true)?;
    let s = store.resolve_session(id)?;
    store.set_title(&s.id, title)?;
    if json_out {
        return Ok(mutation_json(&s, title, "renamed"));
    }
    Ok(format!(
        "Renamed session {} to {}\n",
        long_id(&s.id),
        json!(title)
    ))
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
