//! `crush sessions list|show`.

use crate::app::{self, AppError};
use crate::cli::Global;
use crate::llm::Part;
use crate::store::{Session, StoredMessage};
use serde_json::{Value, json};
use std::fmt::Write as _;

fn rfc3339(secs: i64) -> String {
    let (y, m, d) = crate::agent::prompt::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        (s % 3600) / 60,
        s % 60
    )
}

fn session_json(s: &Session) -> Value {
    json!({
        "id": s.id,
        "parent_session_id": s.parent_session_id,
        "title": s.title,
        "message_count": s.message_count,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
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
    let mut out = String::new();
    for s in &sessions {
        let _ = writeln!(out, "{}  {}  {}", s.id, rfc3339(s.updated_at), s.title);
    }
    Ok(out)
}

fn part_json(p: &Part) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
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
                if reason != "end_turn" && reason != "tool_use" {
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
        }
    }
    out.push('\n');
}

pub fn show(global: &Global, id: &str, json_out: bool) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let store = app::open_existing_store(&loaded)?.ok_or_else(|| {
        AppError::Usage(format!(
            "no sessions in {} (no {} yet)",
            loaded.project_root.display(),
            loaded.data_dir.join("crush.db").display()
        ))
    })?;
    let s = store.resolve_session(id)?;
    let msgs = store.messages(&s.id)?;
    if json_out {
        let messages: Vec<Value> = msgs
            .iter()
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
            .collect();
        return Ok(format!(
            "{}\n",
            json!({"meta": session_json(&s), "messages": messages})
        ));
    }
    let mut out = format!(
        "# {}\nid {}  created {}  tokens in {} out {}  cost ${:.4}\n\n",
        s.title,
        s.id,
        rfc3339(s.created_at),
        s.prompt_tokens,
        s.completion_tokens,
        s.cost
    );
    for m in &msgs {
        render_message(&mut out, m);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_format() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_029_607), "2026-11-30T09:06:47Z");
    }
}
