//! What one hook said: its exit code, stdout and stderr turned into a `HookResult`. Pure: no
//! process, no file; the runner hands over the captured bytes.
//!
//! Exit codes (crush(1) HOOKS): 0 → stdout is the JSON envelope (empty or not JSON: no opinion);
//! 2 → deny, reason = stderr, else the JSON reason, else "blocked by hook"; 49 → halt, reason =
//! stderr, else the JSON reason, else "turn halted by hook"; anything else → a non-blocking error,
//! but a JSON object on stdout still counts (as in Claude Code since 2026).
//!
//! The envelope understands Crush's fields and Claude Code's (`hookSpecificOutput`,
//! `continue`/`stopReason`, legacy `decision: approve|block`), all read together; when they
//! disagree, deny wins.

use serde::Serialize;
use serde_json::{Map, Value};

/// Exit code that halts the whole turn.
pub(crate) const HALT_EXIT_CODE: i32 = 49;
/// Exit code that denies (blocks) the call.
pub(crate) const DENY_EXIT_CODE: i32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    /// No opinion: the normal permission flow applies.
    #[default]
    None,
    /// Pre-approval: the permission prompt is skipped.
    Allow,
    /// The user must be asked, even for a call that needs no permission or is already allowed;
    /// where nobody can be asked (`crush run`) the call is refused.
    Ask,
    /// The call (or prompt) is blocked.
    Deny,
}

impl Decision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::None => "none",
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }

    /// How strongly it binds: deny beats ask beats allow beats no opinion (Claude Code's order).
    fn rank(self) -> u8 {
        match self {
            Decision::None => 0,
            Decision::Allow => 1,
            Decision::Ask => 2,
            Decision::Deny => 3,
        }
    }

    /// The stronger of two decisions.
    pub(crate) fn max(self, other: Decision) -> Decision {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

/// One hook's verdict.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HookResult {
    pub decision: Decision,
    pub halt: bool,
    pub reason: String,
    /// Context entries, empty ones dropped.
    pub context: Vec<String>,
    /// A shallow-merge patch over the tool input.
    pub updated_input: Option<Map<String, Value>>,
    /// A full replacement of the user's prompt.
    pub updated_prompt: Option<String>,
    /// Paths as the hook gave them (resolved later against CRUSH_CWD).
    pub context_files: Vec<String>,
    /// Claude Code's `systemMessage`: shown to the user, whatever the decision.
    pub system_message: String,
    /// Non-blocking problems worth showing (exit code, bad output, timeout).
    pub notes: Vec<String>,
    /// The hook never ran its own logic: it could not be started, or its shell or interpreter
    /// could not run it (exit 126 or 127). Shown as a warning line whatever the verdict.
    pub could_not_run: Option<String>,
}

impl HookResult {
    fn deny(reason: String) -> HookResult {
        HookResult {
            decision: Decision::Deny,
            reason,
            ..Default::default()
        }
    }
}

/// How the hook's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    /// Killed by this signal (a crash, or someone else killed it).
    Signal(i32),
    /// Ran past its timeout and was killed.
    TimedOut(std::time::Duration),
    /// Stopped (or never started) because the turn was canceled.
    Canceled,
    /// Could not be started: missing interpreter, spawn error. A non-blocking warning.
    NotStarted(String),
}

/// Everything the runner captured from one hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// More than the cap was written; the rest was discarded.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The process exited but something it started kept its pipes open; we stopped waiting.
    pub abandoned: bool,
    pub duration_ms: u64,
    /// What ran the hook: crush's shell, the interpreter of its `#!` line, or the program.
    pub program: String,
}

impl Captured {
    pub(crate) fn not_started(msg: impl Into<String>) -> Captured {
        Captured {
            exit: Exit::NotStarted(msg.into()),
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            abandoned: false,
            duration_ms: 0,
            program: String::new(),
        }
    }
}

/// Exit codes of a shell (or `env`) that could not run a command: 126 found but not executable,
/// 127 not found (a missing program, or `[[` under a shell that is not bash).
fn could_not_run_code(code: i32) -> bool {
    matches!(code, 126 | 127)
}

