//! A turn as the editor sees it: the agent's events as `session/update` notifications, its
//! permission questions as `session/request_permission` requests answered by the user in the
//! editor. Diagnostics go to stderr and the project log, never to stdout.

use super::content::{self, fenced, text_content};
use super::files::EditorFiles;
use super::rpc::{AskError, Peer};
use crate::agent::{AgentEvent, Answer, Sink};
use crate::store::Store;
use crate::tools::PermissionRequest;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// The call announced last and not finished yet.
struct Call {
    id: String,
    name: String,
    input: Value,
    view: crate::tools::CallView,
}

pub(super) struct AcpSink<'a> {
    pub peer: &'a Peer,
    pub session_id: &'a str,
    pub cwd: &'a Path,
    pub files: &'a EditorFiles,
    pub store: &'a Store,
    pub cancel: &'a AtomicBool,
    /// The model's context window, for `usage_update`.
    pub context_window: u64,
    /// Called with the prompt once it passed the UserPromptSubmit hooks (a fresh session's
    /// title starts then).
    pub on_accepted: Option<Box<dyn FnOnce(String) + 'a>>,
    current: Option<Call>,
    /// Text was streamed in the current model call.
    streamed: bool,
    /// Questions asked for calls the editor was not shown (a sub-agent's).
    questions: usize,
}

impl<'a> AcpSink<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        peer: &'a Peer,
        session_id: &'a str,
        cwd: &'a Path,
        files: &'a EditorFiles,
        store: &'a Store,
        cancel: &'a AtomicBool,
        context_window: u64,
    ) -> AcpSink<'a> {
        AcpSink {
            peer,
            session_id,
            cwd,
            files,
            store,
            cancel,
            context_window,
            on_accepted: None,
            current: None,
            streamed: false,
            questions: 0,
        }
    }

    pub(super) fn update(&self, update: Value) {
        self.peer.notify(
            "session/update",
            json!({"sessionId": self.session_id, "update": update}),
        );
    }

    /// A message chunk of crush's own (why a turn ended), set apart from the answer.
    pub(super) fn note(&self, text: &str) {
        self.update(json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": format!("\n\n*{text}*\n")}}));
    }

    fn chunk(&self, kind: &str, text: String) {
        self.update(json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}));
    }

    /// The session's context and cost, after a step was committed.
    fn usage(&self) {
        if let Ok(Some(s)) = self.store.session(self.session_id) {
            self.update(json!({"sessionUpdate": "usage_update",
                "used": s.context_tokens.max(0), "size": self.context_window,
                "cost": {"amount": s.cost, "currency": "USD"}}));
        }
    }
}

/// The editor's label of "always" for `req`: crush's rule, which covers that exact command for
/// bash and the tool in that directory for the others, for this session.
fn always_label(req: &PermissionRequest, cwd: &Path) -> String {
    if req.runs == crate::tools::RunMode::Command {
        return "Always allow this exact command in this session".into();
    }
    let dir = if req.path.is_dir() {
        req.path.as_path()
    } else {
        req.path.parent().unwrap_or(&req.path)
    };
    let shown = match dir.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => dir.display().to_string(),
    };
    format!("Always allow {} in {shown} in this session", req.tool)
}

