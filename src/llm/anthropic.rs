//! Anthropic Messages API: request body, headers, and the streaming event accumulator.

use super::budget::{BLOCK_COST, Budget};
use super::dialect::{self, Accumulator as _};
use super::retry::{Failure, error_from_json, kind_retryable};
use super::sse::SseEvent;
use super::{
    ChatRequest, Endpoint, FinishReason, LlmError, Part, Response, Role, StreamEvent, Usage,
    UsageError,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub(crate) const API_VERSION: &str = "2023-06-01";
/// Used when the request does not say (the API requires a value).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

/// `{base}/v1/messages`, without doubling a `/v1` the base already has (before the base's query
/// string, if any).
pub(crate) fn url(base: &str) -> String {
    let base = dialect::base_or(base, DEFAULT_BASE_URL);
    let head = dialect::head(base);
    let path = if head.ends_with("/v1") || head.ends_with("/v1/messages") {
        "/messages"
    } else {
        "/v1/messages"
    };
    crate::net::join_path(base, path)
}

/// Provider headers (besides content-type/accept, which the client sets). Extended thinking
/// with a budget asks for interleaved thinking (thinking between tool calls), as Go Crush does.
pub(crate) fn headers(ep: &Endpoint, req: &ChatRequest) -> Vec<(String, String)> {
    let mut h = Vec::new();
    if let Some(k) = ep.api_key.as_deref().filter(|k| !k.is_empty()) {
        h.push(("x-api-key".to_string(), k.to_string()));
    }
    h.push(("anthropic-version".to_string(), API_VERSION.to_string()));
    if let Some(beta) = beta(req) {
        h.push(("anthropic-beta".to_string(), beta.to_string()));
    }
    h
}

/// The beta a request asks for: interleaved thinking when it thinks with a budget. Vertex AI
/// takes it as the same header, Bedrock in the body's `anthropic_beta`.
pub(crate) fn beta(req: &ChatRequest) -> Option<&'static str> {
    req.options
        .get("thinking")
        .is_some()
        .then_some("interleaved-thinking-2025-05-14")
}

/// The provider options this dialect reads itself (Go Crush's names); the others go into the
/// body as they are.
const OWN_OPTIONS: &[&str] = &[
    "effort",
    "thinking",
    "thinking_display",
    "disable_parallel_tool_use",
    "send_reasoning",
];

/// The smallest thinking budget the API takes.
const MIN_THINKING_BUDGET: u64 = 1024;

/// The `thinking` (and `output_config`) the options ask for, given the request's `max_tokens`:
/// `effort` is adaptive thinking at that effort; `thinking.budget_tokens` is extended thinking
/// with that budget (kept below `max_tokens`, and dropped when that leaves less than the
/// smallest budget).
fn thinking(req: &ChatRequest, max_tokens: u32) -> Option<(Value, Option<Value>)> {
    let o = &req.options;
    let display = o.get("thinking_display").cloned();
    let with_display = |mut t: Value| {
        if let Some(d) = &display {
            t["display"] = d.clone();
        }
        t
    };
    if let Some(effort) = o.get("effort") {
        let t = with_display(json!({"type": "adaptive"}));
        return Some((t, Some(json!({"effort": effort}))));
    }
    let budget = o.get("thinking")?.get("budget_tokens")?.as_u64()?;
    let budget = budget.min(u64::from(max_tokens).saturating_sub(1));
    (budget >= MIN_THINKING_BUDGET).then(|| {
        (
            with_display(json!({"type": "enabled", "budget_tokens": budget})),
            None,
        )
    })
}

/// Tool ids must match `[A-Za-z0-9_-]+`: other characters become `_` (the same on both sides of
/// a call/result pair, so they still match).
fn sanitize_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "toolu_empty".to_string()
    } else {
        s
    }
}

fn non_blank(s: &str) -> bool {
    !s.trim().is_empty()
}

