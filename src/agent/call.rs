//! One tool call of a step: its arguments, the PreToolUse hooks (which may block it, halt the
//! turn, let it run without asking or change its input), the permission check, the run (the
//! `agent` tool runs a sub-agent), the PostToolUse hooks, and the result part the step stores.
//!
//! Every result is announced after its call, so a consumer of the events can pair them by id,
//! whatever happens to the call.

use super::permissions::{Decision, Permissions};
use super::{Agent, AgentError, AgentEvent, Answer, Sink, Stop, session_config};
use crate::hooks::{self, Outcome};
use crate::llm::Part;
use crate::store::Store;
use crate::tools::confine::Zone;
use crate::tools::todos::{self, Todo};
use crate::tools::{
    CallView, Content, Diagnostics, LoopTool, PermissionRequest, ReadTracker, RunMode,
    SessionState, Tool, ToolCtx, ToolError, ToolOutput,
};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::atomic::Ordering;

/// The result of a call that never started because the user canceled the turn.
const CANCELED_BEFORE_RUN: &str = "The user canceled the turn before this tool call ran.";

/// A tool call as the model made it, its arguments parsed (Err: why they are not a JSON object).
pub(super) struct PendingCall {
    pub id: String,
    pub name: String,
    pub input: Result<Value, InputError>,
}

/// Why a call's arguments are not usable.
#[derive(Debug)]
pub(super) enum InputError {
    /// Valid JSON, but not an object.
    NotAnObject,
    Json(serde_json::Error),
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::NotAnObject => f.write_str("arguments must be a JSON object"),
            InputError::Json(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::NotAnObject => None,
            InputError::Json(e) => Some(e),
        }
    }
}

/// The parts of a model answer as the session stores them, and its tool calls in order. A call's
/// input is stored as parsed (`{}` when it is not a JSON object; the call is then answered with
/// an error).
pub(super) fn split_calls(answer: Vec<Part>) -> (Vec<Part>, Vec<PendingCall>) {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for p in answer {
        match p {
            Part::ToolCall {
                id,
                name,
                input,
                provider_executed,
                ..
            } => {
                let input = parse_input(&input);
                parts.push(Part::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: match &input {
                        Ok(v) => v.to_string(),
                        Err(_) => "{}".to_string(),
                    },
                    provider_executed,
                    finished: true,
                });
                calls.push(PendingCall { id, name, input });
            }
            other => parts.push(other),
        }
    }
    (parts, calls)
}

/// A call's arguments: a JSON object (no arguments at all count as `{}`).
fn parse_input(input: &str) -> Result<Value, InputError> {
    if input.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(input) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(InputError::NotAnObject),
        Err(e) => Err(InputError::Json(e)),
    }
}

/// The step's assistant message, already stored: a hook that changes a call's input changes it
/// here and in the store.
pub(super) struct StepMessage {
    pub id: String,
    pub parts: Vec<Part>,
}

/// What one tool call left: its result part, and why the turn stops after this step.
pub(super) struct CallOutcome {
    pub result: Part,
    pub stop: Option<Stop>,
}

impl CallOutcome {
    /// The answer to a call that does not run because the turn stops (`stop`).
    pub(super) fn not_run(
        call: PendingCall,
        stop: &Stop,
        view: CallView,
        sink: &mut dyn Sink,
    ) -> CallOutcome {
        let why = match stop {
            Stop::Canceled => CANCELED_BEFORE_RUN,
            Stop::HookHalted(_) => "Not run: a hook halted the turn.",
            _ => "Not run: an earlier tool call in this step was refused.",
        };
        let input = call.input.unwrap_or_else(|_| json!({}));
        CallOutcome {
            result: answer_unrun(
                sink,
                (&call.id, &call.name, input, view),
                &ToolOutput::error(why),
            ),
            stop: None,
        }
    }
}

fn announce(sink: &mut dyn Sink, id: &str, name: &str, input: Value, view: CallView) {
    sink.event(AgentEvent::ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        input,
        view,
    });
}