impl Sink for AcpSink<'_> {
    fn event(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::TextDelta(t) => {
                self.streamed = true;
                self.chunk("agent_message_chunk", t);
            }
            AgentEvent::ReasoningDelta(t) => self.chunk("agent_thought_chunk", t),
            AgentEvent::Retry {
                attempt,
                wait,
                reason,
            } => {
                crate::ewriteln!(
                    "crush: {}",
                    crate::agent::retry_line(attempt, wait, &reason)
                );
                if std::mem::take(&mut self.streamed) {
                    self.note(&format!(
                        "The model call failed ({reason}); the answer starts again."
                    ));
                }
            }
            AgentEvent::ToolCall {
                id,
                name,
                input,
                view,
            } => {
                self.streamed = false;
                self.files.take_changes();
                self.update(content::tool_call(&id, &input, &view, "in_progress"));
                self.current = Some(Call {
                    id,
                    name,
                    input,
                    view,
                });
            }
            AgentEvent::ToolResult {
                id,
                name,
                content,
                is_error,
                ..
            } => {
                // A call that failed changed nothing worth showing.
                let mut changes = self.files.take_changes();
                if is_error {
                    changes.clear();
                }
                let unknown;
                let view = match self.current.as_ref().filter(|c| c.id == id) {
                    Some(c) => &c.view,
                    None => {
                        unknown = crate::tools::CallView::unknown(&name);
                        &unknown
                    }
                };
                let mut shown = content::result_content(view, &content, &changes);
                // What a change's result says beyond its one line (diagnostics, hook context).
                if !changes.is_empty() && content.trim().lines().count() > 1 {
                    shown.push(text_content(&fenced(&content, "")));
                }
                self.update(
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": if is_error { "failed" } else { "completed" }, "content": shown}),
                );
                let call = self.current.take().filter(|c| c.id == id);
                if let Some(c) = call
                    && let Some(plan) = content::plan(&c.name, &c.input, is_error)
                {
                    self.update(plan);
                }
            }
            AgentEvent::PermissionRefused { request, hint } => {
                crate::log::warn(&format!(
                    "acp: refused {} ({}): {hint}",
                    request.tool, request.description
                ));
            }
            // The todos list reaches the editor as a plan, from the tool call (above).
            AgentEvent::Usage { .. } | AgentEvent::ToolPending(_) | AgentEvent::Todos(_) => {}
            AgentEvent::StepCommitted => {
                self.streamed = false;
                self.usage();
            }
            AgentEvent::Notice(text) => {
                crate::log::info(&format!("acp: {text}"));
                crate::ewriteln!("crush: {}", crate::visible::text(&text));
            }
            AgentEvent::Hook { report, .. } => {
                crate::ewriteln!("crush: {}", crate::visible::text(&report.line()));
            }
            AgentEvent::PromptAccepted(prompt) => {
                if let Some(f) = self.on_accepted.take() {
                    f(prompt);
                }
            }
        }
    }

    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer> {
        // A question for the announced call, or for a call the editor was not shown (a
        // sub-agent's): that one is shown first.
        let (id, nested) = match &self.current {
            Some(c) if c.name == req.tool => (c.id.clone(), false),
            other => {
                self.questions += 1;
                let parent = other.as_ref().map_or("question", |c| c.id.as_str());
                (format!("{parent}/{}", self.questions), true)
            }
        };
        if nested {
            self.update(json!({"sessionUpdate": "tool_call", "toolCallId": id,
                "title": format!("{}: {}", req.tool, req.description.lines().next().unwrap_or("")),
                "kind": req.kind.acp_name(), "status": "pending",
                "locations": [{"path": req.path.display().to_string()}]}));
        }
        let mut call = json!({"toolCallId": id, "status": "pending"});
        let mut shown = Vec::new();
        if let Some(d) = req.diff.as_deref().filter(|d| !d.trim().is_empty()) {
            shown.push(text_content(&fenced(d, "diff")));
        }
        if req.description.contains('\n') {
            shown.push(text_content(&fenced(&req.description, "sh")));
        }
        if !shown.is_empty() {
            call["content"] = json!(shown);
        }
        let options = json!([
            {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow_always", "name": always_label(req, self.cwd), "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ]);
        let asked = self.peer.request(
            "session/request_permission",
            json!({"sessionId": self.session_id, "toolCall": call, "options": options}),
            self.cancel,
            None,
        );
        let answer = match asked {
            Ok(v) => match (
                v["outcome"]["outcome"].as_str(),
                v["outcome"]["optionId"].as_str(),
            ) {
                (Some("selected"), Some("allow_once")) => Answer::Yes,
                (Some("selected"), Some("allow_always")) => Answer::Always,
                _ => Answer::No,
            },
            Err(AskError::Canceled) => Answer::No,
            Err(e) => {
                crate::log::warn(&format!("acp: permission question for {}: {e}", req.tool));
                crate::ewriteln!("crush: the permission question got no answer ({e}): refused");
                Answer::No
            }
        };
        let status = match (answer, nested) {
            (Answer::No, true) => Some("failed"),
            (_, true) => Some("completed"),
            (Answer::No, false) => None,
            (_, false) => Some("in_progress"),
        };
        if let Some(s) = status {
            self.update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": s}),
            );
        }
        Some(answer)
    }
}
