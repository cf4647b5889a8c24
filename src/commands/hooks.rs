//! `crush hooks list` and `crush hooks test`: what is configured, and a dry run of the real hooks
//! on a synthetic event.

use crate::app::Global;
use crate::app::{self, AppError};
use crate::exit::ExitCode;
use crate::hooks::{self, Event, HookConfig, HookDef, config::EVENTS, envelope::seconds};
use serde_json::{Map, Value, json};

/// `crush hooks test`'s arguments.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HooksTestArgs {
    /// As typed; validated by the command.
    pub event: String,
    pub tool: Option<String>,
    pub input: Option<String>,
    pub prompt: Option<String>,
}

fn describe(h: &HookDef) -> String {
    let mut s = h.display_name().to_string();
    if !h.matcher.is_empty() {
        s.push_str(&format!(" [{}]", h.matcher));
    }
    if h.name.is_some() {
        s.push_str(&format!(": {}", h.command));
    }
    let mut attrs = vec![format!("timeout {} s", seconds(h.timeout))];
    if h.fail_closed {
        attrs.push("fail closed".into());
    }
    if h.dialect == hooks::Dialect::ClaudeCode {
        attrs.push("Claude Code shape".into());
    }
    if h.runs_in_sub_agents() {
        attrs.push("also in sub-agents".into());
    }
    if let Some(root) = &h.plugin_root {
        attrs.push(format!("plugin {}", root.display()));
    }
    s.push_str(&format!(" ({})", attrs.join(", ")));
    s
}

/// The text of `crush hooks list`.
pub(crate) fn list_text(cfg: &HookConfig, tool: Option<&str>) -> String {
    let mut out = String::new();
    if !cfg.unsupported.is_empty() {
        out.push_str("Claude Code hooks of events crush does not have (not run):\n");
        for u in &cfg.unsupported {
            out.push_str(&format!("  {u}\n"));
        }
    }
    if cfg.is_empty() {
        out.push_str("no hooks configured (see 'man crush', HOOKS)\n");
        return out;
    }
    for event in EVENTS {
        let defs: Vec<&HookDef> = cfg.for_event(event).collect();
        if defs.is_empty() {
            continue;
        }
        out.push_str(&format!("{event}\n"));
        let target = tool.filter(|_| event.has_tool());
        let claude = target
            .map(crate::agent::Agent::claude_names_of)
            .unwrap_or_default();
        let selected = cfg.select(event, target, &claude);
        for (i, h) in defs.iter().enumerate() {
            // The kept copy of a duplicate may be a merged clone: compare where it was declared.
            let runs = selected.iter().any(|s| {
                s.command == h.command && s.origin == h.origin && s.location == h.location
            });
            let mark = match tool {
                None => String::new(),
                Some(_) if runs => "match  ".into(),
                Some(_) if !h.matches(target, &claude) => "-      ".into(),
                Some(_) => "dup    ".into(),
            };
            out.push_str(&format!("  {}. {mark}{}\n", i + 1, describe(h)));
            out.push_str(&format!("       from {} ({})\n", h.origin, h.location));
        }
    }
    if let Some(t) = tool {
        out.push_str(&format!(
            "\nmatch: runs for tool '{t}'; -: its matcher does not match; dup: same command as an earlier hook, runs once\n"
        ));
    }
    out
}

pub(crate) fn list(global: &Global, tool: Option<&str>) -> Result<String, AppError> {
    let loaded = app::load_config(global)?;
    let cfg = app::load_hooks(&loaded)?;
    Ok(list_text(&cfg, tool))
}