/// Parses a stored argument text into the object `tool_use.input` needs (`{}` when invalid).
pub(crate) fn parse_input(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// A tool result; an image it carries goes inside it, after its text.
fn tool_result_block(
    id: &str,
    content: &str,
    is_error: bool,
    image: Option<(&str, &str)>,
) -> Value {
    let content = match image {
        Some((mime, data)) => {
            let mut blocks = Vec::new();
            if non_blank(content) {
                blocks.push(json!({"type": "text", "text": content}));
            }
            blocks.push(json!({"type": "image",
                "source": {"type": "base64", "media_type": mime, "data": data}}));
            Value::Array(blocks)
        }
        None if non_blank(content) => json!(content),
        None => json!("(no output)"),
    };
    let mut b = json!({"type": "tool_result", "tool_use_id": sanitize_id(id), "content": content});
    if is_error {
        b["is_error"] = Value::Bool(true);
    }
    b
}

/// The Messages request body for `req` (streaming).
pub(crate) fn build_request(req: &ChatRequest) -> Value {
    let send_reasoning = req.options.get("send_reasoning") != Some(&Value::Bool(false));
    let mut system_texts: Vec<String> = Vec::new();
    if non_blank(&req.system) {
        system_texts.push(req.system.clone());
    }
    // (role, blocks), roles "user" / "assistant".
    let mut msgs: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // Tool results come right after their calls, so they open the next user turn as required.
    for m in &super::history::pair_tool_results(&req.messages) {
        let mut blocks = Vec::new();
        let role = match m.role {
            Role::System => {
                let t = m.text();
                if non_blank(&t) {
                    system_texts.push(t);
                }
                continue;
            }
            Role::Assistant => "assistant",
            Role::User | Role::Tool => "user",
        };
        for p in &m.parts {
            match p {
                Part::Text { text } if non_blank(text) => {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                Part::Reasoning {
                    thinking,
                    signature,
                    ..
                } if role == "assistant" && send_reasoning && !signature.is_empty() => {
                    blocks.push(
                        json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                    );
                }
                Part::Reasoning { extra, .. } if role == "assistant" && send_reasoning => {
                    if let Some(data) = extra.get(REDACTED_KEY).and_then(Value::as_str) {
                        blocks.push(json!({"type": "redacted_thinking", "data": data}));
                    }
                }
                Part::ToolCall {
                    id, name, input, ..
                } if role == "assistant" => {
                    blocks.push(
                        json!({"type": "tool_use", "id": sanitize_id(id), "name": name,
                        "input": parse_input(input)}),
                    );
                }
                Part::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                    ..
                } if role == "user" => {
                    blocks.push(tool_result_block(
                        tool_call_id,
                        content,
                        *is_error,
                        super::result_image(p),
                    ));
                }
                Part::ShellCommand {
                    command, output, ..
                } if role == "user" => {
                    blocks.push(json!({"type": "text", "text": format!("!{command}\n{output}")}));
                }
                Part::Binary {
                    mime_type, data, ..
                } if role == "user" && super::is_image_attachment(p) => {
                    blocks.push(json!({"type": "image",
                        "source": {"type": "base64", "media_type": mime_type, "data": data}}));
                }
                Part::ImageUrl { url, .. } if role == "user" => {
                    blocks.push(json!({"type": "image", "source": {"type": "url", "url": url}}));
                }
                _ => {}
            }
        }
        if blocks.is_empty() {
            continue;
        }
        match msgs.last_mut() {
            Some((r, prev)) if *r == role => prev.extend(blocks),
            _ => msgs.push((role, blocks)),
        }
    }

    // Cache breakpoints (at most 4): the last system block, the last tool, the last block of each
    // of the last two messages (thinking blocks cannot carry one).
    let ephemeral = json!({"type": "ephemeral"});
    let n = msgs.len();
    let mut messages = Vec::with_capacity(n);
    for (i, (role, mut blocks)) in msgs.into_iter().enumerate() {
        if i + 2 >= n
            && let Some(last) = blocks.last_mut()
            && !matches!(
                last.get("type").and_then(Value::as_str),
                Some("thinking" | "redacted_thinking")
            )
        {
            last["cache_control"] = ephemeral.clone();
        }
        messages.push(json!({"role": role, "content": blocks}));
    }

    let max_tokens = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({
        "model": req.model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !system_texts.is_empty() {
        let k = system_texts.len();
        let sys: Vec<Value> = system_texts
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let mut b = json!({"type": "text", "text": t});
                if i + 1 == k {
                    b["cache_control"] = ephemeral.clone();
                }
                b
            })
            .collect();
        body["system"] = Value::Array(sys);
    }
    if !req.tools.is_empty() {
        let k = req.tools.len();
        let tools: Vec<Value> = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut v = json!({"name": t.name, "description": t.description,
                    "input_schema": t.parameters});
                if i + 1 == k {
                    v["cache_control"] = ephemeral.clone();
                }
                v
            })
            .collect();
        body["tools"] = Value::Array(tools);
        if req.options.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
            body["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
        }
    }
    match thinking(req, max_tokens) {
        // Thinking takes no sampling settings.
        Some((t, output_config)) => {
            body["thinking"] = t;
            if let Some(oc) = output_config {
                body["output_config"] = oc;
            }
        }
        None => {
            let o = &req.options;
            for (key, v) in req.sampling(&["temperature", "top_p"]) {
                body[key] = json!(v);
            }
            if let Some(k) = o.top_k {
                body["top_k"] = json!(k);
            }
        }
    }
    req.options.merge_rest_into(&mut body, OWN_OPTIONS);
    body
}

/// Where a redacted thinking block's data is kept in a reasoning part.
pub(crate) const REDACTED_KEY: &str = "redacted_data";

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
        finished: bool,
    },
    /// A `redacted_thinking` block: its data, sent back as it came.
    Redacted(String),
    Ignored,
}

/// One usage count as last reported: `Err` when that value was not a non-negative integer.
type Count = Option<Result<u64, UsageError>>;

#[derive(Debug, Default, Clone)]
struct UsageFields {
    input: Count,
    output: Count,
    cache_read: Count,
    cache_write: Count,
}

impl UsageFields {
    /// Takes every field present in `u` (cumulative values: the last one wins, so a later valid
    /// value replaces an earlier bad one, and a later bad one an earlier valid one).
    fn update(&mut self, u: &Value) {
        let get = |k: &str| crate::llm::types::token_field(u, k).transpose();
        for (field, key) in [
            (&mut self.input, "input_tokens"),
            (&mut self.output, "output_tokens"),
            (&mut self.cache_read, "cache_read_input_tokens"),
            (&mut self.cache_write, "cache_creation_input_tokens"),
        ] {
            if let Some(v) = get(key) {
                *field = Some(v);
            }
        }
    }