/// Reports `out` as the call's result and makes the part the step stores.
fn finish(sink: &mut dyn Sink, id: &str, name: &str, out: &ToolOutput) -> Part {
    sink.event(AgentEvent::ToolResult {
        id: id.to_string(),
        name: name.to_string(),
        content: out.content.clone(),
        is_error: out.is_error,
        diff: out.metadata["diff"]
            .as_str()
            .filter(|d| !d.trim().is_empty())
            .map(str::to_string),
    });
    Part::ToolResult {
        tool_call_id: id.to_string(),
        name: name.to_string(),
        content: out.content.clone(),
        data: out
            .image
            .as_ref()
            .map(|i| i.data.clone())
            .unwrap_or_default(),
        mime_type: out
            .image
            .as_ref()
            .map(|i| i.mime_type.clone())
            .unwrap_or_default(),
        metadata: if out.metadata.is_null() {
            String::new()
        } else {
            out.metadata.to_string()
        },
        is_error: out.is_error,
    }
}

/// Announces a call (id, name, input, view) that is not run and answers it with `out`.
fn answer_unrun(
    sink: &mut dyn Sink,
    (id, name, input, view): (&str, &str, Value, CallView),
    out: &ToolOutput,
) -> Part {
    announce(sink, id, name, input, view);
    finish(sink, id, name, out)
}

/// Adds `value` under `key` to a tool result's metadata (a JSON object, or Null).
fn add_metadata(meta: &mut Value, key: &str, value: Value) {
    if !meta.is_object() {
        let old = std::mem::take(meta);
        *meta = Value::Object(Map::new());
        if !old.is_null() {
            meta["tool"] = old;
        }
    }
    meta[key] = value;
}

/// The answer to a call a PreToolUse hook blocked, and the halt when the hook halted the turn.
fn blocked(pre: &Outcome) -> (ToolOutput, Option<Stop>) {
    let r = &pre.composed.reason;
    let (mut out, stop) = if pre.composed.halt {
        (
            ToolOutput::error(format!("Turn halted by hook. Reason: {r}")),
            Some(Stop::HookHalted(r.clone())),
        )
    } else {
        (
            ToolOutput::error(format!("Tool call blocked by hook. Reason: {r}")),
            None,
        )
    };
    add_metadata(&mut out.metadata, "hook", pre.metadata());
    (out, stop)
}

/// How a tool's run went: its output, whether it ran at all, and why the turn stops.
struct ToolRun {
    out: ToolOutput,
    ran: bool,
    stop: Option<Stop>,
}

impl ToolRun {
    fn ran(out: ToolOutput) -> ToolRun {
        ToolRun {
            out,
            ran: true,
            stop: None,
        }
    }

    fn refused(out: ToolOutput) -> ToolRun {
        ToolRun {
            out,
            ran: false,
            stop: Some(Stop::PermissionRefused),
        }
    }

    /// Runs the tool, unless the turn was canceled meanwhile (while a hook ran or a question
    /// was open): then nothing starts.
    fn execute(tool: &dyn Tool, input: &Value, ctx: &ToolCtx, sink: &mut dyn Sink) -> ToolRun {
        if ctx.cancel.load(Ordering::SeqCst) {
            return ToolRun {
                out: ToolOutput::error(CANCELED_BEFORE_RUN),
                ran: false,
                stop: Some(Stop::Canceled),
            };
        }
        ToolRun::ran(execute(tool, input, ctx, sink))
    }
}

/// Runs `tool`: a call the model got wrong is its result as an error; a failure of crush itself
/// is that too, and is also reported to the user and the log.
fn execute(tool: &dyn Tool, input: &Value, ctx: &ToolCtx, sink: &mut dyn Sink) -> ToolOutput {
    match tool.run(input, ctx) {
        Ok(out) => out,
        Err(ToolError::RespondToModel(msg)) => ToolOutput::error(msg),
        Err(ToolError::Internal(msg)) => {
            let line = format!("{}: {msg}", tool.name());
            crate::log::warn(&line);
            sink.event(AgentEvent::Notice(line));
            ToolOutput::error(msg)
        }
    }
}

/// What the PreToolUse hooks decided about the permission question.
#[derive(Debug, Clone, PartialEq)]
enum Gate {
    /// The normal permission flow.
    Normal,
    /// A hook allowed the call: no question.
    Approved,
    /// A hook asked for the user's confirmation (its reason): the question is asked even for a
    /// call that needs no permission or is already allowed (`--yolo` too), and refused where
    /// nobody can be asked.
    Ask(String),
}

