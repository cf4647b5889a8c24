//! Hooks (crush(1) HOOKS): user commands run at points of a turn — `PreToolUse`, `PostToolUse`,
//! `UserPromptSubmit`, `SessionStart`, `Stop`, and Claude Code's `SubagentStop`, `SessionEnd`,
//! `PreCompact`, `Notification` — that can allow, ask, deny or halt, add context, and rewrite a
//! tool's input or the user's prompt.
//!
//! - `config`: the `hooks` configuration in Crush's flat shape and Claude Code's nested shape.
//! - `claude`: what hooks in Claude Code's shape are sent (its tool input and response shapes,
//!   its transcript), pure.
//! - `runner`: processes, threads, timeouts, output caps.
//! - `envelope`: what one hook said (exit code + stdout JSON), pure.
//! - `compose`: many verdicts folded into one in config order, pure.
//!
//! This module knows nothing of turns or tools: the agent builds a `Request` and applies the
//! `Outcome`.

pub(crate) mod claude;
pub(crate) mod compose;
pub(crate) mod config;
pub(crate) mod envelope;
mod error;
pub(crate) mod runner;

pub(crate) use compose::Composed;
pub(crate) use config::{Dialect, Event, HookConfig, HookDef};
pub(crate) use envelope::Decision;
pub(crate) use error::HookError;

use envelope::ReadOptions;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The tool call a tool event is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolCall<'a> {
    pub name: &'a str,
    /// Claude Code's names for the tool (`Tool::claude_names`; empty: it has none).
    pub claude: &'a [String],
    pub input: &'a Value,
    pub id: &'a str,
}

/// The sub-agent an event comes from (a tool call of the `agent` tool's sub-agent, or its stop).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SubAgent<'a> {
    /// Its own session.
    pub id: &'a str,
    /// The session of the agent that started it (Claude Code's `session_id` inside a sub-agent).
    pub parent_session_id: &'a str,
}

/// One firing of an event.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    pub event: Event,
    pub session_id: &'a str,
    /// The session's working directory (CRUSH_CWD; the hooks' cwd).
    pub cwd: &'a Path,
    pub project_dir: &'a Path,
    pub tool: Option<ToolCall<'a>>,
    /// Event-specific payload fields: `prompt`, `attachments`, `tool_response`, `source`,
    /// `stop_hook_active`, `last_assistant_message`...
    pub fields: Map<String, Value>,
    /// The turn's cancel flag: once set, running hooks are stopped at once (SIGTERM to their
    /// groups, SIGKILL after a second) instead of running on to their timeout.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Fields only hooks in Claude Code's shape are sent, over `fields`: `tool_response` in
    /// Claude Code's shapes, `transcript_path`, `permission_mode`, `prompt_id`.
    pub claude_fields: Map<String, Value>,
    pub sub_agent: Option<SubAgent<'a>>,
    /// Variables for this firing's hooks on top of the usual ones (`CLAUDE_ENV_FILE`).
    pub extra_env: Vec<(String, String)>,
}

impl<'a> Request<'a> {
    /// A firing of `event` with no tool, fields or sub-agent yet.
    pub(crate) fn new(
        event: Event,
        session_id: &'a str,
        cwd: &'a Path,
        project_dir: &'a Path,
    ) -> Self {
        Request {
            event,
            session_id,
            cwd,
            project_dir,
            tool: None,
            fields: Map::new(),
            claude_fields: Map::new(),
            sub_agent: None,
            extra_env: Vec::new(),
            cancel: None,
        }
    }

    /// What a matcher is tested against: the tool's name on tool events, else the event's
    /// matcher field (`source`, `trigger`...).
    fn match_target(&self) -> Option<&str> {
        if self.event.has_tool() {
            return self.tool.map(|t| t.name);
        }
        let field = self.event.matcher_field()?;
        self.fields.get(field).and_then(Value::as_str)
    }

    /// Claude Code's names for the tool of a tool event.
    fn claude_names(&self) -> &[String] {
        match self.tool {
            Some(t) if self.event.has_tool() => t.claude,
            _ => &[],
        }
    }

