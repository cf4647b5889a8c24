//! Summarization: when a session's context nears the model's window, the model writes a summary
//! of the conversation, stored as a message with `is_summary_message = 1` and pointed to by
//! `sessions.summary_message_id`; from then on the model is sent the history from the summary
//! on. A turn interrupted for it carries the user's request on.
//!
//! The trigger margin is proportional to the window (`SUMMARIZE_MARGIN_PERCENT`): Go Crush keeps
//! a flat 20 000 tokens for windows over 200 000, which summarizes a 1M-token window only at 98 %.

use super::{Agent, AgentError, AgentEvent, Answer, CallEnd, Sink, history_for_model};
use crate::llm::{Message, Part, Role};
use crate::store::{NewMessage, StoredMessage};
use crate::tools::PermissionRequest;

/// Summarize once the context leaves less than this share of the window free.
pub(crate) const SUMMARIZE_MARGIN_PERCENT: u64 = 20;

/// Whether `used` tokens of a `window`-token context call for a summary: the free space is at
/// most `SUMMARIZE_MARGIN_PERCENT` of the window. An unknown window (0) never triggers.
pub(crate) fn needs_summary(window: u64, used: u64) -> bool {
    if window == 0 || used == 0 {
        return false;
    }
    let margin =
        window / 100 * SUMMARIZE_MARGIN_PERCENT + window % 100 * SUMMARIZE_MARGIN_PERCENT / 100;
    window.saturating_sub(used) <= margin
}

/// With estimated usage, summarize only when the history (what a summary replaces) is at least
/// this share of the window.
pub(crate) const MIN_HISTORY_PERCENT: u64 = 25;

/// Whether summarizing would free room: the context less `fixed` (the estimated system prompt
/// and tools, which every call sends and no summary shrinks) is at least
/// `MIN_HISTORY_PERCENT` of the window. A small window whose estimated fixed part alone nears
/// it (a local model with 4 096 tokens, whose own count of crush's tool list is often far
/// below four bytes a token) would otherwise be summarized at every turn; a call that does
/// overflow is summarized and retried (crush(1) USAGE AND COST).
pub(crate) fn history_worth_summarizing(window: u64, used: u64, fixed: u64) -> bool {
    used.saturating_sub(fixed) >= window / 100 * MIN_HISTORY_PERCENT
}

/// The system prompt of the summary call (the sections of Go Crush's summary prompt).
pub(crate) const SUMMARY_SYSTEM: &str = "You are summarizing a coding session so that it can continue \
in a fresh context. Write a summary that lets another assistant pick the work up exactly where \
it stopped, without re-reading anything already done. Do not call tools. Use these sections:\n\
\n\
## Current State\nWhat the user asked for, what is done, what is in progress.\n\
## Files & Changes\nEvery file read, created or changed, with the relevant details (paths, \
functions, line numbers).\n\
## Technical Context\nCommands that worked or failed, errors seen, decisions and constraints.\n\
## Strategy\nThe approach being taken and why.\n\
## Exact Next Steps\nWhat to do next, in order.\n";

/// The user message that asks for the summary.
pub(crate) const SUMMARY_PROMPT: &str = "Provide a detailed summary of our conversation above.";

/// The summary request, with the session's task list when it has one (as Go Crush asks).
pub(crate) fn summary_prompt(todos: &[crate::tools::todos::Todo]) -> String {
    let mut s = SUMMARY_PROMPT.to_string();
    if !todos.is_empty() {
        s.push_str("\n\n## Current Todo List\n\n");
        for t in todos {
            s.push_str(&format!("- [{}] {}\n", t.status, t.content));
        }
        s.push_str(
            "\nInclude these tasks and their statuses in your summary. Instruct the resuming \
             assistant to use the `todos` tool to continue tracking progress on these tasks.",
        );
    }
    s
}

/// How the summary is put before the rest of the history.
const SUMMARY_HEADER: &str = "This session continues an earlier conversation, summarized here:\n\n";

/// The user message that carries an interrupted request on after a summary (Crush's wording).
pub(crate) fn carry_on_prompt(original: &str) -> String {
    format!(
        "The previous session was interrupted because it got too long, the initial user request was: `{original}`"
    )
}