/// The question for a call a hook wants confirmed: the tool's own request if it has one, else
/// one naming the call; the hook's reason is part of it.
fn hook_question(
    tool: &dyn Tool,
    own: Option<PermissionRequest>,
    input: &Value,
    ctx: &ToolCtx,
    reason: &str,
) -> PermissionRequest {
    let mut req = own.unwrap_or_else(|| {
        // What the call is about: its command, file, directory, URL or task, else its input.
        let what = ["command", "file_path", "path", "url", "prompt"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(str::to_string)
            .unwrap_or_else(|| input.to_string());
        PermissionRequest {
            tool: tool.name().to_string(),
            action: "use",
            path: ctx.cwd.to_path_buf(),
            description: crate::tools::common::truncate_line(&what, 200),
            diff: None,
            kind: tool.kind(),
            runs: tool.run_mode(),
            ..Default::default()
        }
    });
    let why = if reason.is_empty() {
        "a hook asks to confirm"
    } else {
        reason
    };
    req.description = format!("{} ({why})", req.description);
    req
}

/// `req` with the zone of the file it writes (`confine::Zone`), which the permission rules
/// decide by; a guarded file or crush's data is named as such in the question.
fn placed(mut req: PermissionRequest, ctx: &ToolCtx) -> PermissionRequest {
    if matches!(req.action, "write" | "download") {
        req.zone = req.zone.max(ctx.bounds.zone(ctx.project_root, &req.path));
    }
    if req.zone >= Zone::Guarded && !req.description.ends_with(req.zone.note()) {
        req.description.push_str(req.zone.note());
    }
    req
}

/// Whether `tool` may run, as the permission flow and the PreToolUse hooks' `gate` say:
/// Ok(None) it may, Ok(Some) the user must be asked that, Err is the answer to a call that
/// does not run.
fn question(
    tool: &dyn Tool,
    input: &Value,
    ctx: &ToolCtx,
    permissions: &Permissions,
    gate: &Gate,
) -> Result<Option<PermissionRequest>, Box<ToolRun>> {
    // A deny rule answers the model, which may do something else: the turn goes on.
    if let Some(rule) = permissions.denied(tool, input, ctx.cwd) {
        return Err(Box::new(ToolRun {
            out: ToolOutput::error(format!(
                "Permission denied: {rule} refuses this call. Do not retry it; ask the user how to proceed."
            )),
            ran: false,
            stop: None,
        }));
    }
    let own = match tool.permission(input, ctx) {
        Err(msg) => {
            return Err(Box::new(ToolRun {
                out: ToolOutput::error(msg),
                ran: false,
                stop: None,
            }));
        }
        Ok(own) => own.map(|mut r| {
            r.kind = tool.kind();
            r.runs = tool.run_mode();
            placed(r, ctx)
        }),
    };
    Ok(match (gate, own) {
        (Gate::Ask(reason), own) => Some(hook_question(tool, own, input, ctx, reason)),
        (_, None) => None,
        // A hook's approval is an allow rule: it does not reach guarded files or crush's data.
        (Gate::Approved, Some(req)) if req.zone < Zone::Guarded => None,
        (Gate::Approved, Some(req)) => Some(req),
        (Gate::Normal, Some(req))
            if permissions.check_call(&req, tool, input, ctx.cwd) == Decision::Allowed =>
        {
            None
        }
        (Gate::Normal, Some(req)) => Some(req),
    })
}

/// What the user's `answer` to `req` means (None: nobody could be asked). `forced`: a hook
/// asked the question.
fn answered(
    req: &PermissionRequest,
    answer: Option<Answer>,
    forced: bool,
    permissions: &mut Permissions,
    sink: &mut dyn Sink,
) -> Result<(), Box<ToolRun>> {
    match answer {
        Some(Answer::Yes) => Ok(()),
        Some(Answer::Always) => {
            // A hook that asks asks every time: nothing to remember.
            if !forced {
                permissions.grant_for_session(req);
            }
            Ok(())
        }
        Some(Answer::No) => Err(Box::new(ToolRun::refused(ToolOutput::error(format!(
            "Permission denied: the user refused to let {} {} {}. Do not retry it; ask the user how to proceed.",
            req.tool, req.action, req.description
        ))))),
        None => {
            let hint = if forced {
                "answer it in the interactive REPL: a PreToolUse hook wants the user to confirm this call, whatever the permissions".to_string()
            } else {
                permissions.hint(req)
            };
            sink.event(AgentEvent::PermissionRefused {
                request: req.clone(),
                hint: hint.clone(),
            });
            Err(Box::new(ToolRun::refused(ToolOutput::error(format!(
                "Permission denied: {} needs permission to {} ({}), and this non-interactive run may not ask the user. The user can allow it: {hint}.",
                req.tool, req.action, req.description
            )))))
        }
    }
}

/// The `question` tool's questions put to the user through `sink`. A cancel ends the turn, as
/// in Go Crush.
fn ask_questions(input: &Value, sink: &mut dyn Sink) -> (ToolOutput, Option<Stop>) {
    use crate::tools::question;
    let qs = match question::parse(input) {
        Ok(q) => q,
        Err(e) => return (ToolOutput::error(e), None),
    };
    match sink.questions(&qs) {
        Some(answers) => (
            ToolOutput {
                content: question::format_answers(&qs, &answers),
                metadata: json!({"answered": true}),
                ..Default::default()
            },
            None,
        ),
        None => (
            ToolOutput::error("User cancelled this question"),
            Some(Stop::Canceled),
        ),
    }
}

/// The session of one tool call, kept in the session store: its reads, task list and file
/// history (each change marked with the call's id, for undo).
struct CallSession<'a> {
    store: &'a Store,
    session_id: &'a str,
    tool_call_id: &'a str,
}

