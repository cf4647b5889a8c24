//! The agent loop: one user turn = model calls and tool runs until the model stops.
//!
//! Each finished step (assistant message, its tool results and its usage row) is committed to the
//! store in one transaction before the next model call, so a killed process leaves a session that
//! reloads. The loop renders nothing: it reports `AgentEvent`s to a `Sink`.

pub mod permissions;
pub mod prompt;
pub mod session_config;
pub mod subagent;
pub mod summarize;
pub mod title;

use crate::config::ResolvedModel;
use crate::hooks::{self, HookConfig, Outcome};
use crate::llm::{
    self, ChatRequest, LlmError, Message, Part, RetryPolicy, Role, StreamEvent, ToolSpec, Usage,
};
use crate::store::{NewMessage, Store, UsageRecord};
use crate::tools::{PermissionRequest, ReadTracker, Tool, ToolCtx, ToolOutput};
use permissions::{Decision, Permissions};
use serde_json::{Map, Value, json};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the loop reports while it works.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// The current model call failed and is retried: text streamed since the call began is void.
    Retry {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
    },
    PermissionRefused {
        request: PermissionRequest,
        hint: String,
    },
    Usage {
        usage: Option<Usage>,
        cost: Option<f64>,
        model: String,
    },
    /// A step was committed to the store.
    StepCommitted {
        step: usize,
    },
    /// A diagnostic for stderr or the log (rejected usage, auto-summarize, a sub-agent's retry),
    /// never part of the answer.
    Notice(String),
    /// The prompt passed the UserPromptSubmit hooks (as they left it) and goes to the model.
    /// Nothing derived from a prompt (a title) may leave the process before this.
    PromptAccepted(String),
    /// A hook ran (one event per hook, in config order, after the batch finished).
    Hook {
        report: hooks::HookReport,
        /// The tool call a tool event was about.
        tool_call_id: Option<String>,
    },
}

/// The user's answer to a permission question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    Always,
    No,
}

pub trait Sink {
    fn event(&mut self, ev: AgentEvent);
    /// Asks the user; None when nobody can be asked (non-interactive run).
    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer>;
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The model finished.
    EndTurn,
    /// The model hit its output limit.
    MaxTokens,
    MaxSteps(usize),
    /// The same tool call with the same result kept repeating.
    Loop,
    /// A permission was refused (or could not be asked for).
    PermissionRefused,
    /// A UserPromptSubmit hook denied the prompt: nothing reached the model. The reason.
    HookDenied(String),
    /// A hook halted the turn (before the model was called, or after a blocked tool call).
    HookHalted(String),
    Canceled,
    Error(LlmError),
}

