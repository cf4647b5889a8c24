//! OpenAI's Responses API (`/responses`): request body and the streaming event accumulator.
//!
//! Nothing is stored at OpenAI (`store: false`): each request carries the whole conversation.
//! Reasoning models are asked for reasoning summaries, streamed as reasoning, and for their
//! reasoning items encrypted; those items are kept in the reasoning part (`responses_data`, as Go
//! Crush keeps them) and sent back on the next steps, so the model keeps its chain of thought
//! across tool calls.

use super::budget::{BLOCK_COST, Budget};
use super::dialect::{self, Accumulator as _};
use super::openai::valid_arguments;
use super::retry::{Failure, kind_retryable, snippet};
use super::sse::SseEvent;
use super::{
    ChatRequest, FinishReason, LlmError, Part, Response, Role, StreamEvent, Usage, UsageError,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Where a reasoning part keeps the reasoning item (Go Crush's field), and the type Go Crush
/// wraps it in.
pub(crate) const DATA_KEY: &str = "responses_data";
const DATA_TYPE: &str = "openai.responses.reasoning_metadata";

/// The provider options this dialect reads itself (Go Crush's names); the others go into the
/// body as they are (`parallel_tool_calls`, `service_tier`, `prompt_cache_key`...).
const OWN_OPTIONS: &[&str] = &[
    "reasoning_effort",
    "reasoning_summary",
    "include",
    "store",
    "text_verbosity",
    "logprobs",
    "strict_json_schema",
    "previous_response_id",
];

/// `{base}/responses` (before the base's query string, if any).
pub(crate) fn url(base: &str) -> String {
    let base = dialect::base_or(base, super::openai::DEFAULT_BASE_URL);
    crate::net::join_path(base, "/responses")
}

/// Whether OpenAI serves `model` through the Responses API (GPT-4 and later, the o-series,
/// codex), as Go Crush decides.
pub(crate) fn supports(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("gpt-4")
        || m.contains("gpt-5")
        || m.contains("gpt-3.5-turbo")
        || m.starts_with("o1")
        || m.starts_with("o3")
        || m.starts_with("o4")
        || m.starts_with("codex-")
        || m.contains("chatgpt-4o")
        || m == "gpt-oss-120b"
}

/// Whether `model` reasons (takes `reasoning`, refuses `temperature` and `top_p`).
fn reasons(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    if m.contains("gpt-5-chat") {
        return false;
    }
    ["o1", "o3", "o4", "oss"]
        .iter()
        .any(|p| m.starts_with(p) || m.contains(&format!("-{p}")))
        || m.contains("gpt-5")
        || m.contains("codex-")
        || m.contains("computer-use")
}

/// The role the system prompt is sent with: `developer` for reasoning models, none for the
/// first o1 models, which take none.
fn system_role(model: &str) -> Option<&'static str> {
    if model.contains("o1-mini") || model.contains("o1-preview") {
        None
    } else if reasons(model) {
        Some("developer")
    } else {
        Some("system")
    }
}

/// The reasoning item a reasoning part carries, if it has its encrypted content.
fn reasoning_item(extra: &Map<String, Value>) -> Option<Value> {
    let d = extra.get(DATA_KEY)?;
    let d = d.get("data").unwrap_or(d);
    let id = d.get("item_id").and_then(Value::as_str)?;
    let enc = d.get("encrypted_content").and_then(Value::as_str)?;
    let summary: Vec<Value> = d
        .get("summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| json!({"type": "summary_text", "text": s}))
        .collect();
    Some(json!({"type": "reasoning", "id": id, "encrypted_content": enc, "summary": summary}))
}

/// The input items of `req`'s conversation.
fn input(req: &ChatRequest) -> Vec<Value> {
    let mut items = Vec::new();
    let role = system_role(&req.model);
    let system = |items: &mut Vec<Value>, text: &str| {
        if let Some(r) = role
            && !text.trim().is_empty()
        {
            items.push(json!({"role": r, "content": text}));
        }
    };
    system(&mut items, &req.system);
    for m in &super::history::pair_tool_results(&req.messages) {
        match m.role {
            Role::System => system(&mut items, &m.text()),
            Role::User | Role::Tool => {
                let mut content = Vec::new();
                let mut images = Vec::new();
                for p in &m.parts {
                    match p {
                        Part::Text { text } if !text.trim().is_empty() => {
                            content.push(json!({"type": "input_text", "text": text}))
                        }
                        Part::ShellCommand {
                            command, output, ..
                        } => content.push(
                            json!({"type": "input_text", "text": format!("!{command}\n{output}")}),
                        ),
                        Part::Binary {
                            mime_type, data, ..
                        } if mime_type.starts_with("image/") => content.push(json!({
                            "type": "input_image",
                            "image_url": format!("data:{mime_type};base64,{data}")
                        })),
                        Part::ImageUrl { url, .. } => content.push(json!({
                            "type": "input_image",
                            "image_url": url
                        })),
                        Part::ToolResult {
                            tool_call_id,
                            content: out,
                            ..
                        } => {
                            let out = crate::llm::types::tool_output(out);
                            items.push(json!({"type": "function_call_output",
                                "call_id": tool_call_id, "output": out}));
                            // The output takes text only: an image follows as the user's.
                            if let Some((mime, data)) = super::result_image(p) {
                                images.push(json!({"type": "input_text",
                                    "text": format!("The image returned by tool call {tool_call_id}:")}));
                                images.push(json!({"type": "input_image",
                                    "image_url": format!("data:{mime};base64,{data}")}));
                            }
                        }
                        _ => {}
                    }
                }
                if !images.is_empty() {
                    items.push(json!({"role": "user", "content": images}));
                }
                if !content.is_empty() {
                    items.push(json!({"role": "user", "content": content}));
                }
            }
            Role::Assistant => {
                let start = items.len();
                for p in &m.parts {
                    match p {
                        Part::Reasoning { extra, .. } => {
                            if let Some(item) = reasoning_item(extra) {
                                items.push(item);
                            }
                        }
                        Part::Text { text } if !text.trim().is_empty() => {
                            items.push(json!({"role": "assistant", "content": text}))
                        }
                        Part::ToolCall {
                            id, name, input, ..
                        } => items.push(json!({"type": "function_call", "call_id": id,
                            "name": name, "arguments": valid_arguments(input)})),
                        _ => {}
                    }
                }
                // A reasoning item must be followed by what it led to; alone it is refused.
                if items[start..].iter().all(|i| i["type"] == "reasoning") {
                    items.truncate(start);
                }
            }
        }
    }
    items
}

/// The Responses request body for `req` (streaming, nothing stored).
pub(crate) fn build_request(req: &ChatRequest) -> Value {
    let o = &req.options;
    let mut body = json!({
        "model": req.model,
        "input": input(req),
        "stream": true,
        "store": o.get("store").cloned().unwrap_or(json!(false)),
    });
    if let Some(n) = req.max_tokens {
        body["max_output_tokens"] = json!(n);
    }
    let reasoning = reasons(&req.model);
    if !reasoning {
        for (key, v) in req.sampling(&["temperature", "top_p"]) {
            body[key] = json!(v);
        }
    }
    let mut include: Vec<Value> = o
        .get("include")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if reasoning {
        let mut r = Map::new();
        if let Some(e) = o.get("reasoning_effort") {
            r.insert("effort".into(), e.clone());
        }
        let summary = o.get("reasoning_summary").cloned().unwrap_or(json!("auto"));
        r.insert("summary".into(), summary);
        body["reasoning"] = Value::Object(r);
        let enc = json!("reasoning.encrypted_content");
        if !include.contains(&enc) {
            include.push(enc);
        }
    }
    if !include.is_empty() {
        body["include"] = Value::Array(include);
    }
    if let Some(v) = o.get("text_verbosity") {
        body["text"] = json!({"verbosity": v});
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters, "strict": false})
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    o.merge_rest_into(&mut body, OWN_OPTIONS);
    body
}

#[derive(Debug)]
enum Block {
    Text(String),
    Reasoning {
        item_id: String,
        encrypted: Option<String>,
        summary: Vec<String>,
    },
    Call {
        call_id: String,
        name: String,
        args: String,
        finished: bool,
    },
    Ignored,
}

/// Reads a Responses usage object into ledger terms: `input_tokens` includes the cached ones;
/// `output_tokens` includes the reasoning tokens (billed as output).
pub(crate) fn parse_usage(u: &Value) -> Result<Option<Usage>, UsageError> {
    use crate::llm::types::{fresh_tokens, token_field, token_fields};
    let Some([input, output]) = token_fields(u, ["input_tokens", "output_tokens"])? else {
        return Ok(None);
    };
    if input.is_none() && output.is_none() {
        return Ok(None);
    }
    let input = input.unwrap_or(0);
    let cached = match u.get("input_tokens_details") {
        Some(d) if d.is_object() => token_field(d, "cached_tokens")?.unwrap_or(0),
        _ => 0,
    };
    let fresh = fresh_tokens(input, &[cached], || {
        (
            format!("input_tokens {input}"),
            format!("its cached tokens ({cached})"),
        )
    })?;
    Ok(Some(Usage {
        input: fresh,
        output: output.unwrap_or(0),
        cache_read: cached,
        cache_write: 0,
    }))
}

/// Builds a `Response` from the stream's events. Pure: feed events, then `finish`.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    /// By `output_index`.
    blocks: BTreeMap<u64, Block>,
    usage: Option<Usage>,
    usage_rejected: Option<String>,
    /// `incomplete_details.reason` of an incomplete response.
    incomplete: Option<String>,
    done: bool,
    budget: Budget,
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A failure the server reported (`error` event, `response.failed`).
fn reported(e: &Value, what: &str) -> Failure {
    let code = e.get("code").and_then(Value::as_str);
    let mut message = str_of(e, "message").to_string();
    if message.is_empty() {
        message = snippet(&e.to_string(), 200);
    }
    if let Some(c) = code {
        message = format!("{message} (code: {c})");
    }
    Failure {
        error: LlmError::Protocol(format!("{what}: {message}")),
        retryable: kind_retryable(code, code),
        retry_after: None,
    }
}

impl Accumulator {
    /// Counts `n` bytes more, plus a block's bookkeeping when `new_block`.
    fn take(&mut self, n: usize, new_block: bool) -> Result<(), Failure> {
        self.budget.take(n + if new_block { BLOCK_COST } else { 0 })
    }

    /// An output item, when it starts (`done` false) and when it is complete.
    fn item(
        &mut self,
        idx: u64,
        item: &Value,
        done: bool,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Failure> {
        let s = |k: &str| str_of(item, k).to_string();
        match str_of(item, "type") {
            "function_call" => {
                let args = s("arguments");
                self.take(
                    s("call_id").len() + s("name").len() + args.len(),
                    !self.blocks.contains_key(&idx),
                )?;
                match self.blocks.get_mut(&idx) {
                    Some(Block::Call {
                        args: a, finished, ..
                    }) => {
                        if done {
                            if !args.is_empty() {
                                *a = args;
                            }
                            *finished = true;
                        }
                    }
                    _ => {
                        let mut call_id = s("call_id");
                        if call_id.is_empty() {
                            call_id = super::openai::synth_call_id();
                        }
                        out.push(StreamEvent::ToolCallStart { name: s("name") });
                        self.blocks.insert(
                            idx,
                            Block::Call {
                                call_id,
                                name: s("name"),
                                args,
                                finished: done,
                            },
                        );
                    }
                }
            }
            "reasoning" => {
                let enc = item
                    .get("encrypted_content")
                    .and_then(Value::as_str)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string);
                self.take(
                    enc.as_ref().map_or(0, String::len),
                    !self.blocks.contains_key(&idx),
                )?;
                let summary_done: Vec<String> = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| str_of(p, "text").to_string())
                    .collect();
                let b = self.blocks.entry(idx).or_insert_with(|| Block::Reasoning {
                    item_id: s("id"),
                    encrypted: None,
                    summary: Vec::new(),
                });
                if let Block::Reasoning {
                    encrypted, summary, ..
                } = b
                {
                    if enc.is_some() {
                        *encrypted = enc;
                    }
                    if done && !summary_done.is_empty() {
                        *summary = summary_done;
                    }
                }
            }
            "message" => {
                self.blocks
                    .entry(idx)
                    .or_insert_with(|| Block::Text(String::new()));
            }
            _ => {
                self.blocks.entry(idx).or_insert(Block::Ignored);
            }
        }
        Ok(())
    }
}