impl SessionState for CallSession<'_> {
    fn session_id(&self) -> &str {
        self.session_id
    }
    fn todos(&self) -> Result<Vec<Todo>, ToolError> {
        let text = self
            .store
            .todos(self.session_id)
            .map_err(|e| ToolError::Internal(e.to_string()))?;
        Ok(todos::from_column(text.as_deref().unwrap_or("")))
    }
    fn set_todos(&self, list: &[Todo]) -> Result<(), ToolError> {
        self.store
            .set_todos(self.session_id, Some(&todos::to_column(list)))
            .map_err(|e| ToolError::Internal(format!("failed to save the todo list: {e}")))
    }
    fn file_changed(&self, path: &Path, before: Content, after: Content) {
        // A failed write loses the undo of this change, not the change itself.
        if let Err(e) =
            self.store
                .record_file_change(self.session_id, self.tool_call_id, path, before, after)
        {
            crate::log::warn(&format!(
                "cannot record the change of {} in the file history: {e}",
                path.display()
            ));
        }
    }
}

impl ReadTracker for CallSession<'_> {
    fn record_read(&self, path: &Path, mtime_ns: i64) {
        // A failed write only weakens the stale-file check; the read itself succeeded.
        let _ = self.store.record_read(self.session_id, path, mtime_ns);
    }
    fn last_read(&self, path: &Path) -> Option<i64> {
        self.store.last_read(self.session_id, path).ok().flatten()
    }
}

/// Why a custom command's `` !`cmd` `` did not run (crush(1) SKILLS AND COMMANDS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CommandShellError {
    /// The session has no bash tool (`options.disabled_tools`).
    NoShell { command: String },
    /// The permission rules refused it, or nobody could be asked (what the tool answered).
    Refused { command: String, answer: String },
}

impl std::fmt::Display for CommandShellError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandShellError::NoShell { command } => write!(
                f,
                "the command `{command}` cannot run: the bash tool is disabled (options.disabled_tools)"
            ),
            CommandShellError::Refused { command, answer } => {
                write!(f, "the command `{command}` was not run: {answer}")
            }
        }
    }
}

impl std::error::Error for CommandShellError {}

impl Agent {
    /// Runs a custom command's `` !`cmd` `` as the bash tool runs a command, behind the same
    /// permission rules (asked through `sink` where it can ask); its output (stdout, then
    /// stderr, and a line for a failing exit code), which goes in the prompt.
    pub(crate) fn run_command_shell(
        &mut self,
        command: &str,
        sink: &mut dyn Sink,
    ) -> Result<String, CommandShellError> {
        let bash = crate::tools::bash::Bash;
        let Some(tool) = self
            .toolkit
            .tools
            .iter()
            .position(|t| t.name() == bash.name())
        else {
            return Err(CommandShellError::NoShell {
                command: command.to_string(),
            });
        };
        let input = json!({"command": command, "description": "a custom command's !`command`"});
        let run = self.run_tool(tool, "", &input, "", &Gate::Normal, sink);
        if !run.ran || matches!(run.stop, Some(Stop::PermissionRefused)) {
            return Err(CommandShellError::Refused {
                command: command.to_string(),
                answer: run.out.content,
            });
        }
        // What the command printed, without the working-directory line the model gets.
        let out = run.out.content;
        Ok(match out.rsplit_once("\n\n<cwd>") {
            Some((printed, _)) => printed.to_string(),
            None => out,
        })
    }