    /// Whether a hook takes part in this firing: its matcher matches; inside a sub-agent only
    /// hooks that run there (`runs_in_sub_agents`) see tool calls; after a failed tool call,
    /// only Crush's hooks (Claude Code fires PostToolUse after a tool succeeded).
    fn wants(&self, h: &HookDef) -> bool {
        if self.sub_agent.is_some() && self.event.has_tool() && !h.runs_in_sub_agents() {
            return false;
        }
        if self.event == Event::PostToolUse
            && h.dialect == Dialect::ClaudeCode
            && self.fields.get("is_error") == Some(&Value::Bool(true))
        {
            return false;
        }
        if let (Some(rule), Some(t)) = (&h.if_rule, self.tool)
            && !crate::config::claude_rules::call_matches(
                rule,
                t.claude,
                t.input,
                self.project_dir,
                self.cwd,
            )
        {
            return false;
        }
        h.matches(self.match_target(), self.claude_names())
    }
}

/// What one hook did, for display and for the session store.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct HookReport {
    pub event: &'static str,
    pub name: String,
    pub command: String,
    pub matcher: String,
    pub origin: String,
    /// allow | deny | halt | none
    pub decision: &'static str,
    pub halt: bool,
    pub reason: String,
    pub input_rewrite: bool,
    pub prompt_rewrite: bool,
    pub context: bool,
    /// Claude Code's `systemMessage`: a message for the user.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_message: String,
    /// Non-blocking problems: exit code, timeout, unparseable output...
    pub notes: Vec<String>,
    pub duration_ms: u64,
    /// The hook could not be started, or its shell could not run it (exit 126 or 127).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub could_not_run: Option<String>,
}

impl HookReport {
    /// One line for humans: `hook PreToolUse no-rm [^bash$] → deny: rm is not allowed`.
    pub(crate) fn line(&self) -> String {
        let mut name: String = self.name.chars().take(40).collect();
        if self.name.chars().count() > 40 {
            name.push('…');
        }
        let mut s = format!("hook {} {name}", self.event);
        if !self.matcher.is_empty() {
            s.push_str(&format!(" [{}]", self.matcher));
        }
        match self.stops_nothing() {
            Some(effect) => s.push_str(&format!(" → {effect}")),
            None => s.push_str(&format!(" → {}", self.decision)),
        }
        let mut extra = Vec::new();
        if self.input_rewrite {
            extra.push("rewrote input".to_string());
        }
        if self.prompt_rewrite {
            extra.push("rewrote prompt".to_string());
        }
        if self.context {
            extra.push("added context".to_string());
        }
        if !extra.is_empty() {
            s.push_str(&format!(" ({})", extra.join(", ")));
        }
        if !self.reason.is_empty() {
            s.push_str(": ");
            s.push_str(self.reason.lines().next().unwrap_or(""));
        }
        for n in &self.notes {
            s.push_str(&format!(" [warning: {n}]"));
        }
        s
    }

    /// What this hook's deny (or halt) became on an event that cannot block: "feedback" after
    /// PostToolUse (the model gets the reason), "not blocked" where only the user sees it; None
    /// when it did not deny, or its event can block.
    pub(crate) fn stops_nothing(&self) -> Option<&'static str> {
        let event = Event::parse(self.event)?;
        let (deny, halt) = (self.decision == "deny", self.decision == "halt");
        if !(deny || halt) || event.stops(deny, halt) {
            return None;
        }
        Some(match event.block_effect() {
            crate::config::hook_event::BlockEffect::FeedbackToModel => "feedback",
            _ => "not blocked",
        })
    }

    /// The warning line of a hook that never ran its own logic (never a silent pass): names the
    /// hook and says what became of the call.
    pub(crate) fn could_not_run_warning(&self) -> Option<String> {
        let why = self.could_not_run.as_ref()?;
        let effect = if self.decision == "deny" {
            "it fails closed, so it denies"
        } else {
            "it was ignored (mark it fail_closed to deny instead)"
        };
        Some(format!(
            "warning: {} hook '{}': {why}; {effect}",
            self.event, self.name
        ))
    }
}