impl dialect::Accumulator for Accumulator {
    /// Takes one event; progress for the display goes to `out`. Returns true at the final
    /// event (`response.completed` or `response.incomplete`).
    fn feed(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Failure> {
        let data = ev.data.trim();
        if !data.starts_with('{') {
            return Ok(self.done);
        }
        let v = dialect::event_json(data, &format!("`{}` event", ev.event))?;
        let ty = v.get("type").and_then(Value::as_str).unwrap_or(&ev.event);
        let index = v.get("output_index").and_then(Value::as_u64);
        match ty {
            "response.output_item.added" | "response.output_item.done" => {
                let done = ty.ends_with(".done");
                let item = v.get("item").unwrap_or(&Value::Null);
                let idx = index.unwrap_or(self.blocks.len() as u64);
                self.item(idx, item, done, out)?;
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let d = str_of(&v, "delta");
                let idx = index.unwrap_or(self.blocks.len() as u64);
                self.take(d.len(), !self.blocks.contains_key(&idx))?;
                if !d.is_empty() {
                    out.push(StreamEvent::TextDelta(d.to_string()));
                }
                let b = self
                    .blocks
                    .entry(idx)
                    .or_insert_with(|| Block::Text(String::new()));
                if let Block::Text(t) = b {
                    t.push_str(d);
                }
            }
            "response.function_call_arguments.delta" => {
                let d = str_of(&v, "delta");
                self.take(d.len(), false)?;
                if let Some(Block::Call { args, .. }) = index.and_then(|i| self.blocks.get_mut(&i))
                {
                    args.push_str(d);
                }
            }
            "response.reasoning_summary_part.added" => {
                if let Some(Block::Reasoning { summary, .. }) =
                    index.and_then(|i| self.blocks.get_mut(&i))
                {
                    if !summary.is_empty() {
                        out.push(StreamEvent::ReasoningDelta("\n\n".into()));
                    }
                    summary.push(String::new());
                }
            }
            "response.reasoning_summary_text.delta" => {
                let d = str_of(&v, "delta");
                self.take(d.len(), false)?;
                if let Some(Block::Reasoning { summary, .. }) =
                    index.and_then(|i| self.blocks.get_mut(&i))
                {
                    if summary.is_empty() {
                        summary.push(String::new());
                    }
                    if let Some(last) = summary.last_mut() {
                        last.push_str(d);
                    }
                    if !d.is_empty() {
                        out.push(StreamEvent::ReasoningDelta(d.to_string()));
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                if let Some(u) = r.get("usage").filter(|u| !u.is_null()) {
                    crate::llm::types::record_usage(
                        parse_usage(u),
                        &mut self.usage,
                        &mut self.usage_rejected,
                    );
                }
                self.incomplete = r
                    .get("incomplete_details")
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.done = true;
            }
            "response.failed" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                let e = r.get("error").unwrap_or(&Value::Null);
                return Err(reported(e, "the response failed"));
            }
            "error" => {
                let e = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                return Err(reported(e, "server error"));
            }
            _ => {}
        }
        Ok(self.done)
    }

    fn missing(&self) -> Option<&'static str> {
        (!self.done).then_some("response.completed")
    }

    /// The response, whatever state the stream is in.
    fn into_response(self) -> Response {
        let mut parts = Vec::new();
        let mut calls = false;
        for (_, b) in self.blocks {
            match b {
                Block::Text(text) if !text.is_empty() => parts.push(Part::Text { text }),
                Block::Reasoning {
                    item_id,
                    encrypted,
                    summary,
                } => {
                    let mut extra = Map::new();
                    extra.insert(
                        DATA_KEY.into(),
                        json!({"type": DATA_TYPE, "data": {"item_id": item_id,
                            "encrypted_content": encrypted, "summary": summary}}),
                    );
                    parts.push(Part::Reasoning {
                        thinking: summary.join("\n\n"),
                        signature: String::new(),
                        extra,
                    });
                }
                Block::Call {
                    call_id,
                    name,
                    args,
                    finished,
                } => {
                    calls = true;
                    let input = if args.trim().is_empty() {
                        "{}".to_string()
                    } else {
                        args
                    };
                    parts.push(Part::ToolCall {
                        id: call_id,
                        name,
                        input,
                        provider_executed: false,
                        finished,
                    });
                }
                _ => {}
            }
        }
        let finish = match self.incomplete.as_deref() {
            Some("max_output_tokens" | "max_tokens") => FinishReason::MaxTokens,
            Some("content_filter") => FinishReason::ContentFilter,
            _ if calls => FinishReason::ToolUse,
            None => FinishReason::EndTurn,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        Response::settled(parts, self.usage, self.usage_rejected, finish)
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
}

/// A non-streaming reply (`{"object":"response",...}`), for a server that ignored `stream`.
pub(crate) fn response_from_json(v: &Value) -> Option<Response> {
    if v.get("object").and_then(Value::as_str) != Some("response") {
        return None;
    }
    let mut acc = Accumulator::default();
    let mut out = Vec::new();
    for (i, item) in v
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        acc.item(i as u64, item, true, &mut out).ok()?;
        if str_of(item, "type") == "message" {
            let text: String = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| str_of(c, "text"))
                .collect();
            acc.blocks.insert(i as u64, Block::Text(text));
        }
    }
    let ev = SseEvent {
        event: "response.completed".into(),
        data: json!({"type": "response.completed", "response": v}).to_string(),
        id: None,
    };
    acc.feed(&ev, &mut out).ok()?;
    acc.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolSpec};