    /// Runs one tool call of the step whose stored assistant message is `msg`.
    pub(super) fn run_call(
        &mut self,
        call: PendingCall,
        msg: &mut StepMessage,
        sink: &mut dyn Sink,
    ) -> Result<CallOutcome, AgentError> {
        let PendingCall { id, name, input } = call;
        let input = match input {
            Ok(v) => v,
            Err(e) => {
                let out = ToolOutput::error(format!(
                    "Tool call failed: the arguments were not valid JSON ({e}). Call the tool again with a valid JSON object."
                ));
                let view = self.call_view(&name, &json!({}));
                return Ok(CallOutcome {
                    result: answer_unrun(sink, (&id, &name, json!({}), view), &out),
                    stop: None,
                });
            }
        };
        announce(
            sink,
            &id,
            &name,
            input.clone(),
            self.call_view(&name, &input),
        );
        let found = self.all_tools().position(|t| t.name() == name);
        let (mut out, mut stop) = match found {
            None => {
                let names: Vec<&str> = self.all_tools().map(|t| t.name()).collect();
                let out = ToolOutput::error(format!(
                    "Unknown tool '{name}'. Available tools: {}",
                    names.join(", ")
                ));
                (out, None)
            }
            Some(tool) => {
                // A model that calls a tool plan mode does not offer.
                let refused = self
                    .all_tools()
                    .nth(tool)
                    .filter(|t| !self.offers(*t))
                    .map(super::plan::refusal);
                match refused {
                    Some(out) => (out, None),
                    None => self.hooked_call(tool, &id, &name, input, msg, sink)?,
                }
            }
        };
        session_config::apply(
            session_config::Parts {
                config: &mut self.config,
                permissions: &mut self.policy.permissions,
                tools: &mut self.toolkit.tools,
                mcp: self.toolkit.mcp.as_mut(),
                model: &mut self.model,
                hooks: &mut self.policy.hooks,
                system: &mut self.system,
                cwd: &self.workspace.cwd,
                lsp: self.toolkit.lsp.as_ref(),
            },
            &mut out,
            sink,
        );
        if let Some(lsp) = &self.toolkit.lsp {
            for w in crate::tools::lsp::take_warnings(lsp) {
                sink.event(AgentEvent::Notice(w));
            }
        }
        if self.cancel.load(Ordering::SeqCst) && stop.is_none() {
            stop = Some(Stop::Canceled);
        }
        if name == todos::NAME
            && !out.is_error
            && let Ok(list) = serde_json::from_value::<Vec<Todo>>(out.metadata["todos"].clone())
        {
            sink.event(AgentEvent::Todos(list));
        }
        Ok(CallOutcome {
            result: finish(sink, &id, &name, &out),
            stop,
        })
    }