/// The messages to send the model: from the latest summary on (the summary as a user message).
pub(crate) fn history_since_summary(
    stored: Vec<StoredMessage>,
    summary_id: Option<&str>,
) -> Vec<Message> {
    let start = summary_id
        .and_then(|id| stored.iter().position(|m| m.id == id))
        .unwrap_or(0);
    let msgs = stored
        .into_iter()
        .skip(start)
        .map(|m| {
            if summary_id == Some(m.id.as_str()) {
                let text = crate::llm::text_of(&m.parts);
                Message::user(format!("{SUMMARY_HEADER}{text}"))
            } else {
                Message {
                    role: m.role,
                    parts: m.parts,
                }
            }
        })
        .collect();
    history_for_model(msgs)
}

/// A summary that was written and stored.
#[derive(Debug, Clone)]
pub(crate) struct Summary {
    pub text: String,
    /// USD; None when unpriced.
    pub cost: Option<f64>,
}

/// Keeps the summary's text off the answer stream; asks and diagnostics still go through.
struct Quiet<'a> {
    inner: &'a mut dyn Sink,
}

impl Sink for Quiet<'_> {
    fn event(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::TextDelta(_)
            | AgentEvent::ReasoningDelta(_)
            | AgentEvent::StepCommitted
            | AgentEvent::ToolPending(_)
            | AgentEvent::Todos(_) => {}
            AgentEvent::Retry {
                attempt, reason, ..
            } => self.inner.event(AgentEvent::Notice(format!(
                "summary call failed ({reason}); retry {attempt}"
            ))),
            other => self.inner.event(other),
        }
    }
    fn ask(&mut self, req: &PermissionRequest) -> Option<Answer> {
        self.inner.ask(req)
    }
    fn can_ask(&self) -> bool {
        self.inner.can_ask()
    }
}

impl Agent {
    /// The session's history for the model, from its latest summary on.
    pub(super) fn load_history(&self) -> Result<Vec<Message>, AgentError> {
        let stored = self.session.store.messages(&self.session.id)?;
        let summary = self.session.store.summary_message_id(&self.session.id)?;
        Ok(history_since_summary(stored, summary.as_deref()))
    }

    /// Whether auto-summarize is on and the session's current context (the last call's input
    /// and output) is within the margin of the model's window.
    pub(super) fn context_needs_summary(&self) -> bool {
        // `/option auto-summarize false` in a session changes the runtime layer.
        if !self.auto_summarize_on() {
            return false;
        }
        let used = match self.session.store.session(&self.session.id) {
            Ok(Some(s)) => u64::try_from(s.context_tokens).unwrap_or(0),
            _ => return false,
        };
        let window = self.model.model.context_window;
        if !needs_summary(window, used) {
            return false;
        }
        // Reported tokens are the server's own count and the margin alone decides; an
        // estimate also needs a history worth summarizing.
        let estimated = self
            .session
            .store
            .last_call_estimated(&self.session.id)
            .unwrap_or(false);
        !estimated || history_worth_summarizing(window, used, self.fixed_tokens())
    }

    /// The estimated tokens of the system prompt and tools every call sends: the last call's
    /// when this process made one, else worked out now (only asked near the window).
    fn fixed_tokens(&self) -> u64 {
        let known = self.session.fixed_estimate.get();
        if known > 0 {
            return known;
        }
        let req = crate::llm::ChatRequest {
            system: self.system_with_mcp(),
            tools: self.tool_specs(),
            ..Default::default()
        };
        let fixed = crate::llm::estimate_fixed(&req);
        self.session.fixed_estimate.set(fixed);
        fixed
    }

    /// Auto-summarize is on for this agent and not switched off in the configuration
    /// (`/option auto-summarize false` in a session changes the runtime layer).
    pub(super) fn auto_summarize_on(&self) -> bool {
        self.policy.auto_summarize
            && !self
                .config
                .as_ref()
                .is_some_and(|c| c.config.options.disable_auto_summarize)
    }

    /// Asks the model for a summary of the session (history from the last summary on) and
    /// stores it with its usage; later turns start from it. What `/compact` runs.
    pub(crate) fn summarize(&mut self, sink: &mut dyn Sink) -> Result<Summary, AgentError> {
        self.summarize_with(sink, false, "manual")
    }