/// How to read a hook's output beyond the common contract.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReadOptions {
    /// A crash, timeout or unparseable output counts as a deny naming the hook.
    pub fail_closed: bool,
    /// Plain (non-JSON) stdout on exit 0 is context, as Claude Code does for UserPromptSubmit and
    /// SessionStart. Only for hooks declared in Claude Code's nested shape.
    pub plain_stdout_is_context: bool,
}

fn text(bytes: &[u8], stream: &str, notes: &mut Vec<String>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            notes.push(format!("{stream} is not valid UTF-8 (read lossily)"));
            String::from_utf8_lossy(bytes).into_owned()
        }
    }
}

/// "30" or "0.5".
pub(crate) fn seconds(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

fn first_line(s: &str) -> &str {
    s.trim().lines().next().unwrap_or("")
}

/// Turns what a hook did into its verdict. `name` is the hook's display name, used in the
/// reason of a fail-closed deny.
pub(crate) fn interpret(c: &Captured, name: &str, opts: ReadOptions) -> HookResult {
    let mut notes = Vec::new();
    if c.stdout_truncated {
        notes.push("stdout exceeded the output cap and was cut".to_string());
    }
    if c.stderr_truncated {
        notes.push("stderr exceeded the output cap and was cut".to_string());
    }
    if c.abandoned {
        notes.push(
            "a background process kept the hook's output open; stopped waiting for it".to_string(),
        );
    }
    let stdout = text(&c.stdout, "stdout", &mut notes);
    let stderr = text(&c.stderr, "stderr", &mut notes);
    let stderr_t = stderr.trim();
    let parsed = parse_stdout(&stdout);

    let failure: Option<String>;
    let mut could_not_run = None;
    let mut result = match &c.exit {
        Exit::Code(0) => match parsed {
            Ok(Some(r)) => {
                failure = None;
                r
            }
            Ok(None) => {
                failure = None;
                HookResult::default()
            }
            Err(e) if opts.plain_stdout_is_context => {
                let _ = e;
                failure = None;
                HookResult {
                    context: vec![stdout.trim().to_string()],
                    ..Default::default()
                }
            }
            Err(e) => {
                notes.push(e.to_string());
                failure = Some(format!("its output could not be parsed ({e})"));
                HookResult::default()
            }
        },
        Exit::Code(DENY_EXIT_CODE) => {
            failure = None;
            let mut r = parsed.ok().flatten().unwrap_or_default();
            r.decision = Decision::Deny;
            r.reason = if !stderr_t.is_empty() {
                stderr_t.to_string()
            } else if !r.reason.is_empty() {
                r.reason
            } else {
                "blocked by hook".to_string()
            };
            r
        }
        Exit::Code(HALT_EXIT_CODE) => {
            failure = None;
            let mut r = parsed.ok().flatten().unwrap_or_default();
            r.decision = Decision::Deny;
            r.halt = true;
            r.reason = if !stderr_t.is_empty() {
                stderr_t.to_string()
            } else if !r.reason.is_empty() {
                r.reason
            } else {
                "turn halted by hook".to_string()
            };
            r
        }
        Exit::Code(code) if could_not_run_code(*code) => {
            let what = if *code == 126 {
                "a command was not executable"
            } else {
                "a command was not found"
            };
            let mut detail = format!("{} could not run it (exit {code}: {what}", c.program);
            if !stderr_t.is_empty() {
                detail.push_str(&format!("; {}", first_line(stderr_t)));
            }
            detail.push(')');
            notes.push(detail.clone());
            could_not_run = Some(detail.clone());
            // Never a silent pass: whatever it printed, a fail-closed hook denies.
            failure = Some(detail);
            parsed.ok().flatten().unwrap_or_default()
        }
        Exit::Code(code) => {
            let detail = if stderr_t.is_empty() {
                format!("exited with code {code}")
            } else {
                format!("exited with code {code}: {}", first_line(stderr_t))
            };
            notes.push(detail.clone());
            match parsed {
                // A JSON object on stdout still counts.
                Ok(Some(r)) => {
                    failure = None;
                    r
                }
                _ => {
                    failure = Some(detail);
                    HookResult::default()
                }
            }
        }
        Exit::Signal(sig) => {
            let detail = format!("was killed by signal {sig}");
            notes.push(detail.clone());
            failure = Some(detail);
            HookResult::default()
        }
        Exit::Canceled => {
            let detail = "was stopped: the turn was canceled".to_string();
            notes.push(detail.clone());
            failure = Some(detail);
            HookResult::default()
        }
        Exit::TimedOut(t) => {
            let detail = format!("timed out after {} s and was killed", seconds(*t));
            notes.push(detail.clone());
            failure = Some(detail);
            HookResult::default()
        }
        Exit::NotStarted(msg) => {
            notes.push(format!("could not run: {msg}"));
            could_not_run = Some(format!("could not be started: {msg}"));
            failure = Some(format!("could not run ({msg})"));
            HookResult::default()
        }
    };
    if let (Some(why), true) = (failure, opts.fail_closed) {
        result = HookResult::deny(format!("hook '{name}' failed closed: it {why}"));
    }
    notes.append(&mut result.notes);
    result.notes = notes;
    result.could_not_run = could_not_run;
    result
}

/// Parses a hook's stdout. Empty → `Ok(None)` (no opinion); not a JSON object → `Err` (no opinion,
/// but worth a note); otherwise the envelope.
pub(crate) fn parse_stdout(stdout: &str) -> Result<Option<HookResult>, super::HookError> {
    let t = stdout.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(map)) => Ok(Some(parse_envelope(&map))),
        Ok(_) => Err(super::HookError::StdoutNotObject),
        Err(e) => Err(super::HookError::StdoutNotJson(e)),
    }
}