    /// The call of a tool the agent has (`self.toolkit.tools[tool]`): PreToolUse, permission and run,
    /// PostToolUse. The hooks' context and feedback are appended to the output, their reports
    /// added to its metadata.
    fn hooked_call(
        &mut self,
        tool: usize,
        id: &str,
        name: &str,
        input: Value,
        msg: &mut StepMessage,
        sink: &mut dyn Sink,
    ) -> Result<(ToolOutput, Option<Stop>), AgentError> {
        // PreToolUse: before the permission check.
        let claude = self
            .all_tools()
            .nth(tool)
            .map(|t| t.claude_names())
            .unwrap_or_default();
        let call = hooks::ToolCall {
            name,
            claude: &claude,
            input: &input,
            id,
        };
        let pre = self.fire(hooks::Event::PreToolUse, Some(call), Map::new(), sink);
        if self.cancel.load(Ordering::SeqCst) {
            // Ctrl-C while the hooks ran: they were stopped, and the call does not start.
            let mut out = ToolOutput::error(CANCELED_BEFORE_RUN);
            if pre.ran() {
                add_metadata(&mut out.metadata, "hook", pre.metadata());
            }
            return Ok((out, Some(Stop::Canceled)));
        }
        if pre.composed.blocked() {
            return Ok(blocked(&pre));
        }
        let mut input = input;
        if let Some(new_input) = &pre.composed.updated_input {
            input = new_input.clone();
            self.store_input(msg, id, &input)?;
        }
        let gate = match pre.composed.decision {
            hooks::Decision::Allow => Gate::Approved,
            hooks::Decision::Ask => Gate::Ask(pre.composed.reason.clone()),
            hooks::Decision::None | hooks::Decision::Deny => Gate::Normal,
        };
        let run = self.run_tool(tool, id, &input, &msg.id, &gate, sink);
        let (mut out, mut stop) = (run.out, run.stop);
        // A provider's key that a command printed never reaches the model, the hooks or the store.
        if let Some(masked) = crate::env::mask(&out.content, &self.workspace.secrets) {
            out.content = masked;
        }
        // The same output in Claude Code's shape, for the hooks' `tool_response`.
        crate::env::mask_json(&mut out.structured, &self.workspace.secrets);
        let mut extra = Vec::new();
        let pre_text = pre.context_text(&self.workspace.cwd);
        if !pre_text.is_empty() {
            extra.push(pre_text);
        }
        if pre.ran() {
            add_metadata(&mut out.metadata, "hook", pre.metadata());
        }
        if run.ran {
            let call = hooks::ToolCall {
                name,
                claude: &claude,
                input: &input,
                id,
            };
            let halt = self.post_tool_use(call, &mut out, &mut extra, sink);
            stop = stop.or(halt);
        }
        if !extra.is_empty() {
            out.content = format!("{}\n\n{}", out.content, extra.join("\n\n"));
        }
        Ok((out, stop))
    }

    /// The call as it runs is what the session remembers: the stored assistant message gets the
    /// input a hook gave the call `id`, before the call runs.
    fn store_input(
        &self,
        msg: &mut StepMessage,
        id: &str,
        input: &Value,
    ) -> Result<(), AgentError> {
        for p in msg.parts.iter_mut() {
            if let Part::ToolCall {
                id: pid,
                input: pin,
                ..
            } = p
                && pid == id
            {
                *pin = input.to_string();
            }
        }
        Ok(self
            .session
            .store
            .update_message_parts(&msg.id, &msg.parts)?)
    }

    /// Runs `self.toolkit.tools[tool]` (the `agent` tool: a sub-agent, which needs no permission unless
    /// a hook asks for it; its own calls ask for theirs).
    fn run_tool(
        &mut self,
        tool: usize,
        id: &str,
        input: &Value,
        assistant_id: &str,
        gate: &Gate,
        sink: &mut dyn Sink,
    ) -> ToolRun {
        let reads = CallSession {
            store: &self.session.store,
            session_id: &self.session.id,
            tool_call_id: id,
        };
        let models = self.config.as_ref().map(|c| c.shell_models());
        let ctx = ToolCtx {
            cwd: &self.workspace.cwd,
            project_root: &self.workspace.project_root,
            reads: &reads,
            session: &reads,
            images: self.model.model.supports_attachments,
            cancel: self.cancel.clone(),
            session_models: models.as_ref(),
            diagnostics: self.toolkit.lsp.as_ref().map(|l| l as &dyn Diagnostics),
            shell_env_allow: &self.workspace.shell_env_allow,
            env: &self.workspace.env,
            env_file: self.session.env_file.as_deref(),
            files: self.workspace.files.as_deref(),
            skills: &self.toolkit.skill_files,
            bounds: &self.workspace.bounds,
            sandbox: self.workspace.sandbox.as_ref(),
        };
        let Some(t) = self
            .toolkit
            .tools
            .iter()
            .chain(self.toolkit.mcp.iter().flat_map(|m| m.tools.iter()))
            .nth(tool)
            .map(|t| t.as_ref())
        else {
            return ToolRun::ran(ToolOutput::error("the tool is no longer available"));
        };
        match question(t, input, &ctx, &self.policy.permissions, gate) {
            Err(refused) => return *refused,
            Ok(None) => {}
            Ok(Some(req)) => {
                if sink.can_ask() {
                    self.notify_question(&req, sink);
                }
                let answer = sink.ask(&req);
                let forced = matches!(gate, Gate::Ask(_));
                if let Err(refused) =
                    answered(&req, answer, forced, &mut self.policy.permissions, sink)
                {
                    return *refused;
                }
            }
        }
        // The tools the loop itself runs: sub-agents (unless the turn was canceled meanwhile).
        let loop_run = !self.is_sub_agent() && !self.cancel.load(Ordering::SeqCst);
        let ran = match t.run_mode() {
            RunMode::Loop(_) if !loop_run => None,
            RunMode::Loop(LoopTool::FetchAgent) => {
                Some(self.run_agentic_fetch(assistant_id, id, input, sink))
            }
            RunMode::Loop(LoopTool::SubAgent) => {
                Some(self.run_sub_agent(assistant_id, id, input, sink))
            }
            RunMode::Loop(LoopTool::Question) if sink.can_ask() => Some(ask_questions(input, sink)),
            RunMode::Loop(LoopTool::Info) => Some((self.crush_info(), None)),
            RunMode::Loop(LoopTool::Question) | RunMode::InProcess | RunMode::Command => None,
        };
        if let Some((out, stop)) = ran {
            return ToolRun {
                out,
                ran: true,
                stop,
            };
        }
        ToolRun::execute(t, input, &ctx, sink)
    }