    /// `shrink`: long tool results and texts are cut to their head and tail first, so that a
    /// history the provider already refused as too long can still be summarized. `trigger`:
    /// "manual" (`/compact`) or "auto", for the PreCompact hooks, which may block it.
    fn summarize_with(
        &mut self,
        sink: &mut dyn Sink,
        shrink: bool,
        trigger: &str,
    ) -> Result<Summary, AgentError> {
        let mut history = self.load_history()?;
        if shrink {
            shrink_history(&mut history);
        }
        if history.is_empty() {
            return Err(AgentError::NothingToSummarize);
        }
        let mut fields = serde_json::Map::new();
        fields.insert("trigger".into(), serde_json::json!(trigger));
        fields.insert("custom_instructions".into(), serde_json::json!(""));
        let pre = self.fire(crate::hooks::Event::PreCompact, None, fields, sink);
        if pre.composed.blocked() {
            return Err(AgentError::SummaryBlocked(pre.composed.reason.clone()));
        }
        let todos = self
            .session
            .store
            .todos(&self.session.id)
            .ok()
            .flatten()
            .map(|t| crate::tools::todos::from_column(&t))
            .unwrap_or_default();
        history.push(Message::user(summary_prompt(&todos)));
        let mut quiet = Quiet { inner: sink };
        let resp = match self.call_with_system(SUMMARY_SYSTEM, &history, &mut quiet) {
            CallEnd::Done(r) => r,
            CallEnd::Failed(e, _) => return Err(AgentError::SummaryCall(e)),
            CallEnd::Canceled(_) => return Err(AgentError::SummaryCanceled),
        };
        let rec = self.usage_record(&resp, &mut quiet);
        let text = crate::llm::text_of(&resp.parts).trim().to_string();
        if text.is_empty() {
            // The call happened and is paid for even though it is useless.
            self.session.store.record_usage(&self.session.id, &rec)?;
            return Err(AgentError::EmptySummary);
        }
        let msg = NewMessage {
            role: Role::Assistant,
            parts: vec![
                Part::Text { text: text.clone() },
                Part::Finish {
                    reason: "end_turn".into(),
                    time: super::now(),
                    message: None,
                    details: None,
                },
            ],
            model: Some(self.model.model.id.clone()),
            provider: Some(self.model.provider.id.clone()),
        };
        self.session
            .store
            .commit_summary(&self.session.id, &msg, Some(&rec))?;
        Ok(Summary {
            text,
            cost: rec.cost,
        })
    }

    /// Summarizes, reporting a failure as a notice (the turn goes on with the full history).
    pub(super) fn summarize_or_warn(&mut self, sink: &mut dyn Sink) -> bool {
        self.summarize_or_warn_with(sink, false)
    }

    fn summarize_or_warn_with(&mut self, sink: &mut dyn Sink, shrink: bool) -> bool {
        let window = self.model.model.context_window;
        let used = self
            .session
            .store
            .session(&self.session.id)
            .ok()
            .flatten()
            .map_or(0, |s| s.context_tokens);
        sink.event(AgentEvent::Notice(format!(
            "the context ({used} tokens) is near the model's {window}-token window; summarizing the session"
        )));
        match self.summarize_with(sink, shrink, "auto") {
            Ok(_) => true,
            Err(e) => {
                sink.event(AgentEvent::Notice(format!(
                    "could not summarize: {e}; continuing with the full history"
                )));
                false
            }
        }
    }

    /// Mid-turn: summarizes, then stores the carry-on request and returns the new history.
    pub(super) fn summarize_and_carry_on(
        &mut self,
        prompt: &str,
        sink: &mut dyn Sink,
        shrink: bool,
    ) -> Option<Vec<Message>> {
        if !self.summarize_or_warn_with(sink, shrink) {
            return None;
        }
        let carry = self.new_message(Role::User, Message::user(carry_on_prompt(prompt)).parts);
        if let Err(e) = self.session.store.add_message(&self.session.id, &carry) {
            sink.event(AgentEvent::Notice(format!(
                "could not store the carried-on request: {e}"
            )));
            return None;
        }
        match self.load_history() {
            Ok(h) => Some(h),
            Err(e) => {
                sink.event(AgentEvent::Notice(format!(
                    "could not reload the summarized history: {e}"
                )));
                None
            }
        }
    }
}

