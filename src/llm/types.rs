//! The data model shared by the providers, the agent loop and the store.
//!
//! `Part` serialises exactly as Go Crush stores message parts (`{"type": T, "data": {...}}`), so the
//! store can persist it unchanged and a tool that reads Crush's database reads ours.

use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    Tool,
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "system" => Role::System,
            _ => return None,
        })
    }
}

/// One part of a message, in Crush's stored shape.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Reasoning {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    ToolCall {
        id: String,
        name: String,
        /// Raw JSON text of the arguments as the model sent them (always valid JSON once stored;
        /// the agent replaces unparseable input with `{}`).
        input: String,
        #[serde(default)]
        provider_executed: bool,
        #[serde(default)]
        finished: bool,
    },
    ToolResult {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        data: String,
        #[serde(default)]
        mime_type: String,
        /// JSON text: tool-specific metadata (and, later, hook results).
        #[serde(default)]
        metadata: String,
        #[serde(default)]
        is_error: bool,
    },
    Finish {
        /// end_turn | max_tokens | tool_use | canceled | error | content_filter | unknown
        reason: String,
        /// Unix seconds.
        time: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<String>,
    },
    ShellCommand {
        command: String,
        output: String,
        exit_code: i32,
    },
}

/// A message as sent to a provider (and as stored, minus ids and timestamps).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// The text parts of `parts`, concatenated.
pub fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

impl Message {
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::Text { text: text.into() }],
        }
    }
    /// Concatenated text parts.
    pub fn text(&self) -> String {
        text_of(&self.parts)
    }
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall {
                id, name, input, ..
            } => Some((id.as_str(), name.as_str(), input.as_str())),
            _ => None,
        })
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema object of the parameters.
    pub parameters: serde_json::Value,
}

#[derive(Clone, Debug)]
pub struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
}

/// Token counts of one model call, in ledger terms: `input` excludes cached tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// The largest token count one model call can plausibly report (no model has a context window
/// near a billion tokens). Larger numbers are rejected as absurd, never recorded.
pub const MAX_PLAUSIBLE_TOKENS: u64 = 1_000_000_000;

impl Usage {
    /// Tokens the call occupied in the context window.
    pub fn context_tokens(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
            .saturating_add(self.output)
    }

    /// What the ledger may record: `Ok(None)` when every count is zero (no real call consumes
    /// zero input tokens: the provider reported nothing, so the usage is unknown, never zero),
    /// `Err` with a reason when a count is absurd.
    pub fn checked(self) -> Result<Option<Usage>, String> {
        let fields = [
            ("input", self.input),
            ("output", self.output),
            ("cache read", self.cache_read),
            ("cache write", self.cache_write),
        ];
        if let Some((name, v)) = fields.iter().find(|(_, v)| *v > MAX_PLAUSIBLE_TOKENS) {
            return Err(format!(
                "{name} tokens {v} is not plausible for one call (limit {MAX_PLAUSIBLE_TOKENS})"
            ));
        }
        if fields.iter().all(|(_, v)| *v == 0) {
            return Ok(None);
        }
        Ok(Some(self))
    }
}

/// Reads one token count of a provider's usage object: `Ok(None)` when absent or null, `Err`
/// when it is not a non-negative integer (negative, fractional, a string...).
pub fn token_field(u: &serde_json::Value, key: &str) -> Result<Option<u64>, String> {
    match u.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key} is {v}, not a non-negative integer")),
    }
}

/// Turns parsed usage into what a `Response` carries: `(usage, why it was rejected)`.
pub fn settle_usage(
    usage: Option<Usage>,
    rejected: Option<String>,
) -> (Option<Usage>, Option<String>) {
    if let Some(why) = rejected {
        return (None, Some(why));
    }
    match usage.map(Usage::checked) {
        None => (None, None),
        Some(Ok(u)) => (u, None),
        Some(Err(why)) => (None, Some(why)),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// The reason as stored in a `finish` part.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::EndTurn => "end_turn",
            FinishReason::ToolUse => "tool_use",
            FinishReason::MaxTokens => "max_tokens",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(_) => "unknown",
        }
    }
}

/// A complete model reply.
#[derive(Clone, Debug)]
pub struct Response {
    /// Reasoning, text and tool-call parts in the order the model produced them. Tool-call inputs
    /// are the raw concatenated argument text (may be invalid JSON; the agent checks).
    pub parts: Vec<Part>,
    /// None when the provider reported no usage (unknown, never zero), or when what it reported
    /// was rejected (see `usage_rejected`).
    pub usage: Option<Usage>,
    /// Why the reported usage was rejected (negative, non-integer or absurd counts); the call is
    /// then recorded with unknown usage and the reason is logged.
    pub usage_rejected: Option<String>,
    pub finish: FinishReason,
    /// The model name the server reported, if any.
    pub model: Option<String>,
}

/// What the streaming worker sends to the turn loop.
#[derive(Debug)]
pub enum StreamEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// A tool call began (for progress display only).
    ToolCallStart {
        id: String,
        name: String,
    },
    /// The attempt failed and will be retried after `wait`: everything streamed so far for this
    /// call must be discarded.
    Retry {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
    /// Final event of a successful call.
    Done(Response),
    /// Final event of a failed call (after retries).
    Error(crate::llm::LlmError),
}