    /// Why the usage is rejected: the first field whose last value was not a count.
    fn bad(&self) -> Option<String> {
        [
            &self.input,
            &self.output,
            &self.cache_read,
            &self.cache_write,
        ]
        .into_iter()
        .find_map(|f| f.clone()?.err().map(|e| e.to_string()))
    }

    fn usage(&self) -> Option<Usage> {
        let ok = |f: &Count| f.as_ref().and_then(|r| r.as_ref().ok()).copied();
        let (input, output, cache_read, cache_write) = (
            ok(&self.input),
            ok(&self.output),
            ok(&self.cache_read),
            ok(&self.cache_write),
        );
        if input.is_none() && output.is_none() && cache_read.is_none() && cache_write.is_none() {
            return None;
        }
        Some(Usage {
            input: input.unwrap_or(0),
            output: output.unwrap_or(0),
            cache_read: cache_read.unwrap_or(0),
            cache_write: cache_write.unwrap_or(0),
        })
    }
}

/// Maps `stop_reason` to our finish reason.
pub(crate) fn finish_reason(stop: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match stop {
        Some("end_turn" | "stop_sequence") => FinishReason::EndTurn,
        Some("tool_use") => FinishReason::ToolUse,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::MaxTokens,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
        None if has_tool_calls => FinishReason::ToolUse,
        None => FinishReason::EndTurn,
    }
}

/// Builds a `Response` from the stream's events. Pure: feed events, then `finish`.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    blocks: BTreeMap<u64, Block>,
    usage: UsageFields,
    stop_reason: Option<String>,
    done: bool,
    /// Bytes held so far (text, reasoning, arguments, ids), against the reply cap.
    budget: Budget,
}

fn protocol(msg: String) -> Failure {
    Failure::retry(LlmError::Protocol(msg))
}

impl Accumulator {
    /// Whether the events so far reported any token count.
    pub(crate) fn has_usage(&self) -> bool {
        self.usage.usage().is_some() || self.usage.bad().is_some()
    }

    fn index(&self, v: &Value) -> u64 {
        v.get("index")
            .and_then(Value::as_u64)
            .unwrap_or(self.blocks.len() as u64)
    }
}

