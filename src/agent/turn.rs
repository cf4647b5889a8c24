//! The step loop of a turn: the prompt through the UserPromptSubmit hooks into the session, then
//! steps until a stop reason: a model call streamed to the sink, its answer committed, its tool
//! calls run (`call.rs`) and their results committed, the Stop hooks, loop detection, and a
//! summary when the context nears the model's window (the request carried on after it).

use super::call::{self, CallOutcome, PendingCall, StepMessage};
use super::{Agent, AgentError, AgentEvent, Sink, Stop, TurnResult, now, title};
use crate::hooks;
use crate::llm::{self, ChatRequest, LlmError, Message, Part, Role, StreamEvent, ToolSpec};
use crate::store::{NewMessage, StoredMessage, UsageRecord};
use serde_json::{Map, json};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How many times in a row a Stop hook may make the agent continue, by default
/// (`options.max_stop_blocks`).
pub(super) const MAX_STOP_BLOCKS: usize = 20;

/// Loop detection: the same calls with the same results more than `LOOP_REPEATS` times within
/// the last `LOOP_WINDOW` steps ends the turn (Go Crush's numbers).
const LOOP_WINDOW: usize = 10;
const LOOP_REPEATS: usize = 5;

fn hook_context_block(text: &str) -> String {
    format!("<hook-context>\n{text}\n</hook-context>")
}

/// A turn in progress.
struct Turn {
    /// The prompt as the hooks left it (carried on after a summary).
    prompt: String,
    /// What the next model call is sent.
    history: Vec<Message>,
    /// One signature per tool step, for loop detection.
    signatures: Vec<u64>,
    /// The text of the last assistant message that had one.
    final_text: String,
    step: usize,
    /// How many times in a row Stop hooks made the agent go on.
    stop_blocks: usize,
    /// The provider refused the history as too long once this turn already.
    overflow_recovered: bool,
}

impl Turn {
    fn end(self, stop: Stop) -> TurnResult {
        TurnResult {
            stop,
            final_text: self.final_text,
            steps: self.step,
        }
    }

    /// Records a tool step's signature; whether the same step now repeats too often.
    fn is_looping(&mut self, sig: u64) -> bool {
        self.signatures.push(sig);
        let window = &self.signatures[self.signatures.len().saturating_sub(LOOP_WINDOW)..];
        window.iter().filter(|&&s| s == sig).count() > LOOP_REPEATS
    }
}

/// What a tool step asked and what came back: ids differ on every call, so they are left out.
fn step_signature(assistant: &Message, results: &Message) -> u64 {
    let mut h = DefaultHasher::new();
    for (_, name, input) in assistant.tool_calls() {
        (name, input).hash(&mut h);
    }
    for p in &results.parts {
        if let Part::ToolResult {
            content, is_error, ..
        } = p
        {
            (content, is_error).hash(&mut h);
        }
    }
    h.finish()
}

impl Agent {
    /// Runs one turn for `prompt`, starting from the session's stored history.
    pub(crate) fn run_turn(
        &mut self,
        prompt: &str,
        sink: &mut dyn Sink,
    ) -> Result<TurnResult, AgentError> {
        self.run_turn_with(prompt, Vec::new(), sink)
    }

    /// [`run_turn`](Self::run_turn) with files attached to the prompt (`Part::Binary`, stored
    /// after its text as Go Crush stores attachments).
    pub(crate) fn run_turn_with(
        &mut self,
        prompt: &str,
        attachments: Vec<Part>,
        sink: &mut dyn Sink,
    ) -> Result<TurnResult, AgentError> {
        let (prompt, context) = match self.submit_prompt(prompt, &attachments, sink) {
            Ok(accepted) => accepted,
            Err(refused) => return Ok(refused),
        };
        let mut turn = self.start_turn(&prompt, attachments, context, sink)?;
        loop {
            if turn.step >= self.policy.max_steps {
                return Ok(turn.end(Stop::MaxSteps(self.policy.max_steps)));
            }
            turn.step += 1;
            if let Some(stop) = self.step(&mut turn, sink)? {
                return Ok(turn.end(stop));
            }
        }
    }