/// The result of firing an event.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub event: Event,
    pub composed: Composed,
    /// One per hook that ran, in config order.
    pub reports: Vec<HookReport>,
    /// `composed.context_files` resolved against the cwd, missing ones dropped.
    pub context_files: Vec<PathBuf>,
    /// Context files that did not exist (as the hooks gave them).
    pub dropped_files: Vec<String>,
}

impl Outcome {
    pub(crate) fn none(event: Event) -> Outcome {
        Outcome {
            event,
            composed: Composed::default(),
            reports: Vec::new(),
            context_files: Vec::new(),
            dropped_files: Vec::new(),
        }
    }

    pub(crate) fn ran(&self) -> bool {
        !self.reports.is_empty()
    }

    /// The per-hook results as stored in a tool result's metadata (Go Crush's `hook` shape).
    pub(crate) fn metadata(&self) -> Value {
        let c = &self.composed;
        json!({
            "event": self.event.name(),
            "hook_count": self.reports.len(),
            "decision": c.verdict(),
            "halt": c.halt,
            "reason": c.reason,
            "input_rewrite": c.updated_input.is_some(),
            "context_files": self.context_files,
            "context_files_dropped": self.dropped_files,
            "hooks": self.reports,
        })
    }

    /// The context and context files as text for the model ("" when there are none). `cwd`
    /// shortens the file paths.
    pub(crate) fn context_text(&self, cwd: &Path) -> String {
        let mut parts = Vec::new();
        if !self.composed.context.is_empty() {
            parts.push(self.composed.context.join("\n"));
        }
        if !self.context_files.is_empty() {
            let mut s = String::from(
                "Referenced files (a hook says they are relevant; open them with the view tool if you need them):",
            );
            for f in &self.context_files {
                let shown = f.strip_prefix(cwd).unwrap_or(f);
                s.push_str(&format!("\n- {}", shown.display()));
            }
            parts.push(s);
        }
        parts.join("\n\n")
    }
}