impl dialect::Accumulator for Accumulator {
    /// Takes one event; progress for the display goes to `out`. Returns whether the message is
    /// complete (`message_stop`).
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(self.done);
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                if ev.event == "ping" {
                    return Ok(self.done);
                }
                return Err(protocol(format!(
                    "invalid JSON in `{}` event: {e}",
                    ev.event
                )));
            }
        };
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match ty {
            "message_start" => {
                if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                    self.usage.update(u);
                }
            }
            "content_block_start" => {
                let idx = self.index(&v);
                let cb = v.get("content_block").unwrap_or(&Value::Null);
                let s = |k: &str| cb.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let text_len = |k: &str| cb.get(k).and_then(Value::as_str).map_or(0, str::len);
                self.budget.take(
                    BLOCK_COST
                        + ["text", "thinking", "signature", "id", "name", "data"]
                            .iter()
                            .map(|k| text_len(k))
                            .sum::<usize>(),
                )?;
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = s("text");
                        if !t.is_empty() {
                            out.push(StreamEvent::TextDelta(t.clone()));
                        }
                        Block::Text(t)
                    }
                    Some("thinking") => {
                        let t = s("thinking");
                        if !t.is_empty() {
                            out.push(StreamEvent::ReasoningDelta(t.clone()));
                        }
                        Block::Thinking {
                            thinking: t,
                            signature: s("signature"),
                        }
                    }
                    Some("tool_use") => {
                        let (id, name) = (s("id"), s("name"));
                        out.push(StreamEvent::ToolCallStart { name: name.clone() });
                        Block::ToolUse {
                            id,
                            name,
                            json: String::new(),
                            finished: false,
                        }
                    }
                    Some("redacted_thinking") => Block::Redacted(s("data")),
                    // Server tools, and anything new.
                    _ => Block::Ignored,
                };
                self.blocks.insert(idx, block);
            }
            "content_block_delta" => {
                let idx = self.index(&v);
                let d = v.get("delta").unwrap_or(&Value::Null);
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
                if !self.blocks.contains_key(&idx) {
                    self.budget.take(BLOCK_COST)?;
                }
                self.budget.take(
                    ["text", "thinking", "signature", "partial_json"]
                        .iter()
                        .map(|k| s(k).len())
                        .sum(),
                )?;
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = s("text");
                        if let Block::Text(buf) =
                            self.blocks.entry(idx).or_insert(Block::Text(String::new()))
                        {
                            buf.push_str(t);
                            if !t.is_empty() {
                                out.push(StreamEvent::TextDelta(t.to_string()));
                            }
                        }
                    }
                    Some("thinking_delta") => {
                        let t = s("thinking");
                        if let Block::Thinking { thinking, .. } =
                            self.blocks.entry(idx).or_insert(Block::Thinking {
                                thinking: String::new(),
                                signature: String::new(),
                            })
                        {
                            thinking.push_str(t);
                            if !t.is_empty() {
                                out.push(StreamEvent::ReasoningDelta(t.to_string()));
                            }
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(&idx) {
                            signature.push_str(s("signature"));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(Block::ToolUse { json, .. }) = self.blocks.get_mut(&idx) {
                            json.push_str(s("partial_json"));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let idx = self.index(&v);
                if let Some(Block::ToolUse { finished, .. }) = self.blocks.get_mut(&idx) {
                    *finished = true;
                }
            }
            "message_delta" => {
                if let Some(r) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = v.get("usage") {
                    self.usage.update(u);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let eb = error_from_json(&v).unwrap_or_default();
                let kind = eb.kind.clone().unwrap_or_else(|| "error".to_string());
                let msg = if eb.message.is_empty() {
                    snippet_of(data)
                } else {
                    eb.message.clone()
                };
                return Err(Failure {
                    error: LlmError::Protocol(format!("{kind}: {msg}")),
                    retryable: kind_retryable(eb.kind.as_deref(), eb.code.as_deref()),
                    retry_after: None,
                });
            }
            // ping and unknown events.
            _ => {}
        }
        Ok(self.done)
    }

    fn missing(&self) -> Option<&'static str> {
        (!self.done).then_some("message_stop")
    }

    /// The response, whatever state the stream is in.
    fn into_response(self) -> Response {
        let mut parts = Vec::new();
        let mut has_tools = false;
        for b in self.blocks.into_values() {
            match b {
                Block::Text(text) if !text.is_empty() => parts.push(Part::Text { text }),
                Block::Thinking {
                    thinking,
                    signature,
                } if !thinking.is_empty() || !signature.is_empty() => {
                    parts.push(Part::reasoning(thinking, signature))
                }
                Block::Redacted(data) if !data.is_empty() => {
                    let mut extra = Map::new();
                    extra.insert(REDACTED_KEY.to_string(), Value::String(data));
                    parts.push(Part::Reasoning {
                        thinking: String::new(),
                        signature: String::new(),
                        extra,
                    });
                }
                Block::ToolUse {
                    id,
                    name,
                    json,
                    finished,
                } => {
                    has_tools = true;
                    let input = if json.trim().is_empty() {
                        "{}".to_string()
                    } else {
                        json
                    };
                    parts.push(Part::ToolCall {
                        id,
                        name,
                        input,
                        provider_executed: false,
                        finished,
                    });
                }
                _ => {}
            }
        }
        Response::settled(
            parts,
            self.usage.usage(),
            self.usage.bad(),
            finish_reason(self.stop_reason.as_deref(), has_tools),
        )
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
}

fn snippet_of(s: &str) -> String {
    super::retry::snippet(s, 200)
}

/// A non-streaming reply (`{"type":"message",…}`), for servers that ignore `stream:true`.
pub(crate) fn response_from_json(v: &Value) -> Option<Response> {
    if v.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let mut acc = Accumulator::default();
    if let Some(u) = v.get("usage") {
        acc.usage.update(u);
    }
    acc.stop_reason = v
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    for (i, b) in v
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let block = match b.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(s("text")),
            Some("thinking") => Block::Thinking {
                thinking: s("thinking"),
                signature: s("signature"),
            },
            Some("tool_use") => Block::ToolUse {
                id: s("id"),
                name: s("name"),
                json: b.get("input").map(Value::to_string).unwrap_or_default(),
                finished: true,
            },
            Some("redacted_thinking") => Block::Redacted(s("data")),
            _ => Block::Ignored,
        };
        acc.blocks.insert(i as u64, block);
    }
    acc.done = true;
    Some(acc.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};

    pub(crate) const EXAMPLE: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01X","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"User wants main.rs."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB…"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: ping
data: {"type":"ping"}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading it."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A","name":"view","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"th\":\"src/main.rs\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":87}}

event: message_stop
data: {"type":"message_stop"}