    /// A new prompt through the UserPromptSubmit hooks, before anything reaches the model:
    /// the prompt as they leave it and the context they add, or the turn they stopped.
    pub(super) fn submit_prompt(
        &mut self,
        prompt: &str,
        attachments: &[Part],
        sink: &mut dyn Sink,
    ) -> Result<(String, String), TurnResult> {
        if !self.is_sub_agent() {
            self.session.prompt_id = crate::store::new_id().unwrap_or_default();
            self.rearm_budget();
        }
        let names: Vec<&str> = attachments
            .iter()
            .filter_map(|p| match p {
                Part::Binary { path, .. } => Some(path.as_str()),
                _ => None,
            })
            .collect();
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        fields.insert("attachments".into(), json!(names));
        let ups = self.fire(hooks::Event::UserPromptSubmit, None, fields, sink);
        if ups.composed.blocked() {
            let reason = ups.composed.reason.clone();
            return Err(TurnResult {
                stop: if ups.composed.halt {
                    Stop::HookHalted(reason)
                } else {
                    Stop::HookDenied(reason)
                },
                final_text: String::new(),
                steps: 0,
            });
        }
        if ups.composed.updated_prompt.is_some() {
            self.session.title_from = None;
        }
        let prompt = ups.composed.updated_prompt.as_deref().unwrap_or(prompt);
        Ok((prompt.to_string(), ups.context_text(&self.workspace.cwd)))
    }

    /// [`start_turn`](Self::start_turn) for a turn that makes no model call of this session.
    pub(super) fn store_prompt(
        &mut self,
        prompt: &str,
        context: String,
        sink: &mut dyn Sink,
    ) -> Result<(), AgentError> {
        self.start_turn(prompt, Vec::new(), context, sink)
            .map(|_| ())
    }