impl Stop {
    /// The reason as `--json` and the sub-agent's metadata name it.
    pub fn name(&self) -> &'static str {
        match self {
            Stop::EndTurn => "end_turn",
            Stop::MaxTokens => "max_tokens",
            Stop::MaxSteps(_) => "max_steps",
            Stop::Loop => "loop",
            Stop::PermissionRefused => "permission_refused",
            Stop::HookDenied(_) => "hook_denied",
            Stop::HookHalted(_) => "hook_halted",
            Stop::Canceled => "canceled",
            Stop::Error(_) => "error",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TurnResult {
    pub stop: Stop,
    /// The text of the last assistant message of the turn.
    pub final_text: String,
    pub steps: usize,
}

pub struct Agent<'a> {
    pub store: &'a Store,
    pub session_id: String,
    pub model: ResolvedModel,
    pub tools: Vec<Box<dyn Tool>>,
    pub permissions: Permissions,
    pub policy: RetryPolicy,
    pub system: String,
    pub cwd: PathBuf,
    pub project_root: PathBuf,
    pub max_steps: usize,
    pub cancel: Arc<AtomicBool>,
    /// This agent runs the `agent` tool's task in a child session (hooks report it).
    pub is_sub_agent: bool,
    /// Summarize the session when its context nears the model's window
    /// (`options.disable_auto_summarize` turns it off).
    pub auto_summarize: bool,
    pub hooks: HookConfig,
    /// Context waiting to travel with the next prompt (from SessionStart hooks).
    pub pending_context: Vec<String>,
    /// The session's configuration: session-only commands from the bash tool change its runtime
    /// layer (None: they are reported as ignored).
    pub config: Option<crate::config::Loaded>,
}

/// How many times in a row a Stop hook may make the agent continue.
pub const MAX_STOP_BLOCKS: usize = 3;

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

fn hook_context_block(text: &str) -> String {
    format!("<hook-context>\n{text}\n</hook-context>")
}

/// Runs `tool` through the permission flow: `pre_approved` (a hook allowed it) skips the check.
/// Returns the output and whether the tool ran.
fn run_with_permission(
    tool: &dyn Tool,
    input: &Value,
    ctx: &ToolCtx,
    permissions: &mut Permissions,
    pre_approved: bool,
    sink: &mut dyn Sink,
    stop: &mut Option<Stop>,
) -> (ToolOutput, bool) {
    let req = match tool.permission(input, ctx) {
        Err(msg) => return (ToolOutput::error(msg), false),
        Ok(None) => return (tool.run(input, ctx), true),
        Ok(Some(req)) => req,
    };
    if pre_approved || permissions.check(&req) == Decision::Allowed {
        return (tool.run(input, ctx), true);
    }
    match sink.ask(&req) {
        Some(Answer::Yes) => (tool.run(input, ctx), true),
        Some(Answer::Always) => {
            permissions.grant_for_session(&req);
            (tool.run(input, ctx), true)
        }
        Some(Answer::No) => {
            *stop = Some(Stop::PermissionRefused);
            (
                ToolOutput::error(format!(
                    "Permission denied: the user refused to let {} {} {}. Do not retry it; ask the user how to proceed.",
                    req.tool, req.action, req.description
                )),
                false,
            )
        }
        None => {
            let hint = Permissions::hint(&req);
            sink.event(AgentEvent::PermissionRefused {
                request: req.clone(),
                hint: hint.clone(),
            });
            *stop = Some(Stop::PermissionRefused);
            (
                ToolOutput::error(format!(
                    "Permission denied: {} needs permission to {} ({}), and this non-interactive run may not ask the user. The user can allow it: {hint}.",
                    req.tool, req.action, req.description
                )),
                false,
            )
        }
    }
}

/// Read records kept in the session store.
struct StoreReads<'a> {
    store: &'a Store,
    session_id: &'a str,
}

impl ReadTracker for StoreReads<'_> {
    fn record_read(&self, path: &Path, mtime_ns: i64) {
        // A failed write only weakens the stale-file check; the read itself succeeded.
        let _ = self.store.record_read(self.session_id, path, mtime_ns);
    }
    fn last_read(&self, path: &Path) -> Option<i64> {
        self.store.last_read(self.session_id, path).ok().flatten()
    }
}

use crate::time::unix_now as now;