    fn run(stream: &str) -> (Result<Response, Failure>, Vec<StreamEvent>) {
        crate::llm::dialect::testing::run_with(Accumulator::default(), stream)
    }

    fn ev(v: Value) -> String {
        format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap())
    }

    fn completed(usage: Value) -> String {
        ev(
            json!({"type": "response.completed", "response": {"id": "resp_1", "object": "response",
            "status": "completed", "usage": usage}}),
        )
    }

    #[test]
    fn reasoning_text_and_calls() {
        let s = ev(json!({"type": "response.created", "response": {"id": "resp_1"}}))
            + &ev(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
            )
            + &ev(
                json!({"type": "response.reasoning_summary_part.added", "output_index": 0,
                "item_id": "rs_1", "summary_index": 0}),
            )
            + &ev(
                json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                "item_id": "rs_1", "summary_index": 0, "delta": "Plan."}),
            )
            + &ev(
                json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA",
                    "summary": [{"type": "summary_text", "text": "Plan."}]}}),
            )
            + &ev(
                json!({"type": "response.output_item.added", "output_index": 1,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
            )
            + &ev(
                json!({"type": "response.output_text.delta", "output_index": 1,
                "item_id": "msg_1", "content_index": 0, "delta": "Reading."}),
            )
            + &ev(
                json!({"type": "response.output_item.added", "output_index": 2,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9",
                    "name": "view", "arguments": ""}}),
            )
            + &ev(
                json!({"type": "response.function_call_arguments.delta", "output_index": 2,
                "item_id": "fc_1", "delta": "{\"file_path\":"}),
            )
            + &ev(
                json!({"type": "response.function_call_arguments.delta", "output_index": 2,
                "item_id": "fc_1", "delta": "\"a.rs\"}"}),
            )
            + &ev(
                json!({"type": "response.output_item.done", "output_index": 2,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9",
                    "name": "view", "arguments": "{\"file_path\":\"a.rs\"}"}}),
            )
            + &completed(
                json!({"input_tokens": 2100, "input_tokens_details": {"cached_tokens": 2048},
                "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 250}}),
            );
        let (r, out) = run(&s);
        let r = r.unwrap();
        assert!(matches!(&out[0], StreamEvent::ReasoningDelta(t) if t == "Plan."));
        assert_eq!(r.finish, FinishReason::ToolUse);
        let Part::Reasoning {
            thinking, extra, ..
        } = &r.parts[0]
        else {
            panic!("{:?}", r.parts)
        };
        assert_eq!(thinking, "Plan.");
        assert_eq!(extra[DATA_KEY]["type"], DATA_TYPE);
        assert_eq!(extra[DATA_KEY]["data"]["encrypted_content"], "gAAAA");
        assert_eq!(
            r.parts[1],
            Part::Text {
                text: "Reading.".into()
            }
        );
        assert!(
            matches!(&r.parts[2], Part::ToolCall { id, input, finished: true, .. }
            if id == "call_9" && input == r#"{"file_path":"a.rs"}"#)
        );
        // Reasoning is output; cached input is read from the cache.
        assert_eq!(
            r.usage,
            Some(Usage {
                input: 52,
                output: 300,
                cache_read: 2048,
                cache_write: 0
            })
        );

        // The next step carries the encrypted reasoning item back, before what it led to.
        let req = ChatRequest {
            model: "gpt-5".into(),
            system: "sys".into(),
            messages: vec![
                Message::user("go"),
                Message {
                    role: Role::Assistant,
                    parts: r.parts.clone(),
                },
            ],
            tools: vec![ToolSpec {
                name: "view".into(),
                description: "Read".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: Some(500),
            temperature: Some(0.5),
            ..Default::default()
        };
        let b = build_request(&req);
        assert_eq!(b["store"], false);
        assert_eq!(b["max_output_tokens"], 500);
        // A reasoning model takes no temperature.
        assert!(b.get("temperature").is_none());
        assert_eq!(b["reasoning"]["summary"], "auto");
        assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(b["tools"][0]["name"], "view");
        let input = b["input"].as_array().unwrap();
        assert_eq!(input[0], json!({"role": "developer", "content": "sys"}));
        assert_eq!(
            input[1]["content"][0],
            json!({"type": "input_text", "text": "go"})
        );
        assert_eq!(
            input[2],
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA",
                "summary": [{"type": "summary_text", "text": "Plan."}]})
        );
        assert_eq!(
            input[3],
            json!({"role": "assistant", "content": "Reading."})
        );
        assert_eq!(input[4]["type"], "function_call");
        assert_eq!(input[4]["call_id"], "call_9");
        assert_eq!(input[5]["type"], "function_call_output");
        assert_eq!(input[5]["call_id"], "call_9");
    }

    #[test]
    fn options_and_non_reasoning_models() {
        let mut req = ChatRequest {
            model: "gpt-4.1".into(),
            system: "sys".into(),
            messages: vec![Message::user("hi")],
            temperature: Some(0.2),
            ..Default::default()
        };
        req.options.top_p = Some(0.8);
        req.options.provider_options = serde_json::from_value(json!({
            "reasoning_effort": "high", "parallel_tool_calls": false, "text_verbosity": "low"}))
        .unwrap();
        let b = build_request(&req);
        assert_eq!(b["input"][0]["role"], "system");
        assert_eq!(
            (b["temperature"].clone(), b["top_p"].clone()),
            (json!(0.2), json!(0.8))
        );
        assert!(b.get("reasoning").is_none() && b.get("include").is_none());
        assert_eq!(b["parallel_tool_calls"], false);
        assert_eq!(b["text"], json!({"verbosity": "low"}));
        req.model = "o3".into();
        let b = build_request(&req);
        assert_eq!(b["reasoning"], json!({"effort": "high", "summary": "auto"}));
        assert!(supports("gpt-5.1-codex") && supports("o4-mini") && !supports("llama3"));
    }

    #[test]
    fn endings() {
        let s = ev(json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}));
        assert_eq!(
            run(&s).0.unwrap_err().error,
            LlmError::truncated("response.completed")
        );
        let s = ev(json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}))
            + &ev(
                json!({"type": "response.incomplete", "response": {"incomplete_details":
                {"reason": "max_output_tokens"}, "usage": {"input_tokens": 5, "output_tokens": 9}}}),
            );
        assert_eq!(run(&s).0.unwrap().finish, FinishReason::MaxTokens);
        let s = ev(json!({"type": "response.failed", "response": {"error":
            {"code": "server_error", "message": "boom"}}}));
        let f = run(&s).0.unwrap_err();
        assert!(f.retryable && f.error.to_string().contains("boom"));
        let s =
            ev(json!({"type": "error", "code": "context_length_exceeded", "message": "too long"}));
        assert!(!run(&s).0.unwrap_err().retryable);
    }

    #[test]
    fn attached_images_and_image_urls_are_input_images() {
        let req = ChatRequest {
            model: "gpt-x".into(),
            messages: vec![crate::llm::types::fixtures::attached_image()],
            ..Default::default()
        };
        let b = build_request(&req);
        let content = &b["input"][0]["content"];
        assert_eq!(content[1]["image_url"], "data:image/png;base64,iVBORw0K");
        assert_eq!(
            content[2],
            json!({"type": "input_image", "image_url": "https://e.x/a.png"})
        );
    }
}