    /// Notification: crush is about to ask the user a permission question (Claude Code's
    /// `permission_prompt`). Hooks only observe it.
    fn notify_question(&self, req: &PermissionRequest, sink: &mut dyn Sink) {
        let mut fields = Map::new();
        fields.insert(
            "message".into(),
            json!(format!(
                "crush needs your permission to use {}: {}",
                req.tool, req.description
            )),
        );
        fields.insert("notification_type".into(), json!("permission_prompt"));
        fields.insert("title".into(), json!("Permission needed"));
        self.fire(hooks::Event::Notification, None, fields, sink);
    }

    /// PostToolUse after a tool ran. A block is feedback to the model (the tool already ran),
    /// added to `extra` with the hooks' context. Returns the halt when a hook halted the turn.
    fn post_tool_use(
        &self,
        call: hooks::ToolCall,
        out: &mut ToolOutput,
        extra: &mut Vec<String>,
        sink: &mut dyn Sink,
    ) -> Option<Stop> {
        let mut response = Map::new();
        response.insert("output".into(), json!(out.content));
        response.insert("is_error".into(), json!(out.is_error));
        if let Value::Object(m) = &out.metadata {
            for (k, v) in m {
                if k != "hook" {
                    response.entry(k.clone()).or_insert(v.clone());
                }
            }
        }
        let mut req = self.hook_request(hooks::Event::PostToolUse);
        req.tool = Some(call);
        req.fields
            .insert("tool_response".into(), Value::Object(response));
        req.fields.insert("tool_output".into(), json!(out.content));
        req.fields.insert("is_error".into(), json!(out.is_error));
        req.claude_fields.insert(
            "tool_response".into(),
            hooks::claude::tool_response(call.claude.first().map(String::as_str), out),
        );
        let post = self.fire_request(&req, sink);
        let c = &post.composed;
        let mut halt = None;
        if c.blocked() {
            extra.push(format!("PostToolUse hook feedback: {}", c.reason));
            if c.halt {
                halt = Some(Stop::HookHalted(c.reason.clone()));
            }
        }
        let post_text = post.context_text(&self.workspace.cwd);
        if !post_text.is_empty() {
            extra.push(post_text);
        }
        if post.ran() {
            add_metadata(&mut out.metadata, "post_tool_use_hook", post.metadata());
        }
        halt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object_and_bad_ones_are_stored_as_empty() {
        let call = |input: &str| Part::ToolCall {
            id: "c".into(),
            name: "ls".into(),
            input: input.into(),
            provider_executed: false,
            finished: false,
        };
        let text = Part::Text { text: "hi".into() };
        let (parts, calls) = split_calls(vec![
            text.clone(),
            call(" "),
            call(r#"{"path": "."}"#),
            call("[1]"),
            call("{oops"),
        ]);
        assert_eq!(parts[0], text);
        let stored: Vec<&str> = parts[1..]
            .iter()
            .map(|p| match p {
                Part::ToolCall {
                    input,
                    finished: true,
                    ..
                } => input.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(stored, ["{}", r#"{"path":"."}"#, "{}", "{}"]);
        let input = |i: usize| calls[i].input.as_ref().map_err(|e| e.to_string());
        assert_eq!(input(0), Ok(&json!({})));
        assert_eq!(input(1), Ok(&json!({"path": "."})));
        assert_eq!(input(2), Err("arguments must be a JSON object".to_string()));
        assert!(calls[3].input.is_err());
    }
}