    /// The accepted prompt: titles the session, summarizes it first if needed, stores the user
    /// message (with the hooks' context) and starts the turn from the stored history.
    fn start_turn(
        &mut self,
        prompt: &str,
        attachments: Vec<Part>,
        ups_context: String,
        sink: &mut dyn Sink,
    ) -> Result<Turn, AgentError> {
        // The first accepted prompt names the session until a generated title replaces it.
        let source = self.session.title_from.take();
        if let Ok(Some(s)) = self.session.store.session(&self.session.id)
            && s.title == title::PLACEHOLDER
            && let Err(e) = self.session.store.set_title(
                &self.session.id,
                &title::from_prompt(source.as_deref().unwrap_or(prompt), title::PLACEHOLDER),
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
        user.parts.extend(attachments);
        for ctx in self
            .session
            .pending_context
            .drain(..)
            .chain((!ups_context.is_empty()).then_some(ups_context))
        {
            user.parts.push(Part::Text {
                text: hook_context_block(&ctx),
            });
        }
        self.session.store.add_message(
            &self.session.id,
            &self.new_message(Role::User, user.parts.clone()),
        )?;
        // As later turns will send it: attachments as the model takes them.
        history.extend(super::history_for_model(vec![user]));
        Ok(Turn {
            prompt: prompt.to_string(),
            history,
            signatures: Vec::new(),
            final_text: String::new(),
            step: 0,
            stop_blocks: 0,
            overflow_recovered: false,
        })
    }

    /// One step: a model call and what follows from its answer. Some: the turn stops.
    fn step(&mut self, turn: &mut Turn, sink: &mut dyn Sink) -> Result<Option<Stop>, AgentError> {
        if let Some(stop) = self.budget_stop(turn.step, sink)? {
            return Ok(Some(stop));
        }
        self.sync_mcp(sink);
        let resp = match self.call_model(&turn.history, sink) {
            CallEnd::Done(r) => r,
            CallEnd::Failed(err, partial) => return self.call_failed(turn, err, partial, sink),
            CallEnd::Canceled(partial) => {
                self.commit_end("canceled", &partial, "User canceled request".into())?;
                // The canceled call's partial answer, else the last step's text.
                if !partial.trim().is_empty() {
                    turn.final_text = partial;
                }
                return Ok(Some(Stop::Canceled));
            }
        };
        let usage_rec = self.usage_record(&resp, sink);
        // Unparseable input is stored as {} and answered with an error.
        let (mut parts, calls) = call::split_calls(resp.parts);
        let text = crate::llm::text_of(&parts);
        if !text.trim().is_empty() {
            turn.final_text = text;
        }
        let finish_reason = if calls.is_empty() {
            resp.finish.as_str().to_string()
        } else {
            "tool_use".to_string()
        };
        parts.push(Part::Finish {
            reason: finish_reason,
            time: now(),
            message: None,
            details: None,
        });
        if calls.is_empty() {
            self.answer_step(turn, parts, &resp.finish, &usage_rec, sink)
        } else {
            self.tool_step(turn, parts, calls, &usage_rec, sink)
        }
    }

    /// A failed model call ends the turn, stored with its error, unless the provider refused
    /// the history as too long (a big tool result can jump past the summarize margin in one
    /// step): then a shortened copy is summarized and the request carried on, once per turn,
    /// rather than leave a session that can never be sent again.
    fn call_failed(
        &mut self,
        turn: &mut Turn,
        err: LlmError,
        partial: String,
        sink: &mut dyn Sink,
    ) -> Result<Option<Stop>, AgentError> {
        let mut partial = partial;
        if err.is_context_overflow() && !turn.overflow_recovered && self.auto_summarize_on() {
            turn.overflow_recovered = true;
            sink.event(AgentEvent::Notice(format!(
                "the model refused the conversation as too long ({err}); summarizing it"
            )));
            if let Some(h) = self.summarize_and_carry_on(&turn.prompt, sink, true) {
                turn.history = h;
                return Ok(None);
            }
            partial.clear();
        }
        if let LlmError::TooLarge { .. } = err {
            cut_runaway(&mut partial);
        }
        self.commit_end("error", &partial, err.to_string())?;
        Ok(Some(Stop::Error(err)))
    }

    /// A step without tool calls: the model finished (or hit its output limit), unless a Stop
    /// hook makes it go on.
    fn answer_step(
        &mut self,
        turn: &mut Turn,
        parts: Vec<Part>,
        finish: &llm::FinishReason,
        usage_rec: &UsageRecord,
        sink: &mut dyn Sink,
    ) -> Result<Option<Stop>, AgentError> {
        self.commit(
            &[self.new_message(Role::Assistant, parts.clone())],
            Some(usage_rec),
        )?;
        sink.event(AgentEvent::StepCommitted);
        self.sync_transcript();
        match finish {
            llm::FinishReason::MaxTokens => return Ok(Some(Stop::MaxTokens)),
            llm::FinishReason::ContentFilter => return Ok(Some(Stop::ContentFilter)),
            _ if crate::llm::text_of(&parts).trim().is_empty() => return Ok(Some(Stop::Empty)),
            _ => {}
        }
        let Some(reason) = self.stop_hook_block(turn, sink) else {
            return Ok(Some(Stop::EndTurn));
        };
        turn.stop_blocks += 1;
        let user = Message::user(format!(
            "A Stop hook asked you to continue before finishing:\n{reason}"
        ));
        self.session.store.add_message(
            &self.session.id,
            &self.new_message(Role::User, user.parts.clone()),
        )?;
        turn.history.push(Message {
            role: Role::Assistant,
            parts,
        });
        turn.history.push(user);
        Ok(None)
    }

    /// Stop hooks (SubagentStop in a sub-agent): `decision: "block"` with a reason makes the
    /// agent go on (at most `max_stop_blocks` times in a row; past that the turn ends, and the
    /// user and the log are told). The reason, when it goes on.
    fn stop_hook_block(&self, turn: &Turn, sink: &mut dyn Sink) -> Option<String> {
        let event = if self.is_sub_agent() {
            hooks::Event::SubagentStop
        } else {
            hooks::Event::Stop
        };
        let mut req = self.hook_request(event);
        req.fields
            .insert("stop_hook_active".into(), json!(turn.stop_blocks > 0));
        req.fields
            .insert("last_assistant_message".into(), json!(turn.final_text));
        if self.is_sub_agent() {
            req.fields
                .insert("agent_type".into(), json!(hooks::claude::SUB_AGENT_TYPE));
            if let Some(t) = &self.session.transcript {
                req.claude_fields.insert(
                    "agent_transcript_path".into(),
                    json!(t.path(&self.session.id).display().to_string()),
                );
            }
        }
        let out = self.fire_request(&req, sink);
        let c = &out.composed;
        if c.decision != hooks::Decision::Deny || c.halt {
            return None;
        }
        if turn.stop_blocks >= self.policy.max_stop_blocks {
            let line = format!(
                "a Stop hook asked to continue {} times in a row; the turn ends here \
                 (options.max_stop_blocks = {})",
                turn.stop_blocks + 1,
                self.policy.max_stop_blocks
            );
            crate::log::warn(&line);
            sink.event(AgentEvent::Notice(line));
            return None;
        }
        Some(c.reason.clone())
    }

    /// A step with tool calls: the answer is committed, the calls run, their results committed.
    /// The turn stops when a call stopped it or the steps repeat; near the window the session
    /// is summarized and the request carried on.
    fn tool_step(
        &mut self,
        turn: &mut Turn,
        parts: Vec<Part>,
        calls: Vec<PendingCall>,
        usage_rec: &UsageRecord,
        sink: &mut dyn Sink,
    ) -> Result<Option<Stop>, AgentError> {
        // The call is paid for: record it (with the assistant message) before the tools run,
        // so a process killed mid-tool still has it in the ledger. Tool results follow in
        // their own transaction; a call left without one is answered as interrupted when the
        // history is next sent.
        let assistant_id = self
            .commit_returning(
                &[self.new_message(Role::Assistant, parts.clone())],
                Some(usage_rec),
            )?
            .into_iter()
            .next()
            .map(|m| m.id)
            .unwrap_or_default();
        let mut msg = StepMessage {
            id: assistant_id,
            parts,
        };
        let (results, stop) = self.run_calls(calls, &mut msg, sink)?;
        let tool_msg = Message {
            role: Role::Tool,
            parts: results.clone(),
        };
        let assistant = Message {
            role: Role::Assistant,
            parts: msg.parts,
        };
        self.commit(&[self.new_message(Role::Tool, results)], None)?;
        sink.event(AgentEvent::StepCommitted);
        self.sync_transcript();
        let sig = step_signature(&assistant, &tool_msg);
        turn.history.push(assistant);
        turn.history.push(tool_msg);
        if stop.is_some() {
            return Ok(stop);
        }
        if turn.is_looping(sig) {
            return Ok(Some(Stop::Loop));
        }
        // Near the window: summarize, and carry the user's request on from the summary.
        if self.context_needs_summary()
            && let Some(h) = self.summarize_and_carry_on(&turn.prompt, sink, false)
        {
            turn.history = h;
        }
        Ok(None)
    }

    /// Runs the step's tool calls in order; once the turn stops, the rest are answered unrun.
    fn run_calls(
        &mut self,
        calls: Vec<PendingCall>,
        msg: &mut StepMessage,
        sink: &mut dyn Sink,
    ) -> Result<(Vec<Part>, Option<Stop>), AgentError> {
        let mut results = Vec::new();
        let mut stop: Option<Stop> = None;
        for pending in calls {
            if stop.is_none() && self.cancel.load(Ordering::SeqCst) {
                stop = Some(Stop::Canceled);
            }
            let outcome = match &stop {
                Some(s) => {
                    let input = pending.input.as_ref().cloned().unwrap_or_default();
                    let view = self.call_view(&pending.name, &input);
                    CallOutcome::not_run(pending, s, view, sink)
                }
                None => self.run_call(pending, msg, sink)?,
            };
            results.push(outcome.result);
            stop = stop.or(outcome.stop);
        }
        Ok((results, stop))
    }
}

/// How one model call ended.
pub(super) enum CallEnd {
    Done(llm::Response),
    Failed(LlmError, String),
    Canceled(String),
}

impl Agent {
    /// The tools offered, sorted by name as Crush sends them.
    pub(super) fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .all_tools()
            .filter(|t| self.offers(*t))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description(),
                parameters: t.schema(),
            })
            .collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    fn call_model(&self, history: &[Message], sink: &mut dyn Sink) -> CallEnd {
        self.call_with_system(&self.system_with_mcp(), history, sink)
    }

    pub(super) fn call_with_system(
        &self,
        system: &str,
        history: &[Message],
        sink: &mut dyn Sink,
    ) -> CallEnd {
        let messages = if self.model.model.supports_attachments {
            history.to_vec()
        } else {
            llm::images_as_text(history.to_vec())
        };
        let req = ChatRequest {
            model: self.model.model.id.clone(),
            system: system.to_string(),
            messages,
            tools: self.tool_specs(),
            max_tokens: self.model.max_tokens(),
            temperature: self.model.temperature(),
            options: self.model.call_options(),
        };
        let rx = llm::stream(&self.model.provider.endpoint, &req, &self.policy.retry);
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
                Ok(StreamEvent::ToolCallStart { name }) => {
                    sink.event(AgentEvent::ToolPending(name))
                }
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
                Ok(StreamEvent::Notice(n)) => sink.event(AgentEvent::Notice(n)),
                Ok(StreamEvent::Done(mut resp)) => {
                    if resp.usage.is_none() {
                        resp.estimated = Some(llm::estimate_usage(&req, &resp.parts));
                        if system != super::summarize::SUMMARY_SYSTEM {
                            self.session.fixed_estimate.set(llm::estimate_fixed(&req));
                        }
                    }
                    return CallEnd::Done(resp);
                }
                Ok(StreamEvent::Error(e)) => {
                    crate::log::warn(&format!(
                        "{}/{}: model call failed: {e}",
                        self.model.provider.id, self.model.model.id
                    ));
                    // A stream cut at the window is an overflow (crush(1) USAGE AND COST).
                    let answer = [Part::Text {
                        text: partial.clone(),
                    }];
                    let est = llm::estimate_usage(&req, &answer);
                    let e = self
                        .model
                        .explain(e)
                        .at_window(est.input + est.output, self.model.model.context_window);
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

    /// Stores `parts` as an assistant message that no model call of this session made (a
    /// forked skill's answer): no usage row, its spend is its child session's.
    pub(super) fn commit_answer(&self, parts: Vec<Part>) -> Result<(), AgentError> {
        self.commit(&[self.new_message(Role::Assistant, parts)], None)?;
        self.sync_transcript();
        Ok(())
    }

    fn commit(&self, msgs: &[NewMessage], usage: Option<&UsageRecord>) -> Result<(), AgentError> {
        self.commit_returning(msgs, usage).map(|_| ())
    }

    fn commit_returning(
        &self,
        msgs: &[NewMessage],
        usage: Option<&UsageRecord>,
    ) -> Result<Vec<StoredMessage>, AgentError> {
        Ok(self
            .session
            .store
            .commit_step(&self.session.id, msgs, usage)?)
    }

    /// The ledger row of one finished model call (reporting it to the sink, and saying why when
    /// the provider's numbers were rejected). Cost is None when the model is unpriced or the
    /// usage unknown: never a made-up $0.
    pub(super) fn usage_record(&self, resp: &llm::Response, sink: &mut dyn Sink) -> UsageRecord {
        if let Some(why) = &resp.usage_rejected {
            sink.event(AgentEvent::Notice(format!(
                "ignored the token usage {}/{} reported ({why}); the call is recorded with unknown usage",
                self.model.provider.id, self.model.model.id
            )));
        }
        let mut rec = title::usage_record(&self.model, resp.usage);
        // No usage reported: the estimate moves the context meter and the summarize margin,
        // and the ledger says the call's tokens are unknown (crush(1) USAGE AND COST).
        let estimate = resp.estimated.filter(|_| rec.usage.is_none());
        if let Some(e) = estimate {
            rec.price_source = crate::store::PriceSource::Estimated;
            if let Err(err) = self
                .session
                .store
                .set_context_estimate(&self.session.id, e.input + e.output)
            {
                crate::log::warn(&format!("cannot store the context estimate: {err}"));
            }
        }
        sink.event(AgentEvent::Usage {
            usage: rec.usage,
            estimate,
            cost: rec.cost,
            model: self.model.model.id.clone(),
        });
        rec
    }

    /// Stores how a model call ended without an answer: the partial text streamed so far (if
    /// any) and a finish part with `reason` and `message`, so the session reloads consistently.
    pub(super) fn commit_end(
        &self,
        reason: &str,
        partial: &str,
        message: String,
    ) -> Result<(), AgentError> {
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

    pub(super) fn new_message(&self, role: Role, parts: Vec<Part>) -> NewMessage {
        let assistant = role == Role::Assistant;
        NewMessage {
            role,
            parts,
            model: assistant.then(|| self.model.model.id.clone()),
            provider: assistant.then(|| self.model.provider.id.clone()),
        }
    }
}

/// How much of a reply cut for being too large is stored (and sent again with the session).
pub(crate) const KEPT_OF_RUNAWAY: usize = 64 * 1024;

/// A runaway reply is stored cut to its first [`KEPT_OF_RUNAWAY`] bytes with a marker, so the
/// session stays small enough to continue (crush(1) SESSION STORE).
fn cut_runaway(partial: &mut String) {
    if partial.len() <= KEPT_OF_RUNAWAY {
        return;
    }
    let mut end = KEPT_OF_RUNAWAY;
    while !partial.is_char_boundary(end) {
        end -= 1;
    }
    let dropped = partial.len() - end;
    partial.truncate(end);
    partial.push_str(&format!(
        "\n\n[crush: this reply was cut for being too large; {dropped} more bytes were not kept]"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, result: &str) -> (Message, Message) {
        let assistant = Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                id: id.into(),
                name: "ls".into(),
                input: "{}".into(),
                provider_executed: false,
                finished: true,
            }],
        };
        let results = Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult {
                tool_call_id: id.into(),
                name: "ls".into(),
                content: result.into(),
                data: String::new(),
                mime_type: String::new(),
                metadata: String::new(),
                is_error: false,
            }],
        };
        (assistant, results)
    }

    #[test]
    fn the_same_step_repeated_past_the_limit_is_a_loop() {
        let sig = |id: &str, result: &str| {
            let (a, r) = step(id, result);
            step_signature(&a, &r)
        };
        // Ids differ on every call; what was asked and what came back is the step.
        assert_eq!(sig("c1", "x"), sig("c2", "x"));
        assert_ne!(sig("c1", "x"), sig("c1", "y"));
        let mut turn = Turn {
            prompt: String::new(),
            history: Vec::new(),
            signatures: Vec::new(),
            final_text: String::new(),
            step: 0,
            stop_blocks: 0,
            overflow_recovered: false,
        };
        for _ in 0..LOOP_REPEATS {
            assert!(!turn.is_looping(sig("c", "x")));
        }
        assert!(turn.is_looping(sig("c", "x")));
        // Spread out over more than the window, the same step is not a loop.
        let mut turn = Turn {
            signatures: Vec::new(),
            ..turn
        };
        for i in 0..3 * LOOP_WINDOW {
            let s = if i % 3 == 0 {
                sig("c", "x")
            } else {
                sig("c", &i.to_string())
            };
            assert!(!turn.is_looping(s), "step {i}");
        }
    }
}