/// Longest text or tool result kept whole when a too-long history is summarized.
const SHRINK_KEEP: usize = 4_000;

fn shrink_text(text: &mut String) {
    let chars = text.chars().count();
    if chars <= SHRINK_KEEP {
        return;
    }
    let half = SHRINK_KEEP / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(chars - half).collect();
    *text = format!(
        "{head}\n[... {} characters left out so the conversation fits the context window ...]\n{tail}",
        chars - 2 * half
    );
}

/// Cuts long texts and tool results to their head and tail (for summarizing a history that no
/// longer fits the model's window).
pub(crate) fn shrink_history(history: &mut [Message]) {
    for m in history {
        for p in &mut m.parts {
            match p {
                Part::Text { text } => shrink_text(text),
                Part::ToolResult { content, .. } => shrink_text(content),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_keeps_head_and_tail() {
        let mut h = vec![Message::user("x".repeat(10_000)), Message::user("short")];
        shrink_history(&mut h);
        let t = h[0].text();
        assert!(t.len() < 4_200, "{}", t.len());
        assert!(t.contains("6000 characters left out"), "{t}");
        assert_eq!(h[1].text(), "short");
    }

    #[test]
    fn a_history_too_small_to_free_room_is_not_summarized() {
        assert!(history_worth_summarizing(100_000, 85_000, 6_000));
        // An estimated 5 500-token prompt and tools in a 4 096 window, 500 of history: no.
        assert!(needs_summary(4096, 6000));
        assert!(!history_worth_summarizing(4096, 6000, 5500));
        // Once the history itself is a quarter of the window: yes.
        assert!(history_worth_summarizing(4096, 6600, 5500));
    }

    #[test]
    fn margin_is_proportional_to_the_window() {
        // 20 % of 10 000 = 2 000: summarize from 8 000 tokens on.
        assert!(!needs_summary(10_000, 7_999));
        assert!(needs_summary(10_000, 8_000));
        // A 1M window summarizes at 800k, where a flat 20k margin would wait until 980k.
        assert!(!needs_summary(1_000_000, 799_999));
        assert!(needs_summary(1_000_000, 800_000));
        // Past the window (a provider that let it overflow) still triggers.
        assert!(needs_summary(10_000, 12_000));
        // Unknown window or nothing used: never.
        assert!(!needs_summary(0, 5_000));
        assert!(!needs_summary(10_000, 0));
        // No overflow on huge numbers.
        assert!(needs_summary(u64::MAX, u64::MAX));
    }

    fn stored(id: &str, role: Role, text: &str) -> StoredMessage {
        StoredMessage {
            id: id.into(),
            session_id: "s".into(),
            seq: 0,
            role,
            parts: vec![Part::Text { text: text.into() }],
            model: None,
            provider: None,
            created_at: 0,
        }
    }

    #[test]
    fn history_starts_at_the_summary_as_a_user_message() {
        let msgs = vec![
            stored("1", Role::User, "old question"),
            stored("2", Role::Assistant, "old answer"),
            stored("3", Role::Assistant, "SUMMARY"),
            stored("4", Role::User, "next"),
        ];
        let h = history_since_summary(msgs.clone(), Some("3"));
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].role, Role::User);
        assert!(h[0].text().ends_with("SUMMARY"), "{}", h[0].text());
        assert_eq!(h[1].text(), "next");
        // No summary (or one that is gone): everything.
        assert_eq!(history_since_summary(msgs.clone(), None).len(), 4);
        assert_eq!(history_since_summary(msgs, Some("gone")).len(), 4);
    }

    #[test]
    fn the_summary_request_carries_the_task_list() {
        assert_eq!(summary_prompt(&[]), SUMMARY_PROMPT);
        let t = crate::tools::todos::Todo {
            content: "Fix bug".into(),
            status: "in_progress".into(),
            active_form: String::new(),
        };
        let p = summary_prompt(&[t]);
        assert!(
            p.contains("## Current Todo List\n\n- [in_progress] Fix bug\n"),
            "{p}"
        );
    }
}