/// Messages a provider can be sent: parts it understands (attachments as text), interrupted
/// tool calls closed.
pub fn history_for_model(stored: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for m in stored {
        let parts: Vec<Part> = crate::llm::attachments_as_text(m.parts)
            .into_iter()
            .filter(|p| match p {
                Part::Finish { .. } => false,
                Part::Text { text } => !text.trim().is_empty(),
                _ => true,
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        out.push(Message {
            role: m.role,
            parts,
        });
    }
    // Every tool call needs a result right after its message.
    let mut i = 0;
    while i < out.len() {
        if out[i].role == Role::Assistant {
            let calls: Vec<(String, String)> = out[i]
                .tool_calls()
                .map(|(id, name, _)| (id.to_string(), name.to_string()))
                .collect();
            if !calls.is_empty() {
                let answered: Vec<String> = match out.get(i + 1) {
                    Some(next) if next.role == Role::Tool => next
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let missing: Vec<Part> = calls
                    .iter()
                    .filter(|(id, _)| !answered.contains(id))
                    .map(|(id, name)| interrupted_result(id, name))
                    .collect();
                if !missing.is_empty() {
                    match out.get_mut(i + 1) {
                        Some(next) if next.role == Role::Tool => next.parts.extend(missing),
                        _ => out.insert(
                            i + 1,
                            Message {
                                role: Role::Tool,
                                parts: missing,
                            },
                        ),
                    }
                }
            }
        }
        i += 1;
    }
    out
}

fn interrupted_result(id: &str, name: &str) -> Part {
    Part::ToolResult {
        tool_call_id: id.to_string(),
        name: name.to_string(),
        content: crate::llm::INTERRUPTED_TOOL_RESULT.into(),
        data: String::new(),
        mime_type: String::new(),
        metadata: String::new(),
        is_error: true,
    }
}

fn result_part(id: &str, name: &str, out: &ToolOutput) -> Part {
    Part::ToolResult {
        tool_call_id: id.to_string(),
        name: name.to_string(),
        content: out.content.clone(),
        data: String::new(),
        mime_type: String::new(),
        metadata: if out.metadata.is_null() {
            String::new()
        } else {
            out.metadata.to_string()
        },
        is_error: out.is_error,
    }
}

/// How one model call ended.
enum CallEnd {
    Done(llm::Response),
    Failed(LlmError, String),
    Canceled(String),
}

impl<'a> Agent<'a> {
    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description(),
                parameters: t.schema(),
            })
            .collect()
    }

    fn call_model(&self, history: &[Message], sink: &mut dyn Sink) -> CallEnd {
        self.call_with_system(&self.system, history, sink)
    }

    fn call_with_system(&self, system: &str, history: &[Message], sink: &mut dyn Sink) -> CallEnd {
        let req = ChatRequest {
            model: self.model.model.id.clone(),
            system: system.to_string(),
            messages: history.to_vec(),
            tools: self.tool_specs(),
            max_tokens: self.model.max_tokens(),
            temperature: self.model.selected.temperature,
        };
        let rx = llm::stream(&self.model.provider.endpoint, &req, &self.policy);
        let mut partial = String::new();
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                // The worker may be blocked in a read: abandon it.
                return CallEnd::Canceled(partial);
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(StreamEvent::TextDelta(t)) => {
                    partial.push_str(&t);
                    sink.event(AgentEvent::TextDelta(t));
                }
                Ok(StreamEvent::ReasoningDelta(t)) => sink.event(AgentEvent::ReasoningDelta(t)),
                Ok(StreamEvent::ToolCallStart { .. }) => {}
                Ok(StreamEvent::Retry {
                    attempt,
                    wait,
                    reason,
                }) => {
                    partial.clear();
                    crate::log::warn(&format!(
                        "{}/{}: attempt {attempt} failed ({reason}); retrying in {} ms",
                        self.model.provider.id,
                        self.model.model.id,
                        wait.as_millis()
                    ));
                    sink.event(AgentEvent::Retry {
                        attempt,
                        wait,
                        reason,
                    });
                }
                Ok(StreamEvent::Done(resp)) => return CallEnd::Done(resp),
                Ok(StreamEvent::Error(e)) => {
                    crate::log::warn(&format!(
                        "{}/{}: model call failed: {e}",
                        self.model.provider.id, self.model.model.id
                    ));
                    return CallEnd::Failed(e, partial);
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return CallEnd::Failed(
                        LlmError::Protocol("the model stream ended without a result".into()),
                        partial,
                    );
                }
            }
        }
    }

    fn commit(&self, msgs: &[NewMessage], usage: Option<&UsageRecord>) -> Result<(), String> {
        self.commit_returning(msgs, usage).map(|_| ())
    }

    fn commit_returning(
        &self,
        msgs: &[NewMessage],
        usage: Option<&UsageRecord>,
    ) -> Result<Vec<crate::store::StoredMessage>, String> {
        self.store
            .commit_step(&self.session_id, msgs, usage)
            .map_err(|e| e.to_string())
    }

    /// The ledger row of one finished model call (reporting it to the sink, and saying why when
    /// the provider's numbers were rejected). Cost is None when the model is unpriced or the
    /// usage unknown: never a made-up $0.
    fn usage_record(&self, resp: &llm::Response, sink: &mut dyn Sink) -> UsageRecord {
        if let Some(why) = &resp.usage_rejected {
            sink.event(AgentEvent::Notice(format!(
                "ignored the token usage {}/{} reported ({why}); the call is recorded with unknown usage",
                self.model.provider.id, self.model.model.id
            )));
        }
        let rec = title::usage_record(&self.model, resp.usage);
        sink.event(AgentEvent::Usage {
            usage: rec.usage,
            cost: rec.cost,
            model: self.model.model.id.clone(),
        });
        rec
    }

    /// Stores how a model call ended without an answer: the partial text streamed so far (if
    /// any) and a finish part with `reason` and `message`, so the session reloads consistently.
    fn commit_end(&self, reason: &str, partial: &str, message: String) -> Result<(), String> {
        let mut parts = Vec::new();
        if !partial.trim().is_empty() {
            parts.push(Part::Text {
                text: partial.to_string(),
            });
        }
        parts.push(Part::Finish {
            reason: reason.into(),
            time: now(),
            message: Some(message),
            details: None,
        });
        self.commit(&[self.new_message(Role::Assistant, parts)], None)
    }

    fn new_message(&self, role: Role, parts: Vec<Part>) -> NewMessage {
        let assistant = role == Role::Assistant;
        NewMessage {
            role,
            parts,
            model: assistant.then(|| self.model.model.id.clone()),
            provider: assistant.then(|| self.model.provider.id.clone()),
        }
    }

    /// Fires a hook event and reports each hook that ran.
    fn fire(
        &self,
        event: hooks::Event,
        tool: Option<hooks::ToolCall>,
        fields: Map<String, Value>,
        sink: &mut dyn Sink,
    ) -> Outcome {
        if self.hooks.is_empty() {
            return Outcome::none(event);
        }
        // In a sub-agent only tool events fire (for the hooks that opted in).
        if self.is_sub_agent
            && !matches!(event, hooks::Event::PreToolUse | hooks::Event::PostToolUse)
        {
            return Outcome::none(event);
        }
        let mut fields = fields;
        if self.is_sub_agent {
            fields.insert("is_sub_agent".into(), json!(true));
        }
        let req = hooks::Request {
            event,
            session_id: &self.session_id,
            cwd: &self.cwd,
            project_dir: &self.project_root,
            tool,
            fields,
        };
        let out = self.hooks.run(&req);
        for r in &out.reports {
            sink.event(AgentEvent::Hook {
                report: r.clone(),
                tool_call_id: tool.map(|t| t.id.to_string()),
            });
        }
        out
    }

    /// Fires SessionStart (`source`: "startup" for a new session, "resume" for a continued one).
    /// The hooks' context travels with the next prompt.
    pub fn session_start(&mut self, source: &str, sink: &mut dyn Sink) {
        let mut fields = Map::new();
        fields.insert("source".into(), json!(source));
        fields.insert("model".into(), json!(self.model.model.id));
        let out = self.fire(hooks::Event::SessionStart, None, fields, sink);
        let text = out.context_text(&self.cwd);
        if !text.is_empty() {
            self.pending_context.push(text);
        }
    }

    /// Runs one turn for `prompt`, starting from the session's stored history.
    pub fn run_turn(&mut self, prompt: &str, sink: &mut dyn Sink) -> Result<TurnResult, String> {
        // UserPromptSubmit: before anything reaches the model.
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        fields.insert("attachments".into(), json!([]));
        let ups = self.fire(hooks::Event::UserPromptSubmit, None, fields, sink);
        if ups.composed.blocked() {
            let reason = ups.composed.reason.clone();
            return Ok(TurnResult {
                stop: if ups.composed.halt {
                    Stop::HookHalted(reason)
                } else {
                    Stop::HookDenied(reason)
                },
                final_text: String::new(),
                steps: 0,
            });
        }
        let prompt = ups.composed.updated_prompt.as_deref().unwrap_or(prompt);
        // The first accepted prompt names the session until a generated title replaces it.
        if let Ok(Some(s)) = self.store.session(&self.session_id)
            && s.title == title::PLACEHOLDER
            && let Err(e) = self.store.set_title(
                &self.session_id,
                &title::from_prompt(prompt, title::PLACEHOLDER),
            )
        {
            sink.event(AgentEvent::Notice(format!("cannot title the session: {e}")));
        }
        sink.event(AgentEvent::PromptAccepted(prompt.to_string()));
        // A session left near the window by its last turn is summarized before this one.
        if self.context_needs_summary() {
            self.summarize_or_warn(sink);
        }
        let mut history = self.load_history()?;
        let mut user = Message::user(prompt);
        let ups_context = ups.context_text(&self.cwd);
        for ctx in self
            .pending_context
            .drain(..)
            .chain((!ups_context.is_empty()).then_some(ups_context))
        {
            user.parts.push(Part::Text {
                text: hook_context_block(&ctx),
            });
        }
        self.store
            .add_message(
                &self.session_id,
                &self.new_message(Role::User, user.parts.clone()),
            )
            .map_err(|e| e.to_string())?;
        history.push(user);

        let mut signatures: Vec<u64> = Vec::new();
        let mut final_text = String::new();
        let mut step = 0;
        let mut stop_blocks = 0usize;
        let mut overflow_recovered = false;
        loop {
            if step >= self.max_steps {
                return Ok(TurnResult {
                    stop: Stop::MaxSteps(self.max_steps),
                    final_text,
                    steps: step,
                });
            }
            step += 1;
            let resp = match self.call_model(&history, sink) {
                CallEnd::Done(r) => r,
                // The provider refused the history as too long (a big tool result can jump
                // past the summarize margin in one step): summarize a shortened copy and carry
                // the request on, once per turn, rather than leave a session that can never
                // be sent again.
                CallEnd::Failed(err, _)
                    if err.is_context_overflow()
                        && !overflow_recovered
                        && self.auto_summarize_on() =>
                {
                    overflow_recovered = true;
                    sink.event(AgentEvent::Notice(format!(
                        "the model refused the conversation as too long ({err}); summarizing it"
                    )));
                    match self.summarize_and_carry_on(prompt, sink, true) {
                        Some(h) => {
                            history = h;
                            continue;
                        }
                        None => {
                            self.commit_end("error", "", err.to_string())?;
                            return Ok(TurnResult {
                                stop: Stop::Error(err),
                                final_text,
                                steps: step,
                            });
                        }
                    }
                }
                CallEnd::Failed(err, partial) => {
                    self.commit_end("error", &partial, err.to_string())?;
                    return Ok(TurnResult {
                        stop: Stop::Error(err),
                        final_text,
                        steps: step,
                    });
                }
                CallEnd::Canceled(partial) => {
                    self.commit_end("canceled", &partial, "User canceled request".into())?;
                    return Ok(TurnResult {
                        stop: Stop::Canceled,
                        // The canceled call's partial answer, else the last step's text.
                        final_text: if partial.trim().is_empty() {
                            final_text
                        } else {
                            partial
                        },
                        steps: step,
                    });
                }
            };

            let usage_rec = self.usage_record(&resp, sink);

            // Validate tool calls: unparseable input is stored as {} and answered with an error.
            let mut parts: Vec<Part> = Vec::new();
            let mut calls: Vec<(String, String, Result<Value, String>)> = Vec::new();
            for p in resp.parts {
                match p {
                    Part::ToolCall {
                        id,
                        name,
                        input,
                        provider_executed,
                        ..
                    } => {
                        let parsed = if input.trim().is_empty() {
                            Ok(Value::Object(Default::default()))
                        } else {
                            serde_json::from_str::<Value>(&input).map_err(|e| e.to_string())
                        };
                        let parsed = match parsed {
                            Ok(v @ Value::Object(_)) => Ok(v),
                            Ok(_) => Err("arguments must be a JSON object".to_string()),
                            Err(e) => Err(e),
                        };
                        let stored_input = match &parsed {
                            Ok(v) => v.to_string(),
                            Err(_) => "{}".to_string(),
                        };
                        parts.push(Part::ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                            input: stored_input,
                            provider_executed,
                            finished: true,
                        });
                        calls.push((id, name, parsed));
                    }
                    other => parts.push(other),
                }
            }
            let text = crate::llm::text_of(&parts);
            if !text.trim().is_empty() {
                final_text = text;
            }
            let has_calls = !calls.is_empty();
            let finish_reason = if has_calls {
                "tool_use".to_string()
            } else {
                resp.finish.as_str().to_string()
            };
            parts.push(Part::Finish {
                reason: finish_reason,
                time: now(),
                message: None,
                details: None,
            });
            if !has_calls {
                self.commit(
                    &[self.new_message(Role::Assistant, parts.clone())],
                    Some(&usage_rec),
                )?;
                sink.event(AgentEvent::StepCommitted { step });
                let stop = match resp.finish {
                    llm::FinishReason::MaxTokens => Stop::MaxTokens,
                    _ => Stop::EndTurn,
                };
                if stop == Stop::EndTurn {
                    // Stop hooks: `decision: "block"` with a reason makes the agent go on.
                    let mut fields = Map::new();
                    fields.insert("stop_hook_active".into(), json!(stop_blocks > 0));
                    fields.insert("last_assistant_message".into(), json!(final_text));
                    let out = self.fire(hooks::Event::Stop, None, fields, sink);
                    let c = &out.composed;
                    if c.decision == hooks::Decision::Deny
                        && !c.halt
                        && stop_blocks < MAX_STOP_BLOCKS
                    {
                        stop_blocks += 1;
                        let user = Message::user(format!(
                            "A Stop hook asked you to continue before finishing:\n{}",
                            c.reason
                        ));
                        self.store
                            .add_message(
                                &self.session_id,
                                &self.new_message(Role::User, user.parts.clone()),
                            )
                            .map_err(|e| e.to_string())?;
                        history.push(Message {
                            role: Role::Assistant,
                            parts,
                        });
                        history.push(user);
                        continue;
                    }
                }
                return Ok(TurnResult {
                    stop,
                    final_text,
                    steps: step,
                });
            }

            // The call is paid for: record it (with the assistant message) before the tools run,
            // so a process killed mid-tool still has it in the ledger. Tool results follow in
            // their own transaction; a call left without one is closed on reload.
            let assistant_id = self
                .commit_returning(
                    &[self.new_message(Role::Assistant, parts.clone())],
                    Some(&usage_rec),
                )?
                .into_iter()
                .next()
                .map(|m| m.id)
                .unwrap_or_default();

            // Run the tools, in order.
            let mut results: Vec<Part> = Vec::new();
            let mut stop: Option<Stop> = None;
            let reads = StoreReads {
                store: self.store,
                session_id: &self.session_id,
            };
            for (id, name, parsed) in calls {
                // Every result is announced after its call, so a consumer of the events can
                // pair them by id, whatever happens to the call.
                let announce = |sink: &mut dyn Sink, input: Value| {
                    sink.event(AgentEvent::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        input,
                    })
                };
                if let Some(s) = &stop {
                    let why = match s {
                        Stop::Canceled => "The user canceled the turn before this tool call ran.",
                        Stop::HookHalted(_) => "Not run: a hook halted the turn.",
                        _ => "Not run: an earlier tool call in this step was refused.",
                    };
                    let out = ToolOutput::error(why);
                    announce(sink, parsed.clone().unwrap_or_else(|_| json!({})));
                    sink.event(AgentEvent::ToolResult {
                        id: id.clone(),
                        name: name.clone(),
                        content: out.content.clone(),
                        is_error: true,
                    });
                    results.push(result_part(&id, &name, &out));
                    continue;
                }
                let input = match parsed {
                    Ok(v) => v,
                    Err(e) => {
                        let out = ToolOutput::error(format!(
                            "Tool call failed: the arguments were not valid JSON ({e}). Call the tool again with a valid JSON object."
                        ));
                        announce(sink, json!({}));
                        sink.event(AgentEvent::ToolResult {
                            id: id.clone(),
                            name: name.clone(),
                            content: out.content.clone(),
                            is_error: true,
                        });
                        results.push(result_part(&id, &name, &out));
                        continue;
                    }
                };
                announce(sink, input.clone());
                let models = self.config.as_ref().map(|c| c.shell_models());
                let ctx = ToolCtx {
                    cwd: &self.cwd,
                    project_root: &self.project_root,
                    reads: &reads,
                    cancel: self.cancel.clone(),
                    session_models: models.as_ref(),
                };
                let sub_agent = name == subagent::TOOL_NAME && !self.is_sub_agent;
                let mut input = input;
                let mut out = match self.tools.iter().find(|t| t.name() == name) {
                    None => ToolOutput::error(format!(
                        "Unknown tool '{name}'. Available tools: {}",
                        self.tools
                            .iter()
                            .map(|t| t.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    Some(tool) => {
                        // PreToolUse: before the permission check.
                        let pre = self.fire(
                            hooks::Event::PreToolUse,
                            Some(hooks::ToolCall {
                                name: &name,
                                input: &input,
                                id: &id,
                            }),
                            Map::new(),
                            sink,
                        );
                        if pre.composed.blocked() {
                            let r = &pre.composed.reason;
                            let mut out = if pre.composed.halt {
                                stop = Some(Stop::HookHalted(r.clone()));
                                ToolOutput::error(format!("Turn halted by hook. Reason: {r}"))
                            } else {
                                ToolOutput::error(format!("Tool call blocked by hook. Reason: {r}"))
                            };
                            add_metadata(&mut out.metadata, "hook", pre.metadata());
                            out
                        } else {
                            if let Some(new_input) = &pre.composed.updated_input {
                                // The call as it ran is what the session remembers.
                                input = new_input.clone();
                                for p in parts.iter_mut() {
                                    if let Part::ToolCall {
                                        id: pid,
                                        input: pin,
                                        ..
                                    } = p
                                        && *pid == id
                                    {
                                        *pin = input.to_string();
                                    }
                                }
                                // The assistant message is already stored: store the call as
                                // it runs, before it runs.
                                self.store
                                    .update_message_parts(&assistant_id, &parts)
                                    .map_err(|e| e.to_string())?;
                            }
                            let pre_approved = pre.composed.decision == hooks::Decision::Allow;
                            let (mut out, ran) = if sub_agent {
                                // Needs no permission; its own calls ask for theirs.
                                let (out, sub_stop) =
                                    self.run_sub_agent(&assistant_id, &id, &input, sink);
                                stop = stop.or(sub_stop);
                                (out, true)
                            } else {
                                run_with_permission(
                                    tool.as_ref(),
                                    &input,
                                    &ctx,
                                    &mut self.permissions,
                                    pre_approved,
                                    sink,
                                    &mut stop,
                                )
                            };
                            let mut extra = Vec::new();
                            let pre_text = pre.context_text(&self.cwd);
                            if !pre_text.is_empty() {
                                extra.push(pre_text);
                            }
                            if pre.ran() {
                                add_metadata(&mut out.metadata, "hook", pre.metadata());
                            }
                            if ran {
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
                                let mut fields = Map::new();
                                fields.insert("tool_response".into(), Value::Object(response));
                                fields.insert("tool_output".into(), json!(out.content));
                                fields.insert("is_error".into(), json!(out.is_error));
                                let post = self.fire(
                                    hooks::Event::PostToolUse,
                                    Some(hooks::ToolCall {
                                        name: &name,
                                        input: &input,
                                        id: &id,
                                    }),
                                    fields,
                                    sink,
                                );
                                let c = &post.composed;
                                if c.blocked() {
                                    // The tool already ran: a block is feedback to the model.
                                    extra.push(format!("PostToolUse hook feedback: {}", c.reason));
                                    if c.halt && stop.is_none() {
                                        stop = Some(Stop::HookHalted(c.reason.clone()));
                                    }
                                }
                                let post_text = post.context_text(&self.cwd);
                                if !post_text.is_empty() {
                                    extra.push(post_text);
                                }
                                if post.ran() {
                                    add_metadata(
                                        &mut out.metadata,
                                        "post_tool_use_hook",
                                        post.metadata(),
                                    );
                                }
                            }
                            if !extra.is_empty() {
                                out.content = format!("{}\n\n{}", out.content, extra.join("\n\n"));
                            }
                            out
                        }
                    }
                };
                session_config::apply(
                    session_config::Parts {
                        config: &mut self.config,
                        permissions: &mut self.permissions,
                        tools: &mut self.tools,
                        model: &mut self.model,
                        hooks: &mut self.hooks,
                        system: &mut self.system,
                        cwd: &self.cwd,
                    },
                    &mut out,
                    sink,
                );
                if self.cancel.load(Ordering::SeqCst) && stop.is_none() {
                    stop = Some(Stop::Canceled);
                }
                sink.event(AgentEvent::ToolResult {
                    id: id.clone(),
                    name: name.clone(),
                    content: out.content.clone(),
                    is_error: out.is_error,
                });
                results.push(result_part(&id, &name, &out));
            }

            let tool_msg = Message {
                role: Role::Tool,
                parts: results.clone(),
            };
            let assistant = Message {
                role: Role::Assistant,
                parts: parts.clone(),
            };
            self.commit(&[self.new_message(Role::Tool, results)], None)?;
            sink.event(AgentEvent::StepCommitted { step });

            // Ids differ on every call: the signature is what was asked and what came back.
            let mut h = DefaultHasher::new();
            for (_, name, input) in assistant.tool_calls() {
                (name, input).hash(&mut h);
            }
            for p in &tool_msg.parts {
                if let Part::ToolResult {
                    content, is_error, ..
                } = p
                {
                    (content, is_error).hash(&mut h);
                }
            }
            let sig = h.finish();
            history.push(assistant);
            history.push(tool_msg);
            if let Some(s) = stop {
                return Ok(TurnResult {
                    stop: s,
                    final_text,
                    steps: step,
                });
            }
            signatures.push(sig);
            let window = &signatures[signatures.len().saturating_sub(LOOP_WINDOW)..];
            if window.iter().filter(|&&s| s == sig).count() > LOOP_REPEATS {
                return Ok(TurnResult {
                    stop: Stop::Loop,
                    final_text,
                    steps: step,
                });
            }
            // Near the window: summarize, and carry the user's request on from the summary.
            if self.context_needs_summary()
                && let Some(h) = self.summarize_and_carry_on(prompt, sink, false)
            {
                history = h;
            }
        }
    }
}

/// Loop detection: the same calls with the same results more than `LOOP_REPEATS` times within
/// the last `LOOP_WINDOW` steps ends the turn (Go Crush's numbers).
const LOOP_WINDOW: usize = 10;
const LOOP_REPEATS: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_tool_calls_get_a_synthetic_result() {
        let hist = vec![
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text { text: "  ".into() },
                    Part::ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: "{}".into(),
                        provider_executed: false,
                        finished: true,
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                parts: vec![Part::Finish {
                    reason: "error".into(),
                    time: 0,
                    message: None,
                    details: None,
                }],
            },
        ];
        let h = history_for_model(hist);
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!(h[1].parts.len(), 1, "blank text dropped");
        assert_eq!(h[2].role, Role::Tool);
        assert!(
            matches!(&h[2].parts[0], Part::ToolResult { tool_call_id, is_error: true, .. } if tool_call_id == "c1")
        );
    }
}
