//! The agent loop: one user turn = model calls and tool runs until the model stops.
//!
//! Each finished step (assistant message, its tool results and its usage row) is committed to the
//! store in one transaction before the next model call, so a killed process leaves a session that
//! reloads. The loop renders nothing: it reports `AgentEvent`s to a `Sink`.

pub mod permissions;
pub mod prompt;

use crate::config::ResolvedModel;
use crate::llm::{
    self, ChatRequest, LlmError, Message, Part, RetryPolicy, Role, StreamEvent, ToolSpec, Usage,
};
use crate::store::{NewMessage, Store, UsageRecord};
use crate::tools::{PermissionRequest, ReadTracker, Tool, ToolCtx, ToolOutput};
use permissions::{Decision, Permissions};
use serde_json::Value;
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
    Canceled,
    Error(LlmError),
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

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Messages a provider can be sent: parts it understands, interrupted tool calls closed.
pub fn history_for_model(stored: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for m in stored {
        let parts: Vec<Part> = m
            .parts
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
        content: "The tool call was interrupted before it finished.".into(),
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
        let req = ChatRequest {
            model: self.model.model.id.clone(),
            system: self.system.clone(),
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
                    sink.event(AgentEvent::Retry {
                        attempt,
                        wait,
                        reason,
                    });
                }
                Ok(StreamEvent::Done(resp)) => return CallEnd::Done(resp),
                Ok(StreamEvent::Error(e)) => return CallEnd::Failed(e, partial),
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
        self.store
            .commit_step(&self.session_id, msgs, usage)
            .map(|_| ())
            .map_err(|e| e.to_string())
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

    /// Runs one turn for `prompt`, starting from the session's stored history.
    pub fn run_turn(&mut self, prompt: &str, sink: &mut dyn Sink) -> Result<TurnResult, String> {
        let stored = self
            .store
            .messages(&self.session_id)
            .map_err(|e| e.to_string())?;
        let mut history = history_for_model(
            stored
                .into_iter()
                .map(|m| Message {
                    role: m.role,
                    parts: m.parts,
                })
                .collect(),
        );
        let user = Message::user(prompt);
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
                CallEnd::Failed(err, partial) => {
                    let mut parts = Vec::new();
                    if !partial.trim().is_empty() {
                        parts.push(Part::Text { text: partial });
                    }
                    parts.push(Part::Finish {
                        reason: "error".into(),
                        time: now(),
                        message: Some(err.to_string()),
                        details: None,
                    });
                    self.commit(&[self.new_message(Role::Assistant, parts)], None)?;
                    return Ok(TurnResult {
                        stop: Stop::Error(err),
                        final_text,
                        steps: step,
                    });
                }
                CallEnd::Canceled(partial) => {
                    let mut parts = Vec::new();
                    if !partial.trim().is_empty() {
                        parts.push(Part::Text {
                            text: partial.clone(),
                        });
                    }
                    parts.push(Part::Finish {
                        reason: "canceled".into(),
                        time: now(),
                        message: Some("User canceled request".into()),
                        details: None,
                    });
                    self.commit(&[self.new_message(Role::Assistant, parts)], None)?;
                    return Ok(TurnResult {
                        stop: Stop::Canceled,
                        final_text: partial,
                        steps: step,
                    });
                }
            };

            let cost = resp.usage.as_ref().and_then(|u| self.model.cost(u));
            sink.event(AgentEvent::Usage {
                usage: resp.usage,
                cost,
                model: self.model.model.id.clone(),
            });
            let usage_rec = UsageRecord {
                provider: self.model.provider.id.clone(),
                model: self.model.model.id.clone(),
                usage: resp.usage,
                cost,
                price_source: if cost.is_some() {
                    self.model.price_source().to_string()
                } else {
                    "unpriced".to_string()
                },
            };

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
            let text: String = parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
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
            let assistant = Message {
                role: Role::Assistant,
                parts: parts.clone(),
            };

            if !has_calls {
                self.commit(
                    &[self.new_message(Role::Assistant, parts)],
                    Some(&usage_rec),
                )?;
                sink.event(AgentEvent::StepCommitted { step });
                let stop = match resp.finish {
                    llm::FinishReason::MaxTokens => Stop::MaxTokens,
                    _ => Stop::EndTurn,
                };
                return Ok(TurnResult {
                    stop,
                    final_text,
                    steps: step,
                });
            }

            // Run the tools, in order.
            let mut results: Vec<Part> = Vec::new();
            let mut stop: Option<Stop> = None;
            let reads = StoreReads {
                store: self.store,
                session_id: &self.session_id,
            };
            for (id, name, parsed) in calls {
                if let Some(s) = &stop {
                    let why = match s {
                        Stop::Canceled => "The user canceled the turn before this tool call ran.",
                        _ => "Not run: an earlier tool call in this step was refused.",
                    };
                    results.push(result_part(&id, &name, &ToolOutput::error(why)));
                    continue;
                }
                let input = match parsed {
                    Ok(v) => v,
                    Err(e) => {
                        let out = ToolOutput::error(format!(
                            "Tool call failed: the arguments were not valid JSON ({e}). Call the tool again with a valid JSON object."
                        ));
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
                sink.event(AgentEvent::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                let ctx = ToolCtx {
                    cwd: &self.cwd,
                    project_root: &self.project_root,
                    reads: &reads,
                    cancel: self.cancel.clone(),
                };
                let out = match self.tools.iter().find(|t| t.name() == name) {
                    None => ToolOutput::error(format!(
                        "Unknown tool '{name}'. Available tools: {}",
                        self.tools
                            .iter()
                            .map(|t| t.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    Some(tool) => match tool.permission(&input, &ctx) {
                        Err(msg) => ToolOutput::error(msg),
                        Ok(None) => tool.run(&input, &ctx),
                        Ok(Some(req)) => match self.permissions.check(&req) {
                            Decision::Allowed => tool.run(&input, &ctx),
                            Decision::Ask => match sink.ask(&req) {
                                Some(Answer::Yes) => tool.run(&input, &ctx),
                                Some(Answer::Always) => {
                                    self.permissions.grant_for_session(&req);
                                    tool.run(&input, &ctx)
                                }
                                Some(Answer::No) => {
                                    stop = Some(Stop::PermissionRefused);
                                    ToolOutput::error(format!(
                                        "Permission denied: the user refused to let {} {} {}. Do not retry it; ask the user how to proceed.",
                                        req.tool, req.action, req.description
                                    ))
                                }
                                None => {
                                    let hint = Permissions::hint(&req);
                                    sink.event(AgentEvent::PermissionRefused {
                                        request: req.clone(),
                                        hint: hint.clone(),
                                    });
                                    stop = Some(Stop::PermissionRefused);
                                    ToolOutput::error(format!(
                                        "Permission denied: {} needs permission to {} ({}), and this non-interactive run may not ask the user. The user can allow it: {hint}.",
                                        req.tool, req.action, req.description
                                    ))
                                }
                            },
                        },
                    },
                };
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
            self.commit(
                &[
                    self.new_message(Role::Assistant, parts),
                    self.new_message(Role::Tool, results),
                ],
                Some(&usage_rec),
            )?;
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