/// The stdin payload for one hook (crush(1) HOOKS lists both shapes field by field). Claude
/// Code's field names are always there (`hook_event_name`, `tool_use_id`). A hook declared in
/// Claude Code's shape is sent what Claude Code sends: its tool names, the input with absolute
/// paths, `agent_id` and `agent_type` inside a sub-agent (whose `session_id` is the parent's),
/// and the `claude_fields`; a hook in Crush's shape gets the model's input as it is, and
/// `is_sub_agent` inside a sub-agent.
pub(crate) fn payload(req: &Request, dialect: Dialect) -> Value {
    let claude = dialect == Dialect::ClaudeCode;
    let mut m = Map::new();
    m.insert("event".into(), json!(req.event.name()));
    m.insert("hook_event_name".into(), json!(req.event.name()));
    let session = match req.sub_agent {
        Some(s) if claude => s.parent_session_id,
        _ => req.session_id,
    };
    m.insert("session_id".into(), json!(session));
    m.insert("cwd".into(), json!(req.cwd.to_string_lossy()));
    if let Some(t) = &req.tool {
        m.insert(
            "tool_name".into(),
            json!(dialect.payload_tool_name(t.name, t.claude)),
        );
        let input = if claude {
            claude::tool_input(t.claude.first().map(String::as_str), t.input, req.cwd)
        } else {
            t.input.clone()
        };
        m.insert("tool_input".into(), input);
        m.insert("tool_use_id".into(), json!(t.id));
    }
    for (k, v) in &req.fields {
        m.insert(k.clone(), v.clone());
    }
    if let Some(s) = req.sub_agent {
        if claude {
            m.insert("agent_id".into(), json!(s.id));
            m.insert("agent_type".into(), json!(claude::SUB_AGENT_TYPE));
        } else {
            m.insert("is_sub_agent".into(), json!(true));
        }
    }
    if claude {
        for (k, v) in &req.claude_fields {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

/// The hooks' PATH when no `jq` is on `path` (crush's, or the session's own): a folder with a
/// `jq` that is crush itself first (crush(1) HOOKS, jq), made once per process. None: `path`
/// as it is.
fn path_with_jq(path: &std::ffi::OsStr) -> Option<String> {
    static SHIM: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    static SEEN: std::sync::Mutex<Vec<(std::ffi::OsString, Option<String>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = seen.iter().find(|(k, _)| k == path) {
        return p.clone();
    }
    let joined = if crate::jq::on_path("jq", path) {
        None
    } else {
        SHIM.get_or_init(|| crate::jq::shim_dir(crate::rcshell::run_dir()))
            .clone()
            .and_then(|shim| {
                let mut dirs = vec![shim];
                dirs.extend(std::env::split_paths(path));
                std::env::join_paths(dirs).ok()
            })
            .map(|j| j.to_string_lossy().into_owned())
    };
    seen.push((path.to_os_string(), joined.clone()));
    joined
}

/// The variables every hook gets on top of crush's environment.
#[cfg(test)]
pub(crate) fn env(req: &Request) -> Vec<(String, String)> {
    env_on(req, &crate::env::Overlay::default())
}

/// `env` with the session's variables `base` first (crush's own then replace theirs).
fn env_on(req: &Request, base: &crate::env::Overlay) -> Vec<(String, String)> {
    let mut v = base.vars();
    v.extend([
        ("CRUSH".to_string(), "1".to_string()),
        ("AGENT".into(), "crush".into()),
        ("AI_AGENT".into(), "crush".into()),
        ("CRUSH_EVENT".into(), req.event.name().into()),
        ("CRUSH_SESSION_ID".into(), req.session_id.into()),
        ("CRUSH_CWD".into(), req.cwd.to_string_lossy().into_owned()),
        (
            "CRUSH_PROJECT_DIR".into(),
            req.project_dir.to_string_lossy().into_owned(),
        ),
        (
            "CLAUDE_PROJECT_DIR".into(),
            req.project_dir.to_string_lossy().into_owned(),
        ),
    ]);
    if let Some(path) = path_with_jq(&base.var_os("PATH").unwrap_or_default()) {
        v.push(("PATH".into(), path));
    }
    if let Some(t) = &req.tool {
        v.push(("CRUSH_TOOL_NAME".into(), t.name.into()));
        let mut truncated = false;
        for (key, var) in [
            ("command", "CRUSH_TOOL_INPUT_COMMAND"),
            ("file_path", "CRUSH_TOOL_INPUT_FILE_PATH"),
        ] {
            if let Some(val) = t.input.get(key).and_then(Value::as_str) {
                let (shown, cut) = env_value(val);
                truncated |= cut;
                v.push((var.into(), shown));
            }
        }
        if truncated {
            v.push(("CRUSH_TOOL_INPUT_TRUNCATED".into(), "1".into()));
        }
    }
    v.extend(req.extra_env.iter().cloned());
    v
}

/// The variables of a hook process on top of crush's environment.
type Env = Arc<Vec<(String, String)>>;

/// A Claude Code plugin's variables: its folder, and a data folder of its own under crush's
/// global data directory (created when needed).
fn plugin_env(root: &Path) -> Vec<(String, String)> {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plugin".into());
    let data = crate::paths::global_data_dir()
        .join("claude-plugins")
        .join(name);
    if let Err(e) = std::fs::create_dir_all(&data) {
        crate::log::warn(&format!("cannot create {}: {e}", data.display()));
    }
    vec![
        (
            "CLAUDE_PLUGIN_ROOT".into(),
            root.to_string_lossy().into_owned(),
        ),
        (
            "CLAUDE_PLUGIN_DATA".into(),
            data.to_string_lossy().into_owned(),
        ),
    ]
}

/// Longest tool value put in the environment. Linux refuses to start a process with a single
/// variable over 128 KiB: a longer value is cut to this size, ends with `TRUNCATED_MARKER`, and
/// `CRUSH_TOOL_INPUT_TRUNCATED=1` says so (a guard must not take a prefix for the whole; the
/// whole value is `tool_input` on stdin).
pub(crate) const MAX_ENV_VALUE: usize = 64 * 1024;

/// The end of a tool value cut to fit the environment.
pub(crate) const TRUNCATED_MARKER: &str =
    "\n[... cut by crush: the full value is tool_input on stdin]";

/// `val` as an environment value and whether it was cut: at most `MAX_ENV_VALUE` bytes (on a
/// character boundary, marker included), and never past a NUL, which no variable can hold.
fn env_value(val: &str) -> (String, bool) {
    let end = val.find('\0').unwrap_or(val.len());
    if end == val.len() && val.len() <= MAX_ENV_VALUE {
        return (val.to_string(), false);
    }
    let mut keep = end.min(MAX_ENV_VALUE - TRUNCATED_MARKER.len());
    while !val.is_char_boundary(keep) {
        keep -= 1;
    }
    (format!("{}{TRUNCATED_MARKER}", &val[..keep]), true)
}

impl HookConfig {
    /// Fires `req.event`: runs the matching hooks in parallel and composes their verdicts in
    /// config order. Without matching hooks, nothing runs and the outcome is empty.
    pub(crate) fn run(&self, req: &Request) -> Outcome {
        let selected = self.select_where(req.event, |h| req.wants(h));
        if selected.is_empty() {
            return Outcome::none(req.event);
        }
        let env = Arc::new(env_on(req, &self.env));
        let mut plugin_envs: Vec<(&Path, Env)> = Vec::new();
        let mut payloads: [Option<Vec<u8>>; 2] = [None, None];
        // A project hook whose files changed since the project was trusted is not run: it
        // counts as one that could not be started (crush(1) SECURITY).
        let refused: Vec<Option<String>> = selected
            .iter()
            .map(|h| {
                let check = self.guard.check(crate::guard::What::Hook, &h.command);
                check.err().map(|e| format!("not run: {e}"))
            })
            .collect();
        let jobs: Vec<runner::Job> = selected
            .iter()
            .zip(&refused)
            .filter(|(_, r)| r.is_none())
            .map(|(h, _)| {
                let slot = match h.dialect {
                    Dialect::Crush => 0,
                    Dialect::ClaudeCode => 1,
                };
                let stdin = payloads[slot]
                    .get_or_insert_with(|| payload(req, h.dialect).to_string().into_bytes())
                    .clone();
                let env = match &h.plugin_root {
                    None => env.clone(),
                    Some(root) => match plugin_envs.iter().find(|(r, _)| r == root) {
                        Some((_, e)) => e.clone(),
                        None => {
                            let mut e = (*env).clone();
                            e.extend(plugin_env(root));
                            let e = Arc::new(e);
                            plugin_envs.push((root, e.clone()));
                            e
                        }
                    },
                };
                runner::Job {
                    command: h.command.clone(),
                    argv: h.argv.clone(),
                    cwd: req.cwd.to_path_buf(),
                    env,
                    stdin,
                    timeout: h.timeout,
                    cancel: req.cancel.clone(),
                }
            })
            .collect();
        let mut ran = runner::run_all(jobs).into_iter();
        let captured: Vec<envelope::Captured> = refused
            .into_iter()
            .map(|r| match r {
                Some(why) => envelope::Captured::not_started(why),
                None => ran
                    .next()
                    .unwrap_or_else(|| envelope::Captured::not_started("")),
            })
            .collect();
        let plain_context = matches!(req.event, Event::UserPromptSubmit | Event::SessionStart);
        let results: Vec<envelope::HookResult> = selected
            .iter()
            .zip(&captured)
            .map(|(h, c)| {
                envelope::interpret(
                    c,
                    h.display_name(),
                    ReadOptions {
                        fail_closed: h.fail_closed,
                        plain_stdout_is_context: plain_context && h.dialect == Dialect::ClaudeCode,
                    },
                )
            })
            .collect();
        let composed = compose::compose(&results, req.tool.map(|t| t.input));
        let (context_files, dropped_files) =
            compose::resolve_context_files(&composed.context_files, req.cwd);
        for f in &dropped_files {
            crate::log::debug(&format!(
                "{} hook: context file {f} does not exist; dropped",
                req.event.name()
            ));
        }
        let reports = selected
            .iter()
            .zip(&results)
            .zip(&captured)
            .map(|((h, r), c)| HookReport {
                event: req.event.name(),
                name: h.display_name().to_string(),
                command: h.command.clone(),
                matcher: h.matcher.clone(),
                origin: h.origin.clone(),
                decision: if r.halt { "halt" } else { r.decision.as_str() },
                halt: r.halt,
                reason: r.reason.clone(),
                input_rewrite: r.updated_input.is_some(),
                prompt_rewrite: r.updated_prompt.is_some(),
                context: !r.context.is_empty() || !r.context_files.is_empty(),
                system_message: r.system_message.clone(),
                notes: r.notes.clone(),
                duration_ms: c.duration_ms,
                could_not_run: r.could_not_run.clone(),
            })
            .collect();
        Outcome {
            event: req.event,
            composed,
            reports,
            context_files,
            dropped_files,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the bash tool says its Claude Code names are.
    static BASH: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| crate::tools::Tool::claude_names(&crate::tools::bash::Bash));

    fn req<'a>(input: &'a Value, dir: &'a Path) -> Request<'a> {
        let mut r = Request::new(Event::PreToolUse, "sess-1", dir, dir);
        r.tool = Some(ToolCall {
            name: "bash",
            claude: &BASH,
            input,
            id: "call_01",
        });
        r
    }

    // Go Crush TestBuildEnv.
    #[test]
    fn env_has_every_crush_variable() {
        let input = json!({"command":"ls","file_path":"/tmp/f"});
        let r = req(&input, Path::new("/p"));
        let e = env(&r);
        let get = |k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CRUSH"), Some("1"));
        assert_eq!(get("AGENT"), Some("crush"));
        assert_eq!(get("AI_AGENT"), Some("crush"));
        assert_eq!(get("CRUSH_EVENT"), Some("PreToolUse"));
        assert_eq!(get("CRUSH_TOOL_NAME"), Some("bash"));
        assert_eq!(get("CRUSH_SESSION_ID"), Some("sess-1"));
        assert_eq!(get("CRUSH_CWD"), Some("/p"));
        assert_eq!(get("CRUSH_PROJECT_DIR"), Some("/p"));
        assert_eq!(get("CLAUDE_PROJECT_DIR"), Some("/p"));
        assert_eq!(get("CRUSH_TOOL_INPUT_COMMAND"), Some("ls"));
        assert_eq!(get("CRUSH_TOOL_INPUT_FILE_PATH"), Some("/tmp/f"));
    }

    #[test]
    fn oversized_tool_values_are_cut_with_a_marker_and_a_flag() {
        let get = |e: &[(String, String)], k: &str| {
            e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let long = format!("rm -rf victim #{}é", "A".repeat(MAX_ENV_VALUE));
        let input = json!({"command": long, "file_path": "/f"});
        let e = env(&req(&input, Path::new("/p")));
        let cmd = get(&e, "CRUSH_TOOL_INPUT_COMMAND").unwrap();
        assert!(cmd.len() <= MAX_ENV_VALUE);
        assert!(cmd.starts_with("rm -rf victim #AAA"));
        assert!(cmd.ends_with(TRUNCATED_MARKER));
        assert_eq!(get(&e, "CRUSH_TOOL_INPUT_FILE_PATH").as_deref(), Some("/f"));
        assert_eq!(get(&e, "CRUSH_TOOL_INPUT_TRUNCATED").as_deref(), Some("1"));
        // A NUL ends what a variable can hold.
        let input = json!({"command": "ls\0; rm x"});
        let e = env(&req(&input, Path::new("/p")));
        assert_eq!(
            get(&e, "CRUSH_TOOL_INPUT_COMMAND").unwrap(),
            format!("ls{TRUNCATED_MARKER}")
        );
        assert_eq!(get(&e, "CRUSH_TOOL_INPUT_TRUNCATED").as_deref(), Some("1"));
        // Multi-byte characters are never split.
        let (v, cut) = env_value(&"é".repeat(MAX_ENV_VALUE));
        assert!(cut && v.len() <= MAX_ENV_VALUE);
        let input = json!({"command": "ls"});
        assert_eq!(
            get(
                &env(&req(&input, Path::new("/p"))),
                "CRUSH_TOOL_INPUT_TRUNCATED"
            ),
            None
        );
    }

    #[test]
    fn tool_variables_only_on_tool_events() {
        let r = Request::new(
            Event::UserPromptSubmit,
            "s",
            Path::new("/p"),
            Path::new("/p"),
        );
        assert!(!env(&r).iter().any(|(k, _)| k.starts_with("CRUSH_TOOL")));
    }

    // Go Crush TestBuildPayload.
    #[test]
    fn payload_carries_the_tool_input_as_an_object() {
        let input = json!({"command":"ls"});
        let r = req(&input, Path::new("/p"));
        let p = payload(&r, Dialect::Crush);
        assert_eq!(p["event"], "PreToolUse");
        assert_eq!(p["hook_event_name"], "PreToolUse");
        assert_eq!(p["tool_name"], "bash");
        assert_eq!(p["tool_input"], json!({"command":"ls"}));
        assert_eq!(p["tool_use_id"], "call_01");
        assert_eq!(p["session_id"], "sess-1");
        assert_eq!(payload(&r, Dialect::ClaudeCode)["tool_name"], "Bash");
        let mystery = Request {
            tool: Some(ToolCall {
                name: "mystery",
                claude: &[],
                input: &input,
                id: "call_02",
            }),
            ..r.clone()
        };
        assert_eq!(
            payload(&mystery, Dialect::ClaudeCode)["tool_name"],
            "mystery"
        );
    }

    fn hooks(v: Value) -> HookConfig {
        HookConfig::from_value(&json!({ "PreToolUse": v }), "/p/crush.json")
            .unwrap_or_else(|p| panic!("{:?}", p.errors))
            .0
    }

    // Go Crush runner cases, end to end through real processes.
    #[test]
    fn runner_allow_deny_halt_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({"command":"ls"});
        let run = |cmd: &str| hooks(json!([{ "command": cmd }])).run(&req(&input, d.path()));
        let o = run(r#"echo '{"decision":"allow","context":"ok"}'"#);
        assert_eq!(o.composed.decision, Decision::Allow);
        assert_eq!(o.composed.context, vec!["ok"]);
        let o = run("echo forbidden >&2; exit 2");
        assert_eq!(
            (o.composed.decision, o.composed.halt),
            (Decision::Deny, false)
        );
        assert_eq!(o.composed.reason, "forbidden");
        let o = run("echo 'stop the turn' >&2; exit 49");
        assert!(o.composed.halt);
        assert_eq!(o.composed.reason, "stop the turn");
        let o = run(r#"echo '{"halt":true,"reason":"json halt"}'"#);
        assert!(o.composed.halt);
        let o = run("exit 1");
        assert_eq!(o.composed.verdict(), "none");
        assert!(o.reports[0].notes[0].contains("code 1"));
        assert!(!hooks(json!([])).run(&req(&input, d.path())).ran());
    }

    #[test]
    fn runner_dedupes_identical_commands() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({});
        let cmd = r#"echo x >> runs; echo '{"decision":"allow"}'"#;
        let o = hooks(json!([{ "command": cmd }, { "command": cmd }])).run(&req(&input, d.path()));
        assert_eq!(o.reports.len(), 1);
        assert_eq!(
            std::fs::read_to_string(d.path().join("runs")).unwrap(),
            "x\n"
        );
        assert_eq!(o.composed.decision, Decision::Allow);
    }

    #[test]
    fn runner_parallel_allow_and_deny_gives_deny() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({});
        let o = hooks(json!([
            {"command": "echo '{\"decision\":\"allow\"}'"},
            {"command": "sleep 0.2; echo '{\"decision\":\"deny\",\"reason\":\"nope\"}'"}
        ]))
        .run(&req(&input, d.path()));
        assert_eq!(o.composed.decision, Decision::Deny);
        assert_eq!(o.composed.reason, "nope");
    }

    #[test]
    fn runner_env_vars_reach_the_hook() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({});
        let o = hooks(json!([{"command": "printf '{\"context\":\"%s\"}' \"$CRUSH_TOOL_NAME\""}]))
            .run(&req(&input, d.path()));
        assert_eq!(o.composed.context, vec!["bash"]);
    }

    #[test]
    fn runner_updated_input_preserves_other_keys() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({"command":"npm test","timeout":60});
        let o =
            hooks(json!([{"command": "echo '{\"updated_input\":{\"command\":\"bun test\"}}'"}]))
                .run(&req(&input, d.path()));
        assert_eq!(
            o.composed.updated_input,
            Some(json!({"command":"bun test","timeout":60}))
        );
        assert!(o.reports[0].input_rewrite);
    }

    #[test]
    fn runner_timeout_is_no_opinion_and_fail_closed_denies() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({});
        let o = hooks(json!([{"name":"slow","command":"sleep 10","timeout":0.2}]))
            .run(&req(&input, d.path()));
        assert_eq!(o.composed.verdict(), "none");
        assert!(
            o.reports[0].notes[0].contains("timed out"),
            "{:?}",
            o.reports
        );
        let o =
            hooks(json!([{"name":"slow","command":"sleep 10","timeout":0.2,"fail_closed":true}]))
                .run(&req(&input, d.path()));
        assert_eq!(o.composed.decision, Decision::Deny);
        assert!(
            o.composed.reason.contains("'slow'"),
            "{}",
            o.composed.reason
        );
    }

    #[test]
    fn stdin_payload_reaches_the_hook() {
        let d = tempfile::tempdir().unwrap();
        let input = json!({"command":"ls -la"});
        let o = hooks(json!([{"command": "cat > payload.json"}])).run(&req(&input, d.path()));
        assert!(o.reports[0].notes.is_empty(), "{:?}", o.reports);
        let p: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("payload.json")).unwrap())
                .unwrap();
        assert_eq!(p["tool_input"]["command"], "ls -la");
        assert_eq!(p["hook_event_name"], "PreToolUse");
    }

    #[test]
    fn context_files_are_resolved_and_rendered() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("README.md"), "r").unwrap();
        let input = json!({});
        let o = hooks(json!([{"command": "echo '{\"context\":\"c\",\"context_files\":[\"README.md\",\"gone.md\",\"./README.md\"]}'"}]))
            .run(&req(&input, d.path()));
        assert_eq!(o.context_files, vec![d.path().join("README.md")]);
        assert_eq!(o.dropped_files, vec!["gone.md"]);
        let t = o.context_text(d.path());
        assert!(t.starts_with("c\n\nReferenced files"), "{t}");
        assert!(t.ends_with("\n- README.md"), "{t}");
    }

    #[test]
    fn report_lines_name_the_hook_matcher_and_decision() {
        let r = HookReport {
            event: "PreToolUse",
            name: "no-rm".into(),
            command: "x".into(),
            matcher: "^bash$".into(),
            origin: "/p/crush.json".into(),
            decision: "deny",
            halt: false,
            reason: "rm is not allowed".into(),
            input_rewrite: false,
            prompt_rewrite: false,
            context: false,
            system_message: String::new(),
            notes: vec![],
            duration_ms: 3,
            could_not_run: None,
        };
        assert_eq!(
            r.line(),
            "hook PreToolUse no-rm [^bash$] → deny: rm is not allowed"
        );
        assert_eq!(r.could_not_run_warning(), None);
        let r = HookReport {
            could_not_run: Some("/bin/sh could not run it (exit 127)".into()),
            decision: "none",
            ..r
        };
        assert_eq!(
            r.could_not_run_warning().unwrap(),
            "warning: PreToolUse hook 'no-rm': /bin/sh could not run it (exit 127); it was ignored (mark it fail_closed to deny instead)"
        );
    }
}