fn decision_of(v: Option<&Value>) -> Decision {
    match v
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("allow" | "approve") => Decision::Allow,
        Some("ask") => Decision::Ask,
        Some("deny" | "block") => Decision::Deny,
        // "defer" (a pause for an outside UI Claude Code has only in -p mode), null, anything
        // else: no opinion.
        _ => Decision::None,
    }
}

fn push_context(out: &mut Vec<String>, v: Option<&Value>) {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => out.push(s.clone()),
        Some(Value::Array(items)) => {
            for i in items {
                if let Some(s) = i.as_str().filter(|s| !s.trim().is_empty()) {
                    out.push(s.to_string());
                }
            }
        }
        _ => {}
    }
}

/// An object, or an object encoded as a JSON string (accepted for compatibility).
fn patch_of(v: Option<&Value>, notes: &mut Vec<String>) -> Option<Map<String, Value>> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Some(m),
            _ => {
                notes.push("updated_input is not a JSON object; ignored".to_string());
                None
            }
        },
        Some(_) => {
            notes.push("updated_input is not a JSON object; ignored".to_string());
            None
        }
    }
}

/// Reads every layer of the envelope (Crush's fields, Claude Code's `hookSpecificOutput`,
/// `continue`/`stopReason`, legacy `approve`/`block`) into one result.
pub(crate) fn parse_envelope(obj: &Map<String, Value>) -> HookResult {
    // `version` defaults to 1; higher versions are parsed the same way.
    let mut r = HookResult {
        decision: decision_of(obj.get("decision")),
        halt: obj.get("halt").and_then(Value::as_bool).unwrap_or(false),
        ..Default::default()
    };
    if let Some(s) = obj.get("reason").and_then(Value::as_str) {
        r.reason = s.trim().to_string();
    }
    if let Some(s) = obj.get("systemMessage").and_then(Value::as_str) {
        r.system_message = s.trim().to_string();
    }
    push_context(&mut r.context, obj.get("context"));
    r.updated_input = patch_of(obj.get("updated_input"), &mut r.notes);
    r.updated_prompt = obj
        .get("updated_prompt")
        .and_then(Value::as_str)
        .map(str::to_string);
    match obj.get("context_files") {
        Some(Value::String(s)) if !s.trim().is_empty() => r.context_files.push(s.clone()),
        Some(Value::Array(items)) => r.context_files.extend(
            items
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string),
        ),
        _ => {}
    }
    // Claude Code: `continue: false` stops everything; `stopReason` is its reason.
    if obj.get("continue").and_then(Value::as_bool) == Some(false) {
        r.halt = true;
        if r.reason.is_empty()
            && let Some(s) = obj.get("stopReason").and_then(Value::as_str)
        {
            r.reason = s.trim().to_string();
        }
    }
    if let Some(Value::Object(h)) = obj.get("hookSpecificOutput") {
        r.decision = r.decision.max(decision_of(h.get("permissionDecision")));
        // PostToolUse / Stop in Claude Code put `decision: "block"` at the top level; some
        // scripts put it here too.
        r.decision = r.decision.max(decision_of(h.get("decision")));
        if r.reason.is_empty()
            && let Some(s) = h.get("permissionDecisionReason").and_then(Value::as_str)
        {
            r.reason = s.trim().to_string();
        }
        push_context(&mut r.context, h.get("additionalContext"));
        if r.updated_input.is_none() {
            r.updated_input = patch_of(h.get("updatedInput"), &mut r.notes);
        }
        if r.updated_prompt.is_none()
            && let Some(s) = h.get("updatedPrompt").and_then(Value::as_str)
        {
            r.updated_prompt = Some(s.to_string());
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> HookResult {
        parse_stdout(s).ok().flatten().unwrap_or_default()
    }

    fn captured(code: i32, stdout: &str, stderr: &str) -> Captured {
        Captured {
            exit: Exit::Code(code),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            stdout_truncated: false,
            stderr_truncated: false,
            abandoned: false,
            duration_ms: 1,
            program: "/bin/sh".into(),
        }
    }

    fn read(c: &Captured) -> HookResult {
        interpret(c, "h", ReadOptions::default())
    }

    // Go Crush TestParseStdout.
    #[test]
    fn empty_stdout_is_no_opinion() {
        assert_eq!(parse_stdout("").unwrap(), None);
        assert_eq!(parse_stdout("  \n").unwrap(), None);
    }

    #[test]
    fn allow_with_context() {
        let r = parse(r#"{"decision":"allow","context":"some context"}"#);
        assert_eq!(r.decision, Decision::Allow);
        assert_eq!(r.context, vec!["some context"]);
    }

    #[test]
    fn deny_with_reason() {
        let r = parse(r#"{"decision":"deny","reason":"not allowed"}"#);
        assert_eq!(r.decision, Decision::Deny);
        assert_eq!(r.reason, "not allowed");
    }

    #[test]
    fn bad_json_is_no_opinion() {
        assert!(parse_stdout("{bad json}").is_err());
        assert_eq!(parse("{bad json}"), HookResult::default());
    }

    #[test]
    fn an_unknown_decision_word_is_no_opinion() {
        assert!(parse_stdout("maybe").is_err());
        assert_eq!(parse(r#"{"decision":"maybe"}"#).decision, Decision::None);
    }

    #[test]
    fn decision_is_case_insensitive() {
        assert_eq!(parse(r#"{"decision":"DENY"}"#).decision, Decision::Deny);
        assert_eq!(parse(r#"{"decision":"Allow"}"#).decision, Decision::Allow);
        assert_eq!(parse(r#"{"decision":null}"#).decision, Decision::None);
    }

    #[test]
    fn version_one_and_future_versions_are_parsed() {
        assert_eq!(
            parse(r#"{"version":1,"decision":"allow"}"#).decision,
            Decision::Allow
        );
        let r = parse(r#"{"version":99,"decision":"deny","reason":"future"}"#);
        assert_eq!((r.decision, r.reason.as_str()), (Decision::Deny, "future"));
    }

    #[test]
    fn halt_without_decision() {
        let r = parse(r#"{"halt":true,"reason":"stop everything"}"#);
        assert!(r.halt);
        assert_eq!(r.decision, Decision::None);
        assert_eq!(r.reason, "stop everything");
    }

    #[test]
    fn context_string_array_empty_entries_and_null() {
        assert_eq!(parse(r#"{"context":"one"}"#).context, vec!["one"]);
        assert_eq!(
            parse(r#"{"context":["first","second"]}"#).context,
            vec!["first", "second"]
        );
        assert_eq!(parse(r#"{"context":["","keep",""]}"#).context, vec!["keep"]);
        assert!(parse(r#"{"context":null}"#).context.is_empty());
    }

    // Go Crush TestParseStdoutUpdatedInput.
    #[test]
    fn updated_input_object_stringified_object_and_absent() {
        let r = parse(r#"{"updated_input":{"command":"ls","opts":{"a":1}}}"#);
        assert_eq!(
            Value::Object(r.updated_input.unwrap()),
            json!({"command":"ls","opts":{"a":1}})
        );
        let r = parse(r#"{"updated_input":"{\"command\":\"ls -la\"}"}"#);
        assert_eq!(
            Value::Object(r.updated_input.unwrap()),
            json!({"command":"ls -la"})
        );
        assert!(parse(r#"{"decision":"allow"}"#).updated_input.is_none());
        let r = parse(r#"{"updated_input":"not-an-object"}"#);
        assert!(r.updated_input.is_none());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    }

    #[test]
    fn updated_prompt_and_context_files() {
        let r = parse(r#"{"updated_prompt":"new","context_files":["a.md","", "b.md"]}"#);
        assert_eq!(r.updated_prompt.as_deref(), Some("new"));
        assert_eq!(r.context_files, vec!["a.md", "b.md"]);
    }

    // Go Crush TestParseStdoutClaudeCodeFormat.
    #[test]
    fn claude_code_hook_specific_output() {
        let r = parse(
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}"#,
        );
        assert_eq!((r.decision, r.reason.as_str()), (Decision::Allow, "fine"));
        let r = parse(
            r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"echo safe"}}}"#,
        );
        assert_eq!(
            Value::Object(r.updated_input.unwrap()),
            json!({"command":"echo safe"})
        );
        let r = parse(
            r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no rm"}}"#,
        );
        assert_eq!((r.decision, r.reason.as_str()), (Decision::Deny, "no rm"));
        assert_eq!(parse(r#"{"hookSpecificOutput":{}}"#), HookResult::default());
        assert_eq!(parse("{}"), HookResult::default());
        let r = parse(r#"{"hookSpecificOutput":{"additionalContext":"ctx"}}"#);
        assert_eq!(r.context, vec!["ctx"]);
    }

    #[test]
    fn claude_code_ask_asks_and_defer_is_no_opinion() {
        let r = parse(
            r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"},"systemMessage":"careful"}"#,
        );
        assert_eq!((r.decision, r.reason.as_str()), (Decision::Ask, "sure?"));
        assert_eq!(r.system_message, "careful");
        let r = parse(r#"{"hookSpecificOutput":{"permissionDecision":"defer"}}"#);
        assert_eq!(r.decision, Decision::None);
        // Within one envelope, deny beats ask beats allow.
        let r = parse(r#"{"decision":"allow","hookSpecificOutput":{"permissionDecision":"ask"}}"#);
        assert_eq!(r.decision, Decision::Ask);
    }

    #[test]
    fn claude_code_continue_false_halts_with_stop_reason() {
        let r = parse(r#"{"continue":false,"stopReason":"build is red"}"#);
        assert!(r.halt);
        assert_eq!(r.reason, "build is red");
    }

    #[test]
    fn legacy_approve_and_block() {
        assert_eq!(parse(r#"{"decision":"approve"}"#).decision, Decision::Allow);
        let r = parse(r#"{"decision":"block","reason":"no"}"#);
        assert_eq!((r.decision, r.reason.as_str()), (Decision::Deny, "no"));
    }

    #[test]
    fn crush_and_claude_fields_are_read_together_and_deny_wins() {
        let r = parse(
            r#"{"decision":"allow","context":"a","hookSpecificOutput":{"permissionDecision":"deny","additionalContext":"b"}}"#,
        );
        assert_eq!(r.decision, Decision::Deny);
        assert_eq!(r.context, vec!["a", "b"]);
    }

    // Exit codes (Go Crush runner cases, on captured output).
    #[test]
    fn exit_zero_parses_the_envelope() {
        let r = read(&captured(0, r#"{"decision":"allow","context":"c"}"#, ""));
        assert_eq!(r.decision, Decision::Allow);
        assert_eq!(r.context, vec!["c"]);
    }

    #[test]
    fn exit_two_denies_with_stderr_then_json_reason_then_default() {
        let r = read(&captured(2, "", "forbidden\n"));
        assert_eq!((r.decision, r.halt), (Decision::Deny, false));
        assert_eq!(r.reason, "forbidden");
        let r = read(&captured(2, r#"{"reason":"from json"}"#, ""));
        assert_eq!(r.reason, "from json");
        assert_eq!(read(&captured(2, "", "")).reason, "blocked by hook");
    }

    #[test]
    fn exit_49_halts_and_denies() {
        let r = read(&captured(49, "", "stop the turn"));
        assert!(r.halt);
        assert_eq!(r.decision, Decision::Deny);
        assert_eq!(r.reason, "stop the turn");
        assert_eq!(read(&captured(49, "", "")).reason, "turn halted by hook");
    }

    #[test]
    fn other_exit_codes_are_non_blocking_but_json_still_counts() {
        let r = read(&captured(1, "", "oops"));
        assert_eq!(r.decision, Decision::None);
        assert!(
            r.notes[0].contains("exited with code 1: oops"),
            "{:?}",
            r.notes
        );
        let r = read(&captured(
            1,
            r#"{"decision":"deny","reason":"json wins"}"#,
            "",
        ));
        assert_eq!(
            (r.decision, r.reason.as_str()),
            (Decision::Deny, "json wins")
        );
    }

    #[test]
    fn fail_closed_turns_failures_into_a_deny_naming_the_hook() {
        let opts = ReadOptions {
            fail_closed: true,
            ..Default::default()
        };
        let mut c = captured(0, "", "");
        c.exit = Exit::TimedOut(std::time::Duration::from_secs(5));
        let r = interpret(&c, "guard", opts);
        assert_eq!(r.decision, Decision::Deny);
        assert!(
            r.reason.contains("'guard'") && r.reason.contains("timed out"),
            "{}",
            r.reason
        );
        let r = interpret(&captured(0, "not json", ""), "guard", opts);
        assert_eq!(r.decision, Decision::Deny);
        assert!(r.reason.contains("could not be parsed"), "{}", r.reason);
        let r = interpret(&captured(3, "", "crash"), "guard", opts);
        assert_eq!(r.decision, Decision::Deny);
        let r = interpret(&Captured::not_started("no such file"), "guard", opts);
        assert_eq!(r.decision, Decision::Deny);
        // Empty output is not a failure: no opinion even when failing closed.
        assert_eq!(
            interpret(&captured(0, "", ""), "guard", opts).decision,
            Decision::None
        );
        // Without fail_closed, the same failures are no opinion.
        assert_eq!(read(&c).decision, Decision::None);
    }

    #[test]
    fn a_shell_that_could_not_run_the_hook_is_a_warning_and_fails_closed() {
        let guard = ReadOptions {
            fail_closed: true,
            ..Default::default()
        };
        let c = captured(127, "", "/bin/sh: 1: [[: not found\n");
        let r = read(&c);
        assert_eq!(r.decision, Decision::None);
        let w = r.could_not_run.expect("a warning");
        assert!(
            w.contains("/bin/sh could not run it (exit 127: a command was not found; /bin/sh: 1: [[: not found)"),
            "{w}"
        );
        let r = interpret(&c, "guard", guard);
        assert_eq!(r.decision, Decision::Deny);
        assert!(r.reason.contains("'guard' failed closed"), "{}", r.reason);
        assert!(r.could_not_run.is_some());
        // A JSON allow printed before the failure does not make it pass.
        let c = captured(126, r#"{"decision":"allow"}"#, "");
        assert_eq!(interpret(&c, "guard", guard).decision, Decision::Deny);
        assert!(read(&c).could_not_run.unwrap().contains("not executable"));
        assert!(read(&captured(3, "", "")).could_not_run.is_none());
        assert!(
            read(&Captured::not_started("no such file"))
                .could_not_run
                .is_some()
        );
    }

    #[test]
    fn plain_stdout_is_context_for_claude_code_prompt_hooks() {
        let opts = ReadOptions {
            plain_stdout_is_context: true,
            ..Default::default()
        };
        let r = interpret(&captured(0, "branch: main\n", ""), "h", opts);
        assert_eq!(r.context, vec!["branch: main"]);
    }

    #[test]
    fn non_utf8_and_truncated_output_are_noted() {
        let mut c = captured(0, "", "");
        c.stdout = vec![0xff, 0xfe];
        c.stdout_truncated = true;
        let r = read(&c);
        assert_eq!(r.decision, Decision::None);
        assert!(r.notes.iter().any(|n| n.contains("UTF-8")), "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("cap")), "{:?}", r.notes);
    }
}