"#;

    use crate::llm::dialect::testing::run_with;

    fn run(stream: &str) -> (Result<Response, Failure>, Vec<StreamEvent>) {
        run_with(Accumulator::default(), stream)
    }

    fn ev(ty: &str, data: &str) -> String {
        format!("event: {ty}\ndata: {data}\n\n")
    }

    fn start() -> String {
        ev(
            "message_start",
            r#"{"type":"message_start","message":{"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}"#,
        )
    }

    fn stop(reason: &str) -> String {
        ev(
            "message_delta",
            &format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},"usage":{{"output_tokens":9}}}}"#
            ),
        ) + &ev("message_stop", r#"{"type":"message_stop"}"#)
    }

    fn tool_start(i: u32, id: &str) -> String {
        ev(
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":{i},"content_block":{{"type":"tool_use","id":"{id}","name":"bash","input":{{}}}}}}"#
            ),
        )
    }

    fn json_delta(i: u32, piece: &str) -> String {
        let d = json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":piece}});
        ev("content_block_delta", &d.to_string())
    }

    fn block_stop(i: u32) -> String {
        ev(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{i}}}"#),
        )
    }

    #[test]
    fn example_stream() {
        let (r, out) = run(EXAMPLE);
        let r = r.unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert_eq!(
            r.parts,
            vec![
                Part::reasoning("User wants main.rs.".into(), "EqQB…".into()),
                Part::Text {
                    text: "Reading it.".into()
                },
                Part::ToolCall {
                    id: "toolu_01A".into(),
                    name: "view".into(),
                    input: r#"{"file_path":"src/main.rs"}"#.into(),
                    provider_executed: false,
                    finished: true
                },
            ]
        );
        // Ledger: input 12, cache write 100, cache read 2048, output 87, nothing doubled.
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 12,
                output: 87,
                cache_read: 2048,
                cache_write: 100
            })
        );
        assert!(matches!(&out[0], StreamEvent::ReasoningDelta(t) if t == "User wants main.rs."));
        assert!(matches!(&out[1], StreamEvent::TextDelta(t) if t == "Reading it."));
        assert!(matches!(&out[2], StreamEvent::ToolCallStart { name } if name == "view"));
    }

    #[test]
    fn usage_repeated_in_message_delta_is_not_doubled() {
        let s = EXAMPLE.replace(
            r#""usage":{"output_tokens":87}"#,
            r#""usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":87}"#,
        );
        let r = run(&s).0.unwrap();
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 12,
                output: 87,
                cache_read: 2048,
                cache_write: 100
            })
        );
    }

    #[test]
    fn negative_or_absurd_usage_is_rejected_not_recorded() {
        for (delta_usage, why) in [
            (r#""usage":{"output_tokens":-3}"#, "output_tokens"),
            (r#""usage":{"output_tokens":5000000000}"#, "not plausible"),
        ] {
            let s =
                start() + &stop("end_turn").replace(r#""usage":{"output_tokens":9}"#, delta_usage);
            let r = run(&s).0.unwrap();
            assert_eq!(r.usage, None, "{delta_usage}");
            let reason = r.usage_rejected.unwrap_or_default();
            assert!(reason.contains(why), "{delta_usage}: {reason}");
        }
    }

    #[test]
    fn a_later_valid_usage_replaces_an_earlier_bad_one() {
        // message_start carries a float count; message_delta repeats every count correctly.
        let s = start().replace(r#""input_tokens":5"#, r#""input_tokens":1.0"#)
            + &stop("end_turn").replace(
                r#""usage":{"output_tokens":9}"#,
                r#""usage":{"input_tokens":5,"output_tokens":9}"#,
            );
        let r = run(&s).0.unwrap();
        assert_eq!(r.usage_rejected, None);
        assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((5, 9)));
        // A bad field never corrected stays a rejection, whatever else comes later.
        let s = start().replace(r#""input_tokens":5"#, r#""input_tokens":1.0"#) + &stop("end_turn");
        let r = run(&s).0.unwrap();
        assert_eq!(r.usage, None);
        assert!(
            r.usage_rejected
                .unwrap_or_default()
                .contains("input_tokens")
        );
        // And a later bad value replaces an earlier good one.
        let s = start()
            + &stop("end_turn").replace(
                r#""usage":{"output_tokens":9}"#,
                r#""usage":{"input_tokens":-1,"output_tokens":9}"#,
            );
        assert_eq!(run(&s).0.unwrap().usage, None);
    }

    #[test]
    fn all_zero_usage_is_unknown() {
        let s = start().replace(
            r#""input_tokens":5,"output_tokens":1"#,
            r#""input_tokens":0,"output_tokens":0"#,
        ) + &stop("end_turn").replace(r#""output_tokens":9"#, r#""output_tokens":0"#);
        let r = run(&s).0.unwrap();
        assert_eq!((r.usage, r.usage_rejected), (None, None));
    }

    #[test]
    fn text_stream_with_pings() {
        let s = start()
            + &ev("ping", r#"{"type": "ping"}"#)
            + &ev(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            )
            + &ev("ping", r#"{"type": "ping"}"#)
            + &ev(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
            )
            + &ev(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world"}}"#,
            )
            + &block_stop(0)
            + &ev("ping", r#"{"type": "ping"}"#)
            + &stop("end_turn");
        let r = run(&s).0.unwrap();
        assert_eq!(r.finish, FinishReason::EndTurn);
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "Hello, world".into()
            }]
        );
        assert_eq!(r.usage.map(|u| (u.input, u.output)), Some((5, 9)));
    }

    #[test]
    fn tool_json_split_inside_key_and_escape() {
        // The arguments {"command":"echo a\nb"} split inside a key and between `\` and `n`.
        let s = start()
            + &tool_start(0, "toolu_1")
            + &json_delta(0, "{\"comm")
            + &json_delta(0, "and\":\"echo a\\")
            + &json_delta(0, "nb\"}")
            + &block_stop(0)
            + &stop("tool_use");
        let r = run(&s).0.unwrap();
        let Part::ToolCall { input, .. } = &r.parts[0] else {
            panic!("{:?}", r.parts)
        };
        let v: Value = serde_json::from_str(input).unwrap();
        assert_eq!(v, json!({"command": "echo a\nb"}));
    }

    #[test]
    fn a_reply_larger_than_the_cap_fails_and_is_not_retried() {
        let text = |i: u32, t: &str| {
            let d = json!({"type":"content_block_delta","index":i,"delta":{"type":"text_delta","text":t}});
            ev("content_block_delta", &d.to_string())
        };
        let piece = "x".repeat(100);
        // 50 text pieces, then 50 argument pieces: 10 000 bytes, each event well under the cap.
        let mut s = start();
        for _ in 0..50 {
            s += &text(0, &piece);
        }
        s += &tool_start(1, "t");
        for _ in 0..50 {
            s += &json_delta(1, &piece);
        }
        s += &stop("end_turn");
        assert!(run_with(Accumulator::with_limit(20_000), &s).0.is_ok());
        for limit in [4_000, 9_000] {
            let (r, out) = run_with(Accumulator::with_limit(limit), &s);
            let f = r.unwrap_err();
            assert!(!f.retryable);
            assert_eq!(f.error, LlmError::TooLarge { limit });
            // Nothing past the cap reached the display.
            let shown: usize = out
                .iter()
                .map(|e| match e {
                    StreamEvent::TextDelta(t) => t.len(),
                    _ => 0,
                })
                .sum();
            assert!(shown <= limit, "{shown}");
        }
    }

    #[test]
    fn tool_without_arguments() {
        for deltas in ["".to_string(), json_delta(0, "")] {
            let s =
                start() + &tool_start(0, "toolu_1") + &deltas + &block_stop(0) + &stop("tool_use");
            let r = run(&s).0.unwrap();
            assert!(matches!(&r.parts[0], Part::ToolCall { input, .. } if input == "{}"));
        }
    }

    #[test]
    fn two_tools_and_text() {
        let s = start()
            + &ev(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Both."}}"#,
            )
            + &block_stop(0)
            + &tool_start(1, "toolu_a")
            + &json_delta(1, "{}")
            + &block_stop(1)
            + &tool_start(2, "toolu_b")
            + &json_delta(2, r#"{"x":1}"#)
            + &block_stop(2)
            + &stop("tool_use");
        let r = run(&s).0.unwrap();
        let ids: Vec<_> = r
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["toolu_a", "toolu_b"]);
        assert_eq!(
            r.parts[0],
            Part::Text {
                text: "Both.".into()
            }
        );
    }

    #[test]
    fn error_event_midstream() {
        let s = start()
            + &ev(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            )
            + &ev(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            );
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable);
        assert_eq!(
            f.error,
            LlmError::Protocol("overloaded_error: Overloaded".into())
        );
        let s = start()
            + &ev(
                "error",
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
            );
        assert!(!run(&s).0.unwrap_err().retryable);
    }

    #[test]
    fn truncated_without_message_stop() {
        let s = start() + &tool_start(0, "t") + &json_delta(0, "{\"a\":");
        let f = run(&s).0.unwrap_err();
        assert_eq!(f.error, LlmError::truncated("message_stop"));
        assert!(f.retryable);
        // Cut in the middle of a data line.
        let s = start() + "event: content_block_delta\ndata: {\"type\":\"content_bl";
        assert_eq!(
            run(&s).0.unwrap_err().error,
            LlmError::truncated("message_stop")
        );
    }

    #[test]
    fn malformed_json_is_a_retryable_protocol_error() {
        let s = start() + &ev("content_block_delta", "{not json");
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable);
        assert!(matches!(f.error, LlmError::Protocol(_)));
    }

    #[test]
    fn max_tokens_leaves_tool_unfinished() {
        let s = start() + &tool_start(0, "t") + &json_delta(0, "{\"a\":") + &stop("max_tokens");
        let r = run(&s).0.unwrap();
        assert_eq!(r.finish, FinishReason::MaxTokens);
        assert!(matches!(
            &r.parts[0],
            Part::ToolCall {
                finished: false,
                ..
            }
        ));
    }

    #[test]
    fn unknown_events_and_blocks_are_ignored() {
        let s = start()
            + &ev("whatever", r#"{"type":"whatever","x":1}"#)
            + &ev(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s"}}"#,
            )
            + &ev(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
            )
            + &block_stop(0)
            + &stop("end_turn");
        let r = run(&s).0.unwrap();
        assert!(r.parts.is_empty());
    }

    fn tool_call(id: &str, input: &str) -> Part {
        Part::ToolCall {
            id: id.into(),
            name: "bash".into(),
            input: input.into(),
            provider_executed: false,
            finished: true,
        }
    }

    fn tool_result(id: &str, content: &str, is_error: bool) -> Part {
        Part::ToolResult {
            tool_call_id: id.into(),
            name: "bash".into(),
            content: content.into(),
            data: String::new(),
            mime_type: String::new(),
            metadata: String::new(),
            is_error,
        }
    }

    fn req(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: "claude-x".into(),
            system: "You are crush".into(),
            messages,
            tools: vec![ToolSpec {
                name: "bash".into(),
                description: "Run".into(),
                parameters: json!({"type":"object","properties":{}}),
            }],
            max_tokens: Some(1000),
            temperature: None,
            ..Default::default()
        }
    }

    fn count_cache_control(v: &Value) -> usize {
        match v {
            Value::Object(m) => {
                m.contains_key("cache_control") as usize
                    + m.values().map(count_cache_control).sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count_cache_control).sum(),
            _ => 0,
        }
    }

    fn assert_no_empty_text(v: &Value) {
        match v {
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("text") {
                    let t = m.get("text").and_then(Value::as_str).unwrap();
                    assert!(!t.trim().is_empty(), "empty text block in {v}");
                }
                m.values().for_each(assert_no_empty_text);
            }
            Value::Array(a) => a.iter().for_each(assert_no_empty_text),
            _ => {}
        }
    }

    #[test]
    fn request_shape() {
        let msgs = vec![
            Message::user("Show main.rs"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::reasoning("hmm".into(), "SIG".into()),
                    Part::Text { text: "  ".into() },
                    Part::Text {
                        text: "Running both.".into(),
                    },
                    tool_call("toolu_a", r#"{"command":"ls"}"#),
                    tool_call("toolu_b", "not json"),
                    Part::Finish {
                        reason: "tool_use".into(),
                        time: 0,
                        message: None,
                        details: None,
                    },
                ],
            },
            Message {
                role: Role::Tool,
                parts: vec![tool_result("toolu_a", "a.txt", false)],
            },
            Message {
                role: Role::Tool,
                parts: vec![tool_result("toolu_b", "", true)],
            },
            Message::user("Now explain."),
            Message {
                role: Role::User,
                parts: vec![Part::ShellCommand {
                    command: "ls".into(),
                    output: "a.txt\n".into(),
                    exit_code: 0,
                }],
            },
            Message::user(""),
        ];
        let body = build_request(&req(msgs));
        assert_eq!(body["model"], "claude-x");
        assert_eq!(body["max_tokens"], 1000);
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["system"],
            json!([{"type":"text","text":"You are crush","cache_control":{"type":"ephemeral"}}])
        );
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3, "{body:#}");
        assert_eq!(m[0]["content"][0]["text"], "Show main.rs");
        assert_eq!(m[1]["role"], "assistant");
        let a = m[1]["content"].as_array().unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(
            a[0],
            json!({"type":"thinking","thinking":"hmm","signature":"SIG"})
        );
        assert_eq!(a[2]["input"], json!({"command":"ls"}));
        assert_eq!(a[3]["input"], json!({}));
        let u = m[2]["content"].as_array().unwrap();
        assert_eq!(m[2]["role"], "user");
        assert_eq!(u[0]["type"], "tool_result");
        assert_eq!(u[0]["tool_use_id"], "toolu_a");
        assert_eq!(u[0]["content"], "a.txt");
        assert!(u[0].get("is_error").is_none());
        assert_eq!(u[1]["tool_use_id"], "toolu_b");
        assert_eq!(u[1]["content"], "(no output)");
        assert_eq!(u[1]["is_error"], true);
        assert_eq!(u[2]["text"], "Now explain.");
        assert_eq!(u[3]["text"], "!ls\na.txt\n");
        assert_eq!(u.len(), 4);
        assert_no_empty_text(&body);
        assert!(count_cache_control(&body) <= 4);
        assert_eq!(count_cache_control(&body), 4);
    }

    #[test]
    fn tool_results_are_put_first_and_missing_ones_filled() {
        let msgs = vec![
            Message::user("go"),
            Message {
                role: Role::Assistant,
                parts: vec![tool_call("t1", "{}"), tool_call("t2", "{}")],
            },
            Message::user("interrupting"),
            Message {
                role: Role::Tool,
                parts: vec![
                    tool_result("t2", "two", false),
                    tool_result("zz", "orphan", false),
                ],
            },
        ];
        let body = build_request(&req(msgs));
        let u = body["messages"][2]["content"].as_array().unwrap();
        assert_eq!(u.len(), 3, "{u:?}");
        assert_eq!(u[0]["tool_use_id"], "t1");
        assert_eq!(u[0]["is_error"], true);
        assert_eq!(u[1]["tool_use_id"], "t2");
        assert_eq!(u[1]["content"], "two");
        assert_eq!(u[2]["text"], "interrupting");
        // A trailing tool call without results gets a user message with an error result.
        let msgs = vec![
            Message::user("go"),
            Message {
                role: Role::Assistant,
                parts: vec![tool_call("t.1", "{}")],
            },
        ];
        let body = build_request(&req(msgs));
        assert_eq!(body["messages"][1]["content"][0]["id"], "t_1");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "t_1");
    }

    #[test]
    fn roles_alternate() {
        let msgs = vec![
            Message::user("a"),
            Message::user("b"),
            Message {
                role: Role::Assistant,
                parts: vec![Part::Text { text: "x".into() }],
            },
            Message {
                role: Role::Assistant,
                parts: vec![Part::Text { text: "".into() }],
            },
            Message {
                role: Role::Assistant,
                parts: vec![Part::Text { text: "y".into() }],
            },
            Message::user("c"),
        ];
        let body = build_request(&req(msgs));
        let roles: Vec<_> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(body["messages"][1]["content"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn urls_and_headers() {
        assert_eq!(
            url("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url("https://api.anthropic.com/"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(url(""), "https://api.anthropic.com/v1/messages");
        assert_eq!(
            url("https://h/proxy/?key=k"),
            "https://h/proxy/v1/messages?key=k"
        );
        let ep = Endpoint {
            kind: crate::llm::ApiKind::Anthropic,
            base_url: String::new(),
            api_key: Some("k".into()),
            headers: vec![],
            ..Default::default()
        };
        let h = headers(&ep, &req(vec![]));
        assert!(h.contains(&("x-api-key".into(), "k".into())));
        assert!(h.contains(&("anthropic-version".into(), "2023-06-01".into())));
        assert!(!h.iter().any(|(k, _)| k == "anthropic-beta"));
        let mut thinking = req(vec![]);
        thinking.options.provider_options =
            serde_json::from_value(json!({"thinking": {"budget_tokens": 2000}})).unwrap();
        assert!(headers(&ep, &thinking).contains(&(
            "anthropic-beta".into(),
            "interleaved-thinking-2025-05-14".into()
        )));
    }

    fn with_options(mut r: ChatRequest, po: Value) -> ChatRequest {
        r.options.provider_options = serde_json::from_value(po).unwrap();
        r
    }

    #[test]
    fn model_options_reach_the_body() {
        let mut r = req(vec![Message::user("hi")]);
        r.temperature = Some(0.2);
        r.options.top_p = Some(0.9);
        r.options.top_k = Some(40);
        r.options.frequency_penalty = Some(1.0);
        r.options.extra_body =
            serde_json::from_value(json!({"metadata": {"user_id": "u"}})).unwrap();
        let b = build_request(&r);
        assert_eq!(
            (b["temperature"].clone(), b["top_p"].clone()),
            (json!(0.2), json!(0.9))
        );
        assert_eq!(b["top_k"], 40);
        // No such parameter in this API.
        assert!(b.get("frequency_penalty").is_none());
        assert_eq!(b["metadata"]["user_id"], "u");
        assert!(b.get("thinking").is_none());
        // Extended thinking with a budget: no sampling settings, the budget kept below the cap.
        let b = build_request(&with_options(
            r.clone(),
            json!({"thinking": {"budget_tokens": 2000}}),
        ));
        // 1000 tokens of output leave less than the smallest budget: no thinking.
        assert!(b.get("thinking").is_none());
        r.max_tokens = Some(8000);
        let b = build_request(&with_options(
            r.clone(),
            json!({"thinking": {"budget_tokens": 2000}}),
        ));
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        // An effort: adaptive thinking at that effort.
        let b = build_request(&with_options(
            r.clone(),
            json!({"effort": "high", "custom": 1}),
        ));
        assert_eq!(b["thinking"], json!({"type": "adaptive"}));
        assert_eq!(b["output_config"], json!({"effort": "high"}));
        assert_eq!(b["custom"], 1);
        assert!(b.get("effort").is_none());
    }

    #[test]
    fn thinking_blocks_and_redacted_ones_go_back_to_the_model() {
        let mut extra = Map::new();
        extra.insert(REDACTED_KEY.into(), json!("opaque"));
        let msgs = vec![
            Message::user("go"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::reasoning("plan".into(), "sig".into()),
                    Part::Reasoning {
                        thinking: String::new(),
                        signature: String::new(),
                        extra,
                    },
                    Part::Text { text: "ok".into() },
                ],
            },
            Message::user("more"),
        ];
        let b = build_request(&req(msgs.clone()));
        let blocks = &b["messages"][1]["content"];
        assert_eq!(
            blocks[0],
            json!({"type": "thinking", "thinking": "plan", "signature": "sig"})
        );
        assert_eq!(
            blocks[1],
            json!({"type": "redacted_thinking", "data": "opaque"})
        );
        let b = build_request(&with_options(req(msgs), json!({"send_reasoning": false})));
        assert_eq!(b["messages"][1]["content"][0]["type"], "text");
        // And a redacted block streamed in is kept.
        let s = start()
            + &ev(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"zzz"}}"#,
            )
            + &block_stop(0)
            + &stop("end_turn");
        let r = run(&s).0.unwrap();
        assert!(
            matches!(&r.parts[0], Part::Reasoning { extra, .. } if extra[REDACTED_KEY] == "zzz")
        );
    }

    #[test]
    fn non_streaming_reply() {
        let v: Value = serde_json::from_str(r#"{"id":"msg_01X","type":"message","role":"assistant","model":"claude-sonnet-4-5",
 "content":[{"type":"text","text":"Reading it."},
            {"type":"tool_use","id":"toolu_01A","name":"view","input":{"file_path":"src/main.rs"}}],
 "stop_reason":"tool_use","stop_sequence":null,
 "usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":40}}"#).unwrap();
        let r = response_from_json(&v).unwrap();
        assert_eq!(r.finish, FinishReason::ToolUse);
        assert_eq!(r.parts.len(), 2);
        assert!(
            matches!(&r.parts[1], Part::ToolCall { input, .. } if input == r#"{"file_path":"src/main.rs"}"#)
        );
        assert_eq!(r.usage.unwrap().cache_read, 2048);
    }

    #[test]
    fn attached_images_are_image_blocks_after_the_text() {
        let body = build_request(&req(vec![crate::llm::types::fixtures::attached_image()]));
        let blocks = &body["messages"][0]["content"];
        assert_eq!(blocks[0]["text"], "what is this?");
        assert_eq!(
            blocks[1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": "iVBORw0K"}})
        );
        assert_eq!(
            blocks[2]["source"],
            json!({"type": "url", "url": "https://e.x/a.png"})
        );
    }
}