/// Runs `crush hooks test`: prints the per-hook lines and the composed result; returns the exit
/// code (0 allow or no opinion, 3 deny or halt where the event can block or halt).
pub(crate) fn test(global: &Global, args: &HooksTestArgs) -> Result<(String, ExitCode), AppError> {
    let event = Event::parse(&args.event).ok_or_else(|| {
        AppError::Usage(format!(
            "unknown hook event '{}'; use one of {}",
            args.event,
            Event::all_names()
        ))
    })?;
    let tool = args.tool.as_deref();
    if event.has_tool() && tool.is_none() {
        return Err(AppError::Usage(format!(
            "crush hooks test {event} needs --tool NAME (e.g. --tool bash --input '{{\"command\":\"ls\"}}')"
        )));
    }
    if !event.has_tool() && (tool.is_some() || args.input.is_some()) {
        return Err(AppError::Usage(format!(
            "{event} has no tool: --tool and --input do not apply"
        )));
    }
    if event != Event::UserPromptSubmit && args.prompt.is_some() {
        return Err(AppError::Usage(
            "--prompt applies to UserPromptSubmit only".into(),
        ));
    }
    let input: Value = match &args.input {
        None => json!({}),
        Some(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Err(AppError::Usage(
                    "--input must be a JSON object, e.g. '{\"command\":\"ls\"}'".into(),
                ));
            }
            Err(e) => return Err(AppError::Usage(format!("--input is not valid JSON: {e}"))),
        },
    };
    let loaded = app::load_config(global)?;
    let cfg = app::load_hooks(&loaded)?;
    let mut fields = Map::new();
    match event {
        Event::UserPromptSubmit => {
            fields.insert(
                "prompt".into(),
                json!(args.prompt.clone().unwrap_or_default()),
            );
            fields.insert("attachments".into(), json!([]));
        }
        Event::PostToolUse => {
            fields.insert(
                "tool_response".into(),
                json!({"output": "", "is_error": false}),
            );
            fields.insert("tool_output".into(), json!(""));
            fields.insert("is_error".into(), json!(false));
        }
        Event::SessionStart => {
            fields.insert("source".into(), json!("startup"));
        }
        Event::Stop | Event::SubagentStop => {
            fields.insert("stop_hook_active".into(), json!(false));
            fields.insert("last_assistant_message".into(), json!(""));
            if event == Event::SubagentStop {
                fields.insert("agent_type".into(), json!(hooks::claude::SUB_AGENT_TYPE));
            }
        }
        Event::SessionEnd => {
            fields.insert("reason".into(), json!("other"));
        }
        Event::PreCompact => {
            fields.insert("trigger".into(), json!("manual"));
            fields.insert("custom_instructions".into(), json!(""));
        }
        Event::Notification => {
            fields.insert("message".into(), json!("crush needs your permission"));
            fields.insert("notification_type".into(), json!("permission_prompt"));
        }
        Event::PreToolUse => {}
    }
    let mut req = hooks::Request::new(event, "hooks-test", &loaded.cwd, &loaded.project_root);
    let claude = tool
        .map(crate::agent::Agent::claude_names_of)
        .unwrap_or_default();
    req.tool = tool.map(|name| hooks::ToolCall {
        name,
        claude: &claude,
        input: &input,
        id: "hooks-test-call",
    });
    req.fields = fields;
    // Ctrl-C stops the hooks (and their process groups) and ends the command.
    let cancel = crate::signal::interrupt_flag();
    req.cancel = Some(cancel.clone());
    let outcome = cfg.run(&req);
    if cancel.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok((String::new(), crate::signal::interrupted()));
    }
    let mut out = String::new();
    if !outcome.ran() {
        match tool {
            Some(t) => out.push_str(&format!("no {event} hook matches tool '{t}'\n")),
            None => out.push_str(&format!("no {event} hook is configured\n")),
        }
        let review = &loaded.trust;
        if !review.allowed() && !review.hooks.is_empty() {
            out.push_str(&format!(
                "project {} {}, so its own hooks do not run: 'crush trust' (or --trust for one run) runs them\n",
                review.project_root.display(),
                review.why()
            ));
        }
    }
    for r in &outcome.reports {
        out.push_str(&r.line());
        out.push('\n');
        if let Some(w) = r.could_not_run_warning() {
            out.push_str(&w);
            out.push('\n');
        }
    }
    let c = &outcome.composed;
    // A deny on an event that cannot block stops nothing: say so, and exit as for no opinion.
    let stops = event.stops(c.decision == hooks::Decision::Deny, c.halt);
    out.push_str(&format!("decision: {}\n", c.verdict()));
    if c.blocked()
        && !stops
        && let Some(why) = event.block_effect().explain(event)
    {
        out.push_str(&format!("  ({why})\n"));
    }
    if !c.reason.is_empty() {
        out.push_str(&format!("reason: {}\n", c.reason.replace('\n', "\n  ")));
    }
    if !c.context.is_empty() {
        out.push_str(&format!("context: {}\n", c.context.join("\n  ")));
    }
    if !outcome.context_files.is_empty() {
        out.push_str("context files:\n");
        for f in &outcome.context_files {
            out.push_str(&format!("  {}\n", f.display()));
        }
    }
    if !outcome.dropped_files.is_empty() {
        out.push_str(&format!(
            "context files dropped (missing): {}\n",
            outcome.dropped_files.join(", ")
        ));
    }
    if let Some(v) = &c.updated_input {
        out.push_str(&format!("updated input: {v}\n"));
    }
    if let Some(p) = &c.updated_prompt {
        out.push_str(&format!("updated prompt: {p}\n"));
    }
    for n in &c.notes {
        out.push_str(&format!("warning: {n}\n"));
    }
    let code = if stops {
        ExitCode::Policy
    } else {
        ExitCode::Success
    };
    Ok((out, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_marks_matching_and_duplicate_hooks() {
        let (cfg, _) = HookConfig::from_value(
            &json!({"PreToolUse":[
                {"name":"guard","matcher":"^bash$","command":"g.sh","fail_closed":true},
                {"matcher":"^edit$","command":"e.sh"},
                {"command":"g.sh"}
            ], "Stop":[{"command":"s.sh"}]}),
            "/p/crush.json",
        )
        .unwrap();
        let t = list_text(&cfg, Some("bash"));
        assert!(
            t.contains(
                "  1. match  guard [^bash$]: g.sh (timeout 30 s, fail closed, also in sub-agents)"
            ),
            "{t}"
        );
        assert!(t.contains("  2. -      e.sh [^edit$]"), "{t}");
        assert!(t.contains("  3. dup    g.sh"), "{t}");
        assert!(
            t.contains("from /p/crush.json (hooks.PreToolUse[0])"),
            "{t}"
        );
        assert!(t.contains("Stop\n  1. match  s.sh"), "{t}");
        assert!(list_text(&HookConfig::default(), None).starts_with("no hooks"));
    }

    #[test]
    fn a_kept_hook_strengthened_by_its_duplicate_is_still_marked_as_running() {
        let (cfg, _) = HookConfig::from_value(
            &json!({"PreToolUse":[
                {"command":"g.sh"},
                {"command":"g.sh","fail_closed":true}
            ]}),
            "/p/crush.json",
        )
        .unwrap();
        let t = list_text(&cfg, Some("bash"));
        assert!(t.contains("  1. match  g.sh"), "{t}");
        assert!(t.contains("  2. dup    g.sh"), "{t}");
    }
}
